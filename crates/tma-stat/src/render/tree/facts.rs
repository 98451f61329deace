//! What every format shares: values, status texts, which nodes show, the bars of a tree.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tma_catalog::{Model, Unit};
use tma_metrics::{MetricResult, NodeResult, Report, Status};

use crate::eval::{EventState, IntervalReport, RunInfo};
use crate::render::plot::{own_threshold, Bar};

pub(super) fn fmt_value(v: f64, u: Unit) -> String {
    match u {
        Unit::PercentSlots | Unit::Percent => format!("{v:.1}%"),
        Unit::Number => {
            if v.abs() >= 1000.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        }
    }
}

/// The text explaining why a node has no value (or why its value is odd).
pub fn status_text(n: &NodeResult, ir: &IntervalReport, model: &Model) -> Option<String> {
    explain(n.name, &n.status, &n.missing_events, ir, model)
}

/// The text explaining why a helper metric has no value, like [`status_text`] for a node.
pub fn metric_status_text(m: &MetricResult, ir: &IntervalReport, model: &Model) -> Option<String> {
    explain(m.name, &m.status, &m.missing_events, ir, model)
}

pub(super) fn explain(
    name: &str,
    status: &Status,
    missing_events: &[String],
    ir: &IntervalReport,
    model: &Model,
) -> Option<String> {
    match status {
        Status::Ok => None,
        Status::OutOfRange => Some("out of range: counter skew or bad counts?".into()),
        Status::MissingEvents => {
            let mut groups: Vec<(EventState, Vec<&str>)> = Vec::new();
            for e in missing_events {
                let st = ir.missing_state(e).unwrap_or(EventState::NotRecorded);
                match groups.iter_mut().find(|(s, _)| *s == st) {
                    Some((_, v)) => v.push(e),
                    None => groups.push((st, vec![e])),
                }
            }
            let parts: Vec<String> = groups
                .iter()
                .map(|(s, evs)| {
                    let what = match s {
                        EventState::NotRecorded => "missing",
                        EventState::NotCounted => "not counted",
                        EventState::NotSupported => "not supported",
                    };
                    format!("{what}: {}", evs.join(", "))
                })
                .collect();
            Some(parts.join("; "))
        }
        Status::DivisionByZero => {
            let mut zero: Vec<&str> = model
                .node(name)
                .map(|d| d.formula)
                .or_else(|| model.metric(name).map(|m| m.formula))
                .map(|f| formula_events(model, f))
                .unwrap_or_default()
                .into_iter()
                .filter(|id| ir.zero_events.iter().any(|z| z.eq_ignore_ascii_case(id)))
                .collect();
            let mut seen = std::collections::HashSet::new();
            zero.retain(|z| seen.insert(z.to_ascii_lowercase()));
            Some(match zero.len() {
                0 => "division by zero: a denominator counted 0".into(),
                1..=3 => format!("division by zero: {} counted 0", zero.join(", ")),
                n => format!(
                    "division by zero: {}, {} and {} more events counted 0",
                    zero[0],
                    zero[1],
                    n - 2
                ),
            })
        }
        Status::MissingConstant(c) => Some(format!("missing constant: {c}")),
        Status::Error(e) => Some(format!("error: {e}")),
    }
}

/// The event identifiers of a formula, following references to other nodes and helper
/// metrics of the model (e.g. AMD shares divide by `total_dispatch_slots`, a metric over
/// `ls_not_halted_cyc`), so a "division by zero" can name the event that was 0.
pub(super) fn formula_events(model: &Model, formula: &'static str) -> Vec<&'static str> {
    // Memoised per model and formula: a tree of counts that divide by zero explains each
    // node and metric for every interval, and the walk through nested metrics (each name
    // looked up case-insensitively) cost milliseconds per interval on the Intel tables.
    type Cache = HashMap<(&'static str, &'static str), Vec<&'static str>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry((model.key, formula))
        .or_insert_with(|| walk_formula_events(model, formula))
        .clone()
}

fn walk_formula_events(model: &Model, formula: &'static str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    let mut todo = vec![formula];
    let mut seen_refs: Vec<&'static str> = Vec::new();
    while let Some(f) = todo.pop() {
        for id in tma_catalog::encode::formula_identifiers(f) {
            let referenced = model
                .node(id)
                .map(|n| (n.name, n.formula))
                .or_else(|| model.metric(id).map(|m| (m.name, m.formula)));
            match referenced {
                Some((name, f)) if !seen_refs.contains(&name) => {
                    seen_refs.push(name);
                    todo.push(f);
                }
                Some(_) => {}
                None => out.push(id),
            }
        }
    }
    out
}

/// Whether the text tree shows a node: every level-1 node; deeper nodes when their parent
/// is shown and they are over threshold, on the bottleneck path, without a threshold
/// verdict, or without a value (so problems are never hidden); drill-down figures under the
/// path, or all of them without a path; everything with `-v`.
pub(super) fn visible(
    report: &Report,
    verbose: u8,
    model: &Model,
    requested: &[String],
) -> Vec<bool> {
    // Nodes the user named with --nodes, and their ancestors, are always shown.
    let mut forced: Vec<&str> = Vec::new();
    for name in requested {
        let mut cur = model.node(name);
        while let Some(n) = cur {
            if forced.contains(&n.name) || forced.len() > model.nodes.len() {
                break;
            }
            forced.push(n.name);
            cur = n.parent.and_then(|p| model.node(p));
        }
    }
    let mut shown: Vec<bool> = Vec::with_capacity(report.nodes.len());
    for (i, n) in report.nodes.iter().enumerate() {
        let parent_shown = match &n.parent {
            None => true,
            Some(p) => report.nodes[..i]
                .iter()
                .zip(&shown)
                .find(|(m, _)| m.name.eq_ignore_ascii_case(p))
                .is_none_or(|(_, s)| *s),
        };
        // A drill-down figure explains its parent: shown where the parent is on the path,
        // and everywhere when there is no path (no level-1 node could be computed, as in a
        // recording of Arm's cache or TLB groups alone): nothing is off it then.
        let figure = model.node(n.name).is_some_and(|d| d.is_figure());
        let path = &report.bottleneck.path;
        let explains_path = figure
            && (path.is_empty()
                || n.parent
                    .is_some_and(|p| path.iter().any(|b| b.eq_ignore_ascii_case(p))));
        let interesting = n.level == 1
            || verbose > 0
            || explains_path
            || (n.above_threshold != Some(false) && !figure)
            || n.value.is_none()
            || forced.iter().any(|f| f.eq_ignore_ascii_case(n.name))
            || report.bottleneck.path.iter().any(|b| b == n.name);
        shown.push(parent_shown && interesting);
    }
    shown
}

/// How an interval's output names its tree: `P-core tree`, `merged view`.
pub fn tree_name(info: &RunInfo) -> Option<String> {
    info.core_type.map(|t| match t {
        "merged" => "merged view".to_string(),
        t => format!("{t} tree"),
    })
}

/// The tree of one interval as the bars of [`tree_svg`](crate::render::plot::tree_svg): the nodes the text tree shows.
pub fn bars(info: &RunInfo, ir: &IntervalReport, verbose: u8) -> Vec<Bar> {
    let r = &ir.report;
    let shown = visible(r, verbose, info.model, &info.request.nodes);
    r.nodes
        .iter()
        .zip(&shown)
        .filter(|(_, s)| **s)
        .map(|(n, _)| {
            let mut note: Vec<String> = Vec::new();
            if r.bottleneck.node.as_deref() == Some(n.name) {
                note.push("bottleneck".into());
            }
            note.extend(share_text(n.counted_share));
            note.extend(status_text(n, ir, info.model));
            Bar {
                name: n.name.to_string(),
                level: n.level,
                value: n.value,
                threshold: info
                    .model
                    .node(n.name)
                    .and_then(|d| own_threshold(n.name, d.threshold)),
                above_threshold: n.above_threshold,
                on_path: r.bottleneck.path.iter().any(|p| p == n.name),
                note: note.join("  "),
            }
        })
        .collect()
}

/// The title of a tree picture: the CPU and the source.
pub fn tree_title(info: &RunInfo) -> String {
    format!(
        "TMA tree: {} ({}), {}",
        info.model.name, info.model.key, info.source
    )
}

pub(super) fn share_text(s: Option<f64>) -> Option<String> {
    s.filter(|&s| s < 0.9995)
        .map(|s| format!("[{:5.1}% counted]", s * 100.0))
}
