//! Which helper metrics (`Info_*`, `Bottleneck_*`, AMD's) to show: the default set, `all`,
//! names and groups as a user writes them, and `perf stat -M` group names.

use tma_catalog::{MetricDef, Model};

use crate::MetricsError;

/// The metrics `--metrics` shows without an argument, by short name, where the model has
/// them: the figures most people look at first (instruction throughput, parallelism, the
/// memory and branch costs, frequency and utilization).
pub const DEFAULT_METRICS: &[&str] = &[
    "IPC",
    "CPI",
    "CoreIPC",
    "ILP",
    "MLP",
    "Load_Miss_Real_Latency",
    "DSB_Coverage",
    "Op_Cache_Coverage",
    "IpBranch",
    "IpMispredict",
    "Branch_Misprediction_Ratio",
    "Branch_Misprediction_Cost",
    "UopPI",
    "L1D_MPKI",
    "L2_MPKI",
    "L3_MPKI",
    "DTLB_MPKI",
    "Turbo_Utilization",
    "CPU_Utilization",
];

/// The group of the bottleneck-cost metrics.
pub const BOTTLENECK_GROUP: &str = "Bottleneck";

/// A metric is named by its whole name (`Info_Thread_IPC`) or its short name (`IPC`).
fn named(m: &MetricDef, name: &str) -> bool {
    m.name.eq_ignore_ascii_case(name) || m.short_name().eq_ignore_ascii_case(name)
}

/// Metrics shown as Info metrics: every metric outside the bottleneck view.
fn is_info(m: &MetricDef) -> bool {
    m.group != BOTTLENECK_GROUP
}

/// The metric names (catalog spelling, table order, no duplicates) a `--metrics` argument
/// selects. `words` empty: [`DEFAULT_METRICS`] the model has. `all`: every metric but the
/// bottleneck costs. Otherwise each word is a metric (whole or short name) or a group
/// (`Thread`, `Memory`, `Bottleneck`...; a group also takes its sub-groups, so `Memory`
/// includes `Memory_TLB`). An unknown word is an error with close names.
pub fn select_metrics(model: &Model, words: &[String]) -> Result<Vec<&'static str>, MetricsError> {
    let mut pick = vec![false; model.metrics.len()];
    if words.is_empty() {
        for (i, m) in model.metrics.iter().enumerate() {
            pick[i] = DEFAULT_METRICS.iter().any(|d| named(m, d)) && is_info(m);
        }
    }
    for w in words {
        let w = w.trim();
        if w.eq_ignore_ascii_case("all") {
            for (i, m) in model.metrics.iter().enumerate() {
                pick[i] |= is_info(m);
            }
            continue;
        }
        let mut any = false;
        for (i, m) in model.metrics.iter().enumerate() {
            let in_group = m.group.eq_ignore_ascii_case(w)
                || m.group
                    .get(..w.len() + 1)
                    .is_some_and(|p| p[..w.len()].eq_ignore_ascii_case(w) && p.ends_with('_'));
            if named(m, w) || in_group {
                pick[i] = true;
                any = true;
            }
        }
        if !any {
            return Err(MetricsError::UnknownMetric {
                model: model.key.to_string(),
                name: w.to_string(),
                suggestions: close_metric_names(model, w),
            });
        }
    }
    Ok(picked(model, &pick))
}

/// The `Bottleneck_*` metrics of the model, in table order (empty when it has none).
pub fn bottleneck_metrics(model: &Model) -> Vec<&'static str> {
    model
        .metrics
        .iter()
        .filter(|m| m.group == BOTTLENECK_GROUP)
        .map(|m| m.name)
        .collect()
}

/// What one `perf stat -M` group name selects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PerfGroupSelection {
    /// Deepest tree level a `TopdownLN` / `PipelineLN` name asks for (0 = none).
    pub level: u8,
    /// Metrics listed under the group names (catalog spelling, table order).
    pub metrics: Vec<&'static str>,
}

/// Resolve `perf stat -M` group names: `TopdownL1`..`TopdownL6` and AMD's `PipelineL1`,
/// `PipelineL2` select the tree down to that level; any other name selects the metrics the
/// data lists under it (perfmon `MetricGroup`, e.g. `Summary`, `Mem`, `Ret`). An unknown
/// name is an error.
pub fn select_perf_groups(
    model: &Model,
    names: &[String],
) -> Result<PerfGroupSelection, MetricsError> {
    let mut out = PerfGroupSelection::default();
    let mut pick = vec![false; model.metrics.len()];
    for n in names {
        let n = n.trim();
        let lower = n.to_ascii_lowercase();
        let level = lower
            .strip_prefix("topdownl")
            .or_else(|| lower.strip_prefix("pipelinel"))
            .and_then(|d| d.parse::<u8>().ok())
            .filter(|l| (1..=6).contains(l));
        if let Some(l) = level {
            out.level = out.level.max(l);
            continue;
        }
        let mut any = false;
        for (i, m) in model.metrics.iter().enumerate() {
            if m.in_perf_group(n) {
                pick[i] = true;
                any = true;
            }
        }
        if !any {
            return Err(MetricsError::UnknownMetricGroup {
                model: model.key.to_string(),
                name: n.to_string(),
            });
        }
    }
    out.metrics = picked(model, &pick);
    Ok(out)
}

fn picked(model: &Model, pick: &[bool]) -> Vec<&'static str> {
    model
        .metrics
        .iter()
        .zip(pick)
        .filter(|(_, &p)| p)
        .map(|(m, _)| m.name)
        .collect()
}

fn close_metric_names(model: &Model, name: &str) -> Vec<String> {
    let lname = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = model
        .metrics
        .iter()
        .filter_map(|m| {
            let ln = m.short_name().to_lowercase();
            let d = crate::edit_distance(&ln, &lname);
            let close = d <= (lname.len() / 3).max(2)
                || (lname.len() >= 3 && (ln.contains(&lname) || lname.contains(&ln)));
            close.then_some((d, m.short_name()))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(5)
        .map(|(_, n)| n.to_string())
        .collect()
}
