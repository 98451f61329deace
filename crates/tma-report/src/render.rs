//! The page (one `askama` template per section kind, put together by the page template) and
//! `--svg` (plotters, through [`tma_stat::render::plot`]). Every text taken from the inputs
//! goes through askama's HTML escaping; the only markup inserted unescaped is what this
//! crate makes: the SVG of plotters and the section fragments rendered by the templates.

use std::io::Write;

use askama::Template;
use serde::Serialize;
use tma_bench::doc::BenchDoc;
use tma_bench::Figure;
use tma_diff::doc::{DiffDoc, ProfileDiffDoc, SideDoc};
use tma_diff::{Row, Significance, Summary};
use tma_stat::render::plot::{self, Bar, Panel, Timeline};

use crate::page::{Document, LocateView, Report, Section, StatView, TreeRow};
use crate::ReportError;

fn terr(e: askama::Error) -> ReportError {
    ReportError::Template(e.to_string())
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// A value in its unit, for text.
fn value_text(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "-".into(),
        Some(v) if tma_catalog::Unit::names_percent(unit) => pct(v),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// A bar width in % of the scale, clamped to 0..=100.
fn width(v: f64, scale: f64) -> String {
    let w = if scale > 0.0 { v / scale * 100.0 } else { 0.0 };
    format!("{:.2}", w.clamp(0.0, 100.0))
}

/// JSON for a `<script type="application/json">` block: `<` escaped so that no `</script>`
/// (or comment start) can end the block early.
fn script_json<T: Serialize>(v: &T) -> Result<String, ReportError> {
    let s = serde_json::to_string(v).map_err(|e| ReportError::Template(e.to_string()))?;
    Ok(s.replace('<', "\\u003c"))
}

// ------------------------------------------------------------------ page

#[derive(Template)]
#[template(path = "page.html")]
struct PageT<'a> {
    title: &'a str,
    version: &'a str,
    toc: Vec<(String, String)>,
    sections: Vec<String>,
}

/// The page: one self-contained HTML document.
pub fn html(w: &mut dyn Write, r: &Report) -> Result<(), ReportError> {
    let mut toc = Vec::new();
    let mut sections = Vec::new();
    for (i, s) in r.sections.iter().enumerate() {
        let id = format!("s{}", i + 1);
        let (heading, body) = match s {
            Section::Stat(v) => stat(&id, v)?,
            Section::Diff(d) => diff(&id, d)?,
            Section::ProfileDiff(d) => profile_diff(&id, d)?,
            Section::Locate(l) => locate(&id, l)?,
            Section::Bench(b) => bench(&id, b)?,
            Section::Regions(r) => crate::regions::section(&id, r)?,
        };
        toc.push((id, heading));
        sections.push(body);
    }
    let page = PageT {
        title: &r.title,
        version: env!("CARGO_PKG_VERSION"),
        toc,
        sections,
    };
    let s = page.render().map_err(terr)?;
    w.write_all(s.as_bytes())?;
    Ok(())
}

/// `--svg`: the timeline of the first input with intervals, else the tree of the first one
/// with a tree.
pub fn svg(r: &Report) -> Result<String, ReportError> {
    let stats: Vec<&StatView> = r
        .sections
        .iter()
        .filter_map(|s| match s {
            Section::Stat(v) => Some(v.as_ref()),
            _ => None,
        })
        .collect();
    if let Some(t) = stats.iter().find_map(|v| v.timeline.as_ref()) {
        return t.svg().map_err(|e| ReportError::Plot(e.to_string()));
    }
    if let Some(v) = stats.first() {
        return plot::tree_svg(&tree_title(v), &tree_bars(v))
            .map_err(|e| ReportError::Plot(e.to_string()));
    }
    let kinds: Vec<&str> = r.sections.iter().map(Section::kind).collect();
    Err(ReportError::NothingToDraw {
        kinds: kinds.join(", "),
    })
}

/// The last part of a path, for headings (the meta line holds the whole path).
fn file_name(path: &str) -> &str {
    path.rsplit('/').find(|s| !s.is_empty()).unwrap_or(path)
}

fn tree_title(v: &StatView) -> String {
    let what = if v.samples > 1 {
        format!(", mean of {} intervals", v.samples)
    } else {
        String::new()
    };
    format!(
        "TMA tree: {} ({}), {}{what}",
        v.cpu_name, v.cpu_key, v.source
    )
}

/// The tree as bars: the nodes on the bottleneck path, over threshold, or at level 1.
fn tree_bars(v: &StatView) -> Vec<Bar> {
    v.rows
        .iter()
        .filter(|r| shown(r))
        .map(|r| Bar {
            name: r.name.clone(),
            level: r.level,
            value: r.value,
            threshold: r.threshold,
            above_threshold: r.above_threshold,
            on_path: r.on_path,
            note: if r.bottleneck {
                "bottleneck".into()
            } else {
                String::new()
            },
        })
        .collect()
}

/// Whether the static tree shows a row (as `tma stat` without -v does).
fn shown(r: &TreeRow) -> bool {
    r.level == 1 || r.on_path || r.above_threshold != Some(false) || r.value.is_none()
}

// ------------------------------------------------------------------ stat

struct TreeItem {
    /// `</details>` tags closing earlier subtrees before this row (trusted markup).
    closers: String,
    /// Whether this row opens a `<details>` holding its children.
    opens: bool,
    open: bool,
    name: String,
    level: u8,
    value: String,
    /// Bar width (% of the scale); empty for values that are not shares.
    bar: Option<String>,
    /// Threshold mark position (% of the scale).
    thr: Option<String>,
    thr_text: String,
    class: &'static str,
    share: String,
    status: String,
    description: String,
}

struct PanelView {
    id: String,
    title: String,
    svg: String,
    data: String,
    summary: Vec<SummaryRow>,
}

struct SummaryRow {
    name: String,
    color: String,
    mean: String,
    min: String,
    max: String,
}

#[derive(Serialize)]
struct PanelData<'a> {
    width: u32,
    x0: i32,
    x1: i32,
    t0: f64,
    t1: f64,
    names: Vec<&'a str>,
    /// [start, end, value per name (null: none)] per column.
    columns: Vec<Vec<Option<f64>>>,
}

struct MetricItem {
    name: String,
    value: String,
    description: String,
}

#[derive(Template)]
#[template(path = "stat.html")]
struct StatT<'a> {
    id: &'a str,
    heading: String,
    meta: String,
    bottleneck: String,
    /// Where the bottleneck changes over the samples (empty when it never does).
    phases: String,
    items: Vec<TreeItem>,
    final_closers: String,
    panels: Vec<PanelView>,
    metrics: Vec<MetricItem>,
    scale: String,
}

const PANEL_SIZE: (u32, u32) = (960, 360);

fn panels(id: &str, t: &Timeline) -> Result<Vec<PanelView>, ReportError> {
    let mut out = Vec::new();
    for (k, panel) in t.panels().iter().enumerate() {
        let (svg, area) = t
            .panel_svg(panel, PANEL_SIZE)
            .map_err(|e| ReportError::Plot(e.to_string()))?;
        let series = t.panel_series(panel);
        let cols = t.columns();
        let columns: Vec<Vec<Option<f64>>> = cols
            .iter()
            .map(|c| {
                let mut v = vec![Some(c.start_s), Some(c.end_s)];
                v.extend(series.iter().map(|&i| {
                    c.values
                        .get(i)
                        .copied()
                        .flatten()
                        .map(|x| (x * 100.0).round() / 100.0)
                }));
                v
            })
            .collect();
        let names: Vec<&str> = series.iter().map(|&i| t.nodes[i].name.as_str()).collect();
        let data = PanelData {
            width: PANEL_SIZE.0,
            x0: area.x0,
            x1: area.x1,
            t0: area.t0,
            t1: area.t1,
            names: names.clone(),
            columns,
        };
        let summary = series
            .iter()
            .enumerate()
            .map(|(j, &i)| {
                let vals: Vec<f64> = cols
                    .iter()
                    .filter_map(|c| c.values.get(i).copied().flatten())
                    .collect();
                let weights: Vec<f64> = cols
                    .iter()
                    .filter(|c| c.values.get(i).copied().flatten().is_some())
                    .map(|c| f64::from(c.n))
                    .collect();
                let total: f64 = weights.iter().sum();
                let mean = (total > 0.0)
                    .then(|| vals.iter().zip(&weights).map(|(v, w)| v * w).sum::<f64>() / total);
                let (r, g, b) = t.series_color_in(panel, j);
                SummaryRow {
                    name: t.nodes[i].name.clone(),
                    color: format!("#{r:02x}{g:02x}{b:02x}"),
                    mean: mean.map_or("-".into(), pct),
                    min: vals
                        .iter()
                        .copied()
                        .reduce(f64::min)
                        .map_or("-".into(), pct),
                    max: vals
                        .iter()
                        .copied()
                        .reduce(f64::max)
                        .map_or("-".into(), pct),
                }
            })
            .collect();
        out.push(PanelView {
            id: format!("{id}-tl{k}"),
            title: match panel {
                Panel::Level1 => "Level 1".into(),
                Panel::ChildrenOf(p) => format!("{p}: its children"),
            },
            svg: viewbox(&svg),
            data: script_json(&data)?,
            summary,
        });
    }
    Ok(out)
}

/// Give a plotters SVG a `viewBox` (when it has none) so that it scales with the page.
fn viewbox(svg: &str) -> String {
    let Some(end) = svg.find('>') else {
        return svg.to_string();
    };
    let open = &svg[..end];
    if open.contains("viewBox") || !open.starts_with("<svg") {
        return svg.to_string();
    }
    let attr = |name: &str| -> Option<String> {
        let i = open.find(&format!(" {name}=\""))? + name.len() + 3;
        let j = open[i..].find('"')? + i;
        Some(open[i..j].to_string())
    };
    match (attr("width"), attr("height")) {
        (Some(w), Some(h)) => format!("{open} viewBox=\"0 0 {w} {h}\"{}", &svg[end..]),
        _ => svg.to_string(),
    }
}

/// The `height` attribute of the first `<svg>` element of a document.
fn svg_height(doc: &str) -> Option<u32> {
    let open = &doc[doc.find("<svg")?..];
    let open = &open[..open.find('>')?];
    let i = open.find(" height=\"")? + " height=\"".len();
    let j = open[i..].find('"')? + i;
    open[i..j].parse().ok()
}

fn stat(id: &str, v: &StatView) -> Result<(String, String), ReportError> {
    let scale = v
        .rows
        .iter()
        .filter(|r| tma_catalog::Unit::names_percent(&r.unit))
        .filter_map(|r| r.value)
        .fold(100.0f64, f64::max);
    let mut items = Vec::with_capacity(v.rows.len());
    let mut stack: Vec<&str> = Vec::new();
    for r in &v.rows {
        let mut closers = String::new();
        while let Some(top) = stack.last() {
            if r.parent
                .as_deref()
                .is_some_and(|p| p.eq_ignore_ascii_case(top))
            {
                break;
            }
            stack.pop();
            closers.push_str("</div></details>");
        }
        if r.has_children {
            stack.push(&r.name);
        }
        let class = if r.bottleneck {
            "bottleneck"
        } else if r.on_path {
            "path"
        } else if r.above_threshold == Some(true) {
            "above"
        } else if r.above_threshold == Some(false) {
            "below"
        } else {
            "unknown"
        };
        let percent = tma_catalog::Unit::names_percent(&r.unit);
        items.push(TreeItem {
            closers,
            opens: r.has_children,
            open: r.level == 1 || r.on_path || r.above_threshold == Some(true),
            name: r.name.clone(),
            level: r.level,
            value: value_text(r.value, &r.unit),
            bar: r.value.filter(|_| percent).map(|x| width(x, scale)),
            thr: r.threshold.filter(|_| percent).map(|x| width(x, scale)),
            thr_text: r
                .threshold
                .map(|t| format!("threshold {}", pct(t)))
                .unwrap_or_default(),
            class,
            share: r
                .counted_share
                .filter(|s| *s < 0.9995)
                .map(|s| format!("{:.1}% counted", s * 100.0))
                .unwrap_or_default(),
            status: match (&r.status_detail, r.status.as_str()) {
                (Some(d), _) => d.clone(),
                (None, "ok") => String::new(),
                (None, s) => s.replace('_', " "),
            },
            description: r.description.clone(),
        });
    }
    let final_closers = "</div></details>".repeat(stack.len());
    let what = if v.samples > 1 {
        format!(
            "{} {}; the tree shows their means",
            v.samples,
            if v.interval_mode {
                "intervals"
            } else {
                "samples"
            }
        )
    } else {
        "one sample".into()
    };
    // Worded as `tma stat` words it, from the verdict computed in the library.
    let val = |name: &str| {
        v.rows
            .iter()
            .find(|r| r.name == name)
            .map_or_else(|| "-".to_string(), |r| value_text(r.value, &r.unit))
    };
    let bottleneck = v.verdict.wording(&val).paragraph();
    let what_samples = if v.interval_mode {
        "intervals"
    } else {
        "samples"
    };
    let phases = tma_metrics::phases_text(&v.phases, what_samples).unwrap_or_default();
    let t = StatT {
        id,
        heading: format!(
            "{}: {}",
            if v.timeline.is_some() {
                "Intervals"
            } else {
                "TMA tree"
            },
            file_name(&v.file)
        ),
        meta: if v.source.contains(&v.file) {
            format!("{} ({}), {}; {what}", v.cpu_name, v.cpu_key, v.source)
        } else {
            format!(
                "{}: {} ({}), {}; {what}",
                v.file, v.cpu_name, v.cpu_key, v.source
            )
        },
        bottleneck,
        phases,
        items,
        final_closers,
        panels: match &v.timeline {
            Some(t) => panels(id, t)?,
            None => Vec::new(),
        },
        metrics: v
            .metrics
            .iter()
            .map(|m| MetricItem {
                name: m.name.clone(),
                value: value_text(m.value, &m.unit),
                description: m.description.clone(),
            })
            .collect(),
        scale: pct(scale),
    };
    let heading = t.heading.clone();
    Ok((heading, t.render().map_err(terr)?))
}

// ------------------------------------------------------------------ diff

struct DiffItem {
    name: String,
    level: u8,
    before: String,
    after: String,
    before_bar: Option<String>,
    after_bar: Option<String>,
    delta: String,
    /// `better`, `worse` or empty (no change, or no known better way: [`better_when`]).
    direction: &'static str,
    p: String,
    /// `significant`, `not_significant` or `unknown`.
    verdict: String,
    why: String,
}

#[derive(Template)]
#[template(path = "diff.html")]
struct DiffT<'a> {
    id: &'a str,
    heading: String,
    file: &'a str,
    before: String,
    after: String,
    bottleneck: String,
    test: String,
    nodes: Vec<DiffItem>,
    metrics: Vec<DiffItem>,
    gates: Vec<(bool, String)>,
}

/// Which way is better for a row of a diff: `Some(true)` when more is better (Retiring at
/// level 1; IPC-like metrics), `Some(false)` when less is (a bound node or anything under
/// one; CPI, miss rates, latencies and bottleneck costs), `None` where tma does not know (the
/// children of Retiring: a larger share of heavy or light operations is neither; most
/// metrics). `rows` is the whole table, for the ancestors.
fn better_when(r: &Row, rows: &[Row]) -> Option<bool> {
    let lower = |s: &str| s.to_ascii_lowercase();
    if r.level == 0 {
        let m = lower(&r.name);
        let m = m.rsplit('.').next().unwrap_or(&m);
        return if ["ipc", "coreipc", "ilp", "ipc_ratio"].contains(&m) {
            Some(true)
        } else if m == "cpi"
            || m.contains("mpki")
            || m.contains("latency")
            || m.starts_with("bottleneck_")
        {
            Some(false)
        } else {
            None
        };
    }
    // The level-1 node above this one.
    let mut top = r;
    for _ in 0..8 {
        match top
            .parent
            .as_deref()
            .and_then(|p| rows.iter().find(|x| x.name.eq_ignore_ascii_case(p)))
        {
            Some(up) => top = up,
            None => break,
        }
    }
    let top_name = lower(&top.name);
    if top_name == "retiring" {
        return (top.name == r.name).then_some(true);
    }
    (top_name.contains("bound")
        || top_name.contains("bad_speculation")
        || top_name.contains("contention"))
    .then_some(false)
}

fn diff_items(rows: &[Row], scale: f64) -> Vec<DiffItem> {
    rows.iter()
        .map(|r| {
            let percent = tma_catalog::Unit::names_percent(&r.unit);
            let mean = |s: Option<Summary>| s.map(|s| s.mean);
            let n = |s: Option<Summary>| s.map_or(0, |s| s.n);
            let (verdict, why) = match &r.significance {
                Significance::Significant => ("significant", ""),
                Significance::NotSignificant => ("not_significant", ""),
                Significance::Unknown { reason } => ("unknown", reason.as_str()),
            };
            let delta = match (r.delta, percent) {
                (None, _) => "-".to_string(),
                (Some(d), true) => format!("{d:+.1} pts"),
                (Some(d), false) => format!("{d:+.3}"),
            };
            let rel = r
                .relative
                .map(|x| format!(" ({:+.1}%)", x * 100.0))
                .unwrap_or_default();
            DiffItem {
                name: r.name.clone(),
                level: r.level,
                before: format!(
                    "{} (n={})",
                    value_text(mean(r.before), &r.unit),
                    n(r.before)
                ),
                after: format!("{} (n={})", value_text(mean(r.after), &r.unit), n(r.after)),
                before_bar: mean(r.before).filter(|_| percent).map(|x| width(x, scale)),
                after_bar: mean(r.after).filter(|_| percent).map(|x| width(x, scale)),
                delta: format!("{delta}{rel}"),
                direction: match (r.delta, better_when(r, rows)) {
                    (Some(d), Some(more_is_better)) if d != 0.0 => {
                        if (d > 0.0) == more_is_better {
                            "better"
                        } else {
                            "worse"
                        }
                    }
                    _ => "",
                },
                p: r.welch
                    .map(|w| format!("p = {:.3}", w.p))
                    .unwrap_or_else(|| "p = ?".into()),
                verdict: verdict.to_string(),
                why: why.to_string(),
            }
        })
        .collect()
}

fn diff(id: &str, doc: &Document<DiffDoc>) -> Result<(String, String), ReportError> {
    let d = &doc.doc;
    let scale = d
        .nodes
        .iter()
        .filter(|r| tma_catalog::Unit::names_percent(&r.unit))
        .flat_map(|r| [r.before.map(|s| s.mean), r.after.map(|s| s.mean)])
        .flatten()
        .fold(100.0f64, f64::max);
    let side = |s: &SideDoc| {
        format!(
            "{}: {} ({} {}), {} ({})",
            s.file, s.source, s.samples, s.sample_kind, s.cpu.name, s.cpu.key
        )
    };
    let t = DiffT {
        id,
        heading: format!("Diff: {}", file_name(&doc.file)),
        file: &doc.file,
        before: side(&d.before),
        after: side(&d.after),
        bottleneck: [
            Some(d.bottleneck.text.clone()),
            d.bottleneck
                .phases_before
                .as_ref()
                .map(|p| format!("Before: {p}")),
            d.bottleneck
                .phases_after
                .as_ref()
                .map(|p| format!("After: {p}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" "),
        test: format!(
            "Significance: {} (two-sided), significant when p < {}; n = samples per side; \
             p = ? where a side has fewer than two samples or no variation.",
            if d.significance.test == "welch_t_two_sided" {
                "Welch's t-test".to_string()
            } else {
                d.significance.test.clone()
            },
            d.significance.alpha
        ),
        nodes: diff_items(&d.nodes, scale),
        metrics: diff_items(&d.metrics, 0.0),
        gates: d
            .gates
            .iter()
            .map(|g| (g.tripped, g.reason.clone()))
            .collect(),
    };
    let heading = t.heading.clone();
    Ok((heading, t.render().map_err(terr)?))
}

// ------------------------------------------------------------------ profile diff

struct ProfileDiffItem {
    function: String,
    module: String,
    before: String,
    after: String,
    before_bar: String,
    after_bar: String,
    delta: String,
    direction: &'static str,
}

#[derive(Template)]
#[template(path = "profile_diff.html")]
struct ProfileDiffT<'a> {
    id: &'a str,
    heading: String,
    before: String,
    after: String,
    rows: Vec<ProfileDiffItem>,
    notes: &'a [String],
}

fn profile_diff(id: &str, doc: &Document<ProfileDiffDoc>) -> Result<(String, String), ReportError> {
    let d = &doc.doc;
    let scale = d
        .functions
        .iter()
        .flat_map(|r| [r.before_percent, r.after_percent])
        .fold(0.0f64, f64::max);
    let t = ProfileDiffT {
        id,
        heading: format!("Profile diff: {}", file_name(&doc.file)),
        before: format!(
            "{} ({} samples of {})",
            d.before.file, d.before.samples, d.before.event
        ),
        after: format!(
            "{} ({} samples of {})",
            d.after.file, d.after.samples, d.after.event
        ),
        rows: d
            .functions
            .iter()
            .map(|r| ProfileDiffItem {
                function: r.function.clone(),
                module: r.module.clone(),
                before: format!("{:.2}%", r.before_percent),
                after: format!("{:.2}%", r.after_percent),
                before_bar: width(r.before_percent, scale),
                after_bar: width(r.after_percent, scale),
                delta: format!("{:+.2} pts", r.delta),
                direction: if r.delta > 0.0 {
                    "up"
                } else if r.delta < 0.0 {
                    "down"
                } else {
                    ""
                },
            })
            .collect(),
        notes: &d.notes,
    };
    let heading = t.heading.clone();
    Ok((heading, t.render().map_err(terr)?))
}

// ------------------------------------------------------------------ locate

struct FunctionItem {
    function: String,
    module: String,
    samples: u64,
    percent: String,
    bar: String,
}

struct InsnItem {
    address: String,
    text: String,
    samples: u64,
    percent: String,
    bar: String,
    hot: bool,
    source: String,
}

#[derive(Template)]
#[template(path = "locate.html")]
struct LocateT<'a> {
    id: &'a str,
    heading: String,
    meta: String,
    flame: Option<&'a str>,
    /// The flame graph's height in pixels, for its frame.
    flame_height: u32,
    no_flame: Option<&'a str>,
    functions: Vec<FunctionItem>,
    more: usize,
    annotation: Option<String>,
    insns: Vec<InsnItem>,
    notes: &'a [String],
}

/// Function rows shown at most.
const TOP_FUNCTIONS: usize = 50;

fn locate(id: &str, l: &LocateView) -> Result<(String, String), ReportError> {
    let d = &l.doc;
    let fscale = d.functions.iter().map(|f| f.percent).fold(0.0f64, f64::max);
    let (annotation, insns) = match &d.annotation {
        Some(a) => {
            let iscale = a
                .instructions
                .iter()
                .map(|i| i.percent)
                .fold(0.0f64, f64::max);
            (
                Some(format!(
                    "{} ({}): {} samples, by instruction",
                    a.function, a.module, a.samples
                )),
                a.instructions
                    .iter()
                    .map(|i| InsnItem {
                        address: format!("{:x}", i.address),
                        text: i.text.clone(),
                        samples: i.samples,
                        percent: if i.samples > 0 {
                            format!("{:.1}%", i.percent)
                        } else {
                            String::new()
                        },
                        bar: width(i.percent, iscale),
                        hot: i.hottest,
                        source: match (&i.line, &i.source) {
                            (Some(n), Some(s)) => format!("{n}: {}", s.trim()),
                            (Some(n), None) => format!("line {n}"),
                            _ => String::new(),
                        },
                    })
                    .collect(),
            )
        }
        None => (None, Vec::new()),
    };
    let t = LocateT {
        id,
        heading: format!("Profile: {}", file_name(&l.file)),
        meta: format!(
            "{}: {} samples of {} ({} lost)",
            l.file, d.counts.samples, d.event, d.counts.lost
        ),
        flame: l.flame.as_deref(),
        flame_height: l.flame.as_deref().and_then(svg_height).unwrap_or(400) + 4,
        no_flame: l.no_flame.as_deref(),
        functions: d
            .functions
            .iter()
            .take(TOP_FUNCTIONS)
            .map(|f| FunctionItem {
                function: f.function.clone(),
                module: f.module.clone(),
                samples: f.samples,
                percent: format!("{:.1}%", f.percent),
                bar: width(f.percent, fscale),
            })
            .collect(),
        more: d.functions.len().saturating_sub(TOP_FUNCTIONS),
        annotation,
        insns,
        notes: &d.notes,
    };
    let heading = t.heading.clone();
    Ok((heading, t.render().map_err(terr)?))
}

// ------------------------------------------------------------------ bench

struct BenchRow {
    kind: &'static str,
    what: String,
    clock: String,
    median: String,
    spread: String,
    note: String,
}

struct BenchFormView {
    input: String,
    rows: Vec<BenchRow>,
    notes: Vec<String>,
}

#[derive(Template)]
#[template(path = "bench.html")]
struct BenchT<'a> {
    id: &'a str,
    heading: String,
    forms: Vec<BenchFormView>,
    errors: Vec<(String, String)>,
}

/// A bench figure: the median, marked when the repetitions did not converge (never shown as
/// a clean number then).
fn figure_text(f: &Figure) -> String {
    if !f.converged {
        format!("{:.3} (unconverged)", f.median)
    } else {
        format!("{:.3}", f.median)
    }
}

fn bench(id: &str, doc: &Document<BenchDoc>) -> Result<(String, String), ReportError> {
    let b = &doc.doc;
    let forms = b
        .forms
        .iter()
        .map(|f| {
            let mut rows = Vec::new();
            for p in &f.latency {
                for fig in &p.figures {
                    rows.push(BenchRow {
                        kind: "latency",
                        what: if p.from.is_empty() {
                            p.pair.clone()
                        } else {
                            format!("{} ({} → {})", p.pair, p.from, p.to)
                        },
                        clock: fig.clock.to_string(),
                        median: figure_text(fig),
                        spread: format!("{:.3}–{:.3}", fig.p10, fig.p90),
                        note: p.note.clone().unwrap_or_default(),
                    });
                }
            }
            if let Some(t) = &f.throughput {
                for fig in &t.best {
                    rows.push(BenchRow {
                        kind: "throughput",
                        what: format!("{} independent chains", t.best_chains),
                        clock: fig.clock.to_string(),
                        median: figure_text(fig),
                        spread: format!("{:.3}–{:.3}", fig.p10, fig.p90),
                        note: f.throughput_note.clone().unwrap_or_default(),
                    });
                }
            }
            let input = match &f.preset {
                Some(p) => format!("{} ({p})", f.input),
                None => f.input.clone(),
            };
            BenchFormView {
                input,
                rows,
                notes: f.notes.clone(),
            }
        })
        .collect();
    let t = BenchT {
        id,
        heading: format!("Bench: {}", file_name(&doc.file)),
        forms,
        errors: b
            .errors
            .iter()
            .map(|e| (e.input.clone(), e.error.clone()))
            .collect(),
    };
    let heading = t.heading.clone();
    Ok((heading, t.render().map_err(terr)?))
}
