//! Inputs the `perf_stat` fuzz target of fuzz/ (scripts/fuzz.sh) found to crash the reader,
//! kept as fixtures (tests/fixtures/fuzz/perf_stat/, see the README there): each must now be
//! read (or refused) without a panic.

/// tests/fixtures/fuzz/<target>/<name>.
fn fixture_of(target: &str, name: &str) -> Vec<u8> {
    tma_testkit::fixture_bytes(&format!("fuzz/{target}/{name}"))
}

fn fixture(name: &str) -> Vec<u8> {
    fixture_of("perf_stat", name)
}

/// Two CPUs' copies of `context-switches` whose running times (the fifth field) add up past
/// u64: the per-CPU rows are summed into one reading, whose running time is then unknown.
#[test]
fn running_times_that_overflow_when_summed() {
    let rec = tma_perfstat::parse(&fixture("running-time-sum-overflow.csv"))
        .expect("the recording parses");
    let mut seen = false;
    for iv in &rec.intervals {
        let agg = tma_perfstat::aggregate(iv);
        if let Some(r) = agg.get("context-switches") {
            seen = true;
            assert_eq!(r.value, Some(35.0));
            assert_eq!(r.time_running_ns, None);
        }
    }
    assert!(seen, "the aggregated interval has context-switches");
}

/// Per-cgroup rows of one event (`perf stat -G`, the `perf_stat` target, 2026-11-28) whose
/// running times add up past u64 when the cgroups are summed (the same overflow as
/// `running_times_that_overflow_when_summed`, in the reader's cgroup sum): a panic. Now the
/// summed reading's running time is unknown.
#[test]
fn cgroup_running_times_that_overflow_when_summed() {
    let rec = tma_perfstat::parse(&fixture("cgroup-running-time-sum-overflow.csv"))
        .expect("the recording parses");
    let summed: Vec<_> = rec
        .intervals
        .iter()
        .flat_map(|iv| &iv.readings)
        .filter(|r| r.event == "pagelts")
        .collect();
    assert!(!summed.is_empty(), "{rec:?}");
    assert!(
        summed.iter().any(|r| r.time_running_ns.is_none()),
        "{summed:?}"
    );
}
