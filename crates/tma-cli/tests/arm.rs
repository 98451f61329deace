//! Arm Neoverse end to end: `tma stat --import` of the synthetic recordings in
//! tests/fixtures/import/arm/ (every event spelled the ways perf prints Arm events) against
//! the values Arm's own formulas give on the same counts, evaluated independently by the
//! fixture script (gen.py, `*.expected.json`); and `tma list`, `tma events --perf-cmd`,
//! `tma diff`, `tma report` and `tma serve --replay` on the Arm tables.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tma_testkit::{fixture, fixture_str, stderr, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

const KEYS: [&str; 6] = [
    "neoverse-n1",
    "neoverse-v1",
    "neoverse-n2",
    "neoverse-v2",
    "neoverse-n3",
    "neoverse-v3",
];

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        stderr(o)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn rec(name: &str) -> String {
    fixture_str(&format!("import/arm/{name}"))
}

/// Arm's metric name -> its value on the recording (`None`: an event it needs is missing).
fn expected(name: &str) -> BTreeMap<String, Option<f64>> {
    let text = std::fs::read_to_string(fixture(&format!("import/arm/{name}"))).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["metrics"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, x)| (k.clone(), x.as_f64()))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// The whole tree (every level) and every metric of `tma stat --import FILE --json`.
fn stat_json(key: &str, file: &str) -> Value {
    let out = ok(&TMA.run(&[
        "stat",
        "--import",
        &rec(file),
        "--cpu",
        key,
        "-l",
        "6",
        "-m",
        "all",
        "--json",
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let iv = &v["intervals"];
    assert_eq!(iv.as_array().unwrap().len(), 1, "{file}");
    iv[0].clone()
}

/// Checks every node and metric of the tree against Arm's formulas; returns how many values
/// were compared. `dropped` are the events the recording lacks.
fn check_recording(key: &str, file: &str, expect_file: &str, dropped: &[&str]) -> usize {
    let want = expected(expect_file);
    let iv = stat_json(key, file);
    let mut compared = 0;
    let mut seen_nodes = BTreeSet::new();
    let check = |what: &str, item: &Value, arm: &str, compared: &mut usize| {
        let w = want
            .get(arm)
            .unwrap_or_else(|| panic!("{key}: {what} {arm} is no metric of Arm's file"));
        match w {
            Some(w) => {
                let got = item["value"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{key} {file}: {what} has no value: {item}"));
                assert!(
                    close(got, *w),
                    "{key} {file}: {what} = {got}, Arm's formula gives {w}"
                );
            }
            None => {
                assert!(item["value"].is_null(), "{key} {file}: {what}: {item}");
                assert_eq!(item["status"], "missing_events", "{key}: {what}: {item}");
                let missing: Vec<&str> = item["missing_events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_str().unwrap())
                    .collect();
                assert!(
                    missing.iter().all(|m| dropped.contains(m)) && !missing.is_empty(),
                    "{key}: {what} misses {missing:?}, the recording lacks {dropped:?}"
                );
            }
        }
        *compared += 1;
    };
    for n in iv["nodes"].as_array().unwrap() {
        let name = n["name"].as_str().unwrap();
        // A drill-down node `PARENT__metric` has the metric's value.
        let arm = name.split_once("__").map_or(name, |(_, m)| m);
        check(&format!("node {name}"), n, arm, &mut compared);
        seen_nodes.insert(name.to_string());
    }
    for m in iv["metrics"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        check(&format!("metric {name}"), m, name, &mut compared);
    }
    // Every node of the table was in the output, and every metric of Arm's file was checked
    // (as a node, a metric or both).
    let model = tma_catalog::by_name(key).unwrap();
    let table: BTreeSet<String> = model.nodes.iter().map(|n| n.name.to_string()).collect();
    assert_eq!(seen_nodes, table, "{key}");
    let covered: BTreeSet<&str> = model
        .nodes
        .iter()
        .map(|n| n.name.split_once("__").map_or(n.name, |(_, m)| m))
        .chain(model.metrics.iter().map(|m| m.name))
        .collect();
    for arm in want.keys() {
        assert!(covered.contains(arm.as_str()), "{key}: {arm} not checked");
    }
    compared
}

#[test]
fn every_node_and_metric_equals_arms_formula_on_the_same_counts() {
    for key in KEYS {
        let n = check_recording(
            key,
            &format!("{key}.csv"),
            &format!("{key}.expected.json"),
            &[],
        );
        assert!(n > 60, "{key}: only {n} values compared");
    }
    check_recording(
        "neoverse-v2",
        "neoverse-v2-after.csv",
        "neoverse-v2-after.expected.json",
        &[],
    );
}

#[test]
fn a_missing_event_leaves_exactly_its_nodes_without_value() {
    let dropped = ["STALL_SLOT_BACKEND", "L2D_CACHE"];
    check_recording(
        "neoverse-v2",
        "neoverse-v2-missing.csv",
        "neoverse-v2-missing.expected.json",
        &dropped,
    );
    let want = expected("neoverse-v2-missing.expected.json");
    assert_eq!(want["backend_bound"], None);
    assert_eq!(want["l2_cache_miss_ratio"], None);
    assert!(want["frontend_bound"].is_some());
    // The text says what to record.
    let o = TMA.run(&[
        "stat",
        "--import",
        &rec("neoverse-v2-missing.csv"),
        "--cpu",
        "neoverse-v2",
        "-l",
        "2",
    ]);
    let out = ok(&o);
    assert!(out.contains("STALL_SLOT_BACKEND"), "{out}");
    assert!(
        out.contains("tma events --cpu neoverse-v2 -l 2 --perf-cmd"),
        "{out}"
    );
}

#[test]
fn stat_level_2_prints_the_tree_drill_down_and_metrics_for_every_core() {
    for key in KEYS {
        let model = tma_catalog::by_name(key).unwrap();
        let args = |extra: &[&'static str]| {
            let mut a = vec![
                "stat".to_string(),
                "--import".to_string(),
                rec(&format!("{key}.csv")),
                "--cpu".to_string(),
                key.to_string(),
                "-l".to_string(),
                "2".to_string(),
                "-m".to_string(),
            ];
            a.extend(extra.iter().map(|s| s.to_string()));
            a
        };
        let out = ok(&TMA.command().args(args(&["-v"])).output().unwrap());
        assert!(
            out.starts_with(&format!("{} ({key}, from --cpu)", model.name)),
            "{out}"
        );
        for l1 in model.children(None) {
            assert!(
                out.contains(&format!("\n{}", l1.name)),
                "{key}: {}\n{out}",
                l1.name
            );
            // Its drill-down, indented under it.
            let kid = model.children(Some(l1.name)).next().unwrap();
            assert!(
                out.contains(&format!("\n  {} ", kid.name)),
                "{key}: {}\n{out}",
                kid.name
            );
        }
        for line in [
            "Bottleneck: ",
            "Locate with: ",
            "Next: tma locate --cpu ",
            "Metrics:\n",
        ] {
            assert!(out.contains(line), "{key}: no `{line}`\n{out}");
        }
        assert!(out.contains("  ipc "), "{key}: the default metrics\n{out}");
        // Without -v: the drill-down figures (threshold 0) of the nodes on the bottleneck's
        // path are shown under them, unmarked; the others are counted as hidden. The
        // bottleneck is a slot or stall node, never a drill-down figure.
        let short = ok(&TMA.command().args(args(&[])).output().unwrap());
        assert!(
            short.contains("drill-down figures of nodes off the bottleneck's path hidden"),
            "{short}"
        );
        let b = short
            .lines()
            .find(|l| l.starts_with("Bottleneck: "))
            .unwrap();
        assert!(!b.contains("__"), "{key}: {b}");
        let node = b["Bottleneck: ".len()..].split(' ').next().unwrap();
        let path_parent = model
            .node(node)
            .map(|d| std::iter::successors(Some(d), |d| d.parent.and_then(|p| model.node(p))))
            .into_iter()
            .flatten()
            .find(|d| model.children(Some(d.name)).any(|k| k.is_figure()))
            .map(|d| d.name);
        if let Some(p) = path_parent {
            let fig = model.children(Some(p)).find(|k| k.is_figure()).unwrap();
            let line = short
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{} ", fig.name)))
                .unwrap_or_else(|| panic!("{key}: {} under {p}\n{short}", fig.name));
            assert!(
                !line.contains("below"),
                "{key}: a figure is unmarked: {line}"
            );
        }
    }
    // `-m` takes Arm's stage-2 groups.
    let out = ok(&TMA.run(&[
        "stat",
        "--import",
        &rec("neoverse-v2.csv"),
        "--cpu",
        "neoverse-v2",
        "-m",
        "MPKI,Operation_Mix",
    ]));
    for m in [
        "l1d_cache_mpki",
        "ll_cache_read_mpki",
        "load_percentage",
        "sve_all_percentage",
    ] {
        assert!(out.contains(m), "{m}\n{out}");
    }
    assert!(!out.contains("l1d_cache_miss_ratio"), "{out}");
}

#[test]
fn list_neoverse_n1_shows_tree_formulas_thresholds_and_sample_events() {
    let out = ok(&TMA.run(&["list", "--cpu", "neoverse-n1"]));
    assert!(
        out.starts_with("Arm Neoverse N1 (neoverse-n1, from --cpu): "),
        "{out}"
    );
    for s in [
        "\nfrontend_stalled_cycles  [level 1]",
        "STALL_FRONTEND / CPU_CYCLES * 100",
        "threshold: frontend_stalled_cycles > 20",
        "locate with: STALL_FRONTEND\n",
        "\nbackend_stalled_cycles  [level 1]",
        "locate with: STALL_BACKEND\n",
        "\n  backend_stalled_cycles__l1d_cache_mpki  [level 2]",
        "locate with: L1D_CACHE_REFILL\n",
    ] {
        assert!(out.contains(s), "no `{s}`\n{out}");
    }
    let v2 = ok(&TMA.run(&["list", "--cpu", "neoverse-v2"]));
    for s in [
        "100 * (STALL_SLOT_BACKEND / (CPU_CYCLES * 8) - BR_MIS_PRED * 3 / CPU_CYCLES)",
        "threshold: backend_bound > 20",
        "locate with: STALL_SLOT, BR_MIS_PRED",
    ] {
        assert!(v2.contains(s), "no `{s}`\n{v2}");
    }
}

#[test]
fn events_perf_cmd_names_pmuv3_events_that_read_back() {
    for key in KEYS {
        let model = tma_catalog::by_name(key).unwrap();
        let out = ok(&TMA.run(&["events", "--cpu", key, "-l", "2", "--perf-cmd"]));
        let cmd = out
            .lines()
            .find(|l| l.starts_with("perf stat -x, "))
            .unwrap_or_else(|| panic!("{key}: no perf command\n{out}"));
        let specs: Vec<&str> = cmd
            .split(['\'', '{', '}', ','])
            .filter(|s| s.starts_with("armv8_pmuv3_0/"))
            .collect();
        assert!(!specs.is_empty(), "{cmd}");
        // `armv8_pmuv3_0/event=0x3d,name=STALL_SLOT_BACKEND/` is split at its comma above.
        let named: BTreeSet<&str> = cmd
            .split("name=")
            .skip(1)
            .map(|s| s.split('/').next().unwrap())
            .collect();
        for n in &named {
            let d = model.event(n).unwrap_or_else(|| panic!("{key}: {n}"));
            assert!(
                cmd.contains(&format!("armv8_pmuv3_0/event={:#x},name={n}/", d.code)),
                "{key}: {n}\n{cmd}"
            );
        }
        // Exactly the events the level-2 tree needs (perf prints each under its name=).
        let need = tma_metrics::required_events(model, &tma_metrics::Selection::level(2)).unwrap();
        let need: BTreeSet<&str> = need.iter().map(String::as_str).collect();
        assert_eq!(named, need, "{key}");
    }
}

#[test]
fn diff_of_two_arm_runs() {
    let before = expected("neoverse-v2.expected.json");
    let after = expected("neoverse-v2-after.expected.json");
    let out = ok(&TMA.run(&[
        "diff",
        &rec("neoverse-v2.csv"),
        &rec("neoverse-v2-after.csv"),
        "--cpu",
        "neoverse-v2",
        "-l",
        "2",
        "--json",
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["before"]["cpu"]["key"], "neoverse-v2");
    let nodes = v["nodes"].as_array().unwrap();
    for name in ["backend_bound", "retiring", "backend_bound__l1d_cache_mpki"] {
        let arm = name.split_once("__").map_or(name, |(_, m)| m);
        let n = nodes.iter().find(|n| n["name"] == name).unwrap();
        let (b, a) = (before[arm].unwrap(), after[arm].unwrap());
        assert!(close(n["before"]["mean"].as_f64().unwrap(), b), "{name}");
        assert!(close(n["after"]["mean"].as_f64().unwrap(), a), "{name}");
        assert!(close(n["delta"].as_f64().unwrap(), a - b), "{name}");
    }
    // A gate on a drill-down node by its dotted path.
    let o = TMA.run(&[
        "diff",
        &rec("neoverse-v2.csv"),
        &rec("neoverse-v2-after.csv"),
        "--cpu",
        "neoverse-v2",
        "-l",
        "2",
        "--fail-if",
        "backend_bound.backend_bound__l1d_cache_mpki > +1000",
    ]);
    ok(&o);
}

#[test]
fn report_draws_an_arm_tree() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("arm.html");
    ok(&TMA.run(&[
        "report",
        &rec("neoverse-v2.csv"),
        "--cpu",
        "neoverse-v2",
        "-l",
        "2",
        "-o",
        page.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    for s in ["Arm Neoverse V2", "backend_bound", "frontend_bound"] {
        assert!(html.contains(s), "{s}");
    }
}

/// A child killed (and reaped) when dropped.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

#[test]
fn serve_replays_an_arm_recording() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = TMA
        .command()
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--replay",
            &rec("neoverse-v2-interval.csv"),
            "--cpu",
            "neoverse-v2",
            "--interval",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Proc(child);
    let t = Instant::now();
    let body = loop {
        if let Some(b) = http_get(port, "/metrics").filter(|b| b.contains("tma_node_ratio")) {
            break b;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "tma serve did not answer"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let text =
        std::fs::read_to_string(fixture("import/arm/neoverse-v2-interval.expected.json")).unwrap();
    let want: Value = serde_json::from_str(&text).unwrap();
    let served = |node: &str| -> f64 {
        let prefix = format!("tma_node_ratio{{node=\"{node}\",level=\"1\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix}\n{body}"))
            .parse()
            .unwrap()
    };
    assert!(body.contains("cpu_model=\"neoverse-v2\""), "{body}");
    for node in [
        "frontend_bound",
        "backend_bound",
        "retiring",
        "bad_speculation",
    ] {
        let v = served(node);
        let any = want["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|iv| close(v, iv[node].as_f64().unwrap() / 100.0));
        assert!(any, "{node} = {v} is none of the recording's intervals");
    }
}
