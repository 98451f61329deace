//! From watched intervals to metric families: the [`Collector`] is the engine's
//! [`IntervalSink`]; after each interval it publishes a fresh set of families (the tree, metrics,
//! counters, state) that scrapes render until the next one.
//!
//! Cardinality: one series per shown node (`-l`, `--nodes`) and per selected metric, times
//! the number of scopes (1, the `--cgroup`s, or the CPUs with `--per-cpu`); one event
//! counter per counted event per scope; a fixed handful of others.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tma_catalog::Unit;
use tma_perf::backend::{Measurement, RawInterval, Target};
use tma_perf::event::SoftwareEvent;
use tma_perf::plan::Plan;
use tma_perf::Interval;
use tma_stat::eval::{RunInfo, TreeEval};
use tma_stat::sink::{IntervalData, IntervalSink, Start};
use tma_stat::{IntervalReport, StatError};

use crate::anomaly::{AnomalyConfig, Detector, Finding, ScopeValues};
use crate::expo::{self, Family, Format, Kind};
use crate::hot::Naming;
use crate::http::Stats;
use crate::log::Log;

/// What scrapes read: the families of the last interval, and the server's own counts.
#[derive(Debug)]
pub struct Shared {
    families: Mutex<Arc<Vec<Family>>>,
    ready: AtomicBool,
    pub stats: Arc<Stats>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            families: Mutex::new(Arc::new(Vec::new())),
            ready: AtomicBool::new(false),
            stats: Arc::new(Stats::default()),
        }
    }
}

impl Shared {
    /// Replace the published families (after an interval).
    pub fn publish(&self, families: Vec<Family>, ready: bool) {
        *self.families.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(families);
        if ready {
            self.ready.store(true, Ordering::SeqCst);
        }
    }

    /// An interval has been published.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The exposition in `format`, with the scrape's own figures at the end.
    pub fn render(&self, format: Format) -> String {
        let t0 = Instant::now();
        let families = Arc::clone(&self.families.lock().unwrap_or_else(|p| p.into_inner()));
        let mut out = String::with_capacity(16 * 1024);
        expo::write(&families, format, &mut out);
        let mut http = Family::new(
            "tma_http_responses",
            Kind::Counter,
            "HTTP responses of this exporter by status code (before this one).",
        );
        for (code, n) in self.stats.snapshot() {
            http.push(vec![("code", code.to_string())], n as f64);
        }
        let mut dur = Family::new(
            "tma_scrape_duration_seconds",
            Kind::Gauge,
            "Time this scrape took to render, seconds.",
        );
        dur.push(Vec::new(), t0.elapsed().as_secs_f64());
        expo::write(&[http, dur], format, &mut out);
        expo::finish(format, &mut out);
        out
    }
}

/// The build info labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub version: String,
    /// The running machine's CPU (`model name` of cpuinfo), `unknown` when unreadable.
    pub cpu: String,
}

/// How series are split.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Split {
    /// One scope (the target as a whole), or one per cgroup of a cgroup target.
    #[default]
    Target,
    /// One scope per CPU (system-wide counting).
    PerCpu,
}

/// One scope's label pair (none for the whole target).
type ScopeLabel = Option<(&'static str, String)>;

enum Mode {
    Waiting,
    Tree {
        info: Box<RunInfo>,
        eval: Box<TreeEval>,
        plan: Option<Plan>,
    },
    Software {
        plan: Plan,
        reason: String,
    },
}

/// The watcher behind `tma serve`.
pub struct Collector {
    shared: Arc<Shared>,
    log: Arc<Log>,
    build: Build,
    split: Split,
    /// Labels of the cgroups of a cgroup target, in target order.
    cgroup_labels: Vec<String>,
    /// `--replay`: the recording is served in a loop.
    replay: bool,
    mode: Mode,
    target: Option<Target>,
    /// Running totals of the counters: (family, scope, label value) -> total.
    totals: BTreeMap<(&'static str, String, String), f64>,
    intervals: u64,
    bounds: Bounds,
    /// The time an interval is published at (the fleet counters' timestamp).
    clock: Clock,
    /// `--cgroup-top` over the cgroup tree (without a cgroup target).
    hot: Option<crate::hot::HotCgroups>,
    warned_budget: bool,
    warned_hot: bool,
    /// The scopes named in the last exposition (`None` before the first).
    named: Option<std::collections::HashSet<String>>,
    /// `--anomaly`.
    anomaly: Option<Detector>,
    /// `--cgroup-top` with a PMU: the cgroups counted in the interval being published (id
    /// in the raw readings, path relative to the cgroup root); `None` otherwise.
    hot_followed: Option<Vec<(u32, String)>>,
    /// The cgroups to count next, chosen by the last interval.
    hot_next: Vec<String>,
    /// A run of several trees (the core types of a hybrid part and their merged view):
    /// each tree's mode, and the interval's data of each until the last tree's comes.
    trees: Vec<Mode>,
    pending: Vec<Option<Kept>>,
    /// The counters of the last interval of several trees, by scope.
    tree_counters: Vec<(ScopeLabel, Part)>,
}

/// One interval, owned: raw counts, readings, tree.
type Kept = (Option<RawInterval>, Interval, Option<IntervalReport>);

/// What tells the time of an interval (tests set their own).
pub type Clock = Box<dyn Fn() -> SystemTime + Send>;

/// The default `--series-budget`: samples per exposition.
pub const DEFAULT_SERIES_BUDGET: usize = 300;

/// How many series a host may export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// `--cgroup-top N`: the N busiest cgroups by name, the rest as cgroup="other".
    pub cgroup_top: Option<usize>,
    /// `--series-budget`: the most samples one exposition holds, all families together.
    pub series_budget: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            cgroup_top: None,
            series_budget: DEFAULT_SERIES_BUDGET,
        }
    }
}

/// The software events with a family of their own: (event, family base, help, scale).
const SOFTWARE: [(SoftwareEvent, &str, &str, f64); 4] = [
    (
        SoftwareEvent::TaskClock,
        "tma_task_clock_seconds",
        "CPU time of the counted tasks (task-clock), seconds.",
        1e-9,
    ),
    (
        SoftwareEvent::ContextSwitches,
        "tma_context_switches",
        "Context switches of the counted tasks.",
        1.0,
    ),
    (
        SoftwareEvent::CpuMigrations,
        "tma_cpu_migrations",
        "CPU migrations of the counted tasks.",
        1.0,
    ),
    (
        SoftwareEvent::PageFaults,
        "tma_page_faults",
        "Page faults of the counted tasks.",
        1.0,
    ),
];

impl Collector {
    pub fn new(
        shared: Arc<Shared>,
        log: Arc<Log>,
        build: Build,
        split: Split,
        cgroup_labels: Vec<String>,
        replay: bool,
    ) -> Collector {
        let c = Collector {
            shared,
            log,
            build,
            split,
            cgroup_labels,
            replay,
            mode: Mode::Waiting,
            target: None,
            totals: BTreeMap::new(),
            intervals: 0,
            bounds: Bounds::default(),
            clock: Box::new(SystemTime::now),
            hot: None,
            warned_budget: false,
            warned_hot: false,
            named: None,
            anomaly: None,
            hot_followed: None,
            hot_next: Vec::new(),
            trees: Vec::new(),
            pending: Vec::new(),
            tree_counters: Vec::new(),
        };
        c.shared.publish(c.state_families(), false);
        c
    }

    /// Bound the series: `--cgroup-top`, `--series-budget`.
    pub fn set_bounds(&mut self, bounds: Bounds) {
        self.bounds = bounds;
    }

    /// Follow the busiest cgroups of a cgroup tree by CPU time (`--cgroup-top` without a
    /// cgroup target); each interval reads the tree once.
    pub fn set_hot_cgroups(&mut self, hot: crate::hot::HotCgroups) {
        self.hot = Some(hot);
    }

    /// Publish one interval of `--cgroup-top` counted with a PMU ([`crate::hot_tree`]):
    /// `raw` holds the system-wide readings (no cgroup label) and those of each cgroup of
    /// `followed` (its id, its path relative to the cgroup root). Each followed cgroup gets
    /// its tree (its counts less those of the followed cgroups below it: perf_event's
    /// cgroup mode counts descendants), `other` the rest of the system. The cgroups to
    /// count next: the `--cgroup-top` with the most slots (cycles on AMD) in this interval,
    /// measured for the followed ones, estimated from CPU time for the others (cgroupfs),
    /// as many as the series budget leaves room for.
    pub fn hot_interval(
        &mut self,
        raw: &RawInterval,
        followed: &[(u32, String)],
    ) -> Result<Vec<String>, StatError> {
        let Some(plan) = self.plan() else {
            return Ok(Vec::new());
        };
        let system = RawInterval {
            start_s: raw.start_s,
            end_s: raw.end_s,
            groups: raw
                .groups
                .iter()
                .filter(|g| g.cgroup.is_none())
                .cloned()
                .collect(),
        };
        let readings = Measurement::interval_readings(plan, &system, false);
        self.hot_followed = Some(followed.to_vec());
        self.interval(IntervalData {
            raw: Some(raw),
            readings: &readings,
            report: None,
        })?;
        Ok(std::mem::take(&mut self.hot_next))
    }

    /// Mark intervals outside each scope's learnt distribution (`--anomaly`).
    pub fn set_anomaly(&mut self, cfg: AnomalyConfig) {
        self.anomaly = Some(Detector::new(cfg));
    }

    /// What `--anomaly` learns of a scope: its level-1 shares, IPC, the memory-bound share.
    fn anomaly_values(&self, s: &ScopeIv) -> Option<ScopeValues> {
        let Mode::Tree { info, .. } = &self.mode else {
            return None;
        };
        let rep = s.report.as_ref()?;
        let mut values = Vec::new();
        let mut memory_bound = None;
        for n in &rep.report.nodes {
            let Some(v) = n.value.filter(|_| n.status.has_value()) else {
                continue;
            };
            if n.level == 1 && n.unit == Unit::PercentSlots {
                values.push((node_path(info.model, n.name), v / 100.0));
            }
            if MEMORY_BOUND.iter().any(|m| n.name.eq_ignore_ascii_case(m)) {
                memory_bound = Some(v / 100.0);
            }
        }
        let count = |names: &[&str]| {
            names
                .iter()
                .find_map(|e| s.readings.get(e).and_then(|r| r.value))
        };
        if let (Some(i), Some(c)) = (count(INSTRUCTIONS), count(CYCLES)) {
            if c > 0.0 {
                values.push(("IPC".to_string(), i / c));
            }
        }
        Some(ScopeValues {
            scope: s.label.as_ref().map_or(String::new(), |(_, v)| v.clone()),
            values,
            memory_bound,
        })
    }

    /// `tma_anomaly` of the findings of an interval (logged, too).
    fn anomaly_family(&self, scopes: &[ScopeIv], findings: &[Finding]) -> Family {
        let mut f = Family::new(
            "tma_anomaly",
            Kind::Gauge,
            "1 when the last interval's value of a level-1 node (or IPC) fell outside the \
             distribution --anomaly learnt for that cgroup (or CPU, or host); antagonist: the \
             co-located cgroup whose memory-bound share rose the most at the same moment.",
        );
        let key = scopes
            .first()
            .and_then(|s| s.label.as_ref().map(|(k, _)| *k));
        for x in findings {
            let mut labels = vec![("node", x.node.clone())];
            if let Some(k) = key {
                labels.push((k, x.scope.clone()));
            }
            if let Some(a) = &x.antagonist {
                labels.push(("antagonist", a.clone()));
            }
            f.push(labels, 1.0);
            self.log.info(
                "anomaly",
                &[
                    ("scope", &x.scope),
                    ("node", &x.node),
                    ("value", &format!("{:.4}", x.value)),
                    ("mean", &format!("{:.4}", x.mean)),
                    ("deviation", &format!("{:.4}", x.deviation)),
                    ("antagonist", &x.antagonist.as_deref().unwrap_or("none")),
                ],
            );
        }
        f
    }

    /// Tell the time of intervals with `clock` instead of the system clock.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// Intervals published so far (a replay's loops included: its counters go on growing
    /// from where they are when the recording starts again, they never go down).
    pub fn intervals(&self) -> u64 {
        self.intervals
    }

    fn pmu_available(&self) -> Option<bool> {
        match &self.mode {
            Mode::Waiting => None,
            Mode::Tree { .. } => Some(true),
            Mode::Software { .. } => Some(false),
        }
    }

    /// The families that do not depend on an interval.
    fn state_families(&self) -> Vec<Family> {
        let mut out = Vec::new();
        let mut build = Family::new(
            "tma_build",
            Kind::Info,
            "tma version, the CPU model of the tables (`none` without a PMU), the TMA version \
             of the tables and this machine's CPU.",
        );
        let (model, tables) = match &self.mode {
            Mode::Tree { info, .. } => (
                info.model.key.to_string(),
                info.model
                    .tma_version
                    .unwrap_or(info.model.source)
                    .to_string(),
            ),
            _ => ("none".to_string(), "none".to_string()),
        };
        build.push(
            vec![
                ("version", self.build.version.clone()),
                ("cpu_model", model),
                ("table_version", tables),
                ("cpu", self.build.cpu.clone()),
                (
                    "mode",
                    if self.replay { "replay" } else { "live" }.to_string(),
                ),
            ],
            1.0,
        );
        out.push(build);
        if let Some(avail) = self.pmu_available() {
            let mut a = Family::new(
                "tma_pmu_available",
                Kind::Gauge,
                "1 when hardware counters are counted (the TMA tree is exported), 0 when only \
                 software counts are.",
            );
            a.push(Vec::new(), if avail { 1.0 } else { 0.0 });
            out.push(a);
        }
        if let Mode::Software { reason, .. } = &self.mode {
            let mut r = Family::new(
                "tma_pmu",
                Kind::Info,
                "Why hardware counters are not available (only while tma_pmu_available is 0).",
            );
            r.push(vec![("reason", reason.clone())], 1.0);
            out.push(r);
        }
        out
    }

    /// The scopes of an interval, each with where its counts come from.
    fn scopes(&self, iv: &IntervalData<'_>) -> Vec<ScopeIv> {
        let plan = self.plan();
        if let (Some(raw), Some(plan), Some(followed)) = (iv.raw, plan, &self.hot_followed) {
            return self.hot_scopes(raw, plan, followed);
        }
        if let (Some(raw), Some(plan)) = (iv.raw, plan) {
            if let Some(Target::Cgroups(dirs)) = &self.target {
                return (0..dirs.len() as u32)
                    .map(|i| {
                        let key = ScopeKey::Cgroup(i);
                        let r = part(&|g| key.holds(g), raw, plan);
                        let label = self
                            .cgroup_labels
                            .get(i as usize)
                            .cloned()
                            .unwrap_or_else(|| dirs[i as usize].display().to_string());
                        let report = self.eval(&r);
                        ScopeIv {
                            label: Some(("cgroup", label)),
                            key,
                            readings: r,
                            report,
                            rest: false,
                        }
                    })
                    .collect();
            }
            if self.split == Split::PerCpu {
                let mut cpus: Vec<u32> = raw.groups.iter().filter_map(|g| g.cpu).collect();
                cpus.sort_unstable();
                cpus.dedup();
                if !cpus.is_empty() {
                    return cpus
                        .into_iter()
                        .map(|c| {
                            let key = ScopeKey::Cpu(c);
                            let r = part(&|g| key.holds(g), raw, plan);
                            let report = self.eval(&r);
                            ScopeIv {
                                label: Some(("cpu", c.to_string())),
                                key,
                                readings: r,
                                report,
                                rest: false,
                            }
                        })
                        .collect();
                }
            }
        }
        vec![ScopeIv {
            label: None,
            key: ScopeKey::Whole,
            readings: iv.readings.clone(),
            report: iv.report.cloned(),
            rest: false,
        }]
    }

    /// The scopes of a `--cgroup-top` interval counted with a PMU: each followed cgroup
    /// without the followed cgroups below it, and the rest of the system (never named).
    fn hot_scopes(
        &self,
        raw: &RawInterval,
        plan: &Plan,
        followed: &[(u32, String)],
    ) -> Vec<ScopeIv> {
        let whole: Vec<Interval> = followed
            .iter()
            .map(|(id, _)| part(&|g| g.cgroup == Some(*id), raw, plan))
            .collect();
        let below = |a: &str, b: &str| {
            a.is_empty() || b.strip_prefix(a).is_some_and(|r| r.starts_with('/'))
        };
        // The followed cgroups right below each one (no followed cgroup in between).
        let children = |i: usize| -> Vec<usize> {
            let a = &followed[i].1;
            (0..followed.len())
                .filter(|&j| j != i && below(a, &followed[j].1))
                .filter(|&j| {
                    !(0..followed.len()).any(|k| {
                        k != i
                            && k != j
                            && below(a, &followed[k].1)
                            && below(&followed[k].1, &followed[j].1)
                    })
                })
                .collect()
        };
        let mut out = Vec::with_capacity(followed.len() + 1);
        for (i, (id, path)) in followed.iter().enumerate() {
            let subs: Vec<&Interval> = children(i).into_iter().map(|j| &whole[j]).collect();
            let r = minus(&whole[i], &subs);
            let report = self.eval(&r);
            out.push(ScopeIv {
                label: Some((
                    "cgroup",
                    if path.is_empty() {
                        crate::hot::ROOT_LABEL.to_string()
                    } else {
                        path.clone()
                    },
                )),
                key: ScopeKey::Cgroup(*id),
                readings: r,
                report,
                rest: false,
            });
        }
        // The rest: the system less the followed cgroups that have no followed ancestor.
        let tops: Vec<&Interval> = (0..followed.len())
            .filter(|&j| {
                !(0..followed.len()).any(|k| k != j && below(&followed[k].1, &followed[j].1))
            })
            .map(|j| &whole[j])
            .collect();
        let system = part(&|g| g.cgroup.is_none(), raw, plan);
        let r = minus(&system, &tops);
        let report = self.eval(&r);
        out.push(ScopeIv {
            label: None,
            key: ScopeKey::Whole,
            readings: r,
            report,
            rest: true,
        });
        out
    }

    fn plan(&self) -> Option<&Plan> {
        match &self.mode {
            Mode::Tree { plan: Some(p), .. } => Some(p),
            Mode::Software { plan, .. } => Some(plan),
            _ => None,
        }
    }

    fn eval(&self, r: &Interval) -> Option<IntervalReport> {
        match &self.mode {
            Mode::Tree { eval, .. } => Some(eval.eval(r)),
            _ => None,
        }
    }

    fn add_total(&mut self, family: &'static str, scope: &ScopeLabel, key: &str, v: f64) -> f64 {
        let s = scope.as_ref().map_or(String::new(), |(_, v)| v.clone());
        let t = self
            .totals
            .entry((family, s, key.to_string()))
            .or_insert(0.0);
        if v.is_finite() && v > 0.0 {
            *t += v;
        }
        *t
    }

    /// The series of one scope (labels without the scope's own), counters as the growth of
    /// this interval; and the scope's weight for the top-N choice (its slots, else its
    /// task-clock).
    fn scope_parts(&self, s: &ScopeIv) -> (Vec<Part>, f64) {
        let mut parts = Vec::new();
        let mut weight = None;
        let (model, info) = match &self.mode {
            Mode::Tree { info, .. } => (Some(info.model), Some(info)),
            _ => (None, None),
        };
        let aliases: Vec<&str> = match &self.mode {
            Mode::Tree { plan: Some(p), .. } => p.aliases.iter().map(|(a, _)| a.as_str()).collect(),
            _ => Vec::new(),
        };
        if let (Some(rep), Some(model), Some(info)) = (&s.report, model, info) {
            let duration = (s.readings.end_s - s.readings.start_s).max(0.0);
            let consts = info.request.constants((duration > 0.0).then_some(duration));
            let slots = fleet_slots(model, &s.readings, &consts);
            for n in &rep.report.nodes {
                let Some(v) = n.value.filter(|_| n.status.has_value()) else {
                    continue;
                };
                if !matches!(n.unit, Unit::PercentSlots | Unit::Percent) {
                    continue;
                }
                let mut labels = vec![
                    ("node", node_path(model, n.name)),
                    ("level", n.level.to_string()),
                ];
                // One core type's tree of a hybrid part (or their merged view).
                labels.extend(info.core_type.map(|t| ("core_type", t.to_string())));
                if let Some(share) = n.counted_share {
                    parts.push(Part::gauge(F_COUNTED, labels.clone(), share));
                }
                if let (Some(total), Unit::PercentSlots) = (slots, n.unit) {
                    parts.push(Part::counter(F_SLOTS, labels.clone(), v / 100.0 * total));
                }
                parts.push(Part::gauge(F_NODE, labels, v / 100.0));
            }
            if let Some(total) = slots {
                parts.push(Part::counter(
                    F_SLOTS,
                    vec![("node", "total".into()), ("level", "0".into())],
                    total,
                ));
                weight = Some(total);
            }
            for (family, names) in [(F_CYCLES, CYCLES), (F_INSTRUCTIONS, INSTRUCTIONS)] {
                let value = names
                    .iter()
                    .find_map(|e| s.readings.get(e).and_then(|r| r.value));
                if let Some(v) = value.filter(|v| v.is_finite() && *v >= 0.0) {
                    parts.push(Part::counter(family, Vec::new(), v));
                }
            }
            if let Some(b) = &rep.report.bottleneck.node {
                parts.push(Part::gauge(
                    F_BOTTLENECK,
                    vec![("node", node_path(model, b))],
                    1.0,
                ));
            }
            for m in &rep.report.metrics {
                if let Some(v) = m.value.filter(|_| m.status.has_value()) {
                    parts.push(Part::gauge(
                        F_METRIC,
                        vec![("name", m.short_name.to_string())],
                        v,
                    ));
                }
            }
        }
        for r in s
            .readings
            .readings
            .iter()
            .filter(|r| r.cpu.is_none() && r.tid.is_none())
        {
            let Some(v) = r.value else { continue };
            if let Some(k) = SOFTWARE
                .iter()
                .position(|(e, ..)| e.name().eq_ignore_ascii_case(&r.event))
            {
                if SOFTWARE[k].0 == SoftwareEvent::TaskClock && weight.is_none() {
                    weight = Some(v);
                }
                parts.push(Part::counter(F_SOFTWARE + k, Vec::new(), v * SOFTWARE[k].3));
                continue;
            }
            if model.is_none()
                || SoftwareEvent::parse(&r.event).is_some()
                || r.event == "duration_time"
                || aliases.contains(&r.event.as_str())
            {
                continue;
            }
            parts.push(Part::counter(F_EVENT, vec![("event", r.event.clone())], v));
        }
        (parts, weight.filter(|w| w.is_finite()).unwrap_or(0.0))
    }

    /// Put `parts` of `scope` into `families`: gauges as they are, counters as running
    /// totals (the fleet counters stamped with `at_ms`).
    fn push_parts(
        &mut self,
        families: &mut [Family],
        scope: &ScopeLabel,
        parts: Vec<Part>,
        at_ms: i64,
    ) {
        for p in parts {
            let mut labels = p.labels;
            let value = if p.counter {
                let key = total_key(&labels);
                self.add_total(families[p.family].base, scope, &key, p.value)
            } else {
                p.value
            };
            if let Some(s) = scope {
                labels.push(s.clone());
            }
            if matches!(p.family, F_SLOTS | F_CYCLES | F_INSTRUCTIONS) {
                families[p.family].push_at(labels, value, at_ms);
            } else {
                families[p.family].push(labels, value);
            }
        }
    }

    fn families(&mut self, iv: &IntervalData<'_>, t0: Instant) -> Vec<Family> {
        let scopes = self.scopes(iv);
        let parts: Vec<(Vec<Part>, f64)> = scopes.iter().map(|s| self.scope_parts(s)).collect();
        self.families_of(iv, scopes, parts, false, t0)
    }

    /// The families of an interval of several trees (the core types of a hybrid part and
    /// their merged view): each tree's series with its `core_type` label, per scope.
    fn tree_families(&mut self, t0: Instant) -> Vec<Family> {
        let pending = std::mem::take(&mut self.pending);
        let mut merged: Vec<(ScopeIv, Vec<Part>, f64)> = Vec::new();
        for (k, p) in pending.iter().enumerate() {
            let Some((raw, readings, report)) = p else {
                continue;
            };
            let iv = IntervalData {
                raw: raw.as_ref(),
                readings,
                report: report.as_ref(),
            };
            std::mem::swap(&mut self.mode, &mut self.trees[k]);
            let label = match &self.mode {
                Mode::Tree { info, .. } => info.core_type.map(str::to_string),
                _ => None,
            }
            .unwrap_or_else(|| format!("tree{k}"));
            let scopes = self.scopes(&iv);
            let parts: Vec<(Vec<Part>, f64)> = scopes.iter().map(|s| self.scope_parts(s)).collect();
            std::mem::swap(&mut self.mode, &mut self.trees[k]);
            for (s, (mut p, w)) in scopes.into_iter().zip(parts) {
                for part in &mut p {
                    if !part.labels.iter().any(|(k, _)| *k == "core_type") {
                        part.labels.push(("core_type", label.clone()));
                    }
                }
                match merged.iter_mut().find(|m| m.0.label == s.label) {
                    Some(m) => {
                        m.1.extend(p);
                        m.2 += w;
                    }
                    None => merged.push((s, p, w)),
                }
            }
        }
        // Split per cgroup or CPU: the merged view (no raw counts to split) is left out.
        if merged.iter().any(|m| m.0.label.is_some()) {
            merged.retain(|m| m.0.label.is_some());
        }
        // A core type that counted nothing in this interval (no task ran on it) keeps its
        // counters' series, grown by nothing.
        for (s, p, _) in &mut merged {
            for (_, prev) in self.tree_counters.iter().filter(|(l, _)| *l == s.label) {
                if !p
                    .iter()
                    .any(|x| x.counter && x.family == prev.family && x.labels == prev.labels)
                {
                    p.push(Part {
                        value: 0.0,
                        ..prev.clone()
                    });
                }
            }
        }
        self.tree_counters = merged
            .iter()
            .flat_map(|(s, p, _)| {
                p.iter()
                    .filter(|x| x.counter)
                    .map(|x| (s.label.clone(), x.clone()))
            })
            .collect();
        let empty = Interval {
            start_s: 0.0,
            end_s: 0.0,
            readings: Vec::new(),
            printed: Vec::new(),
        };
        let first = pending.iter().flatten().next().map_or(&empty, |p| &p.1);
        let iv = IntervalData {
            raw: None,
            readings: first,
            report: None,
        };
        let (scopes, parts): (Vec<ScopeIv>, Vec<(Vec<Part>, f64)>) =
            merged.into_iter().map(|(s, p, w)| (s, (p, w))).unzip();
        let out = self.families_of(&iv, scopes, parts, true, t0);
        self.pending = vec![None; pending.len()];
        out
    }

    /// The families of an interval's `scopes` and their `parts`; `multi`: several trees.
    fn families_of(
        &mut self,
        iv: &IntervalData<'_>,
        scopes: Vec<ScopeIv>,
        parts: Vec<(Vec<Part>, f64)>,
        multi: bool,
        t0: Instant,
    ) -> Vec<Family> {
        let at_ms = (self.clock)()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut out = self.state_families();
        let mut len = Family::new(
            "tma_interval_seconds",
            Kind::Gauge,
            "Length of the last counted interval, seconds.",
        );
        len.push(
            Vec::new(),
            (iv.readings.end_s - iv.readings.start_s).max(0.0),
        );
        let mut n = Family::new(
            "tma_intervals",
            Kind::Counter,
            "Intervals counted (or replayed).",
        );
        n.push(Vec::new(), self.intervals as f64);
        let mut at = Family::new(
            "tma_last_interval_timestamp_seconds",
            Kind::Gauge,
            "Unix time the last interval was published.",
        );
        at.push(Vec::new(), (at_ms as f64) / 1e3);
        out.extend([len, n, at]);

        let hot_pmu = self.hot_followed.is_some();
        let kind = if hot_pmu {
            ScopeKey::Cgroup(0)
        } else {
            scopes.first().map_or(ScopeKey::Whole, |s| s.key)
        };
        let split = !matches!(kind, ScopeKey::Whole);
        if self.anomaly.is_some() && !multi {
            let values: Vec<ScopeValues> = scopes
                .iter()
                .filter(|s| !s.rest)
                .filter_map(|s| self.anomaly_values(s))
                .collect();
            let findings = self
                .anomaly
                .as_mut()
                .map_or_else(Vec::new, |d| d.observe(&values));
            out.push(self.anomaly_family(&scopes, &findings));
        }
        // Series outside the scopes: those above, the evaluation time, the left-out count,
        // and what a scrape adds (one per HTTP status, the scrape time).
        let fixed = count(&out) + 1 + usize::from(split) + crate::http::STATUSES.len() + 1;
        let budget = self.bounds.series_budget;
        // The hot cgroups of the cgroup tree take what the scopes leave (at least their own
        // gauges and the `other` bucket).
        let hot_min = if self.hot.is_some() { 3 } else { 0 };
        let avail = budget.saturating_sub(fixed + hot_min);
        // The cgroup tree's CPU time (read before naming: with a PMU, a followed cgroup
        // that has left the tree is not named, its last counts go to `other`).
        let mut charged = Vec::new();
        if let Some(hot) = self.hot.as_mut() {
            match hot.scan() {
                Ok(c) => charged = c,
                Err(e) => {
                    if !self.warned_hot {
                        self.warned_hot = true;
                        self.log.warn("cgroup_tree_unreadable", &[("error", &e)]);
                    }
                }
            }
        }
        let scanned = self.hot.is_some() && !charged.is_empty();
        let live: std::collections::HashSet<&str> =
            charged.iter().map(|(p, _)| p.as_str()).collect();
        let in_tree = |s: &ScopeIv| {
            s.label
                .as_ref()
                .is_some_and(|(_, l)| live.contains(l.as_str()))
        };
        let nameable = |s: &ScopeIv| !s.rest && (!hot_pmu || !scanned || in_tree(s));
        // The scopes that may be named (never the rest of a `--cgroup-top` counted with a
        // PMU), busiest first; the others after them.
        let mut order: Vec<usize> = (0..scopes.len())
            .filter(|&i| nameable(&scopes[i]))
            .collect();
        let n = order.len();
        order.sort_by(|&a, &b| parts[b].1.total_cmp(&parts[a].1).then(a.cmp(&b)));
        order.extend((0..scopes.len()).filter(|&i| !nameable(&scopes[i])));
        let cap = match kind {
            ScopeKey::Cgroup(_) => self.bounds.cgroup_top.unwrap_or(n).min(n),
            _ => n,
        };
        let biggest = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
        // With a PMU and the cgroup tree, each named cgroup has its CPU time series too.
        let per = usize::from(hot_pmu && self.hot.is_some());
        let weights: Vec<f64> = parts.iter().map(|p| p.1).collect();
        let mut keep = if split { cap } else { n };
        while split && keep > 0 {
            let need: usize = order[..keep]
                .iter()
                .map(|&i| parts[i].0.len() + per)
                .sum::<usize>()
                + if keep < n || hot_pmu { biggest } else { 0 };
            if need <= avail {
                break;
            }
            keep -= 1;
        }
        // How many cgroups the budget would leave room for (the next choice of a
        // `--cgroup-top` counted with a PMU).
        let room_for = avail.saturating_sub(biggest) / (biggest + per).max(1);
        let mut fams = scope_families();
        // The growth `other` takes: that of the folded scopes, and that of the scopes named
        // now but not in the last exposition (their series start here, and a series' first
        // sample adds nothing to a rate: the growth would be lost). So, from one exposition
        // to the next, the growth of the series present in both adds up to the growth of
        // the whole. Every scope's own totals go on all the same.
        let mut other_incs: Vec<Part> = Vec::new();
        let mut add_other = |c: &Part| match other_incs
            .iter_mut()
            .find(|o| o.family == c.family && o.labels == c.labels)
        {
            Some(o) => o.value += c.value.max(0.0),
            None => other_incs.push(Part {
                value: c.value.max(0.0),
                ..c.clone()
            }),
        };
        let mut parts: Vec<Option<Vec<Part>>> = parts.into_iter().map(|p| Some(p.0)).collect();
        let mut named = std::collections::HashSet::new();
        for (rank, &i) in order.iter().enumerate() {
            let p = parts[i].take().unwrap_or_default();
            let label = &scopes[i].label;
            let shown = rank < keep;
            let name = label.as_ref().map_or(String::new(), |(_, v)| v.clone());
            let continued = self.named.as_ref().is_none_or(|prev| prev.contains(&name));
            for c in p.iter().filter(|c| c.counter) {
                // With zero growth, a counter seen only in other scopes still has its
                // series in `other`.
                add_other(&Part {
                    value: if split && !(shown && continued) {
                        c.value
                    } else {
                        0.0
                    },
                    ..c.clone()
                });
            }
            if shown {
                named.insert(name);
                self.push_parts(&mut fams, label, p, at_ms);
                continue;
            }
            if scopes[i].rest {
                continue;
            }
            for c in p.into_iter().filter(|c| c.counter) {
                let key = total_key(&c.labels);
                let base = fams[c.family].base;
                self.add_total(base, label, &key, c.value);
            }
        }
        let shown_names = named.clone();
        if split {
            self.named = Some(named);
        }
        let left_out = n - keep.min(n);
        if split {
            let label: ScopeLabel = match kind {
                ScopeKey::Cpu(_) => Some(("cpu", "other".into())),
                _ => Some(("cgroup", "other".into())),
            };
            // The gauges of `other` from the summed counts of the folded scopes.
            let folded: Vec<ScopeKey> = order[keep..].iter().map(|&i| scopes[i].key).collect();
            let mut gauges = Vec::new();
            if hot_pmu {
                let rs: Vec<&Interval> =
                    order[keep..].iter().map(|&i| &scopes[i].readings).collect();
                if let Some(r) = plus(&rs) {
                    let report = self.eval(&r);
                    let other = ScopeIv {
                        label: label.clone(),
                        key: ScopeKey::Whole,
                        readings: r,
                        report,
                        rest: false,
                    };
                    gauges = self.scope_parts(&other).0;
                    gauges.retain(|p| !p.counter);
                }
            } else if let (Some(raw), Some(plan), false) = (iv.raw, self.plan(), folded.is_empty())
            {
                let r = part(&|g| folded.iter().any(|k| k.holds(g)), raw, plan);
                let report = self.eval(&r);
                let other = ScopeIv {
                    label: label.clone(),
                    key: ScopeKey::Whole,
                    readings: r,
                    report,
                    rest: false,
                };
                gauges = self.scope_parts(&other).0;
                gauges.retain(|p| !p.counter);
            }
            gauges.extend(other_incs);
            self.push_parts(&mut fams, &label, gauges, at_ms);
        }
        // With the cgroup tree, its refresh says how many cgroups are left out.
        if split && !(hot_pmu && self.hot.is_some()) {
            let (base, help) = match kind {
                ScopeKey::Cpu(_) => (
                    "tma_cpus_left_out",
                    "CPUs counted in cpu=\"other\" in the last interval (the series budget \
                     leaves no room for each).",
                ),
                _ => (
                    "tma_cgroups_left_out",
                    "Cgroups counted in cgroup=\"other\" in the last interval (not among the \
                     --cgroup-top busiest, or beyond the series budget).",
                ),
            };
            let mut f = Family::new(base, Kind::Gauge, help);
            f.push(Vec::new(), left_out as f64);
            out.push(f);
        }
        out.extend(fams);
        // Within the budget whatever the request: the least needed families go first.
        let mut dropped = Vec::new();
        for base in ["tma_event", "tma_node_counted_ratio", "tma_metric"] {
            let used = count(&out) + 1 + crate::http::STATUSES.len() + 1 + hot_min;
            if used <= budget {
                break;
            }
            if let Some(f) = out.iter_mut().find(|f| f.base == base && !f.is_empty()) {
                f.samples.clear();
                dropped.push(base);
            }
        }
        if !dropped.is_empty() && !self.warned_budget {
            self.warned_budget = true;
            self.log.warn(
                "series_budget_exceeded",
                &[
                    ("budget", &budget),
                    ("dropped", &dropped.join(",")),
                    (
                        "fix",
                        &"raise --series-budget, or export fewer nodes (-l, --nodes) and \
                          metrics (-m)",
                    ),
                ],
            );
        }
        if let (Some(hot), true) = (self.hot.as_mut(), scanned) {
            let room = budget.saturating_sub(count(&out) + 1 + crate::http::STATUSES.len() + 1 + 2);
            let top = self.bounds.cgroup_top.unwrap_or(usize::MAX);
            let naming = if hot_pmu {
                Naming::These(&shown_names)
            } else {
                Naming::Top(top)
            };
            out.extend(hot.families(&charged, naming, room));
        }
        if hot_pmu {
            let measured: Vec<(String, f64)> = scopes
                .iter()
                .zip(&weights)
                .filter(|(s, _)| !s.rest)
                .filter_map(|(s, w)| Some((s.label.as_ref()?.1.clone(), *w)))
                .collect();
            let top = self.bounds.cgroup_top.unwrap_or(usize::MAX).min(room_for);
            let rest: f64 = scopes
                .iter()
                .zip(&weights)
                .filter(|(s, _)| s.rest)
                .map(|(_, w)| w)
                .sum();
            self.hot_next = choose_hot(&measured, &charged, rest, top);
            // The running totals of cgroups that left the tree go with them.
            let live: std::collections::HashSet<&str> = match &self.hot {
                Some(_) => charged.iter().map(|(p, _)| p.as_str()).collect(),
                None => measured.iter().map(|(p, _)| p.as_str()).collect(),
            };
            self.totals.retain(|(_, scope, _), _| {
                scope.is_empty() || scope == "other" || live.contains(scope.as_str())
            });
            self.hot_followed = None;
        }
        let mut eval = Family::new(
            "tma_evaluation_duration_seconds",
            Kind::Gauge,
            "Time spent turning the last interval into these series, seconds.",
        );
        eval.push(Vec::new(), t0.elapsed().as_secs_f64());
        out.push(eval);
        out
    }
}

/// The `top` cgroups to count next: by their slots (cycles on AMD; task-clock without a
/// tree) in the last interval: measured for the followed cgroups (`measured`), estimated
/// for the others from their CPU time (`charged`, microseconds, from cgroupfs) at the rate
/// of slots per CPU microsecond of all of them together (`rest`: the system's slots less
/// the followed cgroups'), else of the followed ones. The root (its own tasks) and cgroups
/// that used no CPU time are not chosen.
fn choose_hot(
    measured: &[(String, f64)],
    charged: &[(String, u64)],
    rest: f64,
    top: usize,
) -> Vec<String> {
    let cpu: std::collections::HashMap<&str, u64> =
        charged.iter().map(|(p, u)| (p.as_str(), *u)).collect();
    let followed = |p: &str| measured.iter().any(|(q, _)| q == p);
    let rate = |w: f64, t: f64| (w > 0.0 && t > 0.0).then(|| w / t);
    let rest_time: u64 = charged
        .iter()
        .filter(|(p, _)| !followed(p))
        .map(|(_, u)| u)
        .sum();
    let (mut w, mut t) = (0.0, 0.0);
    for (p, weight) in measured {
        if let Some(&u) = cpu.get(p.as_str()) {
            w += weight;
            t += u as f64;
        }
    }
    let rate = rate(rest, rest_time as f64).or(rate(w, t));
    let mut scored: Vec<(f64, String)> = Vec::new();
    let mut add = |p: &str, score: f64| {
        if !p.is_empty() && score > 0.0 && !scored.iter().any(|(_, q)| q == p) {
            scored.push((score, p.to_string()));
        }
    };
    match rate {
        Some(rate) => {
            for (p, weight) in measured {
                // Still in the tree (or no tree to tell).
                if charged.is_empty() || cpu.contains_key(p.as_str()) {
                    add(p, *weight);
                }
            }
            for (p, u) in charged {
                if !followed(p) {
                    add(p, *u as f64 * rate);
                }
            }
        }
        // Nothing measured yet to convert by: CPU time alone.
        None => {
            for (p, u) in charged {
                add(p, *u as f64);
            }
            if charged.is_empty() {
                for (p, weight) in measured {
                    add(p, *weight);
                }
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.into_iter().take(top).map(|(_, p)| p).collect()
}

/// Where a scope's counts come from in the raw interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScopeKey {
    Whole,
    Cgroup(u32),
    Cpu(u32),
}

impl ScopeKey {
    fn holds(self, g: &tma_perf::backend::GroupReading) -> bool {
        match self {
            ScopeKey::Whole => true,
            ScopeKey::Cgroup(i) => g.cgroup == Some(i),
            ScopeKey::Cpu(c) => g.cpu == Some(c),
        }
    }
}

/// One scope of an interval.
struct ScopeIv {
    label: ScopeLabel,
    key: ScopeKey,
    readings: Interval,
    report: Option<IntervalReport>,
    /// `--cgroup-top` with a PMU: the counts of no followed cgroup (always in `other`).
    rest: bool,
}

/// `a`'s readings less the sum of `subs`' (readings of one plan, in the same order), each
/// value at least 0: a counted cgroup less the counted cgroups below it, the system less
/// the counted cgroups. Counted as the least counted of them.
fn minus(a: &Interval, subs: &[&Interval]) -> Interval {
    let mut out = a.clone();
    for (k, r) in out.readings.iter_mut().enumerate() {
        for b in subs {
            let Some(x) = b.readings.get(k).filter(|x| x.event == r.event) else {
                continue;
            };
            if let (Some(v), Some(w)) = (r.value, x.value) {
                r.value = Some((v - w).max(0.0));
            }
            if let (Some(v), Some(w)) = (r.raw, x.raw) {
                r.raw = Some(v.saturating_sub(w));
            }
            if let (Some(s), Some(t)) = (r.counted_share, x.counted_share) {
                r.counted_share = Some(s.min(t));
            }
        }
    }
    out
}

/// The sum of `parts`' readings (one plan, same order): the scopes folded into `other`.
fn plus(parts: &[&Interval]) -> Option<Interval> {
    let (first, rest) = parts.split_first()?;
    let mut out = (*first).clone();
    for (k, r) in out.readings.iter_mut().enumerate() {
        for b in rest {
            let Some(x) = b.readings.get(k).filter(|x| x.event == r.event) else {
                continue;
            };
            r.value = match (r.value, x.value) {
                (Some(v), Some(w)) => Some(v + w),
                (v, w) => v.or(w),
            };
            if let (Some(v), Some(w)) = (r.raw, x.raw) {
                r.raw = Some(v.saturating_add(w));
            }
            if let (Some(e), Some(f)) = (r.time_enabled_ns, x.time_enabled_ns) {
                r.time_enabled_ns = Some(e.saturating_add(f));
            }
            if let (Some(e), Some(f)) = (r.time_running_ns, x.time_running_ns) {
                r.time_running_ns = Some(e.saturating_add(f));
            }
            if let (Some(e), Some(f)) = (r.time_enabled_ns, r.time_running_ns) {
                r.counted_share = Some(if e == 0 {
                    1.0
                } else {
                    (f as f64 / e as f64).min(1.0)
                });
            }
            if r.value.is_some() {
                r.status = tma_perf::ReadingStatus::Counted;
            }
        }
    }
    Some(out)
}

/// The readings of the groups of `raw` that `keep` keeps.
fn part(
    keep: &dyn Fn(&tma_perf::backend::GroupReading) -> bool,
    raw: &RawInterval,
    plan: &Plan,
) -> Interval {
    let sub = RawInterval {
        start_s: raw.start_s,
        end_s: raw.end_s,
        groups: raw.groups.iter().filter(|g| keep(g)).cloned().collect(),
    };
    Measurement::interval_readings(plan, &sub, false)
}

/// One series of a scope before its scope label: a gauge's value, or a counter's growth.
#[derive(Debug, Clone)]
struct Part {
    family: usize,
    labels: Vec<(&'static str, String)>,
    value: f64,
    counter: bool,
}

impl Part {
    fn gauge(family: usize, labels: Vec<(&'static str, String)>, value: f64) -> Part {
        Part {
            family,
            labels,
            value,
            counter: false,
        }
    }
    fn counter(family: usize, labels: Vec<(&'static str, String)>, value: f64) -> Part {
        Part {
            family,
            labels,
            value,
            counter: true,
        }
    }
}

// The families of each scope, in exposition order.
const F_NODE: usize = 0;
const F_COUNTED: usize = 1;
const F_BOTTLENECK: usize = 2;
const F_METRIC: usize = 3;
const F_SLOTS: usize = 4;
const F_CYCLES: usize = 5;
const F_INSTRUCTIONS: usize = 6;
const F_EVENT: usize = 7;
const F_SOFTWARE: usize = 8;

fn scope_families() -> Vec<Family> {
    let mut v = vec![
        Family::new(
            "tma_node_ratio",
            Kind::Gauge,
            "Share of the pipeline slots (or cycles) of a TMA node in the last interval, 0..1; \
             node is the path from level 1, dot-separated. For one host; to add up hosts, \
             cgroups or time, use tma_slots_total. On a hybrid part, core_type names each \
             core type's tree (P-core, E-core...), and core_type=\"merged\" is the core \
             types' trees weighted by their cycles in the interval (a gauge only).",
        ),
        Family::new(
            "tma_node_counted_ratio",
            Kind::Gauge,
            "Smallest share of the interval during which the node's events were on a counter \
             (multiplexing), 0..1.",
        ),
        Family::new(
            "tma_bottleneck",
            Kind::Info,
            "The bottleneck node of the last interval (the deepest node chosen from level 1).",
        ),
        Family::new(
            "tma_metric",
            Kind::Gauge,
            "A selected helper metric (IPC, CPI...) of the last interval, in its own unit.",
        ),
        Family::new(
            "tma_slots",
            Kind::Counter,
            "Pipeline slots charged to each TMA node measured in slots (node=\"total\", \
             level 0: all slots), scaled for multiplexing, stamped with the end of the \
             interval. A node's share over any window and aggregation: its rate over the \
             rate of node=\"total\". On a hybrid part, per core type (core_type label; \
             no merged series: the core types' counters add up).",
        ),
        Family::new(
            "tma_cycles",
            Kind::Counter,
            "Unhalted core cycles, scaled for multiplexing, stamped with the end of the \
             interval.",
        ),
        Family::new(
            "tma_instructions",
            Kind::Counter,
            "Instructions retired, scaled for multiplexing, stamped with the end of the \
             interval (IPC: its rate over the rate of tma_cycles_total).",
        ),
        Family::new(
            "tma_event",
            Kind::Counter,
            "Hardware event counts, scaled for multiplexing.",
        ),
    ];
    v.extend(
        SOFTWARE
            .iter()
            .map(|(_, base, help, _)| Family::new(base, Kind::Counter, help)),
    );
    v
}

/// The key of a counter's running total: its label values.
fn total_key(labels: &[(&'static str, String)]) -> String {
    labels
        .iter()
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

/// The number of samples of `families`.
fn count(families: &[Family]) -> usize {
    families.iter().map(Family::len).sum()
}

/// The cycles and instructions events, by the names the tables and perf use.
const CYCLES: &[&str] = &[
    "CPU_CLK_UNHALTED.THREAD",
    // Intel E-cores (Atom).
    "CPU_CLK_UNHALTED.CORE",
    "ls_not_halted_cyc",
    "CPU_CYCLES",
    "cycles",
    "cpu-cycles",
];
const INSTRUCTIONS: &[&str] = &[
    "INST_RETIRED.ANY",
    "ex_ret_instr",
    "INST_RETIRED",
    "instructions",
];

/// The memory-bound node of the trees (Intel level 2, AMD level 2).
const MEMORY_BOUND: &[&str] = &["Memory_Bound", "backend_bound_memory"];

/// The model's metric of the slots the level-1 nodes share.
const SLOTS_METRICS: &[&str] = &["Info_Thread_SLOTS", "total_dispatch_slots"];

/// The pipeline slots of one scope's interval, by the model's own slots metric; `None`
/// when the model names none or the interval lacks its events.
fn fleet_slots(
    model: &tma_catalog::Model,
    readings: &Interval,
    consts: &tma_metrics::Constants,
) -> Option<f64> {
    let values = ReadingValues(readings);
    SLOTS_METRICS.iter().find_map(|name| {
        tma_metrics::evaluate_metric(model, name, &values, consts)
            .ok()
            .flatten()
            .and_then(|(v, _)| v)
            .filter(|v| v.is_finite() && *v >= 0.0)
    })
}

/// [`tma_metrics::Values`] over one scope's readings.
struct ReadingValues<'a>(&'a Interval);

impl tma_metrics::Values for ReadingValues<'_> {
    fn event(&self, id: &str) -> Option<f64> {
        self.0.get(id).and_then(|r| r.value)
    }
    fn counted_share(&self, id: &str) -> Option<f64> {
        self.0.get(id).and_then(|r| r.counted_share)
    }
}

/// `Backend_Bound.Memory_Bound`: the node's path from level 1.
pub fn node_path(model: &tma_catalog::Model, name: &str) -> String {
    let mut parts = vec![name];
    let mut cur = model.node(name);
    while let Some(p) = cur.and_then(|n| n.parent) {
        if parts.len() > 16 || parts.contains(&p) {
            break;
        }
        parts.push(p);
        cur = model.node(p);
    }
    parts.reverse();
    parts.join(".")
}

impl IntervalSink for Collector {
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        match start {
            Start::Tree { info, plan, target } => {
                match TreeEval::new(info) {
                    Ok(eval) => {
                        self.mode = Mode::Tree {
                            info: Box::new(info.clone()),
                            eval: Box::new(eval),
                            plan: plan.cloned(),
                        };
                    }
                    Err(e) => {
                        // The engine compiled this very request already; not expected.
                        self.log.error("tree_unavailable", &[("error", &e)]);
                    }
                }
                self.target = target.cloned();
                self.log.info(
                    "counting",
                    &[
                        ("cpu_model", &info.model.key),
                        ("source", &info.source),
                        // Not `level`: that key is the log line's own level.
                        ("tma_level", &info.request.level),
                    ],
                );
            }
            Start::Software {
                plan,
                target,
                reason,
                ..
            } => {
                let reason = reason
                    .unwrap_or("hardware counters were not counted")
                    .to_string();
                // Logged once: a replay starts its recording again without a new start.
                self.log.warn(
                    "pmu_unavailable",
                    &[
                        ("reason", &reason),
                        ("exported", &"software counts only, no TMA tree"),
                        (
                            "fix",
                            &"enable the virtual PMU in the hypervisor or use bare metal; \
                              `tma doctor` says what to change",
                        ),
                    ],
                );
                self.mode = Mode::Software {
                    plan: plan.clone(),
                    reason,
                };
                self.target = target.cloned();
            }
        }
        Ok(())
    }

    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        let t0 = Instant::now();
        self.intervals += 1;
        let families = self.families(&iv, t0);
        self.shared.publish(families, true);
        Ok(())
    }

    /// Several trees (hybrid): one exposition per interval with every tree's series, each
    /// marked with its `core_type`.
    fn start_trees(&mut self, trees: &[Start<'_>]) -> Result<(), StatError> {
        self.trees.clear();
        for (k, st) in trees.iter().enumerate() {
            if k == 0 {
                // The first tree's model names the tables (tma_build), and is logged.
                self.start(*st)?;
            }
            self.trees.push(match st {
                Start::Tree { info, plan, .. } => Mode::Tree {
                    info: Box::new((*info).clone()),
                    eval: Box::new(TreeEval::new(info)?),
                    plan: plan.cloned(),
                },
                Start::Software { plan, reason, .. } => Mode::Software {
                    plan: (*plan).clone(),
                    reason: reason.unwrap_or_default().to_string(),
                },
            });
        }
        self.pending = vec![None; self.trees.len()];
        Ok(())
    }

    fn tree_interval(
        &mut self,
        tree: usize,
        start: Start<'_>,
        iv: IntervalData<'_>,
    ) -> Result<(), StatError> {
        if self.trees.is_empty() {
            self.start(start)?;
            return self.interval(iv);
        }
        let Some(slot) = self.pending.get_mut(tree) else {
            return Ok(());
        };
        *slot = Some((iv.raw.cloned(), iv.readings.clone(), iv.report.cloned()));
        if tree + 1 == self.trees.len() {
            let t0 = Instant::now();
            self.intervals += 1;
            let families = self.tree_families(t0);
            self.shared.publish(families, true);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_perf::backend::GroupReading;
    use tma_stat::eval::Request;

    /// Zen 4 level-1 counts of one scope: (frontend, backend, retiring, dispatched) shares of
    /// the 6e9 slots of 1e9 cycles; bad speculation is dispatched - retiring.
    fn zen4_value(ev: &str, fe: f64, be: f64, ret: f64, disp: f64) -> u64 {
        let slots = 6e9;
        (match ev {
            "ls_not_halted_cyc" => 1e9,
            "de_no_dispatch_per_slot.no_ops_from_frontend" => fe * slots,
            "de_no_dispatch_per_slot.backend_stalls" => be * slots,
            "ex_ret_ops" => ret * slots,
            "de_src_op_disp.all" => disp * slots,
            _ => 0.0,
        }) as u64
    }

    /// The run information and counting plan of `cpu`'s tree to `level`.
    fn tree_of(cpu: &str, level: u8) -> (RunInfo, tma_perf::plan::Plan) {
        let model = tma_catalog::by_name(cpu).unwrap();
        let request = Request {
            level,
            nodes: Vec::new(),
            topology: None,
            metrics: Vec::new(),
            bottlenecks: Vec::new(),
        };
        let plan =
            tma_stat::groups::counting_plan(model, &request.selection(), &[], false).unwrap();
        let info = RunInfo {
            model,
            cpu_source: "test".into(),
            source: "test".into(),
            interval_mode: true,
            request,
            command: None,
            event_map: Vec::new(),
            scope: None,
            core_type: None,
        };
        (info, plan)
    }

    /// Feed one interval of two scopes (labelled by `label`) to a collector; the exposition.
    fn two_scopes(split: Split, target: Target, cgroup: bool) -> String {
        let (info, plan) = tree_of("zen4", 1);
        let shared = Arc::new(Shared::default());
        let mut c = Collector::new(
            Arc::clone(&shared),
            Arc::new(Log::new(Box::new(std::io::sink()))),
            Build {
                version: "t".into(),
                cpu: "c".into(),
            },
            split,
            vec!["system.slice/a.service".into(), "b".into()],
            false,
        );
        c.start(Start::Tree {
            info: &info,
            plan: Some(&plan),
            target: Some(&target),
        })
        .unwrap();
        let mut groups = Vec::new();
        // Scope 0: backend 30%; scope 1: backend 50%. Each on CPUs 0 and 1 (cgroups) or on
        // its own CPU (per-CPU split).
        for (k, (fe, be, ret, disp)) in [(0.2, 0.3, 0.4, 0.5), (0.1, 0.5, 0.3, 0.4)]
            .into_iter()
            .enumerate()
        {
            let cpus: Vec<u32> = if cgroup { vec![0, 1] } else { vec![k as u32] };
            for &cpu in &cpus {
                for (gi, g) in plan.groups.iter().enumerate() {
                    groups.push(GroupReading {
                        group: gi,
                        cpu: Some(cpu),
                        tid: None,
                        cgroup: cgroup.then_some(k as u32),
                        time_enabled_ns: 1_000_000_000,
                        time_running_ns: 1_000_000_000,
                        values: g
                            .events
                            .iter()
                            .map(|e| zen4_value(&e.name, fe, be, ret, disp) / cpus.len() as u64)
                            .collect(),
                    });
                }
            }
        }
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups,
        };
        let agg = Measurement::interval_readings(&plan, &raw, false);
        c.interval(IntervalData {
            raw: Some(&raw),
            readings: &agg,
            report: None,
        })
        .unwrap();
        shared.render(Format::Text)
    }

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn a_cgroup_target_gives_one_tree_per_cgroup() {
        let target = Target::Cgroups(vec!["/cg/a".into(), "/cg/b".into()]);
        let text = two_scopes(Split::Target, target, true);
        let a = "cgroup=\"system.slice/a.service\"";
        let be = |cg: &str| {
            value(
                &text,
                &format!("tma_node_ratio{{node=\"backend_bound\",level=\"1\",{cg}}}"),
            )
        };
        assert!((be(a) - 0.3).abs() < 1e-12);
        assert!((be("cgroup=\"b\"") - 0.5).abs() < 1e-12);
        let fe = value(
            &text,
            &format!("tma_node_ratio{{node=\"frontend_bound\",level=\"1\",{a}}}"),
        );
        assert!((fe - 0.2).abs() < 1e-12);
        assert_eq!(
            value(
                &text,
                "tma_bottleneck_info{node=\"backend_bound\",cgroup=\"b\"}"
            ),
            1.0
        );
        // No series for the sum of the cgroups: every tree series names its cgroup.
        assert!(text
            .lines()
            .filter(|l| l.starts_with("tma_node_ratio{"))
            .all(|l| l.contains("cgroup=")));
        // Each cgroup's own cycles: 1e9 (two CPUs of 0.5e9).
        assert_eq!(
            value(
                &text,
                &format!("tma_event_total{{event=\"ls_not_halted_cyc\",{a}}}")
            ),
            1e9
        );
    }

    #[test]
    fn per_cpu_split_gives_one_tree_per_cpu() {
        let text = two_scopes(Split::PerCpu, Target::System(None), false);
        let be = |cpu: u32| {
            value(
                &text,
                &format!("tma_node_ratio{{node=\"backend_bound\",level=\"1\",cpu=\"{cpu}\"}}"),
            )
        };
        assert!((be(0) - 0.3).abs() < 1e-12);
        assert!((be(1) - 0.5).abs() < 1e-12);
    }

    /// The lines a collector logs when counting starts (with a tree, then without a PMU)
    /// repeat no key; the TMA level is `tma_level`, apart from the line's `level`.
    #[test]
    fn start_up_log_lines_have_no_duplicate_key() {
        use crate::log::testing::{assert_no_duplicate_keys, Buf};
        let (info, plan) = tree_of("spr", 2);
        let buf = Buf::default();
        let mut c = Collector::new(
            Arc::new(Shared::default()),
            Arc::new(Log::new(Box::new(buf.clone()))),
            Build {
                version: "t".into(),
                cpu: "c".into(),
            },
            Split::Target,
            Vec::new(),
            false,
        );
        c.start(Start::Tree {
            info: &info,
            plan: Some(&plan),
            target: None,
        })
        .unwrap();
        let software = tma_perf::plan::Plan::software(&tma_perf::backend::software_events());
        c.start(Start::Software {
            plan: &software,
            target: None,
            reason: Some("no `cpu` PMU"),
            streamed: true,
        })
        .unwrap();
        let text = buf.text();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.lines().next().is_some_and(
                |l| l.contains(" level=info event=counting ") && l.contains(" tma_level=2")
            ),
            "{text}"
        );
        assert_no_duplicate_keys(&text);
    }

    #[test]
    fn node_paths_follow_the_parents() {
        let spr = tma_catalog::by_name("spr").unwrap();
        assert_eq!(node_path(spr, "Memory_Bound"), "Backend_Bound.Memory_Bound");
        assert_eq!(node_path(spr, "Retiring"), "Retiring");
    }
}
