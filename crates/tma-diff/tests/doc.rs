//! The `tma.diff` and `tma.diff.profile` round trips: what `tma diff --json` writes reads back
//! into [`DiffDoc`] / [`ProfileDiffDoc`], equal to the document of the diff, and that,
//! written again, gives the same bytes.

use tma_testkit::{fixture, round_trip};

use tma_diff::doc::{DiffDoc, ProfileDiffDoc};
use tma_diff::render::{PROFILE_SCHEMA, PROFILE_SCHEMA_VERSION, SCHEMA, SCHEMA_VERSION};
use tma_diff::DiffConfig;

#[test]
fn a_diff_reads_back_as_written() {
    let cfg = DiffConfig {
        before: fixture("diff/zen4-before-synthetic.json"),
        after: fixture("diff/zen4-after-synthetic.json"),
        gates: vec!["backend_bound_cpu >= 11".into(), "IPC < -10%".into()],
        ..DiffConfig::default()
    };
    let d = tma_diff::run(&cfg, &mut Vec::new()).unwrap();
    let mut bytes = Vec::new();
    tma_diff::render::json(&mut bytes, &d).unwrap();
    let doc: DiffDoc = round_trip(&bytes, SCHEMA, SCHEMA_VERSION);
    assert_eq!(doc, DiffDoc::of(&d));
    assert_eq!(doc.before.sample_kind, "intervals");
    assert!(!doc.metrics.is_empty());
    assert_eq!(doc.gates.len(), 2);
    assert!(doc.gates[0].tripped);

    // The fixture tma report reads was written by `tma diff` from the same files, run from the
    // repository root, without gates.
    let golden = std::fs::read(fixture("report/zen4.diff.json")).unwrap();
    let mut golden: DiffDoc = round_trip(&golden, SCHEMA, SCHEMA_VERSION);
    golden.before.file.clone_from(&doc.before.file);
    golden.after.file.clone_from(&doc.after.file);
    golden.gates.clone_from(&doc.gates);
    assert_eq!(golden, doc);
}

#[test]
fn a_recorded_diff_reads_back_as_written() {
    // Recordings evaluated in-process: one sample per side, significance unknown.
    let cfg = DiffConfig {
        before: fixture("import/zen4-sha256-synthetic.csv"),
        after: fixture("import/zen4-sha256-synthetic.csv"),
        read: tma_stat::ReadOptions {
            cpu: Some("zen4".into()),
            level: Some(2),
            ..Default::default()
        },
        ..DiffConfig::default()
    };
    let d = tma_diff::run(&cfg, &mut Vec::new()).unwrap();
    let mut bytes = Vec::new();
    tma_diff::render::json(&mut bytes, &d).unwrap();
    let doc: DiffDoc = round_trip(&bytes, SCHEMA, SCHEMA_VERSION);
    assert_eq!(doc, DiffDoc::of(&d));
    assert!(doc.nodes.iter().all(|r| r.welch.is_none()));
}

#[test]
fn a_profile_diff_reads_back_as_written() {
    let cfg = tma_diff::profile::ProfileConfig {
        before: fixture("diff/before-synthetic.locate.json"),
        after: fixture("diff/after-synthetic.locate.json"),
        ..Default::default()
    };
    let d = tma_diff::profile::run(&cfg).unwrap();
    let mut bytes = Vec::new();
    tma_diff::render::profile_json(&mut bytes, &d).unwrap();
    let doc: ProfileDiffDoc = round_trip(&bytes, PROFILE_SCHEMA, PROFILE_SCHEMA_VERSION);
    assert_eq!(doc, ProfileDiffDoc::of(&d));
    assert_eq!(doc.functions.len(), 4);
    assert_eq!(doc.before.kind, "tma.locate");

    let golden = std::fs::read(fixture("report/profile.diff.json")).unwrap();
    let mut golden: ProfileDiffDoc = round_trip(&golden, PROFILE_SCHEMA, PROFILE_SCHEMA_VERSION);
    golden.before.file.clone_from(&doc.before.file);
    golden.after.file.clone_from(&doc.after.file);
    assert_eq!(golden, doc);
}

#[test]
fn fields_older_readers_did_without_may_be_absent() {
    let bytes = br#"{
  "schema": "tma.diff",
  "schema_version": 1,
  "before": {"file": "b", "cpu": {"key": "zen4", "name": "AMD Zen 4"}, "source": "s",
             "samples": 1, "sample_kind": "whole"},
  "after": {"file": "a", "cpu": {"key": "zen4", "name": "AMD Zen 4"}, "source": "s",
            "samples": 1, "sample_kind": "whole"},
  "significance": {"test": "welch_t_two_sided", "alpha": 0.05},
  "nodes": [{"name": "Frontend_Bound", "unit": "PercentSlots",
             "before": {"n": 1, "mean": 10.0, "sd": null}, "after": null,
             "delta": null, "relative": null, "welch": null,
             "significance": {"verdict": "unknown", "reason": "no value on one side"}}],
  "bottleneck": {"text": "no bottleneck in either run"}
}"#;
    let doc: DiffDoc = serde_json::from_slice(bytes).unwrap();
    assert!(doc.metrics.is_empty() && doc.gates.is_empty());
    assert_eq!(
        (doc.nodes[0].parent.as_deref(), doc.nodes[0].level),
        (None, 0)
    );
    assert_eq!(doc.bottleneck.verdict, "");
}
