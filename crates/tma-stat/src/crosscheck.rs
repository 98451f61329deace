//! perf's own numbers beside tma's: an imported recording keeps the metric values perf
//! printed beside its counts (`# 30.5 %  tma_backend_bound`, `# 0.32 Bad_Speculation`), and
//! each one that names a node of the tree is compared with tma's value of that node, to the
//! precision perf printed.
//!
//! Where they differ and the difference has a known cause, it is named: perf up to 6.3
//! computed Intel's level 1 with a hard-coded formula that left out `INT_MISC.UOP_DROPPING`
//! (the TMA 4.x term that moves dropped uops from Frontend_Bound to Bad_Speculation); a value
//! that matches once that term is taken out is that formula version, not an error.

use serde::{Deserialize, Serialize};
use tma_catalog::{Model, Unit};
use tma_metrics::{Evaluator, Report, Values};
use tma_perf::{Interval, PrintedMetric};

/// The event whose term perf's older hard-coded level 1 left out.
const UOP_DROPPING: &str = "INT_MISC.UOP_DROPPING";

/// One value perf printed for a node, beside tma's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfCheck {
    /// The node of the tree.
    pub node: String,
    /// perf's value in the node's unit (a percentage for tree nodes).
    pub value: f64,
    /// As perf printed it: `30.5 %`, `0.32`.
    pub printed: String,
    /// The line of the recording it was printed on.
    pub line: usize,
    /// How far tma's value may be from perf's and still agree: half a unit of the last
    /// digit perf printed, in the node's unit.
    pub tolerance: f64,
    /// `true` when tma's value is within the tolerance; `false` when it is not, or tma has
    /// no value for the node.
    pub agrees: bool,
    /// Why they differ, where the cause is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// perf's names for nodes the E-core tables name otherwise (perf's E-core metrics use the
/// P-core words): perf's name without `tma_`, and the table's.
const PERF_ALIASES: &[(&str, &str)] = &[
    ("fetch_latency", "Ifetch_Latency"),
    ("fetch_bandwidth", "Ifetch_Bandwidth"),
];

/// A node's name as perf prints it: `tma_backend_bound`, `Backend_Bound`, `backend_bound_cpu`.
pub(crate) fn same_node(printed: &str, node: &str) -> bool {
    let p = printed.trim();
    let p = p
        .strip_prefix("tma_")
        .or_else(|| p.strip_prefix("TMA_"))
        .unwrap_or(p);
    p.eq_ignore_ascii_case(node)
        || PERF_ALIASES
            .iter()
            .any(|(perf, ours)| p.eq_ignore_ascii_case(perf) && node == *ours)
}

/// perf's value in the node's unit and its tolerance; `None` for a printed metric whose
/// unit cannot be a node's (`K/sec`, `GHz`).
fn in_unit(m: &PrintedMetric, unit: Unit) -> Option<(f64, f64)> {
    let percent = matches!(unit, Unit::PercentSlots | Unit::Percent);
    match (m.unit.as_str(), percent) {
        ("%", true) => Some((m.value, m.tolerance())),
        // perf 6.0 printed level 1 as fractions: `0.32 Bad_Speculation`.
        ("", true) => Some((m.value * 100.0, m.tolerance() * 100.0)),
        ("", false) => Some((m.value, m.tolerance())),
        _ => None,
    }
}

/// [`Values`] with one event read as 0.
struct Without<'a> {
    inner: &'a dyn Values,
    event: &'a str,
}

impl Values for Without<'_> {
    fn event(&self, id: &str) -> Option<f64> {
        if id.eq_ignore_ascii_case(self.event) {
            return Some(0.0);
        }
        self.inner.event(id)
    }
    fn counted_share(&self, id: &str) -> Option<f64> {
        self.inner.counted_share(id)
    }
    fn grouped(&self) -> bool {
        self.inner.grouped()
    }
    fn group_for(&self, item: &str, events: &[&str]) -> Option<usize> {
        self.inner.group_for(item, events)
    }
    fn event_in(&self, id: &str, group: usize) -> Option<f64> {
        if id.eq_ignore_ascii_case(self.event) {
            return Some(0.0);
        }
        self.inner.event_in(id, group)
    }
    fn counted_share_in(&self, id: &str, group: usize) -> Option<f64> {
        self.inner.counted_share_in(id, group)
    }
}

/// Compare every value perf printed for a node of `report` with tma's.
pub(crate) fn check(
    iv: &Interval,
    report: &Report,
    model: &Model,
    evaluator: &Evaluator<'_>,
    values: &dyn Values,
    consts: &tma_metrics::Constants,
) -> Vec<PerfCheck> {
    let mut out = Vec::new();
    // tma's values without INT_MISC.UOP_DROPPING, computed once when first needed.
    let mut without: Option<Report> = None;
    let uses_dropping = model
        .nodes
        .iter()
        .any(|n| n.level == 1 && n.formula.contains(UOP_DROPPING));
    for m in &iv.printed {
        let Some(n) = report.nodes.iter().find(|n| same_node(&m.name, n.name)) else {
            continue;
        };
        if out.iter().any(|c: &PerfCheck| c.node == n.name) {
            // perf printed the node twice (its json metric and its hard-coded level 1):
            // the first, beside the counts it was computed from, is kept.
            continue;
        }
        let Some((value, tolerance)) = in_unit(m, n.unit) else {
            continue;
        };
        // Printed values are rounded: a tiny slack for the float arithmetic on both sides.
        let close = |v: f64| (v - value).abs() <= tolerance + 1e-9;
        let agrees = n.value.is_some_and(close);
        let why = match n.value {
            None => Some("tma has no value for this node".to_string()),
            Some(_) if agrees => None,
            Some(_) if uses_dropping && n.level == 1 => {
                let r = without.get_or_insert_with(|| {
                    evaluator.evaluate(
                        &Without {
                            inner: values,
                            event: UOP_DROPPING,
                        },
                        consts,
                    )
                });
                let old = r.node(n.name).and_then(|o| o.value);
                old.filter(|&v| close(v)).map(|v| {
                    format!(
                        "formula version: perf up to 6.3 computed level 1 without \
                         {UOP_DROPPING}, which gives {v:.1}%; tma follows TMA 4.x and later"
                    )
                })
            }
            Some(_) => None,
        };
        out.push(PerfCheck {
            node: n.name.to_string(),
            value,
            printed: if m.unit.is_empty() {
                format!("{}", Printed(m))
            } else {
                format!("{} {}", Printed(m), m.unit)
            },
            line: m.line,
            tolerance,
            agrees,
            why,
        });
    }
    out
}

/// A printed value with the digits perf printed.
struct Printed<'a>(&'a PrintedMetric);

impl std::fmt::Display for Printed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.*}", usize::from(self.0.decimals), self.0.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_units() {
        assert!(same_node("tma_backend_bound", "Backend_Bound"));
        assert!(same_node("Bad_Speculation", "Bad_Speculation"));
        assert!(same_node("backend_bound_cpu", "backend_bound_cpu"));
        assert!(!same_node("tma_retiring", "Heavy_Operations"));
        let m = |value, unit: &str, decimals| PrintedMetric {
            name: String::new(),
            value,
            unit: unit.to_string(),
            decimals,
            line: 1,
            event: String::new(),
            row: 0,
            group: None,
            block: None,
        };
        assert_eq!(
            in_unit(&m(30.5, "%", 1), Unit::PercentSlots),
            Some((30.5, 0.05))
        );
        let (v, t) = in_unit(&m(0.32, "", 2), Unit::PercentSlots).unwrap();
        assert!((v - 32.0).abs() < 1e-9 && (t - 0.5).abs() < 1e-9);
        assert_eq!(in_unit(&m(6.437, "K/sec", 3), Unit::PercentSlots), None);
    }
}
