//! The `tma serve` use case: count continuously with the `tma stat` engine
//! ([`tma_stat::run`] with a sink: planning, multiplexing, scaling, the software fallback without a
//! PMU, perf_event's cgroup mode) and serve the last completed interval to Prometheus.
//!
//! * [`collect`]: the engine's watcher; each interval becomes a set of metric families
//!   (TMA nodes, bottleneck, metrics, event and software counters, PMU state, build info).
//! * [`expo`]: those families in Prometheus text 0.0.4 or OpenMetrics.
//! * [`http`]: a small bounded HTTP server (`/metrics`, `/-/healthy`, `/-/ready`).
//! * [`log`]: structured (logfmt) logs on standard error.
//!
//! `--replay FILE` serves the intervals of a recording (a `tma stat --record` snapshot or
//! `perf stat -I` output) in a loop instead of counting. SIGINT/SIGTERM end [`run`] cleanly:
//! counters closed, port released.

pub mod anomaly;
pub mod collect;
pub mod expo;
pub mod hot;
pub mod hot_tree;
pub mod http;
pub mod log;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tma_host::Host;
use tma_perf::backend::{RawInterval, RunError, Target};
use tma_perf::cgroup_counters::CgroupCounters;
use tma_perf::plan::Plan;
use tma_perf::Interval;
use tma_stat::eval::RunInfo;
use tma_stat::sink::{self as stat_sink, IntervalData, IntervalSink};
use tma_stat::{Input, IntervalReport, LiveOptions, LiveTarget, StatConfig, StatError};

use crate::collect::{Bounds, Build, Collector, Shared, Split};
use crate::expo::Format;
use crate::hot::HotCgroups;
use crate::http::{Handler, Limits, Request, Response, Server};
use crate::log::{Log, Notes};

/// The default `--listen`: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9273";

/// `--listen` as exporters take it: `ADDR:PORT` (`127.0.0.1:9273`, `[::1]:9273`), a host
/// name (`localhost:9273`: its first address, IPv4 first), or `:PORT` for every interface
/// (`0.0.0.0`), as node_exporter's `:9100`.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = |why: &str| {
        format!(
            "bad listen address {text:?}: {why}; give ADDR:PORT (127.0.0.1:9273, \
             0.0.0.0:9273, [::1]:9273, localhost:9273) or :PORT for every interface"
        )
    };
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(bad(if t.parse::<u16>().is_ok() {
            "a port alone is ambiguous (write :PORT for every interface)"
        } else {
            "no port"
        }));
    };
    let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
    if host.is_empty() {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| bad(&format!("cannot resolve {host:?} ({e})")))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| bad(&format!("{host:?} has no address")))
}

/// What to serve.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Count live: system-wide (optionally on some CPUs), or the tasks of some cgroups.
    Live {
        /// `-C`: only these CPUs (system-wide).
        cpu_list: Option<String>,
        /// `--cgroup`: cgroup v2 directories (absolute, or relative to the cgroup2 mount).
        cgroups: Vec<String>,
    },
    /// Serve the intervals of a recording in a loop.
    Replay(PathBuf),
}

/// Everything `tma serve` needs; no clap, no environment.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub source: Source,
    /// Counting interval (live), or how long each recorded interval is served (replay).
    pub interval: Duration,
    /// One scope per CPU (`cpu` label) for system-wide counting.
    pub per_cpu: bool,
    /// CPU model (`--cpu`).
    pub cpu: Option<String>,
    pub level: u8,
    pub nodes: Vec<String>,
    /// `--metrics` as for `tma stat -m` (`Some([])` = the default set).
    pub metrics: Option<Vec<String>>,
    pub metric_groups: Vec<String>,
    pub host: Host,
    pub limits: Limits,
    /// `--cgroup-top`, `--series-budget`.
    pub bounds: Bounds,
    /// `--anomaly`.
    pub anomaly: Option<crate::anomaly::AnomalyConfig>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: DEFAULT_LISTEN.parse().expect("a valid address"),
            source: Source::Live {
                cpu_list: None,
                cgroups: Vec::new(),
            },
            interval: Duration::from_secs(10),
            per_cpu: false,
            cpu: None,
            level: 2,
            nodes: Vec::new(),
            metrics: Some(Vec::new()),
            metric_groups: Vec::new(),
            host: Host::system(),
            limits: Limits::default(),
            bounds: Bounds::default(),
            anomaly: None,
        }
    }
}

/// Errors of `tma serve`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(
        "cannot listen on {addr}: {source} (another exporter may use the port: choose another \
         with --listen ADDR:PORT)"
    )]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Stat(#[from] StatError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl ServeConfig {
    /// The `tma stat` configuration of the engine.
    pub fn stat_config(&self) -> Result<StatConfig, ServeError> {
        let ms = u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX);
        if ms < 100 {
            return Err(ServeError::Usage(format!(
                "--interval {:?} is too short: give at least 100ms (10s suits most scrapes)",
                self.interval
            )));
        }
        let input = match &self.source {
            Source::Replay(p) => Input::Import(p.clone()),
            Source::Live { cpu_list, cgroups } => {
                if self.per_cpu && !cgroups.is_empty() {
                    return Err(ServeError::Usage(
                        "--per-cpu splits system-wide counts; with --cgroup the series are \
                         per cgroup already"
                            .into(),
                    ));
                }
                Input::Live(LiveOptions {
                    target: if cgroups.is_empty() {
                        LiveTarget::System {
                            cpus: cpu_list.clone(),
                            command: None,
                        }
                    } else {
                        LiveTarget::Cgroups(cgroups.iter().map(PathBuf::from).collect())
                    },
                    interval_ms: Some(ms),
                    ..LiveOptions::default()
                })
            }
        };
        Ok(StatConfig {
            input,
            cpu: self.cpu.clone(),
            level: self.level,
            nodes: self.nodes.clone(),
            metrics: self.metrics.clone(),
            metric_groups: self.metric_groups.clone(),
            host: self.host.clone(),
            ..StatConfig::default()
        })
    }
}

/// The HTTP routes over the shared state.
pub fn handler(shared: Arc<Shared>) -> Arc<Handler> {
    Arc::new(move |req: &Request| {
        if req.method != "GET" && req.method != "HEAD" {
            let mut r = Response::text(405, "only GET and HEAD\n");
            r.headers.push(("Allow", "GET, HEAD".into()));
            return r;
        }
        match req.path.as_str() {
            "/metrics" => {
                let format = Format::negotiate(req.accept.as_deref());
                Response {
                    status: 200,
                    content_type: format.content_type(),
                    body: shared.render(format).into_bytes(),
                    headers: Vec::new(),
                }
            }
            "/-/healthy" => Response::text(200, "tma serve is healthy\n"),
            "/-/ready" if shared.ready() => Response::text(200, "tma serve is ready\n"),
            "/-/ready" => Response::text(503, "no interval counted yet\n"),
            "/" => Response::text(
                200,
                "tma serve: Top-down Microarchitecture Analysis exporter\n\
                 /metrics     Prometheus text 0.0.4, or OpenMetrics on request (Accept)\n\
                 /-/healthy   liveness\n\
                 /-/ready     200 once an interval is counted\n",
            ),
            _ => Response::text(404, "not found: try /metrics\n"),
        }
    })
}

/// Run the exporter until SIGINT/SIGTERM (or, live, until counting fails). Logs go to `log`.
pub fn run(cfg: &ServeConfig, log: Arc<Log>) -> Result<(), ServeError> {
    let stat = cfg.stat_config()?;
    tma_perf::process::catch_interrupts()?;
    // A recording is read (and refused) before the port is taken.
    let recording = match &cfg.source {
        Source::Replay(_) => Some(load_replay(&stat, &log)?),
        Source::Live { .. } => None,
    };
    // `--cgroup-top` without `--cgroup`: the host's cgroup tree, checked before the port.
    let hot = match (&cfg.source, cfg.bounds.cgroup_top) {
        (Source::Live { cgroups, .. }, Some(_)) if cgroups.is_empty() => {
            let fs = tma_host::cgroupfs::CgroupFs::of_host(&cfg.host);
            fs.check()
                .map_err(|e| ServeError::Usage(format!("--cgroup-top: {e}")))?;
            Some(HotCgroups::new(fs))
        }
        _ => None,
    };
    if cfg.bounds.series_budget < 50 {
        return Err(ServeError::Usage(format!(
            "--series-budget {} is too small: the exporter's own series take about 30; \
             give at least 50 (300 suits most hosts)",
            cfg.bounds.series_budget
        )));
    }
    let listener = TcpListener::bind(cfg.listen).map_err(|source| ServeError::Listen {
        addr: cfg.listen,
        source,
    })?;
    let shared = Arc::new(Shared::default());
    let server = Server::start(
        listener,
        handler(Arc::clone(&shared)),
        cfg.limits.clone(),
        Arc::clone(&shared.stats),
        Arc::clone(&log),
    )?;
    let addr = server.addr();
    let what = match &cfg.source {
        Source::Replay(p) => format!("replay of {}", p.display()),
        Source::Live { cgroups, .. } if !cgroups.is_empty() => {
            format!("cgroups {}", cgroups.join(","))
        }
        Source::Live {
            cpu_list: Some(c), ..
        } => format!("CPUs {c}"),
        Source::Live { .. } => "all CPUs".to_string(),
    };
    log.info(
        "listening",
        &[
            ("addr", &addr),
            ("pid", &std::process::id()),
            ("source", &what),
            ("interval", &humantime::format_duration(cfg.interval)),
        ],
    );
    if !addr.ip().is_loopback() {
        log.warn(
            "listening_beyond_loopback",
            &[
                ("addr", &addr),
                ("note", &"anyone who can reach it can read the metrics"),
            ],
        );
    }
    let build = Build {
        version: env!("CARGO_PKG_VERSION").to_string(),
        cpu: cfg
            .host
            .cpuinfo()
            .ok()
            .and_then(|c| c.model_name)
            .unwrap_or_else(|| "unknown".into()),
    };
    let (cgroups, replay) = match &cfg.source {
        Source::Live { cgroups, .. } => (cgroups.clone(), false),
        Source::Replay(_) => (Vec::new(), true),
    };
    let split = if cfg.per_cpu {
        Split::PerCpu
    } else {
        Split::Target
    };
    let mut collector = Collector::new(
        Arc::clone(&shared),
        Arc::clone(&log),
        build,
        split,
        cgroups,
        replay,
    );
    collector.set_bounds(cfg.bounds.clone());
    if let Some(a) = &cfg.anomaly {
        collector.set_anomaly(a.clone());
    }
    if let Some(hot) = hot {
        collector.set_hot_cgroups(hot);
    }
    let result = if let Some(rec) = recording {
        serve_replay(rec, cfg.interval, &mut collector, &log)
    } else if let Some((mut tree, info, plan)) = hot_tree_setup(cfg, &stat, &log)? {
        // `--cgroup-top` with a PMU: the trees of the hottest cgroups, re-chosen each
        // interval.
        collector
            .start(stat_sink::Start::Tree {
                info: &info,
                plan: Some(&plan),
                target: None,
            })
            .and_then(|()| hot_tree::run(&mut tree, cfg.interval, &mut collector, &log))
            .map_err(ServeError::from)
    } else {
        let mut notes = Notes::new(&log);
        check_streamable(&stat)
            .and_then(|()| tma_stat::run(&stat, &mut collector, &mut notes))
            .map(|_| ())
            .map_err(ServeError::from)
    };
    if let Err(e) = &result {
        log.error("stopped_on_error", &[("error", e)]);
    }
    server.stop();
    log.info(
        "stopped",
        &[
            ("addr", &addr),
            ("intervals", &collector.intervals()),
            (
                "reason",
                &if tma_perf::process::interrupted() {
                    "signal"
                } else {
                    "counting ended"
                },
            ),
        ],
    );
    result
}

/// `--cgroup-top` (without `--cgroup`) on a machine with a PMU of one core type: the tree's
/// plan opened system-wide, ready to follow the hottest cgroups ([`hot_tree`]). `None`
/// where the cgroups are ranked by CPU time only: no PMU (or the kernel refuses hardware
/// counters), a hybrid part, `-C`.
fn hot_tree_setup(
    cfg: &ServeConfig,
    stat: &StatConfig,
    log: &Log,
) -> Result<Option<(hot_tree::HotTree<CgroupCounters>, RunInfo, Plan)>, ServeError> {
    let (Source::Live { cpu_list, cgroups }, Some(_)) = (&cfg.source, cfg.bounds.cgroup_top) else {
        return Ok(None);
    };
    if !cgroups.is_empty() {
        return Ok(None);
    }
    let pmus = tma_host::sysfs::Pmus::discover(&cfg.host.sys).unwrap_or_default();
    if !pmus.has_core_pmu() {
        return Ok(None);
    }
    let why = if pmus.core_types().len() > 1 {
        Some("a hybrid part (one tree per core type per cgroup is not counted)")
    } else if cpu_list.is_some() {
        Some("-C (the cgroups are counted on every CPU)")
    } else {
        None
    };
    if let Some(why) = why {
        log.warn(
            "cgroup_top_by_cpu_time",
            &[
                ("reason", &why),
                ("exported", &"the CPU time of the cgroups, one tree"),
            ],
        );
        return Ok(None);
    }
    let (model, source) = tma_stat::select_model(cfg.cpu.as_deref(), None, &cfg.host)?;
    let choice = tma_stat::MetricChoice::resolve(stat, model)?;
    let request = tma_stat::Request {
        level: stat.level.max(choice.level),
        nodes: stat.nodes.clone(),
        topology: Some(tma_perf::snapshot::Topology::discover(&cfg.host)),
        metrics: choice.metrics,
        bottlenecks: choice.bottlenecks,
    };
    let plan = tma_stat::groups::counting_plan(
        model,
        &request.selection(),
        &[],
        cfg.host.nmi_watchdog_on(),
    )?;
    let counters = match CgroupCounters::open(&plan, &cfg.host) {
        Ok(c) => c,
        // The engine says why when it falls back to software counts.
        Err(RunError::NoHardware { .. }) => return Ok(None),
        Err(e) => return Err(ServeError::Stat(StatError::Run(e))),
    };
    for (e, why) in &plan.unschedulable {
        log.warn("event_unschedulable", &[("event", e), ("reason", why)]);
    }
    let root = tma_host::cgroupfs::CgroupFs::of_host(&cfg.host);
    let info = RunInfo {
        model,
        cpu_source: source.describe().to_string(),
        source: format!(
            "counted live on every CPU and, in perf_event's cgroup mode, the {} hottest \
             cgroups of {}",
            cfg.bounds.cgroup_top.unwrap_or(0),
            root.root().display()
        ),
        interval_mode: true,
        request,
        command: None,
        event_map: Vec::new(),
        scope: None,
        core_type: None,
    };
    Ok(Some((
        hot_tree::HotTree::new(counters, root.root()),
        info,
        plan,
    )))
}

/// The start of a recorded run, owned.
enum Start {
    Tree {
        info: Box<RunInfo>,
        plan: Option<Plan>,
        target: Option<Target>,
    },
    Software {
        plan: Plan,
        target: Option<Target>,
        reason: Option<String>,
        streamed: bool,
    },
}

impl Start {
    fn owned(start: stat_sink::Start<'_>) -> Start {
        match start {
            stat_sink::Start::Tree { info, plan, target } => Start::Tree {
                info: Box::new(info.clone()),
                plan: plan.cloned(),
                target: target.cloned(),
            },
            stat_sink::Start::Software {
                plan,
                target,
                reason,
                streamed,
            } => Start::Software {
                plan: plan.clone(),
                target: target.cloned(),
                reason: reason.map(str::to_string),
                streamed,
            },
        }
    }

    fn as_sink(&self) -> stat_sink::Start<'_> {
        match self {
            Start::Tree { info, plan, target } => stat_sink::Start::Tree {
                info,
                plan: plan.as_ref(),
                target: target.as_ref(),
            },
            Start::Software {
                plan,
                target,
                reason,
                streamed,
            } => stat_sink::Start::Software {
                plan,
                target: target.as_ref(),
                reason: reason.as_deref(),
                streamed: *streamed,
            },
        }
    }

    fn clone_start(&self) -> Start {
        Start::owned(self.as_sink())
    }

    /// The core type of a tree of a hybrid part.
    fn core_type(&self) -> Option<&'static str> {
        match self {
            Start::Tree { info, .. } => info.core_type,
            Start::Software { .. } => None,
        }
    }
}

/// An exporter streams intervals: live counting needs `-I`, and the settings that need a
/// whole run are refused before anything is counted.
fn check_streamable(cfg: &StatConfig) -> Result<(), StatError> {
    let Some(l) = cfg.live() else {
        return Ok(());
    };
    if l.interval_ms.is_none() {
        return Err(StatError::Usage(
            "watching live counts needs an interval (-I MS)".into(),
        ));
    }
    let bad: Vec<&str> = [
        (l.repeat.is_some_and(|n| n > 1), "--repeat"),
        (l.drilldown, "--drilldown"),
        (l.no_multiplex, "--no-multiplex"),
        (l.per_core, "--per-core"),
        (l.per_thread, "--per-thread"),
        (l.record.is_some(), "--record"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(StatError::Usage(format!(
            "{} need a whole run; an exporter streams intervals",
            bad.join(", ")
        )))
    }
}

/// One recorded interval, owned.
type Kept = (Option<RawInterval>, Interval, Option<IntervalReport>);

/// A recording's intervals, kept for the replay loop.
#[derive(Default)]
pub struct Recording {
    start: Option<Start>,
    intervals: Vec<Kept>,
    /// A recording of several trees (the core types of a hybrid part, and the merged view
    /// of a snapshot): each tree's start and intervals. Empty for one tree.
    trees: Vec<(Start, Vec<Kept>)>,
    /// The trees came as plain steps, one after the other (a `perf stat` import).
    stepped: bool,
}

/// The most intervals a replayed recording may hold (they are kept in memory).
const MAX_REPLAY_INTERVALS: usize = 100_000;

impl IntervalSink for Recording {
    fn start(&mut self, start: stat_sink::Start<'_>) -> Result<(), StatError> {
        let start = Start::owned(start);
        let Some(first) = &self.start else {
            self.start = Some(start);
            return Ok(());
        };
        // The core types of a hybrid part, one tree after the other: one tree each.
        let typed = |s: &Start| s.core_type();
        let known = |t: &str| {
            typed(first) == Some(t) || self.trees.iter().any(|(s, _)| typed(s) == Some(t))
        };
        match typed(&start) {
            Some(t) if typed(first).is_some() && !known(t) => {
                if self.trees.is_empty() {
                    let first = self.start.take().expect("checked above");
                    self.trees
                        .push((first, std::mem::take(&mut self.intervals)));
                    self.start = Some(self.trees[0].0.clone_start());
                }
                self.trees.push((start, Vec::new()));
                self.stepped = true;
                Ok(())
            }
            _ => Err(StatError::Usage(
                "the snapshot is a --drilldown run: record one run (with -I MS for intervals) \
                 to serve it"
                    .into(),
            )),
        }
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        let kept = (iv.raw.cloned(), iv.readings.clone(), iv.report.cloned());
        let list = match self.trees.last_mut() {
            Some((_, list)) if self.stepped => list,
            _ => &mut self.intervals,
        };
        if list.len() < MAX_REPLAY_INTERVALS {
            list.push(kept);
        }
        Ok(())
    }
    fn start_trees(&mut self, trees: &[stat_sink::Start<'_>]) -> Result<(), StatError> {
        if self.start.is_some() || !self.trees.is_empty() {
            return Err(StatError::Usage(
                "the snapshot holds several runs: record one run (with -I MS for intervals) \
                 to serve it"
                    .into(),
            ));
        }
        self.trees = trees
            .iter()
            .map(|s| (Start::owned(*s), Vec::new()))
            .collect();
        self.start = self.trees.first().map(|(s, _)| s.clone_start());
        Ok(())
    }
    fn tree_interval(
        &mut self,
        tree: usize,
        _start: stat_sink::Start<'_>,
        iv: IntervalData<'_>,
    ) -> Result<(), StatError> {
        if let Some((_, list)) = self.trees.get_mut(tree) {
            if list.len() < MAX_REPLAY_INTERVALS {
                list.push((iv.raw.cloned(), iv.readings.clone(), iv.report.cloned()));
            }
        }
        Ok(())
    }
    fn finish(&mut self, end: stat_sink::Finish<'_>) -> Result<(), StatError> {
        if let stat_sink::Finish::Tree { whole: Some(w), .. } = end {
            if w.repeats.is_some() {
                return Err(StatError::Usage(
                    "the snapshot is a --repeat run: record one run (with -I MS for \
                     intervals) to serve it"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// Sleep `d`, waking early on SIGINT/SIGTERM; `true` when interrupted.
fn sleep_or_interrupted(d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if tma_perf::process::interrupted() {
            return true;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// Read the recording once, through the engine's import or snapshot replay path.
fn load_replay(stat: &StatConfig, log: &Log) -> Result<Recording, ServeError> {
    let mut rec = Recording::default();
    {
        let mut notes = Notes::new(log);
        tma_stat::run(stat, &mut rec, &mut notes)?;
    }
    if rec.start.is_none() || rec.is_empty() {
        return Err(ServeError::Usage(
            "the recording holds no interval to serve".into(),
        ));
    }
    if rec.len() == MAX_REPLAY_INTERVALS {
        log.warn(
            "replay_truncated",
            &[("served_intervals", &MAX_REPLAY_INTERVALS)],
        );
    }
    Ok(rec)
}

/// Publish the recorded intervals one per `every`, from the first again after the last,
/// until a signal.
fn serve_replay(
    rec: Recording,
    every: Duration,
    collector: &mut Collector,
    log: &Log,
) -> Result<(), ServeError> {
    rec.start(collector)?;
    log.info("replay_loaded", &[("intervals", &rec.len())]);
    let mut loops = 0u64;
    loop {
        for i in 0..rec.len() {
            rec.publish(i, collector)?;
            if sleep_or_interrupted(every) {
                return Ok(());
            }
        }
        loops += 1;
        if loops == 1 {
            log.info(
                "replay_restarts",
                &[("note", &"from the first interval, counters go on")],
            );
        }
    }
}

impl Recording {
    /// Read a recording through the engine's import or snapshot replay path (what `tma
    /// stat --import` reads), refusing one with no interval.
    pub fn load(stat: &StatConfig, log: &Log) -> Result<Recording, ServeError> {
        load_replay(stat, log)
    }

    /// The number of intervals (of the tree that has the most).
    pub fn len(&self) -> usize {
        if self.trees.is_empty() {
            self.intervals.len()
        } else {
            self.trees.iter().map(|(_, l)| l.len()).max().unwrap_or(0)
        }
    }

    /// No interval.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The core types of the trees of a hybrid recording (`merged` for the merged view of
    /// a snapshot), in the order they are published; empty for one tree.
    pub fn core_types(&self) -> Vec<&'static str> {
        self.trees
            .iter()
            .map(|(s, _)| s.core_type().unwrap_or("-"))
            .collect()
    }

    /// Tell `collector` how the recording was counted.
    pub fn start(&self, collector: &mut Collector) -> Result<(), StatError> {
        if !self.trees.is_empty() {
            let starts: Vec<stat_sink::Start<'_>> =
                self.trees.iter().map(|(s, _)| s.as_sink()).collect();
            return collector.start_trees(&starts);
        }
        let Some(start) = self.start.as_ref() else {
            return Ok(());
        };
        match start {
            Start::Tree { info, plan, target } => collector.start(stat_sink::Start::Tree {
                info,
                plan: plan.as_ref(),
                target: target.as_ref(),
            }),
            Start::Software {
                plan,
                target,
                reason,
                streamed,
            } => collector.start(stat_sink::Start::Software {
                plan,
                target: target.as_ref(),
                reason: reason.as_deref(),
                streamed: *streamed,
            }),
        }
    }

    /// Publish interval `i` (modulo the length) through `collector`: of every tree, in
    /// one exposition, for a hybrid recording.
    pub fn publish(&self, i: usize, collector: &mut Collector) -> Result<(), StatError> {
        if !self.trees.is_empty() {
            for (k, (start, list)) in self.trees.iter().enumerate() {
                if list.is_empty() {
                    continue;
                }
                let (raw, readings, report) = &list[i % list.len()];
                collector.tree_interval(
                    k,
                    start.as_sink(),
                    IntervalData {
                        raw: raw.as_ref(),
                        readings,
                        report: report.as_ref(),
                    },
                )?;
            }
            return Ok(());
        }
        let Some((raw, readings, report)) = self.intervals.get(i % self.intervals.len().max(1))
        else {
            return Ok(());
        };
        collector.interval(IntervalData {
            raw: raw.as_ref(),
            readings,
            report: report.as_ref(),
        })
    }

    /// The readings and the report (with a tree) of interval `i`.
    pub fn interval(&self, i: usize) -> Option<(&Interval, Option<&IntervalReport>)> {
        self.intervals.get(i).map(|(_, r, rep)| (r, rep.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::testing::Buf;

    fn hot_config(root: &str, cpu_list: Option<&str>) -> ServeConfig {
        ServeConfig {
            source: Source::Live {
                cpu_list: cpu_list.map(str::to_string),
                cgroups: Vec::new(),
            },
            host: Host::under(&tma_testkit::fixture(root)),
            bounds: Bounds {
                cgroup_top: Some(3),
                ..Bounds::default()
            },
            ..ServeConfig::default()
        }
    }

    /// `--cgroup-top` counts the trees of the hottest cgroups only with a core PMU of one
    /// type and on every CPU; elsewhere it ranks by CPU time, and says why where there is a
    /// PMU.
    #[test]
    fn the_hot_trees_need_a_pmu_of_one_core_type_on_every_cpu() {
        for (root, cpus, why) in [
            ("hybrid/two-types", None, Some("hybrid")),
            ("roots/icx-6.12", Some("0"), Some("-C")),
            ("roots/zen5", None, None),
        ] {
            let cfg = hot_config(root, cpus);
            let buf = Buf::default();
            let log = Log::new(Box::new(buf.clone()));
            let got = hot_tree_setup(&cfg, &cfg.stat_config().unwrap(), &log).unwrap();
            assert!(got.is_none(), "{root}");
            let text = buf.text();
            match why {
                Some(w) => assert!(
                    text.contains("event=cgroup_top_by_cpu_time") && text.contains(w),
                    "{root}: {text}"
                ),
                // No PMU at all (zen5's root has no /sys): nothing to say here, the
                // engine says it when it counts software events.
                None => assert!(text.is_empty(), "{root}: {text}"),
            }
        }
        // A core PMU of one type on every CPU: the tree's plan is opened system-wide, or
        // the kernel refuses hardware counters (this machine has no PMU) and the cgroups
        // are ranked by CPU time.
        let cfg = hot_config("roots/icx-6.12", None);
        let log = Log::new(Box::new(std::io::sink()));
        match hot_tree_setup(&cfg, &cfg.stat_config().unwrap(), &log) {
            Ok(Some((tree, info, plan))) => {
                assert_eq!(info.model.key, "icx");
                assert!(tree.followed().is_empty());
                assert!(!tma_stat::groups::hw_groups(&plan).is_empty());
            }
            Ok(None) => {
                let pmus = tma_host::sysfs::Pmus::discover(&cfg.host.sys).unwrap();
                assert!(pmus.has_core_pmu());
                println!("skipped: the kernel refuses hardware counters (no PMU here)");
            }
            // A real PMU of another kind than the fake root's may refuse its encodings.
            Err(e) => println!("skipped: {e}"),
        }
    }
}
