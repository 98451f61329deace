//! Inputs the fuzz targets of fuzz/ (scripts/fuzz.sh) found to crash a parser of this crate
//! (perf stat recordings, tracefs format files), kept as fixtures (tests/fixtures/fuzz/<target>/,
//! see the README there): each must now be read (or refused) without a panic.
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
