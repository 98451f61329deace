//! The TMA tree of `tma stat`, as text, JSON (`tma.stat` v1) and CSV. Shared by the import
//! path and live counting: both build a [`StatRun`] (one [`tma_metrics::Report`] per
//! interval) and call [`render_text`], [`render_json`] or [`render_csv`].

use std::io::Write;

use serde::Serialize;
use tma_catalog::{Model, Unit};
use tma_metrics::{Bottleneck, Constants, NodeResult, Report, Selection, Status, StopReason};
use tma_perf::{Interval, ReadingStatus};
use tma_report::ReportError;

/// Which part of the tree to compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub level: u8,
    pub nodes: Vec<String>,
    /// Topology of the measured machine, for the formulas' `#smt_on` / `#num_cpus_online`
    /// constants: discovered for live runs, stored in snapshots, given with `--smt` on import.
    /// `None` means unknown: SMT off and one CPU are assumed (see `Request::constants`).
    pub topology: Option<tma_perf::snapshot::Topology>,
}

impl Request {
    /// The formula constants for one interval of this request.
    pub fn constants(&self, duration_s: Option<f64>) -> Constants {
        let mut c = Constants {
            duration_s,
            ..Constants::default()
        };
        if let Some(t) = &self.topology {
            c.smt_on = t.smt;
            c.threads_per_core = match (t.smt, t.cores) {
                (false, _) => 1,
                (true, 0) => 2,
                (true, cores) => (t.cpus / cores).max(2),
            };
            c.num_cpus_online = t.cpus.max(1);
            c.num_cores = t.cores.max(1);
            c.num_sockets = t.sockets.max(1);
        }
        c
    }

    pub fn selection(&self) -> Selection {
        Selection {
            max_level: self.level,
            nodes: self.nodes.clone(),
        }
    }
}

/// How to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// 0: hide nodes under threshold; 1+: show every node.
    pub verbose: u8,
    /// One line per interval instead of one tree per interval.
    pub compact: bool,
}

/// How one event of an interval was (not) measured, for status texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::enum_variant_names)] // the names mirror perf's `<not counted>` wording
pub enum EventState {
    /// Absent from the data.
    NotRecorded,
    NotCounted,
    NotSupported,
}

/// One evaluated stretch of time.
#[derive(Debug, Clone)]
pub struct IntervalReport {
    pub start_s: f64,
    pub end_s: f64,
    pub report: Report,
    /// Why each missing event of the report is missing (by canonical id).
    pub missing_states: Vec<(String, EventState)>,
    /// Events that counted exactly 0 (to explain divisions by zero).
    pub zero_events: Vec<String>,
    /// Every counted event of the interval is 0.
    pub all_zero: bool,
}

/// Everything the renderers need: the model, where the data came from, and the reports.
#[derive(Debug, Clone)]
pub struct StatRun {
    pub model: &'static Model,
    /// How the model was chosen: "from --cpu", "identified from this machine"...
    pub cpu_source: String,
    /// Where the data came from: "imported from FILE (perf stat -x, CSV)", "counted live".
    pub source: String,
    /// Interval data (`-I`): one report per interval.
    pub interval_mode: bool,
    pub request: Request,
    pub intervals: Vec<IntervalReport>,
    /// The command `tma locate` should run, when known (else `CMD`).
    pub command: Option<String>,
    /// For imported data: each perf event spec and the event id it was read as.
    pub event_map: Vec<(String, String)>,
}

/// [`tma_metrics::Values`] over one interval's aggregated readings.
struct IntervalValues<'a>(&'a Interval);

impl tma_metrics::Values for IntervalValues<'_> {
    fn event(&self, id: &str) -> Option<f64> {
        self.0.get(id).and_then(|r| r.value)
    }
    fn counted_share(&self, id: &str) -> Option<f64> {
        self.0.get(id).and_then(|r| r.counted_share)
    }
}

impl StatRun {
    /// Evaluate the requested tree on every interval (formulas are compiled once per model
    /// and cached by `tma_metrics`).
    pub fn evaluate(
        model: &'static Model,
        cpu_source: &str,
        source: String,
        interval_mode: bool,
        intervals: &[Interval],
        request: &Request,
    ) -> anyhow::Result<StatRun> {
        let sel = request.selection();
        let required = tma_metrics::required_events(model, &sel)?;
        let present = required
            .iter()
            .any(|id| intervals.iter().any(|iv| iv.get(id).is_some()));
        if !present {
            let some: Vec<&str> = required.iter().take(4).map(String::as_str).collect();
            anyhow::bail!(
                "the data holds none of the {} events the {} level-{} tree needs (e.g. {}); \
                 record them with the command from `tma events --cpu {} -l {} --perf-cmd`",
                required.len(),
                model.key,
                request.level,
                some.join(", "),
                model.key,
                request.level
            );
        }
        // Prepared once (compiled formulas, node order), evaluated per interval.
        let evaluator = tma_metrics::Evaluator::new(model, &sel)?;
        let mut out = Vec::with_capacity(intervals.len());
        for iv in intervals {
            let consts = request.constants(duration_of(iv));
            let report = evaluator.evaluate(&IntervalValues(iv), &consts);
            out.push(interval_report(iv, report));
        }
        Ok(StatRun {
            model,
            cpu_source: cpu_source.to_string(),
            source,
            interval_mode,
            request: request.clone(),
            intervals: out,
            command: None,
            event_map: Vec::new(),
        })
    }
}

fn duration_of(iv: &Interval) -> Option<f64> {
    if iv.end_s > iv.start_s {
        return Some(iv.end_s - iv.start_s);
    }
    iv.get("duration_time")
        .and_then(|r| r.value)
        .map(|ns| ns / 1e9)
}

/// Pair a report with the facts about its interval that status texts need.
pub fn interval_report(iv: &Interval, report: Report) -> IntervalReport {
    let mut missing_states = Vec::new();
    for n in &report.nodes {
        for e in &n.missing_events {
            if missing_states.iter().any(|(m, _)| m == e) {
                continue;
            }
            let st = match iv.get(e).map(|r| r.status) {
                Some(ReadingStatus::NotSupported) => EventState::NotSupported,
                Some(ReadingStatus::NotCounted) => EventState::NotCounted,
                _ => EventState::NotRecorded,
            };
            missing_states.push((e.clone(), st));
        }
    }
    let zero_events = iv
        .readings
        .iter()
        .filter(|r| r.cpu.is_none() && r.tid.is_none() && r.value == Some(0.0))
        .map(|r| r.event.clone())
        .collect();
    let counted: Vec<f64> = iv
        .readings
        .iter()
        .filter(|r| r.cpu.is_none() && r.tid.is_none())
        .filter_map(|r| r.value)
        .collect();
    IntervalReport {
        start_s: iv.start_s,
        end_s: iv.end_s,
        report,
        missing_states,
        all_zero: !counted.is_empty() && counted.iter().all(|&v| v == 0.0),
        zero_events,
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
    match &n.status {
        Status::Ok => None,
        Status::OutOfRange => Some("out of range: counter skew or bad counts?".into()),
        Status::MissingEvents => {
            let mut groups: Vec<(EventState, Vec<&str>)> = Vec::new();
            for e in &n.missing_events {
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
                .node(&n.name)
                .map(|d| formula_events(model, d.formula))
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
            || forced.iter().any(|f| f.eq_ignore_ascii_case(&n.name))
            || report.bottleneck.path.iter().any(|b| b == &n.name);
        shown.push(parent_shown && interesting);
    }
    shown
}

fn share_text(s: Option<f64>) -> Option<String> {
    s.filter(|&s| s < 0.9995)
        .map(|s| format!("[{:5.1}% counted]", s * 100.0))
}

// ------------------------------------------------------------------ text

/// The indented tree (or compact lines) with header and closing lines.
pub fn render_text(
    w: &mut dyn Write,
    run: &StatRun,
    opts: &RenderOptions,
) -> Result<(), ReportError> {
    let m = run.model;
    writeln!(
        w,
        "{} ({}, {}), {}",
        m.name, m.key, run.cpu_source, run.source
    )?;
    let levels = if run.request.level == 1 {
        "level 1".to_string()
    } else {
        format!("levels 1-{}", run.request.level)
    };
    let subset = if run.request.nodes.is_empty() {
        String::new()
    } else {
        format!(" under {}", run.request.nodes.join(", "))
    };
    writeln!(
        w,
        "TMA {levels}{subset}; values in % of pipeline slots unless noted; `below` = under threshold"
    )?;
    if run.interval_mode && opts.compact {
        return render_compact(w, run);
    }
    let many = run.intervals.len() > 1 || run.interval_mode;
    for ir in &run.intervals {
        writeln!(w)?;
        if many {
            writeln!(
                w,
                "--- interval {:.3} s .. {:.3} s ---",
                ir.start_s, ir.end_s
            )?;
        }
        render_tree(w, run, ir, opts)?;
    }
    Ok(())
}

fn render_tree(
    w: &mut dyn Write,
    run: &StatRun,
    ir: &IntervalReport,
    opts: &RenderOptions,
) -> Result<(), ReportError> {
    let r = &ir.report;
    let shown = visible(r, opts.verbose, run.model, &run.request.nodes);
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
        let marker = if r.bottleneck.node.as_deref() == Some(n.name.as_str()) {
            "<=="
        } else if n.above_threshold == Some(false) {
            "below"
        } else {
            ""
        };
        let mut line = format!("{name:<name_w$}{value:>8}  {marker:<5}");
        if let Some(d) = domain_note(n, run.model) {
            line.push_str("  ");
            line.push_str(&d);
        }
        if let Some(s) = share_text(n.counted_share) {
            line.push_str("  ");
            line.push_str(&s);
        }
        if let Some(s) = status_text(n, ir, run.model) {
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
            run.model.key, run.request.level
        )?;
    }
    closing(w, run, r)
}

/// For a node not measured in slots, what its percentage is of (`(% of cycles)`).
fn domain_note(n: &NodeResult, model: &Model) -> Option<String> {
    if n.unit != Unit::Percent {
        return None;
    }
    let domain = model.node(&n.name).map_or("", |d| d.count_domain);
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
fn closing(w: &mut dyn Write, run: &StatRun, r: &Report) -> Result<(), ReportError> {
    let b: &Bottleneck = &r.bottleneck;
    let val = |name: &str| {
        r.node(name)
            .and_then(|n| n.value.map(|v| fmt_value(v, n.unit)))
            .unwrap_or_else(|| "-".into())
    };
    let path = b.path.join(" > ");
    match &b.stop {
        StopReason::Ambiguous { first, second, gap } => {
            if path.is_empty() {
                writeln!(
                    w,
                    "Bottleneck: ambiguous between {first} ({}) and {second} ({}), within {gap:.1} points (5-point rule).",
                    val(first),
                    val(second)
                )?;
            } else {
                writeln!(
                    w,
                    "Bottleneck: {path} ({}); below it, ambiguous between {first} ({}) and {second} ({}), within {gap:.1} points.",
                    b.node.as_deref().map(val).unwrap_or_default(),
                    val(first),
                    val(second)
                )?;
            }
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
                if let Some(d) = r.node(node).map(|n| n.description.as_str()) {
                    if !d.is_empty() {
                        writeln!(w, "  {d}")?;
                    }
                }
            }
        }
    }
    let cmd = run.command.as_deref().unwrap_or("CMD");
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
                run.model.key
            )?;
        }
    } else {
        let from = match &b.locate_with_node {
            Some(n) if Some(n) != b.node.as_ref() => format!(" (from {n})"),
            _ => String::new(),
        };
        writeln!(w, "Locate with: {}{from}", b.locate_with.join(", "))?;
    }
    let cpu = if run.cpu_source.contains("this machine") {
        String::new()
    } else {
        format!(" --cpu {}", run.model.key)
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
        if b.stop == StopReason::Leaf && run.model.children(Some(node)).next().is_some() {
            writeln!(
                w,
                "Deeper: {node} has children at level {}; record them with `tma events --cpu {} -l {} --nodes {node} --perf-cmd`.",
                run.request.level + 1,
                run.model.key,
                run.request.level + 1
            )?;
        }
    }
    Ok(())
}

/// One line per interval: level-1 values and the bottleneck.
fn render_compact(w: &mut dyn Write, run: &StatRun) -> Result<(), ReportError> {
    let Some(first) = run.intervals.first() else {
        return Ok(());
    };
    let cols: Vec<&NodeResult> = first.report.nodes.iter().filter(|n| n.level == 1).collect();
    let widths: Vec<usize> = cols.iter().map(|n| n.name.len().max(7)).collect();
    writeln!(w)?;
    let mut head = format!("{:>10}", "end (s)");
    for (n, wd) in cols.iter().zip(&widths) {
        head.push_str(&format!("  {:>wd$}", n.name));
    }
    head.push_str("  bottleneck");
    writeln!(w, "{head}")?;
    for ir in &run.intervals {
        let mut line = format!("{:>10.3}", ir.end_s);
        for (c, wd) in cols.iter().zip(&widths) {
            let v = ir
                .report
                .node(&c.name)
                .and_then(|n| n.value.map(|v| fmt_value(v, n.unit)))
                .unwrap_or_else(|| "-".into());
            line.push_str(&format!("  {v:>wd$}"));
        }
        line.push_str("  ");
        line.push_str(&bottleneck_short(&ir.report.bottleneck));
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

fn bottleneck_short(b: &Bottleneck) -> String {
    match (&b.stop, &b.node) {
        (StopReason::Ambiguous { first, second, .. }, _) => {
            format!("{first} ~ {second} (ambiguous)")
        }
        (StopReason::Undecided { .. }, None) => "undecided (nodes not computed)".into(),
        (_, Some(n)) => n.clone(),
        (StopReason::NothingOverThreshold, None) => "none over threshold".into(),
        _ => "not measured".into(),
    }
}

// ------------------------------------------------------------------ JSON

#[derive(Serialize)]
struct StatJson<'a> {
    cpu: CpuJson<'a>,
    source: &'a str,
    interval_mode: bool,
    level: u8,
    nodes_requested: &'a [String],
    /// Imported data: how each perf event spec was read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    events: Vec<EventMapJson<'a>>,
    intervals: Vec<IntervalJson<'a>>,
}

#[derive(Serialize)]
struct EventMapJson<'a> {
    perf: &'a str,
    id: &'a str,
}

#[derive(Serialize)]
struct CpuJson<'a> {
    key: &'a str,
    name: &'a str,
    chosen: &'a str,
}

#[derive(Serialize)]
struct IntervalJson<'a> {
    start_s: f64,
    end_s: f64,
    nodes: Vec<NodeJson<'a>>,
    bottleneck: &'a Bottleneck,
}

#[derive(Serialize)]
struct NodeJson<'a> {
    name: &'a str,
    parent: Option<&'a str>,
    level: u8,
    value: Option<f64>,
    unit: Unit,
    /// `ok`, `division_by_zero`, `missing_events`, `missing_constant`, `out_of_range`, `error`.
    status: &'static str,
    /// Human explanation when the status is not `ok`.
    status_detail: Option<String>,
    missing_events: &'a [String],
    above_threshold: Option<bool>,
    counted_share: Option<f64>,
    bottleneck: bool,
}

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

/// `tma.stat` version 1: every node of every interval, full precision.
pub fn render_json(
    w: &mut dyn Write,
    run: &StatRun,
    _opts: &RenderOptions,
) -> Result<(), ReportError> {
    let doc = StatJson {
        cpu: CpuJson {
            key: run.model.key,
            name: run.model.name,
            chosen: &run.cpu_source,
        },
        source: &run.source,
        interval_mode: run.interval_mode,
        level: run.request.level,
        nodes_requested: &run.request.nodes,
        events: run
            .event_map
            .iter()
            .map(|(perf, id)| EventMapJson { perf, id })
            .collect(),
        intervals: run
            .intervals
            .iter()
            .map(|ir| IntervalJson {
                start_s: ir.start_s,
                end_s: ir.end_s,
                nodes: ir
                    .report
                    .nodes
                    .iter()
                    .map(|n| NodeJson {
                        name: &n.name,
                        parent: n.parent.as_deref(),
                        level: n.level,
                        value: n.value,
                        unit: n.unit,
                        status: status_code(&n.status),
                        status_detail: status_text(n, ir, run.model),
                        missing_events: &n.missing_events,
                        above_threshold: n.above_threshold,
                        counted_share: n.counted_share,
                        bottleneck: ir.report.bottleneck.node.as_deref() == Some(&n.name),
                    })
                    .collect(),
                bottleneck: &ir.report.bottleneck,
            })
            .collect(),
    };
    tma_report::write_json(w, "tma.stat", 1, &doc)
}

// ------------------------------------------------------------------ CSV

/// One row per node (per interval), full precision.
pub fn render_csv(
    w: &mut dyn Write,
    run: &StatRun,
    _opts: &RenderOptions,
) -> Result<(), ReportError> {
    tma_report::csv_row(
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
    for ir in &run.intervals {
        let b = &ir.report.bottleneck;
        for n in &ir.report.nodes {
            let role = if b.node.as_deref() == Some(n.name.as_str()) {
                "bottleneck"
            } else if b.path.iter().any(|p| p == &n.name) {
                "path"
            } else {
                ""
            };
            let unit = match n.unit {
                Unit::PercentSlots => "percent_slots",
                Unit::Percent => "percent",
                Unit::Number => "number",
            };
            tma_report::csv_row(
                w,
                &[
                    ir.start_s.to_string(),
                    ir.end_s.to_string(),
                    n.name.clone(),
                    n.parent.clone().unwrap_or_default(),
                    n.level.to_string(),
                    n.value.map(|v| v.to_string()).unwrap_or_default(),
                    unit.to_string(),
                    status_code(&n.status).to_string(),
                    n.above_threshold.map(|b| b.to_string()).unwrap_or_default(),
                    n.counted_share.map(|s| s.to_string()).unwrap_or_default(),
                    role.to_string(),
                    status_text(n, ir, run.model).unwrap_or_default(),
                ],
            )?;
        }
    }
    Ok(())
}
