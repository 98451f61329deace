//! `tma diff` on the hand-made fixtures of tests/fixtures/diff (see its README entry), with
//! every expected number computed by hand below.

use tma_testkit::fixture;

use tma_diff::{DiffConfig, DiffError, Significance};

fn cfg(before: &str, after: &str) -> DiffConfig {
    DiffConfig {
        before: fixture(before),
        after: fixture(after),
        ..DiffConfig::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// before: backend_bound_memory = [40, 44], after = [10, 14].
/// Means 42 and 12, delta -30 points, relative -30/42.
/// Sample variances: ((40-42)^2 + (44-42)^2) / 1 = 8, and 8 after.
/// se^2 = 8/2 + 8/2 = 8, t = -30 / sqrt 8 = -10.6066..., t^2 = 112.5.
/// Welch df = 8^2 / ((4^2)/1 + (4^2)/1) = 64/32 = 2.
/// With 2 degrees of freedom the t CDF is F(t) = 1/2 + t / (2 sqrt(2 + t^2)), so the
/// two-sided p = 1 - |t| / sqrt(2 + t^2) = 1 - sqrt(112.5 / 114.5) = 1 - sqrt(225/229)
/// = 0.0087720993...
///
/// backend_bound_cpu = [20, 20] before (variance 0), [30, 32] after (variance 2):
/// se^2 = 0 + 2/2 = 1, t = 11, df = 1 / (0 + 1/1) = 1 (Cauchy: F(t) = 1/2 + atan(t)/pi),
/// p = 1 - 2 atan(11) / pi = 0.0577158767..., not significant at 0.05.
///
/// frontend_bound = [10, 12] before, [12, 12] after: se^2 = 1, t = 1, df = 1, p = 1/2.
#[test]
fn hand_computed_deltas_and_welch_p_values() {
    let d = tma_diff::run(
        &cfg(
            "diff/zen4-before-synthetic.json",
            "diff/zen4-after-synthetic.json",
        ),
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!((d.before.samples, d.after.samples), (2, 2));
    let row = |n: &str| d.nodes.iter().find(|r| r.name == n).unwrap();

    let mem = row("backend_bound_memory");
    assert_eq!(mem.parent.as_deref(), Some("backend_bound"));
    assert!(close(mem.before.unwrap().mean, 42.0));
    assert!(close(mem.after.unwrap().mean, 12.0));
    assert!(close(mem.delta.unwrap(), -30.0));
    assert!(close(mem.relative.unwrap(), -30.0 / 42.0));
    let w = mem.welch.unwrap();
    assert!(close(w.t, -30.0 / 8f64.sqrt()));
    assert!(close(w.df, 2.0));
    let expected = 1.0 - (225.0f64 / 229.0).sqrt(); // 0.0087720993...
    assert!((w.p - expected).abs() < 1e-9, "p = {}", w.p);
    assert!((w.p - 0.008_772_099).abs() < 1e-9);
    assert_eq!(mem.significance, Significance::Significant);

    let cpu = row("backend_bound_cpu");
    let w = cpu.welch.unwrap();
    assert!(close(cpu.delta.unwrap(), 11.0));
    assert!(close(w.t, 11.0) && close(w.df, 1.0));
    let expected = 1.0 - 2.0 * 11f64.atan() / std::f64::consts::PI; // 0.0577158767...
    assert!((w.p - expected).abs() < 1e-9, "p = {}", w.p);
    assert_eq!(cpu.significance, Significance::NotSignificant);

    let fe = row("frontend_bound");
    assert!((fe.welch.unwrap().p - 0.5).abs() < 1e-9);

    let ipc = d.metrics.iter().find(|r| r.name == "IPC").unwrap();
    assert!(close(ipc.delta.unwrap(), 0.6));
    assert!(close(ipc.relative.unwrap(), 0.6 / 1.1));

    assert_eq!(d.bottleneck.verdict, "fixed");
    assert_eq!(
        d.bottleneck.text,
        "backend_bound > backend_bound_memory 42.0% → 12.0% (fixed); bottleneck now \
         backend_bound > backend_bound_cpu (31.0%)"
    );
}

#[test]
fn different_cpu_models_are_an_error() {
    let e = tma_diff::run(
        &cfg("diff/zen4-before-synthetic.json", "diff/icx-synthetic.json"),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(e, DiffError::CpuMismatch { .. }), "{e}");
    assert!(e.to_string().contains("zen4") && e.to_string().contains("icx"));
}

#[test]
fn gates_trip_on_absolute_and_relative_changes() {
    let mut c = cfg(
        "diff/zen4-before-synthetic.json",
        "diff/zen4-after-synthetic.json",
    );
    c.gates = vec![
        "Backend_Bound.Backend_Bound_Memory > +5".into(), // -30: holds not
        "backend_bound_cpu >= 11".into(),                 // +11: trips
        "IPC > +50%".into(),                              // +54.5%: trips
        "IPC < -10%".into(),                              // holds not
    ];
    let d = tma_diff::run(&c, &mut Vec::new()).unwrap();
    let tripped: Vec<bool> = d.gates.iter().map(|g| g.tripped).collect();
    assert_eq!(tripped, [false, true, true, false]);
    assert!(close(d.gates[2].change, 60.0 / 1.1));
    c.gates = vec!["Frontend_Bound.Backend_Bound_Memory > 1".into()];
    let e = tma_diff::run(&c, &mut Vec::new()).unwrap_err();
    assert!(matches!(e, DiffError::Gate { position: 1, .. }), "{e}");
}

/// Recordings go through tma_stat::evaluate: one sample per side, so no test is claimed.
#[test]
fn recordings_with_one_sample_leave_significance_unknown() {
    let mut c = cfg(
        "import/zen4-sha256-synthetic.csv",
        "import/zen4-default-plus-tree-synthetic.csv",
    );
    c.read.cpu = Some("zen4".into());
    c.read.level = Some(2);
    let d = tma_diff::run(&c, &mut Vec::new()).unwrap();
    assert_eq!((d.before.samples, d.after.samples), (1, 1));
    assert!(d.nodes.iter().any(|r| r.name == "backend_bound_cpu"));
    assert!(!d.tested());
    assert!(d.nodes.iter().all(|r| matches!(
        &r.significance,
        Significance::Unknown { reason } if reason.starts_with("one sample per side")
    )));
    let mut text = Vec::new();
    tma_diff::render::text(&mut text, &d).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("Significance unknown: one sample per side"),
        "{text}"
    );
}

#[test]
fn json_and_csv_carry_the_p_values() {
    let d = tma_diff::run(
        &cfg(
            "diff/zen4-before-synthetic.json",
            "diff/zen4-after-synthetic.json",
        ),
        &mut Vec::new(),
    )
    .unwrap();
    let mut j = Vec::new();
    tma_diff::render::json(&mut j, &d).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&j).unwrap();
    assert_eq!(v["schema"], "tma.diff");
    assert_eq!(v["schema_version"], tma_diff::render::SCHEMA_VERSION);
    assert_eq!(v["before"]["samples"], 2);
    let mem = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "backend_bound_memory")
        .unwrap();
    assert!((mem["welch"]["p"].as_f64().unwrap() - 0.008_772_099).abs() < 1e-9);
    assert_eq!(mem["significance"]["verdict"], "significant");
    let mut c = Vec::new();
    tma_diff::render::csv(&mut c, &d).unwrap();
    let c = String::from_utf8(c).unwrap();
    assert!(c.starts_with("kind,name,parent,level,unit,before_n"));
    assert!(c.lines().any(
        |l| l.starts_with("node,backend_bound_memory,backend_bound,2,")
            && l.ends_with(",significant")
    ));
    assert!(c.lines().any(|l| l.starts_with("metric,IPC,")));
}

fn profiles(before: &str, after: &str) -> tma_diff::profile::ProfileConfig {
    tma_diff::profile::ProfileConfig {
        before: fixture(before),
        after: fixture(after),
        symdir: vec![fixture("locate")],
        ..Default::default()
    }
}

/// The hand-made `tma.locate` pair: shares 50/30/20/0 % -> 20/53/0/27 % (see the fixtures'
/// README), sorted by |delta|, one-sided functions at 0 on the other side.
#[test]
fn locate_json_profiles_have_the_hand_computed_deltas() {
    let cfg = profiles(
        "diff/before-synthetic.locate.json",
        "diff/after-synthetic.locate.json",
    );
    assert!(tma_diff::inputs(&cfg.before, &cfg.after).unwrap());
    let d = tma_diff::profile::run(&cfg).unwrap();
    assert_eq!((d.before.samples, d.after.samples), (100, 200));
    let got: Vec<(&str, &str, f64, f64, f64)> = d
        .rows
        .iter()
        .map(|r| {
            (
                r.function.as_str(),
                r.module.as_str(),
                r.before_percent,
                r.after_percent,
                r.delta,
            )
        })
        .collect();
    let want = [
        ("hash", "app", 50.0, 20.0, -30.0),
        ("inflate", "app", 0.0, 27.0, 27.0),
        ("memcpy", "libc.so.6", 30.0, 53.0, 23.0),
        ("parse", "app", 20.0, 0.0, -20.0),
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.0, g.1), (w.0, w.1));
        assert!(
            close(g.2, w.2) && close(g.3, w.3) && close(g.4, w.4),
            "{g:?}"
        );
    }
    assert!(d.notes().is_empty());
}

/// perf.data files, symbolized as `tma locate --import` does: perf report gives 91.53%
/// chase, 5.71% main, 2.75% kernel for chase.perf.data (945 samples) and 87.32%, 7.04%,
/// 5.63% for the cpu-clock event of two-events.perf.data (142 samples).
#[test]
fn perf_data_profiles_compare_function_shares() {
    let cfg = profiles("locate/chase.perf.data", "locate/two-events.perf.data");
    assert!(tma_diff::inputs(&cfg.before, &cfg.after).unwrap());
    let d = tma_diff::profile::run(&cfg).unwrap();
    assert_eq!((d.before.samples, d.after.samples), (945, 142));
    assert_eq!(d.before.kind, "perf.data");
    let names: Vec<&str> = d.rows.iter().map(|r| r.function.as_str()).collect();
    assert_eq!(names, ["chase", "[kernel]", "main"]);
    let chase = &d.rows[0];
    assert_eq!((chase.before_samples, chase.after_samples), (865, 124));
    assert!(close(
        chase.delta,
        124.0 * 100.0 / 142.0 - 865.0 * 100.0 / 945.0
    ));
    assert!(d.notes().iter().any(|n| n.contains("2 events")));
}

#[test]
fn a_profile_against_a_tree_is_an_error() {
    let e = tma_diff::inputs(
        &fixture("locate/chase.perf.data"),
        &fixture("diff/icx-synthetic.json"),
    )
    .unwrap_err();
    assert!(matches!(e, DiffError::Mixed { .. }), "{e}");
    assert!(!tma_diff::inputs(
        &fixture("diff/zen4-before-synthetic.json"),
        &fixture("diff/zen4-after-synthetic.json")
    )
    .unwrap());
}
