//! perf.data with zstd-compressed records (`perf record -z`): the import reads the same
//! samples as from the same recording with its records inflated, and refuses a record that
//! inflates past the bound (tests/fixtures/perf-compressed, see its README).
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tma_profile::aggregate::Aggregator;
use tma_profile::import::import_bytes;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/perf-compressed")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn import(name: &str) -> (Aggregator, tma_profile::import::ImportInfo) {
    let mut agg = Aggregator::new();
    let info = import_bytes(&fixture(name), &mut agg).unwrap_or_else(|e| panic!("{name}: {e}"));
    (agg, info)
}

#[test]
fn compressed_records_import_as_their_inflated_copy() {
    let (z, zinfo) = import("compressed.perf.data");
    let (plain, pinfo) = import("plain.perf.data");
    // perf script prints 398 samples of the recording (README.md).
    assert_eq!(z.counts().samples, 398);
    assert_eq!(z.counts(), plain.counts());
    assert_eq!(zinfo.events, pinfo.events);
    assert_eq!(zinfo.events, ["cpu-clock"]);
    let stacks = |a: &Aggregator| {
        let mut v: Vec<String> = a
            .stacks()
            .map(|(t, f, n)| format!("{t:?} {f:?} {n}"))
            .collect();
        v.sort();
        v
    };
    assert!(!stacks(&z).is_empty());
    assert_eq!(stacks(&z), stacks(&plain));
    assert_eq!(z.comms(), plain.comms());
    let names = |a: &Aggregator| {
        a.modules()
            .iter()
            .map(|m| m.name().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&z), names(&plain));
}

#[test]
fn a_decompression_bomb_is_refused_quickly() {
    let start = Instant::now();
    let mut agg = Aggregator::new();
    let err = import_bytes(&fixture("bomb.perf.data"), &mut agg)
        .expect_err("a record inflating to 64 MiB from 5.7 KB")
        .to_string();
    assert!(err.contains("decompression bomb"), "{err}");
    assert!(err.contains("perf record -z"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(agg.counts().samples, 0);
}
