//! `tma diff` exit codes: 0 (no gate tripped), 1 (a gate tripped, one line on stderr), 2
//! (a bad expression with its position; CPU models that differ).

use tma_testkit::{fixture, fixture_str, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn tma(args: &[&str]) -> (i32, String, String) {
    let out = TMA
        .bare()
        .current_dir(fixture("diff"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const B: &str = "zen4-before-synthetic.json";
const A: &str = "zen4-after-synthetic.json";

#[test]
fn gate_that_holds_not_exits_0() {
    let (code, out, err) = tma(&["diff", B, A, "--fail-if", "IPC < -10%"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Bottleneck: backend_bound > backend_bound_memory 42.0% → 12.0% (fixed)"));
    assert!(err.is_empty(), "{err}");
}

#[test]
fn tripped_gate_exits_1_with_one_line() {
    let (code, _, err) = tma(&[
        "diff",
        B,
        A,
        "--fail-if",
        "backend_bound.backend_bound_cpu > +5",
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("tma: gate tripped: backend_bound.backend_bound_cpu > +5"));
}

#[test]
fn bad_expression_exits_2_with_the_position() {
    let (code, out, err) = tma(&["diff", B, A, "--fail-if", "IPC > 5 points"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("at position 9"), "{err}");
}

#[test]
fn cpu_mismatch_exits_2() {
    let (code, _, err) = tma(&["diff", B, "icx-synthetic.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("different CPU models"), "{err}");
}

#[test]
fn json_and_csv() {
    let (code, out, _) = tma(&["diff", B, A, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "tma.diff");
    assert!(v["nodes"][0]["welch"]["p"].is_number());
    let (code, out, _) = tma(&["diff", B, A, "--csv"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("kind,name,"));
}

const PB: &str = "before-synthetic.locate.json";
const PA: &str = "after-synthetic.locate.json";

#[test]
fn locate_json_profiles_as_text_json_and_csv() {
    let (code, out, err) = tma(&["diff", PB, PA]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().skip(4).collect();
    assert!(out.lines().nth(3).unwrap().starts_with("function (module)"));
    assert!(rows[0].starts_with("hash (app)") && rows[0].ends_with("-30.00 pts"));
    assert!(rows[1].contains("0.00%") && rows[1].ends_with("+27.00 pts"));
    assert!(rows[3].starts_with("parse (app)") && rows[3].ends_with("-20.00 pts"));

    let (code, out, err) = tma(&["diff", PB, PA, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "tma.diff.profile");
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["before"]["kind"], "tma.locate");
    assert_eq!(v["functions"][2]["function"], "memcpy");
    assert_eq!(v["functions"][2]["delta"], 23.0);

    let (code, out, err) = tma(&["diff", PB, PA, "--csv"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("function,module,before_samples,before_percent,after_samples"));
    assert!(out.contains("\ninflate,app,0,0,54,27,27\n"), "{out}");
}

#[test]
fn perf_data_profiles_are_symbolized_as_locate_does() {
    let (code, out, err) = tma(&[
        "diff",
        "../locate/chase.perf.data",
        "../locate/two-events.perf.data",
        "--symdir",
        "../locate",
    ]);
    assert_eq!(code, 0, "{err}");
    let first = out.lines().nth(4).unwrap();
    assert!(first.starts_with("chase (chase)"), "{out}");
    assert!(first.contains("91.53%") && first.contains("87.32%") && first.ends_with("-4.21 pts"));
}

#[test]
fn a_profile_and_a_tree_exit_2() {
    let (code, out, err) = tma(&["diff", PB, B]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("compares two trees or two profiles"), "{err}");
    let (code, _, err) = tma(&["diff", PB, PA, "--fail-if", "IPC < -10%"]);
    assert_eq!(code, 2);
    assert!(err.contains("--fail-if"), "{err}");
}

/// A `tma.stat_software` (version 1, the name before schema names 2026-11: read as `tma.stat.software`) document of `-I` intervals with these task-clock values (msec).
fn software_doc(clock_ms: &[f64]) -> String {
    let intervals: Vec<String> = clock_ms
        .iter()
        .enumerate()
        .map(|(i, ms)| {
            format!(
                r#"{{"start_s": {s}, "end_s": {e}, "events": [
                    {{"event": "task-clock", "value": {ms}, "unit": "msec"}},
                    {{"event": "page-faults", "value": 100.0, "unit": ""}}]}}"#,
                s = i as f64 * 0.1,
                e = (i + 1) as f64 * 0.1
            )
        })
        .collect();
    format!(
        r#"{{"schema": "tma.stat_software", "schema_version": 1, "hardware_counters": false,
            "target": "`app`", "intervals": [{}]}}"#,
        intervals.join(",")
    )
}

#[test]
fn software_counts_of_runs_without_a_pmu_compare() {
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("before.json");
    let after = dir.path().join("after.json");
    std::fs::write(&before, software_doc(&[10.0, 11.0, 10.5, 9.5])).unwrap();
    std::fs::write(&after, software_doc(&[20.0, 21.0, 19.5, 20.5])).unwrap();
    let (b, a) = (before.to_str().unwrap(), after.to_str().unwrap());
    let o = TMA.run(&["diff", b, a]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("no tree: neither run had hardware counters"),
        "{out}"
    );
    let clock = out.lines().find(|l| l.starts_with("task-clock")).unwrap();
    assert!(clock.contains("+10.00 (+97.6%)"), "{clock}");
    assert!(clock.trim_end().ends_with('*'), "significant: {clock}");
    assert!(!out.contains("Bottleneck"), "{out}");
    // A gate on a count, with the name perf gives it.
    let o = TMA.run(&["diff", b, a, "--fail-if", "task-clock > +50%"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("gate tripped: task-clock"),
        "{}",
        stderr(&o)
    );
    // Software counts and a tree do not compare.
    let o = TMA.run(&["diff", b, &fixture_str("diff/zen4-before-synthetic.json")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("software counts"), "{}", stderr(&o));
}

/// `--flame`: a differential flame graph of two perf.data files, frames of one side kept and
/// labelled; refused for trees and for `tma locate --json` documents (no call chains).
#[test]
fn two_perf_data_profiles_draw_a_differential_flame_graph() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("diff.svg");
    let (code, out, err) = tma(&[
        "diff",
        "../locate/chase.perf.data",
        "../profile-tree/group.perf.data",
        "--symdir",
        "../locate",
        "--flame",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("compute (workload)"), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml") || text.starts_with("<svg"),
        "{text}"
    );
    assert!(
        text.contains("[only before]") && text.contains("[only after]"),
        "{text}"
    );
    assert!(text.contains("chase") && text.contains("compute"));

    let (code, _, err) = tma(&["diff", PB, PA, "--flame", svg.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("call chains"), "{err}");
    let (code, _, err) = tma(&["diff", B, A, "--flame", svg.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("--flame draws two profiles"), "{err}");
}
