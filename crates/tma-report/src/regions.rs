//! A `tma stat --regions` document on the page: a table of the regions (nested, every
//! thread merged and each thread apart) with their time, calls, CPU and counted shares and
//! their level-1 nodes (or, without a PMU, their software counts), and a timeline of each
//! thread's regions as tma saw them begin and end.

use askama::Template;
use tma_regions::report::{Region, Report};

use crate::page::Document;
use crate::ReportError;

/// One region row of a table.
struct RegionItem {
    path: String,
    name: String,
    depth: usize,
    calls: u64,
    time: String,
    per_call: String,
    /// Bar width: the region's time in % of the scope's longest top-level region.
    bar: String,
    cpu: String,
    counted: String,
    /// The level-1 nodes (or software counts), in the table's column order.
    cells: Vec<String>,
}

struct ScopeView {
    title: String,
    /// `merged` or the thread id.
    scope: String,
    rows: Vec<RegionItem>,
}

/// One region's span on the timeline (coordinates in the SVG's user units).
struct SpanItem {
    x: String,
    y: u32,
    w: String,
    h: u32,
    color: &'static str,
    title: String,
    /// The name, when the bar is wide enough for it.
    label: Option<String>,
    label_x: String,
}

struct LaneItem {
    y: u32,
    label: String,
}

struct TickItem {
    x: String,
    label: String,
}

#[derive(Template)]
#[template(path = "regions.html")]
struct RegionsT<'a> {
    id: &'a str,
    heading: String,
    meta: String,
    no_tree: Option<String>,
    columns: Vec<String>,
    scopes: Vec<ScopeView>,
    width: u32,
    height: u32,
    plot_x0: u32,
    plot_x1: u32,
    lanes: Vec<LaneItem>,
    spans: Vec<SpanItem>,
    ticks: Vec<TickItem>,
    timeline_note: String,
}

/// Colours of the top-level regions on the timeline (Okabe-Ito, as the other timelines).
const COLOURS: [&str; 7] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
];

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn ms(ns: f64) -> String {
    let ms = ns / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms:.3}")
    }
}

/// The table's value columns: the level-1 nodes of the trees, else the software counts.
fn columns(r: &Report) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if r.hardware {
        for reg in r.merged.iter().flat_map(flatten) {
            for n in reg.tree.iter().filter(|n| n.level == 1) {
                if !out.contains(&n.node) {
                    out.push(n.node.clone());
                }
            }
        }
    } else {
        out = r.events.clone();
    }
    out
}

fn flatten(r: &Region) -> Vec<&Region> {
    let mut out = vec![r];
    for c in &r.children {
        out.extend(flatten(c));
    }
    out
}

fn cells(r: &Region, columns: &[String], hardware: bool) -> Vec<String> {
    columns
        .iter()
        .map(|c| {
            if hardware {
                let node = r.tree.iter().find(|n| n.level == 1 && &n.node == c);
                match node.and_then(|n| n.value.map(|v| (v, n))) {
                    None => "-".into(),
                    Some((v, n)) if tma_catalog::Unit::names_percent(&n.unit) => {
                        format!("{v:.1}%")
                    }
                    Some((v, _)) => format!("{v:.2}"),
                }
            } else {
                match (
                    c.as_str(),
                    r.counts
                        .iter()
                        .find(|x| &x.event == c)
                        .and_then(|x| x.value),
                ) {
                    (_, None) => "-".into(),
                    ("task-clock", Some(v)) => format!("{} ms", ms(v)),
                    (_, Some(v)) => format!("{v:.0}"),
                }
            }
        })
        .collect()
}

fn scope(
    title: String,
    scope: String,
    regions: &[Region],
    r: &Report,
    cols: &[String],
) -> ScopeView {
    let longest = regions.iter().map(|x| x.wall_ns).max().unwrap_or(0) as f64;
    let rows = regions
        .iter()
        .flat_map(flatten)
        .map(|x| RegionItem {
            path: x.path.join(" > "),
            name: x.name.clone(),
            depth: x.path.len() - 1,
            calls: x.calls,
            time: ms(x.wall_ns as f64),
            per_call: if x.calls > 0 {
                format!("{:.1} µs", x.wall_ns as f64 / 1e3 / x.calls as f64)
            } else {
                "-".into()
            },
            bar: if longest > 0.0 {
                format!(
                    "{:.2}",
                    (x.wall_ns as f64 / longest * 100.0).clamp(0.0, 100.0)
                )
            } else {
                "0".into()
            },
            cpu: pct(x.cpu_share),
            counted: pct(x.counted_share),
            cells: cells(x, cols, r.hardware),
        })
        .collect();
    ScopeView { title, scope, rows }
}

const WIDTH: u32 = 960;
const X0: u32 = 90;
const X1: u32 = 940;
const ROW: u32 = 16;
const TOP: u32 = 8;

/// The section of a region document.
pub fn section(id: &str, doc: &Document<Report>) -> Result<(String, String), ReportError> {
    let r = &doc.doc;
    let cols = columns(r);
    let mut scopes = vec![scope(
        "All threads".into(),
        "merged".into(),
        &r.merged,
        r,
        &cols,
    )];
    if r.threads.len() > 1 {
        for t in &r.threads {
            scopes.push(scope(
                format!("Thread {}", t.tid),
                t.tid.to_string(),
                &t.regions,
                r,
                &cols,
            ));
        }
    }
    // The timeline: one lane per thread, a row per nesting depth.
    let end = r
        .timeline
        .iter()
        .flat_map(|t| t.spans.iter().map(|s| s.end_ns))
        .chain([r.wall_ns])
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let x = |ns: u64| f64::from(X0) + ns as f64 / end * f64::from(X1 - X0);
    let top_names: Vec<&str> = r.merged.iter().map(|x| x.name.as_str()).collect();
    let mut lanes = Vec::new();
    let mut spans = Vec::new();
    let mut y = TOP;
    for t in &r.timeline {
        let depth = t.spans.iter().map(|s| s.path.len()).max().unwrap_or(1) as u32;
        lanes.push(LaneItem {
            y: y + ROW - 4,
            label: format!("thread {}", t.tid),
        });
        for s in &t.spans {
            let (x0, x1) = (x(s.begin_ns), x(s.end_ns));
            let w = (x1 - x0).max(1.0);
            let colour = top_names
                .iter()
                .position(|n| Some(*n) == s.path.first().map(String::as_str))
                .map_or("#78909c", |i| COLOURS[i % COLOURS.len()]);
            let name = s.path.last().cloned().unwrap_or_default();
            spans.push(SpanItem {
                x: format!("{x0:.2}"),
                y: y + (s.path.len() as u32 - 1) * ROW,
                w: format!("{w:.2}"),
                h: ROW - 2,
                color: colour,
                title: format!(
                    "thread {}: {}, {} .. {} ms ({} ms)",
                    t.tid,
                    s.path.join(" > "),
                    ms(s.begin_ns as f64),
                    ms(s.end_ns as f64),
                    ms(s.end_ns.saturating_sub(s.begin_ns) as f64)
                ),
                label: (w >= 7.0 * name.chars().count() as f64 + 6.0).then(|| name.clone()),
                label_x: format!("{:.2}", x0 + 3.0),
            });
        }
        y += depth * ROW + 8;
    }
    let height = y + 24;
    let ticks = (0..=5)
        .map(|k| {
            let ns = end * f64::from(k) / 5.0;
            TickItem {
                x: format!("{:.2}", x(ns as u64)),
                label: if end >= 1e7 {
                    format!("{:.0} ms", ns / 1e6)
                } else {
                    format!("{:.2} ms", ns / 1e6)
                },
            }
        })
        .collect();
    let dropped: u64 = r.timeline.iter().map(|t| t.dropped).sum();
    let timeline_note = if r.timeline.is_empty() {
        "No timeline: the document holds no region times (documents written before the \
         timeline was added have none)."
            .to_string()
    } else if dropped > 0 {
        format!(
            "The first {} regions of each thread are drawn; {dropped} more are not.",
            tma_regions::tree::MAX_SPANS
        )
    } else {
        String::new()
    };
    let threads = r.threads.len();
    let t = RegionsT {
        id,
        heading: format!("Regions: {}", file_name(&doc.file)),
        meta: format!(
            "{}: {} ({} thread{}, run {:.3} s){}",
            doc.file,
            tma_render::text::shell_words(&r.command),
            threads,
            if threads == 1 { "" } else { "s" },
            r.wall_ns as f64 / 1e9,
            match &r.cpu {
                Some(c) => format!("; TMA trees of {c}"),
                None => String::new(),
            }
        ),
        no_tree: r.no_tree.as_ref().map(|why| {
            format!("Software counts only: the TMA tree of a region needs a hardware PMU ({why}).")
        }),
        columns: cols,
        scopes,
        width: WIDTH,
        height,
        plot_x0: X0,
        plot_x1: X1,
        lanes,
        spans,
        ticks,
        timeline_note,
    };
    let heading = t.heading.clone();
    Ok((
        heading,
        t.render()
            .map_err(|e| ReportError::Template(e.to_string()))?,
    ))
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').find(|s| !s.is_empty()).unwrap_or(path)
}
