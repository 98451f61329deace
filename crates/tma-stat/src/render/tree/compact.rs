//! `--compact`: one line per interval, level 1 and the metrics as columns.

use std::io::Write;

use tma_catalog::Unit;
use tma_metrics::Status;
use tma_render::OutputError;

use super::facts::*;
use crate::eval::IntervalReport;

/// One column of `--compact`: a level-1 node or a requested metric (`-m`, `-M`, `-B`).
#[derive(Debug, Clone)]
pub(super) struct CompactColumn {
    /// The node's name or the metric's catalog name (how the value is found).
    key: String,
    /// The header: the node's name or the metric's short name.
    head: String,
    metric: bool,
    width: usize,
}

/// `--compact`: the level-1 nodes of the first interval, then its metrics (`-m`, `-M`, `-B`) in
/// the report's order, with their widths.
pub(super) fn compact_columns(first: &IntervalReport) -> Vec<CompactColumn> {
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

pub(super) fn compact_header(w: &mut dyn Write, cols: &[CompactColumn]) -> Result<(), OutputError> {
    writeln!(w)?;
    writeln!(w, "{}", compact_head(cols))?;
    Ok(())
}

/// The header row of `--compact`: `end (s)` in its first 10 characters, then the columns.
pub(super) fn compact_head(cols: &[CompactColumn]) -> String {
    let mut head = format!("{:>10}", "end (s)");
    for c in cols {
        head.push_str(&format!("  {:>wd$}", c.head, wd = c.width));
    }
    head.push_str("  bottleneck");
    head
}

/// One line per interval: level-1 values, metric values and the bottleneck. A value that
/// could not be computed is `-`; one computed out of its range ends in `?` (the tree view
/// says why).
pub(super) fn compact_line(
    w: &mut dyn Write,
    cols: &[CompactColumn],
    ir: &IntervalReport,
) -> Result<(), OutputError> {
    writeln!(w, "{}", compact_text(cols, ir))?;
    Ok(())
}

/// One `--compact` line: the interval's end in its first 10 characters, then the values
/// and the bottleneck.
pub(super) fn compact_text(cols: &[CompactColumn], ir: &IntervalReport) -> String {
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
    // The verdict in one cell, worded as every output words it.
    line.push_str(&ir.report.bottleneck.label());
    line.trim_end().to_string()
}
