//! A counting session: a live run (perf_event_open through `tma-perf`, or the synthetic
//! backend) or the replay of a `--record` snapshot, through the same code. The session plans
//! the groups, runs the target (once, once per group with `--no-multiplex`, N times with
//! `--repeat`), descends one level per run with `--drilldown` (`steps`), splits per core or
//! thread (`breakdown`), and hands each step to the run's [`IntervalSink`]. Without hardware
//! counters it counts software events only (`software`).
//!
//! In interval mode (`-I`), each interval is evaluated and handed on as soon as it is read, so
//! memory stays flat however long the run; only `--per-core`/`--per-thread` and `--repeat`
//! keep the intervals, because their results need all of them.

mod breakdown;
mod hybrid;
mod measure;
pub(crate) mod software;
mod state;
mod steps;
mod target;
mod type_shares;

use breakdown::cpu_cores;
use hybrid::{hybrid, recorded_core_types};
use measure::write_record;
use software::software;
use state::{Session, Source};
use steps::hardware;
use target::{check_flags, parse_extra_events, target_of};

use std::io::Write;
use std::time::Duration;

use tma_catalog::Model;
use tma_host::sysfs::Pmus;
use tma_perf::backend::{Backend, Live, Replay, RunError, RunOptions, Target};
use tma_perf::event::EventSpec;
use tma_perf::plan::Plan;
use tma_perf::snapshot::{Settings, Snapshot, Topology};

use crate::error::usage;
use crate::hybrid::{core_tables, pick_core_type};
use crate::sink::IntervalSink;
use crate::{BackendChoice, LiveOptions, Outcome, StatConfig, StatError};

/// `tma stat` without `--import`: count the configured target.
pub(crate) fn run_live(
    cfg: &StatConfig,
    live: &LiveOptions,
    sink: &mut dyn IntervalSink,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let target = target_of(cfg, live)?;
    check_flags(cfg, live, &target)?;
    let opts = run_options(cfg, live);
    let pmus = Pmus::discover(&cfg.host.sys).unwrap_or_default();
    let extra = parse_extra_events(cfg, &live.events, &pmus)?;
    let synthetic = matches!(live.backend, BackendChoice::Synthetic(_));
    let backend: Box<dyn Backend> = match &live.backend {
        BackendChoice::Synthetic(s) => Box::new(s.clone()),
        BackendChoice::Live => Box::new(Live),
    };
    let mut s = Session {
        cfg,
        settings: Settings {
            level: cfg.level,
            nodes: cfg.nodes.clone(),
            interval_ms: live.interval_ms,
            no_multiplex: live.no_multiplex,
            repeat: live.repeat.unwrap_or(1),
            drilldown: live.drilldown,
            per_core: live.per_core,
            per_thread: live.per_thread,
            events: extra.iter().map(|e| e.name.clone()).collect(),
            compact: cfg.render.compact,
        },
        target: target.clone(),
        opts,
        source: Source::Live(backend),
        plans: Vec::new(),
        runs: Vec::new(),
        hardware: false,
        note: None,
        cpu_source: String::new(),
        model_key: None,
        topology: Topology::discover(&cfg.host),
        cpu_cores: Vec::new(),
        core_type: None,
        sink: Some(sink),
    };
    if live.per_core {
        let cpus = match &target {
            Target::System(Some(c)) | Target::SystemDuring { cpus: Some(c), .. } => c.clone(),
            _ => cfg.host.online_cpus_or_cpu0(),
        };
        s.cpu_cores = cpu_cores(&cfg.host, &cpus);
    }
    // Hardware path, when there is a core PMU (or a synthetic backend stands in for one).
    let reason = if !synthetic && !pmus.has_core_pmu() {
        format!(
            "no `cpu` PMU in {}/bus/event_source/devices (only {})",
            cfg.host.sys.display(),
            pmus.pmus
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        let (model, source) = crate::model::select_model(cfg.cpu.as_deref(), None, &cfg.host)?;
        s.cpu_source = source.describe().to_string();
        s.model_key = Some(model.key.to_string());
        match core_types_then_hardware(&mut s, live, model, &pmus, &extra, notes) {
            Ok(outcome) => {
                write_record(&s, live)?;
                return Ok(outcome);
            }
            Err(StatError::Run(RunError::NoHardware { event, source })) => {
                s.plans.clear();
                s.runs.clear();
                format!("perf_event_open of {event} failed: {source}")
            }
            Err(e) => return Err(e),
        }
    };
    let hyper = cfg.host.has_cpu_flag("hypervisor");
    let why = if hyper {
        "this is a virtual machine (`hypervisor` flag in /proc/cpuinfo) without a virtual PMU"
    } else {
        "the kernel has no PMU driver for this CPU, or the PMU is disabled"
    };
    writeln!(
        notes,
        "tma: hardware counters are not available: {why} ({reason}). Enable the vPMU in the \
         hypervisor or use a bare-metal instance, or record elsewhere with the command from \
         `tma events --perf-cmd` and analyse it with `tma stat --import FILE`. Software counts only:"
    )?;
    let plan = software::software_plan(&extra, notes)?;
    s.note = Some(format!("hardware counters not available: {reason}"));
    s.source = Source::Live(Box::new(Live));
    s.settings.events = live.events.clone();
    let outcome = software(&mut s, plan, notes)?;
    write_record(&s, live)?;
    Ok(outcome)
}

/// `tma stat --import SNAPSHOT`: the recorded session again, through the same code, with
/// the recorded measurements instead of counting.
pub(crate) fn replay(
    cfg: &StatConfig,
    snap: Snapshot,
    sink: &mut dyn IntervalSink,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    replay_session(cfg, snap, sink, notes)
}

fn replay_session(
    cfg: &StatConfig,
    snap: Snapshot,
    sink: &mut dyn IntervalSink,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let mut backend = Replay::default();
    for r in &snap.runs {
        let plan = snap
            .plans
            .get(r.plan)
            .ok_or_else(|| usage("the snapshot is inconsistent: a run names a missing plan"))?;
        backend
            .runs
            .push_back((plan.clone(), r.measurement.clone()));
    }
    // The plan of each drill-down step, in step order.
    let mut plans: Vec<Plan> = Vec::new();
    for step in 0..=snap.runs.iter().map(|r| r.step).max().unwrap_or(0) {
        if let Some(r) = snap.runs.iter().find(|r| r.step == step) {
            plans.push(snap.plans[r.plan].clone());
        }
    }
    if plans.is_empty() {
        return Err(usage(
            "the snapshot holds no runs: nothing was counted when it was recorded",
        ));
    }
    let mut opts = RunOptions::new();
    opts.interval = snap.settings.interval_ms.map(Duration::from_millis);
    let cpu_source = snap
        .note
        .as_deref()
        .and_then(|n| n.strip_prefix("cpu: "))
        .unwrap_or("named in the recording")
        .to_string();
    let mut s = Session {
        cfg,
        settings: snap.settings.clone(),
        target: snap.target.clone(),
        opts,
        source: Source::Replay { plans, backend },
        plans: Vec::new(),
        runs: Vec::new(),
        hardware: snap.hardware,
        note: snap.note.clone(),
        cpu_source,
        model_key: snap.cpu.catalog_key.clone(),
        topology: snap.topology,
        cpu_cores: snap.cpu_cores.clone(),
        core_type: None,
        sink: Some(sink),
    };
    if !snap.hardware {
        let plan = snap.plans.first().cloned().unwrap_or_default();
        return software(&mut s, plan, notes);
    }
    let key = cfg
        .cpu
        .as_deref()
        .or(snap.cpu.catalog_key.as_deref())
        .ok_or_else(|| usage("the snapshot names no CPU model; pass --cpu NAME"))?;
    let model = tma_catalog::by_name(key)?;
    let extra: Vec<EventSpec> = Vec::new();
    // A run of every core type of a hybrid part: its plan names them.
    let types = match &s.source {
        Source::Replay { plans, .. } => plans.first().map(recorded_core_types).unwrap_or_default(),
        Source::Live(_) => Vec::new(),
    };
    if !types.is_empty() {
        let types: Vec<&str> = types.iter().map(String::as_str).collect();
        let mut tables = core_tables(model, &types)?;
        if cfg.one_tree {
            // diff and report compare one tree: the core type of the table --cpu names.
            let keep = tables
                .iter()
                .position(|t| t.model.key == model.key)
                .unwrap_or(0);
            let this = tables.swap_remove(keep);
            writeln!(
                notes,
                "tma: note: the snapshot holds every core type of a hybrid part; this reads the \
                 {} tree ({} events, {} table); --cpu names another type's table",
                this.label, this.pmu, this.model.key
            )?;
            tables = vec![this];
        }
        return hybrid(&mut s, &tables, &extra, notes);
    }
    // A run of one core type of a hybrid part (`--cputype`): its tree is marked.
    if let Some([pmu]) = s.plans_first_counter_pmus().as_deref() {
        if pmu.starts_with("cpu_") {
            s.core_type = Some(crate::hybrid::core_label(pmu));
        }
    }
    hardware(&mut s, model, &extra, notes)
}

/// A live run on a hybrid part: every core type in one run, or the one `--cputype` names;
/// elsewhere the one tree of the model.
fn core_types_then_hardware(
    s: &mut Session,
    live: &LiveOptions,
    model: &'static Model,
    pmus: &Pmus,
    extra: &[EventSpec],
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let types: Vec<&str> = pmus.core_types().iter().map(|p| p.name.as_str()).collect();
    if types.len() < 2 {
        if let Some(t) = &live.cputype {
            return Err(usage(format!(
                "--cputype {t}: this machine has one core type (no hybrid PMUs with a `cpus` \
                 file in {}/bus/event_source/devices)",
                s.cfg.host.sys.display()
            )));
        }
        return hardware(s, model, extra, notes);
    }
    let mut tables = core_tables(model, &types)?;
    if let Some(want) = &live.cputype {
        let pmu = pick_core_type(&types, want, "this machine's")?;
        tables.retain(|t| t.pmu == pmu);
        if let [t] = tables.as_slice() {
            if !t.borrowed {
                s.core_type = Some(t.label);
                s.model_key = Some(t.model.key.to_string());
                return hardware(s, t.model, extra, notes);
            }
        }
    }
    hybrid(s, &tables, extra, notes)
}

/// What the backend needs to know about a live run beyond the plan and the target.
fn run_options(cfg: &StatConfig, live: &LiveOptions) -> RunOptions {
    RunOptions {
        interval: live.interval_ms.map(Duration::from_millis),
        duration: live.duration_s.map(Duration::from_secs_f64),
        host: cfg.host.clone(),
        command_stdout: live.command_stdout,
        // Set per step: whether the intervals are written as they are read.
        stream_only: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_host::Host;
    use tma_perf::process::CommandStdout;

    #[test]
    fn live_options_reach_the_backend() {
        let cfg = StatConfig {
            host: Host::new("/s", "/p"),
            ..StatConfig::default()
        };
        let live = LiveOptions {
            interval_ms: Some(250),
            duration_s: Some(1.5),
            command_stdout: CommandStdout::Null,
            ..LiveOptions::default()
        };
        let o = run_options(&cfg, &live);
        assert_eq!(o.command_stdout, CommandStdout::Null);
        assert_eq!(o.interval, Some(Duration::from_millis(250)));
        assert_eq!(o.duration, Some(Duration::from_millis(1500)));
        assert_eq!(o.host, cfg.host);
        let o = run_options(&cfg, &LiveOptions::default());
        assert_eq!(o.command_stdout, CommandStdout::Inherit);
    }
}
