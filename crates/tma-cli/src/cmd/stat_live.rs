//! Live counting for `tma stat` (no `--import`): a command, `-p` pids, `-t` threads or the
//! system (`-a`, `-C`), through perf_event_open (crate `tma-perf`), with no `perf` binary.
//!
//! Output: the TMA tree (or software counts) goes to standard output or `-o FILE`, exactly as
//! `tma stat --import` prints it, so a `--record` snapshot replays byte for byte; notes (the
//! no-PMU paragraph, `-v` plan, run counts, drill-down path, `--repeat` spread) go to stderr.
//! The command's own stdin/stdout/stderr are inherited. Exit status: the command's (128+N
//! when killed by signal N, 130 after Ctrl-C), 0 for attach / system-wide runs, 2 for bad input.
//!
//! Test-only hooks (environment variables, not options; documented here and in the README of
//! tests/fixtures): `TMA_SYSFS_ROOT` and `TMA_PROC_ROOT` replace `/sys` and `/proc` for PMU
//! discovery, `perf_event_paranoid` and the NMI watchdog; `TMA_REPLAY_BACKEND=FILE` replaces
//! perf_event_open by a `tma_perf::backend::Synthetic` backend read from FILE (JSON: chosen
//! per-event counts with enabled/running times), so scaling, counted shares, --no-multiplex,
//! --repeat and --drilldown run end to end on a machine without a PMU.
//!
//! Replay: [`import_snapshot`] prints everything a live run printed (each drill-down step,
//! per-core / per-thread trees, software-only counts); `stat.rs` routes `tma.snapshot` files
//! to it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use tma_catalog::Model;
use tma_metrics::{Selection, StopReason};
use tma_perf::backend::{
    self, Backend, Ending, Live, Measurement, RawInterval, RunError, RunOptions, Synthetic, Target,
};
use tma_perf::event::{EventSpec, SoftwareEvent, SpecKind};
use tma_perf::plan::{self, Limits, Plan};
use tma_perf::snapshot::{self, CpuIdentity, RecordedRun, Settings, Snapshot, Topology};
use tma_perf::sysfs::{self, Pmus};
use tma_perf::{Interval, ReadingStatus};

use crate::cmd::stat::{cpuinfo_path, render_options, select_model, Args};
use crate::render::tree::{self, Request, StatRun};

/// Where the machine facts come from (test hooks, see the module docs).
struct Roots {
    sys: PathBuf,
    proc: PathBuf,
}

impl Roots {
    fn from_env() -> Roots {
        let get =
            |k: &str, d: &str| std::env::var_os(k).map_or_else(|| PathBuf::from(d), PathBuf::from);
        Roots {
            sys: get("TMA_SYSFS_ROOT", "/sys"),
            proc: get("TMA_PROC_ROOT", "/proc"),
        }
    }
}

/// `tma stat` without `--import`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let synthetic = match std::env::var_os("TMA_REPLAY_BACKEND") {
        Some(p) => {
            let bytes = std::fs::read(&p).with_context(|| {
                format!(
                    "TMA_REPLAY_BACKEND: cannot read {}",
                    PathBuf::from(&p).display()
                )
            })?;
            Some(
                serde_json::from_slice::<Synthetic>(&bytes).with_context(|| {
                    format!(
                        "TMA_REPLAY_BACKEND: {} is not a synthetic backend file",
                        PathBuf::from(&p).display()
                    )
                })?,
            )
        }
        None => None,
    };
    run_with(args, synthetic)
}

/// [`run`] with the backend chosen by the caller (`Some`: synthetic counts instead of
/// perf_event_open).
fn run_with(args: &Args, synthetic: Option<Synthetic>) -> anyhow::Result<ExitCode> {
    let target = target_of(args)?;
    check_flags(args, &target)?;
    let roots = Roots::from_env();
    let mut opts = RunOptions::new();
    opts.sys_root = roots.sys.clone();
    opts.proc_root = roots.proc.clone();
    opts.interval = args.interval_ms.map(Duration::from_millis);
    opts.duration = args.duration.map(Duration::from_secs_f64);
    let pmus = Pmus::discover(&roots.sys).unwrap_or_default();
    let extra = parse_extra_events(args, &pmus)?;

    let mut session = Session {
        args,
        target: target.clone(),
        opts,
        plans: Vec::new(),
        runs: Vec::new(),
        hardware: false,
        note: None,
        cpu_source: String::new(),
        model_key: None,
        cpu_cores: Vec::new(),
    };
    if args.per_core {
        let cpus = match &target {
            Target::System(Some(c)) => c.clone(),
            _ => backend::online_cpus(&roots.sys),
        };
        session.cpu_cores = cpu_cores(&roots.sys, &cpus);
    }

    // Hardware path, when there is a core PMU (or a synthetic backend stands in for one).
    let no_pmu_reason = if synthetic.is_none() && !pmus.has_core_pmu() {
        Some(format!(
            "no `cpu` PMU in {}/bus/event_source/devices (only {})",
            roots.sys.display(),
            pmus.pmus
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        None
    };
    let reason = match no_pmu_reason {
        Some(r) => r,
        None => {
            let (model, source) = select_model(args.cpu.as_deref(), None, &cpuinfo_path())?;
            session.cpu_source = source.describe().to_string();
            session.model_key = Some(model.key.to_string());
            let mut be: Box<dyn Backend> = match synthetic {
                Some(s) => Box::new(s),
                None => Box::new(Live),
            };
            match hardware(&mut session, model, be.as_mut(), &extra, &roots) {
                Ok(code) => return Ok(code),
                Err(e) => match e.downcast::<RunError>() {
                    Ok(RunError::NoHardware { event, source }) => {
                        session.plans.clear();
                        session.runs.clear();
                        format!("perf_event_open of {event} failed: {source}")
                    }
                    Ok(other) => return Err(other.into()),
                    Err(e) => return Err(e),
                },
            }
        }
    };
    software_only(&mut session, &reason, &extra, &roots)
}

/// `tma stat --import SNAPSHOT` with everything the live run printed: every drill-down step,
/// the software counts of a run without PMU. Output to stdout or `-o`, notes to stderr.
pub fn import_snapshot(bytes: &[u8], path: &Path, args: &Args) -> anyhow::Result<ExitCode> {
    let snap = snapshot::read(bytes).with_context(|| path.display().to_string())?;
    let mut out = Vec::new();
    if !snap.hardware {
        let plan = snap.plans.first().context("snapshot has no plan")?;
        let runs: Vec<Measurement> = snap.runs.iter().map(|r| r.measurement.clone()).collect();
        render_software(
            &mut out,
            &snap.target,
            plan,
            &runs,
            snap.settings.interval_ms.is_some(),
            args,
        )?;
        let mut a2 = args.clone();
        a2.per_core = snap.settings.per_core;
        a2.per_thread = snap.settings.per_thread;
        a2.interval_ms = snap.settings.interval_ms;
        render_software_breakdown(&mut out, &a2, &snap.target, plan, &runs, &snap.cpu_cores)?;
    } else {
        let model = snapshot_model(&snap, args)?;
        let steps = snap.runs.iter().map(|r| r.step).max().unwrap_or(0);
        for step in 0..=steps {
            let (request, intervals) = step_intervals(&snap, step)?;
            let run = evaluate(
                model,
                &snap.settings_cpu_source(),
                &snap,
                request.clone(),
                &intervals,
            )?;
            render_run(&mut out, &run, args)?;
            if !args.json && !args.csv && snap.settings.interval_ms.is_none() {
                let runs: Vec<Measurement> = snap
                    .runs
                    .iter()
                    .filter(|r| r.step == step)
                    .map(|r| r.measurement.clone())
                    .collect();
                let plan = &snap.plans[snap
                    .runs
                    .iter()
                    .find(|r| r.step == step)
                    .map_or(0, |r| r.plan)];
                render_extra_events(
                    &mut out,
                    &snap.settings.events,
                    plan,
                    &runs,
                    snap.settings.no_multiplex,
                    snap.settings.repeat.max(1),
                )?;
            }
            if snap.settings.per_core || snap.settings.per_thread {
                let runs: Vec<Measurement> = snap
                    .runs
                    .iter()
                    .filter(|r| r.step == step)
                    .map(|r| r.measurement.clone())
                    .collect();
                let plan = &snap.plans[snap
                    .runs
                    .iter()
                    .find(|r| r.step == step)
                    .map_or(0, |r| r.plan)];
                let bd = BreakdownCtx {
                    model,
                    cpu_source: &snap.settings_cpu_source(),
                    source: source_text(&snap.target, plan, &snap.settings),
                    request: &request,
                    plan,
                    cores: &snap.cpu_cores,
                    per_core: snap.settings.per_core,
                    interval_mode: snap.settings.interval_ms.is_some(),
                    command: run.command.clone(),
                };
                render_breakdown_trees(&mut out, &bd, &runs, args)?;
            }
        }
    }
    crate::render::emit(args.output.as_deref(), |w| {
        w.write_all(&out)?;
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

trait SnapshotExt {
    fn settings_cpu_source(&self) -> String;
}

impl SnapshotExt for Snapshot {
    fn settings_cpu_source(&self) -> String {
        self.note
            .as_deref()
            .and_then(|n| n.strip_prefix("cpu: "))
            .unwrap_or("named in the recording")
            .to_string()
    }
}

fn snapshot_model(snap: &Snapshot, args: &Args) -> anyhow::Result<&'static Model> {
    let key = args
        .cpu
        .as_deref()
        .or(snap.cpu.catalog_key.as_deref())
        .context("the snapshot names no CPU model; pass --cpu NAME")?;
    Ok(tma_catalog::by_name(key)?)
}

/// The request and the evaluated intervals of one drill-down step of a snapshot.
fn step_intervals(snap: &Snapshot, step: u32) -> anyhow::Result<(Request, Vec<Interval>)> {
    let runs: Vec<&RecordedRun> = snap.runs.iter().filter(|r| r.step == step).collect();
    let first = runs.first().context("snapshot has no runs")?;
    let plan = snap
        .plans
        .get(first.plan)
        .context("snapshot plan missing")?;
    let request = step_request(snap, step)?;
    let ms: Vec<Measurement> = runs.iter().map(|r| r.measurement.clone()).collect();
    let intervals = intervals_of(
        plan,
        &ms,
        snap.settings.no_multiplex,
        snap.settings.repeat.max(1),
        snap.settings.interval_ms.is_some(),
    );
    Ok((request, intervals))
}

/// The tree request of a drill-down step: stored in the plan list order as "level:node".
fn step_request(snap: &Snapshot, step: u32) -> anyhow::Result<Request> {
    if !snap.settings.drilldown {
        return Ok(Request {
            level: snap.settings.level,
            nodes: snap.settings.nodes.clone(),
            topology: Some(snap.topology),
        });
    }
    // Drill-down steps are recorded in settings.nodes as "STEP:LEVEL:NODE" entries.
    let mut level = 1;
    let mut nodes = Vec::new();
    for e in &snap.settings.nodes {
        let mut it = e.splitn(3, ':');
        let (Some(s), Some(l), n) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if s.parse::<u32>().ok() == Some(step) {
            level = l.parse().unwrap_or(1);
            nodes = n
                .filter(|n| !n.is_empty())
                .map(|n| vec![n.to_string()])
                .unwrap_or_default();
        }
    }
    Ok(Request {
        level,
        nodes,
        topology: Some(snap.topology),
    })
}

/// Everything counted so far, for the snapshot.
struct Session<'a> {
    args: &'a Args,
    target: Target,
    opts: RunOptions,
    plans: Vec<Plan>,
    runs: Vec<RecordedRun>,
    hardware: bool,
    note: Option<String>,
    cpu_source: String,
    model_key: Option<String>,
    /// CPU -> core label, for --per-core.
    cpu_cores: Vec<(u32, String)>,
}

fn target_of(a: &Args) -> anyhow::Result<Target> {
    let mut kinds = 0;
    kinds += usize::from(!a.command.is_empty());
    kinds += usize::from(!a.pid.is_empty());
    kinds += usize::from(!a.tid.is_empty());
    kinds += usize::from(a.all_cpus || a.cpu_list.is_some());
    if kinds == 0 {
        bail!("nothing to measure: give a command after `--`, -p PID, -t TID, or -a (or --import FILE)");
    }
    if kinds > 1 {
        bail!("give only one of: a command after `--`, -p, -t, -a/-C");
    }
    if !a.command.is_empty() {
        // Checked before anything is printed; the backend looks it up again to exec it.
        if backend::resolve_command(&a.command[0]).is_none() {
            return Err(RunError::CommandNotFound(a.command[0].clone()).into());
        }
        return Ok(Target::Command(a.command.clone()));
    }
    let ids = |v: &[u32], what: &str| -> anyhow::Result<Vec<i32>> {
        v.iter()
            .map(|&x| {
                i32::try_from(x)
                    .ok()
                    .filter(|x| *x > 0)
                    .with_context(|| format!("bad {what} {x}"))
            })
            .collect()
    };
    if !a.pid.is_empty() {
        let pids = ids(&a.pid, "pid")?;
        if let Some(p) = pids.iter().find(|p| !tma_perf::sys::pid_alive(**p)) {
            return Err(RunError::NoSuchProcess(*p).into());
        }
        return Ok(Target::Pids(pids));
    }
    if !a.tid.is_empty() {
        let tids = ids(&a.tid, "tid")?;
        let proc_root = Roots::from_env().proc;
        if let Some(t) = tids
            .iter()
            .find(|t| !proc_root.join(t.to_string()).exists())
        {
            return Err(RunError::NoSuchProcess(*t).into());
        }
        return Ok(Target::Tids(tids));
    }
    let cpus = match &a.cpu_list {
        None => None,
        Some(s) => Some(sysfs::parse_cpu_list(s).with_context(|| {
            format!("bad CPU list {s:?}: expected numbers and ranges like 0-3,8")
        })?),
    };
    if let Some(list) = &cpus {
        let online = backend::online_cpus(&Roots::from_env().sys);
        if let Some(bad) = list.iter().find(|c| !online.contains(c)) {
            return Err(RunError::BadCpu(*bad).into());
        }
    }
    Ok(Target::System(cpus))
}

fn check_flags(a: &Args, target: &Target) -> anyhow::Result<()> {
    if a.interval_ms == Some(0) {
        bail!("-I 0: the interval must be at least 1 ms (e.g. -I 1000)");
    }
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration {d}: give a positive number of seconds");
        }
    }
    if a.repeat == Some(0) {
        bail!("--repeat 0: give at least 1 run");
    }
    let is_cmd = matches!(target, Target::Command(_));
    if (a.repeat.unwrap_or(1) > 1 || a.no_multiplex || a.drilldown)
        && !is_cmd
        && a.duration.is_none()
    {
        bail!("--repeat, --no-multiplex and --drilldown rerun the target: use them with a command, or give --duration S");
    }
    if a.no_multiplex && a.interval_ms.is_some() {
        bail!("--no-multiplex runs once per group and cannot print -I intervals; drop one of them");
    }
    if a.drilldown && a.interval_ms.is_some() {
        bail!("--drilldown needs whole-run totals; drop -I");
    }
    if a.compact && a.interval_ms.is_none() {
        bail!("--compact prints one line per interval: use it with -I MS");
    }
    if a.per_core && !matches!(target, Target::System(_)) {
        bail!("--per-core needs system-wide counting (-a or -C)");
    }
    if a.per_thread && !matches!(target, Target::Pids(_) | Target::Tids(_)) {
        bail!("--per-thread needs -p PID or -t TID");
    }
    if (a.per_core || a.per_thread) && (a.drilldown || a.no_multiplex || a.repeat.unwrap_or(1) > 1)
    {
        bail!("--per-core / --per-thread cannot be combined with --drilldown, --no-multiplex or --repeat");
    }
    Ok(())
}

/// `-e` events: software names, catalog event ids, `pmu/terms/` or `rNNNN`.
fn parse_extra_events(a: &Args, pmus: &Pmus) -> anyhow::Result<Vec<EventSpec>> {
    let model = select_model(a.cpu.as_deref(), None, &cpuinfo_path())
        .ok()
        .map(|(m, _)| m);
    let mut out = Vec::new();
    for e in a
        .events
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        if let Some(sw) = SoftwareEvent::parse(e) {
            out.push(EventSpec::software(sw));
            continue;
        }
        if let Some(m) = model {
            if let Ok(enc) = m.encode(e) {
                if let Some(s) = EventSpec::from_encoding(&enc) {
                    out.push(s);
                    continue;
                }
            }
        }
        if let Some((pmu, terms)) = e.strip_suffix('/').and_then(|s| s.split_once('/')) {
            let p = pmus.get(pmu).with_context(|| {
                format!("unknown event {e:?}: this machine has no PMU named {pmu:?}")
            })?;
            let cfg = p
                .encode_terms(terms)
                .or_else(|_| p.encode_alias(terms))
                .with_context(|| format!("unknown event {e:?}"))?;
            let mut s = EventSpec::raw(e, pmu, cfg.config);
            s.config1 = cfg.config1;
            out.push(s);
            continue;
        }
        if let Some(hex) = e
            .strip_prefix('r')
            .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
        {
            let cfg =
                u64::from_str_radix(hex, 16).with_context(|| format!("bad raw event {e:?}"))?;
            out.push(EventSpec::raw(e, "cpu", cfg));
            continue;
        }
        let hw = [
            "cycles",
            "instructions",
            "cache-references",
            "cache-misses",
            "branches",
            "branch-misses",
        ];
        if let Some(id) = hw.iter().position(|h| h.eq_ignore_ascii_case(e)) {
            let ids = [0u64, 1, 2, 3, 4, 5];
            out.push(EventSpec {
                kind: SpecKind::Hardware(ids[id]),
                ..EventSpec::raw(e, "", ids[id])
            });
            continue;
        }
        bail!(
            "unknown event {e:?}: give a software event (task-clock, context-switches, ...), an \
             event of the --cpu model (`tma list --cpu NAME`), PMU/terms/ or rHEX"
        );
    }
    Ok(out)
}

fn limits_for(model: &Model, nmi: bool) -> impl Fn(&str) -> Limits + '_ {
    move |_pmu: &str| Limits {
        gp: model.gp_counters,
        fixed: model.fixed_counters,
        nmi_watchdog: nmi,
    }
}

/// The plan for a tree request: one formula set per node (its own events), plus the
/// software events and `-e` events.
fn plan_for(
    model: &Model,
    request: &Request,
    extra: &[EventSpec],
    nmi: bool,
) -> anyhow::Result<Plan> {
    let sel = request.selection();
    let all = tma_metrics::required_events(model, &sel)?;
    let encode = |ids: &std::collections::BTreeSet<String>| -> anyhow::Result<Vec<EventSpec>> {
        let mut v = Vec::new();
        for id in ids {
            let enc = model.encode(id).with_context(|| {
                format!("the {} table names event {id} it cannot encode", model.key)
            })?;
            if let Some(s) = EventSpec::from_encoding(&enc) {
                v.push(s);
            }
        }
        Ok(v)
    };
    let mut sets: Vec<Vec<EventSpec>> = Vec::new();
    for node in tma_metrics::node_order(model, &sel) {
        let one = Selection {
            max_level: node.level,
            nodes: vec![node.name.to_string()],
        };
        if let Ok(ids) = tma_metrics::required_events(model, &one) {
            sets.push(encode(&ids)?);
        }
    }
    sets.push(encode(&all)?);
    sets.push(backend::software_events());
    sets.push(extra.to_vec());
    Ok(plan::plan(&sets, &limits_for(model, nmi))?)
}

/// Group indices of a plan that hold hardware counters (one run each with --no-multiplex).
fn hw_groups(plan: &Plan) -> Vec<usize> {
    (0..plan.groups.len())
        .filter(|&i| {
            plan.groups[i]
                .slots
                .iter()
                .any(|s| !matches!(s, plan::Slot::NoCounter))
        })
        .collect()
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
    let per_repeat = if repeat == 0 {
        runs.len()
    } else {
        runs.len() / repeat as usize
    };
    let per_repeat = per_repeat.max(1);
    let totals: Vec<Interval> = runs
        .chunks(per_repeat)
        .map(|chunk| {
            let m = if no_multiplex || chunk.len() > 1 {
                backend::combine_runs(chunk)
            } else {
                chunk[0].clone()
            };
            Measurement::interval_readings(plan, &m.total(), false)
        })
        .collect();
    if totals.len() == 1 {
        return totals;
    }
    vec![mean_interval(&totals)]
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

fn describe_target(t: &Target) -> String {
    match t {
        Target::Command(argv) => format!("`{}`", tma_report::shell_words(argv)),
        Target::Pids(p) => format!(
            "pid {}",
            p.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Target::Tids(p) => format!(
            "tid {}",
            p.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Target::System(None) => "all CPUs".to_string(),
        Target::System(Some(c)) => format!(
            "CPUs {}",
            c.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
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
    format!("counted live on {} ({how}{rep})", describe_target(target))
}

fn evaluate(
    model: &'static Model,
    cpu_source: &str,
    snap: &Snapshot,
    request: Request,
    intervals: &[Interval],
) -> anyhow::Result<StatRun> {
    let plan = &snap.plans[snap
        .runs
        .iter()
        .find(|r| r.step == step_of(snap, &request))
        .map_or(0, |r| r.plan)];
    let mut run = StatRun::evaluate(
        model,
        cpu_source,
        source_text(&snap.target, plan, &snap.settings),
        snap.settings.interval_ms.is_some(),
        intervals,
        &request,
    )?;
    if let Target::Command(argv) = &snap.target {
        run.command = Some(argv.join(" "));
    }
    Ok(run)
}

fn step_of(snap: &Snapshot, request: &Request) -> u32 {
    if !snap.settings.drilldown {
        return 0;
    }
    let want = format!(
        "{}:{}",
        request.level,
        request.nodes.first().map_or("", String::as_str)
    );
    snap.settings
        .nodes
        .iter()
        .find_map(|e| {
            e.split_once(':')
                .filter(|(_, rest)| *rest == want)
                .and_then(|(s, _)| s.parse().ok())
        })
        .unwrap_or(0)
}

fn render_run(w: &mut dyn Write, run: &StatRun, args: &Args) -> anyhow::Result<()> {
    let opts = render_options(args);
    if args.json {
        tree::render_json(w, run, &opts)?;
    } else if args.csv {
        tree::render_csv(w, run, &opts)?;
    } else {
        tree::render_text(w, run, &opts)?;
    }
    Ok(())
}

fn settings_of(args: &Args) -> Settings {
    Settings {
        level: args.level,
        nodes: args.nodes.clone(),
        interval_ms: args.interval_ms,
        no_multiplex: args.no_multiplex,
        repeat: args.repeat.unwrap_or(1),
        drilldown: args.drilldown,
        per_core: args.per_core,
        per_thread: args.per_thread,
        events: args.events.clone(),
        compact: args.compact,
    }
}

fn snapshot_of(s: &Session, settings: Settings) -> Snapshot {
    let cpuinfo = std::fs::read(cpuinfo_path()).unwrap_or_default();
    let mut cpu = CpuIdentity::from_cpuinfo(&cpuinfo);
    if s.model_key.is_some() {
        cpu.catalog_key = s.model_key.clone();
    }
    let start = s.runs.first().map_or(0.0, |r| r.measurement.start_unix_s);
    let dur: u64 = s.runs.iter().map(|r| r.measurement.wall_ns).sum();
    Snapshot {
        schema: snapshot::SCHEMA.into(),
        schema_version: snapshot::SCHEMA_VERSION,
        tool: format!("tma {}", env!("CARGO_PKG_VERSION")),
        cpu,
        topology: Topology::discover(&s.opts.sys_root),
        command_line: std::env::args().collect(),
        target: s.target.clone(),
        settings,
        hardware: s.hardware,
        note: s.note.clone(),
        start_unix_s: start,
        duration_s: dur as f64 / 1e9,
        plans: s.plans.clone(),
        runs: s.runs.clone(),
        cpu_cores: s.cpu_cores.clone(),
    }
}

fn write_record(s: &Session, settings: Settings) -> anyhow::Result<()> {
    if let Some(path) = &s.args.record {
        let snap = snapshot_of(s, settings);
        tma_report::write_atomic(path, |w| {
            snap.write(w)?;
            Ok(())
        })?;
    }
    Ok(())
}

fn exit_code(e: Ending) -> ExitCode {
    match e {
        Ending::Exited(c) => ExitCode::from(c.clamp(0, 255) as u8),
        Ending::Signaled(s) => ExitCode::from((128 + s).clamp(0, 255) as u8),
        Ending::Interrupted => ExitCode::from(130),
        Ending::Duration | Ending::TargetsExited => ExitCode::SUCCESS,
    }
}

fn ending_note(e: Ending, target: &Target) {
    match e {
        Ending::Interrupted => eprintln!("tma: interrupted: printing what was counted so far"),
        Ending::TargetsExited if matches!(target, Target::Pids(_)) => {
            eprintln!("tma: the attached process exited; counts cover it until then")
        }
        _ => {}
    }
}

/// Run one plan (once, per group with --no-multiplex, N times with --repeat).
fn measure(
    s: &mut Session,
    be: &mut dyn Backend,
    plan: &Plan,
    step: u32,
    live_print: Option<backend::IntervalHook>,
) -> anyhow::Result<Vec<Measurement>> {
    let plan_idx = s.plans.len();
    s.plans.push(plan.clone());
    let repeat = s.args.repeat.unwrap_or(1);
    let hw = hw_groups(plan);
    let sw: Vec<usize> = (0..plan.groups.len()).filter(|i| !hw.contains(i)).collect();
    let subsets: Vec<Vec<usize>> = if s.args.no_multiplex && hw.len() > 1 {
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
    if s.args.no_multiplex && hw.len() > 1 && step == 0 {
        eprintln!(
            "tma: --no-multiplex: {} counter groups, so the target runs {} times{}",
            hw.len(),
            subsets.len() * repeat as usize,
            if repeat > 1 {
                format!(" ({} per repetition)", subsets.len())
            } else {
                String::new()
            }
        );
    }
    let mut out = Vec::new();
    let mut opts = s.opts.clone();
    opts.on_interval = live_print;
    for r in 0..repeat {
        for sub in &subsets {
            let p = if sub.len() == plan.groups.len() {
                plan.clone()
            } else {
                backend::sub_plan(plan, sub)
            };
            let m = be.run(&p, &s.target, &opts)?;
            let m = backend::only_groups(&m, sub);
            if r == 0 {
                for (g, why) in &m.failed_groups {
                    eprintln!("tma: warning: counter group {g} not counted ({why}); its events show as not supported");
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

/// `--per-core` / `--per-thread`: the breakdown keys of a run, in order, with a label.
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

/// `S<package>-C<core>` of each CPU, from `<sys_root>/devices/system/cpu/cpuN/topology`.
fn cpu_cores(sys_root: &Path, cpus: &[u32]) -> Vec<(u32, String)> {
    cpus.iter()
        .map(|&c| {
            let t = sys_root.join(format!("devices/system/cpu/cpu{c}/topology"));
            let rd = |f: &str| {
                std::fs::read_to_string(t.join(f))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "?".into())
            };
            (
                c,
                format!("S{}-C{}", rd("physical_package_id"), rd("core_id")),
            )
        })
        .collect()
}

fn breakdown_keys(
    runs: &[Measurement],
    per_core: bool,
    per_thread: bool,
    cores: &[(u32, String)],
) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    for m in runs {
        for iv in &m.intervals {
            for g in &iv.groups {
                let k = if per_core {
                    g.cpu.map(|c| {
                        Key::Core(
                            cores
                                .iter()
                                .find(|(x, _)| *x == c)
                                .map_or_else(|| format!("cpu{c}"), |(_, l)| l.clone()),
                        )
                    })
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
        }
    }
    keys
}

/// The part of a measurement that belongs to one breakdown key.
fn only_key(m: &Measurement, key: &Key, cores: &[(u32, String)]) -> Measurement {
    let mut out = m.clone();
    for iv in &mut out.intervals {
        iv.groups.retain(|g| match key {
            Key::Core(label) => g.cpu.is_some_and(|c| {
                cores
                    .iter()
                    .find(|(x, _)| *x == c)
                    .map_or_else(|| format!("cpu{c}"), |(_, l)| l.clone())
                    == *label
            }),
            Key::Thread(t) => g.tid == Some(*t),
        });
    }
    out
}

/// What the per-core / per-thread trees need.
struct BreakdownCtx<'a> {
    model: &'static Model,
    cpu_source: &'a str,
    source: String,
    request: &'a Request,
    plan: &'a Plan,
    cores: &'a [(u32, String)],
    per_core: bool,
    interval_mode: bool,
    command: Option<String>,
}

/// One tree per core / thread after the aggregated tree.
fn render_breakdown_trees(
    buf: &mut Vec<u8>,
    c: &BreakdownCtx,
    runs: &[Measurement],
    args: &Args,
) -> anyhow::Result<()> {
    for key in breakdown_keys(runs, c.per_core, !c.per_core, c.cores) {
        let part: Vec<Measurement> = runs.iter().map(|m| only_key(m, &key, c.cores)).collect();
        let ivs = intervals_of(c.plan, &part, false, 1, c.interval_mode);
        let mut r = StatRun::evaluate(
            c.model,
            c.cpu_source,
            format!("{}, {}", c.source, key.label()),
            c.interval_mode,
            &ivs,
            c.request,
        )?;
        r.command = c.command.clone();
        buf.push(b'\n');
        render_run(buf, &r, args)?;
    }
    Ok(())
}

/// The `-e` events after the tree: whole-run values with their counted share.
fn render_extra_events(
    w: &mut dyn Write,
    names: &[String],
    plan: &Plan,
    runs: &[Measurement],
    no_multiplex: bool,
    repeat: u32,
) -> anyhow::Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let iv = intervals_of(plan, runs, no_multiplex, repeat, false);
    let Some(iv) = iv.last() else { return Ok(()) };
    writeln!(w)?;
    writeln!(w, "Events (-e):")?;
    for n in names {
        match iv.get(n) {
            Some(r) if r.value.is_some() => {
                let v = r.value.unwrap_or(0.0);
                let share = r.counted_share.unwrap_or(1.0);
                if share < 1.0 {
                    writeln!(w, "{v:>20.0}  {n}  [{:.1}% counted]", share * 100.0)?;
                } else {
                    writeln!(w, "{v:>20.0}  {n}")?;
                }
            }
            _ => writeln!(w, "{:>20}  {n}", "<not counted>")?,
        }
    }
    Ok(())
}

fn hardware(
    s: &mut Session,
    model: &'static Model,
    be: &mut dyn Backend,
    extra: &[EventSpec],
    roots: &Roots,
) -> anyhow::Result<ExitCode> {
    s.hardware = true;
    s.note = Some(format!("cpu: {}", s.cpu_source));
    let nmi = sysfs::nmi_watchdog_on(&roots.proc);
    let mut settings = settings_of(s.args);
    settings.events = extra.iter().map(|e| e.name.clone()).collect();
    let mut request = Request {
        level: if s.args.drilldown { 1 } else { s.args.level },
        nodes: if s.args.drilldown {
            Vec::new()
        } else {
            s.args.nodes.clone()
        },
        topology: Some(Topology::discover(&s.opts.sys_root)),
    };
    let mut step = 0u32;
    let mut out: Vec<u8> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut last_ending = Ending::Exited(0);
    if s.args.drilldown {
        settings.nodes = Vec::new();
    }
    loop {
        let plan = plan_for(model, &request, extra, nmi)?;
        if s.args.verbose > 0 {
            eprint!("{plan}");
        }
        for (e, why) in &plan.unschedulable {
            eprintln!("tma: warning: {e} cannot be counted here: {why}");
        }
        if s.args.drilldown {
            settings.nodes.push(format!(
                "{step}:{}:{}",
                request.level,
                request.nodes.first().map_or("", String::as_str)
            ));
        }
        // Interval mode: print each interval as soon as it is read (stdout only).
        let breakdown = s.args.per_core || s.args.per_thread;
        let printer = if s.args.interval_ms.is_some() && s.args.output.is_none() && !breakdown {
            Some(live_printer(
                model,
                &s.cpu_source,
                &s.target,
                &plan,
                &settings,
                &request,
                s.args,
            ))
        } else {
            None
        };
        let hook = printer.as_ref().map(|p| p.hook());
        let runs = measure(s, be, &plan, step, hook)?;
        last_ending = runs.last().map_or(last_ending, |m| m.ending);
        let intervals = intervals_of(
            &plan,
            &runs,
            s.args.no_multiplex,
            s.args.repeat.unwrap_or(1),
            s.args.interval_ms.is_some(),
        );
        let mut run = StatRun::evaluate(
            model,
            &s.cpu_source,
            source_text(&s.target, &plan, &settings),
            s.args.interval_ms.is_some(),
            &intervals,
            &request,
        )?;
        if let Target::Command(argv) = &s.target {
            run.command = Some(argv.join(" "));
        }
        let mut buf = Vec::new();
        render_run(&mut buf, &run, s.args)?;
        if !s.args.json && !s.args.csv && s.args.interval_ms.is_none() {
            let names: Vec<String> = extra.iter().map(|e| e.name.clone()).collect();
            render_extra_events(
                &mut buf,
                &names,
                &plan,
                &runs,
                s.args.no_multiplex,
                s.args.repeat.unwrap_or(1),
            )?;
        }
        if breakdown {
            let bd = BreakdownCtx {
                model,
                cpu_source: &s.cpu_source,
                source: source_text(&s.target, &plan, &settings),
                request: &request,
                plan: &plan,
                cores: &s.cpu_cores,
                per_core: s.args.per_core,
                interval_mode: s.args.interval_ms.is_some(),
                command: run.command.clone(),
            };
            render_breakdown_trees(&mut buf, &bd, &runs, s.args)?;
        }
        match &printer {
            Some(p) => p.finish(&buf)?,
            None => out.extend_from_slice(&buf),
        }
        if s.args.repeat.unwrap_or(1) > 1 {
            let ms: Vec<Measurement> = runs.clone();
            for (ev, mean, pct) in backend::repeat_stats(&plan, &ms) {
                if s.args.verbose > 0 || !plan.events().any(|e| e.name == ev && !e.is_hardware()) {
                    eprintln!(
                        "tma: {ev}: mean {mean:.0} +- {pct:.2}% over {} runs",
                        s.args.repeat.unwrap_or(1)
                    );
                }
            }
        }
        if !s.args.drilldown || last_ending == Ending::Interrupted {
            break;
        }
        // Drill-down: descend into the bottleneck one level per run.
        let total = run.intervals.last().context("no data")?;
        let b = &total.report.bottleneck;
        let reached = b.path.len() as u8 == request.level;
        match (&b.node, reached) {
            (Some(node), true)
                if model.children(Some(node)).next().is_some() && request.level < 6 =>
            {
                path.push(node.clone());
                request = Request {
                    level: request.level + 1,
                    nodes: vec![node.clone()],
                    topology: request.topology,
                };
                step += 1;
            }
            _ => {
                if let Some(n) = &b.node {
                    if !path.contains(n) {
                        path.push(n.clone());
                    }
                }
                let why = match &b.stop {
                    StopReason::Leaf => "a leaf of the tree".to_string(),
                    StopReason::NoChildOverThreshold => "no child over threshold".to_string(),
                    StopReason::Ambiguous { first, second, gap } => {
                        format!("{first} and {second} within {gap:.1} points")
                    }
                    StopReason::NothingOverThreshold => {
                        "nothing over threshold at level 1".to_string()
                    }
                    StopReason::NotMeasured => "not measured".to_string(),
                    StopReason::Undecided { not_computed } => {
                        format!("undecided: {} not computed", not_computed.join(", "))
                    }
                };
                eprintln!(
                    "tma: drill-down: {} run{}: {} (stopped: {why})",
                    step + 1,
                    if step == 0 { "" } else { "s" },
                    if path.is_empty() {
                        "-".to_string()
                    } else {
                        path.join(" -> ")
                    }
                );
                break;
            }
        }
    }
    ending_note(last_ending, &s.target);
    write_record(s, settings)?;
    if !out.is_empty() {
        crate::render::emit(s.args.output.as_deref(), |w| {
            w.write_all(&out)?;
            Ok(())
        })?;
    }
    Ok(exit_code(last_ending))
}

/// Prints interval trees as they arrive: renders all intervals so far and writes what is new
/// (the renderer's output for k intervals extends its output for k-1); the rest is written
/// at the end, so the total output equals a replay's.
struct LivePrinter {
    state: Arc<Mutex<PrinterState>>,
}

struct PrinterState {
    model: &'static Model,
    cpu_source: String,
    source: String,
    request: Request,
    plan: Plan,
    args: Args,
    command: Option<String>,
    intervals: Vec<Interval>,
    printed: Vec<u8>,
}

fn live_printer(
    model: &'static Model,
    cpu_source: &str,
    target: &Target,
    plan: &Plan,
    settings: &Settings,
    request: &Request,
    args: &Args,
) -> LivePrinter {
    LivePrinter {
        state: Arc::new(Mutex::new(PrinterState {
            model,
            cpu_source: cpu_source.to_string(),
            source: source_text(target, plan, settings),
            request: request.clone(),
            plan: plan.clone(),
            args: args.clone(),
            command: match target {
                Target::Command(a) => Some(a.join(" ")),
                _ => None,
            },
            intervals: Vec::new(),
            printed: Vec::new(),
        })),
    }
}

impl LivePrinter {
    fn hook(&self) -> backend::IntervalHook {
        let st = self.state.clone();
        Arc::new(move |raw: &RawInterval| {
            let Ok(mut s) = st.lock() else { return };
            let iv = Measurement::interval_readings(&s.plan, raw, false);
            s.intervals.push(iv);
            let Ok(mut run) = StatRun::evaluate(
                s.model,
                &s.cpu_source,
                s.source.clone(),
                true,
                &s.intervals,
                &s.request,
            ) else {
                return;
            };
            run.command = s.command.clone();
            let mut buf = Vec::new();
            if render_run(&mut buf, &run, &s.args).is_err() {
                return;
            }
            if buf.starts_with(&s.printed) {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(&buf[s.printed.len()..]);
                let _ = o.flush();
                s.printed = buf;
            }
        })
    }

    /// Write the rest of the final rendering.
    fn finish(&self, full: &[u8]) -> anyhow::Result<()> {
        let s = self
            .state
            .lock()
            .map_err(|_| anyhow::anyhow!("printer state poisoned"))?;
        let mut o = std::io::stdout().lock();
        if full.starts_with(&s.printed) {
            o.write_all(&full[s.printed.len()..])?;
        } else {
            o.write_all(b"\n--- final ---\n")?;
            o.write_all(full)?;
        }
        o.flush()?;
        Ok(())
    }
}

/// No hardware PMU: say so in one paragraph, then count and print software events.
fn software_only(
    s: &mut Session,
    reason: &str,
    extra: &[EventSpec],
    roots: &Roots,
) -> anyhow::Result<ExitCode> {
    let hyper = std::fs::read_to_string(roots.proc.join("cpuinfo"))
        .map(|t| {
            t.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false);
    let why = if hyper {
        "this is a virtual machine (`hypervisor` flag in /proc/cpuinfo) without a virtual PMU"
    } else {
        "the kernel has no PMU driver for this CPU, or the PMU is disabled"
    };
    eprintln!(
        "tma: hardware counters are not available: {why} ({reason}). Enable the vPMU in the \
         hypervisor or use a bare-metal instance, or record elsewhere with the command from \
         `tma events --perf-cmd` and analyse it with `tma stat --import FILE`. Software counts only:"
    );
    let mut events = backend::software_events();
    for e in extra {
        if e.is_hardware() {
            eprintln!(
                "tma: warning: -e {} needs a hardware PMU; not counted",
                e.name
            );
        } else if !events.iter().any(|x| x.name == e.name) {
            events.push(e.clone());
        }
    }
    let plan = Plan::software(&events);
    s.hardware = false;
    s.note = Some(format!("hardware counters not available: {reason}"));
    s.plans = vec![plan.clone()];
    if s.args.verbose > 0 {
        eprint!("{plan}");
    }
    let repeat = s.args.repeat.unwrap_or(1);
    let mut runs = Vec::new();
    let mut opts = s.opts.clone();
    let interval_mode = s.args.interval_ms.is_some();
    if interval_mode && s.args.output.is_none() && !(s.args.per_core || s.args.per_thread) {
        let plan2 = plan.clone();
        let args2 = s.args.clone();
        let target2 = s.target.clone();
        let count = Arc::new(Mutex::new(0usize));
        opts.on_interval = Some(Arc::new(move |raw: &RawInterval| {
            let m = Measurement {
                start_unix_s: 0.0,
                wall_ns: ((raw.end_s - raw.start_s) * 1e9) as u64,
                intervals: vec![raw.clone()],
                ending: Ending::Duration,
                failed_groups: Vec::new(),
            };
            let Ok(mut c) = count.lock() else { return };
            let mut buf = Vec::new();
            if render_software_interval(&mut buf, &target2, &plan2, &m, *c == 0, &args2).is_ok() {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(&buf);
                let _ = o.flush();
            }
            *c += 1;
        }));
    }
    for r in 0..repeat {
        let m = Live.run(&plan, &s.target, &opts)?;
        let ending = m.ending;
        s.runs.push(RecordedRun {
            step: 0,
            plan: 0,
            repeat: r,
            groups: vec![0],
            measurement: m.clone(),
        });
        runs.push(m);
        if ending == Ending::Interrupted {
            break;
        }
    }
    let last = runs.last().map_or(Ending::Exited(0), |m| m.ending);
    ending_note(last, &s.target);
    let settings = settings_of(s.args);
    write_record(s, settings)?;
    let breakdown = s.args.per_core || s.args.per_thread;
    if !(interval_mode && s.args.output.is_none()) || breakdown {
        let mut out = Vec::new();
        render_software(&mut out, &s.target, &plan, &runs, interval_mode, s.args)?;
        render_software_breakdown(&mut out, s.args, &s.target, &plan, &runs, &s.cpu_cores)?;
        crate::render::emit(s.args.output.as_deref(), |w| {
            w.write_all(&out)?;
            Ok(())
        })?;
    }
    Ok(exit_code(last))
}

/// `--per-core` / `--per-thread` blocks after the aggregated software counts.
fn render_software_breakdown(
    w: &mut dyn Write,
    args: &Args,
    target: &Target,
    plan: &Plan,
    runs: &[Measurement],
    cores: &[(u32, String)],
) -> anyhow::Result<()> {
    if !(args.per_core || args.per_thread) {
        return Ok(());
    }
    for key in breakdown_keys(runs, args.per_core, args.per_thread, cores) {
        let part: Vec<Measurement> = runs.iter().map(|m| only_key(m, &key, cores)).collect();
        writeln!(w)?;
        writeln!(w, "--- {} ---", key.label())?;
        render_software(w, target, plan, &part, args.interval_ms.is_some(), args)?;
    }
    Ok(())
}

/// Software counts of a whole run (mean over --repeat runs) or per interval.
fn render_software(
    w: &mut dyn Write,
    target: &Target,
    plan: &Plan,
    runs: &[Measurement],
    interval_mode: bool,
    args: &Args,
) -> anyhow::Result<()> {
    if interval_mode {
        if let Some(m) = runs.first() {
            for (k, iv) in m.intervals.iter().enumerate() {
                let one = Measurement {
                    start_unix_s: m.start_unix_s,
                    wall_ns: ((iv.end_s - iv.start_s) * 1e9) as u64,
                    intervals: vec![iv.clone()],
                    ending: m.ending,
                    failed_groups: Vec::new(),
                };
                render_software_interval(w, target, plan, &one, k == 0, args)?;
            }
        }
        return Ok(());
    }
    let n = runs.len().max(1) as f64;
    let mean = |name: &str| -> Option<f64> {
        let v: Vec<f64> = runs
            .iter()
            .filter_map(|m| {
                Measurement::interval_readings(plan, &m.total(), false)
                    .get(name)
                    .and_then(|r| r.value)
            })
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let wall_s = runs.iter().map(|m| m.wall_ns as f64).sum::<f64>() / n / 1e9;
    let mut rows = software_rows(plan, &mean, wall_s);
    if runs.len() > 1 {
        // --repeat: the spread (sample standard deviation as % of the mean) per event.
        let stats = backend::repeat_stats(plan, runs);
        for row in rows.iter_mut() {
            if let Some((_, _, pct)) = stats.iter().find(|(n, _, _)| *n == row.0) {
                row.3 = format!("{:<64} ( +- {pct:.2}% )", row.3);
            }
        }
    }
    if args.json {
        let doc = serde_json::json!({
            "schema": "tma.stat_software",
            "schema_version": 1,
            "hardware_counters": false,
            "target": describe_target(target),
            "runs": runs.len(),
            "wall_time_s": wall_s,
            "events": rows.iter().map(|(n, v, u, _)| serde_json::json!({"event": n, "value": v, "unit": u})).collect::<Vec<_>>(),
        });
        serde_json::to_writer_pretty(&mut *w, &doc)?;
        writeln!(w)?;
        return Ok(());
    }
    if args.csv {
        writeln!(w, "event,value,unit")?;
        for (n, v, u, _) in &rows {
            writeln!(w, "{n},{v},{u}")?;
        }
        writeln!(w, "wall-time,{wall_s},s")?;
        return Ok(());
    }
    writeln!(
        w,
        "Software counts for {} (no hardware counters{}):",
        describe_target(target),
        if runs.len() > 1 {
            format!(", mean of {} runs", runs.len())
        } else {
            String::new()
        }
    )?;
    writeln!(w)?;
    for (_, _, _, line) in &rows {
        writeln!(w, "{line}")?;
    }
    writeln!(w, "{:>18.6}      seconds wall time", wall_s)?;
    Ok(())
}

fn software_rows(
    plan: &Plan,
    value: &dyn Fn(&str) -> Option<f64>,
    wall_s: f64,
) -> Vec<(String, f64, &'static str, String)> {
    let mut rows = Vec::new();
    for e in plan.events() {
        let Some(v) = value(&e.name) else {
            rows.push((
                e.name.clone(),
                f64::NAN,
                "",
                format!("{:>18}      {}", "<not counted>", e.name),
            ));
            continue;
        };
        let time = matches!(e.kind, SpecKind::Software(sw) if sw.is_time());
        if time {
            let ms = v / 1e6;
            let util = if wall_s > 0.0 { v / 1e9 / wall_s } else { 0.0 };
            rows.push((
                e.name.clone(),
                ms,
                "msec",
                format!("{ms:>18.2} msec {:<18} # {util:.3} CPUs utilized", e.name),
            ));
        } else {
            rows.push((
                e.name.clone(),
                v,
                "",
                format!("{:>18.0}      {:<18}", v, e.name)
                    .trim_end()
                    .to_string(),
            ));
        }
    }
    rows
}

fn render_software_interval(
    w: &mut dyn Write,
    target: &Target,
    plan: &Plan,
    m: &Measurement,
    first: bool,
    args: &Args,
) -> anyhow::Result<()> {
    let iv = &m.intervals[0];
    let r = Measurement::interval_readings(plan, iv, false);
    let wall = iv.end_s - iv.start_s;
    let value = |n: &str| r.get(n).and_then(|x| x.value);
    if args.compact || args.csv {
        if first {
            let names: Vec<&str> = plan.events().map(|e| e.name.as_str()).collect();
            writeln!(w, "time_s,{}", names.join(","))?;
        }
        let vals: Vec<String> = plan
            .events()
            .map(|e| value(&e.name).map_or(String::new(), |v| format!("{v:.0}")))
            .collect();
        writeln!(w, "{:.3},{}", iv.end_s, vals.join(","))?;
        return Ok(());
    }
    if first {
        writeln!(
            w,
            "Software counts for {} every interval (no hardware counters):",
            describe_target(target)
        )?;
    }
    writeln!(w)?;
    writeln!(
        w,
        "--- interval {:.3} s .. {:.3} s ---",
        iv.start_s, iv.end_s
    )?;
    for (_, _, _, line) in software_rows(plan, &value, wall) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn args(v: &[&str]) -> Args {
        T::parse_from(std::iter::once("tma").chain(v.iter().copied())).a
    }

    /// Live run with -o and --record, then import_snapshot of the record with -o: the two
    /// files must be identical.
    fn live_then_import(
        live: &[&str],
        import_flags: &[&str],
        synthetic: Option<Synthetic>,
    ) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, snap) = (
            dir.path().join("live.txt"),
            dir.path().join("imp.txt"),
            dir.path().join("s.json"),
        );
        let mut v: Vec<&str> = vec![
            "-o",
            a.to_str().unwrap(),
            "--record",
            snap.to_str().unwrap(),
        ];
        v.extend_from_slice(live);
        run_with(&args(&v), synthetic).unwrap();
        let mut w: Vec<&str> = vec![
            "-o",
            b.to_str().unwrap(),
            "--import",
            snap.to_str().unwrap(),
        ];
        w.extend_from_slice(import_flags);
        let bytes = std::fs::read(&snap).unwrap();
        import_snapshot(&bytes, &snap, &args(&w)).unwrap();
        (
            std::fs::read_to_string(&a).unwrap(),
            std::fs::read_to_string(&b).unwrap(),
        )
    }

    fn zen4_synthetic() -> Synthetic {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/live/synthetic-zen4-sha256.json");
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    }

    #[test]
    fn software_record_import_same_output() {
        if Pmus::discover(Path::new("/sys")).is_ok_and(|p| p.has_core_pmu()) {
            eprintln!(
                "skipped: this machine has a hardware PMU (the software-only path is not taken)"
            );
            return;
        }
        let (live, imp) = live_then_import(&["--", "true"], &[], None);
        assert!(live.contains("task-clock"), "{live}");
        assert_eq!(live, imp);
        let (live, imp) = live_then_import(&["-I", "100", "--", "sleep", "0.25"], &[], None);
        assert!(live.contains("--- interval"), "{live}");
        assert_eq!(live, imp);
    }

    #[test]
    fn drilldown_record_import_same_output() {
        let (live, imp) = live_then_import(
            &["--cpu", "zen4", "--drilldown", "--", "true"],
            &[],
            Some(zen4_synthetic()),
        );
        assert_eq!(live.matches("AMD Zen 4").count(), 2, "{live}");
        assert_eq!(live, imp);
    }

    #[test]
    fn extra_events_record_import_same_output() {
        let (live, imp) = live_then_import(
            &["--cpu", "zen4", "-e", "ex_ret_ucode_ops,cs", "--", "true"],
            &[],
            Some(zen4_synthetic()),
        );
        // 366e6 true count, read a quarter of the time (2 hardware groups) and scaled back.
        assert!(
            live.contains("           366000000  ex_ret_ucode_ops  [25.0% counted]"),
            "{live}"
        );
        assert!(live.contains("  context-switches\n"), "{live}");
        assert_eq!(live, imp);
        let e = run_with(
            &args(&["--cpu", "zen4", "-e", "no_such_event", "--", "true"]),
            Some(zen4_synthetic()),
        );
        assert!(e.unwrap_err().to_string().contains("unknown event"));
    }

    #[test]
    fn per_core_record_import_same_output() {
        let (live, imp) = live_then_import(
            &[
                "--cpu",
                "zen4",
                "-l",
                "2",
                "-a",
                "-C",
                "0",
                "--per-core",
                "--duration",
                "1",
            ],
            &["-l", "2"],
            Some(zen4_synthetic()),
        );
        assert!(live.contains(", core S"), "{live}");
        assert_eq!(live, imp);
    }
}
