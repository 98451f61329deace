//! `tma_stat::run` in-process: live runs with the synthetic backend (the hardware paths on a
//! machine without a PMU) and with real software events, recorded and replayed; a replay
//! must write exactly what the live run wrote.

use std::path::Path;

use tma_host::Host;
use tma_perf::backend::Synthetic;
use tma_stat::{BackendChoice, Format, Input, LiveOptions, LiveTarget, RenderOptions, StatConfig};
use tma_testkit::fixture;

fn zen4_synthetic() -> BackendChoice {
    let bytes = std::fs::read(fixture("live/synthetic-zen4-sha256.json")).unwrap();
    BackendChoice::Synthetic(serde_json::from_slice::<Synthetic>(&bytes).unwrap())
}

fn has_core_pmu() -> bool {
    ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}

/// Run `cfg` live with `--record`, then replay the snapshot with `replay` settings; return
/// (live output, replay output, live notes).
fn live_then_replay(mut cfg: StatConfig, replay: StatConfig) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("s.json");
    live_of(&mut cfg).record = Some(snap.clone());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    run(&cfg, &mut out, &mut notes).unwrap();
    let replay = StatConfig {
        input: Input::Import(snap),
        ..replay
    };
    let mut again = Vec::new();
    run(&replay, &mut again, &mut Vec::new()).unwrap();
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(again).unwrap(),
        String::from_utf8(notes).unwrap(),
    )
}

fn command(argv: &[&str], cpu: Option<&str>, backend: BackendChoice) -> StatConfig {
    StatConfig {
        cpu: cpu.map(String::from),
        input: Input::Live(LiveOptions {
            target: LiveTarget::Command(argv.iter().map(|s| s.into()).collect()),
            backend,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn software_record_replay_same_output() {
    if has_core_pmu() {
        eprintln!("skipped: this machine has a hardware PMU (the software-only path is not taken)");
        return;
    }
    let (live, replay, notes) = live_then_replay(
        command(&["true"], None, BackendChoice::Live),
        StatConfig::default(),
    );
    assert!(live.contains("task-clock"), "{live}");
    assert!(
        notes.contains("hardware counters are not available"),
        "{notes}"
    );
    assert_eq!(live, replay);
    let mut cfg = command(&["sleep", "0.25"], None, BackendChoice::Live);
    live_of(&mut cfg).interval_ms = Some(100);
    let (live, replay, _) = live_then_replay(cfg, StatConfig::default());
    assert!(live.contains("--- interval"), "{live}");
    assert_eq!(live, replay);
}

#[test]
fn drilldown_record_replay_same_output() {
    let mut cfg = command(&["true"], Some("zen4"), zen4_synthetic());
    live_of(&mut cfg).drilldown = true;
    let (live, replay, notes) = live_then_replay(cfg, StatConfig::default());
    assert_eq!(live.matches("AMD Zen 4").count(), 2, "{live}");
    assert!(notes.contains("tma: drill-down: 2 runs"), "{notes}");
    assert_eq!(live, replay);
}

#[test]
fn extra_events_record_replay_same_output() {
    let mut cfg = command(&["true"], Some("zen4"), zen4_synthetic());
    live_of(&mut cfg).events = vec!["ex_ret_ucode_ops,cs".into()];
    let (live, replay, _) = live_then_replay(cfg, StatConfig::default());
    // 366e6 true count, read a quarter of the time (2 hardware groups) and scaled back.
    assert!(
        live.contains("           366000000  ex_ret_ucode_ops  [25.0% counted]"),
        "{live}"
    );
    assert!(live.contains("  context-switches\n"), "{live}");
    assert_eq!(live, replay);
    let mut bad = command(&["true"], Some("zen4"), zen4_synthetic());
    live_of(&mut bad).events = vec!["no_such_event".into()];
    let e = run(&bad, &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("unknown event"), "{e}");
}

#[test]
fn per_core_record_replay_same_output() {
    let mut cfg = command(&[], Some("zen4"), zen4_synthetic());
    cfg.level = 2;
    live_of(&mut cfg).target = LiveTarget::System {
        cpus: Some("0".into()),
        command: None,
    };
    live_of(&mut cfg).per_core = true;
    live_of(&mut cfg).duration_s = Some(1.0);
    let (live, replay, _) = live_then_replay(cfg, StatConfig::default());
    assert!(live.contains(", core S"), "{live}");
    assert_eq!(live, replay);
}

/// `-C 0 -- CMD`: system-wide on the CPU list for as long as the command runs, per core too.
#[test]
fn system_wide_while_a_command_runs() {
    let mut cfg = command(&[], Some("zen4"), zen4_synthetic());
    live_of(&mut cfg).target = LiveTarget::System {
        cpus: Some("0".into()),
        command: Some(vec!["true".into()]),
    };
    live_of(&mut cfg).per_core = true;
    let (live, replay, _) = live_then_replay(cfg, StatConfig::default());
    assert!(live.contains(", core S"), "{live}");
    assert_eq!(live, replay);
    // Without a command, a system-wide rerun needs --duration; with one it reruns the command.
    let mut cfg = command(&[], Some("zen4"), zen4_synthetic());
    live_of(&mut cfg).target = LiveTarget::System {
        cpus: Some("0".into()),
        command: Some(vec!["true".into()]),
    };
    live_of(&mut cfg).repeat = Some(2);
    run(&cfg, &mut Vec::new(), &mut Vec::new()).unwrap();
    live_of(&mut cfg).target = LiveTarget::System {
        cpus: Some("0".into()),
        command: None,
    };
    let e = run(&cfg, &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("--duration"), "{e}");
}

/// Interval mode streams: every format of a live run equals the replay's, and the JSON is
/// one valid document whatever the number of intervals.
#[test]
fn interval_streams_in_every_format() {
    for (format, compact) in [
        (Format::Text, false),
        (Format::Text, true),
        (Format::Json, false),
        (Format::Csv, false),
    ] {
        let render = RenderOptions {
            format,
            compact,
            verbose: 0,
            plot: None,
        };
        let mut cfg = command(&["true"], Some("zen4"), zen4_synthetic());
        cfg.level = 2;
        cfg.render = render.clone();
        live_of(&mut cfg).interval_ms = Some(100);
        let replay = StatConfig {
            render,
            ..Default::default()
        };
        let (live, again, _) = live_then_replay(cfg, replay);
        assert_eq!(live, again, "{format:?} compact={compact}");
        if format == Format::Json {
            let v: serde_json::Value = serde_json::from_str(&live).unwrap();
            assert!(v["intervals"].as_array().unwrap().len() > 1, "{live}");
        }
    }
}

/// `tma locate` asks for the bottleneck in-process.
#[test]
fn outcome_names_the_bottleneck() {
    let mut cfg = command(&["true"], Some("zen4"), zen4_synthetic());
    cfg.level = 2;
    let o = run(&cfg, &mut std::io::sink(), &mut Vec::new()).unwrap();
    let b = o.bottleneck.clone().expect("a bottleneck");
    assert_eq!(
        b.path.first().map(String::as_str),
        Some("backend_bound"),
        "{b:?}"
    );
    assert_eq!(o.exit_status(), 0);
}

/// A recording cannot carry live settings (the input is one enum); a front end that reads
/// both refuses them by the names `flags_set` gives.
#[test]
fn live_flags_are_named_for_a_front_end_to_refuse() {
    let live = LiveOptions {
        target: LiveTarget::all_cpus(),
        interval_ms: Some(100),
        ..Default::default()
    };
    assert_eq!(live.flags_set(), ["-a", "-I"]);
    assert!(LiveOptions::default().flags_set().is_empty());
    let cfg = StatConfig {
        input: Input::Example,
        ..Default::default()
    };
    assert!(cfg.live().is_none());
}

/// The example streams through the same import path as a file and names its bottleneck.
#[test]
fn example_runs_anywhere() {
    let cfg = StatConfig {
        input: Input::Example,
        host: Host::new("/nonexistent/sys", "/nonexistent"),
        ..Default::default()
    };
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let o = run(&cfg, &mut out, &mut notes).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("AMD Zen 4 (zen4, from --cpu)"), "{out}");
    assert!(out.contains("Bottleneck:"), "{out}");
    assert!(o.bottleneck.and_then(|b| b.node).is_some());
}

/// The progress hook hears of every live run (numbered within its drill-down step), and of
/// none when a snapshot is replayed.
#[test]
fn progress_hears_each_live_run() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("s.json");
    let mut cfg = command(&["true"], Some("zen4"), zen4_synthetic());
    live_of(&mut cfg).repeat = Some(2);
    live_of(&mut cfg).no_multiplex = true;
    live_of(&mut cfg).drilldown = true;
    live_of(&mut cfg).record = Some(snap.clone());
    let mut seen = Vec::new();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    run_with_progress(&cfg, &mut out, &mut notes, &mut |p| seen.push(p)).unwrap();
    let mut plain = cfg.clone();
    live_of(&mut plain).record = None;
    let mut plain_out = Vec::new();
    run(&plain, &mut plain_out, &mut Vec::new()).unwrap();
    assert_eq!(out, plain_out, "the hook changes no output");

    assert!(seen.len() >= 4, "{seen:?}");
    let steps = seen.iter().map(|p| p.step).max().unwrap();
    assert!(steps >= 1, "drill-down descended: {seen:?}");
    for step in 0..=steps {
        let of_step: Vec<_> = seen.iter().filter(|p| p.step == step).collect();
        let runs = of_step[0].runs;
        assert!(runs >= 2 && runs % 2 == 0, "--repeat 2: {of_step:?}");
        assert_eq!(
            of_step.iter().map(|p| p.run).collect::<Vec<_>>(),
            (1..=runs).collect::<Vec<_>>()
        );
        assert!(of_step.iter().all(|p| p.runs == runs));
    }

    let replay = StatConfig {
        input: Input::Import(snap),
        cpu: Some("zen4".into()),
        ..Default::default()
    };
    let mut replayed = Vec::new();
    run_with_progress(&replay, &mut std::io::sink(), &mut Vec::new(), &mut |p| {
        replayed.push(p)
    })
    .unwrap();
    assert!(replayed.is_empty(), "{replayed:?}");
}

/// `tma stat`'s printed output of a run: the tree sink into `out`.
fn run(
    cfg: &StatConfig,
    out: &mut dyn std::io::Write,
    notes: &mut dyn std::io::Write,
) -> Result<tma_stat::Outcome, tma_stat::StatError> {
    let mut sink = tma_stat::TreeOutput::new(out, &cfg.render);
    tma_stat::run(cfg, &mut sink, notes)
}

/// [`run`], telling `progress` before each run of the counted target.
fn run_with_progress(
    cfg: &StatConfig,
    out: &mut dyn std::io::Write,
    notes: &mut dyn std::io::Write,
    progress: &mut dyn FnMut(tma_stat::RunStart),
) -> Result<tma_stat::Outcome, tma_stat::StatError> {
    let mut sink = tma_stat::TreeOutput::new(out, &cfg.render).with_progress(progress);
    tma_stat::run(cfg, &mut sink, notes)
}

/// The live settings of a config made by [`command`].
fn live_of(cfg: &mut StatConfig) -> &mut LiveOptions {
    match &mut cfg.input {
        Input::Live(l) => l,
        other => panic!("not a live config: {other:?}"),
    }
}

/// One run feeds two sinks: the printed tree is the one a tree sink alone prints, and the
/// collector holds the trees `evaluate` gives.
#[test]
fn two_sinks_take_one_run() {
    let cfg = StatConfig {
        input: Input::Example,
        host: Host::new("/nonexistent/sys", "/nonexistent"),
        ..Default::default()
    };
    let mut both_out = Vec::new();
    let mut collect = tma_stat::Collect::default();
    {
        let mut tree = tma_stat::TreeOutput::new(&mut both_out, &cfg.render);
        let mut both = tma_stat::sink::Both(&mut tree, &mut collect);
        tma_stat::run(&cfg, &mut both, &mut Vec::new()).unwrap();
    }
    let mut alone = Vec::new();
    run(&cfg, &mut alone, &mut Vec::new()).unwrap();
    assert!(!alone.is_empty());
    assert_eq!(both_out, alone);
    let (kept, repeats) = collect.into_run().unwrap();
    assert!(!repeats);
    let ev = tma_stat::evaluate(&cfg, &mut Vec::new()).unwrap();
    assert_eq!(kept.intervals.len(), ev.run.intervals.len());
    assert_eq!(
        kept.intervals[0].report.bottleneck,
        ev.run.intervals[0].report.bottleneck
    );
    assert_eq!(kept.info.request.level, 2, "the example's level-2 default");
}
