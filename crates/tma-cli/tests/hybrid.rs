//! Hybrid parts: every core type counted in one run, without a PMU:
//! fake sysfs trees with two and three core types (`tests/fixtures/hybrid/*/`, `--root`)
//! and the synthetic backend's counts per core type (`--synthetic-backend`, counts named
//! `cpu_core/NAME`, `cpu_atom/NAME`...). The README of `tests/fixtures/hybrid` says how each
//! file was made.

use std::process::Output;

use serde_json::Value;
use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// `tma --root tests/fixtures/hybrid/<root> stat --cpu adl --synthetic-backend <counts>`
/// and `args`.
fn stat(root: &str, counts: &str, args: &[&str]) -> Output {
    let mut c = TMA.bare();
    c.arg("--root")
        .arg(fixture("hybrid").join(root))
        .args(["stat", "--cpu", "adl", "--synthetic-backend"])
        .arg(fixture("hybrid").join(counts))
        .args(args);
    c.output().expect("run tma")
}

fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(|d| d.expect("valid JSON"))
        .collect()
}

/// The documents of an interval run of every core type (one per tree and interval, each
/// interval's trees together) joined into one per tree: its intervals in order.
fn joined(docs: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for d in docs {
        let same = |o: &Value| o["core_type"] == d["core_type"] && o["source"] == d["source"];
        match out.iter_mut().find(|o| same(o)) {
            Some(o) => {
                let more = d["intervals"].as_array().cloned().unwrap_or_default();
                o["intervals"].as_array_mut().unwrap().extend(more);
            }
            None => out.push(d),
        }
    }
    out
}

/// The documents of a run by core type: (core type, table key, document).
fn by_type(docs: &[Value]) -> Vec<(String, String, &Value)> {
    docs.iter()
        .map(|d| {
            (
                d["core_type"].as_str().unwrap_or("-").to_string(),
                d["cpu"]["key"].as_str().unwrap().to_string(),
                d,
            )
        })
        .collect()
}

/// Node name -> value of interval `k` of a document.
fn values(doc: &Value, k: usize) -> Vec<(String, Option<f64>)> {
    doc["intervals"][k]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap().to_string(), n["value"].as_f64()))
        .collect()
}

fn value(doc: &Value, k: usize, node: &str) -> Option<f64> {
    values(doc, k)
        .into_iter()
        .find(|(n, _)| n == node)
        .and_then(|(_, v)| v)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

const LEVEL1: [&str; 4] = [
    "Frontend_Bound",
    "Bad_Speculation",
    "Backend_Bound",
    "Retiring",
];

#[test]
fn the_adl_recordings_counts_give_the_same_trees_live_and_imported() {
    // Imported: the real perf 6.16 recording of both core types.
    let rec = fixture("import/real/adl-lkml-2025-perf6.16/perf-output.txt");
    let o = TMA.run(&[
        "stat",
        "--import",
        rec.to_str().unwrap(),
        "--cpu",
        "adl",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let imported = documents(&stdout(&o));
    // Counted live (synthetic backend) on a fake two-type sysfs, with the same counts.
    let o = stat(
        "two-types",
        "adl-perf6.16.json",
        &["-a", "--duration", "1", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 core types, each counted with its own table in one run"),
        "{}",
        stderr(&o)
    );
    let live = documents(&stdout(&o));
    let kinds: Vec<(String, String)> = by_type(&live).into_iter().map(|(t, k, _)| (t, k)).collect();
    assert_eq!(
        kinds,
        [
            ("P-core".into(), "adl".into()),
            ("E-core".into(), "adl-e".into()),
            ("merged".into(), "adl".into())
        ]
    );
    for (t, _, imp) in by_type(&imported) {
        let (_, _, l) = by_type(&live).into_iter().find(|x| x.0 == t).unwrap();
        let (a, b) = (values(imp, 0), values(l, 0));
        assert_eq!(a.len(), b.len(), "{t}");
        for ((na, va), (nb, vb)) in a.iter().zip(&b) {
            assert_eq!(na, nb);
            let (va, vb) = (va.unwrap(), vb.unwrap());
            assert!(close(va, vb), "{t} {na}: imported {va}, live {vb}");
        }
        // Each type's counts are its own: nothing was scaled for time on the other type.
        for n in l["intervals"][0]["nodes"].as_array().unwrap() {
            assert_eq!(n["counted_share"].as_f64(), Some(1.0), "{t} {n}");
        }
    }
    // The merged view: each node the mean of the two trees weighted by their cycles.
    let docs = by_type(&live);
    let (p, e, m) = (docs[0].2, docs[1].2, docs[2].2);
    let (pc, ec) = (1_847_792_443.0, 1_185_093_601.0);
    for node in LEVEL1 {
        let want = (value(p, 0, node).unwrap() * pc + value(e, 0, node).unwrap() * ec) / (pc + ec);
        let got = value(m, 0, node).unwrap();
        assert!(close(got, want), "merged {node}: {got} vs {want}");
    }
    let shares = format!(
        "cycles by core type: P-core {:.1}%, E-core {:.1}%",
        100.0 * pc / (pc + ec),
        100.0 * ec / (pc + ec)
    );
    assert!(stderr(&o).contains(&shares), "{}", stderr(&o));
}

#[test]
fn a_recorded_run_of_every_core_type_replays_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("hybrid.json");
    let o = stat(
        "two-types",
        "adl-perf6.16.json",
        &[
            "-a",
            "--duration",
            "1",
            "-l",
            "2",
            "--json",
            "--record",
            snap.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let live = stdout(&o);
    let mut c = TMA.bare();
    c.arg("--root").arg(fixture("hybrid/two-types")).args([
        "stat",
        "--import",
        snap.to_str().unwrap(),
        "--json",
    ]);
    let r = c.output().unwrap();
    assert!(r.status.success(), "{}", stderr(&r));
    let (a, b) = (documents(&live), documents(&stdout(&r)));
    assert_eq!(a.len(), 3);
    assert_eq!(by_type(&a).len(), by_type(&b).len());
    for (x, y) in by_type(&a).iter().zip(by_type(&b).iter()) {
        assert_eq!((&x.0, &x.1), (&y.0, &y.1));
        assert_eq!(values(x.2, 0), values(y.2, 0), "{}", x.0);
        assert_eq!(x.2["intervals"][0]["nodes"], y.2["intervals"][0]["nodes"]);
    }
    // diff (and report) compare one tree: the core type of the table --cpu names.
    for (cpu, tree) in [("adl", "P-core"), ("adl-e", "E-core")] {
        let o = TMA.run(&[
            "diff",
            snap.to_str().unwrap(),
            snap.to_str().unwrap(),
            "--cpu",
            cpu,
        ]);
        assert!(o.status.success(), "{cpu}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("this reads the {tree} tree")),
            "{}",
            stderr(&o)
        );
        assert!(
            stdout(&o).contains(&format!("({cpu}): before")),
            "{}",
            stdout(&o)
        );
    }
    // Level 2: nodes of one core type's tree only are marked in the merged view.
    let merged = by_type(&a)[2].2;
    let only: Vec<(String, String)> = merged["intervals"][0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| {
            Some((
                n["name"].as_str()?.to_string(),
                n["only_on"].as_str()?.to_string(),
            ))
        })
        .collect();
    assert!(
        only.contains(&("Memory_Bound".into(), "P-core".into())),
        "{only:?}"
    );
    assert!(
        only.contains(&("Resource_Bound".into(), "E-core".into())),
        "{only:?}"
    );
    assert!(!only.iter().any(|(n, _)| n == "Core_Bound"), "{only:?}");
    // Under its parent, in the text too.
    let o = stat(
        "two-types",
        "adl-perf6.16.json",
        &["-a", "--duration", "1", "-l", "2"],
    );
    let text = stdout(&o);
    let merged = &text[text.find("merged view").unwrap()..];
    let backend = merged.find("\nBackend_Bound").unwrap();
    let resource = merged.find("  Resource_Bound").unwrap();
    let retiring = merged.find("\nRetiring").unwrap();
    assert!(backend < resource && resource < retiring, "{merged}");
    assert!(
        merged[resource..]
            .lines()
            .next()
            .unwrap()
            .ends_with("E-core only"),
        "{merged}"
    );
}

#[test]
fn three_core_types_in_one_run() {
    let o = stat(
        "three-types",
        "three-types.json",
        &["-a", "--duration", "1", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("3 core types"), "{err}");
    assert!(
        err.contains("cpu_lowpower (no table of its own: read as E-cores, with the adl-e table)"),
        "{err}"
    );
    assert!(
        err.contains("cycles by core type: P-core 50.0%, E-core 30.0%, cpu_lowpower 20.0%"),
        "{err}"
    );
    let docs = documents(&stdout(&o));
    let kinds: Vec<(String, String)> = by_type(&docs).into_iter().map(|(t, k, _)| (t, k)).collect();
    assert_eq!(
        kinds,
        [
            ("P-core".into(), "adl".into()),
            ("E-core".into(), "adl-e".into()),
            ("cpu_lowpower".into(), "adl-e".into()),
            ("merged".into(), "adl".into())
        ]
    );
    // Each E-core-like type reads its own counts (5 slots per cycle on adl-e): the
    // E-cores' are 30/10/40/20 %, the low-power cores' 20/5/50/25 %.
    let d = by_type(&docs);
    let want = [(1, [30.0, 10.0, 40.0, 20.0]), (2, [20.0, 5.0, 50.0, 25.0])];
    for (i, vals) in want {
        for (node, v) in LEVEL1.iter().zip(vals) {
            let got = value(d[i].2, 0, node).unwrap();
            assert!(close(got, v), "{} {node}: {got} vs {v}", d[i].0);
        }
    }
    // The low-power type's events are its own PMU's (cpu_lowpower/…), not cpu_atom's.
    let lp_cycles = d[2].2["intervals"][0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "CPU_CLK_UNHALTED.CORE")
        .unwrap()["value"]
        .as_f64();
    assert_eq!(lp_cycles, Some(400_000_000.0));
    // Merged: weighted by 1e9, 6e8 and 4e8 cycles.
    let w = [1e9, 6e8, 4e8];
    for node in LEVEL1 {
        let want: f64 = (0..3)
            .map(|i| value(d[i].2, 0, node).unwrap() * w[i])
            .sum::<f64>()
            / w.iter().sum::<f64>();
        let got = value(d[3].2, 0, node).unwrap();
        assert!(close(got, want), "merged {node}: {got} vs {want}");
    }
    // CSV rows carry the core type.
    let o = stat(
        "three-types",
        "three-types.json",
        &["-a", "--duration", "1", "--csv"],
    );
    let csv = stdout(&o);
    for t in ["P-core,", "E-core,", "cpu_lowpower,", "merged,"] {
        assert!(csv.lines().any(|l| l.starts_with(t)), "{t}: {csv}");
    }
}

#[test]
fn a_thread_that_migrates_mid_run() {
    // Thread 101 runs on the P-cores for the first second, on the E-cores for the second;
    // thread 102 on the E-cores throughout.
    let o = stat(
        "two-types",
        "migrating-thread.json",
        &["-t", "101,102", "--per-thread", "-I", "1s", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    for line in [
        "cycles by core type: P-core 25.0%, E-core 75.0%",
        "cycles by core type, thread 101: P-core 50.0%, E-core 50.0%",
        "cycles by core type, thread 102: P-core 0.0%, E-core 100.0%",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
    // Each type's groups ran together (no turns within a type): no estimate to note.
    assert!(!err.contains("took turns"), "{err}");
    let docs = joined(documents(&stdout(&o)));
    let d = by_type(&docs);
    let p = d
        .iter()
        .find(|x| x.0 == "P-core" && x.2["source"].as_str().unwrap().ends_with("events"))
        .unwrap()
        .2;
    let e = d
        .iter()
        .find(|x| x.0 == "E-core" && x.2["source"].as_str().unwrap().ends_with("events"))
        .unwrap()
        .2;
    let m = d.iter().find(|x| x.0 == "merged").unwrap().2;
    // P-cores: the first second only (thread 101); nothing ran there in the second.
    assert!(close(value(p, 0, "Retiring").unwrap(), 40.0));
    assert_eq!(value(p, 1, "Retiring"), None);
    // E-cores: thread 102, then both; the counts are what the E-cores counted (not blown up
    // for the time the threads spent elsewhere) and fully counted.
    for k in 0..2 {
        assert!(close(value(e, k, "Retiring").unwrap(), 20.0));
        for n in e["intervals"][k]["nodes"].as_array().unwrap() {
            assert_eq!(n["counted_share"].as_f64(), Some(1.0), "{n}");
        }
    }
    let cycles = |k: usize| {
        e["intervals"][k]["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["event"] == "CPU_CLK_UNHALTED.CORE")
            .unwrap()["value"]
            .as_f64()
            .unwrap()
    };
    assert_eq!((cycles(0), cycles(1)), (1e9, 2e9));
    // Merged: half and half in the first second, the E-cores alone in the second.
    assert!(close(value(m, 0, "Retiring").unwrap(), 30.0));
    assert!(close(value(m, 1, "Retiring").unwrap(), 20.0));
    // The per-thread trees: thread 101 on both types, thread 102 on the E-cores only.
    let text = stdout(&stat(
        "two-types",
        "migrating-thread.json",
        &["-t", "101,102", "--per-thread", "-I", "1s"],
    ));
    assert!(
        text.contains("P-core tree: the cpu_core events, thread 101"),
        "{text}"
    );
    assert!(
        !text.contains("P-core tree: the cpu_core events, thread 102"),
        "{text}"
    );
    assert!(
        text.contains("E-core tree: the cpu_atom events, thread 101"),
        "{text}"
    );
    assert!(
        text.contains("E-core tree: the cpu_atom events, thread 102"),
        "{text}"
    );
}

#[test]
fn cputype_counts_one_core_type() {
    let o = stat(
        "three-types",
        "three-types.json",
        &["-a", "--duration", "1", "--cputype", "atom", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let docs = documents(&stdout(&o));
    let kinds: Vec<(String, String)> = by_type(&docs).into_iter().map(|(t, k, _)| (t, k)).collect();
    assert_eq!(kinds, [("E-core".to_string(), "adl-e".to_string())]);
    assert!(close(value(&docs[0], 0, "Backend_Bound").unwrap(), 40.0));
    // Recorded, it replays as that type's tree, still marked.
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("atom.json");
    let o = stat(
        "two-types",
        "adl-perf6.16.json",
        &[
            "-a",
            "--duration",
            "1",
            "--cputype",
            "atom",
            "--json",
            "--record",
            snap.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let live = documents(&stdout(&o));
    let o = TMA.run(&["stat", "--import", snap.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let replayed = documents(&stdout(&o));
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["core_type"], "E-core");
    assert_eq!(replayed[0]["cpu"]["key"], "adl-e");
    assert_eq!(values(&live[0], 0), values(&replayed[0], 0));
    // A type without a table of its own, alone.
    let o = stat(
        "three-types",
        "three-types.json",
        &["-a", "--duration", "1", "--cputype", "lowpower", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let docs = documents(&stdout(&o));
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["core_type"], "cpu_lowpower");
    assert!(close(value(&docs[0], 0, "Backend_Bound").unwrap(), 50.0));
    // Unknown type: the machine's types are named.
    let o = stat(
        "three-types",
        "three-types.json",
        &["-a", "--cputype", "big"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("core (P-core), atom (E-core), lowpower (cpu_lowpower)"),
        "{}",
        stderr(&o)
    );
    // --drilldown follows one tree.
    let o = stat(
        "two-types",
        "adl-perf6.16.json",
        &["--drilldown", "--", "true"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--cputype"), "{}", stderr(&o));
    // A uniform machine has no core types to pick from.
    let mut c = TMA.bare();
    c.arg("--root")
        .arg(fixture("roots/spr"))
        .args(["stat", "--cpu", "spr", "--synthetic-backend"])
        .arg(fixture("hybrid/adl-perf6.16.json"))
        .args(["--cputype", "core", "--", "true"]);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("one core type"), "{}", stderr(&o));
}

/// `tma --root ROOT ARGS`.
fn on_root(root: &std::path::Path, args: &[&str]) -> Output {
    TMA.bare()
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .expect("run tma")
}

/// The event specs of a printed perf command (`cpu_…/…/` with their modifiers; the hybrid
/// command gives every event its PMU and no `name=`).
fn specs_of(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = cmd;
    while let Some(i) = rest.find("cpu_") {
        let s = &rest[i..];
        let first = s.find('/').unwrap();
        let second = first + 1 + s[first + 1..].find('/').unwrap();
        let end = second
            + 1
            + s[second + 1..]
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(s.len() - second - 1);
        out.push(s[..end].to_string());
        rest = &s[end..];
    }
    out
}

/// On a machine with a third core type (cpu_lowpower, no table of its own), `tma events
/// --perf-cmd` records it too, with the E-core table's events on its own PMU, and what perf
/// would write for that command imports as a tree per type and the merged view. Events carry
/// no `name=` (perf prints a named event by its name alone, losing its core type).
#[test]
fn events_perf_cmd_records_every_core_type_of_this_machine() {
    let root = fixture("hybrid").join("three-types");
    let o = on_root(
        &root,
        &[
            "events",
            "--cpu",
            "adl",
            "-l",
            "2",
            "--perf-cmd",
            "--",
            "./app",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("# This machine's 3 core types"), "{text}");
    assert!(
        text.contains("# cpu_lowpower (cpu_lowpower, no table of its own: the adl-e table's events on its PMU)"),
        "{text}"
    );
    let cmd = text.lines().find(|l| l.starts_with("perf stat")).unwrap();
    assert!(!cmd.contains("name="), "{cmd}");
    let specs = specs_of(cmd);
    let on = |pmu: &str| -> Vec<String> {
        specs
            .iter()
            .filter_map(|s| s.strip_prefix(pmu).map(str::to_string))
            .collect()
    };
    // The low-power type records what the E-cores record, on its own PMU.
    assert!(!on("cpu_lowpower/").is_empty());
    assert_eq!(on("cpu_lowpower/"), on("cpu_atom/"), "{cmd}");
    assert!(on("cpu_core/").contains(&"slots/".to_string()), "{cmd}");
    // What perf writes for it (each spec printed as written, half the time counted).
    let mut csv = String::new();
    for (i, s) in specs.iter().enumerate() {
        csv.push_str(&format!(
            "{},,{s},500000000,50.00,,\n",
            1_000_000 + 1000 * i
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf-stat.csv");
    std::fs::write(&f, &csv).unwrap();
    let o = TMA
        .command()
        .args(["stat", "--import"])
        .arg(&f)
        .args(["--cpu", "adl", "-l", "2", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let docs = documents(&stdout(&o));
    let types: Vec<String> = by_type(&docs).into_iter().map(|(t, _, _)| t).collect();
    assert_eq!(
        types,
        ["P-core", "E-core", "cpu_lowpower", "merged"],
        "{csv}"
    );
    for d in &docs {
        for n in d["intervals"][0]["nodes"].as_array().unwrap() {
            assert_ne!(n["status"], "missing_events", "{}: {n}", d["core_type"]);
        }
    }
    // --cputype of a type without a table names what to do instead.
    let o = on_root(
        &root,
        &[
            "events",
            "--cpu",
            "adl",
            "--perf-cmd",
            "--cputype",
            "lowpower",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("cpu_lowpower has no table of its own") && err.contains("--cputype atom"),
        "{err}"
    );
    let o = on_root(&root, &["events", "--cpu", "adl", "--cputype", "big"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "this machine's core types are core (P-core), atom (E-core), lowpower (cpu_lowpower)"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn events_perf_cmd_lists_each_core_type() {
    let o = TMA.run(&["events", "--cpu", "adl", "--perf-cmd"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("# P-core (cpu_core, adl table)"), "{text}");
    assert!(text.contains("# E-core (cpu_atom, adl-e table)"), "{text}");
    let cmd = text.lines().find(|l| l.starts_with("perf stat")).unwrap();
    assert!(
        cmd.contains("cpu_core/slots/") && cmd.contains("cpu_atom/"),
        "{cmd}"
    );
    // Each type's list is its own PMU's events only.
    for (head, pmu, other) in [
        ("# P-core", "cpu_core/", "cpu_atom/"),
        ("# E-core", "cpu_atom/", "cpu_core/"),
    ] {
        let list = text
            .lines()
            .skip_while(|l| !l.starts_with(head))
            .nth(1)
            .unwrap();
        assert!(list.contains(pmu) && !list.contains(other), "{list}");
    }
    let o = TMA.run(&["events", "--cpu", "adl", "--perf-cmd", "--cputype", "atom"]);
    let text = stdout(&o);
    let cmd = text.lines().find(|l| l.starts_with("perf stat")).unwrap();
    assert!(
        cmd.contains("cpu_atom/") && !cmd.contains("cpu_core/"),
        "{cmd}"
    );
}
