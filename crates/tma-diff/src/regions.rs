//! Two runs of `tma stat --regions` (or `--itt`) compared region by region: each region's
//! time, calls, CPU share, counts and (with a PMU) TMA tree before and after, with the
//! change, and Welch's t-test where a side holds several runs.
//!
//! A side is a `tma.stat.regions` document, or several written one after the other into
//! one file (`tma stat --regions --json -- app >> before.json`, repeated): each is a run,
//! a sample of every figure. Regions are matched by their path (the names of the open
//! regions, from the outermost in) in the merged tree and in each thread; threads are
//! matched by rank (the first thread by id in one run with the first in the other), since
//! thread ids differ between runs. A region of one side only is shown as such.
//!
//! `--fail-if` names a merged region's path, then a figure or node of it, separated by dots:
//! `solve.time_ms > +10%`, `solve.inner.Backend_Bound > +5`.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tma_regions::report::{Region, Report};
use tma_render::OutputError;

use crate::doc::TestDoc;
use crate::gate::{self, GateResult};
use crate::input::Series;
use crate::render;
use crate::stats::ALPHA;
use crate::{DiffError, Row};

/// The schema name of `tma diff --json` for two region documents.
pub const SCHEMA: &str = "tma.diff.regions";
pub const SCHEMA_VERSION: u32 = 1;

/// Whether the file at `path` is a region document (`tma.stat.regions`).
pub fn is_regions(path: &Path) -> Result<bool, DiffError> {
    let bytes = read(path)?;
    Ok(tma_render::recognize(&bytes).schema() == Some(tma_regions::report::SCHEMA))
}

/// Whether `before` and `after` are both region documents (`true`) or neither (`false`);
/// one of each is [`DiffError::MixedRegions`].
pub fn inputs(before: &Path, after: &Path) -> Result<bool, DiffError> {
    match (is_regions(before)?, is_regions(after)?) {
        (true, true) => Ok(true),
        (false, false) => Ok(false),
        (true, false) => Err(DiffError::MixedRegions {
            regions: tma_render::files::display_input(before),
            other: tma_render::files::display_input(after),
        }),
        (false, true) => Err(DiffError::MixedRegions {
            regions: tma_render::files::display_input(after),
            other: tma_render::files::display_input(before),
        }),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, DiffError> {
    tma_render::files::read_input(path).map_err(|source| DiffError::Read {
        file: tma_render::files::display_input(path),
        source,
    })
}

/// One side: its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionsSide {
    pub file: String,
    pub runs: Vec<Report>,
}

impl RegionsSide {
    /// The CPU model of the trees, `None` for software counts.
    fn cpu(&self) -> Option<&str> {
        self.runs.first().and_then(|r| r.cpu.as_deref())
    }

    fn hardware(&self) -> bool {
        self.runs.first().is_some_and(|r| r.hardware)
    }
}

/// Read one side: one `tma.stat.regions` document or several in a row.
pub fn load(path: &Path) -> Result<RegionsSide, DiffError> {
    let file = tma_render::files::display_input(path);
    let bytes = read(path)?;
    let bad = |detail: String| DiffError::RegionsJson {
        file: file.clone(),
        detail,
    };
    let mut runs = Vec::new();
    for (i, v) in serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<serde_json::Value>()
        .enumerate()
    {
        let v = v.map_err(|e| bad(format!("document {}: {e}", i + 1)))?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if tma_render::schema::canonical(schema) != tma_regions::report::SCHEMA {
            return Err(bad(format!(
                "document {} is {schema:?}, not {}",
                i + 1,
                tma_regions::report::SCHEMA
            )));
        }
        let found = v
            .get("schema_version")
            .and_then(|s| s.as_u64())
            .unwrap_or(0);
        let newest = tma_regions::report::SCHEMA_VERSION;
        if !tma_render::schema::reads_version(found as u32, 1, newest) {
            return Err(bad(format!(
                "document {}: schema_version {found} (this tma reads versions 1 to {newest})",
                i + 1
            )));
        }
        let r: Report =
            serde_json::from_value(v).map_err(|e| bad(format!("document {}: {e}", i + 1)))?;
        runs.push(r);
    }
    if runs.is_empty() {
        return Err(bad("no document".into()));
    }
    let cpus: Vec<Option<&str>> = runs.iter().map(|r| r.cpu.as_deref()).collect();
    if cpus.iter().any(|c| *c != cpus[0]) {
        return Err(bad(
            "its runs were counted differently (CPU models, or trees and software counts): \
             one side holds runs of one kind"
                .into(),
        ));
    }
    Ok(RegionsSide { file, runs })
}

/// Whether a region is in both runs or one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    Both,
    BeforeOnly,
    AfterOnly,
}

impl Presence {
    fn text(self) -> &'static str {
        match self {
            Presence::Both => "both",
            Presence::BeforeOnly => "before only",
            Presence::AfterOnly => "after only",
        }
    }
}

/// One region compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionRow {
    /// `merged` (every thread added up) or `thread`.
    pub scope: String,
    /// The thread's rank by id in its run (1: the first), for `thread`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<usize>,
    /// From the outermost region in.
    pub path: Vec<String>,
    pub presence: Presence,
    /// `calls`, `time_ms`, `time_per_call_us`, `cpu_share`, `counted_share`, then each
    /// event's count, as in the region documents (task-clock in ms).
    pub figures: Vec<Row>,
    /// The region's TMA tree (empty without a PMU).
    #[serde(default)]
    pub nodes: Vec<Row>,
}

/// One side of a [`RegionsDiffDoc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionsSideDoc {
    pub file: String,
    pub runs: usize,
    pub command: Vec<String>,
    pub hardware: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Per run, the thread ids in rank order.
    pub threads: Vec<Vec<u32>>,
}

impl RegionsSideDoc {
    fn of(s: &RegionsSide) -> RegionsSideDoc {
        RegionsSideDoc {
            file: s.file.clone(),
            runs: s.runs.len(),
            command: s.runs[0].command.clone(),
            hardware: s.hardware(),
            cpu: s.cpu().map(str::to_string),
            threads: s
                .runs
                .iter()
                .map(|r| r.threads.iter().map(|t| t.tid).collect())
                .collect(),
        }
    }
}

/// Two region runs compared (the `tma.diff.regions` document, less its envelope).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionsDiffDoc {
    pub before: RegionsSideDoc,
    pub after: RegionsSideDoc,
    pub significance: TestDoc,
    /// Merged regions first (depth first, the before run's order, then regions of the after
    /// run only), then each thread's.
    pub regions: Vec<RegionRow>,
    #[serde(default)]
    pub gates: Vec<GateResult>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Compare two region runs; `gates` are `--fail-if` expressions (parsed first).
pub fn run(before: &Path, after: &Path, gates: &[String]) -> Result<RegionsDiffDoc, DiffError> {
    let gates = gates
        .iter()
        .map(|g| gate::parse(g))
        .collect::<Result<Vec<_>, _>>()?;
    let b = load(before)?;
    let a = load(after)?;
    let mut d = diff(&b, &a)?;
    d.gates = gates
        .iter()
        .map(|g| check(g, &d.regions))
        .collect::<Result<_, _>>()?;
    Ok(d)
}

/// Compare two sides.
pub fn diff(before: &RegionsSide, after: &RegionsSide) -> Result<RegionsDiffDoc, DiffError> {
    let mut notes = Vec::new();
    match (before.cpu(), after.cpu()) {
        (Some(b), Some(a)) if a != b => {
            return Err(DiffError::CpuMismatch {
                before: b.to_string(),
                before_key: b.to_string(),
                after: a.to_string(),
                after_key: a.to_string(),
            })
        }
        (Some(_), None) | (None, Some(_)) => notes.push(format!(
            "only the {} run has TMA trees (the other counted software events only): the trees \
             are shown on one side",
            if before.hardware() { "before" } else { "after" }
        )),
        _ => {}
    }
    let mut regions = scope(
        "merged",
        None,
        &before
            .runs
            .iter()
            .map(|r| &r.merged[..])
            .collect::<Vec<_>>(),
        &after.runs.iter().map(|r| &r.merged[..]).collect::<Vec<_>>(),
    );
    let threads = |s: &RegionsSide| s.runs.iter().map(|r| r.threads.len()).max().unwrap_or(0);
    let (tb, ta) = (threads(before), threads(after));
    if tb != ta {
        notes.push(format!(
            "the runs named regions on different numbers of threads ({tb} before, {ta} \
             after): threads are matched by rank, the others are shown on one side"
        ));
    }
    for k in 0..tb.max(ta) {
        fn of(s: &RegionsSide, k: usize) -> Vec<&[Region]> {
            s.runs
                .iter()
                .filter_map(|r| r.threads.get(k).map(|t| &t.regions[..]))
                .collect()
        }
        regions.extend(scope("thread", Some(k + 1), &of(before, k), &of(after, k)));
    }
    for (side, s) in [("before", before), ("after", after)] {
        for r in &s.runs {
            if !r.uncounted_threads.is_empty() {
                notes.push(format!(
                    "{side}: threads {:?} could not be counted (time and calls only)",
                    r.uncounted_threads
                ));
            }
        }
    }
    Ok(RegionsDiffDoc {
        before: RegionsSideDoc::of(before),
        after: RegionsSideDoc::of(after),
        significance: TestDoc {
            test: "welch_t_two_sided".into(),
            alpha: ALPHA,
        },
        regions,
        gates: Vec::new(),
        notes,
    })
}

/// Every region of one scope, its runs on each side.
fn scope(
    name: &str,
    thread: Option<usize>,
    before: &[&[Region]],
    after: &[&[Region]],
) -> Vec<RegionRow> {
    // Paths in first-seen order: the before runs', then the after runs' new ones placed
    // after their parent's subtree (or last).
    let mut paths: Vec<Vec<String>> = Vec::new();
    for runs in [before, after] {
        for regions in runs {
            for r in flatten(regions) {
                if paths.contains(&r.path) {
                    continue;
                }
                let parent = &r.path[..r.path.len() - 1];
                let at = paths
                    .iter()
                    .rposition(|p| p.starts_with(parent) && !parent.is_empty())
                    .map_or(paths.len(), |i| i + 1);
                paths.insert(at, r.path.clone());
            }
        }
    }
    paths
        .into_iter()
        .map(|path| {
            let find = |runs: &[&[Region]]| -> Vec<Region> {
                runs.iter()
                    .filter_map(|rs| flatten(rs).into_iter().find(|r| r.path == path))
                    .cloned()
                    .collect()
            };
            let (b, a) = (find(before), find(after));
            let presence = match (b.is_empty(), a.is_empty()) {
                (false, false) => Presence::Both,
                (false, true) => Presence::BeforeOnly,
                _ => Presence::AfterOnly,
            };
            let (fb, fa) = (figures(&b), figures(&a));
            let (nb, na) = (tree(&b), tree(&a));
            RegionRow {
                scope: name.to_string(),
                thread,
                path,
                presence,
                figures: crate::rows(&fb, &fa),
                nodes: crate::rows(&nb, &na),
            }
        })
        .collect()
}

fn flatten(regions: &[Region]) -> Vec<&Region> {
    let mut out = Vec::new();
    let mut stack: Vec<&Region> = regions.iter().rev().collect();
    while let Some(r) = stack.pop() {
        out.push(r);
        stack.extend(r.children.iter().rev());
    }
    out
}

fn series(name: &str, unit: &str, values: Vec<f64>) -> Series {
    Series {
        name: name.to_string(),
        parent: None,
        level: 0,
        unit: unit.to_string(),
        values: values.into_iter().filter(|v| v.is_finite()).collect(),
        above: 0,
        below: 0,
    }
}

/// A region's figures over its runs (none when it is in no run: the side has no series).
fn figures(runs: &[Region]) -> Vec<Series> {
    if runs.is_empty() {
        return Vec::new();
    }
    let all = |f: &dyn Fn(&Region) -> Option<f64>| runs.iter().filter_map(f).collect::<Vec<_>>();
    let mut out = vec![
        series("calls", "number", all(&|r| Some(r.calls as f64))),
        series("time_ms", "msec", all(&|r| Some(r.wall_ns as f64 / 1e6))),
        series(
            "time_per_call_us",
            "usec",
            all(&|r| (r.calls > 0).then(|| r.wall_ns as f64 / 1e3 / r.calls as f64)),
        ),
        series(
            "cpu_share",
            "percent",
            all(&|r| r.cpu_share.map(|v| v * 100.0)),
        ),
        series(
            "counted_share",
            "percent",
            all(&|r| r.counted_share.map(|v| v * 100.0)),
        ),
    ];
    for (i, c) in runs[0].counts.iter().enumerate() {
        // task-clock in ms, as `tma stat` shows it; other counts as they are.
        let (unit, scale) = if c.event == "task-clock" {
            ("msec", 1e-6)
        } else {
            ("number", 1.0)
        };
        out.push(series(
            &c.event,
            unit,
            all(&|r| {
                r.counts
                    .get(i)
                    .filter(|x| x.event == c.event)
                    .or_else(|| r.counts.iter().find(|x| x.event == c.event))
                    .and_then(|x| x.value)
                    .map(|v| v * scale)
            }),
        ));
    }
    out
}

/// A region's tree nodes over its runs, each with its parent (the last node a level up in
/// the tree's depth-first order).
fn tree(runs: &[Region]) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in runs {
        let mut up: Vec<&str> = Vec::new();
        for n in &r.tree {
            up.truncate(usize::from(n.level.saturating_sub(1)));
            let parent = up.last().map(|p| p.to_string());
            up.push(&n.node);
            let i = match out.iter().position(|s| s.name == n.node) {
                Some(i) => i,
                None => {
                    out.push(Series {
                        parent,
                        level: n.level,
                        ..series(&n.node, &n.unit, Vec::new())
                    });
                    out.len() - 1
                }
            };
            if let Some(v) = n.value.filter(|v| v.is_finite()) {
                out[i].values.push(v);
            }
        }
    }
    out
}

/// A gate on a merged region: the longest region path that starts the target, then a figure
/// or node of that region.
fn check(g: &gate::Gate, regions: &[RegionRow]) -> Result<GateResult, DiffError> {
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    let region = regions
        .iter()
        .filter(|r| r.scope == "merged" && r.path.len() < g.target.len())
        .filter(|r| r.path.iter().zip(&g.target).all(|(a, b)| eq(a, b)))
        .max_by_key(|r| r.path.len())
        .ok_or_else(|| DiffError::Gate {
            expr: g.expr.clone(),
            position: g.target_position,
            message: format!(
                "no region starts {:?}: a region gate is REGION[.INNER...].FIGURE or NODE \
                 (figures: calls, time_ms, time_per_call_us, cpu_share, counted_share, events)",
                g.target.join(".")
            ),
        })?;
    let rest = gate::Gate {
        target: g.target[region.path.len()..].to_vec(),
        ..g.clone()
    };
    let mut r = gate::check(&rest, &region.nodes, &region.figures)?;
    r.reason = format!("{} ({})", r.reason, region.path.join(" > "));
    Ok(r)
}

// ------------------------------------------------------------------ renderers

fn side_text(s: &RegionsSideDoc) -> String {
    let runs = if s.runs == 1 {
        "1 run".to_string()
    } else {
        format!("{} runs", s.runs)
    };
    let what = match &s.cpu {
        Some(c) => format!("trees of {c}"),
        None => "software counts".to_string(),
    };
    format!("{} ({runs}, {what})", s.file)
}

/// The readable comparison: each region's figures (and tree) before and after.
pub fn text(w: &mut dyn Write, d: &RegionsDiffDoc, verbose: bool) -> Result<(), OutputError> {
    writeln!(
        w,
        "Regions of {}: before {}, after {}",
        tma_render::text::shell_words(&d.after.command),
        side_text(&d.before),
        side_text(&d.after)
    )?;
    let hardware = d.before.hardware || d.after.hardware;
    writeln!(
        w,
        "values are means over the runs; time and task-clock in ms (per call in µs), shares in \
         %{}, deltas of shares in points",
        if hardware {
            ", tree nodes in % of pipeline slots"
        } else {
            "; no tree: neither run had hardware counters"
        }
    )?;
    let threads = d.regions.iter().any(|r| r.thread == Some(2));
    let mut last_scope: Option<(String, Option<usize>)> = None;
    for r in &d.regions {
        if r.scope != "merged" && !(threads || verbose) {
            continue;
        }
        let scope = (r.scope.clone(), r.thread);
        if last_scope.as_ref() != Some(&scope) {
            let title = match r.thread {
                None => "All threads".to_string(),
                Some(k) => format!("Thread {k} (by rank)"),
            };
            writeln!(w, "\n{title}")?;
            last_scope = Some(scope);
        }
        let depth = r.path.len() - 1;
        let pad = "  ".repeat(depth);
        let tag = match r.presence {
            Presence::Both => String::new(),
            p => format!(" [{}]", p.text()),
        };
        writeln!(w)?;
        // Events only without a tree (a tree's events are many; JSON and CSV carry them).
        let figures: Vec<Row> = r
            .figures
            .iter()
            .filter(|f| !hardware || is_named_figure(&f.name))
            .map(|f| Row {
                name: format!("{pad}  {}", f.name),
                ..f.clone()
            })
            .collect();
        render::table(
            w,
            &figures,
            &format!("{pad}{}{tag}", r.path.last().map_or("", |s| s)),
            false,
        )?;
        if !r.nodes.is_empty() {
            let nodes: Vec<Row> = r
                .nodes
                .iter()
                .map(|n| Row {
                    name: format!(
                        "{pad}  {}{}",
                        "  ".repeat(usize::from(n.level.saturating_sub(1))),
                        n.name
                    ),
                    ..n.clone()
                })
                .collect();
            render::table(w, &nodes, &format!("{pad}  tree"), false)?;
        }
    }
    writeln!(w)?;
    let tested = d
        .regions
        .iter()
        .flat_map(|r| r.figures.iter().chain(&r.nodes))
        .any(|r| r.welch.is_some());
    if tested {
        writeln!(
            w,
            "p: Welch's t-test (two-sided) over the runs of each side; * p < {ALPHA}; ? = not \
             testable (fewer than two runs on a side, or no variation)"
        )?;
    } else {
        writeln!(
            w,
            "Significance unknown: one run per side (write several runs into each file, e.g. \
             `tma stat --regions --json -- app >> before.json` repeated, for a test)."
        )?;
    }
    for n in &d.notes {
        writeln!(w, "note: {n}")?;
    }
    for g in &d.gates {
        writeln!(
            w,
            "Gate {}: {}",
            if g.tripped { "TRIPPED" } else { "ok" },
            g.reason
        )?;
    }
    Ok(())
}

fn is_named_figure(name: &str) -> bool {
    [
        "calls",
        "time_ms",
        "time_per_call_us",
        "cpu_share",
        "counted_share",
    ]
    .contains(&name)
}

/// `tma.diff.regions` ([`RegionsDiffDoc`]).
pub fn json(w: &mut dyn Write, d: &RegionsDiffDoc) -> Result<(), OutputError> {
    tma_render::write_json(w, SCHEMA, SCHEMA_VERSION, d)
}

/// One row per region and figure or node, full precision.
pub fn csv(w: &mut dyn Write, d: &RegionsDiffDoc) -> Result<(), OutputError> {
    let mut header = vec!["scope", "thread", "region", "presence"];
    header.extend(render::ROW_COLUMNS);
    tma_render::csv_row(w, &header)?;
    for reg in &d.regions {
        for (kind, rows) in [("figure", &reg.figures), ("node", &reg.nodes)] {
            for r in rows {
                let mut fields = vec![
                    reg.scope.clone(),
                    reg.thread.map_or(String::new(), |t| t.to_string()),
                    reg.path.join(" > "),
                    match reg.presence {
                        Presence::Both => "both",
                        Presence::BeforeOnly => "before_only",
                        Presence::AfterOnly => "after_only",
                    }
                    .to_string(),
                ];
                fields.extend(render::row_fields(kind, r));
                tma_render::csv_row(w, &fields)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests_support {
    use super::*;
    use tma_regions::report::{Count, Thread, TreeNode};

    /// A region with chosen figures and, where `tree` holds values, a level-1 tree.
    pub fn region(path: &[&str], calls: u64, ms: f64, tree: &[(&str, f64)]) -> Region {
        Region {
            name: path.last().unwrap().to_string(),
            path: path.iter().map(|s| s.to_string()).collect(),
            calls,
            wall_ns: (ms * 1e6) as u64,
            cpu_share: Some(0.5),
            counted_share: Some(1.0),
            counts: vec![Count {
                event: "task-clock".into(),
                value: Some(ms * 5e5),
            }],
            tree: tree
                .iter()
                .map(|(n, v)| TreeNode {
                    node: n.to_string(),
                    level: 1,
                    value: Some(*v),
                    unit: "percent_slots".into(),
                })
                .collect(),
            children: Vec::new(),
        }
    }

    pub fn report(
        cpu: Option<&str>,
        merged: Vec<Region>,
        threads: Vec<(u32, Vec<Region>)>,
    ) -> Report {
        Report {
            schema: tma_regions::report::SCHEMA.into(),
            schema_version: 1,
            command: vec!["app".into()],
            hardware: cpu.is_some(),
            no_tree: None,
            cpu: cpu.map(str::to_string),
            events: vec!["task-clock".into()],
            wall_ns: 1,
            merged,
            threads: threads
                .into_iter()
                .map(|(tid, regions)| Thread { tid, regions })
                .collect(),
            uncounted_threads: Vec::new(),
            timeline: Vec::new(),
        }
    }

    pub fn side(runs: Vec<Report>) -> RegionsSide {
        RegionsSide {
            file: "x.json".into(),
            runs,
        }
    }

    pub fn fig<'a>(r: &'a RegionRow, name: &str) -> &'a Row {
        r.figures
            .iter()
            .chain(&r.nodes)
            .find(|f| f.name == name)
            .unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    #[test]
    fn regions_match_by_path_and_threads_by_rank() {
        let mut solve = region(&["solve"], 2, 10.0, &[("backend_bound", 40.0)]);
        solve.children.push(region(
            &["solve", "inner"],
            4,
            6.0,
            &[("backend_bound", 60.0)],
        ));
        let before = report(
            Some("zen4"),
            vec![solve.clone(), region(&["load"], 1, 3.0, &[])],
            vec![(100, vec![solve.clone()])],
        );
        let mut solve2 = region(&["solve"], 2, 8.0, &[("backend_bound", 30.0)]);
        solve2.children.push(region(
            &["solve", "inner"],
            4,
            5.0,
            &[("backend_bound", 50.0)],
        ));
        solve2.children.push(region(
            &["solve", "new"],
            1,
            1.0,
            &[("backend_bound", 10.0)],
        ));
        let after = report(
            Some("zen4"),
            vec![solve2.clone()],
            vec![
                (200, vec![solve2.clone()]),
                (201, vec![region(&["w"], 1, 1.0, &[])]),
            ],
        );
        let d = diff(&side(vec![before]), &side(vec![after])).unwrap();
        let merged: Vec<(String, Presence)> = d
            .regions
            .iter()
            .filter(|r| r.scope == "merged")
            .map(|r| (r.path.join("/"), r.presence))
            .collect();
        assert_eq!(
            merged,
            [
                ("solve".to_string(), Presence::Both),
                ("solve/inner".to_string(), Presence::Both),
                ("solve/new".to_string(), Presence::AfterOnly),
                ("load".to_string(), Presence::BeforeOnly),
            ]
        );
        let solve = &d.regions[0];
        assert_eq!(fig(solve, "time_ms").delta, Some(-2.0));
        assert_eq!(fig(solve, "time_per_call_us").before.unwrap().mean, 5000.0);
        assert_eq!(fig(solve, "backend_bound").delta, Some(-10.0));
        assert_eq!(fig(&d.regions[1], "backend_bound").delta, Some(-10.0));
        assert_eq!(fig(&d.regions[2], "calls").before, None);
        // Thread 1 by rank is tid 100 before and 200 after; thread 2 is after only.
        let t1: Vec<&RegionRow> = d.regions.iter().filter(|r| r.thread == Some(1)).collect();
        assert_eq!(fig(t1[0], "time_ms").delta, Some(-2.0));
        let t2: Vec<&RegionRow> = d.regions.iter().filter(|r| r.thread == Some(2)).collect();
        assert_eq!(t2.len(), 1);
        assert_eq!(t2[0].presence, Presence::AfterOnly);
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("different numbers of threads")),
            "{:?}",
            d.notes
        );
        assert_eq!(d.before.threads, [vec![100]]);
        let mut text = Vec::new();
        super::text(&mut text, &d, false).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("new [after only]"), "{text}");
        assert!(text.contains("load [before only]"), "{text}");
        assert!(text.contains("Thread 2 (by rank)"), "{text}");
        assert!(
            text.contains("Significance unknown: one run per side"),
            "{text}"
        );
        // A tree run against a software run of the same program: noted, not refused.
        let soft = report(None, vec![region(&["solve"], 2, 9.0, &[])], Vec::new());
        let hard = report(
            Some("zen4"),
            vec![region(&["solve"], 2, 8.0, &[("backend_bound", 30.0)])],
            Vec::new(),
        );
        let d2 = diff(&side(vec![soft]), &side(vec![hard])).unwrap();
        assert!(
            d2.notes[0].contains("only the after run has TMA trees"),
            "{:?}",
            d2.notes
        );
        assert_eq!(fig(&d2.regions[0], "backend_bound").before, None);
        assert_eq!(fig(&d2.regions[0], "time_ms").delta, Some(-1.0));
        let d3 = diff(
            &side(vec![report(Some("zen3"), Vec::new(), Vec::new())]),
            &side(vec![report(Some("zen4"), Vec::new(), Vec::new())]),
        );
        assert!(matches!(d3, Err(DiffError::CpuMismatch { .. })));
    }
}

#[cfg(test)]
mod runs {
    use super::tests_support::*;
    use super::*;
    use crate::Significance;

    #[test]
    fn repeated_runs_are_tested_and_gates_name_a_region() {
        let runs = |ms: &[f64]| {
            side(
                ms.iter()
                    .map(|m| report(None, vec![region(&["solve"], 10, *m, &[])], Vec::new()))
                    .collect(),
            )
        };
        // 10.0 ± 0.1 ms before, 12.0 ± 0.1 after: clearly significant.
        let (b, a) = (runs(&[9.9, 10.0, 10.1]), runs(&[11.9, 12.0, 12.1]));
        let mut d = diff(&b, &a).unwrap();
        let t = d.regions[0]
            .figures
            .iter()
            .find(|f| f.name == "time_ms")
            .unwrap();
        assert_eq!(t.before.unwrap().n, 3);
        assert!((t.delta.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(t.significance, Significance::Significant);
        // calls did not vary: no test, said why.
        let c = d.regions[0]
            .figures
            .iter()
            .find(|f| f.name == "calls")
            .unwrap();
        assert!(matches!(c.significance, Significance::Unknown { .. }));
        let g = |e: &str| check(&gate::parse(e).unwrap(), &d.regions);
        assert!(g("solve.time_ms > +10%").unwrap().tripped);
        assert!(!g("SOLVE.time_ms > +25%").unwrap().tripped);
        assert!(!g("solve.calls > 0").unwrap().tripped);
        let e = g("nowhere.time_ms > 1").unwrap_err().to_string();
        assert!(e.contains("no region starts"), "{e}");
        let e = g("solve.bogus > 1").unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        d.gates.push(g("solve.time_ms > +10%").unwrap());
        let mut text = Vec::new();
        super::text(&mut text, &d, false).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("Welch's t-test"), "{text}");
        assert!(text.contains("Gate TRIPPED"), "{text}");
        // JSON reads back through the same type; CSV has one row per figure.
        let mut json = Vec::new();
        super::json(&mut json, &d).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        let back: RegionsDiffDoc = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
        let mut csv = Vec::new();
        super::csv(&mut csv, &d).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        assert_eq!(csv.lines().count(), 1 + 6);
        assert!(
            csv.lines()
                .any(|l| l.starts_with("merged,,solve,both,figure,time_ms,")),
            "{csv}"
        );
    }

    #[test]
    fn several_documents_in_one_file_are_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("runs.json");
        let mut bytes = Vec::new();
        for ms in [1.0, 2.0] {
            let r = report(None, vec![region(&["a"], 1, ms, &[])], Vec::new());
            r.json(&mut bytes).unwrap();
        }
        std::fs::write(&p, &bytes).unwrap();
        assert!(is_regions(&p).unwrap());
        let s = load(&p).unwrap();
        assert_eq!(s.runs.len(), 2);
        bytes.extend_from_slice(br#"{"schema": "tma.stat", "schema_version": 1}"#);
        std::fs::write(&p, &bytes).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("document 3 is \"tma.stat\""), "{e}");
    }
}
