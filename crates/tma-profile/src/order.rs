//! Time-ordered delivery of live ring-buffer records (perf's "ordered events").
//!
//! A live session has one ring buffer per CPU (launched command) or per thread (`-p`), and
//! [`tma_perf::sampling::Session::run`] drains them one after the other. Each ring is in
//! time order, but across rings it is not: a SAMPLE of a child process read from CPU 1's
//! ring can come before the FORK/COMM/MMAP2 records that CPU 0's ring holds for that child,
//! although they happened earlier. Handed to the [`crate::aggregate::Aggregator`] in that
//! order, the sample finds no mapping and is counted as `[unknown]`; and a sample taken
//! before an exec but read after it would be resolved against the new image. So every
//! record goes through a [`Reorder`] buffer and reaches the aggregator (and the `--record`
//! file) sorted by its timestamp (PERF_SAMPLE_TIME on samples, the `sample_id_all`
//! trailer on the others; both are requested by `tma_perf::sampling`).
//!
//! Why a bounded buffer flushed in rounds rather than keeping everything and sorting at
//! the end: `tma locate -p PID` can run for as long as the user likes, and the records of
//! a long session (tens of MB per minute with call chains at high rates) need not all be
//! held. The flush rule is perf's: the session marks the end of each pass over all rings
//! (a PERF_RECORD_FINISHED_ROUND record, [`tma_perf::sampling::PERF_RECORD_FINISHED_ROUND`]);
//! a record still unread at the end of pass N was written after its ring was drained in
//! pass N, hence after all of pass N-1, so its time is at least the largest time read up to
//! the end of pass N-1. At the end of pass N everything up to that time can be delivered.
//! The buffer therefore holds about two passes' worth of records, and at least
//! [`DEFAULT_SLACK_NS`] of them: the rule assumes a record is written within a pass of
//! its timestamp, which a VM whose virtual CPU is descheduled mid-write can break, so
//! records are also held until they are that much older than the newest one. A record
//! that still arrives after later ones were delivered is counted ([`Reorder::late`]).
//!
//! perf.data imports are ordered by `linux-perf-data` itself, with the same round rule
//! on `perf record` files (they carry FINISHED_ROUND records) and a full sort for files
//! without them; see [`crate::import`].

use linux_perf_event_reader::{RawData, RawEventRecord, RecordParseInfo, RecordType};
use tma_perf::sampling::RawRecord;

/// Records are held at least this long (perf clock, ns) behind the newest record seen.
pub const DEFAULT_SLACK_NS: u64 = 100_000_000;

#[derive(Debug)]
struct Pending {
    time: u64,
    ty: u32,
    misc: u16,
    body: Vec<u8>,
}

/// Buffers records and releases them in time order (stable: records with equal times keep
/// their arrival order).
#[derive(Debug)]
pub struct Reorder {
    info: RecordParseInfo,
    pending: Vec<Pending>,
    /// Largest time pushed before the previous round ended: everything up to it is final.
    prev_max: u64,
    /// Largest time pushed so far.
    cur_max: u64,
    /// See [`DEFAULT_SLACK_NS`].
    slack: u64,
    /// Time of the last record pushed (used for a record whose time cannot be read).
    last_time: u64,
    /// Time of the last record delivered.
    delivered: u64,
    /// Records that arrived after later records had already been delivered.
    late: u64,
    /// Most records held at once.
    peak: usize,
    spare: Vec<Vec<u8>>,
}

impl Reorder {
    /// `info` is the parse info of the session's attr (to find each record's time).
    pub fn new(info: RecordParseInfo) -> Self {
        Self::with_slack(info, DEFAULT_SLACK_NS)
    }

    /// Like [`Reorder::new`], holding records at least `slack_ns` behind the newest one.
    pub fn with_slack(info: RecordParseInfo, slack_ns: u64) -> Self {
        Reorder {
            info,
            slack: slack_ns,
            pending: Vec::new(),
            prev_max: 0,
            cur_max: 0,
            last_time: 0,
            delivered: 0,
            late: 0,
            peak: 0,
            spare: Vec::new(),
        }
    }

    /// The record's timestamp; a record without a readable one (malformed, or a type
    /// without the trailer) takes the time of the record before it, which came from the
    /// same ring.
    fn time_of(&self, ty: u32, misc: u16, data: RawData<'_>) -> Option<u64> {
        RawEventRecord::new(RecordType(ty), misc, data, self.info).timestamp()
    }

    /// Take a copy of one record.
    pub fn push(&mut self, r: &RawRecord<'_>) {
        let data = match r.data {
            [] => RawData::Single(&[]),
            [a] => RawData::Single(a),
            [a, b] => RawData::Split(a, b),
            // Not produced by the ring reader; keep the record, its time unknown.
            _ => RawData::Single(&[]),
        };
        let time = self.time_of(r.ty, r.misc, data).unwrap_or(self.last_time);
        let mut body = self.spare.pop().unwrap_or_default();
        body.clear();
        for part in r.data {
            body.extend_from_slice(part);
        }
        self.insert(time, r.ty, r.misc, body);
    }

    fn insert(&mut self, time: u64, ty: u32, misc: u16, body: Vec<u8>) {
        self.last_time = time;
        self.cur_max = self.cur_max.max(time);
        if time < self.delivered {
            self.late += 1;
        }
        self.pending.push(Pending {
            time,
            ty,
            misc,
            body,
        });
        self.peak = self.peak.max(self.pending.len());
    }

    /// End of a pass over all rings: deliver what no later record can precede.
    pub fn finish_round(&mut self, out: &mut dyn FnMut(&RawRecord<'_>)) {
        let upto = self.prev_max.min(self.cur_max.saturating_sub(self.slack));
        self.flush(Some(upto), out);
        self.prev_max = self.cur_max;
    }

    /// End of the session: deliver everything.
    pub fn finish(&mut self, out: &mut dyn FnMut(&RawRecord<'_>)) {
        self.flush(None, out);
        self.prev_max = self.cur_max;
    }

    fn flush(&mut self, upto: Option<u64>, out: &mut dyn FnMut(&RawRecord<'_>)) {
        // Stable: equal times keep arrival order (e.g. COMM before MMAP2 of one exec).
        // The kept tail is already sorted, so this is mostly a merge.
        self.pending.sort_by_key(|p| p.time);
        let n = match upto {
            Some(t) => self.pending.partition_point(|p| p.time <= t),
            None => self.pending.len(),
        };
        for p in self.pending.drain(..n) {
            out(&RawRecord {
                ty: p.ty,
                misc: p.misc,
                data: &[&p.body[..]],
            });
            self.delivered = self.delivered.max(p.time);
            if self.spare.len() < 1024 {
                self.spare.push(p.body);
            }
        }
    }

    /// Records held now.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Most records held at once during the session.
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Records that arrived after a later record had already been delivered (the round
    /// rule was broken, e.g. by a record written very late); they are still delivered, at
    /// the next flush.
    pub fn late(&self) -> u64 {
        self.late
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RecordParseInfo {
        crate::test_records::parse_info()
    }

    fn lost(time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&1u64.to_le_bytes()); // id
        b.extend_from_slice(&time.to_le_bytes()); // count: the time, to identify it
        crate::test_records::trailer_at(&mut b, 1, time);
        b
    }

    fn sink(out: &mut Vec<(u32, Vec<u8>)>) -> impl FnMut(&RawRecord<'_>) + '_ {
        |rec: &RawRecord<'_>| out.push((rec.ty, rec.data.concat()))
    }

    fn times(out: &[(u32, Vec<u8>)]) -> Vec<u64> {
        out.iter()
            .map(|(_, b)| u64::from_le_bytes(b[8..16].try_into().unwrap()))
            .collect()
    }

    #[test]
    fn rounds_release_only_what_later_rounds_cannot_precede() {
        let mut r = Reorder::with_slack(info(), 0);
        let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
        // Round 1: ring 1 then ring 0.
        for t in [20, 30, 10, 25] {
            r.push(&RawRecord {
                ty: 2,
                misc: 0,
                data: &[&lost(t)],
            });
        }
        r.finish_round(&mut sink(&mut out));
        // Nothing is final after the first round (prev_max was 0).
        assert_eq!(r.pending(), 4);
        // Round 2 may still hold times >= 0 .. but not below round 0's max; here 27.
        for t in [40, 27, 35] {
            r.push(&RawRecord {
                ty: 2,
                misc: 0,
                data: &[&lost(t)],
            });
        }
        r.finish_round(&mut sink(&mut out));
        // Up to round 1's max (30) is final now.
        assert_eq!(times(&out), vec![10, 20, 25, 27, 30]);
        r.push(&RawRecord {
            ty: 2,
            misc: 0,
            data: &[&lost(31)],
        });
        r.finish_round(&mut sink(&mut out));
        r.finish(&mut sink(&mut out));
        assert_eq!(times(&out), vec![10, 20, 25, 27, 30, 31, 35, 40]);
        assert_eq!(r.late(), 0);
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn records_are_held_for_the_slack_and_late_ones_still_delivered() {
        let mut r = Reorder::with_slack(info(), 100);
        let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
        let push = |r: &mut Reorder, t: u64| {
            r.push(&RawRecord {
                ty: 2,
                misc: 0,
                data: &[&lost(t)],
            })
        };
        for t in [10, 50] {
            push(&mut r, t);
        }
        r.finish_round(&mut sink(&mut out));
        push(&mut r, 150);
        r.finish_round(&mut sink(&mut out));
        // prev_max is 50 but the newest is 150: only times <= 50 are out.
        assert_eq!(times(&out), vec![10, 50]);
        push(&mut r, 300);
        r.finish_round(&mut sink(&mut out));
        assert_eq!(times(&out), vec![10, 50, 150]);
        // Breaks the rule: older than what was delivered.
        push(&mut r, 20);
        r.finish(&mut sink(&mut out));
        assert_eq!(times(&out), vec![10, 50, 150, 20, 300]);
        assert_eq!(r.late(), 1);
    }

    #[test]
    fn equal_times_keep_arrival_order_and_untimed_records_follow_their_neighbour() {
        let mut r = Reorder::new(info());
        let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
        let a = lost(50);
        let mut b = lost(50);
        b[0] = 2; // different id, same time
        r.push(&RawRecord {
            ty: 2,
            misc: 0,
            data: &[&a],
        });
        r.push(&RawRecord {
            ty: 2,
            misc: 0,
            data: &[&b],
        });
        // Too short to hold a trailer: no time, takes 50.
        r.push(&RawRecord {
            ty: 2,
            misc: 0,
            data: &[&[9u8; 4]],
        });
        r.push(&RawRecord {
            ty: 2,
            misc: 0,
            data: &[&lost(5)],
        });
        r.finish(&mut sink(&mut out));
        assert_eq!(out[0].1, lost(5));
        assert_eq!(out[1].1, a);
        assert_eq!(out[2].1, b);
        assert_eq!(out[3].1, vec![9u8; 4]);
    }
}
