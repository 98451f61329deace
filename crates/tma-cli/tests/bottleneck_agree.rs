//! One bottleneck verdict for every command: the same values fed
//! to `tma stat`, `tma diff`, `tma report` and `tma serve` give the same verdict, computed
//! once by `tma_metrics` and worded by `Bottleneck::wording` everywhere.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tma_metrics::{Bottleneck, StopReason};
use tma_stat::{Input, StatConfig};
use tma_testkit::fixture;

/// The 60 intervals of `report/zen4-phases-synthetic.csv` summed into one `perf stat -x,`
/// sample (no time column): one tree with the run's values.
fn one_sample(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture("report/zen4-phases-synthetic.csv")).unwrap();
    let mut sums: Vec<(String, u64, u64)> = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        // time,count,unit,EVENT (raw specs hold commas),run time,share,,
        let f: Vec<&str> = line.trim().split(',').collect();
        let n = f.len();
        let event = f[3..n - 4].join(",");
        let (count, run): (u64, u64) = (f[1].parse().unwrap(), f[n - 4].parse().unwrap());
        match sums.iter_mut().find(|(e, _, _)| *e == event) {
            Some(s) => {
                s.1 += count;
                s.2 += run;
            }
            None => sums.push((event, count, run)),
        }
    }
    let mut out = String::new();
    for (e, c, r) in sums {
        out.push_str(&format!("{c},,{e},{r},100.00,,\n"));
    }
    let p = dir.join("zen4-one-sample.csv");
    std::fs::write(&p, out).unwrap();
    p
}

fn stat_cfg(path: &Path) -> StatConfig {
    StatConfig {
        input: Input::Import(path.to_path_buf()),
        cpu: Some("zen4".into()),
        level: 2,
        ..StatConfig::default()
    }
}

fn stat_verdict(path: &Path) -> (Bottleneck, String) {
    let ev = tma_stat::evaluate(&stat_cfg(path), &mut std::io::sink()).unwrap();
    assert_eq!(ev.run.intervals.len(), 1);
    let mut text = Vec::new();
    tma_stat::render::tree::render(&mut text, &ev.run, &tma_stat::RenderOptions::default())
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Bottleneck") || l.starts_with("No bottleneck"))
        .unwrap()
        .to_string();
    (ev.run.intervals[0].report.bottleneck.clone(), line)
}

fn diff_verdicts(path: &Path) -> (Bottleneck, Bottleneck, Vec<String>) {
    let cfg = tma_diff::DiffConfig {
        read: tma_stat::ReadOptions {
            cpu: Some("zen4".into()),
            level: Some(2),
            ..Default::default()
        },
        before: path.to_path_buf(),
        after: path.to_path_buf(),
        ..tma_diff::DiffConfig::default()
    };
    let d = tma_diff::run(&cfg, &mut std::io::sink()).unwrap();
    (d.before.verdict, d.after.verdict, d.bottleneck.after)
}

fn report_view(path: &Path) -> tma_report::page::StatView {
    let cfg = tma_report::ReportConfig {
        read: tma_stat::ReadOptions {
            cpu: Some("zen4".into()),
            level: Some(2),
            ..Default::default()
        },
        inputs: vec![path.to_path_buf()],
        ..tma_report::ReportConfig::default()
    };
    match tma_report::input::load(&cfg, path, &mut std::io::sink()).unwrap() {
        tma_report::Section::Stat(v) => *v,
        other => panic!("not a tree: {}", other.kind()),
    }
}

/// The `tma_bottleneck_info` node label serve publishes after the recording's intervals.
fn serve_node(path: &Path) -> String {
    use tma_serve::collect::{Build, Collector, Shared, Split};
    let shared = Arc::new(Shared::default());
    let mut c = Collector::new(
        Arc::clone(&shared),
        Arc::new(tma_serve::log::Log::new(Box::new(std::io::sink()))),
        Build {
            version: "t".into(),
            cpu: "c".into(),
        },
        Split::Target,
        Vec::new(),
        false,
    );
    tma_stat::run(&stat_cfg(path), &mut c, &mut std::io::sink()).unwrap();
    let text = shared.render(tma_serve::expo::Format::Text);
    let line = text
        .lines()
        .find(|l| l.starts_with("tma_bottleneck_info{"))
        .unwrap_or_else(|| panic!("no tma_bottleneck_info in\n{text}"));
    let i = line.find("node=\"").unwrap() + "node=\"".len();
    let j = line[i..].find('"').unwrap() + i;
    line[i..j].to_string()
}

#[test]
fn one_sample_gives_one_verdict_in_stat_diff_report_and_serve() {
    let dir = tempfile::tempdir().unwrap();
    let one = one_sample(dir.path());
    let (stat, stat_line) = stat_verdict(&one);
    // The run as one sample (counts summed, so the phases weigh by their slots).
    assert!(stat.node.is_some(), "{stat_line}");
    let (before, after, path) = diff_verdicts(&one);
    assert_eq!(before, stat);
    assert_eq!(after, stat);
    assert_eq!(path, stat.path);
    let view = report_view(&one);
    assert_eq!(view.verdict, stat);
    // The report's sentence is the text tree's, word for word.
    let val = |name: &str| {
        view.rows
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| r.value)
            .map_or("-".to_string(), |v| format!("{v:.1}%"))
    };
    assert_eq!(view.verdict.wording(&val).headline, stat_line);
    let served = serve_node(&one);
    // Serve labels a node by its path from level 1.
    assert_eq!(
        served,
        stat.path.join("."),
        "serve names the node stat chose"
    );
}

#[test]
fn the_means_of_an_interval_recording_get_the_rule_of_stat_and_their_phases() {
    let path = fixture("report/zen4-phases-synthetic.csv");
    let view = report_view(&path);
    let (before, _, _) = diff_verdicts(&path);
    // Not the tie-break of the per-interval paths (backend_bound_cpu): the rule on the means
    // (cpu 26.0%, memory 23.9%), as tma stat finds it on one sample with those values.
    assert_eq!(view.verdict, before);
    assert_eq!(view.verdict.node.as_deref(), Some("backend_bound"));
    assert!(matches!(view.verdict.stop, StopReason::Ambiguous { .. }));
    let text = tma_metrics::phases_text(&view.phases, "intervals").unwrap();
    assert!(
        text.ends_with("intervals 1-30: backend_bound_memory; 31-60: backend_bound_cpu."),
        "{text}"
    );
}
