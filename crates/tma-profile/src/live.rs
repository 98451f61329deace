//! Live sampling: ring-buffer records from `tma_perf::sampling` go through the same
//! `linux-perf-event-reader` parser, with the parse info derived from the very
//! `perf_event_attr` given to the kernel, into the same [`Aggregator`] as perf.data imports.

use std::path::Path;

use linux_perf_event_reader::{
    Endianness, PerfEventAttr, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use tma_perf::sampling::{
    RawRecord, SamplingConfig, SamplingError, Session, SessionSummary, Target,
};

use crate::aggregate::{parse_proc_maps, Aggregator};

/// Errors from a live session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error("internal: cannot parse our own perf_event_attr: {0}")]
    Attr(std::io::Error),
}

/// A live session feeding an [`Aggregator`]; optionally every record is also passed to
/// `tap` (used by `--record` to write a perf.data file).
pub fn sample(
    cfg: SamplingConfig,
    target: &Target,
    agg: &mut Aggregator,
    mut tap: Option<&mut dyn FnMut(&RawRecord<'_>)>,
) -> Result<(SessionSummary, Vec<u8>), LiveError> {
    let proc_root = cfg.proc_root.clone();
    let session = Session::open(cfg, target)?;
    let attr_bytes = session.attr_bytes().to_vec();
    let (attr, _) = PerfEventAttr::parse::<_, byteorder::LittleEndian>(&attr_bytes[..])
        .map_err(LiveError::Attr)?;
    let info = RecordParseInfo::new(&attr, Endianness::LittleEndian);
    if let Target::Pid(pid) = target {
        for (ty, misc, body) in synthesize_existing(&proc_root, *pid) {
            let r = RawRecord {
                ty,
                misc,
                data: &[&body[..]],
            };
            if let Some(t) = tap.as_mut() {
                t(&r);
            }
            handle_raw(agg, &r, info);
        }
    }
    let summary = session.run(&mut |r: RawRecord<'_>| {
        if let Some(t) = tap.as_mut() {
            t(&r);
        }
        handle_raw(agg, &r, info);
    })?;
    Ok((summary, attr_bytes))
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
pub fn synthesize_existing(proc_root: &Path, pid: i32) -> Vec<(u32, u16, Vec<u8>)> {
    let dir = proc_root.join(pid.to_string());
    let mut out = Vec::new();
    if let Ok(comm) = std::fs::read_to_string(dir.join("comm")) {
        out.push(crate::record::synthetic_comm(pid, &comm));
    }
    if let Ok(maps) = std::fs::read(dir.join("maps")) {
        for (start, end, off, path) in parse_proc_maps(&maps) {
            out.push(crate::record::synthetic_mmap(pid, start, end, off, &path));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Frame;

    /// A perf_event_attr image like the one sampling gives the kernel: cpu-clock,
    /// IP|TID|TIME|CPU|PERIOD, freq, sample_id_all, mmap2.
    fn attr() -> RecordParseInfo {
        let mut a = [0u8; 136];
        a[0..4].copy_from_slice(&1u32.to_le_bytes());
        a[4..8].copy_from_slice(&136u32.to_le_bytes());
        a[16..24].copy_from_slice(&4000u64.to_le_bytes());
        a[24..32].copy_from_slice(&(0x1u64 | 0x2 | 0x4 | 0x80 | 0x100).to_le_bytes());
        let flags: u64 = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 18) | (1 << 23);
        a[40..48].copy_from_slice(&flags.to_le_bytes());
        let (attr, _) = PerfEventAttr::parse::<_, byteorder::LittleEndian>(&a[..]).unwrap();
        RecordParseInfo::new(&attr, Endianness::LittleEndian)
    }

    fn trailer(b: &mut Vec<u8>, pid: i32) {
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes()); // time
        b.extend_from_slice(&1u32.to_le_bytes()); // cpu
        b.extend_from_slice(&0u32.to_le_bytes());
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
            let stack: Vec<&Vec<Frame>> = agg.stacks().keys().collect();
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
