//! Live sampling: ring-buffer records from `tma_perf::sampling` go through the same
//! `linux-perf-event-reader` parser, with the parse info derived from the very
//! `perf_event_attr` given to the kernel, into the same [`Aggregator`] as perf.data imports.

use linux_perf_event_reader::{
    Endianness, PerfEventAttr, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use tma_host::Host;
use tma_perf::sampling::{
    RawRecord, SamplingConfig, SamplingError, Session, SessionSummary, Target,
    PERF_RECORD_FINISHED_ROUND,
};

use crate::aggregate::{parse_proc_maps, Aggregator};
use crate::order::Reorder;

/// Errors from a live session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error("internal: cannot parse our own perf_event_attr: {0}")]
    Attr(std::io::Error),
}

/// What a live session returns besides the aggregated records.
#[derive(Debug, Clone)]
pub struct LiveOutcome {
    pub summary: SessionSummary,
    /// The `perf_event_attr` given to the kernel, in perf.data layout (for `--record`).
    pub attr: Vec<u8>,
    /// Records that arrived after later records had been aggregated (see
    /// [`Reorder::late`]); their samples may be attributed to a stale or no mapping.
    pub late_records: u64,
}

/// A live session feeding an [`Aggregator`]; optionally every record is also passed to
/// `tap` (used by `--record` to write a perf.data file).
///
/// Records reach the aggregator and the tap in time order, through a [`Reorder`] buffer
/// (see [`crate::order`] for why and how); the tap also sees a
/// PERF_RECORD_FINISHED_ROUND record (type 68, empty body) after each flush, as perf
/// writes them, so that readers of the file can stream it.
pub fn sample(
    cfg: SamplingConfig,
    target: &Target,
    agg: &mut Aggregator,
    mut tap: Option<&mut dyn FnMut(&RawRecord<'_>)>,
) -> Result<LiveOutcome, LiveError> {
    let host = cfg.host.clone();
    let session = Session::open(cfg, target)?;
    let attr_bytes = session.attr_bytes().to_vec();
    let (attr, _) = PerfEventAttr::parse::<_, byteorder::LittleEndian>(&attr_bytes[..])
        .map_err(LiveError::Attr)?;
    let info = RecordParseInfo::new(&attr, Endianness::LittleEndian);
    let mut order = Reorder::new(info);
    // Time 0 in their trailers: they sort before everything the kernel reports.
    let existing = match target {
        Target::Pid(pid) => synthesize_existing(&host, *pid),
        Target::System { .. } => synthesize_system(&host),
        Target::Launch(_) => Vec::new(),
    };
    for (ty, misc, body) in existing {
        order.push(&RawRecord {
            ty,
            misc,
            data: &[&body[..]],
        });
    }
    let summary =
        session.run(&mut |r: RawRecord<'_>| feed(&mut order, agg, tap.as_deref_mut(), info, &r))?;
    finish(&mut order, agg, tap, info);
    Ok(LiveOutcome {
        summary,
        attr: attr_bytes,
        late_records: order.late(),
    })
}

/// One record from [`Session::run`]: buffered, or (a round marker) a flush.
pub fn feed(
    order: &mut Reorder,
    agg: &mut Aggregator,
    mut tap: Option<&mut (dyn FnMut(&RawRecord<'_>) + '_)>,
    info: RecordParseInfo,
    r: &RawRecord<'_>,
) {
    if r.ty != PERF_RECORD_FINISHED_ROUND {
        order.push(r);
        return;
    }
    let before = order.pending();
    order.finish_round(&mut |rec: &RawRecord<'_>| deliver(agg, tap.as_deref_mut(), info, rec));
    if order.pending() != before {
        if let Some(t) = tap {
            t(r);
        }
    }
}

/// End of the session: deliver what is still buffered.
pub fn finish(
    order: &mut Reorder,
    agg: &mut Aggregator,
    mut tap: Option<&mut (dyn FnMut(&RawRecord<'_>) + '_)>,
    info: RecordParseInfo,
) {
    order.finish(&mut |rec: &RawRecord<'_>| deliver(agg, tap.as_deref_mut(), info, rec));
}

fn deliver(
    agg: &mut Aggregator,
    tap: Option<&mut (dyn FnMut(&RawRecord<'_>) + '_)>,
    info: RecordParseInfo,
    r: &RawRecord<'_>,
) {
    if let Some(t) = tap {
        t(r);
    }
    handle_raw(agg, r, info);
}

/// Hand one ring-buffer record to the aggregator.
pub fn handle_raw(agg: &mut Aggregator, r: &RawRecord<'_>, info: RecordParseInfo) {
    let data = match r.data {
        [a] => RawData::Single(a),
        [a, b] => RawData::Split(a, b),
        _ => return,
    };
    let rec = RawEventRecord::new(RecordType(r.ty), r.misc, data, info);
    agg.handle(&rec);
}

/// COMM and MMAP records (type, misc, body) for a process that existed before sampling
/// started: the kernel only reports mmaps made after the event was opened. They go through
/// the same parser as kernel records (and into `--record` files).
pub fn synthesize_existing(host: &Host, pid: i32) -> Vec<(u32, u16, Vec<u8>)> {
    let mut out = Vec::new();
    if let Ok(comm) = host.proc_text(&format!("{pid}/comm")) {
        out.push(crate::record::synthetic_comm(pid, &comm));
    }
    if let Ok(maps) = host.proc_bytes(&format!("{pid}/maps")) {
        for (start, end, off, path) in parse_proc_maps(&maps) {
            out.push(crate::record::synthetic_mmap(pid, start, end, off, &path));
        }
    }
    out
}

/// COMM records for every thread and MMAP records for every process under the host's
/// `/proc`, as `perf record -a` synthesizes them: system-wide samples hit processes that
/// started long before sampling.
pub fn synthesize_system(host: &Host) -> Vec<(u32, u16, Vec<u8>)> {
    let mut out = Vec::new();
    for pid in host.pids().unwrap_or_default() {
        let mut named_self = false;
        for tid in host.threads(pid).unwrap_or_default() {
            if let Ok(comm) = host.proc_text(&format!("{pid}/task/{tid}/comm")) {
                out.push(crate::record::synthetic_thread_comm(pid, tid, &comm));
                named_self |= tid == pid;
            }
        }
        if !named_self {
            if let Ok(comm) = host.proc_text(&format!("{pid}/comm")) {
                out.push(crate::record::synthetic_comm(pid, &comm));
            }
        }
        if let Ok(maps) = host.proc_bytes(&format!("{pid}/maps")) {
            for (start, end, off, path) in parse_proc_maps(&maps) {
                out.push(crate::record::synthetic_mmap(pid, start, end, off, &path));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Frame;
    use crate::test_records::{attr_image, parse_info, trailer_at};

    fn attr() -> RecordParseInfo {
        parse_info()
    }

    fn trailer(b: &mut Vec<u8>, pid: i32) {
        trailer_at(b, pid, 7);
    }

    /// PERF_RECORD_SAMPLE (IP|TID|TIME|CPU|PERIOD), user mode.
    fn sample_rec(pid: i32, ip: u64, time: u64) -> (u32, u16, Vec<u8>) {
        let mut b = Vec::new();
        b.extend_from_slice(&ip.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // cpu
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&250_000u64.to_le_bytes()); // period
        (9, 2, b)
    }

    /// PERF_RECORD_MMAP2 of an executable file mapping.
    fn mmap2_rec(pid: i32, start: u64, len: u64, path: &str, time: u64) -> (u32, u16, Vec<u8>) {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&start.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes()); // pgoff
        b.extend_from_slice(&8u32.to_le_bytes()); // maj
        b.extend_from_slice(&1u32.to_le_bytes()); // min
        b.extend_from_slice(&1234u64.to_le_bytes()); // ino
        b.extend_from_slice(&0u64.to_le_bytes()); // ino_generation
        b.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ | PROT_EXEC
        b.extend_from_slice(&2u32.to_le_bytes()); // MAP_PRIVATE
        b.extend_from_slice(path.as_bytes());
        b.push(0);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        trailer_at(&mut b, pid, time);
        (10, 2, b)
    }

    /// PERF_RECORD_COMM; `exec` sets PERF_RECORD_MISC_COMM_EXEC.
    fn comm_rec(pid: i32, name: &str, exec: bool, time: u64) -> (u32, u16, Vec<u8>) {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        trailer_at(&mut b, pid, time);
        (3, if exec { 0x2000 | 2 } else { 2 }, b)
    }

    const ROUND: (u32, u16, Vec<u8>) = (PERF_RECORD_FINISHED_ROUND, 0, Vec::new());

    /// Feed records as `Session::run` would, with the tap recording what it sees.
    fn run_live(records: &[(u32, u16, Vec<u8>)]) -> (Aggregator, Vec<(u32, Vec<u8>)>) {
        let info = parse_info();
        let mut agg = Aggregator::new();
        // No slack: the rounds alone decide, as they do with real (nanosecond) times.
        let mut order = Reorder::with_slack(info, 0);
        let mut seen: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut tap = |r: &RawRecord<'_>| seen.push((r.ty, r.data.concat()));
        for (ty, misc, body) in records {
            let r = RawRecord {
                ty: *ty,
                misc: *misc,
                data: &[&body[..]],
            };
            feed(&mut order, &mut agg, Some(&mut tap), info, &r);
        }
        finish(&mut order, &mut agg, Some(&mut tap), info);
        (agg, seen)
    }

    /// (module path or "?", samples) per leaf, sorted.
    fn leaves(agg: &Aggregator) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = agg
            .stacks()
            .map(|(_, st, n)| {
                let name = match st[0] {
                    Frame::File { module, offset } => {
                        format!("{}+{offset:#x}", agg.modules()[module as usize].path)
                    }
                    Frame::Kernel(a) => format!("kernel {a:#x}"),
                    Frame::Unknown(a) => format!("? {a:#x}"),
                };
                (name, n)
            })
            .collect();
        v.sort();
        v
    }

    /// The flake seen in `children_of_the_command_are_followed`: CPU 1's ring (read first)
    /// holds samples of process P; CPU 0's ring holds P's exec (COMM at t=5, MMAP2 at
    /// t=10). One sample (t=20) is after the exec and must resolve to the new image; the
    /// other (t=3) is before it and must resolve to the image mapped then (same address):
    /// so what is tested is time order, not "resolve everything at the end".
    #[test]
    fn records_of_different_rings_are_aggregated_in_time_order() {
        let p = 4242;
        let old = mmap2_rec(p, 0x5000, 0x2000, "/bin/sh", 1);
        let records = vec![
            // Round 1: the old image (ring 0), nothing else yet.
            comm_rec(p, "sh", false, 0),
            old,
            ROUND,
            // Round 2: ring 1 first (samples), then ring 0 (the exec).
            sample_rec(p, 0x5123, 20),
            sample_rec(p, 0x5124, 3),
            comm_rec(p, "child", true, 5),
            mmap2_rec(p, 0x5000, 0x1000, "/work/child", 10),
            ROUND,
            // Round 3: a later sample in the new image.
            sample_rec(p, 0x5125, 30),
            ROUND,
        ];
        let (agg, seen) = run_live(&records);
        assert_eq!(agg.counts().unknown_samples, 0);
        assert_eq!(
            leaves(&agg),
            vec![
                ("/bin/sh+0x124".to_string(), 1),
                ("/work/child+0x123".to_string(), 1),
                ("/work/child+0x125".to_string(), 1),
            ]
        );
        let all = agg.comms();
        let mut comms: Vec<(&String, &u64)> = all.iter().collect();
        comms.sort();
        assert_eq!(
            comms,
            vec![(&"child".to_string(), &2), (&"sh".to_string(), &1)]
        );
        // The tap (--record) sees the same order: times never go backwards.
        let info = parse_info();
        let times: Vec<u64> = seen
            .iter()
            .filter(|(ty, _)| *ty != PERF_RECORD_FINISHED_ROUND)
            .map(|(ty, b)| {
                RawEventRecord::new(RecordType(*ty), 0, RawData::Single(b), info)
                    .timestamp()
                    .unwrap()
            })
            .collect();
        assert_eq!(times, vec![0, 1, 3, 5, 10, 20, 30]);
        assert!(seen.iter().any(|(ty, _)| *ty == PERF_RECORD_FINISHED_ROUND));

        // Fed in arrival order without the reorder buffer, the same records give the
        // wrong answer (the test would catch a regression to that).
        let mut direct = Aggregator::new();
        for (ty, misc, body) in &records {
            if *ty != PERF_RECORD_FINISHED_ROUND {
                handle_raw(
                    &mut direct,
                    &RawRecord {
                        ty: *ty,
                        misc: *misc,
                        data: &[&body[..]],
                    },
                    info,
                );
            }
        }
        assert_ne!(leaves(&direct), leaves(&agg));
    }

    /// A `--record` file written from the ordered tap, and a file whose records are out of
    /// order (no FINISHED_ROUND records, as older `--record` files), both import to the
    /// live result: linux-perf-data sorts by time.
    #[test]
    fn imports_are_time_ordered_too() {
        let p = 77;
        let records = vec![
            mmap2_rec(p, 0x5000, 0x2000, "/bin/sh", 1),
            sample_rec(p, 0x5123, 20),
            sample_rec(p, 0x5124, 3),
            comm_rec(p, "child", true, 5),
            mmap2_rec(p, 0x5000, 0x1000, "/work/child", 10),
        ];
        let (live, seen) = run_live(&records);
        let mut ordered = crate::record::PerfDataWriter::new(attr_image());
        for (ty, b) in &seen {
            ordered.push(*ty, 0x0002, &[&b[..]]);
        }
        let mut raw = crate::record::PerfDataWriter::new(attr_image());
        for (ty, misc, b) in &records {
            raw.push(*ty, *misc, &[&b[..]]);
        }
        for image in [ordered.finish(), raw.finish()] {
            let mut agg = Aggregator::new();
            crate::import::import_bytes(&image, &mut agg).unwrap();
            assert_eq!(leaves(&agg), leaves(&live));
        }
        assert_eq!(
            leaves(&live),
            vec![
                ("/bin/sh+0x124".to_string(), 1),
                ("/work/child+0x123".to_string(), 1),
            ]
        );
    }

    #[test]
    fn ring_records_split_at_any_byte_parse_like_file_records() {
        let info = attr();
        let (ty, misc, mmap) =
            crate::record::synthetic_mmap(42, 0x40_0000, 0x40_2000, 0x1000, "/bin/x");
        let mut sample = Vec::new();
        sample.extend_from_slice(&0x40_0123u64.to_le_bytes()); // ip
        sample.extend_from_slice(&42i32.to_le_bytes());
        sample.extend_from_slice(&42i32.to_le_bytes());
        sample.extend_from_slice(&9u64.to_le_bytes()); // time
        sample.extend_from_slice(&1u32.to_le_bytes()); // cpu
        sample.extend_from_slice(&0u32.to_le_bytes());
        sample.extend_from_slice(&250_000u64.to_le_bytes()); // period
        let mut lost = Vec::new();
        lost.extend_from_slice(&1u64.to_le_bytes()); // id
        lost.extend_from_slice(&5u64.to_le_bytes()); // count
        trailer(&mut lost, 42);
        // Every split point, including none (one slice).
        for cut in 0..=sample.len() {
            let mut agg = Aggregator::new();
            let (ma, mb) = mmap.split_at(cut.min(mmap.len()));
            handle_raw(
                &mut agg,
                &RawRecord {
                    ty,
                    misc,
                    data: &[ma, mb],
                },
                info,
            );
            let (a, b) = sample.split_at(cut);
            let both = [a, b];
            let data: &[&[u8]] = if cut == 0 { &both[1..] } else { &both[..] };
            handle_raw(
                &mut agg,
                &RawRecord {
                    ty: 9,
                    misc: 2,
                    data,
                },
                info,
            );
            handle_raw(
                &mut agg,
                &RawRecord {
                    ty: 2,
                    misc: 0,
                    data: &[&lost],
                },
                info,
            );
            let c = agg.counts();
            assert_eq!(
                (c.samples, c.period, c.lost, c.bad_records),
                (1, 250_000, 5, 0),
                "cut {cut}"
            );
            let stack: Vec<&Vec<Frame>> = agg.stacks().map(|(_, s, _)| s).collect();
            assert_eq!(
                stack,
                vec![&vec![Frame::File {
                    module: 0,
                    offset: 0x1123
                }]],
                "cut {cut}"
            );
            assert_eq!(agg.modules()[0].path, "/bin/x");
        }
    }

    #[test]
    fn malformed_records_are_counted_not_fatal() {
        let info = attr();
        let mut agg = Aggregator::new();
        handle_raw(
            &mut agg,
            &RawRecord {
                ty: 9,
                misc: 2,
                data: &[&[1, 2, 3]],
            },
            info,
        );
        // mmap2 claiming a 200-byte build id (the parser would assert).
        let mut m2 = vec![0u8; 64];
        m2[32] = 200;
        handle_raw(
            &mut agg,
            &RawRecord {
                ty: 10,
                misc: 0x4002,
                data: &[&m2],
            },
            info,
        );
        assert_eq!(agg.counts().bad_records, 2);
        assert_eq!(agg.counts().samples, 0);
    }
}
