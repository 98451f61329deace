//! perf stat recordings the `perf_stat` fuzz target of fuzz/ (scripts/fuzz.sh) found to crash
//! the importer, kept as fixtures (tests/fixtures/fuzz/perf_stat/, see the README there):
//! each must now import (or be refused) without a panic.
use std::path::PathBuf;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/fuzz/perf_stat")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Two CPUs' copies of `context-switches` whose running times (the fifth field) add up past
/// u64: the per-CPU rows are summed into one reading, whose running time is then unknown.
#[test]
fn running_times_that_overflow_when_summed() {
    let rec = tma_perf::import::parse(&fixture("running-time-sum-overflow.csv"))
        .expect("the recording parses");
    let mut seen = false;
    for iv in &rec.intervals {
        let agg = tma_perf::import::aggregate(iv);
        if let Some(r) = agg.get("context-switches") {
            seen = true;
            assert_eq!(r.value, Some(35.0));
            assert_eq!(r.time_running_ns, None);
        }
    }
    assert!(seen, "the aggregated interval has context-switches");
}
