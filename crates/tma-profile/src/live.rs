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
