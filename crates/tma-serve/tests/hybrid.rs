//! Hybrid parts: `tma serve` publishes each core type's tree with a `core_type`
//! label (`P-core`, `E-core`, `cpu_lowpower`..., as the stat pipeline names them) and the
//! merged view (`core_type="merged"`, gauges only), in one exposition per interval; the
//! counters are per core type and add up across them. Checked on `tma serve --replay` of
//! hybrid recordings against the per-type trees `tma stat` reads from the same input:
//! snapshots recorded with the synthetic backend on the fake sysfs trees of
//! `tests/fixtures/hybrid` (two and three core types; its README says how each was made),
//! and a real Alder Lake `perf stat` recording (one tree per core type, no merged view).

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tma_host::Host;
use tma_perf::backend::Synthetic;
use tma_serve::collect::node_path;
use tma_serve::expo::Format;
use tma_serve::{Recording, ServeConfig, Source};
use tma_stat::eval::RunInfo;
use tma_stat::sink::{Discard, IntervalData, Start};
use tma_stat::{
    BackendChoice, Input, IntervalReport, IntervalSink, LiveOptions, LiveTarget, StatConfig,
    StatError,
};

/// One tree of one interval as `tma stat` reads it: its run information, its tree and its
/// counts.
#[derive(Clone)]
struct Tree {
    info: RunInfo,
    report: IntervalReport,
    counts: BTreeMap<String, f64>,
}

/// Every tree of every interval, whether they come interleaved (`start_trees`,
/// `tree_interval`: a snapshot) or as one step per core type (a `perf stat` import).
#[derive(Default)]
struct Trees {
    /// Interleaved: per interval, per tree.
    by_interval: Vec<Vec<Tree>>,
    /// Steps: per step (core type), per interval.
    by_step: Vec<Vec<Tree>>,
    current: Option<RunInfo>,
}

fn tree(info: &RunInfo, iv: &IntervalData<'_>) -> Tree {
    Tree {
        info: info.clone(),
        report: iv.report.expect("a tree").clone(),
        counts: iv
            .readings
            .readings
            .iter()
            .filter(|r| r.cpu.is_none() && r.tid.is_none())
            .filter_map(|r| Some((r.event.clone(), r.value?)))
            .collect(),
    }
}

impl IntervalSink for Trees {
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        if let Start::Tree { info, .. } = start {
            self.current = Some(info.clone());
            self.by_step.push(Vec::new());
        }
        Ok(())
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        let info = self.current.as_ref().expect("a start");
        let t = tree(info, &iv);
        self.by_step.last_mut().unwrap().push(t);
        Ok(())
    }
    fn start_trees(&mut self, _trees: &[Start<'_>]) -> Result<(), StatError> {
        Ok(())
    }
    fn tree_interval(
        &mut self,
        tree_ix: usize,
        start: Start<'_>,
        iv: IntervalData<'_>,
    ) -> Result<(), StatError> {
        let Start::Tree { info, .. } = start else {
            panic!("a tree")
        };
        if tree_ix == 0 {
            self.by_interval.push(Vec::new());
        }
        self.by_interval.last_mut().unwrap().push(tree(info, &iv));
        Ok(())
    }
}

impl Trees {
    /// Per interval, per tree, however they came.
    fn intervals(self) -> Vec<Vec<Tree>> {
        if !self.by_interval.is_empty() {
            return self.by_interval;
        }
        let n = self.by_step.iter().map(Vec::len).max().unwrap_or(0);
        (0..n)
            .map(|k| {
                self.by_step
                    .iter()
                    .filter_map(|s| s.get(k).cloned())
                    .collect()
            })
            .collect()
    }
}

/// Record a live run on the fake sysfs `root` with the synthetic counts `counts`.
fn snapshot(root: &str, counts: &str, target: LiveTarget, interval_ms: u64, dir: &Path) -> PathBuf {
    let bytes = std::fs::read(fixture("hybrid").join(counts)).unwrap();
    let synthetic: Synthetic = serde_json::from_slice(&bytes).unwrap();
    let snap = dir.join(format!("{root}-{counts}"));
    let cfg = StatConfig {
        cpu: Some("adl".into()),
        level: 2,
        host: Host::under(&fixture("hybrid").join(root)),
        input: Input::Live(LiveOptions {
            target,
            interval_ms: Some(interval_ms),
            duration_s: Some(if counts.contains("migrating") {
                2.0
            } else {
                1.0
            }),
            backend: BackendChoice::Synthetic(synthetic),
            record: Some(snap.clone()),
            ..LiveOptions::default()
        }),
        ..StatConfig::default()
    };
    tma_stat::run(&cfg, &mut Discard, &mut Vec::new()).unwrap();
    snap
}

/// The `tma serve --replay` configuration of `file`.
fn serve_config(file: &Path, host: Host, cpu: Option<&str>) -> ServeConfig {
    ServeConfig {
        source: Source::Replay(file.to_path_buf()),
        cpu: cpu.map(str::to_string),
        host,
        interval: Duration::from_secs(600),
        ..ServeConfig::default()
    }
}

/// What `tma stat --import` reads from the input of `cfg`, tree by tree.
fn stat_trees(cfg: &ServeConfig) -> Vec<Vec<Tree>> {
    let mut t = Trees::default();
    tma_stat::run(&cfg.stat_config().unwrap(), &mut t, &mut Vec::new()).unwrap();
    t.intervals()
}

fn core_type(t: &Tree) -> &'static str {
    t.info.core_type.expect("a core-typed tree")
}

/// Check an exposition against `trees` (one interval): each tree's node shares under its
/// `core_type`, per-type counters and none for the merged view. The number of node series
/// compared.
fn check(text: &str, trees: &[Tree]) -> usize {
    let mut compared = 0;
    for t in trees {
        let ct = core_type(t);
        for n in &t.report.report.nodes {
            let series = format!(
                "tma_node_ratio{{node=\"{}\",level=\"{}\",core_type=\"{ct}\"}}",
                node_path(t.info.model, n.name),
                n.level
            );
            match n.value.filter(|_| n.status.has_value()) {
                Some(v) => {
                    let got = sample(text, &series).unwrap_or_else(|| panic!("no {series}"));
                    assert!(
                        (got - v / 100.0).abs() < 1e-9,
                        "{series}: {got}, tma stat {v}%"
                    );
                    compared += 1;
                }
                None => assert!(sample(text, &series).is_none(), "{series} without a value"),
            }
        }
        let slots = format!("tma_slots_total{{node=\"total\",level=\"0\",core_type=\"{ct}\"}}");
        if ct == "merged" {
            // The merged view is a weighted mean of the trees: gauges only.
            assert!(sample(text, &slots).is_none(), "{slots}");
            assert!(!text.contains("tma_cycles_total{core_type=\"merged\"}"));
        }
    }
    compared
}

/// The cycles of a core type's tree (the P-cores' and the E-cores' events).
fn cycles(t: &Tree) -> Option<f64> {
    ["CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.CORE"]
        .iter()
        .find_map(|e| t.counts.get(*e).copied())
}

/// The value of the sample `series` (name and labels as written; a timestamp after the
/// value is left aside).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split(' ').next()?.parse().ok())
}

/// Whether a sample (not a comment) holds `text`.
fn series_with(exposition: &str, text: &str) -> bool {
    exposition
        .lines()
        .any(|l| !l.starts_with('#') && l.contains(text))
}

/// The sample of a counter of `core_type` (its only label).
fn counter(text: &str, family: &str, core_type: &str) -> Option<f64> {
    sample(text, &format!("{family}{{core_type=\"{core_type}\"}}"))
}

#[test]
fn replayed_snapshots_give_each_core_types_tree_and_the_merged_view() {
    let dir = tempfile::tempdir().unwrap();
    for (root, counts, target, interval, types) in [
        (
            "three-types",
            "three-types.json",
            LiveTarget::System {
                cpus: None,
                command: None,
            },
            500,
            &["P-core", "E-core", "cpu_lowpower", "merged"][..],
        ),
        (
            "two-types",
            "migrating-thread.json",
            LiveTarget::Tids(vec![101, 102]),
            1000,
            &["P-core", "E-core", "merged"][..],
        ),
    ] {
        let snap = snapshot(root, counts, target, interval, dir.path());
        let cfg = serve_config(&snap, Host::under(&fixture("hybrid").join(root)), None);
        let want = stat_trees(&cfg);
        assert_eq!(want.len(), 2, "{root}: two intervals");
        let rec = Recording::load(&cfg.stat_config().unwrap(), &quiet_log()).unwrap();
        assert_eq!(rec.core_types(), types, "{root}");
        assert_eq!(rec.len(), 2);
        let (shared, mut c) = collector(true);
        rec.start(&mut c).unwrap();
        // Twice round: the counters go on growing by each interval's counts.
        let mut cycles_total: BTreeMap<&str, f64> = BTreeMap::new();
        let mut compared = 0;
        for round in 0..2 {
            for (k, trees) in want.iter().enumerate() {
                rec.publish(k, &mut c).unwrap();
                let text = shared.render(Format::Text);
                assert_eq!(
                    trees.iter().map(core_type).collect::<Vec<_>>(),
                    types,
                    "{root}"
                );
                compared += check(&text, trees);
                // One build line: the first tree's tables.
                assert_eq!(text.matches("\ntma_build_info{").count(), 1);
                // Each type's cycles counter grows by its cycles in the interval.
                for t in trees.iter().filter(|t| core_type(t) != "merged") {
                    let ct = core_type(t);
                    let grew = cycles(t).unwrap_or(0.0);
                    let total = cycles_total.entry(ct).or_insert(0.0);
                    *total += grew;
                    match counter(&text, "tma_cycles_total", ct) {
                        Some(got) => assert!(
                            (got - *total).abs() <= 1e-9 * total.max(1.0),
                            "{root} round {round} interval {k} {ct}: {got} vs {total}"
                        ),
                        None => assert_eq!(*total, 0.0, "{root} {ct}: no counter"),
                    }
                }
            }
        }
        assert!(compared > 20, "{root}: {compared} node series compared");
    }
}

#[test]
fn the_per_type_slots_add_up_to_the_types_slots_and_the_merged_view_is_cycle_weighted() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(
        "two-types",
        "adl-perf6.16.json",
        LiveTarget::System {
            cpus: None,
            command: None,
        },
        250,
        dir.path(),
    );
    let cfg = serve_config(&snap, Host::under(&fixture("hybrid/two-types")), None);
    let want = stat_trees(&cfg);
    let rec = Recording::load(&cfg.stat_config().unwrap(), &quiet_log()).unwrap();
    let (shared, mut c) = collector(true);
    rec.start(&mut c).unwrap();
    rec.publish(0, &mut c).unwrap();
    let text = shared.render(Format::Text);
    check(&text, &want[0]);
    let (p, e) = (&want[0][0], &want[0][1]);
    // Each type's slots counters: its level-1 nodes add up to its total.
    for t in [p, e] {
        let ct = core_type(t);
        let total = sample(
            &text,
            &format!("tma_slots_total{{node=\"total\",level=\"0\",core_type=\"{ct}\"}}"),
        )
        .unwrap_or_else(|| panic!("no total slots for {ct}"));
        let level1: f64 = text
            .lines()
            .filter(|l| {
                l.starts_with("tma_slots_total{")
                    && l.contains("level=\"1\"")
                    && l.contains(&format!("core_type=\"{ct}\""))
            })
            .map(|l| {
                let v = l.rsplit_once("} ").unwrap().1;
                v.split(' ').next().unwrap().parse::<f64>().unwrap()
            })
            .sum();
        assert!(
            (level1 - total).abs() <= 1e-6 * total,
            "{ct}: {level1} vs {total}"
        );
    }
    // The merged gauge: the types' shares weighted by their cycles.
    let (cp, ce) = (cycles(p).unwrap(), cycles(e).unwrap());
    for (node, pn, en) in [
        ("Backend_Bound", "Backend_Bound", "Backend_Bound"),
        ("Retiring", "Retiring", "Retiring"),
    ] {
        let share = |t: &Tree, n: &str| {
            t.report
                .report
                .nodes
                .iter()
                .find(|x| x.name == n)
                .and_then(|x| x.value)
                .unwrap()
                / 100.0
        };
        let want = (share(p, pn) * cp + share(e, en) * ce) / (cp + ce);
        let got = sample(
            &text,
            &format!("tma_node_ratio{{node=\"{node}\",level=\"1\",core_type=\"merged\"}}"),
        )
        .unwrap();
        assert!((got - want).abs() < 1e-9, "merged {node}: {got} vs {want}");
    }
    // The help text says what the merged series is.
    assert!(series_with(&text, "core_type=\"merged\""));
    let help = text
        .lines()
        .find(|l| l.starts_with("# HELP tma_node_ratio "))
        .unwrap();
    assert!(help.contains("merged"), "{help}");
}

/// A real Alder Lake `perf stat` recording (perf 6.16, both core types' events): one tree
/// per core type, as `tma stat --import` reads it; no merged view.
#[test]
fn a_hybrid_perf_stat_recording_gives_each_core_types_tree() {
    let file = fixture("import/real/adl-lkml-2025-perf6.16/perf-stat.csv");
    let cfg = serve_config(&file, Host::system(), Some("adl"));
    let want = stat_trees(&cfg);
    assert_eq!(want.len(), 1);
    assert_eq!(
        want[0].iter().map(core_type).collect::<Vec<_>>(),
        ["P-core", "E-core"]
    );
    let rec = Recording::load(&cfg.stat_config().unwrap(), &quiet_log()).unwrap();
    assert_eq!(rec.core_types(), ["P-core", "E-core"]);
    let (shared, mut c) = collector(true);
    rec.start(&mut c).unwrap();
    rec.publish(0, &mut c).unwrap();
    let text = shared.render(Format::Text);
    assert!(check(&text, &want[0]) >= 6);
    assert!(!series_with(&text, "core_type=\"merged\""));
}

/// `tma serve --replay` of a hybrid snapshot, scraped over HTTP: the exposition holds every
/// core type's tree and the merged view of the first interval, as `tma stat` reads them.
#[test]
fn tma_serve_replay_of_a_hybrid_snapshot_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(
        "three-types",
        "three-types.json",
        LiveTarget::System {
            cpus: None,
            command: None,
        },
        500,
        dir.path(),
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cfg = serve_config(&snap, Host::under(&fixture("hybrid/three-types")), None);
    cfg.listen = format!("127.0.0.1:{port}").parse().unwrap();
    let want = stat_trees(&cfg);
    let run_cfg = cfg.clone();
    // Serves until the test process ends (each interval for 10 minutes: the first stays).
    std::thread::spawn(move || {
        tma_serve::run(
            &run_cfg,
            Arc::new(tma_serve::log::Log::new(Box::new(std::io::sink()))),
        )
    });
    let t = Instant::now();
    loop {
        if let Ok(s) = std::net::TcpStream::connect(cfg.listen) {
            drop(s);
            let (status, _, _) = get(cfg.listen, "/-/ready", None);
            if status == 200 {
                break;
            }
        }
        assert!(t.elapsed() < Duration::from_secs(30), "tma serve not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, _, body) = get(cfg.listen, "/metrics", None);
    assert_eq!(status, 200);
    for ct in ["P-core", "E-core", "cpu_lowpower", "merged"] {
        assert!(
            series_with(&body, &format!("core_type=\"{ct}\"")),
            "no {ct} in\n{body}"
        );
    }
    assert!(check(&body, &want[0]) > 20);
    for t in want[0].iter().filter(|t| core_type(t) != "merged") {
        let got = counter(&body, "tma_cycles_total", core_type(t)).unwrap();
        assert!((got - cycles(t).unwrap()).abs() < 1e-6, "{}", core_type(t));
    }
}
