//! The text tree: its header, the nodes, the helper metrics and the closing lines.

use std::io::Write;

use tma_catalog::{Model, Unit};
use tma_metrics::{Bottleneck, MetricResult, NodeResult, Report, Status, StopReason};
use tma_render::OutputError;

use super::facts::*;
use super::options::*;
use crate::eval::{IntervalReport, RunInfo};

pub(super) fn text_header(w: &mut dyn Write, info: &RunInfo) -> Result<(), OutputError> {
    text_header_line(w, info)?;
    text_levels_line(w, info)
}

/// The header's first line: the CPU, its table and where the data came from.
pub(super) fn text_header_line(w: &mut dyn Write, info: &RunInfo) -> Result<(), OutputError> {
    let m = info.model;
    let version = m
        .tma_version
        .map(|v| format!(", TMA {v}"))
        .unwrap_or_default();
    writeln!(
        w,
        "{} ({}, {}){version}, {}",
        m.name, m.key, info.cpu_source, info.source
    )?;
    Ok(())
}

/// The header's second line: the levels shown and how to read the values.
pub(super) fn text_levels_line(w: &mut dyn Write, info: &RunInfo) -> Result<(), OutputError> {
    let levels = if info.request.level == 1 {
        "level 1".to_string()
    } else {
        format!("levels 1-{}", info.request.level)
    };
    let subset = if info.request.nodes.is_empty() {
        String::new()
    } else {
        format!(" under {}", info.request.nodes.join(", "))
    };
    writeln!(
        w,
        "TMA {levels}{subset}; values in % of pipeline slots unless noted; `below` = under threshold"
    )?;
    Ok(())
}

pub(super) fn render_tree(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
    opts: &RenderOptions,
) -> Result<(), OutputError> {
    let r = &ir.report;
    let shown = visible(r, opts.verbose, info.model, &info.request.nodes);
    let name_w = r
        .nodes
        .iter()
        .map(|n| 2 * (n.level as usize - 1) + n.name.len())
        .max()
        .unwrap_or(10)
        + 2;
    let mut hidden = 0usize;
    let mut hidden_figures = 0usize;
    let mut unknown_threshold = 0usize;
    for (n, show) in r.nodes.iter().zip(&shown) {
        let figure = info.model.node(n.name).is_some_and(|d| d.is_figure());
        if !show {
            if figure {
                hidden_figures += 1;
            } else {
                hidden += 1;
            }
            continue;
        }
        let name = format!("{}{}", "  ".repeat(n.level as usize - 1), n.name);
        let value = match n.value {
            Some(v) => fmt_value(v, n.unit),
            None => "-".to_string(),
        };
        let marker = if r.bottleneck.node.as_deref() == Some(n.name) {
            "<=="
        } else if figure {
            // A figure that explains its parent has no threshold of its own.
            ""
        } else if n.above_threshold == Some(false) {
            "below"
        } else if n.above_threshold.is_none() && n.value.is_some() {
            unknown_threshold += 1;
            "?"
        } else {
            ""
        };
        let mut line = format!("{name:<name_w$}{value:>8}  {marker:<5}");
        if let Some(c) = ir.perf.iter().find(|c| c.node == n.name) {
            line.push_str(&format!("  perf {:>7}", c.printed.replace(" %", "%")));
            line.push_str(if c.agrees { "  " } else { " ≠" });
        } else if !ir.perf.is_empty() {
            line.push_str(&" ".repeat(16));
        }
        if n.estimated {
            line.push_str("  estimated");
        }
        if let Some(t) = ir.only_on_text(n.name) {
            line.push_str("  ");
            line.push_str(&t);
        }
        if let Some(d) = domain_note(n, info.model) {
            line.push_str("  ");
            line.push_str(&d);
        }
        if let Some(s) = share_text(n.counted_share) {
            line.push_str("  ");
            line.push_str(&s);
        }
        if let Some(s) = status_text(n, ir, info.model) {
            line.push_str("  ");
            line.push_str(&s);
        }
        writeln!(w, "{}", line.trim_end())?;
    }
    writeln!(w)?;
    if unknown_threshold > 0 {
        writeln!(
            w,
            "`?` = threshold unknown: it could not be evaluated (it needs values that are missing), so the node is not known to be over or under it."
        )?;
    }
    match (hidden, hidden_figures) {
        (0, 0) => {}
        (h, 0) => writeln!(
            w,
            "{h} node{} under threshold hidden; -v shows {}.",
            if h == 1 { "" } else { "s" },
            if h == 1 { "it" } else { "them" }
        )?,
        (0, f) => writeln!(
            w,
            "{f} drill-down figure{} of nodes off the bottleneck's path hidden; -v shows {}.",
            if f == 1 { "" } else { "s" },
            if f == 1 { "it" } else { "them" }
        )?,
        (h, f) => writeln!(
            w,
            "{h} node{} under threshold and {f} drill-down figure{} of nodes off the \
             bottleneck's path hidden; -v shows them.",
            if h == 1 { "" } else { "s" },
            if f == 1 { "" } else { "s" },
        )?,
    }
    let min_share = r
        .nodes
        .iter()
        .filter_map(|n| n.counted_share)
        .fold(None, |a: Option<f64>, s| Some(a.map_or(s, |a| a.min(s))));
    if let Some(s) = min_share.filter(|&s| s < 0.9995) {
        writeln!(
            w,
            "Some events were counted only {:.1}% of the time (multiplexed); their counts are scaled estimates.",
            s * 100.0
        )?;
    }
    if ir.all_zero {
        writeln!(
            w,
            "Every counted event is 0: nothing ran while counting, or the counters did not count."
        )?;
    }
    if r.nodes.iter().any(|n| n.status == Status::MissingEvents) {
        writeln!(
            w,
            "Nodes with missing events could not be computed; `tma events --cpu {} -l {} --perf-cmd` records them all.",
            info.model.key, info.request.level
        )?;
    }
    perf_summary(w, ir)?;
    if info.interval_mode {
        // The closing lines come once, for the whole run, at its end (summary.rs); each
        // interval keeps its one-line verdict.
        let val = |name: &str| node_value(r, name);
        writeln!(w, "{}", r.bottleneck.wording(&val).headline)?;
    } else {
        closing(
            w,
            info,
            &r.bottleneck,
            &|name| node_value(r, name),
            &|name| {
                r.node(name).map(|n| Closing {
                    description: n.description,
                    out_of_range: n.status == Status::OutOfRange,
                })
            },
            None,
        )?;
    }
    render_metrics(w, info, ir)
}

/// A node's value as the tree prints it (`-` without one).
fn node_value(r: &Report, name: &str) -> String {
    r.node(name)
        .and_then(|n| n.value.map(|v| fmt_value(v, n.unit)))
        .unwrap_or_else(|| "-".into())
}

/// One line on how tma's values compare with those perf printed, and one per difference.
fn perf_summary(w: &mut dyn Write, ir: &IntervalReport) -> Result<(), OutputError> {
    if ir.perf.is_empty() {
        return Ok(());
    }
    let n = ir.perf.len();
    let differ: Vec<_> = ir.perf.iter().filter(|c| !c.agrees).collect();
    let values = if n == 1 { "value" } else { "values" };
    if differ.is_empty() {
        writeln!(
            w,
            "perf printed {n} {values} for these nodes; tma agrees with each to the digits perf printed."
        )?;
        return Ok(());
    }
    writeln!(
        w,
        "perf printed {n} {values} for these nodes; {} of them differ from tma's (≠) by more than perf's printed precision:",
        differ.len()
    )?;
    for c in differ {
        let why = c.why.as_deref().unwrap_or("cause unknown");
        writeln!(
            w,
            "  {} (line {}): perf {}; {why}",
            c.node, c.line, c.printed
        )?;
    }
    Ok(())
}

/// The metrics of the request in the report, split into the grouped Info view and the
/// ranked bottleneck-cost view.
pub(super) fn split_metrics<'r>(
    info: &RunInfo,
    r: &'r Report,
) -> (Vec<&'r MetricResult>, Vec<&'r MetricResult>) {
    let is_cost = |m: &&MetricResult| info.request.bottlenecks.iter().any(|b| b == m.name);
    let info_view = r.metrics.iter().filter(|m| !is_cost(m)).collect();
    let mut costs: Vec<&MetricResult> = r.metrics.iter().filter(is_cost).collect();
    // Highest cost first; metrics without a value last, in table order.
    costs.sort_by(|a, b| match (a.value, b.value) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    (info_view, costs)
}

/// `-m` / `-M`: the metrics grouped as the tables group them (groups in order of first
/// appearance); `-B`: the bottleneck costs, highest first.
pub(super) fn render_metrics(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
) -> Result<(), OutputError> {
    let (metrics, costs) = split_metrics(info, &ir.report);
    let value_of = |m: &MetricResult| match m.value {
        Some(v) => fmt_value(v, m.unit),
        None => "-".to_string(),
    };
    let tail = |m: &MetricResult| {
        let mut t = m.description.to_string();
        if let Some(s) = share_text(m.counted_share) {
            t.push_str("  ");
            t.push_str(&s);
        }
        let long = m.status == Status::MissingEvents && m.missing_events.len() > 4;
        let status = if long {
            Some(format!(
                "missing {} events, e.g. {}",
                m.missing_events.len(),
                m.missing_events[..4].join(", ")
            ))
        } else {
            metric_status_text(m, ir, info.model)
        };
        if let Some(s) = status {
            t.push_str("  [");
            t.push_str(&s);
            t.push(']');
        }
        t
    };
    if !metrics.is_empty() {
        let name_w = metrics
            .iter()
            .map(|m| m.short_name.len())
            .max()
            .unwrap_or(10)
            + 4;
        writeln!(w)?;
        writeln!(w, "Metrics:")?;
        let mut groups: Vec<&str> = Vec::new();
        for m in &metrics {
            if !groups.contains(&m.group) {
                groups.push(m.group);
            }
        }
        for g in groups {
            writeln!(w, "{}", g.replace('_', " "))?;
            for m in metrics.iter().filter(|m| m.group == g) {
                let line = format!(
                    "  {:<name_w$}{:>10}  {}",
                    m.short_name,
                    value_of(m),
                    tail(m),
                    name_w = name_w - 2
                );
                writeln!(w, "{}", line.trim_end())?;
            }
        }
    }
    if !costs.is_empty() {
        let name_w = costs.iter().map(|m| m.short_name.len()).max().unwrap_or(10) + 2;
        writeln!(w)?;
        writeln!(
            w,
            "Bottleneck costs (% of pipeline slots each would free), highest first:"
        )?;
        for (i, m) in costs.iter().enumerate() {
            let line = format!(
                "{:>3}. {:<name_w$}{:>8}  {}",
                i + 1,
                m.short_name,
                value_of(m),
                tail(m)
            );
            writeln!(w, "{}", line.trim_end())?;
        }
    }
    if metrics
        .iter()
        .chain(&costs)
        .any(|m| m.status == Status::MissingEvents)
    {
        writeln!(
            w,
            "Metrics with missing events could not be computed; add the events listed with them \
             to the recording."
        )?;
    }
    Ok(())
}

/// For a node not measured in slots, what its percentage is of (`(% of cycles)`).
pub(super) fn domain_note(n: &NodeResult, model: &Model) -> Option<String> {
    if n.unit != Unit::Percent {
        return None;
    }
    let domain = model.node(n.name).map_or("", |d| d.count_domain);
    let what = if domain.starts_with("Slots") {
        "slots"
    } else if domain.contains("Clocks") || domain.is_empty() {
        "cycles"
    } else if domain == "Stalls" {
        "stall cycles"
    } else if domain.starts_with("Core_") {
        "core cycles"
    } else {
        return Some(format!("(% of {})", domain.to_lowercase()));
    };
    Some(format!("(% of {what})"))
}

/// What the closing lines need of a node besides its value.
pub(super) struct Closing {
    pub(super) description: &'static str,
    /// Its value is outside 0-100% (beyond the tolerance).
    pub(super) out_of_range: bool,
}

/// The closing lines: the bottleneck `b` (of one tree, or of the means of an interval run),
/// the phases the means hide (`phases`), its locate-with events and the command to run next.
/// `val` gives a node's value as printed, `node` the rest of what is said about it.
pub(super) fn closing(
    w: &mut dyn Write,
    info: &RunInfo,
    b: &Bottleneck,
    val: &dyn Fn(&str) -> String,
    node: &dyn Fn(&str) -> Option<Closing>,
    phases: Option<&str>,
) -> Result<(), OutputError> {
    let wording = b.wording(&val);
    writeln!(w, "{}", wording.headline)?;
    let chosen = match &b.stop {
        StopReason::Ambiguous { .. } => None,
        _ => b.node.as_deref(),
    };
    if let Some(c) = chosen.and_then(node) {
        if c.out_of_range {
            writeln!(
                w,
                "  Warning: its value is outside 0-100%, so the counts behind it are suspect (skew, multiplexing, or a wrong --cpu)."
            )?;
        }
        if !c.description.is_empty() && !matches!(b.stop, StopReason::Undecided { .. }) {
            writeln!(w, "  {}", c.description)?;
        }
    }
    for note in wording.notes.iter().map(String::as_str).chain(phases) {
        writeln!(w, "  {note}")?;
    }
    if b.node.is_none() {
        return Ok(());
    }
    let cmd = info.command.as_deref().unwrap_or("CMD");
    let targets: Vec<&str> = match (&b.stop, &b.node) {
        (StopReason::Ambiguous { first, second, .. }, _) => vec![first, second],
        (_, Some(n)) => vec![n],
        _ => vec![],
    };
    if b.locate_with.is_empty() {
        if let Some(t) = targets.first() {
            writeln!(
                w,
                "Locate with: the {} tables name no sampling event for {t}.",
                info.model.key
            )?;
        }
    } else {
        let from = match &b.locate_with_node {
            Some(n) if Some(n) != b.node.as_ref() => format!(" (from {n})"),
            _ => String::new(),
        };
        writeln!(w, "Locate with: {}{from}", b.locate_with.join(", "))?;
    }
    let cpu = if info.cpu_source.contains("this machine") {
        String::new()
    } else {
        format!(" --cpu {}", info.model.key)
    };
    if b.locate_with.is_empty() {
        // `--node` needs a locate-with event; without one, a time profile (cpu-clock) is
        // the honest next step, and `-e EVENT` picks an event by hand.
        if !targets.is_empty() {
            writeln!(
                w,
                "Next: tma locate -e cpu-clock -- {cmd}   (a time profile; or -e EVENT for an event of your choice)"
            )?;
        }
    } else {
        for t in targets {
            writeln!(w, "Next: tma locate{cpu} --node {t} -- {cmd}")?;
        }
    }
    // A deeper level exists below the bottleneck: say how to get it.
    if let Some(node) = &b.node {
        if b.stop == StopReason::Leaf && info.model.children(Some(node)).next().is_some() {
            writeln!(
                w,
                "Deeper: {node} has children at level {}; record them with `tma events --cpu {} -l {} --nodes {node} --perf-cmd`.",
                info.request.level + 1,
                info.model.key,
                info.request.level + 1
            )?;
        }
    }
    Ok(())
}
