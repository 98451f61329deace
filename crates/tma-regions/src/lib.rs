//! `tma stat --regions -- CMD` and `tma stat --itt -- CMD`: the TMA tree (or, without a PMU,
//! the software counts) of each named region of a program, per thread and merged.
//!
//! Three ways in, one result:
//! * the control FIFO ([`tma_marker::protocol`]): any program writes `begin`/`end` lines;
//! * the `tma-marker` library (Rust, or C through `tma_marker.h`), which speaks the protocol
//!   or counts in process and sends totals;
//! * `--itt`: the `tma-itt` collector, loaded by a program's ITT static part through
//!   `INTEL_LIBITTNOTIFY64`, turns ITT tasks and frames into regions.
//!
//! Data flow: `server` launches the program with the FIFOs in its environment and reads its
//! lines; [`tree::Collector`] reads the counters of the thread at each boundary
//! ([`counters::LiveCounters`], the plan `tma stat` counts with) and charges deltas to the
//! region; [`report`] evaluates each region's tree and writes text, JSON or CSV.

pub mod counters;
pub(crate) mod placement;
pub mod report;
mod server;
pub mod tree;

use std::io::Write;
use std::path::PathBuf;

use tma_host::sysfs::Pmus;
use tma_marker::protocol;
use tma_perf::event::EventSpec;
use tma_perf::plan::Plan;
use tma_stat::{LiveTarget, Outcome, StatConfig};

/// How the program names its regions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Way {
    /// The control FIFO (directly or through the marker library).
    Fifo,
    /// ITT tasks and frames, through this collector library (`libtma_itt.so`), which the
    /// program's ITT static part loads from `INTEL_LIBITTNOTIFY64`.
    Itt(PathBuf),
}

/// Where the ITT collector is, for a tma binary at `exe`: `libtma_itt.so` beside it, in its
/// `deps/` directory (where cargo puts it when it builds it as a dependency), or in
/// `../lib/tma/` (an installation); the first that exists, else the first.
pub fn default_itt_lib(exe: &std::path::Path) -> PathBuf {
    let dir = exe.parent().unwrap_or(std::path::Path::new("."));
    let candidates = [
        dir.join("libtma_itt.so"),
        dir.join("deps/libtma_itt.so"),
        dir.join("../lib/tma/libtma_itt.so"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .unwrap_or(&candidates[0])
        .clone()
}

/// Everything `tma stat --regions` needs: the stat settings (a command, the tree's level,
/// the output format) and the way in.
#[derive(Debug, Clone)]
pub struct RegionsConfig {
    pub stat: StatConfig,
    pub way: Way,
    /// Let tma's control thread follow the program's sending thread onto its CPU while it
    /// answers acknowledged lines (`--no-follow` turns it off): see `placement`.
    pub follow: bool,
}

/// Errors of a regions run.
#[derive(Debug, thiserror::Error)]
pub enum RegionsError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot set up the region control FIFOs: {0}")]
    Channel(std::io::Error),
    #[error("cannot run {cmd}: {source}")]
    Exec { cmd: String, source: std::io::Error },
    #[error("cannot count regions: {0}")]
    Counters(String),
    #[error(transparent)]
    Stat(Box<tma_stat::StatError>),
    #[error("writing the output failed: {0}")]
    Write(#[from] std::io::Error),
}

impl From<tma_stat::StatError> for RegionsError {
    fn from(e: tma_stat::StatError) -> Self {
        RegionsError::Stat(Box::new(e))
    }
}

fn usage(s: impl Into<String>) -> RegionsError {
    RegionsError::Usage(s.into())
}

/// The command of a regions run, with the settings that mean nothing for one refused.
fn command_of(cfg: &RegionsConfig) -> Result<Vec<std::ffi::OsString>, RegionsError> {
    let flag = match cfg.way {
        Way::Fifo => "--regions",
        Way::Itt(_) => "--itt",
    };
    let live = cfg.stat.live().ok_or_else(|| {
        usage(format!(
            "{flag} counts a program as it runs: it cannot read a recording (--import, --example)"
        ))
    })?;
    let argv = match &live.target {
        LiveTarget::Command(a) if !a.is_empty() => a.clone(),
        _ => {
            return Err(usage(format!(
                "{flag} needs a command to launch (after --): the program is told where to \
                 send its regions when it starts"
            )))
        }
    };
    let mut set: Vec<&str> = live
        .flags_set()
        .into_iter()
        .filter(|f| *f != "-- CMD" && *f != "-e")
        .collect();
    if cfg.stat.render.plot.is_some() {
        set.push("--plot");
    }
    if cfg.stat.render.compact {
        set.push("--compact");
    }
    if !matches!(live.backend, tma_stat::BackendChoice::Live) {
        set.push("--synthetic-backend");
    }
    if !set.is_empty() {
        return Err(usage(format!(
            "{flag} cannot be combined with {}: regions are counted once, per thread, for the \
             whole run",
            set.join(", ")
        )));
    }
    if let Way::Itt(lib) = &cfg.way {
        if !lib.is_file() {
            return Err(usage(format!(
                "--itt: the collector {} does not exist (build it with `cargo build -p tma-itt`, \
                 or give its path with --itt-lib)",
                lib.display()
            )));
        }
    }
    if tma_perf::backend::resolve_command(&argv[0]).is_none() {
        return Err(usage(format!(
            "command not found: {} (not an executable file, and not in PATH)",
            argv[0].display()
        )));
    }
    Ok(argv)
}

/// What the regions are counted with.
pub struct Counting {
    pub plan: Plan,
    /// The TMA tree's model and request, when there is a PMU.
    pub tree: Option<tma_stat::RunInfo>,
    /// Why there is no tree.
    pub no_tree: Option<String>,
}

/// The plan: the tree's groups where the core PMU opens, else the software counts.
fn counting(
    cfg: &StatConfig,
    pmus: &Pmus,
    extra: &[EventSpec],
    notes: &mut dyn Write,
) -> Result<(Counting, counters::LiveCounters), RegionsError> {
    let why = if !pmus.has_core_pmu() {
        format!(
            "no `cpu` PMU in {}/bus/event_source/devices",
            cfg.host.sys.display()
        )
    } else {
        let (model, source) = tma_stat::select_model(cfg.cpu.as_deref(), None, &cfg.host)?;
        let request = tma_stat::Request {
            level: cfg.level,
            nodes: cfg.nodes.clone(),
            topology: Some(tma_perf::snapshot::Topology::discover(&cfg.host)),
            metrics: Vec::new(),
            bottlenecks: Vec::new(),
        };
        let plan = tma_stat::groups::counting_plan(
            model,
            &request.selection(),
            extra,
            cfg.host.nmi_watchdog_on(),
        )?;
        let live = counters::LiveCounters::new(&plan, pmus)?;
        match live.probe() {
            Ok(()) => {
                let info = tma_stat::RunInfo {
                    model,
                    cpu_source: source.describe().to_string(),
                    source: "counted live, per region".into(),
                    interval_mode: false,
                    request,
                    command: None,
                    event_map: Vec::new(),
                    scope: None,
                    core_type: None,
                };
                return Ok((
                    Counting {
                        plan,
                        tree: Some(info),
                        no_tree: None,
                    },
                    live,
                ));
            }
            Err(e) => format!("the tree's counter groups do not open here ({e})"),
        }
    };
    let plan = tma_stat::software_plan(extra, notes)?;
    let live = counters::LiveCounters::new(&plan, pmus)?;
    Ok((
        Counting {
            plan,
            tree: None,
            no_tree: Some(why),
        },
        live,
    ))
}

/// Run the program, gather its regions and write them to `out` (notes to `notes`).
pub fn run(
    cfg: &RegionsConfig,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<Outcome, RegionsError> {
    let argv = command_of(cfg)?;
    let stat = &cfg.stat;
    if let Some(name) = stat.cpu.as_deref() {
        tma_catalog::by_name(name).map_err(tma_stat::StatError::from)?;
    }
    let live = stat.live().expect("checked by command_of");
    let pmus = Pmus::discover(&stat.host.sys).unwrap_or_default();
    let model = tma_stat::select_model(stat.cpu.as_deref(), None, &stat.host)
        .ok()
        .map(|(m, _)| m);
    let extra = live
        .events
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|e| tma_stat::event::parse_event(e, model, &pmus, &stat.host))
        .collect::<Result<Vec<_>, _>>()?;
    let (counting, mut live_counters) = counting(stat, &pmus, &extra, notes)?;
    if let Some(why) = &counting.no_tree {
        writeln!(
            notes,
            "tma: hardware counters are not available ({why}): the regions carry software \
             counts only; the TMA tree of a region needs a hardware PMU (a bare-metal host or \
             a virtual machine with its vPMU enabled)"
        )?;
    }
    let ch = server::Channel::new()?;
    let mut env = vec![
        (
            protocol::ENV_FIFO.to_string(),
            ch.ctl_path.display().to_string(),
        ),
        (
            protocol::ENV_ACK.to_string(),
            ch.ack_path.display().to_string(),
        ),
    ];
    if let Some(ev) = live_counters.event_attrs() {
        env.push((
            protocol::ENV_EVENTS.to_string(),
            protocol::format_events(&ev),
        ));
    }
    if let Way::Itt(lib) = &cfg.way {
        env.push((
            "INTEL_LIBITTNOTIFY64".to_string(),
            lib.display().to_string(),
        ));
    }
    let t0 = std::time::Instant::now();
    let mut collector = tree::Collector::new(t0);
    let (os, cannot) = if cfg.follow {
        match placement::SystemOs::new(stat.host.clone()) {
            Ok(os) => (Some(os), None),
            Err(why) => (None, Some(why)),
        }
    } else {
        (None, None)
    };
    let follow = os.is_some();
    let mut placement = placement::Placement::new(os, follow, t0);
    if let Some(why) = cannot {
        placement.cannot_follow(why);
    }
    let ending = server::serve(
        &argv,
        &env,
        live.command_stdout,
        &ch,
        &mut collector,
        &mut live_counters,
        &mut placement,
    )?;
    let placed = placement.summary();
    drop(placement);
    let wall_ns = t0.elapsed().as_nanos() as u64;
    let regions = collector.finish();
    for n in &regions.notes {
        writeln!(notes, "tma: {n}")?;
    }
    if let (Some(p), true) = (placed, stat.render.verbose > 0) {
        writeln!(notes, "tma: {p}")?;
    }
    if regions.threads.is_empty() {
        writeln!(
            notes,
            "tma: the program named no region{}",
            match cfg.way {
                Way::Fifo => format!(
                    " (it is told where to write `begin`/`end` lines in ${}; see the README)",
                    protocol::ENV_FIFO
                ),
                Way::Itt(_) => " (no ITT task or frame reached the collector: is the program \
                                built with ITT calls, and does it load INTEL_LIBITTNOTIFY64?)"
                    .to_string(),
            }
        )?;
    }
    let r = report::Report::build(&counting, &regions, &argv, wall_ns)?;
    match stat.render.format {
        tma_stat::Format::Text => r.text(out, stat.render.verbose > 0)?,
        tma_stat::Format::Json => r.json(out)?,
        tma_stat::Format::Csv => r.csv(out)?,
    }
    let outcome = Outcome {
        ending: Some(ending),
        bottleneck: None,
    };
    Ok(outcome)
}
