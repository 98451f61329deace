//! Inputs the fuzz targets of fuzz/ (scripts/fuzz.sh) found to crash a parser of this crate
//! (perf stat recordings, tracefs format files, /proc text), kept as fixtures (tests/fixtures/fuzz/<target>/,
//! see the README there): each must now be read (or refused) without a panic.
use std::path::PathBuf;

/// tests/fixtures/fuzz/<target>/<name>.
fn fixture_of(target: &str, name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/fuzz")
        .join(target)
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn fixture(name: &str) -> Vec<u8> {
    fixture_of("perf_stat", name)
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

/// A tracefs `format` file whose field declaration ends its type with a no-break space
/// (U+00A0, two bytes in UTF-8), as the `tracefs` target found: the name was cut inside the
/// character (a panic). Now it parses; a hand-written declaration shows where the cut goes.
#[test]
fn tracefs_field_typed_with_a_multibyte_space() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/fuzz/tracefs/nbsp-in-field-declaration");
    let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let text = &data[..data.iter().position(|&b| b == 0).unwrap_or(data.len())];
    let _ = tma_perf::tracefs::format::EventFormat::parse(text);

    let fmt =
        "name: x\nID: 1\nformat:\n\tfield:unsigned long\u{a0}rax;\toffset:0;\tsize:8;\tsigned:0;\n";
    let f = tma_perf::tracefs::format::EventFormat::parse(fmt.as_bytes()).expect("parses");
    assert_eq!(f.fields.len(), 1);
    assert_eq!(f.fields[0].name, "rax");
    assert_eq!(f.fields[0].c_type, "unsigned long");
}

fn proc_fixture(name: &str) -> Vec<u8> {
    fixture_of("proc", name)
}

/// An smaps text (the `proc` target, 2026-11-28) with a size in kB whose bytes overflow u64:
/// a multiplication overflow (a panic in debug builds, a wrapped size in release). Now the
/// line is refused, naming it.
#[test]
fn smaps_size_in_kb_that_overflows_bytes() {
    match tma_perf::host::parse_smaps(&proc_fixture("smaps-size-overflow")) {
        Err(tma_perf::host::ParseError::BadLine { what, .. }) => {
            assert!(what.contains("too large"), "{what}")
        }
        other => panic!("expected a refused line, got {other:?}"),
    }
}

/// A CPU list (the `proc` target) of hundreds of plausible ranges, 8 KB in all, that made a
/// list of over a quarter of a million entries (a 1.1 MB allocation, over the target's bound).
/// Now a list is held to 65,536 entries.
#[test]
fn cpu_list_of_many_ranges_is_bounded() {
    assert_eq!(
        tma_perf::host::parse_cpu_list(&proc_fixture("cpu-list-many-ranges")),
        Err(tma_perf::host::ParseError::ListTooLong(65_536))
    );
}

/// Per-cgroup rows of one event (`perf stat -G`, the `perf_stat` target, 2026-11-28) whose
/// running times add up past u64 when the cgroups are summed (the same overflow as
/// `running_times_that_overflow_when_summed`, in the reader's cgroup sum): a panic. Now the
/// summed reading's running time is unknown.
#[test]
fn cgroup_running_times_that_overflow_when_summed() {
    let rec = tma_perf::import::parse(&fixture("cgroup-running-time-sum-overflow.csv"))
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
