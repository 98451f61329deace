//! `tma diff` as text (the tree with before, after, delta and p), JSON (`tma.diff` v1) and
//! CSV (one row per node and metric); two profiles as a table, JSON (`tma.diff-profile` v1)
//! and CSV (one row per function).

use std::io::Write;

use tma_render::OutputError;

use crate::doc::{DiffDoc, ProfileDiffDoc};
use crate::profile::{ProfileDiff, ProfileRow, ProfileSide};
use crate::stats::ALPHA;
use crate::{Diff, Row, Side, Significance};

/// The schema name of `tma diff --json`.
pub const SCHEMA: &str = "tma.diff";
/// Its version: 2 since schema names 2026-11 (units as `percent_slots`; version 1 wrote
/// `PercentSlots`, which readers still read).
pub const SCHEMA_VERSION: u32 = 2;

fn samples(s: &Side) -> String {
    let what = match (s.sample_kind, s.samples) {
        (_, 1) => "sample",
        ("repeats", _) => "runs",
        ("intervals", _) => "intervals",
        _ => "samples",
    };
    format!("{} {what}", s.samples)
}

fn delta_text(r: &Row) -> String {
    let Some(d) = r.delta else {
        return "-".into();
    };
    let rel = r
        .relative
        .map_or(String::new(), |x| format!(" ({:+.1}%)", x * 100.0));
    if r.percent() {
        format!("{d:+.1} pts{rel}")
    } else {
        format!("{d:+.2}{rel}")
    }
}

fn p_text(r: &Row) -> String {
    match (&r.welch, &r.significance) {
        (Some(w), Significance::Significant) => format!("{:.3} *", w.p),
        (Some(w), _) => format!("{:.3}", w.p),
        _ => "?".into(),
    }
}

fn value_text(r: &Row, s: Option<crate::Summary>) -> String {
    s.map_or("-".into(), |s| r.format_value(s.mean))
}

pub(crate) fn table(
    w: &mut dyn Write,
    rows: &[Row],
    title: &str,
    indent: bool,
) -> std::io::Result<()> {
    let name = |r: &Row| {
        let pad = if indent {
            "  ".repeat(r.level.saturating_sub(1) as usize)
        } else {
            String::new()
        };
        format!("{pad}{}", r.name)
    };
    let width = rows
        .iter()
        .map(|r| name(r).len())
        .max()
        .unwrap_or(0)
        .max(title.len());
    writeln!(
        w,
        "{title:<width$}  {:>9}  {:>9}  {:>22}  {:>8}",
        "before", "after", "delta", "p"
    )?;
    for r in rows {
        writeln!(
            w,
            "{:<width$}  {:>9}  {:>9}  {:>22}  {:>8}",
            name(r),
            value_text(r, r.before),
            value_text(r, r.after),
            delta_text(r),
            p_text(r)
        )?;
    }
    Ok(())
}

/// The readable comparison.
pub fn text(w: &mut dyn Write, d: &Diff) -> Result<(), OutputError> {
    writeln!(
        w,
        "{} ({}): before {} ({}), after {} ({})",
        d.before.cpu_name,
        d.before.cpu_key,
        d.before.file,
        samples(&d.before),
        d.after.file,
        samples(&d.after)
    )?;
    let software = d.before.cpu_key == crate::input::SOFTWARE;
    if software {
        writeln!(
            w,
            "values are means over the samples; no tree: neither run had hardware counters \
             (clocks in msec)"
        )?;
    } else {
        writeln!(
            w,
            "values are means over the samples; tree nodes in % of pipeline slots, deltas in points"
        )?;
    }
    writeln!(w)?;
    if !software {
        table(w, &d.nodes, "node", true)?;
    }
    if !d.metrics.is_empty() {
        if !software {
            writeln!(w)?;
        }
        table(
            w,
            &d.metrics,
            if software { "count" } else { "metric" },
            false,
        )?;
    }
    writeln!(w)?;
    if !software {
        writeln!(w, "Bottleneck: {}", d.bottleneck.text)?;
    }
    for (side, p) in [
        ("before", &d.bottleneck.phases_before),
        ("after", &d.bottleneck.phases_after),
    ] {
        if let Some(p) = p {
            writeln!(w, "  {side}: {p}")?;
        }
    }
    if d.tested() {
        writeln!(
            w,
            "p: Welch's t-test (two-sided) over the samples of each side; * p < {ALPHA}; ? = \
             not testable (fewer than two samples on a side, or no variation)"
        )?;
    } else {
        let why = d
            .nodes
            .iter()
            .chain(&d.metrics)
            .find_map(|r| match &r.significance {
                Significance::Unknown { reason } => Some(reason.as_str()),
                _ => None,
            })
            .unwrap_or("nothing to test");
        writeln!(w, "Significance unknown: {why}.")?;
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

/// `tma.diff` ([`DiffDoc`]).
pub fn json(w: &mut dyn Write, d: &Diff) -> Result<(), OutputError> {
    tma_render::write_json(w, SCHEMA, SCHEMA_VERSION, &DiffDoc::of(d))
}

/// The CSV columns of one [`Row`] (after the columns that say where it belongs).
pub(crate) const ROW_COLUMNS: [&str; 17] = [
    "kind",
    "name",
    "parent",
    "level",
    "unit",
    "before_n",
    "before_mean",
    "before_sd",
    "after_n",
    "after_mean",
    "after_sd",
    "delta",
    "relative_change",
    "t",
    "df",
    "p_value",
    "significance",
];

/// The [`ROW_COLUMNS`] of one row, full precision (empty where a figure is unknown).
pub(crate) fn row_fields(kind: &str, r: &Row) -> Vec<String> {
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    let sig = match &r.significance {
        Significance::Significant => "significant",
        Significance::NotSignificant => "not_significant",
        Significance::Unknown { .. } => "unknown",
    };
    vec![
        kind.to_string(),
        r.name.clone(),
        r.parent.clone().unwrap_or_default(),
        r.level.to_string(),
        r.unit.clone(),
        r.before.map_or(0, |s| s.n).to_string(),
        opt(r.before.map(|s| s.mean)),
        opt(r.before.and_then(|s| s.sd)),
        r.after.map_or(0, |s| s.n).to_string(),
        opt(r.after.map(|s| s.mean)),
        opt(r.after.and_then(|s| s.sd)),
        opt(r.delta),
        opt(r.relative),
        opt(r.welch.map(|t| t.t)),
        opt(r.welch.map(|t| t.df)),
        opt(r.welch.map(|t| t.p)),
        sig.to_string(),
    ]
}

/// One row per node and metric, full precision.
pub fn csv(w: &mut dyn Write, d: &Diff) -> Result<(), OutputError> {
    tma_render::csv_row(w, &ROW_COLUMNS)?;
    for (kind, rows) in [("node", &d.nodes), ("metric", &d.metrics)] {
        for r in rows {
            tma_render::csv_row(w, &row_fields(kind, r))?;
        }
    }
    Ok(())
}

/// The schema name of `tma diff --json` for two profiles.
pub const PROFILE_SCHEMA: &str = "tma.diff.profile";
/// Its version: 2 since schema names 2026-11 (version 1 was named `tma.diff-profile`).
pub const PROFILE_SCHEMA_VERSION: u32 = 2;

fn profile_side(s: &ProfileSide) -> String {
    format!("{} ({}, {} samples)", s.file, s.event, s.samples)
}

/// Two profiles as a table: function (module), share before and after, delta in points.
pub fn profile_text(w: &mut dyn Write, d: &ProfileDiff) -> Result<(), OutputError> {
    writeln!(
        w,
        "profiles: before {}, after {}",
        profile_side(&d.before),
        profile_side(&d.after)
    )?;
    writeln!(
        w,
        "shares in % of each profile's samples, deltas in points, sorted by |delta|"
    )?;
    writeln!(w)?;
    let name = |r: &ProfileRow| format!("{} ({})", r.function, r.module);
    let width = d
        .rows
        .iter()
        .map(|r| name(r).chars().count())
        .max()
        .unwrap_or(0)
        .max("function (module)".len());
    writeln!(
        w,
        "{:<width$}  {:>8}  {:>8}  {:>11}",
        "function (module)", "before", "after", "delta"
    )?;
    for r in &d.rows {
        writeln!(
            w,
            "{:<width$}  {:>8}  {:>8}  {:>11}",
            name(r),
            format!("{:.2}%", r.before_percent),
            format!("{:.2}%", r.after_percent),
            format!("{:+.2} pts", r.delta)
        )?;
    }
    for n in d.notes() {
        writeln!(w, "note: {n}")?;
    }
    Ok(())
}

/// `tma.diff-profile` version 1 ([`ProfileDiffDoc`]).
pub fn profile_json(w: &mut dyn Write, d: &ProfileDiff) -> Result<(), OutputError> {
    tma_render::write_json(
        w,
        PROFILE_SCHEMA,
        PROFILE_SCHEMA_VERSION,
        &ProfileDiffDoc::of(d),
    )
}

/// One row per function, full precision.
pub fn profile_csv(w: &mut dyn Write, d: &ProfileDiff) -> Result<(), OutputError> {
    tma_render::csv_row(
        w,
        &[
            "function",
            "module",
            "before_samples",
            "before_percent",
            "after_samples",
            "after_percent",
            "delta",
        ],
    )?;
    for r in &d.rows {
        tma_render::csv_row(
            w,
            &[
                r.function.clone(),
                r.module.clone(),
                r.before_samples.to_string(),
                r.before_percent.to_string(),
                r.after_samples.to_string(),
                r.after_percent.to_string(),
                r.delta.to_string(),
            ],
        )?;
    }
    Ok(())
}
