//! Replayed group-sampling streams: how hardware layouts are proved without a PMU.

use super::layout::TreeLayout;
use crate::hotspots::Profile;

/// One sample of a replayed stream ([`replay`]): thread `tid` at address `ip` (a function
/// of its own, `[unknown] 0xIP`), its group (`group_id`: the first value's id; each CPU's
/// group has its own) reading the cumulative `values` by event name (absent names read 0).
#[derive(Debug, Clone, Copy)]
pub struct ReplaySample<'a> {
    pub tid: i32,
    pub ip: u64,
    pub group_id: u64,
    pub values: &'a [(&'a str, u64)],
}

/// The parse info of a group-sampling session's records: IP|TID|TIME|READ|CPU|PERIOD,
/// read format GROUP|ID|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING, sample_id_all.
pub fn replay_parse_info() -> linux_perf_event_reader::RecordParseInfo {
    use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};
    let mut a = [0u8; 136];
    a[0..4].copy_from_slice(&1u32.to_le_bytes());
    a[4..8].copy_from_slice(&136u32.to_le_bytes());
    a[16..24].copy_from_slice(&4000u64.to_le_bytes());
    let st = 0x1u64 | 0x2 | 0x4 | 0x10 | 0x80 | 0x100;
    a[24..32].copy_from_slice(&st.to_le_bytes());
    a[32..40].copy_from_slice(&tma_perf::sampling::group::GROUP_READ_FORMAT.to_le_bytes());
    let flags: u64 = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 18) | (1 << 23);
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    match PerfEventAttr::parse::<_, byteorder::LittleEndian>(&a[..]) {
        Ok((attr, _)) => RecordParseInfo::new(&attr, Endianness::LittleEndian),
        Err(e) => unreachable!("a fixed, valid attr image: {e}"),
    }
}

/// Replay a hardware sample stream: each sample is built as the kernel lays out a
/// PERF_RECORD_SAMPLE with its read group (`layout`'s read order), handed to the live
/// path as a ring-buffer record split in two (as one wrapping the ring's end arrives), and
/// the profile analysed. Returns the profile (with [`Profile::value_names`]) and the
/// number of first reads. This is how hardware layouts are proved without a PMU.
pub fn replay(layout: &TreeLayout, samples: &[ReplaySample<'_>]) -> (Profile, u64) {
    use tma_perf::sampling::group::{build_sample, GroupValue, ReadGroup};
    let order = layout.read_order();
    let info = replay_parse_info();
    let mut agg = crate::aggregate::Aggregator::new();
    for (t, r) in samples.iter().enumerate() {
        let g = ReadGroup {
            time_enabled: Some(1000 * t as u64),
            time_running: Some(1000 * t as u64),
            values: order
                .iter()
                .enumerate()
                .map(|(i, n)| GroupValue {
                    value: r.values.iter().find(|(m, _)| m == n).map_or(0, |v| v.1),
                    id: Some(r.group_id + i as u64),
                    lost: None,
                })
                .collect(),
        };
        let body = build_sample(r.ip, 40, r.tid, 10 + t as u64, 0, 1000, &g, None);
        let (x, y) = body.split_at(body.len() / 2);
        crate::live::handle_raw(
            &mut agg,
            &tma_perf::sampling::RawRecord {
                ty: 9,
                misc: 2,
                data: &[x, y],
            },
            info,
        );
    }
    let mut sym = crate::symbols::Symbolizer::new(Vec::new(), None);
    let mut p = crate::hotspots::analyze(
        &agg,
        &mut sym,
        &layout.sampler.name,
        &crate::hotspots::ReportOptions::default(),
    );
    p.value_names = order;
    let first = agg.group().map_or(0, |g| g.first_reads);
    (p, first)
}

#[cfg(test)]
mod tests {
    use tma_metrics::Constants;
    use tma_perf::sampling::group::{build_sample, GroupValue, ReadGroup};
    use tma_perf::sampling::RawRecord;

    use super::*;
    use crate::aggregate::Aggregator;
    use crate::tree::build::build;

    const A: u64 = 0x1000;

    /// Values that go down between reads are charged 0 and counted; a read of another
    /// width is skipped; a truncated record is a bad record, not a panic.
    #[test]
    fn inconsistent_reads_are_counted_not_charged() {
        let layout = TreeLayout::software();
        let (p, _) = replay(
            &layout,
            &[
                ReplaySample {
                    tid: 1,
                    ip: A,
                    group_id: 1,
                    values: &[("page-faults", 10), ("task-clock", 500)],
                },
                ReplaySample {
                    tid: 1,
                    ip: A,
                    group_id: 1,
                    values: &[("page-faults", 5), ("task-clock", 900)],
                },
            ],
        );
        let t = build(&p, &layout, None, 1, &Constants::default(), 10, 0).unwrap();
        assert_eq!(t.level, 0);
        assert!(t.total.nodes.is_empty());
        assert_eq!(t.total.count("page-faults"), Some(10));
        assert_eq!(t.total.count("task-clock"), Some(900));
        let mut agg = Aggregator::new();
        let g = ReadGroup {
            time_enabled: Some(1),
            time_running: Some(1),
            values: vec![GroupValue::default(); 2],
        };
        let body = build_sample(A, 1, 1, 1, 0, 1, &g, None);
        crate::live::handle_raw(
            &mut agg,
            &RawRecord {
                ty: 9,
                misc: 2,
                data: &[&body[..body.len() - 4]],
            },
            replay_parse_info(),
        );
        assert_eq!(agg.counts().bad_records, 1);
    }
}
