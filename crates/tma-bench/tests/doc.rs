//! The `tma.bench` round trip: what `tma bench --json` writes reads back into [`BenchDoc`],
//! equal to the document of the run, and that, written again, gives the same bytes.

use std::path::{Path, PathBuf};

use tma_bench::doc::BenchDoc;
use tma_bench::render::{JSON_SCHEMA, JSON_SCHEMA_VERSION};
use tma_bench::{BenchConfig, BenchOutcome, ClockChoice, ClockKind, Input};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(rel)
}

/// `tma bench --json` of an outcome.
fn written(o: &BenchOutcome) -> Vec<u8> {
    let mut out = Vec::new();
    tma_bench::render::json(&mut out, o).unwrap();
    out
}

/// Read a document into the type and write it again.
fn round_trip(bytes: &[u8]) -> BenchDoc {
    tma_testkit::round_trip(bytes, JSON_SCHEMA, JSON_SCHEMA_VERSION)
}

fn outcome(doc: BenchDoc) -> BenchOutcome {
    BenchOutcome {
        forms: doc.forms,
        errors: doc.errors,
        sha: doc.sha,
        compare: Some(doc.compare).filter(|c| !c.is_empty()),
        interrupted: match doc.interrupted.as_deref() {
            Some("SIGINT") => Some(tma_sys::signal::Interrupt::Int),
            Some("SIGTERM") => Some(tma_sys::signal::Interrupt::Term),
            _ => None,
        },
    }
}

#[test]
fn the_recorded_document_reads_back_as_written() {
    // `tma bench 'add rax, rbx' --json`, recorded (tests/fixtures/README.md) by a tma that did
    // not write `outvoted_plausible` yet: read with its default, and written again with it.
    let bytes = std::fs::read(fixture("report/add.bench.json")).unwrap();
    assert_eq!(
        tma_render::recognize(&bytes).schema(),
        Some(JSON_SCHEMA),
        "recognised by its schema"
    );
    let doc: BenchDoc = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc.forms.len(), 1);
    assert!(doc.forms[0].throughput.is_some());
    let o = outcome(doc.clone());
    assert_eq!(BenchDoc::of(&o), doc);
    assert_eq!(round_trip(&written(&o)), doc);
}

#[test]
fn a_list_with_errors_and_references_reads_back_as_written() {
    let cfg = BenchConfig {
        input: Some(Input::File(fixture("bench/forms.txt"))),
        latency: true,
        clock: ClockChoice::One(ClockKind::Tsc),
        reps: Some(3),
        compare: Some(fixture("bench/reference.csv")),
        ..BenchConfig::default()
    };
    let o = tma_bench::run(&cfg, &mut |_| {}).unwrap();
    let doc = round_trip(&written(&o));
    assert_eq!(doc, BenchDoc::of(&o));
    assert!(!doc.errors.is_empty(), "frobnicate is no instruction");
    assert!(doc.forms.iter().all(|f| f.throughput.is_none()));
    assert_eq!(doc.compare.len(), o.compare.as_ref().map_or(0, Vec::len));
}

#[test]
fn fields_older_readers_did_without_may_be_absent() {
    let bytes = br#"{
  "schema": "tma.bench",
  "schema_version": 1,
  "forms": [{"input": "add rax, rbx",
             "latency": [{"pair": "1->1", "figures": [{"clock": "tsc", "median": 1.0}]}],
             "throughput": {"best": [{"clock": "tsc", "median": 0.25}], "best_chains": 4}}]
}"#;
    let doc: BenchDoc = serde_json::from_slice(bytes).unwrap();
    let f = &doc.forms[0];
    assert!(f.latency[0].figures[0].converged, "absent: converged");
    assert_eq!(f.latency[0].from, "");
    assert!(doc.errors.is_empty() && doc.sha.is_none() && doc.compare.is_empty());
}
