//! The `tma locate` use case: a clap-free [`LocateConfig`] in, a [`Located`] profile out
//! (written by [`crate::render`]). Phases: choose the event (`--node`, `-e`, or the bottleneck
//! of a quick in-process `tma stat` pass), record (sample live, or import a perf.data file),
//! aggregate and symbolize into a [`Profile`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tma_catalog::Model;
use tma_host::Host;
use tma_perf::sampling::group::{GroupEvent, GroupSpec};
use tma_perf::sampling::{Rate, RawRecord, SampleEvent, SamplingConfig, SamplingError, Target};

use crate::aggregate::Aggregator;
use crate::choose::{self, ChoiceError, Chosen, Request};
use crate::hotspots::{self, Profile, ReportOptions};
use crate::import::ImportError;
use crate::live::{LiveError, LiveOutcome};
use crate::record::PerfDataWriter;
use crate::symbols::{Kallsyms, Symbolizer};
use crate::tree::TreeLayout;

/// Errors of `tma locate`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocateError {
    /// Settings that do not go together, or are missing.
    #[error("{0}")]
    Usage(String),
    #[error("cannot import {path}")]
    Import {
        path: String,
        #[source]
        source: ImportError,
    },
    #[error(transparent)]
    Catalog(#[from] tma_catalog::CatalogError),
    #[error(transparent)]
    Choice(#[from] ChoiceError),
    #[error("the quick stat pass that finds the bottleneck failed (pass --node NAME or -e EVENT)")]
    QuickStat(#[source] tma_stat::StatError),
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error(transparent)]
    Output(#[from] tma_render::OutputError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tree(#[from] crate::tree::TreeError),
}

fn usage(m: &str) -> LocateError {
    LocateError::Usage(m.to_string())
}

/// Everything `tma locate` needs; no clap.
#[derive(Debug, Clone)]
pub struct LocateConfig {
    /// Analyse this perf.data file instead of sampling.
    pub import: Option<PathBuf>,
    /// Sample this running process.
    pub pid: Option<i32>,
    /// Sample every process on [`LocateConfig::cpus`] (`-a`), kernel code included when
    /// perf_event_paranoid allows it.
    pub system_wide: bool,
    /// With `system_wide`: only these CPUs (`-C`); `None`: all online CPUs.
    pub cpus: Option<Vec<u32>>,
    /// Sample this command (argv, the OS strings given: exec'd as they are).
    pub command: Vec<std::ffi::OsString>,
    /// Sample the locate-with event of this TMA node.
    pub node: Option<String>,
    /// Sample this event (with `--import`: show this event of the file).
    pub event: Option<String>,
    /// CPU model key (`--cpu`); else `this_cpu`.
    pub cpu: Option<String>,
    /// This machine's model tables, when the catalog knows its CPU.
    pub this_cpu: Option<&'static Model>,
    /// Stop sampling after this many seconds.
    pub duration_s: Option<f64>,
    /// `--period N` or `--freq HZ`; default: the sampler's frequency.
    pub rate: Option<Rate>,
    /// Record call chains.
    pub call_graph: bool,
    /// Keep whole call stacks in the profile (folded stacks, pprof, children). Off, only the
    /// sampled instructions are aggregated: the flat report is all that is wanted, and
    /// walking every call chain of a large perf.data is most of the work.
    pub stacks: bool,
    /// Also sample kernel code.
    pub kernel: bool,
    pub report: ReportOptions,
    /// Folded stacks will be written (adds a note without call chains).
    pub folded: bool,
    /// Write the event-choice notes to the notes writer as they arise: the report will not
    /// be read on the terminal (the text report repeats them at its end).
    pub echo_notes: bool,
    /// Also save the samples as a perf.data file.
    pub record: Option<PathBuf>,
    /// Look for binaries here (by file name) before their recorded paths.
    pub symdir: Vec<PathBuf>,
    /// Kernel symbols (a copy of a machine's /proc/kallsyms).
    pub kallsyms: Option<PathBuf>,
    /// The host's /sys and /proc roots: the core PMU, mappings, kallsyms.
    pub host: Host,
    /// Where the quick stat pass counts (perf_event_open, or chosen counts in tests).
    pub stat_backend: tma_stat::BackendChoice,
    /// `--tree`: sample a group read with every sample and give a TMA tree of this level
    /// per function ([`crate::tree`]).
    pub tree: Option<u8>,
    /// With `tree`, live: a second pass samples the bottleneck node's locate-with event
    /// (cpu-clock without a PMU), and the two estimators are compared
    /// ([`crate::estimate`]).
    pub direct: bool,
}

impl Default for LocateConfig {
    fn default() -> Self {
        LocateConfig {
            import: None,
            pid: None,
            system_wide: false,
            cpus: None,
            command: Vec::new(),
            node: None,
            event: None,
            cpu: None,
            this_cpu: None,
            duration_s: None,
            rate: None,
            call_graph: false,
            stacks: true,
            kernel: false,
            report: ReportOptions::default(),
            folded: false,
            echo_notes: false,
            record: None,
            symdir: Vec::new(),
            kallsyms: None,
            host: Host::system(),
            stat_backend: tma_stat::BackendChoice::Live,
            tree: None,
            direct: false,
        }
    }
}

/// The result of `tma locate`.
#[derive(Debug, Clone)]
pub struct Located {
    pub profile: Profile,
    /// Wall time sampled, in nanoseconds (0 for imports): the pprof duration.
    pub duration_ns: i64,
    /// The exit status to end with: the sampled command's (128+N when killed by signal N).
    pub exit_status: u8,
    /// With `--tree`: the per-function trees.
    pub tree: Option<crate::tree::TreeProfile>,
    /// With `--tree` and a tree (a PMU, or `--cpu` for an import): each function's
    /// dominant level-1 node, the colours of the TMA flame graph.
    pub dominant: Option<std::collections::BTreeMap<String, crate::tree::Dominant>>,
}

/// Samples aggregated, before symbolization.
struct Recorded {
    agg: Aggregator,
    event_name: String,
    kallsyms: Option<Kallsyms>,
    notes: Vec<String>,
    duration_ns: i64,
    exit_status: u8,
    /// With `--tree`: the group's layout and the model its tree is evaluated with.
    tree: Option<(TreeLayout, Option<&'static Model>)>,
    /// A live session: what a second (direct) pass needs.
    live: Option<LivePass>,
    /// `--import --tree`: the file's events that are not in the sampled group (one may be
    /// the direct samples of the bottleneck's locate-with event).
    import_others: Vec<String>,
}

/// How the live session went, for a second pass of the same target.
#[derive(Debug, Clone)]
struct LivePass {
    target: Target,
    /// Kernel samples were taken (the second pass takes them too).
    include_kernel: bool,
    /// The session was interrupted, or its attached process went away.
    ended_early: bool,
}

/// Run `tma locate` up to the profile; notes (and the quick stat pass's) go to `notes`.
pub fn run(cfg: &LocateConfig, notes: &mut dyn Write) -> Result<Located, LocateError> {
    if cfg.tree.is_some() {
        if cfg.node.is_some() || cfg.event.is_some() {
            return Err(usage(
                "--tree samples core cycles (or cpu-clock) with its own group: give no --node or -e",
            ));
        }
        if cfg.record.is_some() {
            return Err(usage(
                "--record with --tree is not supported: record the group with \
                 `perf record -e '{...}:S'` and read it with --import --tree",
            ));
        }
    }
    let rec = match (&cfg.import, cfg.pid, cfg.command.is_empty()) {
        _ if cfg.system_wide => {
            if cfg.import.is_some() || cfg.pid.is_some() || !cfg.command.is_empty() {
                return Err(usage(
                    "-a samples the whole system for --duration S (or until Ctrl-C): \
                     give no command, -p or --import with it",
                ));
            }
            let target = Target::System {
                cpus: cfg.cpus.clone(),
            };
            sample(cfg, &target, notes)?
        }
        _ if cfg.cpus.is_some() => {
            return Err(usage(
                "-C CPUS selects CPUs of a system-wide session: add -a",
            ))
        }
        (Some(path), ..) => import(cfg, path)?,
        (None, Some(_), false) => {
            return Err(usage("give either -p PID or a command after --, not both"))
        }
        (None, Some(pid), true) => sample(cfg, &Target::Pid(pid), notes)?,
        (None, None, false) => sample(cfg, &Target::Launch(cfg.command.clone()), notes)?,
        (None, None, true) => {
            return Err(usage(
                "nothing to sample: give a command after `--`, -p PID, or --import FILE",
            ))
        }
    };
    let mut sym = Symbolizer::new(cfg.symdir.clone(), rec.kallsyms);
    let mut profile = hotspots::analyze(&rec.agg, &mut sym, &rec.event_name, &cfg.report);
    profile.notes.extend(rec.notes);
    if cfg.folded && !cfg.call_graph && cfg.import.is_none() {
        profile
            .notes
            .push("--folded without -g: each stack is just the sampled function".into());
    }
    let mut dominant = None;
    let tree = match (&rec.tree, cfg.tree) {
        (Some((layout, model)), Some(level)) => {
            profile.value_names = layout.read_order();
            let consts = tree_constants(&cfg.host);
            let first = rec.agg.group().map_or(0, |g| g.first_reads);
            let mut t = crate::tree::build(
                &profile,
                layout,
                *model,
                level,
                &consts,
                cfg.report.top,
                first,
            )?;
            if let Some(m) = model {
                dominant = Some(crate::tree::dominant_nodes(&profile, m, &consts)?);
            }
            // Kernel samples are charged to their user frame here: the flat report's
            // note on unnamed kernel samples does not apply.
            t.notes.extend(
                profile
                    .notes
                    .iter()
                    .filter(|n| !n.contains("kernel samples shown as [kernel]"))
                    .cloned(),
            );
            if let Some(live) = &rec.live {
                // The kernel caveats `tma doctor` checks that apply to this run.
                let host_model = match &cfg.cpu {
                    Some(k) => Some(tma_catalog::by_name(k)?),
                    None => cfg.this_cpu,
                };
                for c in tma_checks::tree_caveats(&cfg.host, host_model) {
                    let n = format!("{} (tma doctor: {})", c.summary, c.id);
                    if cfg.echo_notes {
                        writeln!(notes, "tma: note: {n}")?;
                    }
                    t.notes.push(n);
                }
                if cfg.direct {
                    direct_pass(cfg, live, &mut t, &profile, *model, &consts, notes)?;
                }
            }
            if let (Some(path), true) = (&cfg.import, cfg.direct) {
                direct_from_file(
                    cfg,
                    path,
                    &rec.import_others,
                    &mut t,
                    &profile,
                    *model,
                    &consts,
                    notes,
                )?;
            }
            Some(t)
        }
        _ => None,
    };
    Ok(Located {
        profile,
        duration_ns: rec.duration_ns,
        exit_status: rec.exit_status,
        tree,
        dominant,
    })
}

/// The constants of a per-thread tree: SMT as this host has it (`core_wide` only with SMT
/// off: samples are of one thread).
fn tree_constants(host: &Host) -> tma_metrics::Constants {
    let smt_on = smt_active(host);
    tma_metrics::Constants {
        smt_on,
        threads_per_core: if smt_on { 2 } else { 1 },
        core_wide: !smt_on,
        ..tma_metrics::Constants::default()
    }
}

fn smt_active(host: &Host) -> bool {
    host.sys_text("devices/system/cpu/smt/active")
        .map(|t| t.trim() == "1")
        .unwrap_or(false)
}

/// The group `--tree` samples: the level's events on this machine's core PMU for the
/// model, or the software group where there is no PMU (then no model: counts only).
fn tree_plan(
    cfg: &LocateConfig,
    level: u8,
) -> Result<(TreeLayout, Option<&'static Model>, SampleEvent, GroupSpec), LocateError> {
    let model = match &cfg.cpu {
        Some(k) => Some(tma_catalog::by_name(k)?),
        None => cfg.this_cpu,
    };
    let pmus = tma_host::sysfs::Pmus::discover(&cfg.host.sys).ok();
    let hardware = match (model, &pmus) {
        (Some(m), Some(p)) if p.get(m.pmu).is_some() => Some((m, p)),
        _ => None,
    };
    let Some((m, pmus)) = hardware else {
        let mut layout = TreeLayout::software();
        layout.notes.insert(
            0,
            match model {
                Some(m) => format!(
                    "no `{}` PMU here (no hardware counters: a VM without a virtual PMU?): \
                     the {} tree cannot be counted",
                    m.pmu, m.key
                ),
                None => "no hardware PMU, and no CPU model (--cpu) for a tree".into(),
            },
        );
        let group = GroupSpec {
            leader: None,
            members: crate::tree::SOFTWARE_MEMBERS
                .iter()
                .map(|&e| GroupEvent::software(e))
                .collect(),
        };
        return Ok((layout, None, SampleEvent::CpuClock, group));
    };
    let layout = TreeLayout::hardware(m, level, cfg.host.nmi_watchdog_on(), smt_active(&cfg.host))?;
    let ge = |s: &tma_perf::event::EventSpec| {
        GroupEvent::from_spec(s, pmus).map_err(|e| usage(&e.to_string()))
    };
    let sampler = ge(&layout.sampler)?;
    let group = GroupSpec {
        leader: layout.leader.as_ref().map(ge).transpose()?,
        members: layout.members.iter().map(ge).collect::<Result<_, _>>()?,
    };
    let event = SampleEvent::Raw {
        name: sampler.name,
        pmu_type: sampler.type_,
        config: sampler.config,
        config1: sampler.config1,
        config2: 0,
    };
    Ok((layout, Some(m), event, group))
}

fn new_aggregator(cfg: &LocateConfig) -> Aggregator {
    let mut agg = Aggregator::new();
    agg.keep_callchains = cfg.stacks || cfg.report.children;
    agg
}

fn read_kallsyms(path: &Path) -> Option<Kallsyms> {
    std::fs::read(path).ok().and_then(|b| Kallsyms::parse(&b))
}

/// `--import FILE`: the samples of one event of a perf.data file.
fn import(cfg: &LocateConfig, path: &Path) -> Result<Recorded, LocateError> {
    if !cfg.command.is_empty() {
        return Err(usage("--import reads a file: give no command"));
    }
    if cfg.node.is_some() {
        return Err(usage(
            "--node chooses what to sample; with --import use -e EVENT to pick an event of the file",
        ));
    }
    let mut agg = new_aggregator(cfg);
    let info =
        crate::import::import_file(path, &mut agg, cfg.event.as_deref()).map_err(|source| {
            LocateError::Import {
                path: path.display().to_string(),
                source,
            }
        })?;
    let event_name = info
        .events
        .get(info.chosen)
        .cloned()
        .unwrap_or_else(|| "?".into());
    let mut notes = Vec::new();
    let tree = match cfg.tree {
        Some(_) => Some(imported_tree(cfg, &agg, &info)?),
        None => None,
    };
    // The events no read group of the sampled event names: sampled on their own.
    let in_group: Vec<usize> = agg
        .group()
        .map(|g| {
            g.ids
                .iter()
                .filter_map(|id| {
                    id.and_then(|id| info.event_ids.iter().position(|ids| ids.contains(&id)))
                })
                .collect()
        })
        .unwrap_or_default();
    let import_others: Vec<String> = info
        .events
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != info.chosen && !in_group.contains(i))
        .map(|(_, e)| e.clone())
        .collect();
    if info.events.len() > 1 && tree.is_none() {
        notes.push(format!(
            "the file has {} events ({}); showing {} (pick one with -e)",
            info.events.len(),
            info.events.join(", "),
            event_name
        ));
    }
    Ok(Recorded {
        agg,
        event_name,
        kallsyms: cfg.kallsyms.as_deref().and_then(read_kallsyms),
        notes,
        duration_ns: 0,
        exit_status: 0,
        tree,
        live: None,
        import_others,
    })
}

/// `--import --tree`: the file's samples must carry read groups; their values are named
/// by the ids the file lists for each event.
fn imported_tree(
    cfg: &LocateConfig,
    agg: &Aggregator,
    info: &crate::import::ImportInfo,
) -> Result<(TreeLayout, Option<&'static Model>), LocateError> {
    let Some(group) = agg.group() else {
        return Err(usage(
            "--tree: the file's samples carry no read group; record one with \
             `perf record -e '{cpu-clock,page-faults}:S'` (a group whose leader samples and \
             reads the others)",
        ));
    };
    let names: Vec<String> = group
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            id.and_then(|id| info.event_ids.iter().position(|ids| ids.contains(&id)))
                .and_then(|e| info.events.get(e).cloned())
                .unwrap_or_else(|| format!("value{i}"))
        })
        .collect();
    let model = match &cfg.cpu {
        Some(k) => Some(tma_catalog::by_name(k)?),
        None => None,
    };
    let sampler = info.events.get(info.chosen).cloned().unwrap_or_default();
    Ok((TreeLayout::imported(&names, &sampler, model), model))
}

/// Live sampling: choose the event, sample, save `--record`, explain how the session ended.
fn sample(
    cfg: &LocateConfig,
    target: &Target,
    out_notes: &mut dyn Write,
) -> Result<Recorded, LocateError> {
    let mut tree = None;
    let chosen = match cfg.tree {
        Some(level) => {
            let (layout, model, event, group) = tree_plan(cfg, level)?;
            tree = Some((layout, model, group));
            Chosen {
                wanted: event.name().to_string(),
                event,
                precise: 0,
                notes: Vec::new(),
            }
        }
        None => choose_event(cfg, target, out_notes)?,
    };
    if cfg.echo_notes {
        for n in &chosen.notes {
            writeln!(out_notes, "tma: note: {n}")?;
        }
    }
    let mut notes = chosen.notes.clone();
    if matches!(chosen.event, SampleEvent::CpuClock | SampleEvent::TaskClock)
        && chosen.notes.is_empty()
    {
        notes.push(format!(
            "{} is a timer: samples show where time goes, with skid",
            chosen.event.name()
        ));
    }
    let mut scfg = sampling_config(cfg, &chosen)?;
    let tree = tree.map(|(layout, model, group)| {
        scfg.group = Some(group);
        // Kernel work (page faults, system calls) is charged to the user function whose
        // call chain led there: sample the kernel too, with call chains.
        scfg.callchain = true;
        scfg.include_kernel = true;
        (layout, model)
    });
    let mut agg = new_aggregator(cfg);
    agg.keep_callchains |= tree.is_some();
    if tma_perf::process::interrupted() {
        // Stopped during the quick stat pass: nothing is launched or sampled.
        notes.push("interrupted (SIGINT/SIGTERM) before sampling began: no samples".into());
        return Ok(Recorded {
            agg,
            event_name: chosen.event.name().to_string(),
            kallsyms: None,
            notes,
            duration_ns: 0,
            exit_status: 0,
            tree,
            live: None,
            import_others: Vec::new(),
        });
    }
    let retry = (tree.is_some() && !cfg.kernel).then(|| {
        let mut user = scfg.clone();
        user.include_kernel = false;
        user
    });
    let mut include_kernel = scfg.include_kernel;
    let (outcome, records) = match record(cfg, scfg, target, &mut agg) {
        // Kernel samples refused (perf_event_paranoid): user code only, and say so.
        Err(LocateError::Live(LiveError::Sampling(SamplingError::Open { err, .. })))
            if retry.is_some()
                && matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) =>
        {
            let user = retry.unwrap_or_else(|| unreachable!("checked by the guard"));
            notes.push(format!(
                "kernel samples were refused (perf_event_paranoid is {}): the work the \
                 kernel does for a function (page faults, system calls) is charged to the \
                 next user sample",
                cfg.host.paranoid_text()
            ));
            agg = new_aggregator(cfg);
            agg.keep_callchains = true;
            include_kernel = false;
            record(cfg, user, target, &mut agg)?
        }
        r => r?,
    };
    if let Some(path) = &cfg.record {
        write_perf_data(path, outcome.attr.clone(), &records)?;
    }
    let exit_status = session_notes(cfg, &outcome, &mut notes);
    let kallsyms = match &cfg.kallsyms {
        Some(p) => read_kallsyms(p),
        None if cfg.kernel || (cfg.system_wide && outcome.summary.kernel_refused.is_none()) => cfg
            .host
            .proc_bytes("kallsyms")
            .ok()
            .and_then(|b| Kallsyms::parse(&b)),
        None => None,
    };
    Ok(Recorded {
        agg,
        event_name: chosen.event.name().to_string(),
        kallsyms,
        notes,
        duration_ns: outcome.summary.elapsed.as_nanos().min(i64::MAX as u128) as i64,
        exit_status,
        tree,
        live: Some(LivePass {
            target: target.clone(),
            include_kernel: include_kernel && outcome.summary.kernel_refused.is_none(),
            ended_early: outcome.summary.interrupted || outcome.summary.target_vanished,
        }),
        import_others: Vec::new(),
    })
}

/// `--tree`'s second pass: sample the whole run's bottleneck node's locate-with event (the
/// nearest parent's where it has none; cpu-clock without a PMU) on the same target, and put
/// the two estimators side by side in the tree ([`crate::estimate`]). A pass that cannot be
/// made, or fails, is a note: the tree stands.
/// What the second pass samples, and how: the whole run's bottleneck node's locate-with
/// event (the nearest parent's where it has none; cpu-clock without a tree), at the catalog's
/// fixed period for a hardware event unless `--period`/`--freq` was given, with call chains,
/// the command's stdout to /dev/null. `Ok(Err(why))`: no second pass, and why.
fn direct_plan(
    cfg: &LocateConfig,
    t: &crate::tree::TreeProfile,
    profile: &Profile,
    model: Option<&'static Model>,
    include_kernel: bool,
) -> Result<Result<(crate::estimate::Compared, SamplingConfig), String>, LocateError> {
    use crate::estimate;
    let node = t.total.bottleneck.as_ref().and_then(|b| b.node.clone());
    let (what, chosen) = match (model, t.level) {
        (Some(m), 1..) => {
            let Some(node) = node else {
                return Ok(Err("the whole run has no bottleneck node".into()));
            };
            let Some((with, _)) = estimate::locate_with(m, &node) else {
                return Ok(Err(format!(
                    "the {} tables name no locate-with event for {node} or its parents",
                    m.key
                )));
            };
            let pmu = choose::core_pmu(&cfg.host.sys);
            let chosen = choose::choose_on(
                &Request::Node(with.to_string()),
                Some(m),
                pmu.as_ref(),
                &cfg.host,
            )?;
            let what = estimate::Compared {
                // The group reads are compared for the node whose event the direct pass samples.
                group_basis: estimate::group_basis(profile, Some(with)),
                node: Some(node),
                direct_event: chosen.event.name().to_string(),
                direct_node: Some(with.to_string()),
                direct_source: "a second pass".into(),
            };
            (what, chosen)
        }
        _ => (
            estimate::Compared {
                node: None,
                group_basis: estimate::group_basis(profile, None),
                direct_event: "cpu-clock".into(),
                direct_node: None,
                direct_source: "a second pass".into(),
            },
            Chosen {
                event: SampleEvent::CpuClock,
                precise: 0,
                wanted: "cpu-clock".into(),
                notes: Vec::new(),
            },
        ),
    };
    let mut scfg = sampling_config(cfg, &chosen)?;
    scfg.callchain = true;
    scfg.include_kernel = include_kernel;
    scfg.command_stdout = tma_perf::process::CommandStdout::Null;
    // Samples proportional to events: a hardware event at the catalog's fixed period.
    if cfg.rate.is_none() {
        if let (SampleEvent::Raw { name, .. }, Some(m)) = (&chosen.event, model) {
            let base = tma_catalog::EventId::parse(name).base;
            if let Some(e) = m.event(base).filter(|e| e.sample_after > 0) {
                scfg.rate = Rate::Period(e.sample_after);
            }
        }
    }
    Ok(Ok((what, scfg)))
}

/// `--import --tree`: the direct estimate from the same file, when it also holds samples of
/// the event the second pass would sample, recorded on their own (`perf record -e
/// '{cycles,...}:S' -e EVENT`): the locate-with event of the bottleneck (or of its nearest
/// parent with one); without a tree, the file's first event outside the group.
#[allow(clippy::too_many_arguments)]
fn direct_from_file(
    cfg: &LocateConfig,
    path: &Path,
    others: &[String],
    t: &mut crate::tree::TreeProfile,
    profile: &Profile,
    model: Option<&'static Model>,
    consts: &tma_metrics::Constants,
    notes: &mut dyn Write,
) -> Result<(), LocateError> {
    use crate::estimate;
    let base = |e: &str| e.split(':').next().unwrap_or(e).to_ascii_lowercase();
    let (what, event) = match (model, t.level) {
        (Some(m), 1..) => {
            let Some(node) = t.total.bottleneck.as_ref().and_then(|b| b.node.clone()) else {
                return Ok(());
            };
            let Some((with, ev)) = estimate::locate_with(m, &node) else {
                return Ok(());
            };
            let want = base(ev);
            let Some(found) = others.iter().find(|e| base(e) == want) else {
                return skip_direct(
                    cfg,
                    notes,
                    t,
                    format!(
                        "the file holds no samples of {ev} (the locate-with event of {with}): \
                         record it beside the group (perf record -e '{{...}}:S' -e {ev})"
                    ),
                );
            };
            let what = estimate::Compared {
                group_basis: estimate::group_basis(profile, Some(with)),
                node: Some(node),
                direct_event: found.clone(),
                direct_node: Some(with.to_string()),
                direct_source: "the same file".into(),
            };
            (what, found.clone())
        }
        _ => {
            let Some(found) = others.first() else {
                return Ok(());
            };
            let what = estimate::Compared {
                node: None,
                group_basis: estimate::group_basis(profile, None),
                direct_event: found.clone(),
                direct_node: None,
                direct_source: "the same file".into(),
            };
            (what, found.clone())
        }
    };
    let mut agg = Aggregator::new();
    agg.keep_callchains = true;
    crate::import::import_file(path, &mut agg, Some(&event)).map_err(|source| {
        LocateError::Import {
            path: path.display().to_string(),
            source,
        }
    })?;
    let sym = Symbolizer::new(
        cfg.symdir.clone(),
        cfg.kallsyms.as_deref().and_then(read_kallsyms),
    );
    compare_direct(cfg, notes, t, what, &agg, sym, profile, model, consts)
}

/// Put the direct samples in `agg` beside the group reads of `profile`: the estimators of
/// the node `what` names, stored in `t` (and their verdict said on stderr with `echo_notes`;
/// the text report shows it under the table).
#[allow(clippy::too_many_arguments)]
fn compare_direct(
    cfg: &LocateConfig,
    notes: &mut dyn Write,
    t: &mut crate::tree::TreeProfile,
    what: crate::estimate::Compared,
    agg: &Aggregator,
    mut sym: Symbolizer,
    profile: &Profile,
    model: Option<&'static Model>,
    consts: &tma_metrics::Constants,
) -> Result<(), LocateError> {
    use crate::estimate;
    let opts = ReportOptions {
        annotate: None,
        top: 1,
        no_frame_lines: true,
        ..ReportOptions::default()
    };
    let direct = hotspots::analyze(agg, &mut sym, &what.direct_event, &opts);
    let node = what.direct_node.as_deref().or(what.node.as_deref());
    let group = estimate::group_amounts(profile, model, node, consts)
        .map_err(crate::tree::TreeError::from)?;
    let shown: Vec<estimate::FuncKey> = t
        .functions
        .iter()
        .map(|f| (f.function.clone(), f.module.clone()))
        .collect();
    let e = estimate::compare(what, &group, &estimate::direct_amounts(&direct), &shown);
    if cfg.echo_notes {
        writeln!(notes, "tma: note: {}", e.verdict())?;
    }
    t.estimators = Some(e);
    Ok(())
}

/// Why there is no direct estimate: a note in the tree (and on stderr with `echo_notes`).
fn skip_direct(
    cfg: &LocateConfig,
    notes: &mut dyn Write,
    t: &mut crate::tree::TreeProfile,
    why: String,
) -> Result<(), LocateError> {
    let n = format!("no direct estimate of the bottleneck: {why}");
    if cfg.echo_notes {
        writeln!(notes, "tma: note: {n}")?;
    }
    t.notes.push(n);
    Ok(())
}

fn direct_pass(
    cfg: &LocateConfig,
    live: &LivePass,
    t: &mut crate::tree::TreeProfile,
    profile: &Profile,
    model: Option<&'static Model>,
    consts: &tma_metrics::Constants,
    notes: &mut dyn Write,
) -> Result<(), LocateError> {
    if live.ended_early {
        return skip_direct(
            cfg,
            notes,
            t,
            "the session was interrupted or its process went away".into(),
        );
    }
    if !matches!(live.target, Target::Launch(_)) && cfg.duration_s.is_none() {
        return skip_direct(
            cfg,
            notes,
            t,
            "a second pass of -p or -a needs --duration (the first ran until the end)".into(),
        );
    }
    let (what, scfg) = match direct_plan(cfg, t, profile, model, live.include_kernel)? {
        Ok(p) => p,
        Err(why) => return skip_direct(cfg, notes, t, why),
    };
    writeln!(
        notes,
        "tma: second pass for the direct estimate: sampling {}{}",
        what.direct_event,
        match &what.direct_node {
            Some(n) => format!(" (the locate-with event of {n})"),
            None => String::new(),
        }
    )?;
    let mut agg = Aggregator::new();
    agg.keep_callchains = true;
    if let Err(e) = crate::live::sample(scfg, &live.target, &mut agg, None) {
        return skip_direct(cfg, notes, t, format!("the second pass failed: {e}"));
    }
    let sym = Symbolizer::new(cfg.symdir.clone(), None);
    compare_direct(cfg, notes, t, what, &agg, sym, profile, model, consts)
}

/// The event to sample: `--node`, `-e`, or the bottleneck of a quick stat pass (on a machine
/// with a PMU; without one `choose` explains the cpu-clock fallback).
fn choose_event(
    cfg: &LocateConfig,
    target: &Target,
    notes: &mut dyn Write,
) -> Result<Chosen, LocateError> {
    let pmu = choose::core_pmu(&cfg.host.sys);
    let model = match &cfg.cpu {
        Some(k) => Some(tma_catalog::by_name(k)?),
        None => cfg.this_cpu,
    };
    let request = match (&cfg.node, &cfg.event) {
        (Some(n), _) => Request::Node(n.clone()),
        (None, Some(e)) => Request::Event(e.clone()),
        (None, None) if pmu.is_none() || matches!(target, Target::System { .. }) => {
            Request::Bottleneck(None)
        }
        (None, None) => Request::Bottleneck(quick_stat_bottleneck(cfg, target, model, notes)?),
    };
    Ok(choose::choose_on(&request, model, pmu.as_ref(), &cfg.host)?)
}

/// Run `tma stat -l 3` in-process on the same target (a launched command runs once more, as
/// with toplev; an attached process is counted for `--duration`, default 2 s) and return
/// the bottleneck node it names.
fn quick_stat_bottleneck(
    cfg: &LocateConfig,
    target: &Target,
    model: Option<&'static Model>,
    notes: &mut dyn Write,
) -> Result<Option<String>, LocateError> {
    let (stat, shown) = quick_stat_config(cfg, target, model);
    writeln!(
        notes,
        "tma: no --node or -e: finding the bottleneck first with `tma {}`",
        shown.join(" ")
    )?;
    let outcome =
        tma_stat::run(&stat, &mut tma_stat::Discard, notes).map_err(LocateError::QuickStat)?;
    Ok(outcome.bottleneck.and_then(|b| b.node))
}

/// The quick stat pass's configuration, and the `tma stat` arguments it amounts to.
fn quick_stat_config(
    cfg: &LocateConfig,
    target: &Target,
    model: Option<&'static Model>,
) -> (tma_stat::StatConfig, Vec<String>) {
    let mut live = tma_stat::LiveOptions {
        backend: cfg.stat_backend.clone(),
        ..tma_stat::LiveOptions::default()
    };
    let mut shown = vec!["stat".to_string(), "-l".into(), "3".into()];
    if let Some(m) = model {
        shown.extend(["--cpu".into(), m.key.to_string()]);
    }
    match target {
        Target::Pid(pid) => {
            let secs = cfg.duration_s.unwrap_or(2.0);
            live.target = tma_stat::LiveTarget::Pids(vec![*pid as u32]);
            live.duration_s = Some(secs);
            shown.extend(["-p".into(), pid.to_string(), "--duration".into()]);
            shown.push(secs.to_string());
        }
        Target::Launch(cmd) => {
            live.target = tma_stat::LiveTarget::Command(cmd.clone());
            // Only the sampled run shows the command's output (as the `tma stat` child with
            // stdout to /dev/null did).
            live.command_stdout = tma_perf::process::CommandStdout::Null;
            shown.push("--".into());
            shown.extend(cmd.iter().map(|a| tma_render::shell_quote_os(a)));
        }
        // choose_event never asks for a stat pass of the whole system.
        Target::System { .. } => {}
    }
    let stat = tma_stat::StatConfig {
        input: tma_stat::Input::Live(live),
        cpu: model.map(|m| m.key.to_string()),
        level: 3,
        host: cfg.host.clone(),
        ..tma_stat::StatConfig::default()
    };
    (stat, shown)
}

fn sampling_config(cfg: &LocateConfig, chosen: &Chosen) -> Result<SamplingConfig, LocateError> {
    let mut s = SamplingConfig::new(chosen.event.clone());
    s.precise = chosen.precise;
    s.callchain = cfg.call_graph;
    s.include_kernel = cfg.kernel || cfg.system_wide;
    s.host = cfg.host.clone();
    if let Some(r) = cfg.rate {
        s.rate = r;
    }
    if let Some(secs) = cfg.duration_s {
        if !(secs > 0.0 && secs.is_finite()) {
            return Err(usage("--duration must be a positive number of seconds"));
        }
        s.duration = Some(Duration::from_secs_f64(secs));
    }
    Ok(s)
}

/// A record kept for `--record`: (type, misc, body).
type KeptRecord = (u32, u16, Vec<u8>);

/// Sample into `agg`; with `--record`, also keep every record (they come in time order, with
/// perf's FINISHED_ROUND markers) for the perf.data file, whose attr is known only once the
/// session is open.
fn record(
    cfg: &LocateConfig,
    scfg: SamplingConfig,
    target: &Target,
    agg: &mut Aggregator,
) -> Result<(LiveOutcome, Vec<KeptRecord>), LocateError> {
    let keep = cfg.record.is_some();
    let mut records: Vec<KeptRecord> = Vec::new();
    let mut collect = |r: &RawRecord<'_>| {
        if keep {
            records.push((r.ty, r.misc, r.data.concat()));
        }
    };
    let outcome = crate::live::sample(scfg, target, agg, Some(&mut collect))?;
    Ok((outcome, records))
}

fn write_perf_data(path: &Path, attr: Vec<u8>, records: &[KeptRecord]) -> Result<(), LocateError> {
    let mut w = PerfDataWriter::new(attr);
    for (ty, misc, body) in records {
        w.push(*ty, *misc, &[&body[..]]);
    }
    let image = w.finish();
    tma_render::write_output(path, |out| {
        out.write_all(&image)?;
        Ok(())
    })?;
    Ok(())
}

/// Notes on how the session ended, and the exit status it gives.
fn session_notes(cfg: &LocateConfig, outcome: &LiveOutcome, notes: &mut Vec<String>) -> u8 {
    let late = outcome.late_records;
    if late > 0 {
        notes.push(format!(
            "{late} records reached tma too late to be put in time order; \
             samples among them may be attributed to [unknown] or an old mapping"
        ));
    }
    let summary = &outcome.summary;
    if let Some(paranoid) = &summary.kernel_refused {
        notes.push(format!(
            "kernel samples were refused (perf_event_paranoid is {paranoid}): only user code \
             was sampled; run as root or lower perf_event_paranoid to -1 to include the kernel"
        ));
    }
    if cfg.system_wide {
        let cpus = match &cfg.cpus {
            Some(c) => {
                let v: Vec<String> = c.iter().map(u32::to_string).collect();
                format!("CPUs {}", v.join(","))
            }
            None => "all CPUs".to_string(),
        };
        notes.push(format!(
            "system-wide: every process on {cpus} for {:.1} s",
            summary.elapsed.as_secs_f64()
        ));
    }
    if summary.inherit_refused {
        notes.push(
            "this kernel refuses sample-read with inherit (it needs Linux 6.12): only the \
             command's first thread was sampled, not the threads and processes it started"
                .into(),
        );
    }
    if summary.target_vanished {
        notes.push("the attached process exited during sampling".into());
    }
    if summary.interrupted {
        notes.push(
            "interrupted (SIGINT/SIGTERM): the report covers the samples taken until then".into(),
        );
    }
    if summary.threads_vanished > 0 {
        notes.push(format!(
            "{} threads exited before their events could be opened",
            summary.threads_vanished
        ));
    }
    if summary.stopped_at_duration {
        notes.push(format!(
            "sampling stopped after --duration {}s; the command was sent SIGTERM",
            cfg.duration_s.unwrap_or(0.0)
        ));
        0
    } else if let Some(sig) = summary.signal {
        notes.push(format!("the command was killed by signal {sig}"));
        tma_perf::process::shell_status(None, Some(sig))
    } else {
        tma_perf::process::shell_status(summary.exit_code, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick pass in-process, counting with the synthetic backend (chosen Zen 4 counts of
    /// a SHA-256 run): the bottleneck is the one `tma_stat::run` names for the same counts.
    #[test]
    fn quick_stat_pass_names_the_stat_bottleneck() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/live/synthetic-zen4-sha256.json");
        let synthetic = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
        let cfg = LocateConfig {
            stat_backend: tma_stat::BackendChoice::Synthetic(synthetic),
            ..LocateConfig::default()
        };
        let model = tma_catalog::by_name("zen4").unwrap();
        let target = Target::Launch(vec!["true".into()]);
        let mut notes = Vec::new();
        let node = quick_stat_bottleneck(&cfg, &target, Some(model), &mut notes).unwrap();
        let notes = String::from_utf8(notes).unwrap();
        assert!(
            notes.starts_with(
                "tma: no --node or -e: finding the bottleneck first with `tma stat -l 3 --cpu zen4 -- true`"
            ),
            "{notes}"
        );
        let stat = tma_stat::StatConfig {
            cpu: Some("zen4".into()),
            level: 3,
            input: tma_stat::Input::Live(tma_stat::LiveOptions {
                target: tma_stat::LiveTarget::Command(vec!["true".into()]),
                backend: cfg.stat_backend.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let outcome = tma_stat::run(&stat, &mut tma_stat::Discard, &mut std::io::sink()).unwrap();
        let want = outcome.bottleneck.and_then(|b| b.node);
        assert!(want.is_some());
        assert_eq!(node, want);
    }

    /// A replayed tree of `model` whose whole-run bottleneck is Backend_Bound (Ice Lake) or
    /// backend_bound (Zen 4): one sample of thread 1 in one function.
    fn backend_bound_tree(key: &str) -> (crate::tree::TreeProfile, Profile, &'static Model) {
        use crate::tree::{build, replay, ReplaySample, TreeLayout};
        let m = tma_catalog::by_name(key).unwrap();
        let layout = TreeLayout::hardware(m, 1, false, false).unwrap();
        let values: &[(&str, u64)] = match key {
            "icl" => &[
                ("TOPDOWN.SLOTS:perf_metrics", 10000),
                ("CPU_CLK_UNHALTED.THREAD", 2000),
                ("PERF_METRICS.FRONTEND_BOUND", 1000),
                ("PERF_METRICS.BAD_SPECULATION", 500),
                ("PERF_METRICS.RETIRING", 2500),
                ("PERF_METRICS.BACKEND_BOUND", 6000),
            ],
            _ => &[
                ("ls_not_halted_cyc", 1000),
                ("de_no_dispatch_per_slot.no_ops_from_frontend", 600),
                ("de_src_op_disp.all", 1500),
                ("ex_ret_ops", 1200),
                ("de_no_dispatch_per_slot.backend_stalls", 3900),
            ],
        };
        let (p, first) = replay(
            &layout,
            &[ReplaySample {
                tid: 1,
                ip: 0x1000,
                group_id: 1,
                values,
            }],
        );
        let consts = tma_metrics::Constants::default();
        let t = build(&p, &layout, Some(m), 1, &consts, 10, first).unwrap();
        (t, p, m)
    }

    /// The second pass samples the bottleneck's locate-with event on the host's core PMU
    /// (tests/fixtures/roots/icx-6.12: `cpu`, type 4) at the catalog's period, unless a rate
    /// was given; where the tables name no locate-with event (AMD) there is no second pass,
    /// and without a tree it samples cpu-clock against the group's task-clock.
    #[test]
    fn direct_plan_samples_the_locate_with_event() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/roots/icx-6.12");
        let mut cfg = LocateConfig {
            host: Host::under(&root),
            ..LocateConfig::default()
        };
        let (t, p, icl) = backend_bound_tree("icl");
        let (what, scfg) = direct_plan(&cfg, &t, &p, Some(icl), false)
            .unwrap()
            .unwrap();
        assert_eq!(what.node.as_deref(), Some("Backend_Bound"));
        assert_eq!(what.direct_node.as_deref(), Some("Backend_Bound"));
        assert_eq!(what.direct_event, "TOPDOWN.BACKEND_BOUND_SLOTS");
        assert_eq!(what.group_basis, "Backend_Bound slots");
        match &scfg.event {
            SampleEvent::Raw {
                pmu_type, config, ..
            } => assert_eq!((*pmu_type, *config & 0xffff), (4, 0x02a4)),
            e => panic!("{e:?}"),
        }
        assert_eq!(scfg.rate, Rate::Period(10000003));
        assert!(scfg.callchain && !scfg.include_kernel);
        assert_eq!(scfg.command_stdout, tma_perf::process::CommandStdout::Null);
        cfg.rate = Some(Rate::Freq(1000));
        let (_, scfg) = direct_plan(&cfg, &t, &p, Some(icl), true).unwrap().unwrap();
        assert_eq!(scfg.rate, Rate::Freq(1000));
        assert!(scfg.include_kernel);

        let (t, p, zen4) = backend_bound_tree("zen4");
        assert_eq!(
            t.total.bottleneck.as_ref().and_then(|b| b.node.as_deref()),
            Some("backend_bound")
        );
        assert_eq!(
            direct_plan(&cfg, &t, &p, Some(zen4), false)
                .unwrap()
                .unwrap_err(),
            "the zen4 tables name no locate-with event for backend_bound or its parents"
        );

        let mut soft = t.clone();
        soft.level = 0;
        let mut sp = p.clone();
        sp.value_names = vec![
            "cpu-clock".into(),
            "page-faults".into(),
            "context-switches".into(),
            "task-clock".into(),
        ];
        let (what, scfg) = direct_plan(&cfg, &soft, &sp, None, false).unwrap().unwrap();
        assert_eq!(
            (what.node, what.group_basis.as_str(), scfg.event),
            (None, "task-clock", SampleEvent::CpuClock)
        );
    }

    /// The launched command's output belongs to the sampled run: the quick pass sends its
    /// stdout to /dev/null (stderr stays); an attached process's output is not ours to touch.
    #[test]
    fn quick_stat_pass_silences_the_command_stdout() {
        use tma_perf::process::CommandStdout;
        let cfg = LocateConfig::default();
        let launch = Target::Launch(vec!["echo".into(), "hi".into()]);
        let (stat, shown) = quick_stat_config(&cfg, &launch, None);
        assert_eq!(stat.live().unwrap().command_stdout, CommandStdout::Null);
        assert_eq!(
            stat.live().unwrap().target,
            tma_stat::LiveTarget::Command(vec!["echo".into(), "hi".into()])
        );
        assert_eq!(shown.join(" "), "stat -l 3 -- echo hi");
        let (stat, _) = quick_stat_config(&cfg, &Target::Pid(42), None);
        assert_eq!(stat.live().unwrap().command_stdout, CommandStdout::Inherit);
        assert_eq!(
            stat.live().unwrap().target,
            tma_stat::LiveTarget::Pids(vec![42])
        );
    }
}
