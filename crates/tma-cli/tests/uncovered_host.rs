//! A recording from another machine, imported without `--cpu` (issue "Every perf output a
//! user pastes is read", item 6): its events name the CPU that recorded it, so tma reads it
//! with that CPU's tables and says so in a note, instead of refusing it because this machine
//! has no tables (or reading it with this machine's, which do not fit). The host is faked
//! with `--root`: `roots/zen3` is an AMD EPYC Zen 3 (no tables), `roots/zen5` a Zen 5.
//!
//! The recordings are the real runs of tests/fixtures/import/real/ (each folder's
//! source.json cites where it was published and names the CPU that recorded it).

use std::path::PathBuf;

use serde_json::Value;
use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

const FORMS: &[&str] = &["perf-output.txt", "perf-stat.csv", "perf-stat.json"];

/// The real recordings (those stat_import_real.rs checks against perf's printed values).
const RECORDINGS: &[&str] = &[
    "zen4-copyif-blog-l1",
    "zen4-benchpicalc-AvxPi-1",
    "zen4-kinematics-OmpSimdSim-gcc",
    "adl-lkml-2023-hybrid-json",
    "adl-lkml-2025-perf6.16",
    "tgl-lkml-2023-skippable-b",
    "icl-lkml-2025-pickevsel-after",
    "skl-lkml-2022-andi-topdownl1",
    "spr-lkml-2026-kvm-topdown-host",
    "spr-lkml-2026-kvm-topdown-guest",
    "spr-lkml-2025-dapeng-topdownl1",
    "spr-lkml-2025-dapeng-topdownl2",
    "adl-lkml-2023-hybrid-topdownl2-core",
    "adl-lkml-2023-hybrid-topdownl2",
    "clx-lkml-2023-skippable-kan",
    "tgl-perfwiki-memcpy-topdownl1",
    "tgl-perfwiki-memcpy-backend-group",
    "tgl-perfwiki-memcpy-core-group",
    "tgl-perfwiki-memcpy-ports-group",
];

/// Each recording's folder and source.json.
fn recordings() -> Vec<(PathBuf, Value)> {
    RECORDINGS
        .iter()
        .map(|name| {
            let dir = fixture(&format!("import/real/{name}"));
            let src = std::fs::read(dir.join("source.json")).unwrap();
            (dir, serde_json::from_slice(&src).unwrap())
        })
        .collect()
}

/// The documents of a `--json` output: one per tree (two for a hybrid recording).
fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(|d| d.expect("valid JSON"))
        .collect()
}

/// What a tree shows: each interval's computed nodes, with their values, and whether each
/// value perf printed agrees (nodes no table computes from the recording may differ in name
/// between tables that show the same numbers: Ice Lake's `L3_Miss_Bound`, Tiger Lake's
/// `DRAM_Bound`).
fn trees(docs: &[Value]) -> Vec<Value> {
    docs.iter()
        .map(|d| {
            let ivs: Vec<Value> = d["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .map(|iv| {
                    let nodes: Vec<Value> = iv["nodes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|n| !n["value"].is_null() || n.get("perf").is_some())
                        .map(|n| {
                            serde_json::json!([
                                n["name"],
                                n["value"],
                                n.get("perf").map(|p| p["agrees"].clone())
                            ])
                        })
                        .collect();
                    Value::Array(nodes)
                })
                .collect();
            serde_json::json!([d["core_type"], ivs])
        })
        .collect()
}

#[test]
fn real_recordings_without_cpu_on_a_host_without_tables_read_as_with_it() {
    for (dir, src) in recordings() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let cpu = src["cpu"].as_str().unwrap();
        let level = src["level"].to_string();
        let smt = src["smt"].as_str().unwrap_or("off");
        for form in FORMS {
            let file = dir.join(form);
            let file = file.to_str().unwrap();
            let args = [
                "stat", "--import", file, "-l", &level, "--smt", smt, "-v", "--json",
            ];
            let with = TMA
                .with_root("zen3")
                .args(args)
                .args(["--cpu", cpu])
                .output()
                .unwrap();
            assert!(with.status.success(), "{name}/{form}: {}", stderr(&with));
            let without = TMA.with_root("zen3").args(args).output().unwrap();
            let err = stderr(&without);
            assert!(without.status.success(), "{name}/{form}: {err}");
            let docs = documents(&stdout(&without));
            let key = docs[0]["cpu"]["key"].as_str().unwrap().to_string();
            assert_eq!(
                docs[0]["cpu"]["chosen"], "from the recording's events",
                "{name}/{form}"
            );
            let note = err
                .lines()
                .find(|l| l.starts_with("tma: note: no --cpu:"))
                .unwrap_or_else(|| panic!("{name}/{form}: no note in {err}"));
            assert!(
                note.contains(&format!("holds the events of the {key} tables"))
                    && note.contains("this machine (AuthenticAMD-25-1-1) has no tables"),
                "{name}/{form}: {note}"
            );
            // The table chosen is the recording's, or one that shows the same tree: every
            // value, and every value perf printed agreeing as with --cpu.
            assert_eq!(
                trees(&docs),
                trees(&documents(&stdout(&with))),
                "{name}/{form}: read with {key}, recorded on {cpu}"
            );
        }
    }
}

#[test]
fn the_tables_named_are_the_recordings_where_perfs_values_tell() {
    // perf printed the level-1 values it computed with the Zen 4 tables: the Zen 5 ones
    // (8 dispatch slots, not 6) know the same events but give other values.
    let file = fixture("import/real/zen4-copyif-blog-l1/perf-stat.csv");
    let file = file.to_str().unwrap();
    for root in ["zen3", "zen5"] {
        let o = TMA
            .with_root(root)
            .args(["stat", "--import", file])
            .output()
            .unwrap();
        assert!(o.status.success(), "{root}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.starts_with("AMD Zen 4 (zen4, from the recording's events)"),
            "{root}: {out}"
        );
        assert!(
            out.contains("perf printed 4 values for these nodes; tma agrees with each"),
            "{root}: {out}"
        );
    }
    let err = stderr(
        &TMA.with_root("zen5")
            .args(["stat", "--import", file])
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("perf's printed values are not those of this machine's zen5 tables"),
        "{err}"
    );
}

#[test]
fn a_host_with_tables_that_do_not_know_the_events_reads_them_with_the_recordings() {
    let file = fixture("import/real/spr-lkml-2025-dapeng-topdownl2/perf-output.txt");
    let o = TMA
        .with_root("zen5")
        .args(["stat", "--import", file.to_str().unwrap(), "-l", "2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("Sapphire Rapids (spr, from the recording's events)"),
        "{}",
        stdout(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains("this machine's zen5 tables do not know them all (--cpu NAME picks another)"),
        "{err}"
    );
    // --cpu still decides.
    let o = TMA
        .with_root("zen5")
        .args(["stat", "--import", file.to_str().unwrap(), "--cpu", "emr"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("(emr, from --cpu)"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("no --cpu"), "{}", stderr(&o));
}

#[test]
fn a_recording_of_this_machine_is_read_as_before() {
    let file = fixture("import/zen4-sha256-synthetic.csv");
    let o = TMA
        .with_root("zen5")
        .args(["stat", "--import", file.to_str().unwrap()])
        .output()
        .unwrap();
    // The Zen 5 tables know every Zen 4 event of this file, and perf printed no values:
    // this machine's tables read it, as before.
    assert!(
        stdout(&o).starts_with("AMD Zen 5 (zen5, identified from this machine)"),
        "{}",
        stdout(&o)
    );
    assert!(!stderr(&o).contains("no --cpu"), "{}", stderr(&o));
}

/// A perf stat -x, file of these rows (value, event).
fn csv(rows: &[(u64, &str)]) -> tempfile::NamedTempFile {
    use std::io::Write;
    let mut f = tempfile::Builder::new().suffix(".csv").tempfile().unwrap();
    for (v, e) in rows {
        writeln!(f, "{v},,{e},1000000,100.00,,").unwrap();
    }
    f
}

#[test]
fn events_that_fit_tables_with_different_trees_ask_for_cpu_in_one_line() {
    // Zen 4 and Zen 5 name these events alike and differ in their slots per cycle; perf
    // printed no value to tell them apart.
    let f = csv(&[
        (62_366_721_033, "de_src_op_disp.all"),
        (30_857_165_236, "ls_not_halted_cyc"),
        (62_341_441_785, "ex_ret_ops"),
        (
            120_535_278_946,
            "de_no_dispatch_per_slot.no_ops_from_frontend",
        ),
        (2_266_091_111, "de_no_dispatch_per_slot.backend_stalls"),
    ]);
    let o = TMA
        .with_root("zen3")
        .args(["stat", "--import", f.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no --cpu, and its events fit the tables of zen4, zen5, which give different trees; pass --cpu NAME"),
        "{err}"
    );
    assert!(err.len() < 300, "{} characters: {err}", err.len());
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

#[test]
fn a_real_run_whose_tables_give_different_trees_asks_for_cpu_naming_them() {
    // The Neoverse N2 TopDownL1 run: the N2, N3, V1, V2 and V3 tables all know its events;
    // without BR_MIS_PRED only retiring is computed, and perf's value of it is matched by
    // more than one of them (source.json), so nothing tells them apart.
    let dir = fixture("import/real/neoverse-n2-lkml-2023-v7-topdownl1");
    for form in FORMS {
        let file = dir.join(form);
        let o = TMA
            .with_root("zen3")
            .args(["stat", "--import", file.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{form}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{form}: {err}");
        assert!(
            err.contains("no --cpu, and its events fit the tables of ")
                && err.contains("neoverse-n2")
                && err.contains("which give different trees; pass --cpu NAME"),
            "{form}: {err}"
        );
        // Named, it reads.
        let o = TMA
            .with_root("zen3")
            .args(["stat", "--import", file.to_str().unwrap()])
            .args(["--cpu", "neoverse-n2"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{form}: {}", stderr(&o));
    }
}

#[test]
fn events_of_no_table_on_a_host_without_tables_are_one_line() {
    let f = csv(&[(1000, "no_such.event"), (2000, "nor_this.one")]);
    let o = TMA
        .with_root("zen3")
        .args(["stat", "--import", f.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no --cpu, this machine (AuthenticAMD-25-1-1) has no tables, and its events are those of none of tma's tables; pass --cpu NAME"),
        "{err}"
    );
    assert!(!err.contains("--import FILE"), "{err}");
}

#[test]
fn list_and_events_without_cpu_on_a_host_without_tables_are_one_short_line() {
    for args in [
        &["list"][..],
        &["list", "-l", "2"],
        &["events"],
        &["events", "--perf-cmd"],
    ] {
        let o = TMA.with_root("zen3").args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(
                "tma: error: no tables for this machine's CPU, AuthenticAMD-25-1-1 (AMD Zen 3"
            ) && err.contains("pass --cpu NAME (skx clx icx spr")
                && err.contains("zen4 zen5"),
            "{args:?}: {err}"
        );
        // Not the catalog's 900 characters with every alias, nor --import advice.
        assert!(err.len() < 300, "{args:?}: {} characters: {err}", err.len());
        assert!(!err.contains("--import"), "{args:?}: {err}");
        // With --cpu they work on any host.
        let o = TMA
            .with_root("zen3")
            .args(args)
            .args(["--cpu", "spr"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}
