//! The `tma diff` use case as a library: compare two runs of the same TMA tree (before and
//! after a change), node by node and metric by metric, say where the bottleneck moved, test
//! each delta for significance where the runs hold several samples, and check CI gates.
//!
//! The CLI turns its arguments into a [`DiffConfig`] and calls [`run`], then picks a
//! renderer from [`render`]. Data flow:
//!
//! * [`input`]: each side from a `tma stat --json` document, or from a recording evaluated
//!   in-process by [`tma_stat::evaluate`] (`perf stat` CSV/JSON with `--cpu`, `--record`
//!   snapshots).
//! * [`profile`]: two profiles (perf.data files or `tma locate --json` documents) instead
//!   of two trees: each hot function's share before and after, as `perf diff` does;
//!   [`inputs`] tells which comparison two files call for.
//! * [`regions`]: two `tma stat --regions` documents compared region by region.
//! * [`diff`]: the two sides -> [`Diff`] (one [`Row`] per node and metric, the
//!   [`BottleneckMove`]); [`stats`]: means and Welch's t-test; [`gate`]: `--fail-if`.

pub mod doc;
mod error;
pub mod gate;
pub mod input;
pub mod profile;
pub mod regions;
pub mod render;
pub mod stats;

use std::io::Write;
use std::path::{Path, PathBuf};

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use tma_host::Host;

pub use error::DiffError;
pub use gate::{Gate, GateResult};
pub use input::{Series, Side};
pub use stats::{Significance, Summary, Welch};

/// Everything `tma diff` needs; no clap.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffConfig {
    pub before: PathBuf,
    pub after: PathBuf,
    /// How recordings are read (`--cpu`, `-l`, `--nodes`, `--smt`); `-l` is also a filter
    /// for `tma.stat` documents (default: every node they hold).
    pub read: tma_stat::ReadOptions,
    /// Recordings: `-m` (see [`tma_stat::StatConfig::metrics`]).
    pub metrics: Option<Vec<String>>,
    /// `--fail-if` expressions, parsed up front by [`run`].
    pub gates: Vec<String>,
    /// The `/sys` and `/proc` roots (for a recording that names no CPU, this machine's).
    pub host: Host,
}

impl Default for DiffConfig {
    fn default() -> Self {
        DiffConfig {
            before: PathBuf::new(),
            after: PathBuf::new(),
            read: tma_stat::ReadOptions::default(),
            metrics: None,
            gates: Vec::new(),
            host: Host::system(),
        }
    }
}

/// One node or metric, before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub name: String,
    #[serde(default)]
    pub parent: Option<String>,
    /// Tree level (0 for metrics).
    #[serde(default)]
    pub level: u8,
    pub unit: String,
    pub before: Option<Summary>,
    pub after: Option<Summary>,
    /// after mean - before mean (points of % for tree nodes).
    pub delta: Option<f64>,
    /// delta / |before mean| (a fraction); `None` when before is 0 or missing.
    pub relative: Option<f64>,
    /// Welch's test, when both sides have two samples or more with some variation.
    pub welch: Option<Welch>,
    pub significance: Significance,
}

impl Row {
    /// Whether the values are percentages (tree nodes, percent metrics).
    pub fn percent(&self) -> bool {
        tma_catalog::Unit::names_percent(&self.unit)
    }

    /// A value in this row's unit, for text.
    pub fn format_value(&self, v: f64) -> String {
        if self.percent() {
            format!("{v:.1}%")
        } else {
            format!("{v:.2}")
        }
    }

    /// Where the value is missing: "the before run", "the after run" or "both runs".
    pub fn missing_side(&self) -> &'static str {
        match (self.before.is_some(), self.after.is_some()) {
            (false, true) => "the before run",
            (true, false) => "the after run",
            (false, false) => "both runs",
            _ => "neither run (it has values in both)",
        }
    }

    fn new(b: Option<&Series>, a: Option<&Series>) -> Row {
        let s = a.or(b).expect("a row has a series on one side at least");
        let before = b.and_then(|s| Summary::of(&s.values));
        let after = a.and_then(|s| Summary::of(&s.values));
        let delta = before.zip(after).map(|(b, a)| a.mean - b.mean);
        let relative = before
            .zip(delta)
            .filter(|(b, _)| b.mean != 0.0)
            .map(|(b, d)| d / b.mean.abs());
        let test = match (&before, &after) {
            (Some(b), Some(a)) => stats::welch(b, a),
            _ => Err("no value on one side".to_string()),
        };
        Row {
            name: s.name.clone(),
            parent: s.parent.clone(),
            level: s.level,
            unit: s.unit.clone(),
            before,
            after,
            delta,
            relative,
            welch: test.as_ref().ok().copied(),
            significance: Significance::of(&test),
        }
    }
}

/// Where the bottleneck was and is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BottleneckMove {
    /// Path from level 1 in the before run (empty: none).
    #[serde(default)]
    pub before: Vec<String>,
    #[serde(default)]
    pub after: Vec<String>,
    /// The before bottleneck's value before and after.
    #[serde(default)]
    pub old_before: Option<f64>,
    #[serde(default)]
    pub old_after: Option<f64>,
    /// `unchanged` (the same path), else for the before bottleneck: `fixed` (under its
    /// threshold after), `reduced`, `grew`, `same value` (its threshold verdict after may be
    /// unknown), or `not measured`.
    #[serde(default)]
    pub verdict: Cow<'static, str>,
    /// The after bottleneck's value after.
    #[serde(default)]
    pub new_after: Option<f64>,
    /// The one line the text output prints.
    pub text: String,
    /// Where a side's bottleneck changes over its samples, which its means hide
    /// ([`tma_metrics::phases_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases_before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases_after: Option<String>,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    pub before: Side,
    pub after: Side,
    pub nodes: Vec<Row>,
    pub metrics: Vec<Row>,
    pub bottleneck: BottleneckMove,
    pub gates: Vec<GateResult>,
}

impl Diff {
    /// The gates that tripped.
    pub fn tripped(&self) -> impl Iterator<Item = &GateResult> {
        self.gates.iter().filter(|g| g.tripped)
    }

    /// Whether any row could be tested (some side has several samples).
    pub fn tested(&self) -> bool {
        self.nodes
            .iter()
            .chain(&self.metrics)
            .any(|r| r.welch.is_some())
    }
}

/// Read both runs, compare them and check the gates (parsed first, so a bad expression
/// fails before any file is read). Notes of the imports go to `notes`.
pub fn run(cfg: &DiffConfig, notes: &mut dyn Write) -> Result<Diff, DiffError> {
    let gates = cfg
        .gates
        .iter()
        .map(|g| gate::parse(g))
        .collect::<Result<Vec<_>, _>>()?;
    let before = input::load(cfg, &cfg.before, notes)?;
    let after = input::load(cfg, &cfg.after, notes)?;
    let mut d = diff(before, after)?;
    d.gates = gates
        .iter()
        .map(|g| gate::check(g, &d.nodes, &d.metrics))
        .collect::<Result<_, _>>()?;
    Ok(d)
}

/// Whether `before` and `after` are both profiles (`true`) or both trees (`false`); a
/// profile and a tree is [`DiffError::Mixed`].
pub fn inputs(before: &Path, after: &Path) -> Result<bool, DiffError> {
    let b = profile::detect(before)?.is_profile();
    let a = profile::detect(after)?.is_profile();
    match (b, a) {
        (true, false) => Err(DiffError::Mixed {
            profile: before.display().to_string(),
            tree: after.display().to_string(),
        }),
        (false, true) => Err(DiffError::Mixed {
            profile: after.display().to_string(),
            tree: before.display().to_string(),
        }),
        (both, _) => Ok(both),
    }
}

/// Compare two sides of the same CPU model (else [`DiffError::CpuMismatch`]).
pub fn diff(before: Side, after: Side) -> Result<Diff, DiffError> {
    if before.cpu_key != after.cpu_key {
        return Err(DiffError::CpuMismatch {
            before: before.cpu_name,
            before_key: before.cpu_key,
            after: after.cpu_name,
            after_key: after.cpu_key,
        });
    }
    let nodes = rows(&before.nodes, &after.nodes);
    let metrics = rows(&before.metrics, &after.metrics);
    let bottleneck = bottleneck_move(&before, &after, &nodes);
    Ok(Diff {
        before,
        after,
        nodes,
        metrics,
        bottleneck,
        gates: Vec::new(),
    })
}

/// Rows in the before run's order; series only the after run has follow their parent (or
/// go last).
fn rows(before: &[Series], after: &[Series]) -> Vec<Row> {
    let mut out: Vec<Row> = before
        .iter()
        .map(|b| Row::new(Some(b), after.iter().find(|a| a.name == b.name)))
        .collect();
    for a in after
        .iter()
        .filter(|a| !before.iter().any(|b| b.name == a.name))
    {
        let row = Row::new(None, Some(a));
        let at = a
            .parent
            .as_ref()
            .and_then(|p| {
                out.iter()
                    .rposition(|r| &r.name == p || r.parent.as_ref() == Some(p))
            })
            .map_or(out.len(), |i| i + 1);
        out.insert(at, row);
    }
    out
}

fn bottleneck_move(before: &Side, after: &Side, nodes: &[Row]) -> BottleneckMove {
    let row = |name: Option<&String>| name.and_then(|n| nodes.iter().find(|r| &r.name == n));
    let (old_path, new_path) = (&before.verdict.path, &after.verdict.path);
    let old = row(old_path.last());
    let new = row(new_path.last());
    let old_before = old.and_then(|r| r.before).map(|s| s.mean);
    let old_after = old.and_then(|r| r.after).map(|s| s.mean);
    let new_after = new.and_then(|r| r.after).map(|s| s.mean);
    // The old bottleneck's threshold verdict in the after run: over, under, or not known.
    let old_above_after = old_path.last().and_then(|n| {
        after
            .nodes
            .iter()
            .find(|s| &s.name == n)
            .and_then(|s| threshold_verdict(s, after.samples))
    });
    let verdict = match (old_before, old_after) {
        (Some(_), Some(_)) if old_path == new_path => "unchanged",
        (Some(_), Some(_)) if old_above_after == Some(false) => "fixed",
        (Some(b), Some(a)) if a < b => "reduced",
        (Some(b), Some(a)) if a > b => "grew",
        (Some(_), Some(_)) => "same value",
        _ => "not measured",
    };
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}%"));
    let path = |p: &[String]| p.join(" > ");
    // A side's verdict in one cell, as `--compact` writes it.
    let (old_label, new_label) = (before.verdict.label(), after.verdict.label());
    let text = if old_path.is_empty() && new_path.is_empty() {
        if old_label == new_label {
            format!("{old_label} in either run")
        } else {
            format!("{old_label} before; {new_label} after")
        }
    } else if old_path.is_empty() {
        format!(
            "{old_label} before; now {} ({})",
            path(new_path),
            pct(new_after)
        )
    } else if old_path == new_path {
        let change = match (old_before, old_after) {
            (Some(b), Some(a)) if (a - b).abs() >= 0.05 => format!(
                "{} by {:.1} points ({} → {})",
                if a < b { "down" } else { "up" },
                (a - b).abs(),
                pct(Some(b)),
                pct(Some(a))
            ),
            (Some(b), Some(_)) => format!("at {} in both runs", pct(Some(b))),
            (b, a) => format!("{} → {}", pct(b), pct(a)),
        };
        let node = old_path.last().map_or("", String::as_str);
        let how = if old_label == new_label {
            // What qualifies the node in both runs (`(a ~ b)` below it), said once.
            old_label
                .strip_prefix(node)
                .filter(|q| !q.is_empty())
                .map(str::to_string)
                .unwrap_or_default()
        } else {
            format!(" (before: {old_label}; after: {new_label})")
        };
        format!("{} stayed the bottleneck, {change}{how}", path(old_path))
    } else {
        let why = match (verdict, old_above_after) {
            ("reduced" | "grew" | "same value", None) => {
                format!("{verdict}; its threshold could not be evaluated after")
            }
            _ => verdict.to_string(),
        };
        let now = if new_path.is_empty() {
            format!("now {new_label}")
        } else {
            format!("bottleneck now {} ({})", path(new_path), pct(new_after))
        };
        format!(
            "{} {} → {} ({why}); {now}",
            path(old_path),
            pct(old_before),
            pct(old_after)
        )
    };
    let what = |s: &Side| {
        if s.sample_kind == "repeats" {
            "repeats"
        } else {
            "intervals"
        }
    };
    BottleneckMove {
        before: old_path.clone(),
        after: new_path.clone(),
        old_before,
        old_after,
        verdict: Cow::Borrowed(verdict),
        new_after,
        text,
        phases_before: tma_metrics::phases_text(&before.phases, what(before)),
        phases_after: tma_metrics::phases_text(&after.phases, what(after)),
    }
}

/// A series' threshold verdict over its side's samples: over or under in most of them;
/// `None` when they split or most had none.
fn threshold_verdict(s: &Series, samples: usize) -> Option<bool> {
    if 2 * s.above > samples {
        Some(true)
    } else if 2 * s.below > samples {
        Some(false)
    } else {
        None
    }
}
