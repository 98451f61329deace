//! The metric families of a scope: their names and help, one series before its scope
//! label ([`Part`]), and the pieces of a tree they are read from.

use tma_perf::event::SoftwareEvent;
use tma_perf::Interval;

use crate::expo::{Family, Kind};

/// The software events with a family of their own: (event, family base, help, scale).
pub(super) const SOFTWARE: [(SoftwareEvent, &str, &str, f64); 4] = [
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

/// One series of a scope before its scope label: a gauge's value, or a counter's growth.
#[derive(Debug, Clone)]
pub(super) struct Part {
    pub(super) family: usize,
    pub(super) labels: Vec<(&'static str, String)>,
    pub(super) value: f64,
    pub(super) counter: bool,
}

impl Part {
    pub(super) fn gauge(family: usize, labels: Vec<(&'static str, String)>, value: f64) -> Part {
        Part {
            family,
            labels,
            value,
            counter: false,
        }
    }
    pub(super) fn counter(family: usize, labels: Vec<(&'static str, String)>, value: f64) -> Part {
        Part {
            family,
            labels,
            value,
            counter: true,
        }
    }
}

// The families of each scope, in exposition order.
pub(super) const F_NODE: usize = 0;
pub(super) const F_COUNTED: usize = 1;
pub(super) const F_BOTTLENECK: usize = 2;
pub(super) const F_METRIC: usize = 3;
pub(super) const F_SLOTS: usize = 4;
pub(super) const F_CYCLES: usize = 5;
pub(super) const F_INSTRUCTIONS: usize = 6;
pub(super) const F_EVENT: usize = 7;
pub(super) const F_SOFTWARE: usize = 8;

pub(super) fn scope_families() -> Vec<Family> {
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
pub(super) fn total_key(labels: &[(&'static str, String)]) -> String {
    labels
        .iter()
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

/// The number of samples of `families`.
pub(super) fn count(families: &[Family]) -> usize {
    families.iter().map(Family::len).sum()
}

/// The cycles and instructions events, by the names the tables and perf use.
pub(super) const CYCLES: &[&str] = &[
    "CPU_CLK_UNHALTED.THREAD",
    // Intel E-cores (Atom).
    "CPU_CLK_UNHALTED.CORE",
    "ls_not_halted_cyc",
    "CPU_CYCLES",
    "cycles",
    "cpu-cycles",
];
pub(super) const INSTRUCTIONS: &[&str] = &[
    "INST_RETIRED.ANY",
    "ex_ret_instr",
    "INST_RETIRED",
    "instructions",
];

/// The memory-bound node of the trees (Intel level 2, AMD level 2).
pub(super) const MEMORY_BOUND: &[&str] = &["Memory_Bound", "backend_bound_memory"];

/// The model's metric of the slots the level-1 nodes share.
pub(super) const SLOTS_METRICS: &[&str] = &["Info_Thread_SLOTS", "total_dispatch_slots"];

/// The pipeline slots of one scope's interval, by the model's own slots metric; `None`
/// when the model names none or the interval lacks its events.
pub(super) fn fleet_slots(
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
pub(super) struct ReadingValues<'a>(&'a Interval);

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
