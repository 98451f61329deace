//! From watched intervals to metric families: the [`Collector`] is the engine's
//! [`IntervalSink`]; after each interval it publishes a fresh set of families (the tree, metrics,
//! counters, state) that scrapes render until the next one.
//!
//! Cardinality: one series per shown node (`-l`, `--nodes`) and per selected metric, times
//! the number of scopes (1, the `--cgroup`s, or the CPUs with `--per-cpu`); one event
//! counter per counted event per scope; a fixed handful of others.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tma_perf::backend::{Measurement, RawInterval, Target};
use tma_perf::plan::Plan;
use tma_perf::Interval;
use tma_stat::eval::{RunInfo, TreeEval};
use tma_stat::sink::{IntervalData, IntervalSink, Start};
use tma_stat::{IntervalReport, StatError};

use crate::anomaly::{AnomalyConfig, Detector};
use crate::log::Log;

use self::families::Part;

mod expose;
mod families;
mod scope;
mod shared;
#[cfg(test)]
mod tests;

pub use families::node_path;
pub use shared::Shared;

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
