//! One naming convention for every document tma writes (`tma_render::schema`): the schema
//! constants follow it, no source file writes a schema name outside it (except the old names
//! kept for reading), and the documents renamed in 2026-11 still read under their old names.

use std::path::Path;

use tma_render::schema::{canonical, follows_convention, RENAMED};

#[test]
fn every_schema_constant_follows_the_convention() {
    let names = [
        tma_stat::render::tree::SCHEMA,
        tma_stat::render::counts::SOFTWARE_SCHEMA,
        tma_stat::render::event_list::SCHEMA,
        tma_stat::render::metric_list::SCHEMA,
        tma_stat::render::events::SCHEMA,
        tma_stat::render::list::SCHEMA,
        tma_kvm::render::SCHEMA,
        tma_kvm::render::MEMORY_SCHEMA,
        tma_diff::render::SCHEMA,
        tma_diff::render::PROFILE_SCHEMA,
        tma_diff::regions::SCHEMA,
        tma_regions::report::SCHEMA,
        tma_doctor::SCHEMA,
        tma_doctor::STATE_SCHEMA,
        tma_doctor::verify::RECORDED_SCHEMA,
        tma_doctor::verify::REPORT_SCHEMA,
        tma_bench::render::JSON_SCHEMA,
        tma_profile::render::JSON_SCHEMA,
        tma_perf::snapshot::SCHEMA,
        tma_workloads::workload::render::SCHEMA,
    ];
    for n in names {
        assert!(
            follows_convention(n),
            "{n} breaks tma_render::schema's convention"
        );
        assert_eq!(canonical(n), n, "{n} is an old name");
    }
}

/// Every `"tma.…"` string literal in the libraries' and the CLI's sources is either a name
/// that follows the convention or one of the old names kept for reading.
#[test]
fn no_source_writes_a_name_outside_the_convention() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut seen = 0;
    let mut bad = Vec::new();
    let mut stack = vec![crates.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "tests" && n != "target") {
                    stack.push(p);
                }
                continue;
            }
            // schema.rs holds the convention and its own tests of names that break it.
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("tma-render/src/schema.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, _) in text.match_indices("\"tma.") {
                let rest = &text[i + 1..];
                let Some(end) = rest.find('"') else { continue };
                let name = &rest[..end];
                if name.contains(' ') || name.contains('{') || name.contains('\\') {
                    continue; // prose or a format string, not a name
                }
                if name[4..].bytes().all(|b| b.is_ascii_digit()) {
                    continue; // a manual page's file name (`tma.1`)
                }
                seen += 1;
                let old = RENAMED.iter().any(|(o, _)| *o == name);
                if !old && !follows_convention(name) {
                    bad.push(format!("{}: {name}", p.display()));
                }
            }
        }
    }
    assert!(seen > 15, "found only {seen} names: is the walk broken?");
    assert!(
        bad.is_empty(),
        "names outside the convention:\n{}",
        bad.join("\n")
    );
}

/// A `tma.stat` version 1 document (units `PercentSlots`) and a version 1 `tma.diff` still
/// read: tma diff compares the first and tma report draws the second.
#[test]
fn version_1_documents_still_read() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let v1 = std::fs::read(fixtures.join("diff/zen4-before-synthetic.json")).unwrap();
    assert_eq!(tma_render::recognize(&v1).version(), Some(1));
    assert!(String::from_utf8_lossy(&v1).contains("\"PercentSlots\""));
    let doc: tma_stat::render::doc::StatDoc = serde_json::from_slice(&v1).unwrap();
    assert!(doc
        .intervals
        .iter()
        .flat_map(|i| &i.nodes)
        .any(|n| n.unit == tma_catalog::Unit::PercentSlots));
    // Written again, the same values carry the new spelling.
    let again = serde_json::to_string(&doc).unwrap();
    assert!(again.contains("\"percent_slots\"") && !again.contains("\"PercentSlots\""));
}

/// A `tma.diff` written before the convention (version 1, `PercentSlots`) reads into the
/// current type, and tma report draws it.
#[test]
fn a_version_1_diff_still_reads_and_draws() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/report/zen4.v1.diff.json");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(tma_render::recognize(&bytes).version(), Some(1));
    let doc: tma_diff::doc::DiffDoc = serde_json::from_slice(&bytes).unwrap();
    assert!(doc
        .nodes
        .iter()
        .all(|n| tma_catalog::Unit::names_percent(&n.unit)));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tma"))
        .arg("report")
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("backend_bound_cpu"));
}
