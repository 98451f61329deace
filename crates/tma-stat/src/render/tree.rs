//! The TMA tree of `tma stat` as text, JSON (`tma.stat` v1) and CSV, written one interval at
//! a time ([`TreeWriter`]), so live runs print as they count and a long import streams from
//! input to output. [`render`] writes a whole [`StatRun`].

use std::borrow::Cow;
use std::io::Write;

use tma_catalog::{Model, Unit};
use tma_metrics::{Bottleneck, MetricResult, NodeResult, Report, Status, StopReason};
use tma_render::{JsonStream, ReportError};

use crate::eval::{EventState, IntervalReport, RunInfo, StatRun};
use crate::render::doc::{CpuDoc, EventMapDoc, IntervalDoc, MetricDoc, NodeDoc, StatHead};
use crate::render::plot::{own_threshold, tree_svg, Bar, Timeline};

/// The schema name of `tma stat --json`.
pub const SCHEMA: &str = "tma.stat";
/// Its version.
pub const SCHEMA_VERSION: u32 = 1;

/// Which layout to write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// The indented tree (or one `--compact` line per interval), with closing lines.
    #[default]
    Text,
    /// `tma.stat` version 1: every node of every interval, full precision.
    Json,
    /// One row per node (per interval), full precision.
    Csv,
}

/// How to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    pub format: Format,
    /// 0: hide nodes under threshold; 1+: show every node.
    pub verbose: u8,
    /// One line per interval instead of one tree per interval (interval data, text).
    pub compact: bool,
    /// `--plot FILE.svg`: also draw the run (the timeline of intervals, else the tree as
    /// bars) into this file when the run ends.
    pub plot: Option<std::path::PathBuf>,
}

/// Write a whole run.
pub fn render(w: &mut dyn Write, run: &StatRun, opts: &RenderOptions) -> Result<(), ReportError> {
    let mut t = TreeWriter::new(opts.clone());
    t.begin(w, &run.info)?;
    for ir in &run.intervals {
        t.interval(w, &run.info, ir)?;
    }
    t.end(w, &run.info)
}

/// Writes a run interval by interval: [`TreeWriter::begin`], then
/// [`TreeWriter::interval`] for each, then [`TreeWriter::end`]. The bytes equal what
/// [`render`] writes for the same run.
#[derive(Debug)]
pub struct TreeWriter {
    opts: RenderOptions,
    count: usize,
    json: Option<JsonStream>,
    /// `--compact`: the level-1 and metric columns, fixed by the first interval.
    columns: Vec<CompactColumn>,
    /// `--plot`: the intervals so far (bounded, see [`Timeline`]) and the last tree's bars.
    timeline: Option<Timeline>,
    last_bars: Vec<Bar>,
}

impl TreeWriter {
    pub fn new(opts: RenderOptions) -> TreeWriter {
        let timeline = opts.plot.as_ref().map(|_| Timeline::new());
        TreeWriter {
            opts,
            count: 0,
            json: None,
            columns: Vec::new(),
            timeline,
            last_bars: Vec::new(),
        }
    }

    /// Intervals written so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The header: text lines, the JSON envelope, or the CSV header row.
    pub fn begin(&mut self, w: &mut dyn Write, info: &RunInfo) -> Result<(), ReportError> {
        match self.opts.format {
            Format::Text => text_header(w, info),
            Format::Csv => csv_header(w),
            Format::Json => {
                self.json = Some(JsonStream::begin(
                    w,
                    SCHEMA,
                    SCHEMA_VERSION,
                    &json_head(info),
                    "intervals",
                )?);
                Ok(())
            }
        }
    }

    /// One interval.
    pub fn interval(
        &mut self,
        w: &mut dyn Write,
        info: &RunInfo,
        ir: &IntervalReport,
    ) -> Result<(), ReportError> {
        match self.opts.format {
            Format::Text if info.interval_mode && self.opts.compact => {
                if self.count == 0 {
                    self.columns = compact_columns(ir);
                    compact_header(w, &self.columns)?;
                }
                compact_line(w, &self.columns, ir)?;
            }
            Format::Text => {
                writeln!(w)?;
                if info.interval_mode {
                    writeln!(
                        w,
                        "--- interval {:.3} s .. {:.3} s ---",
                        ir.start_s, ir.end_s
                    )?;
                }
                render_tree(w, info, ir, &self.opts)?;
            }
            Format::Csv => csv_rows(w, info, ir)?,
            Format::Json => {
                if let Some(j) = self.json.as_mut() {
                    j.item(w, &json_interval(info, ir))?;
                }
            }
        }
        if let Some(t) = self.timeline.as_mut() {
            t.push_report(ir);
            self.last_bars = bars(info, ir, self.opts.verbose);
        }
        self.count += 1;
        Ok(())
    }

    /// Whatever closes the document (the JSON brackets), and the `--plot` file.
    pub fn end(&mut self, w: &mut dyn Write, info: &RunInfo) -> Result<(), ReportError> {
        if let Some(j) = self.json.take() {
            j.end(w)?;
        }
        if let (Some(path), Some(t)) = (self.opts.plot.as_deref(), self.timeline.as_ref()) {
            let svg = if info.interval_mode {
                t.svg()
            } else {
                tree_svg(&tree_title(info), &self.last_bars)
            };
            let svg = svg.map_err(|e| ReportError::Output {
                path: path.display().to_string(),
                source: std::io::Error::other(e),
            })?;
            tma_render::write_output(path, |f| Ok(f.write_all(svg.as_bytes())?))?;
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ shared facts

fn fmt_value(v: f64, u: Unit) -> String {
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

fn explain(
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
                let st = ir
                    .missing_states
                    .iter()
                    .find(|(m, _)| m == e)
                    .map_or(EventState::NotRecorded, |(_, s)| *s);
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
fn formula_events<'m>(model: &'m Model, formula: &'m str) -> Vec<&'m str> {
    let mut out: Vec<&'m str> = Vec::new();
    let mut todo = vec![formula];
    let mut seen_refs: Vec<&'m str> = Vec::new();
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
/// verdict, or without a value (so problems are never hidden); everything with `-v`.
fn visible(report: &Report, verbose: u8, model: &Model, requested: &[String]) -> Vec<bool> {
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
        let interesting = n.level == 1
            || verbose > 0
            || n.above_threshold != Some(false)
            || n.value.is_none()
            || forced.iter().any(|f| f.eq_ignore_ascii_case(n.name))
            || report.bottleneck.path.iter().any(|b| b == n.name);
        shown.push(parent_shown && interesting);
    }
    shown
}

/// The tree of one interval as the bars of [`tree_svg`]: the nodes the text tree shows.
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

fn share_text(s: Option<f64>) -> Option<String> {
    s.filter(|&s| s < 0.9995)
        .map(|s| format!("[{:5.1}% counted]", s * 100.0))
}

// ------------------------------------------------------------------ text

fn text_header(w: &mut dyn Write, info: &RunInfo) -> Result<(), ReportError> {
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

fn render_tree(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
    opts: &RenderOptions,
) -> Result<(), ReportError> {
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
    for (n, show) in r.nodes.iter().zip(&shown) {
        if !show {
            hidden += 1;
            continue;
        }
        let name = format!("{}{}", "  ".repeat(n.level as usize - 1), n.name);
        let value = match n.value {
            Some(v) => fmt_value(v, n.unit),
            None => "-".to_string(),
        };
        let marker = if r.bottleneck.node.as_deref() == Some(n.name) {
            "<=="
        } else if n.above_threshold == Some(false) {
            "below"
        } else {
            ""
        };
        let mut line = format!("{name:<name_w$}{value:>8}  {marker:<5}");
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
    if hidden > 0 {
        writeln!(
            w,
            "{hidden} node{} under threshold hidden; -v shows {}.",
            if hidden == 1 { "" } else { "s" },
            if hidden == 1 { "it" } else { "them" }
        )?;
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
    closing(w, info, r)?;
    render_metrics(w, info, ir)
}

/// The metrics of the request in the report, split into the grouped Info view and the
/// ranked bottleneck-cost view.
fn split_metrics<'r>(
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
fn render_metrics(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
) -> Result<(), ReportError> {
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
fn domain_note(n: &NodeResult, model: &Model) -> Option<String> {
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

/// The closing lines: the bottleneck, its locate-with events and the command to run next.
fn closing(w: &mut dyn Write, info: &RunInfo, r: &Report) -> Result<(), ReportError> {
    let b: &Bottleneck = &r.bottleneck;
    let val = |name: &str| {
        r.node(name)
            .and_then(|n| n.value.map(|v| fmt_value(v, n.unit)))
            .unwrap_or_else(|| "-".into())
    };
    let path = b.path.join(" > ");
    match &b.stop {
        StopReason::Ambiguous { first, second, gap } => {
            // Only below level 1: the parent of the close pair is the bottleneck.
            writeln!(
                w,
                "Bottleneck: {path} ({}); below it, ambiguous between {first} ({}) and {second} ({}), within {gap:.1} points.",
                b.node.as_deref().map(val).unwrap_or_default(),
                val(first),
                val(second)
            )?;
        }
        StopReason::NothingOverThreshold => {
            writeln!(w, "No bottleneck: no level-1 node is over its threshold.")?;
            return Ok(());
        }
        StopReason::Undecided { not_computed } => {
            let where_ = if path.is_empty() {
                "at level 1".to_string()
            } else {
                format!(
                    "below {path} ({})",
                    b.node.as_deref().map(val).unwrap_or_default()
                )
            };
            writeln!(
                w,
                "Bottleneck: undecided {where_}: {} could not be computed (see above), and {} be the largest.",
                not_computed.join(", "),
                if not_computed.len() == 1 { "it could" } else { "any of them could" }
            )?;
            if path.is_empty() {
                return Ok(());
            }
        }
        StopReason::NotMeasured if b.node.is_none() => {
            writeln!(
                w,
                "No bottleneck: the level-1 nodes could not be computed (see above)."
            )?;
            return Ok(());
        }
        _ => {
            if let Some(node) = &b.node {
                writeln!(w, "Bottleneck: {path} ({})", val(node))?;
                if r.node(node).is_some_and(|n| n.status == Status::OutOfRange) {
                    writeln!(
                        w,
                        "  Warning: its value is outside 0-100%, so the counts behind it are suspect (skew, multiplexing, or a wrong --cpu)."
                    )?;
                }
                if let Some(d) = r.node(node).map(|n| n.description) {
                    if !d.is_empty() {
                        writeln!(w, "  {d}")?;
                    }
                }
            }
        }
    }
    if let Some(c) = &b.close_second {
        writeln!(
            w,
            "  Close second at level 1: {} {} is within {:.1} points.",
            c.node,
            val(&c.node),
            c.gap
        )?;
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

/// One column of `--compact`: a level-1 node or a requested metric (`-m`, `-M`, `-B`).
#[derive(Debug, Clone)]
struct CompactColumn {
    /// The node's name or the metric's catalog name (how the value is found).
    key: String,
    /// The header: the node's name or the metric's short name.
    head: String,
    metric: bool,
    width: usize,
}

/// `--compact`: the level-1 nodes of the first interval, then its metrics (`-m`, `-M`, `-B`) in
/// the report's order, with their widths.
fn compact_columns(first: &IntervalReport) -> Vec<CompactColumn> {
    let col = |key: &str, head: &str, metric: bool| CompactColumn {
        key: key.to_string(),
        head: head.to_string(),
        metric,
        width: head.len().max(7),
    };
    let nodes = first.report.nodes.iter().filter(|n| n.level == 1);
    let nodes = nodes.map(|n| col(n.name, n.name, false));
    let metrics = first.report.metrics.iter();
    nodes
        .chain(metrics.map(|m| col(m.name, m.short_name, true)))
        .collect()
}

fn compact_header(w: &mut dyn Write, cols: &[CompactColumn]) -> Result<(), ReportError> {
    writeln!(w)?;
    let mut head = format!("{:>10}", "end (s)");
    for c in cols {
        head.push_str(&format!("  {:>wd$}", c.head, wd = c.width));
    }
    head.push_str("  bottleneck");
    writeln!(w, "{head}")?;
    Ok(())
}

/// One line per interval: level-1 values, metric values and the bottleneck. A value that
/// could not be computed is `-`; one computed out of its range ends in `?` (the tree view
/// says why).
fn compact_line(
    w: &mut dyn Write,
    cols: &[CompactColumn],
    ir: &IntervalReport,
) -> Result<(), ReportError> {
    use std::fmt::Write as _;
    let shown = |v: Option<f64>, unit: Unit, status: &Status| {
        v.map(|v| {
            let mark = if *status == Status::OutOfRange {
                "?"
            } else {
                ""
            };
            format!("{}{mark}", fmt_value(v, unit))
        })
    };
    let mut line = format!("{:>10.3}", ir.end_s);
    for c in cols {
        let v = if c.metric {
            let m = ir.report.metric(&c.key);
            m.and_then(|m| shown(m.value, m.unit, &m.status))
        } else {
            let n = ir.report.node(&c.key);
            n.and_then(|n| shown(n.value, n.unit, &n.status))
        };
        // Writing into a String cannot fail.
        let _ = write!(line, "  {:>wd$}", v.as_deref().unwrap_or("-"), wd = c.width);
    }
    line.push_str("  ");
    line.push_str(&bottleneck_short(&ir.report.bottleneck));
    writeln!(w, "{}", line.trim_end())?;
    Ok(())
}

fn bottleneck_short(b: &Bottleneck) -> String {
    let close = b
        .close_second
        .as_ref()
        .map(|c| format!(" (close: {})", c.node))
        .unwrap_or_default();
    match (&b.stop, &b.node) {
        (StopReason::Ambiguous { first, second, .. }, Some(n)) => {
            format!("{n} ({first} ~ {second}){close}")
        }
        (StopReason::Ambiguous { first, second, .. }, None) => {
            format!("{first} ~ {second} (ambiguous)")
        }
        (StopReason::Undecided { .. }, None) => "undecided (nodes not computed)".into(),
        (_, Some(n)) => format!("{n}{close}"),
        (StopReason::NothingOverThreshold, None) => "none over threshold".into(),
        _ => "not measured".into(),
    }
}

// ------------------------------------------------------------------ JSON

fn status_code(s: &Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::DivisionByZero => "division_by_zero",
        Status::MissingEvents => "missing_events",
        Status::MissingConstant(_) => "missing_constant",
        Status::OutOfRange => "out_of_range",
        Status::Error(_) => "error",
    }
}

/// The document's head for a run.
fn json_head(info: &RunInfo) -> StatHead {
    StatHead {
        cpu: CpuDoc {
            key: info.model.key.into(),
            name: info.model.name.into(),
            chosen: info.cpu_source.clone(),
            tma_version: info.model.tma_version.map(str::to_string),
        },
        source: info.source.clone(),
        interval_mode: info.interval_mode,
        level: info.request.level,
        nodes_requested: info.request.nodes.clone(),
        events: info
            .event_map
            .iter()
            .map(|(perf, id)| EventMapDoc {
                perf: perf.clone(),
                id: id.clone(),
            })
            .collect(),
    }
}

/// The document's sample for an interval.
fn json_interval(info: &RunInfo, ir: &IntervalReport) -> IntervalDoc {
    IntervalDoc {
        start_s: ir.start_s,
        end_s: ir.end_s,
        nodes: ir
            .report
            .nodes
            .iter()
            .map(|n| NodeDoc {
                name: n.name.into(),
                parent: n.parent.map(Cow::Borrowed),
                level: n.level,
                value: n.value,
                unit: n.unit,
                status: status_code(&n.status).into(),
                status_detail: status_text(n, ir, info.model),
                missing_events: n.missing_events.clone(),
                above_threshold: n.above_threshold,
                counted_share: n.counted_share,
                bottleneck: ir.report.bottleneck.node.as_deref() == Some(n.name),
            })
            .collect(),
        bottleneck: ir.report.bottleneck.clone(),
        metrics: metric_rows(info, ir)
            .into_iter()
            .map(|(m, kind, rank)| MetricDoc {
                name: m.name.into(),
                short_name: m.short_name.into(),
                group: m.group.into(),
                kind: kind.into(),
                rank,
                value: m.value,
                unit: m.unit,
                status: status_code(&m.status).into(),
                status_detail: metric_status_text(m, ir, info.model),
                missing_events: m.missing_events.clone(),
                counted_share: m.counted_share,
                description: m.description.into(),
            })
            .collect(),
    }
}

/// The metrics in output order with their kind and `-B` rank.
fn metric_rows<'r>(
    info: &RunInfo,
    ir: &'r IntervalReport,
) -> Vec<(&'r MetricResult, &'static str, Option<usize>)> {
    let (metrics, costs) = split_metrics(info, &ir.report);
    metrics
        .into_iter()
        .map(|m| (m, "metric", None))
        .chain(
            costs
                .into_iter()
                .enumerate()
                .map(|(i, m)| (m, "bottleneck_cost", Some(i + 1))),
        )
        .collect()
}

// ------------------------------------------------------------------ CSV

fn csv_header(w: &mut dyn Write) -> Result<(), ReportError> {
    tma_render::csv_row(
        w,
        &[
            "start_s",
            "end_s",
            "node",
            "parent",
            "level",
            "value",
            "unit",
            "status",
            "above_threshold",
            "counted_share",
            "bottleneck",
            "detail",
        ],
    )?;
    Ok(())
}

fn unit_code(u: Unit) -> &'static str {
    match u {
        Unit::PercentSlots => "percent_slots",
        Unit::Percent => "percent",
        Unit::Number => "number",
    }
}

fn csv_rows(w: &mut dyn Write, info: &RunInfo, ir: &IntervalReport) -> Result<(), ReportError> {
    csv_node_rows(w, info, ir)?;
    let (start, end) = (ir.start_s.to_string(), ir.end_s.to_string());
    // Metric rows: the node column holds the metric name, the parent column its group, the
    // level column the `-B` rank, the role column `metric` or `bottleneck_cost`.
    for (m, kind, rank) in metric_rows(info, ir) {
        tma_render::csv_row(
            w,
            &[
                start.as_str(),
                end.as_str(),
                m.name,
                m.group,
                &rank.map(|r| r.to_string()).unwrap_or_default(),
                &m.value.map(|v| v.to_string()).unwrap_or_default(),
                unit_code(m.unit),
                status_code(&m.status),
                "",
                &m.counted_share.map(|s| s.to_string()).unwrap_or_default(),
                kind,
                &metric_status_text(m, ir, info.model).unwrap_or_default(),
            ],
        )?;
    }
    Ok(())
}

fn csv_node_rows(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
) -> Result<(), ReportError> {
    let b = &ir.report.bottleneck;
    let (start, end) = (ir.start_s.to_string(), ir.end_s.to_string());
    for n in &ir.report.nodes {
        let role = if b.node.as_deref() == Some(n.name) {
            "bottleneck"
        } else if b.path.iter().any(|p| p == n.name) {
            "path"
        } else {
            ""
        };
        let unit = unit_code(n.unit);
        let above = match n.above_threshold {
            Some(true) => "true",
            Some(false) => "false",
            None => "",
        };
        tma_render::csv_row(
            w,
            &[
                start.as_str(),
                end.as_str(),
                n.name,
                n.parent.unwrap_or_default(),
                &n.level.to_string(),
                &n.value.map(|v| v.to_string()).unwrap_or_default(),
                unit,
                status_code(&n.status),
                above,
                &n.counted_share.map(|s| s.to_string()).unwrap_or_default(),
                role,
                &status_text(n, ir, info.model).unwrap_or_default(),
            ],
        )?;
    }
    Ok(())
}
