//! The files under deploy/: promtool validates the rules (and runs their unit tests) and the
//! example scrape configuration; the Grafana dashboard is valid JSON whose queries name only
//! series `tma serve` exports; the systemd unit runs `tma serve`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use tma_serve::expo::Format;

fn deploy(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(rel)
}

fn promtool_ok(args: &[&str]) -> Option<String> {
    let Some(promtool) = promtool() else {
        println!("skipped: promtool is not installed (Debian package `prometheus`)");
        return None;
    };
    let out = Command::new(promtool).args(args).output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {said}");
    Some(said)
}

#[test]
fn promtool_checks_the_rules_and_runs_their_tests() {
    let rules = deploy("prometheus/tma-rules.yml");
    if let Some(said) = promtool_ok(&["check", "rules", rules.to_str().unwrap()]) {
        assert!(said.contains("SUCCESS: 15 rules found"), "{said}");
    }
    let tests = deploy("prometheus/tma-rules.test.yml");
    if let Some(said) = promtool_ok(&["test", "rules", tests.to_str().unwrap()]) {
        assert!(said.contains("SUCCESS"), "{said}");
    }
    let cfg = deploy("prometheus/prometheus.yml");
    promtool_ok(&["check", "config", cfg.to_str().unwrap()]);
}

/// Every `tma_*` series name in `text` (a query or rule), as Prometheus stores it.
fn series_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(k) = text[i..].find("tma_") {
        let start = i + k;
        let before_ok = start == 0
            || !(b[start - 1].is_ascii_alphanumeric()
                || b[start - 1] == b'_'
                || b[start - 1] == b':');
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        // Recording rule names (`instance:tma_ipc:...`) are not exported series.
        if before_ok && b.get(end) != Some(&b':') {
            out.push(text[start..end].to_string());
        }
        i = end;
    }
    out
}

/// The series names of an exposition with the tree and of one without a PMU.
fn exported() -> Vec<String> {
    let mut names = Vec::new();
    let tree = loaded(SPR_INTERVALS).render(Format::Text);
    let sw = software_only().render(Format::Text);
    for l in tree.lines().chain(sw.lines()) {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            names.push(rest.split(' ').next().unwrap().to_string());
        }
    }
    // Families that only appear in some set-ups.
    names.extend(
        [
            "tma_pmu_info",
            "tma_http_responses_total",
            // --cgroup-top over the cgroup tree.
            "tma_cgroup_cpu_seconds_total",
            "tma_cgroups_left_out",
            "tma_cgroups_seen",
        ]
        .map(String::from),
    );
    names
}

#[test]
fn dashboard_and_rules_use_exported_series_only() {
    let exported = exported();
    let dash = std::fs::read_to_string(deploy("grafana/tma-dashboard.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&dash).expect("valid JSON");
    assert_eq!(v["uid"], "tma-serve");
    let panels = v["panels"].as_array().unwrap();
    assert!(panels.len() >= 6);
    let mut exprs = Vec::new();
    for p in panels {
        for t in p["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for q in v["templating"]["list"].as_array().unwrap() {
        if let Some(d) = q["definition"].as_str() {
            exprs.push(d.to_string());
        }
    }
    let rules = std::fs::read_to_string(deploy("prometheus/tma-rules.yml")).unwrap();
    exprs.push(rules);
    let mut checked = 0;
    for e in &exprs {
        for name in series_names(e) {
            assert!(
                exported.contains(&name),
                "{name} (in {e:?}) is not exported: {exported:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 15, "{checked}");
    // The level-1 tree (from the counters: a ratio of sums), the bottleneck table and IPC
    // (instructions over cycles) are on the dashboard, and its shares come from counters.
    let dash_exprs = exprs[..exprs.len() - 1].join("\n");
    for want in [
        "rate(tma_slots_total{level=\"1\"",
        "rate(tma_slots_total{node=\"total\"",
        "tma_bottleneck_info",
        "rate(tma_instructions_total",
        "rate(tma_cycles_total",
    ] {
        assert!(dash_exprs.contains(want), "{want}");
    }
    assert!(!dash_exprs.contains("tma_node_ratio"), "{dash_exprs}");
}

#[test]
fn systemd_unit_runs_tma_serve() {
    let unit = std::fs::read_to_string(deploy("tma-serve.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    assert!(
        exec.contains(" serve ") && exec.contains("--listen 127.0.0.1:9273"),
        "{exec}"
    );
    assert!(unit.contains("AmbientCapabilities=CAP_PERFMON"));
    assert!(unit.contains("KillSignal=SIGTERM"));
    // tma exits 143 after SIGTERM: systemd must take it as a clean stop.
    assert!(unit.contains("SuccessExitStatus=143"));
}
