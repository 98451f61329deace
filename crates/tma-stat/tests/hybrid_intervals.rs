//! Hybrid parts with `-I`: every interval hands on each core type's tree and the
//! merged view as soon as it is read, through [`IntervalSink::start_trees`],
//! `tree_interval` and `finish_trees`. Counted with the synthetic backend on the fake sysfs
//! trees of `tests/fixtures/hybrid` (two and three core types; its README says how each
//! file was made), recorded, and replayed.

use std::path::{Path, PathBuf};

use tma_host::Host;
use tma_perf::backend::Synthetic;
use tma_stat::sink::{Finish, IntervalData, Start};
use tma_stat::{
    BackendChoice, Input, IntervalSink, LiveOptions, LiveTarget, StatConfig, StatError,
};
use tma_testkit::fixture;

/// One call a sink received.
#[derive(Debug, Clone, PartialEq)]
enum Call {
    Start(String),
    Interval(Tree),
    Finish(String, usize),
    StartTrees(Vec<String>),
    TreeInterval(usize, Tree),
    FinishTrees(Vec<(String, usize)>),
}

/// One interval of one tree: its core type, its times, each node's value and each count.
#[derive(Debug, Clone, PartialEq)]
struct Tree {
    core_type: String,
    start_s: f64,
    end_s: f64,
    nodes: Vec<(String, Option<f64>)>,
    counts: Vec<(String, Option<f64>)>,
}

/// Records every call, in order, overriding nothing but what it must.
#[derive(Default)]
struct Calls {
    calls: Vec<Call>,
    /// The core type of the latest `start`.
    current: String,
}

fn core_type(start: &Start<'_>) -> String {
    match start {
        Start::Tree { info, .. } => info.core_type.unwrap_or("-").to_string(),
        Start::Software { .. } => "software".to_string(),
    }
}

fn tree(core_type: &str, iv: &IntervalData<'_>) -> Tree {
    let r = iv.report.expect("a tree");
    Tree {
        core_type: core_type.to_string(),
        start_s: r.start_s,
        end_s: r.end_s,
        nodes: r
            .report
            .nodes
            .iter()
            .map(|n| (n.name.to_string(), n.value))
            .collect(),
        counts: iv
            .readings
            .readings
            .iter()
            .map(|x| (x.event.clone(), x.value))
            .collect(),
    }
}

fn finish_of(end: &Finish<'_>) -> (String, usize) {
    match end {
        Finish::Tree { info, whole } => (
            info.core_type.unwrap_or("-").to_string(),
            whole.map_or(0, |w| w.parts.len()),
        ),
        Finish::Software { .. } => ("software".to_string(), 0),
    }
}

impl IntervalSink for Calls {
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        self.current = core_type(&start);
        self.calls.push(Call::Start(self.current.clone()));
        Ok(())
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        self.calls.push(Call::Interval(tree(&self.current, &iv)));
        Ok(())
    }
    fn finish(&mut self, end: Finish<'_>) -> Result<(), StatError> {
        let (t, parts) = finish_of(&end);
        self.calls.push(Call::Finish(t, parts));
        Ok(())
    }
    fn start_trees(&mut self, trees: &[Start<'_>]) -> Result<(), StatError> {
        self.calls
            .push(Call::StartTrees(trees.iter().map(core_type).collect()));
        Ok(())
    }
    fn tree_interval(
        &mut self,
        k: usize,
        start: Start<'_>,
        iv: IntervalData<'_>,
    ) -> Result<(), StatError> {
        self.calls
            .push(Call::TreeInterval(k, tree(&core_type(&start), &iv)));
        Ok(())
    }
    fn finish_trees(&mut self, ends: &[Finish<'_>]) -> Result<(), StatError> {
        self.calls
            .push(Call::FinishTrees(ends.iter().map(finish_of).collect()));
        Ok(())
    }
}

/// A sink that keeps only the trait's defaults for several trees (as a collector that
/// publishes each interval under its latest start would).
#[derive(Default)]
struct Plain(Calls);

impl IntervalSink for Plain {
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        self.0.start(start)
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        self.0.interval(iv)
    }
    fn finish(&mut self, end: Finish<'_>) -> Result<(), StatError> {
        self.0.finish(end)
    }
}

/// A live run on the fake sysfs `root` with the synthetic counts `counts`.
fn live(root: &str, counts: &str, target: LiveTarget, interval_ms: Option<u64>) -> StatConfig {
    let bytes = std::fs::read(fixture("hybrid").join(counts)).unwrap();
    let synthetic: Synthetic = serde_json::from_slice(&bytes).unwrap();
    StatConfig {
        cpu: Some("adl".into()),
        host: Host::under(&fixture("hybrid").join(root)),
        input: Input::Live(LiveOptions {
            target,
            interval_ms,
            duration_s: Some(1.0),
            backend: BackendChoice::Synthetic(synthetic),
            ..LiveOptions::default()
        }),
        ..StatConfig::default()
    }
}

fn system() -> LiveTarget {
    LiveTarget::System {
        cpus: None,
        command: None,
    }
}

fn calls(cfg: &StatConfig) -> Vec<Call> {
    let mut sink = Calls::default();
    let mut notes = Vec::new();
    tma_stat::run(cfg, &mut sink, &mut notes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&notes)));
    sink.calls
}

/// Run `cfg` live with `--record`; the calls and the snapshot's path.
fn recorded(mut cfg: StatConfig, dir: &Path) -> (Vec<Call>, PathBuf) {
    let snap = dir.join("hybrid.json");
    if let Input::Live(l) = &mut cfg.input {
        l.record = Some(snap.clone());
    }
    (calls(&cfg), snap)
}

fn replayed(snap: &Path, root: &str) -> Vec<Call> {
    calls(&StatConfig {
        host: Host::under(&fixture("hybrid").join(root)),
        input: Input::Import(snap.to_path_buf()),
        ..StatConfig::default()
    })
}

/// The interval trees of an interleaved run, after checking its order: `start_trees` with
/// `types` then the merged view, every tree of interval k (in that order, with one span)
/// before any of interval k+1, then `finish_trees`; no plain step calls.
fn interleaved(calls: &[Call], types: &[&str]) -> Vec<Vec<Tree>> {
    let mut want: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    want.push("merged".into());
    assert_eq!(calls.first(), Some(&Call::StartTrees(want.clone())));
    let Some(Call::FinishTrees(ends)) = calls.last() else {
        panic!("no finish_trees: {calls:?}");
    };
    let ended: Vec<&str> = ends.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(ended, want);
    let body = &calls[1..calls.len() - 1];
    assert_eq!(body.len() % want.len(), 0, "{body:?}");
    let mut out = Vec::new();
    let mut last_end = f64::NEG_INFINITY;
    for chunk in body.chunks(want.len()) {
        let trees: Vec<Tree> = chunk
            .iter()
            .enumerate()
            .map(|(i, c)| match c {
                Call::TreeInterval(k, t) => {
                    assert_eq!(*k, i, "{chunk:?}");
                    assert_eq!(t.core_type, want[i]);
                    t.clone()
                }
                other => panic!("not a tree interval: {other:?}"),
            })
            .collect();
        let span = (trees[0].start_s, trees[0].end_s);
        assert!(
            trees.iter().all(|t| (t.start_s, t.end_s) == span),
            "{trees:?}"
        );
        assert!(
            span.0 >= last_end - 1e-12,
            "intervals out of order: {body:?}"
        );
        last_end = span.1;
        out.push(trees);
    }
    out
}

fn value(t: &Tree, node: &str) -> Option<f64> {
    t.nodes.iter().find(|n| n.0 == node).and_then(|n| n.1)
}

fn count(t: &Tree, event: &str) -> Option<f64> {
    t.counts.iter().find(|n| n.0 == event).and_then(|n| n.1)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn each_interval_hands_on_every_core_type_then_the_merged_view() {
    for (root, counts, types) in [
        ("two-types", "adl-perf6.16.json", &["P-core", "E-core"][..]),
        (
            "three-types",
            "three-types.json",
            &["P-core", "E-core", "cpu_lowpower"][..],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (live, snap) = recorded(live(root, counts, system(), Some(250)), dir.path());
        let trees = interleaved(&live, types);
        assert_eq!(trees.len(), 4, "{root}: 1 s in 250 ms intervals");
        // Replayed, the same calls with the same trees.
        assert_eq!(replayed(&snap, root), live, "{root}");
        // Merged: each node the types' values weighted by their cycles in that interval.
        for per in &trees {
            let merged = per.last().unwrap();
            let cycles: Vec<f64> = per[..types.len()]
                .iter()
                .map(|t| {
                    count(t, "CPU_CLK_UNHALTED.THREAD")
                        .or(count(t, "CPU_CLK_UNHALTED.CORE"))
                        .unwrap()
                })
                .collect();
            for node in ["Frontend_Bound", "Backend_Bound", "Retiring"] {
                let want = per[..types.len()]
                    .iter()
                    .zip(&cycles)
                    .map(|(t, c)| value(t, node).unwrap() * c)
                    .sum::<f64>()
                    / cycles.iter().sum::<f64>();
                let got = value(merged, node).unwrap();
                assert!(close(got, want), "{root} merged {node}: {got} vs {want}");
            }
        }
        // A sink with the defaults gets each tree's start before each of its intervals.
        let mut plain = Plain::default();
        let cfg = StatConfig {
            host: Host::under(&fixture("hybrid").join(root)),
            input: Input::Import(snap.clone()),
            ..StatConfig::default()
        };
        tma_stat::run(&cfg, &mut plain, &mut Vec::new()).unwrap();
        let mut want = Vec::new();
        for per in &trees {
            for t in per {
                want.push(Call::Start(t.core_type.clone()));
                want.push(Call::Interval(t.clone()));
            }
        }
        for t in types.iter().chain(&["merged"]) {
            want.push(Call::Finish(t.to_string(), 0));
        }
        assert_eq!(plain.0.calls, want, "{root}");
    }
}

/// Replay `snap` with only its interval `k`, as a whole run: the whole-run path's trees.
fn whole_run_of_interval(snap: &Path, k: usize, root: &str, dir: &Path) -> Vec<Tree> {
    let mut s = tma_perf::snapshot::read(&std::fs::read(snap).unwrap()).unwrap();
    s.settings.interval_ms = None;
    for r in s.runs.iter_mut() {
        let iv = r.measurement.intervals[k].clone();
        r.measurement.intervals = vec![iv];
    }
    let one = dir.join(format!("interval-{k}.json"));
    let mut bytes = Vec::new();
    s.write(&mut bytes).unwrap();
    std::fs::write(&one, bytes).unwrap();
    // A whole run hands its trees on as plain steps, one after the other.
    let calls = replayed(&one, root);
    let mut trees = Vec::new();
    for c in &calls {
        match c {
            Call::Start(_) | Call::Finish(..) => {}
            Call::Interval(t) => trees.push(t.clone()),
            other => panic!("a whole run of several trees as steps: {other:?}"),
        }
    }
    trees
}

#[test]
fn each_intervals_trees_equal_the_whole_run_trees_of_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "three-types",
            "three-types.json",
            system(),
            &["P-core", "E-core", "cpu_lowpower"][..],
        ),
        (
            "two-types",
            "migrating-thread.json",
            LiveTarget::Tids(vec![101, 102]),
            &["P-core", "E-core"][..],
        ),
    ];
    for (root, counts, target, types) in cases {
        let sub = dir.path().join(root);
        std::fs::create_dir_all(&sub).unwrap();
        let interval = if root == "three-types" { 500 } else { 1000 };
        let (live, snap) = recorded(live(root, counts, target, Some(interval)), &sub);
        let trees = interleaved(&live, types);
        assert_eq!(trees.len(), 2, "{root}");
        for (k, per) in trees.iter().enumerate() {
            let whole = whole_run_of_interval(&snap, k, root, &sub);
            assert_eq!(whole.len(), per.len(), "{root} {k}");
            for (a, b) in per.iter().zip(&whole) {
                assert_eq!(a.core_type, b.core_type);
                assert_eq!(a.nodes, b.nodes, "{root} interval {k} {}", a.core_type);
                assert_eq!(a.counts, b.counts, "{root} interval {k} {}", a.core_type);
            }
        }
    }
}

#[test]
fn a_thread_that_migrates_is_counted_where_it_ran_in_each_interval() {
    // Thread 101: the P-cores in the first second, the E-cores in the second; thread 102
    // on the E-cores throughout. Each thread's task-clock is 1 s per second.
    let mut cfg = live(
        "two-types",
        "migrating-thread.json",
        LiveTarget::Tids(vec![101, 102]),
        Some(1000),
    );
    if let Input::Live(l) = &mut cfg.input {
        l.per_thread = true;
    }
    let calls = calls(&cfg);
    let trees = interleaved(&calls, &["P-core", "E-core"]);
    assert_eq!(trees.len(), 2);
    let (p, e, m) = (0, 1, 2);
    // The P-cores: thread 101 in the first second, nobody in the second.
    assert!(close(value(&trees[0][p], "Retiring").unwrap(), 40.0));
    assert_eq!(value(&trees[1][p], "Retiring"), None);
    assert_eq!(count(&trees[0][p], "task-clock"), Some(1e9));
    assert_eq!(count(&trees[1][p], "task-clock").unwrap_or(0.0), 0.0);
    // The E-cores: thread 102's time only in the first second (101 was on the P-cores),
    // both threads' in the second.
    assert!(close(value(&trees[0][e], "Retiring").unwrap(), 20.0));
    assert!(close(value(&trees[1][e], "Retiring").unwrap(), 20.0));
    assert_eq!(count(&trees[0][e], "task-clock"), Some(1e9));
    assert_eq!(count(&trees[1][e], "task-clock"), Some(2e9));
    assert_eq!(count(&trees[0][e], "CPU_CLK_UNHALTED.CORE"), Some(1e9));
    assert_eq!(count(&trees[1][e], "CPU_CLK_UNHALTED.CORE"), Some(2e9));
    // Merged: half and half, then the E-cores alone.
    assert!(close(value(&trees[0][m], "Retiring").unwrap(), 30.0));
    assert!(close(value(&trees[1][m], "Retiring").unwrap(), 20.0));
    // At the end, each type's per-thread trees: thread 101 on the P-cores; both on the
    // E-cores.
    assert_eq!(
        calls.last(),
        Some(&Call::FinishTrees(vec![
            ("P-core".into(), 1),
            ("E-core".into(), 2),
            ("merged".into(), 0)
        ]))
    );
}

#[test]
fn the_json_of_an_interleaved_run_reads_back_as_one_core_types_tree() {
    let cfg = StatConfig {
        render: tma_stat::RenderOptions {
            format: tma_stat::Format::Json,
            ..Default::default()
        },
        ..live(
            "two-types",
            "migrating-thread.json",
            LiveTarget::Tids(vec![101, 102]),
            Some(1000),
        )
    };
    let mut out = Vec::new();
    tma_stat::run(
        &cfg,
        &mut tma_stat::TreeOutput::new(&mut out, &cfg.render),
        &mut Vec::new(),
    )
    .unwrap();
    let trees = interleaved(&calls(&cfg), &["P-core", "E-core"]);
    for (cpu, k, name) in [(None, 0, "P-core"), (Some("adl-e"), 1, "E-core")] {
        let doc = tma_stat::render::doc::one_tree(&out, cpu).unwrap();
        assert_eq!(doc.head.core_type.as_deref(), Some(name));
        assert_eq!(doc.intervals.len(), 2);
        for (iv, per) in doc.intervals.iter().zip(&trees) {
            let values: Vec<(String, Option<f64>)> = iv
                .nodes
                .iter()
                .map(|n| (n.name.to_string(), n.value))
                .collect();
            assert_eq!(values, per[k].nodes, "{name}");
        }
    }
    // One document: itself.
    let one = br#"{"schema":"tma.stat"}"#;
    assert!(tma_stat::render::doc::one_tree(one, None).is_err());
}
