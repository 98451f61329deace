//! Group sampling: one event of a group samples, and each of its samples carries the values
//! of the whole group (`PERF_SAMPLE_READ` with `PERF_FORMAT_GROUP`), as
//! `perf record -e '{a,b,c}:S'` records them.
//!
//! This module has the two halves that are independent of what the values mean:
//! * [`GroupSpec`]: which events the group holds, opened by [`super::Session`] (a counting
//!   leader that cannot sample, such as Intel's `slots`, or the sampler itself as leader);
//! * [`parse_sample`]: a `PERF_RECORD_SAMPLE` body read field by field in the order of the
//!   kernel ABI (`include/uapi/linux/perf_event.h`, "struct { ... } && PERF_RECORD_SAMPLE"),
//!   with the read group parsed per `struct read_format`:
//!
//! ```text
//! { u64 nr;
//!   { u64 time_enabled; } && PERF_FORMAT_TOTAL_TIME_ENABLED
//!   { u64 time_running; } && PERF_FORMAT_TOTAL_TIME_RUNNING
//!   { u64 value;
//!     { u64 id;   } && PERF_FORMAT_ID
//!     { u64 lost; } && PERF_FORMAT_LOST
//!   } cntr[nr]; }
//! ```
//!
//! The values are in group order: the leader first, then the members in the order they
//! were opened. [`without_read`] gives the sample without its read block, so that the
//! record parser of `tma-profile` (whose `linux-perf-event-reader` 0.10 mis-reads a
//! `PERF_FORMAT_GROUP` block: it takes the group layout for the single-value one and the
//! other way round) sees the plain sample layout it reads correctly.
//!
//! Parsers take bytes (little-endian, as the ring buffer and x86 perf.data files hold them)
//! and never panic: a short or inconsistent body is a [`GroupParseError`].

use std::ops::Range;

/// `PERF_SAMPLE_*` bits (`perf_event_attr.sample_type`).
pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_ADDR: u64 = 1 << 3;
pub const SAMPLE_READ: u64 = 1 << 4;
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const SAMPLE_ID: u64 = 1 << 6;
pub const SAMPLE_CPU: u64 = 1 << 7;
pub const SAMPLE_PERIOD: u64 = 1 << 8;
pub const SAMPLE_STREAM_ID: u64 = 1 << 9;
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// `PERF_FORMAT_LOST` (Linux 6.0): lost samples per counter (the other bits are in
/// [`crate::attr`]).
pub const FORMAT_LOST: u64 = 1 << 4;

/// The read format group sampling asks for: group, ids, enabled and running times.
pub const GROUP_READ_FORMAT: u64 = crate::attr::READ_FORMAT;

/// One event of a sampled group, as `perf_event_attr` needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEvent {
    /// Name for messages and reports (`PERF_METRICS.RETIRING`, `page-faults`).
    pub name: String,
    /// `perf_event_attr.type` (PMU type from sysfs, or 1 for software events).
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
}

impl GroupEvent {
    /// The attr fields of a planned event ([`crate::attr::attr_for`]).
    pub fn from_spec(
        spec: &crate::event::EventSpec,
        pmus: &tma_host::sysfs::Pmus,
    ) -> Result<GroupEvent, crate::attr::AttrError> {
        let a = crate::attr::attr_for(spec, pmus, crate::attr::AttachMode::SINGLE, false)?;
        Ok(GroupEvent {
            name: spec.name.clone(),
            type_: a.type_,
            config: a.config,
            config1: a.config1,
        })
    }

    /// A kernel software event (`PERF_TYPE_SOFTWARE`).
    pub fn software(ev: crate::event::SoftwareEvent) -> GroupEvent {
        GroupEvent {
            name: ev.name().to_string(),
            type_: crate::attr::TYPE_SOFTWARE,
            config: ev.config(),
            config1: 0,
        }
    }
}

/// The events read with every sample, besides the sampler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSpec {
    /// A counting leader opened before the sampler (Ice Lake and later: `slots`, which
    /// cannot sample; the sampler is then the group's second event). `None`: the sampler
    /// leads.
    pub leader: Option<GroupEvent>,
    /// Members after the sampler, in opening order.
    pub members: Vec<GroupEvent>,
}

impl GroupSpec {
    /// The names of the values of each read, in the kernel's order: the leader, then the
    /// sampler (or the sampler first when it leads), then the members.
    pub fn read_order(&self, sampler: &str) -> Vec<String> {
        let mut v = Vec::with_capacity(self.members.len() + 2);
        if let Some(l) = &self.leader {
            v.push(l.name.clone());
        }
        v.push(sampler.to_string());
        v.extend(self.members.iter().map(|m| m.name.clone()));
        v
    }
}

/// One counter's value in a read group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupValue {
    pub value: u64,
    /// `PERF_FORMAT_ID`: the event's id (an inherited copy reports its parent's).
    pub id: Option<u64>,
    /// `PERF_FORMAT_LOST`.
    pub lost: Option<u64>,
}

/// A read group as a sample carries it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadGroup {
    pub time_enabled: Option<u64>,
    pub time_running: Option<u64>,
    /// In group order (leader first).
    pub values: Vec<GroupValue>,
}

/// Why a sample body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupParseError {
    #[error(
        "sample record too short: {what} needs {need} bytes at offset {at}, the record has {len}"
    )]
    Truncated {
        what: &'static str,
        at: usize,
        need: usize,
        len: usize,
    },
    #[error("read group claims {nr} values, more than the record can hold")]
    TooMany { nr: u64 },
    #[error("the sample carries no read values (sample_type lacks PERF_SAMPLE_READ)")]
    NoRead,
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn u64(&mut self, what: &'static str) -> Result<u64, GroupParseError> {
        let end = self.at + 8;
        let bytes = self.b.get(self.at..end).ok_or(GroupParseError::Truncated {
            what,
            at: self.at,
            need: 8,
            len: self.b.len(),
        })?;
        self.at = end;
        let mut a = [0u8; 8];
        a.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(a))
    }
    fn opt(&mut self, on: bool, what: &'static str) -> Result<Option<u64>, GroupParseError> {
        if on {
            self.u64(what).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// Parse a `struct read_format` at the start of `b`; returns it and its length in bytes.
/// Without `PERF_FORMAT_GROUP` the block is one value (`{ value; time_enabled;
/// time_running; id; lost }`), returned as a group of one.
pub fn parse_read(b: &[u8], read_format: u64) -> Result<(ReadGroup, usize), GroupParseError> {
    use crate::attr::{
        FORMAT_GROUP, FORMAT_ID, FORMAT_TOTAL_TIME_ENABLED, FORMAT_TOTAL_TIME_RUNNING,
    };
    let mut c = Cursor { b, at: 0 };
    let id = read_format & FORMAT_ID != 0;
    let lost = read_format & FORMAT_LOST != 0;
    let te = read_format & FORMAT_TOTAL_TIME_ENABLED != 0;
    let tr = read_format & FORMAT_TOTAL_TIME_RUNNING != 0;
    if read_format & FORMAT_GROUP == 0 {
        let value = c.u64("read value")?;
        let time_enabled = c.opt(te, "time_enabled")?;
        let time_running = c.opt(tr, "time_running")?;
        let id = c.opt(id, "read id")?;
        let lost = c.opt(lost, "read lost")?;
        let g = ReadGroup {
            time_enabled,
            time_running,
            values: vec![GroupValue { value, id, lost }],
        };
        return Ok((g, c.at));
    }
    let nr = c.u64("read group nr")?;
    let time_enabled = c.opt(te, "time_enabled")?;
    let time_running = c.opt(tr, "time_running")?;
    let per = 8 * (1 + id as u64 + lost as u64);
    if nr.saturating_mul(per) > (b.len() - c.at) as u64 {
        return Err(GroupParseError::TooMany { nr });
    }
    let mut values = Vec::with_capacity(nr as usize);
    for _ in 0..nr {
        let value = c.u64("read value")?;
        let id = c.opt(id, "read id")?;
        let lost = c.opt(lost, "read lost")?;
        values.push(GroupValue { value, id, lost });
    }
    Ok((
        ReadGroup {
            time_enabled,
            time_running,
            values,
        },
        c.at,
    ))
}

/// The fields of a sample up to its read block (and the block itself).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SampleFields {
    pub identifier: Option<u64>,
    pub ip: Option<u64>,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    pub read: Option<ReadGroup>,
    /// Where the read block lies in the body.
    pub read_range: Option<Range<usize>>,
}

/// Read a `PERF_RECORD_SAMPLE` body (without the 8-byte header) up to and including its
/// read block, in the ABI's field order: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID,
/// CPU, PERIOD, READ.
pub fn parse_sample(
    body: &[u8],
    sample_type: u64,
    read_format: u64,
) -> Result<SampleFields, GroupParseError> {
    let mut c = Cursor { b: body, at: 0 };
    let on = |bit: u64| sample_type & bit != 0;
    let mut f = SampleFields {
        identifier: c.opt(on(SAMPLE_IDENTIFIER), "identifier")?,
        ip: c.opt(on(SAMPLE_IP), "ip")?,
        ..SampleFields::default()
    };
    if on(SAMPLE_TID) {
        let v = c.u64("pid/tid")?;
        f.pid = Some(v as u32 as i32);
        f.tid = Some((v >> 32) as u32 as i32);
    }
    f.time = c.opt(on(SAMPLE_TIME), "time")?;
    f.addr = c.opt(on(SAMPLE_ADDR), "addr")?;
    f.id = c.opt(on(SAMPLE_ID), "id")?;
    f.stream_id = c.opt(on(SAMPLE_STREAM_ID), "stream_id")?;
    if on(SAMPLE_CPU) {
        f.cpu = Some(c.u64("cpu")? as u32);
    }
    f.period = c.opt(on(SAMPLE_PERIOD), "period")?;
    if on(SAMPLE_READ) {
        let start = c.at;
        let (g, len) = parse_read(&body[start..], read_format)?;
        f.read = Some(g);
        f.read_range = Some(start..start + len);
    }
    Ok(f)
}

/// The sample body without its read block (to be parsed with `sample_type` less
/// `PERF_SAMPLE_READ`).
pub fn without_read(body: &[u8], fields: &SampleFields) -> Vec<u8> {
    match &fields.read_range {
        Some(r) => {
            let mut v = Vec::with_capacity(body.len() - r.len());
            v.extend_from_slice(&body[..r.start]);
            v.extend_from_slice(&body[r.end..]);
            v
        }
        None => body.to_vec(),
    }
}

/// A sample body as the kernel writes it for `sample_type` IP|TID|TIME|CPU|PERIOD|READ
/// (with CALLCHAIN when `callchain` is given) and `read_format` [`GROUP_READ_FORMAT`]:
/// what replayed sample streams (tests and fixtures) are made of.
#[allow(clippy::too_many_arguments)]
pub fn build_sample(
    ip: u64,
    pid: i32,
    tid: i32,
    time: u64,
    cpu: u32,
    period: u64,
    read: &ReadGroup,
    callchain: Option<&[u64]>,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(64 + 16 * read.values.len());
    b.extend_from_slice(&ip.to_le_bytes());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&tid.to_le_bytes());
    b.extend_from_slice(&time.to_le_bytes());
    b.extend_from_slice(&cpu.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&period.to_le_bytes());
    b.extend_from_slice(&(read.values.len() as u64).to_le_bytes());
    b.extend_from_slice(&read.time_enabled.unwrap_or(0).to_le_bytes());
    b.extend_from_slice(&read.time_running.unwrap_or(0).to_le_bytes());
    for v in &read.values {
        b.extend_from_slice(&v.value.to_le_bytes());
        b.extend_from_slice(&v.id.unwrap_or(0).to_le_bytes());
    }
    if let Some(cc) = callchain {
        b.extend_from_slice(&(cc.len() as u64).to_le_bytes());
        for a in cc {
            b.extend_from_slice(&a.to_le_bytes());
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::{FORMAT_GROUP, FORMAT_ID, FORMAT_TOTAL_TIME_ENABLED};

    const ST: u64 = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD | SAMPLE_READ;

    fn group(vals: &[(u64, u64)]) -> ReadGroup {
        ReadGroup {
            time_enabled: Some(1000),
            time_running: Some(900),
            values: vals
                .iter()
                .map(|&(value, id)| GroupValue {
                    value,
                    id: Some(id),
                    lost: None,
                })
                .collect(),
        }
    }

    /// Bytes written by hand in the ABI's order, not by `build_sample`: the two must agree.
    #[test]
    fn sample_with_group_read_parses_per_the_abi() {
        let mut b = Vec::new();
        b.extend_from_slice(&0x40_1000u64.to_le_bytes()); // ip
        b.extend_from_slice(&7i32.to_le_bytes()); // pid
        b.extend_from_slice(&9i32.to_le_bytes()); // tid
        b.extend_from_slice(&55u64.to_le_bytes()); // time
        b.extend_from_slice(&3u32.to_le_bytes()); // cpu
        b.extend_from_slice(&0u32.to_le_bytes()); // res
        b.extend_from_slice(&1000u64.to_le_bytes()); // period
        for v in [2u64, 1000, 900, 111, 41, 222, 42] {
            b.extend_from_slice(&v.to_le_bytes()); // nr, enabled, running, (value, id) x2
        }
        b.extend_from_slice(&1u64.to_le_bytes()); // callchain nr
        b.extend_from_slice(&0x40_1000u64.to_le_bytes());
        let f = parse_sample(&b, ST | SAMPLE_CALLCHAIN, GROUP_READ_FORMAT).unwrap();
        assert_eq!(
            (f.ip, f.pid, f.tid, f.time),
            (Some(0x40_1000), Some(7), Some(9), Some(55))
        );
        assert_eq!((f.cpu, f.period), (Some(3), Some(1000)));
        let g = f.read.clone().unwrap();
        assert_eq!(g, group(&[(111, 41), (222, 42)]));
        assert_eq!(f.read_range, Some(40..96));
        let built = build_sample(0x40_1000, 7, 9, 55, 3, 1000, &g, Some(&[0x40_1000]));
        assert_eq!(built, b);
        // Stripped: the plain sample layout, then the call chain.
        let s = without_read(&b, &f);
        assert_eq!(s.len(), b.len() - 56);
        assert_eq!(&s[40..48], &1u64.to_le_bytes());
    }

    #[test]
    fn read_formats_without_group_id_or_times() {
        // Group, no times, ids and lost.
        let mut b = Vec::new();
        for v in [2u64, 5, 1, 0, 6, 2, 3] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let (g, n) = parse_read(&b, FORMAT_GROUP | FORMAT_ID | FORMAT_LOST).unwrap();
        assert_eq!(n, 56);
        assert_eq!(
            g.values[1],
            GroupValue {
                value: 6,
                id: Some(2),
                lost: Some(3)
            }
        );
        assert_eq!(g.time_enabled, None);
        // Single value with enabled time.
        let (g, n) = parse_read(&b, FORMAT_TOTAL_TIME_ENABLED).unwrap();
        assert_eq!(
            (n, g.values.len(), g.values[0].value, g.time_enabled),
            (16, 1, 2, Some(5))
        );
    }

    #[test]
    fn short_or_absurd_bodies_are_errors_not_panics() {
        let b = build_sample(1, 2, 2, 3, 0, 10, &group(&[(1, 1), (2, 2)]), None);
        for cut in 0..b.len() {
            assert!(
                parse_sample(&b[..cut], ST, GROUP_READ_FORMAT).is_err(),
                "cut {cut}"
            );
        }
        let mut huge = b.clone();
        huge[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            parse_sample(&huge, ST, GROUP_READ_FORMAT).unwrap_err(),
            GroupParseError::TooMany { nr: u64::MAX }
        );
        let e = parse_sample(&b[..20], ST, GROUP_READ_FORMAT).unwrap_err();
        assert!(
            e.to_string().contains("time needs 8 bytes at offset 16"),
            "{e}"
        );
    }

    #[test]
    fn read_order_puts_a_counting_leader_first() {
        let g = GroupSpec {
            leader: Some(GroupEvent {
                name: "slots".into(),
                type_: 4,
                config: 0x400,
                config1: 0,
            }),
            members: vec![GroupEvent::software(
                crate::event::SoftwareEvent::PageFaults,
            )],
        };
        assert_eq!(g.read_order("cycles"), ["slots", "cycles", "page-faults"]);
        let g = GroupSpec { leader: None, ..g };
        assert_eq!(g.read_order("cycles"), ["cycles", "page-faults"]);
    }
}
