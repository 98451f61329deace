//! Hybrid parts with `-I`: each interval prints every core type's tree and the
//! merged view before the next interval, in every format; and a `perf stat` recording of
//! three core types imports as one tree per type. Without a PMU: the fake sysfs trees and
//! synthetic counts of `tests/fixtures/hybrid` (its README says how each file was made).

use std::process::Output;

use serde_json::Value;
use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

const TYPES: [&str; 4] = ["P-core", "E-core", "cpu_lowpower", "merged"];

/// `tma --root tests/fixtures/hybrid/three-types stat --cpu adl --synthetic-backend
/// three-types.json -a --duration 1` and `args`.
fn three_types(args: &[&str]) -> Output {
    let mut c = TMA.bare();
    c.arg("--root")
        .arg(fixture("hybrid/three-types"))
        .args(["stat", "--cpu", "adl", "--synthetic-backend"])
        .arg(fixture("hybrid/three-types.json"))
        .args(["-a", "--duration", "1"])
        .args(args);
    let o = c.output().expect("run tma");
    assert!(o.status.success(), "{}", stderr(&o));
    o
}

fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(|d| d.expect("valid JSON"))
        .collect()
}

/// Check that `seen` (interval start, tree) is every tree of each interval in `TYPES`
/// order, interval after interval; the number of intervals.
fn interleaved(seen: &[(f64, String)]) -> usize {
    assert_eq!(seen.len() % TYPES.len(), 0, "{seen:?}");
    for (k, chunk) in seen.chunks(TYPES.len()).enumerate() {
        let names: Vec<&str> = chunk.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(names, TYPES, "interval {k}: {seen:?}");
        let start = 0.25 * k as f64;
        assert!(
            chunk.iter().all(|s| (s.0 - start).abs() < 1e-9),
            "interval {k}: {seen:?}"
        );
    }
    seen.len() / TYPES.len()
}

#[test]
fn interval_text_prints_every_core_type_then_the_merged_view_for_each_interval() {
    let text = stdout(&three_types(&["-I", "250"]));
    // `--- interval 0.250 s .. 0.500 s, E-core tree ---`
    let seen: Vec<(f64, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("--- interval ")?.strip_suffix(" ---"))
        .map(|rule| {
            let (span, tree) = rule.split_once(", ").unwrap();
            let start: f64 = span.split(' ').next().unwrap().parse().unwrap();
            let tree = tree
                .strip_suffix(" tree")
                .or(tree.strip_suffix(" view"))
                .unwrap();
            (start, tree.to_string())
        })
        .collect();
    assert_eq!(interleaved(&seen), 4, "{text}");
    // Every tree's header before the first interval, each tree's closing lines after the
    // last.
    let first = text.find("--- interval").unwrap();
    for head in [
        "P-core tree: the cpu_core events",
        "E-core tree: the cpu_atom events",
        "cpu_lowpower tree: the cpu_lowpower events",
        "merged view: the core types' trees weighted by their cycles in each interval",
    ] {
        let at = text.find(head).unwrap_or_else(|| panic!("{head}: {text}"));
        assert!(at < first, "{head}: {text}");
    }
    let last = text.rfind("--- interval").unwrap();
    for tree in [
        "P-core tree",
        "E-core tree",
        "cpu_lowpower tree",
        "merged view",
    ] {
        let closing = format!("--- the whole run ({tree}): 4 intervals, 0.000 s .. 1.000 s");
        let at = text
            .find(&closing)
            .unwrap_or_else(|| panic!("{closing}: {text}"));
        assert!(at > last, "{closing}: {text}");
    }
    // Each tree's values: the E-cores' 30/10/40/20 %, the low-power cores' 20/5/50/25 %.
    let tree_after = |rule: &str| {
        let at = text.find(rule).unwrap();
        text[at..].lines().nth(3).unwrap().to_string()
    };
    assert!(
        tree_after("0.750 s .. 1.000 s, E-core tree").starts_with("Backend_Bound       40.0%"),
        "{text}"
    );
    assert!(
        tree_after("0.750 s .. 1.000 s, cpu_lowpower tree")
            .starts_with("Backend_Bound       50.0%"),
        "{text}"
    );
}

#[test]
fn compact_csv_and_json_say_each_intervals_tree() {
    // --compact: one line per tree and interval, its tree in a column.
    let text = stdout(&three_types(&["-I", "250", "--compact"]));
    let head = text.lines().position(|l| l.contains("end (s)")).unwrap();
    let header = text.lines().nth(head).unwrap();
    assert!(
        header.contains("  tree  ") || header.contains("  tree "),
        "{header}"
    );
    let seen: Vec<(f64, String)> = text
        .lines()
        .skip(head + 1)
        .map(|l| {
            let mut w = l.split_whitespace();
            let end: f64 = w.next().unwrap().parse().unwrap();
            (end - 0.25, w.next().unwrap().to_string())
        })
        .collect();
    assert_eq!(interleaved(&seen), 4, "{text}");
    // CSV: one header, every row led by its core type, interval after interval.
    let csv = stdout(&three_types(&["-I", "250", "--csv"]));
    assert_eq!(csv.matches("core_type,start_s,").count(), 1, "{csv}");
    let mut seen: Vec<(f64, String)> = Vec::new();
    for l in csv.lines().skip(1) {
        let mut f = l.split(',');
        let (t, start) = (f.next().unwrap(), f.next().unwrap().parse().unwrap());
        if seen.last() != Some(&(start, t.to_string())) {
            seen.push((start, t.to_string()));
        }
    }
    assert_eq!(interleaved(&seen), 4, "{csv}");
    // JSON: a tma.stat document per tree and interval, its core type in the head.
    let docs = documents(&stdout(&three_types(&["-I", "250", "--json"])));
    let seen: Vec<(f64, String)> = docs
        .iter()
        .map(|d| {
            assert_eq!(d["schema"], "tma.stat");
            assert_eq!(d["intervals"].as_array().unwrap().len(), 1, "{d}");
            (
                d["intervals"][0]["start_s"].as_f64().unwrap(),
                d["core_type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(interleaved(&seen), 4);
    // --plot draws the merged view's timeline.
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    three_types(&["-I", "250", "--compact", "--plot", svg.to_str().unwrap()]);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{svg}");
    // Without -I: a tree per type, one after the other, as before.
    let docs = documents(&stdout(&three_types(&["--json"])));
    let types: Vec<&str> = docs
        .iter()
        .map(|d| d["core_type"].as_str().unwrap())
        .collect();
    assert_eq!(types, TYPES);
}

/// One document's tree: its core type, its table (CPU key) and its level-1 nodes with their values.
type Level1 = (String, String, Vec<(String, f64)>);

/// Node name -> value of the first interval of each document, by core type.
fn level1(docs: &[Value]) -> Vec<Level1> {
    docs.iter()
        .map(|d| {
            let nodes = d["intervals"][0]["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| {
                    (
                        n["name"].as_str().unwrap().to_string(),
                        n["value"].as_f64().unwrap(),
                    )
                })
                .collect();
            (
                d["core_type"].as_str().unwrap().to_string(),
                d["cpu"]["key"].as_str().unwrap().to_string(),
                nodes,
            )
        })
        .collect()
}

/// Each tree of `a` has the values of the tree of `b` in the same place.
fn same_trees(a: &[Level1], b: &[Level1]) {
    assert_eq!(a.len(), b.len());
    for ((t, _, nodes), (u, _, want)) in a.iter().zip(b) {
        assert_eq!(t, u);
        assert_eq!(nodes.len(), want.len(), "{t}");
        for ((n, x), (m, y)) in nodes.iter().zip(want) {
            assert_eq!(n, m);
            assert!((x - y).abs() < 1e-9, "{t} {n}: imported {x}, live {y}");
        }
    }
}

#[test]
fn a_recording_of_three_core_types_imports_as_a_tree_per_type() {
    let rec = fixture("hybrid/three-types-perf-stat.csv");
    let o = TMA.run(&[
        "stat",
        "--import",
        rec.to_str().unwrap(),
        "--cpu",
        "adl",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "holds 3 core types of a hybrid part, one tree each: P-core (cpu_core events, adl \
             table), E-core (cpu_atom events, adl-e table), cpu_lowpower (cpu_lowpower events; \
             no table of its own: read as E-cores, with the adl-e table)"
        ),
        "{}",
        stderr(&o)
    );
    let imported = level1(&documents(&stdout(&o)));
    let kinds: Vec<(&str, &str)> = imported
        .iter()
        .map(|(t, k, _)| (t.as_str(), k.as_str()))
        .collect();
    // Every type's cycles are in the recording: the merged view too, as live.
    assert_eq!(
        kinds,
        [
            ("P-core", "adl"),
            ("E-core", "adl-e"),
            ("cpu_lowpower", "adl-e"),
            ("merged", "adl")
        ]
    );
    // The same counts counted live (synthetic) give the same trees.
    let live = level1(&documents(&stdout(&three_types(&["--json"]))));
    same_trees(&imported, &live);
    // An interval recording: each interval's trees interleaved, as live with -I.
    let rec_i = fixture("hybrid/three-types-perf-stat-interval.csv");
    let o = TMA.run(&[
        "stat",
        "--import",
        rec_i.to_str().unwrap(),
        "--cpu",
        "adl",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let imported = documents(&stdout(&o));
    let live = documents(&stdout(&three_types(&["-I", "500", "--json"])));
    let order = |docs: &[Value]| -> Vec<(f64, String)> {
        docs.iter()
            .map(|d| {
                (
                    d["intervals"][0]["start_s"].as_f64().unwrap(),
                    d["core_type"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let seen = order(&imported);
    assert_eq!(seen.len(), 8, "{seen:?}");
    for (k, chunk) in seen.chunks(TYPES.len()).enumerate() {
        let names: Vec<&str> = chunk.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(names, TYPES, "interval {k}: {seen:?}");
    }
    let names = |docs: &[Value]| -> Vec<String> { order(docs).into_iter().map(|x| x.1).collect() };
    assert_eq!(names(&imported), names(&live));
    same_trees(&level1(&imported), &level1(&live));
    // diff reads one type's tree: the P-cores' with --cpu adl.
    let o = TMA.run(&[
        "diff",
        rec.to_str().unwrap(),
        rec.to_str().unwrap(),
        "--cpu",
        "adl",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds 3 core types of a hybrid part; this reads the P-core tree"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn diff_and_report_read_one_core_types_tree_of_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hybrid.json");
    let o = three_types(&["-I", "250", "--json", "-o", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // diff: the type whose table --cpu names, its four intervals.
    let j = json.to_str().unwrap();
    let o = TMA.run(&["diff", j, j, "--cpu", "adl-e"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("(adl-e): before"), "{text}");
    assert!(text.contains("(4 intervals)"), "{text}");
    assert!(text.contains("Backend_Bound        40.0%"), "{text}");
    // report: the first type's (the P-cores').
    let html = dir.path().join("r.html");
    let o = TMA.run(&["report", j, "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("P-core tree: the cpu_core events"), "report");
    assert!(!page.contains("E-core tree: the cpu_atom events"), "report");
}

#[test]
fn one_core_types_error_stops_the_import_and_is_said() {
    // The E-cores' frontend event misspelled in the first interval: --strict refuses it,
    // tolerant reading names it and goes on.
    let text = std::fs::read_to_string(fixture("hybrid/three-types-perf-stat-interval.csv"))
        .unwrap()
        .replacen("cpu_atom/TOPDOWN_FE_BOUND.ALL/", "cpu_atom/BOGUS.EVENT/", 1);
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, text).unwrap();
    let bad = bad.to_str().unwrap();
    let o = TMA.run(&["stat", "--import", bad, "--cpu", "adl", "--strict"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cpu_atom/BOGUS.EVENT/"),
        "{}",
        stderr(&o)
    );
    let o = TMA.run(&["stat", "--import", bad, "--cpu", "adl", "--compact"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ignored 1 event of") && stderr(&o).contains("BOGUS.EVENT"),
        "{}",
        stderr(&o)
    );
    let merged = stdout(&o)
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("merged"))
        .count();
    assert_eq!(merged, 2, "{}", stdout(&o));
}
