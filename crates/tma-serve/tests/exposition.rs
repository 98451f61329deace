//! The exposition of a recorded run: the documented names and labels, values equal to what
//! the recording implies (checked against `tma_stat::evaluate` of the same file), both text
//! formats, and `promtool check metrics` on each.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::*;
use tma_serve::expo::Format;

/// The level-2 tree of the recording's last interval, evaluated by `tma stat`'s own path.
fn expected_last() -> tma_stat::IntervalReport {
    let ev = tma_stat::evaluate(&import_config(SPR_INTERVALS), &mut std::io::sink()).unwrap();
    ev.run.intervals.last().unwrap().clone()
}

#[test]
fn series_names_labels_and_values() {
    let shared = loaded(SPR_INTERVALS);
    let text = shared.render(Format::Text);
    let want = expected_last();
    let mem = want.report.node("Memory_Bound").unwrap().value.unwrap() / 100.0;
    let got = sample(
        &text,
        "tma_node_ratio{node=\"Backend_Bound.Memory_Bound\",level=\"2\"}",
    )
    .unwrap_or_else(|| panic!("no Memory_Bound series in\n{text}"));
    assert!((got - mem).abs() < 1e-12, "{got} vs {mem}");
    for n in &want.report.nodes {
        let v = n.value.unwrap() / 100.0;
        let path = tma_serve::collect::node_path(tma_catalog::by_name("spr").unwrap(), n.name);
        let series = format!("tma_node_ratio{{node=\"{path}\",level=\"{}\"}}", n.level);
        let got = sample(&text, &series).unwrap_or_else(|| panic!("no {series}"));
        assert!((got - v).abs() < 1e-12, "{series}: {got} vs {v}");
        let share = format!(
            "tma_node_counted_ratio{{node=\"{path}\",level=\"{}\"}}",
            n.level
        );
        assert_eq!(sample(&text, &share), n.counted_share, "{share}");
    }
    let b = want.report.bottleneck.node.as_deref().unwrap();
    let path = tma_serve::collect::node_path(tma_catalog::by_name("spr").unwrap(), b);
    assert_eq!(
        sample(&text, &format!("tma_bottleneck_info{{node=\"{path}\"}}")),
        Some(1.0)
    );
    let ipc = want.report.metric("IPC").unwrap().value.unwrap();
    assert_eq!(sample(&text, "tma_metric{name=\"IPC\"}"), Some(ipc));
    assert_eq!(sample(&text, "tma_pmu_available"), Some(1.0));
    assert!(
        !text.contains("tma_pmu_info"),
        "no reason while the PMU is there"
    );
    // Counters: the sum over the three intervals of the recording (see its README entry).
    assert_eq!(
        sample(&text, "tma_event_total{event=\"INST_RETIRED.ANY\"}"),
        Some(3.0e9 + 2.0e9 + 1.5e9)
    );
    assert_eq!(sample(&text, "tma_context_switches_total"), Some(300.0));
    let cpu_s = sample(&text, "tma_task_clock_seconds_total").unwrap();
    assert!((cpu_s - 3.0).abs() < 1e-9, "{cpu_s}");
    assert_eq!(sample(&text, "tma_intervals_total"), Some(3.0));
    assert_eq!(sample(&text, "tma_interval_seconds"), Some(1.0));
    let build = text
        .lines()
        .find(|l| l.starts_with("tma_build_info{"))
        .unwrap();
    assert!(
        build.contains("cpu_model=\"spr\"") && build.contains("table_version=\"5."),
        "{build}"
    );
    assert!(text.contains("# TYPE tma_event_total counter"));
}

#[test]
fn openmetrics_on_request() {
    let shared = loaded(SPR_INTERVALS);
    let om = shared.render(Format::OpenMetrics);
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE tma_event counter\n"));
    assert!(om.contains("# TYPE tma_build info\n"));
    assert!(om.contains("# TYPE tma_bottleneck info\n"));
    assert!(om.lines().any(|l| l.starts_with("tma_event_total{event=")));
}

/// `promtool check metrics` reads 0.0.4 text on standard input; it prints lint problems and
/// exits non-zero on errors.
#[test]
fn promtool_accepts_the_exposition() {
    let Some(promtool) = promtool() else {
        println!("skipped: promtool is not installed (Debian package `prometheus`)");
        return;
    };
    let mut checked = 0;
    for (name, shared) in [
        ("tree", loaded(SPR_INTERVALS)),
        ("software only", software_only()),
    ] {
        let text = shared.render(Format::Text);
        let mut child = Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{name}: promtool: {said}\n{text}");
        assert!(
            said.trim().is_empty(),
            "{name}: promtool lint: {said}\n{text}"
        );
        checked += 1;
    }
    assert_eq!(checked, 2);
}

#[test]
fn a_recording_of_software_counts_exports_no_tree() {
    // perf stat -I output with task-clock, page-faults, context-switches and an unsupported
    // `cycles`: not a tree, so `tma stat` refuses it for lack of the tree's events.
    let mut cfg = import_config("import/perf-csv-interval.csv");
    cfg.cpu = Some("spr".into());
    let (shared, mut c) = collector(true);
    let r = tma_stat::run(&cfg, &mut c, &mut std::io::sink());
    let text = shared.render(Format::Text);
    assert!(
        r.is_err(),
        "a recording without the tree's events is refused"
    );
    assert!(!text.contains("tma_node_ratio"), "{text}");
}

#[test]
fn without_a_pmu_software_counts_and_the_reason() {
    let shared = software_only();
    let text = shared.render(tma_serve::expo::Format::Text);
    assert_eq!(sample(&text, "tma_pmu_available"), Some(0.0));
    assert_eq!(sample(&text, "tma_task_clock_seconds_total"), Some(0.5));
    assert_eq!(sample(&text, "tma_page_faults_total"), Some(30.0));
    assert!(
        text.contains("tma_pmu_info{reason=\"no `cpu` PMU in /sys/bus/event_source/devices\"} 1")
    );
    assert!(
        !text.contains("tma_node_ratio") && !text.contains("tma_event_total"),
        "{text}"
    );
}
