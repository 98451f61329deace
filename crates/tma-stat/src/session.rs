//! A counting session: a live run (perf_event_open through `tma-perf`, or the synthetic
//! backend) or the replay of a `--record` snapshot, through the same code. The session plans
//! the groups, runs the target (once, once per group with `--no-multiplex`, N times with
//! `--repeat`), descends one level per run with `--drilldown`, and writes the tree of each
//! step, the `-e` counts and the per-core / per-thread trees. Without hardware counters it
//! counts and writes software events only.
//!
//! In interval mode (`-I`), each interval is evaluated and written as soon as it is read, so
//! memory stays flat however long the run; only `--per-core`/`--per-thread` and `--repeat`
//! keep the intervals, because their output needs all of them.

use std::io::Write;
use std::time::Duration;

use tma_catalog::Model;
use tma_metrics::{Bottleneck, StopReason};
use tma_perf::backend::{
    self, Backend, Ending, Live, Measurement, RawInterval, Replay, RunError, RunOptions, Target,
};
use tma_perf::event::{EventSpec, SoftwareEvent, SpecKind};
use tma_perf::host::{self, Host};
use tma_perf::plan::Plan;
use tma_perf::snapshot::{self, CpuIdentity, RecordedRun, Settings, Snapshot, Topology};
use tma_perf::sysfs::Pmus;
use tma_perf::{Interval, ReadingStatus};

use crate::error::usage;
use crate::eval::{Request, RunInfo, StatRun, TreeEval};
use crate::plan::{counting_plan, hw_groups};
use crate::render::counts;
use crate::render::tree::{self, TreeWriter};
use crate::watch::{WatchInterval, WatchStart, Watcher};
use crate::{BackendChoice, LiveOptions, Outcome, RunStart, StatConfig, StatError};

/// Where a session's measurements come from.
enum Source {
    /// perf_event_open (or the synthetic backend); the plan is computed.
    Live(Box<dyn Backend>),
    /// A snapshot: its plans by drill-down step, its runs in order.
    Replay { plans: Vec<Plan>, backend: Replay },
}

/// Everything counted so far (what a snapshot holds) and how to go on.
struct Session<'a> {
    cfg: &'a StatConfig,
    settings: Settings,
    target: Target,
    opts: RunOptions,
    source: Source,
    plans: Vec<Plan>,
    runs: Vec<RecordedRun>,
    hardware: bool,
    note: Option<String>,
    cpu_source: String,
    model_key: Option<String>,
    topology: Topology,
    /// CPU -> core label, for --per-core.
    cpu_cores: Vec<(u32, String)>,
    /// Told before each live run of the target.
    progress: &'a mut dyn FnMut(RunStart),
    /// Keep each step's evaluated samples here instead of writing its tree
    /// ([`crate::evaluate`]): the intervals of `-I`, else one per `--repeat` run.
    keep: Option<Vec<StatRun>>,
    /// Hand each interval to this watcher instead of writing it ([`crate::watch`]).
    watch: Option<&'a mut dyn Watcher>,
}

impl Session<'_> {
    fn replaying(&self) -> bool {
        matches!(self.source, Source::Replay { .. })
    }
    fn interval_mode(&self) -> bool {
        self.settings.interval_ms.is_some()
    }
    fn breakdown(&self) -> bool {
        self.settings.per_core || self.settings.per_thread
    }
    fn repeat(&self) -> u32 {
        self.settings.repeat.max(1)
    }
    fn command(&self) -> Option<String> {
        match &self.target {
            Target::Command(argv) => Some(argv.join(" ")),
            _ => None,
        }
    }
}

/// `tma stat` without `--import`: count the configured target.
pub(crate) fn run_live(
    cfg: &StatConfig,
    live: &LiveOptions,
    out: &mut dyn Write,
    notes: &mut dyn Write,
    progress: &mut dyn FnMut(RunStart),
    watch: Option<&mut dyn Watcher>,
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
        progress,
        keep: None,
        watch: watch.map(|w| -> &mut dyn Watcher { w }),
    };
    if live.per_core {
        let cpus = match &target {
            Target::System(Some(c)) => c.clone(),
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
        match hardware(&mut s, model, &extra, out, notes) {
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
    let mut events = backend::software_events();
    for e in &extra {
        if e.is_hardware() {
            writeln!(
                notes,
                "tma: warning: -e {} needs a hardware PMU; not counted",
                e.name
            )?;
        } else if !events.iter().any(|x| x.name == e.name) {
            events.push(e.clone());
        }
    }
    s.note = Some(format!("hardware counters not available: {reason}"));
    s.source = Source::Live(Box::new(Live));
    s.settings.events = live.events.clone();
    let outcome = software(&mut s, Plan::software(&events), out, notes)?;
    write_record(&s, live)?;
    Ok(outcome)
}

/// `tma stat --import SNAPSHOT`: the recorded session again, through the same code, with
/// the recorded measurements instead of counting.
pub(crate) fn replay(
    cfg: &StatConfig,
    snap: Snapshot,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    replay_session(cfg, snap, false, None, out, notes).map(|(outcome, _)| outcome)
}

/// The evaluated samples of a snapshot's tree ([`crate::evaluate`]): nothing is written to
/// the output; notes still go to `notes`.
pub(crate) fn replay_kept(
    cfg: &StatConfig,
    snap: Snapshot,
    notes: &mut dyn Write,
) -> Result<StatRun, StatError> {
    if !snap.hardware {
        return Err(usage(
            "the snapshot holds software counts only (no hardware counters where it was \
             recorded): there is no TMA tree to compare",
        ));
    }
    if snap.settings.drilldown {
        return Err(usage(
            "the snapshot is a --drilldown run (one partial tree per step): record with -l N \
             for one whole tree to compare",
        ));
    }
    if snap.settings.per_core || snap.settings.per_thread {
        return Err(usage(
            "the snapshot is a --per-core/--per-thread run: record without them to compare \
             whole trees",
        ));
    }
    let (_, mut kept) = replay_session(cfg, snap, true, None, &mut std::io::sink(), notes)?;
    kept.pop()
        .ok_or_else(|| usage("the snapshot gave no tree to compare"))
}

/// A snapshot's intervals to `watch` ([`crate::watch`]), through the replay code.
pub(crate) fn replay_watch(
    cfg: &StatConfig,
    snap: Snapshot,
    watch: &mut dyn Watcher,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    if snap.settings.drilldown || snap.settings.repeat > 1 {
        return Err(usage(
            "the snapshot is a --drilldown or --repeat run: record one run (with -I MS for \
             intervals) to serve it",
        ));
    }
    replay_session(cfg, snap, false, Some(watch), &mut std::io::sink(), notes)
        .map(|(outcome, _)| outcome)
}

fn replay_session(
    cfg: &StatConfig,
    snap: Snapshot,
    keep: bool,
    watch: Option<&mut dyn Watcher>,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(Outcome, Vec<StatRun>), StatError> {
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
        progress: &mut |_| {},
        keep: keep.then(Vec::new),
        watch: watch.map(|w| -> &mut dyn Watcher { w }),
    };
    if !snap.hardware {
        let plan = snap.plans.first().cloned().unwrap_or_default();
        return Ok((software(&mut s, plan, out, notes)?, Vec::new()));
    }
    let key = cfg
        .cpu
        .as_deref()
        .or(snap.cpu.catalog_key.as_deref())
        .ok_or_else(|| usage("the snapshot names no CPU model; pass --cpu NAME"))?;
    let model = tma_catalog::by_name(key)?;
    let extra: Vec<EventSpec> = Vec::new();
    let outcome = hardware(&mut s, model, &extra, out, notes)?;
    Ok((outcome, s.keep.take().unwrap_or_default()))
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

fn target_of(cfg: &StatConfig, a: &LiveOptions) -> Result<Target, StatError> {
    let mut kinds = 0;
    kinds += usize::from(!a.command.is_empty());
    kinds += usize::from(!a.pids.is_empty());
    kinds += usize::from(!a.tids.is_empty());
    // -G counts the cgroups on every CPU: -a may be given with it, as for perf stat.
    kinds += usize::from((a.all_cpus && a.cgroups.is_empty()) || a.cpu_list.is_some());
    kinds += usize::from(!a.cgroups.is_empty());
    if kinds == 0 {
        return Err(usage("nothing to measure: give a command after `--`, -p PID, -t TID, -a or -G CGROUP (or --import FILE)"));
    }
    if kinds > 1 {
        return Err(usage(
            "give only one of: a command after `--`, -p, -t, -a/-C, -G",
        ));
    }
    if !a.cgroups.is_empty() {
        let mut dirs = Vec::new();
        for name in &a.cgroups {
            let dir = cfg.host.cgroup_dir(name).map_err(usage)?;
            if !dir.join("cgroup.procs").exists() {
                return Err(RunError::BadCgroup {
                    path: dir,
                    why: "no such cgroup (no cgroup.procs there)".into(),
                }
                .into());
            }
            dirs.push(dir);
        }
        return Ok(Target::Cgroups(dirs));
    }
    if !a.command.is_empty() {
        // Checked before anything is printed; the backend looks it up again to exec it.
        if backend::resolve_command(&a.command[0]).is_none() {
            return Err(RunError::CommandNotFound(a.command[0].clone()).into());
        }
        return Ok(Target::Command(a.command.clone()));
    }
    let ids = |v: &[u32], what: &str| -> Result<Vec<i32>, StatError> {
        v.iter()
            .map(|&x| {
                i32::try_from(x)
                    .ok()
                    .filter(|x| *x > 0)
                    .ok_or_else(|| usage(format!("bad {what} {x}")))
            })
            .collect()
    };
    if !a.pids.is_empty() {
        let pids = ids(&a.pids, "pid")?;
        if let Some(p) = pids.iter().find(|p| !tma_sys::process::pid_alive(**p)) {
            return Err(RunError::NoSuchProcess(*p).into());
        }
        return Ok(Target::Pids(pids));
    }
    if !a.tids.is_empty() {
        let tids = ids(&a.tids, "tid")?;
        if let Some(t) = tids
            .iter()
            .find(|t| !cfg.host.proc.join(t.to_string()).exists())
        {
            return Err(RunError::NoSuchProcess(*t).into());
        }
        return Ok(Target::Tids(tids));
    }
    let cpus = match &a.cpu_list {
        None => None,
        Some(s) => Some(host::parse_cpu_list(s.as_bytes()).map_err(|_| {
            usage(format!(
                "bad CPU list {s:?}: expected numbers and ranges like 0-3,8"
            ))
        })?),
    };
    if let Some(list) = &cpus {
        let online = cfg.host.online_cpus_or_cpu0();
        if let Some(bad) = list.iter().find(|c| !online.contains(c)) {
            return Err(RunError::BadCpu(*bad).into());
        }
    }
    Ok(Target::System(cpus))
}

fn check_flags(cfg: &StatConfig, a: &LiveOptions, target: &Target) -> Result<(), StatError> {
    if a.interval_ms == Some(0) {
        return Err(usage(
            "-I 0: the interval must be at least 1 ms (e.g. -I 1000)",
        ));
    }
    if let Some(d) = a.duration_s {
        if !(d.is_finite() && d > 0.0) {
            return Err(usage(format!(
                "--duration {d}: give a positive number of seconds"
            )));
        }
    }
    if a.repeat == Some(0) {
        return Err(usage("--repeat 0: give at least 1 run"));
    }
    let is_cmd = matches!(target, Target::Command(_));
    let repeat = a.repeat.unwrap_or(1);
    if (repeat > 1 || a.no_multiplex || a.drilldown) && !is_cmd && a.duration_s.is_none() {
        return Err(usage("--repeat, --no-multiplex and --drilldown rerun the target: use them with a command, or give --duration S"));
    }
    if a.no_multiplex && a.interval_ms.is_some() {
        return Err(usage(
            "--no-multiplex runs once per group and cannot print -I intervals; drop one of them",
        ));
    }
    if a.drilldown && a.interval_ms.is_some() {
        return Err(usage("--drilldown needs whole-run totals; drop -I"));
    }
    if cfg.render.compact && a.interval_ms.is_none() {
        return Err(usage(
            "--compact prints one line per interval: use it with -I MS",
        ));
    }
    if a.per_core && !matches!(target, Target::System(_)) {
        return Err(usage("--per-core needs system-wide counting (-a or -C)"));
    }
    if a.per_thread && !matches!(target, Target::Pids(_) | Target::Tids(_)) {
        return Err(usage("--per-thread needs -p PID or -t TID"));
    }
    if (a.per_core || a.per_thread) && (a.drilldown || a.no_multiplex || repeat > 1) {
        return Err(usage("--per-core / --per-thread cannot be combined with --drilldown, --no-multiplex or --repeat"));
    }
    Ok(())
}

/// `-e` events: software names, catalog event ids, `pmu/terms/` or `rNNNN`.
fn parse_extra_events(
    cfg: &StatConfig,
    events: &[String],
    pmus: &Pmus,
) -> Result<Vec<EventSpec>, StatError> {
    let model = crate::model::select_model(cfg.cpu.as_deref(), None, &cfg.host)
        .ok()
        .map(|(m, _)| m);
    let mut out = Vec::new();
    for e in events
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        if let Some(sw) = SoftwareEvent::parse(e) {
            out.push(EventSpec::software(sw));
            continue;
        }
        if let Some(s) = model
            .and_then(|m| m.encode(e).ok())
            .and_then(|enc| EventSpec::from_encoding(&enc))
        {
            out.push(s);
            continue;
        }
        if let Some((pmu, terms)) = e.strip_suffix('/').and_then(|s| s.split_once('/')) {
            let p = pmus.get(pmu).ok_or_else(|| {
                StatError::UnknownEvent(format!(
                    "unknown event {e:?}: this machine has no PMU named {pmu:?}"
                ))
            })?;
            let cfg = p
                .encode_terms(terms)
                .or_else(|_| p.encode_alias(terms))
                .map_err(|why| StatError::UnknownEvent(format!("unknown event {e:?}: {why}")))?;
            let mut s = EventSpec::raw(e, pmu, cfg.config);
            s.config1 = cfg.config1;
            out.push(s);
            continue;
        }
        if let Some(hex) = e
            .strip_prefix('r')
            .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
        {
            let cfg = u64::from_str_radix(hex, 16)
                .map_err(|_| StatError::UnknownEvent(format!("bad raw event {e:?}")))?;
            out.push(EventSpec::raw(e, "cpu", cfg));
            continue;
        }
        const GENERIC: [&str; 6] = [
            "cycles",
            "instructions",
            "cache-references",
            "cache-misses",
            "branches",
            "branch-misses",
        ];
        if let Some(id) = GENERIC.iter().position(|h| h.eq_ignore_ascii_case(e)) {
            // PERF_COUNT_HW_* ids are the positions in this list.
            out.push(EventSpec {
                kind: SpecKind::Hardware(id as u64),
                ..EventSpec::raw(e, "", id as u64)
            });
            continue;
        }
        return Err(StatError::UnknownEvent(format!(
            "unknown event {e:?}: give a software event (task-clock, context-switches, ...), an \
             event of the --cpu model (`tma list --events --cpu NAME`), PMU/terms/ or rHEX"
        )));
    }
    Ok(out)
}

/// Readings to evaluate: per interval (interval mode) or the whole run; `--no-multiplex`
/// runs combined; `--repeat` runs averaged.
fn intervals_of(
    plan: &Plan,
    runs: &[Measurement],
    no_multiplex: bool,
    repeat: u32,
    interval_mode: bool,
) -> Vec<Interval> {
    if interval_mode && runs.len() == 1 {
        return runs[0]
            .intervals
            .iter()
            .map(|iv| Measurement::interval_readings(plan, iv, false))
            .collect();
    }
    let totals = repeat_totals(plan, runs, no_multiplex, repeat);
    if totals.len() == 1 {
        return totals;
    }
    vec![mean_interval(&totals)]
}

/// The readings of each `--repeat` run over its whole time (`--no-multiplex` runs of one
/// repetition combined).
fn repeat_totals(
    plan: &Plan,
    runs: &[Measurement],
    no_multiplex: bool,
    repeat: u32,
) -> Vec<Interval> {
    let per_repeat = if repeat == 0 {
        runs.len()
    } else {
        runs.len() / repeat as usize
    };
    runs.chunks(per_repeat.max(1))
        .map(|chunk| {
            let m = if no_multiplex || chunk.len() > 1 {
                backend::combine_runs(chunk)
            } else {
                chunk[0].clone()
            };
            Measurement::interval_readings(plan, &m.total(), false)
        })
        .collect()
}

/// Mean of each aggregated reading over repeated runs.
fn mean_interval(ivs: &[Interval]) -> Interval {
    let mut out = ivs[0].clone();
    let n = ivs.len() as f64;
    for r in out.readings.iter_mut() {
        let vals: Vec<&tma_perf::Reading> = ivs.iter().filter_map(|iv| iv.get(&r.event)).collect();
        let counted: Vec<f64> = vals.iter().filter_map(|x| x.value).collect();
        if counted.len() == vals.len() && !counted.is_empty() {
            r.value = Some(counted.iter().sum::<f64>() / counted.len() as f64);
            r.status = ReadingStatus::Counted;
        }
        let shares: Vec<f64> = vals.iter().filter_map(|x| x.counted_share).collect();
        if !shares.is_empty() {
            r.counted_share = Some(shares.iter().cloned().fold(f64::INFINITY, f64::min));
        }
        r.raw = None;
    }
    out.end_s = ivs.iter().map(|iv| iv.end_s - iv.start_s).sum::<f64>() / n;
    out.start_s = 0.0;
    out
}

/// The "where the data came from" header text; the same for a live run and its replay.
fn source_text(target: &Target, plan: &Plan, settings: &Settings) -> String {
    let hw = hw_groups(plan).len();
    let how = if settings.no_multiplex {
        format!("{hw} runs, one per counter group")
    } else if hw > 1 {
        format!("{hw} counter groups multiplexed")
    } else {
        "1 counter group".to_string()
    };
    let rep = if settings.repeat > 1 {
        format!(", mean of {} runs", settings.repeat)
    } else {
        String::new()
    };
    format!(
        "counted live on {} ({how}{rep})",
        counts::describe_target(target)
    )
}

/// Save the session as a snapshot (`--record FILE`), atomically.
fn write_record(s: &Session, live: &LiveOptions) -> Result<(), StatError> {
    let Some(path) = &live.record else {
        return Ok(());
    };
    let cpuinfo = s.cfg.host.cpuinfo_bytes().unwrap_or_default();
    let mut cpu = CpuIdentity::from_cpuinfo(&cpuinfo);
    if s.model_key.is_some() {
        cpu.catalog_key = s.model_key.clone();
    }
    let start = s.runs.first().map_or(0.0, |r| r.measurement.start_unix_s);
    let dur: u64 = s.runs.iter().map(|r| r.measurement.wall_ns).sum();
    let snap = Snapshot {
        schema: snapshot::SCHEMA.into(),
        schema_version: snapshot::SCHEMA_VERSION,
        tool: format!("tma {}", env!("CARGO_PKG_VERSION")),
        cpu,
        topology: s.topology,
        command_line: s.cfg.command_line.clone(),
        target: s.target.clone(),
        settings: s.settings.clone(),
        hardware: s.hardware,
        note: s.note.clone(),
        start_unix_s: start,
        duration_s: dur as f64 / 1e9,
        plans: s.plans.clone(),
        runs: s.runs.clone(),
        cpu_cores: s.cpu_cores.clone(),
    };
    tma_report::write_output(path, |w| {
        snap.write(w)?;
        Ok(())
    })?;
    Ok(())
}

fn ending_note(notes: &mut dyn Write, e: Ending, target: &Target) -> std::io::Result<()> {
    match e {
        Ending::Interrupted => {
            writeln!(notes, "tma: interrupted: printing what was counted so far")
        }
        Ending::TargetsExited if matches!(target, Target::Pids(_)) => writeln!(
            notes,
            "tma: the attached process exited; counts cover it until then"
        ),
        _ => Ok(()),
    }
}

/// Run one plan (once, per group with --no-multiplex, N times with --repeat). Each interval
/// of a run goes to `on_interval` as it is read.
fn measure(
    s: &mut Session,
    plan: &Plan,
    step: u32,
    notes: &mut dyn Write,
    on_interval: &mut dyn FnMut(&RawInterval),
) -> Result<Vec<Measurement>, StatError> {
    let plan_idx = s.plans.len();
    s.plans.push(plan.clone());
    let repeat = s.repeat();
    let hw = hw_groups(plan);
    let sw: Vec<usize> = (0..plan.groups.len()).filter(|i| !hw.contains(i)).collect();
    let subsets: Vec<Vec<usize>> = if s.settings.no_multiplex && hw.len() > 1 {
        hw.iter()
            .enumerate()
            .map(|(k, &g)| {
                let mut v = vec![g];
                if k == 0 {
                    v.extend(&sw);
                }
                v
            })
            .collect()
    } else {
        vec![(0..plan.groups.len()).collect()]
    };
    if s.settings.no_multiplex && hw.len() > 1 && step == 0 && !s.replaying() {
        writeln!(
            notes,
            "tma: --no-multiplex: {} counter groups, so the target runs {} times{}",
            hw.len(),
            subsets.len() * repeat as usize,
            if repeat > 1 {
                format!(" ({} per repetition)", subsets.len())
            } else {
                String::new()
            }
        )?;
    }
    let mut out = Vec::new();
    let runs = repeat as usize * subsets.len();
    for r in 0..repeat {
        for (k, sub) in subsets.iter().enumerate() {
            if !s.replaying() {
                (s.progress)(RunStart {
                    step,
                    run: r as usize * subsets.len() + k + 1,
                    runs,
                });
            }
            let p = if sub.len() == plan.groups.len() {
                plan.clone()
            } else {
                backend::sub_plan(plan, sub)
            };
            let m = match &mut s.source {
                Source::Live(be) => be.run_with(&p, &s.target, &s.opts, on_interval)?,
                Source::Replay { backend, .. } => {
                    backend.run_with(&p, &s.target, &s.opts, on_interval)?
                }
            };
            let m = backend::only_groups(&m, sub);
            if r == 0 {
                for (g, why) in &m.failed_groups {
                    writeln!(notes, "tma: warning: counter group {g} not counted ({why}); its events show as not supported")?;
                }
            }
            let ending = m.ending;
            s.runs.push(RecordedRun {
                step,
                plan: plan_idx,
                repeat: r,
                groups: sub.clone(),
                measurement: m.clone(),
            });
            out.push(m);
            if ending == Ending::Interrupted {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// `--per-core` / `--per-thread`: one breakdown key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Core(String),
    Thread(u32),
}

impl Key {
    fn label(&self) -> String {
        match self {
            Key::Core(c) => format!("core {c}"),
            Key::Thread(t) => format!("thread {t}"),
        }
    }
}

/// `S<package>-C<core>` of each CPU (`S?-C?` when its topology is unreadable).
fn cpu_cores(host: &Host, cpus: &[u32]) -> Vec<(u32, String)> {
    cpus.iter()
        .map(|&c| {
            let label = host.cpu_topology(c).map_or_else(
                |_| "S?-C?".to_string(),
                |t| format!("S{}-C{}", t.package, t.core),
            );
            (c, label)
        })
        .collect()
}

fn core_label(cores: &[(u32, String)], cpu: u32) -> String {
    cores
        .iter()
        .find(|(x, _)| *x == cpu)
        .map_or_else(|| format!("cpu{cpu}"), |(_, l)| l.clone())
}

/// The breakdown keys of a run, in order of first appearance.
fn breakdown_keys(
    runs: &[Measurement],
    per_core: bool,
    per_thread: bool,
    cores: &[(u32, String)],
) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    for g in runs
        .iter()
        .flat_map(|m| &m.intervals)
        .flat_map(|iv| &iv.groups)
    {
        let k = if per_core {
            g.cpu.map(|c| Key::Core(core_label(cores, c)))
        } else if per_thread {
            g.tid.map(Key::Thread)
        } else {
            None
        };
        if let Some(k) = k {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// The part of a measurement that belongs to one breakdown key.
fn only_key(m: &Measurement, key: &Key, cores: &[(u32, String)]) -> Measurement {
    let mut out = m.clone();
    for iv in &mut out.intervals {
        iv.groups.retain(|g| match key {
            Key::Core(label) => g.cpu.is_some_and(|c| core_label(cores, c) == *label),
            Key::Thread(t) => g.tid == Some(*t),
        });
    }
    out
}

/// One tree per core / thread after the aggregated tree.
fn breakdown_trees(
    out: &mut dyn Write,
    s: &Session,
    info: &RunInfo,
    plan: &Plan,
    runs: &[Measurement],
) -> Result<(), StatError> {
    for key in breakdown_keys(
        runs,
        s.settings.per_core,
        !s.settings.per_core,
        &s.cpu_cores,
    ) {
        let part: Vec<Measurement> = runs
            .iter()
            .map(|m| only_key(m, &key, &s.cpu_cores))
            .collect();
        let ivs = intervals_of(plan, &part, false, 1, s.interval_mode());
        let mut kinfo = info.clone();
        kinfo.source = format!("{}, {}", info.source, key.label());
        let run = StatRun::evaluate(kinfo, &ivs)?;
        out.write_all(b"\n")?;
        tree::render(out, &run, &s.cfg.render)?;
    }
    Ok(())
}

/// The TMA tree of each step: count, write, descend with `--drilldown`.
fn hardware(
    s: &mut Session,
    model: &'static Model,
    extra: &[EventSpec],
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    s.hardware = true;
    s.note = Some(format!("cpu: {}", s.cpu_source));
    let nmi = s.cfg.host.nmi_watchdog_on();
    let drilldown = s.settings.drilldown;
    let choice = crate::eval::MetricChoice::resolve(s.cfg, model)?;
    let mut request = Request {
        level: if drilldown {
            1
        } else {
            s.settings.level.max(choice.level)
        },
        nodes: if drilldown {
            Vec::new()
        } else {
            s.settings.nodes.clone()
        },
        topology: Some(s.topology),
        metrics: choice.metrics,
        bottlenecks: choice.bottlenecks,
    };
    if drilldown && !s.replaying() {
        s.settings.nodes = Vec::new();
    }
    let mut step = 0u32;
    let mut path: Vec<String> = Vec::new();
    let mut last_ending = Ending::Exited(0);
    let mut bottleneck: Option<Bottleneck>;
    loop {
        let plan = step_plan(s, model, &request, step, extra, nmi)?;
        if s.cfg.render.verbose > 0 {
            write!(notes, "{plan}")?;
        }
        for (e, why) in &plan.unschedulable {
            writeln!(notes, "tma: warning: {e} cannot be counted here: {why}")?;
        }
        if drilldown && !s.replaying() {
            s.settings.nodes.push(format!(
                "{step}:{}:{}",
                request.level,
                request.nodes.first().map_or("", String::as_str)
            ));
        }
        let info = RunInfo {
            model,
            cpu_source: s.cpu_source.clone(),
            source: source_text(&s.target, &plan, &s.settings),
            interval_mode: s.interval_mode(),
            request: request.clone(),
            command: s.command(),
            event_map: Vec::new(),
        };
        let (runs, b) = count_step(s, &plan, &info, step, out, notes)?;
        bottleneck = b;
        last_ending = runs.last().map_or(last_ending, |m| m.ending);
        if s.keep.is_none() {
            step_extras(s, &plan, &info, &runs, out, notes)?;
        }
        if !drilldown || last_ending == Ending::Interrupted {
            break;
        }
        let b = bottleneck
            .as_ref()
            .ok_or_else(|| usage("--drilldown: the run gave no data"))?;
        match descend(model, &request, b, &mut path) {
            Some(next) => {
                request = next;
                step += 1;
            }
            None => {
                drilldown_note(notes, step, &path, &b.stop)?;
                break;
            }
        }
    }
    if !s.replaying() {
        ending_note(notes, last_ending, &s.target)?;
    }
    Ok(Outcome {
        ending: (!s.replaying()).then_some(last_ending),
        bottleneck,
    })
}

/// The groups of one step: planned for a live run, as recorded for a replay.
fn step_plan(
    s: &Session,
    model: &'static Model,
    request: &Request,
    step: u32,
    extra: &[EventSpec],
    nmi: bool,
) -> Result<Plan, StatError> {
    match &s.source {
        Source::Replay { plans, .. } => plans.get(step as usize).cloned().ok_or_else(|| {
            usage("the snapshot holds fewer drill-down steps than its data leads to")
        }),
        Source::Live(_) => Ok(counting_plan(model, &request.selection(), extra, nmi)?),
    }
}

/// Count one step and write its tree; the runs and the bottleneck of the last tree written.
/// In interval mode each interval is evaluated and written as soon as it is read.
fn count_step(
    s: &mut Session,
    plan: &Plan,
    info: &RunInfo,
    step: u32,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(Vec<Measurement>, Option<Bottleneck>), StatError> {
    let stream = s.interval_mode() && s.repeat() == 1 && !s.breakdown() && s.keep.is_none();
    // Streamed intervals are not kept unless a snapshot is to hold them.
    s.opts.stream_only = stream && s.cfg.live.record.is_none();
    let eval = TreeEval::new(info)?;
    let mut writer = TreeWriter::new(s.cfg.render.clone());
    let mut last = None;
    let mut failed: Option<StatError> = None;
    let mut watch = s.watch.take();
    let target = s.target.clone();
    let mut watched = 0usize;
    let runs = {
        let mut on_interval = |raw: &RawInterval| {
            if !stream || failed.is_some() {
                return;
            }
            let iv = Measurement::interval_readings(plan, raw, false);
            if let Some(w) = watch.as_deref_mut() {
                if watched == 0 {
                    if let Err(e) = eval.check_present(std::iter::once(&iv)) {
                        failed = Some(e);
                        return;
                    }
                    w.start(WatchStart::Tree {
                        info,
                        plan: Some(plan),
                        target: Some(&target),
                    });
                }
                watched += 1;
                let ir = eval.eval(&iv);
                w.interval(WatchInterval {
                    raw: Some(raw),
                    readings: &iv,
                    report: Some(&ir),
                });
                last = Some(ir.report.bottleneck);
                return;
            }
            let r = (|| -> Result<_, StatError> {
                if writer.count() == 0 {
                    eval.check_present(std::iter::once(&iv))?;
                    writer.begin(out, info)?;
                }
                let ir = eval.eval(&iv);
                writer.interval(out, info, &ir)?;
                out.flush()?;
                Ok(ir)
            })();
            match r {
                Ok(ir) => last = Some(ir.report.bottleneck),
                Err(e) => failed = Some(e),
            }
        };
        measure(s, plan, step, notes, &mut on_interval)
    };
    s.watch = watch;
    let runs = runs?;
    if let Some(e) = failed {
        return Err(e);
    }
    if stream && s.watch.is_some() {
        return Ok((runs, last));
    }
    if stream {
        if writer.count() == 0 {
            writer.begin(out, info)?;
        }
        writer.end(out, info)?;
        return Ok((runs, last));
    }
    let intervals = intervals_of(
        plan,
        &runs,
        s.settings.no_multiplex,
        s.repeat(),
        s.interval_mode(),
    );
    let run = StatRun::evaluate(info.clone(), &intervals)?;
    let bottleneck = run.bottleneck().cloned();
    if let Some(w) = s.watch.as_deref_mut() {
        // A recording without intervals: its one (or few) trees, without raw readings.
        w.start(WatchStart::Tree {
            info,
            plan: Some(plan),
            target: Some(&s.target),
        });
        for (iv, ir) in intervals.iter().zip(&run.intervals) {
            w.interval(WatchInterval {
                raw: None,
                readings: iv,
                report: Some(ir),
            });
        }
        return Ok((runs, bottleneck));
    }
    if s.keep.is_some() {
        // One sample per --repeat run (the tree above is their mean), else the intervals.
        let run = if s.repeat() > 1 {
            let totals = repeat_totals(plan, &runs, s.settings.no_multiplex, s.repeat());
            StatRun::evaluate(info.clone(), &totals)?
        } else {
            run
        };
        s.keep.get_or_insert_with(Vec::new).push(run);
        return Ok((runs, bottleneck));
    }
    tree::render(out, &run, &s.cfg.render)?;
    Ok((runs, bottleneck))
}

/// What follows a step's tree: `-e` counts, the per-core/thread trees, `--repeat` spreads.
fn step_extras(
    s: &Session,
    plan: &Plan,
    info: &RunInfo,
    runs: &[Measurement],
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(), StatError> {
    if s.cfg.render.format == tree::Format::Text && !s.interval_mode() {
        let total = intervals_of(plan, runs, s.settings.no_multiplex, s.repeat(), false);
        counts::extra_events(out, &s.settings.events, total.last())?;
    }
    if s.breakdown() {
        breakdown_trees(out, s, info, plan, runs)?;
    }
    if s.repeat() > 1 {
        for (ev, mean, pct) in backend::repeat_stats(plan, runs) {
            if s.cfg.render.verbose > 0 || !plan.events().any(|e| e.name == ev && !e.is_hardware())
            {
                writeln!(
                    notes,
                    "tma: {ev}: mean {mean:.0} +- {pct:.2}% over {} runs",
                    s.repeat()
                )?;
            }
        }
    }
    Ok(())
}

/// Drill-down: the next request, one level into the bottleneck, or `None` where the descent
/// ends. `path` collects the nodes descended through.
fn descend(
    model: &'static Model,
    request: &Request,
    b: &Bottleneck,
    path: &mut Vec<String>,
) -> Option<Request> {
    let reached = b.path.len() as u8 == request.level;
    match (&b.node, reached) {
        (Some(node), true) if model.children(Some(node)).next().is_some() && request.level < 6 => {
            path.push(node.clone());
            Some(Request {
                level: request.level + 1,
                nodes: vec![node.clone()],
                topology: request.topology,
                metrics: request.metrics.clone(),
                bottlenecks: request.bottlenecks.clone(),
            })
        }
        _ => {
            if let Some(n) = &b.node {
                if !path.contains(n) {
                    path.push(n.clone());
                }
            }
            None
        }
    }
}

fn drilldown_note(
    notes: &mut dyn Write,
    step: u32,
    path: &[String],
    stop: &StopReason,
) -> std::io::Result<()> {
    writeln!(
        notes,
        "tma: drill-down: {} run{}: {} (stopped: {})",
        step + 1,
        if step == 0 { "" } else { "s" },
        if path.is_empty() {
            "-".to_string()
        } else {
            path.join(" -> ")
        },
        stop_words(stop)
    )
}

fn stop_words(stop: &StopReason) -> String {
    match stop {
        StopReason::Leaf => "a leaf of the tree".to_string(),
        StopReason::NoChildOverThreshold => "no child over threshold".to_string(),
        StopReason::Ambiguous { first, second, gap } => {
            format!("{first} and {second} within {gap:.1} points")
        }
        StopReason::NothingOverThreshold => "nothing over threshold at level 1".to_string(),
        StopReason::NotMeasured => "not measured".to_string(),
        StopReason::Undecided { not_computed } => {
            format!("undecided: {} not computed", not_computed.join(", "))
        }
    }
}

/// No hardware counters: count (or replay) software events and write their counts.
fn software(
    s: &mut Session,
    plan: Plan,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    s.hardware = false;
    if s.cfg.render.verbose > 0 {
        write!(notes, "{plan}")?;
    }
    if let Some(p) = &s.cfg.render.plot {
        writeln!(
            notes,
            "tma: --plot {}: not written: there is no TMA tree to draw without hardware counters              (software counts only)",
            p.display()
        )?;
    }
    let fmt = counts::CountsFormat::of(&s.cfg.render);
    let stream = s.interval_mode() && !s.breakdown() && s.repeat() == 1;
    s.opts.stream_only = stream && s.cfg.live.record.is_none();
    let target = s.target.clone();
    let mut k = 0usize;
    let mut failed: Option<StatError> = None;
    let mut watch = s.watch.take();
    let reason = s.note.clone().map(|n| {
        n.strip_prefix("hardware counters not available: ")
            .map_or(n.clone(), str::to_string)
    });
    let runs = {
        let mut on_interval = |raw: &RawInterval| {
            if !stream || failed.is_some() {
                return;
            }
            if let Some(w) = watch.as_deref_mut() {
                if k == 0 {
                    w.start(WatchStart::Software {
                        plan: &plan,
                        target: Some(&target),
                        reason: reason.as_deref(),
                    });
                }
                k += 1;
                let iv = Measurement::interval_readings(&plan, raw, false);
                w.interval(WatchInterval {
                    raw: Some(raw),
                    readings: &iv,
                    report: None,
                });
                return;
            }
            let r = counts::software_interval(out, &target, &plan, raw, k == 0, fmt)
                .and_then(|()| out.flush().map_err(Into::into));
            if let Err(e) = r {
                failed = Some(e.into());
            }
            k += 1;
        };
        measure(s, &plan, 0, notes, &mut on_interval)
    };
    s.watch = watch;
    let runs = runs?;
    if let Some(e) = failed {
        return Err(e);
    }
    if !stream {
        if let Some(w) = s.watch.as_deref_mut() {
            // A recording without intervals: its whole-run counts.
            w.start(WatchStart::Software {
                plan: &plan,
                target: Some(&s.target),
                reason: reason.as_deref(),
            });
            for m in &runs {
                let total = m.total();
                let iv = Measurement::interval_readings(&plan, &total, false);
                w.interval(WatchInterval {
                    raw: Some(&total),
                    readings: &iv,
                    report: None,
                });
            }
        }
    }
    let last = runs.last().map_or(Ending::Exited(0), |m| m.ending);
    if !s.replaying() {
        ending_note(notes, last, &s.target)?;
    }
    if !stream && s.watch.is_none() {
        counts::software(out, &s.target, &plan, &runs, s.interval_mode(), fmt)?;
        if s.breakdown() {
            for key in breakdown_keys(
                &runs,
                s.settings.per_core,
                s.settings.per_thread,
                &s.cpu_cores,
            ) {
                let part: Vec<Measurement> = runs
                    .iter()
                    .map(|m| only_key(m, &key, &s.cpu_cores))
                    .collect();
                writeln!(out)?;
                writeln!(out, "--- {} ---", key.label())?;
                counts::software(out, &s.target, &plan, &part, s.interval_mode(), fmt)?;
            }
        }
    }
    Ok(Outcome {
        ending: (!s.replaying()).then_some(last),
        bottleneck: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_perf::host::Host;
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
