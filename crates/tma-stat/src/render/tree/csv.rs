//! CSV: one row per node (and metric) per interval.

use std::io::Write;

use tma_catalog::Unit;
use tma_render::OutputError;

use super::facts::*;
use super::json::*;
use crate::eval::{IntervalReport, RunInfo};

/// A row, led by the core type's column in a tree of one core type of a hybrid part.
fn row(w: &mut dyn Write, info: &RunInfo, fields: &[&str]) -> Result<(), OutputError> {
    match info.core_type {
        Some(t) => {
            let mut all = Vec::with_capacity(fields.len() + 1);
            all.push(t);
            all.extend_from_slice(fields);
            tma_render::csv_row(w, &all)?;
        }
        None => tma_render::csv_row(w, fields)?,
    }
    Ok(())
}

pub(super) fn csv_header(w: &mut dyn Write, info: &RunInfo) -> Result<(), OutputError> {
    const HEADER: [&str; 12] = [
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
    ];
    match info.core_type {
        Some(_) => {
            let mut all = vec!["core_type"];
            all.extend_from_slice(&HEADER);
            tma_render::csv_row(w, &all)?;
        }
        None => tma_render::csv_row(w, &HEADER)?,
    }
    Ok(())
}

pub(super) fn unit_code(u: Unit) -> &'static str {
    u.name()
}

pub(super) fn csv_rows(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
    readings: Option<&tma_perf::Interval>,
) -> Result<(), OutputError> {
    csv_node_rows(w, info, ir)?;
    let (start, end) = (ir.start_s.to_string(), ir.end_s.to_string());
    csv_metric_rows(w, info, ir, &start, &end)?;
    // Count rows: the node column holds the event, the unit column `count` (or `ns` for
    // time events), the status column its state, the role column `event`, the detail column
    // the enabled and running times.
    for c in counts(readings) {
        let unit = if is_time_event(&c.event) {
            "ns"
        } else {
            "count"
        };
        let detail = match (c.enabled_ns, c.running_ns) {
            (Some(e), Some(r)) => format!("enabled_ns={e} running_ns={r}"),
            (None, Some(r)) => format!("running_ns={r}"),
            _ => String::new(),
        };
        row(
            w,
            info,
            &[
                start.as_str(),
                end.as_str(),
                &c.event,
                "",
                "",
                &c.value.map(|v| v.to_string()).unwrap_or_default(),
                unit,
                &c.status,
                "",
                &c.counted_share.map(|s| s.to_string()).unwrap_or_default(),
                "event",
                &detail,
            ],
        )?;
    }
    Ok(())
}

fn csv_metric_rows(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
    start: &str,
    end: &str,
) -> Result<(), OutputError> {
    // Metric rows: the node column holds the metric name, the parent column its group, the
    // level column the `-B` rank, the role column `metric` or `bottleneck_cost`.
    for (m, kind, rank) in metric_rows(info, ir) {
        row(
            w,
            info,
            &[
                start,
                end,
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

pub(super) fn csv_node_rows(
    w: &mut dyn Write,
    info: &RunInfo,
    ir: &IntervalReport,
) -> Result<(), OutputError> {
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
        row(
            w,
            info,
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

/// Events whose counts are times (nanoseconds here, whatever unit perf printed them in): the
/// software clocks, and perf's tool events.
fn is_time_event(event: &str) -> bool {
    use tma_perf::event::SoftwareEvent;
    // A scope modifier (`task-clock:u`) does not change the unit.
    let name = event.split(':').next().unwrap_or(event);
    SoftwareEvent::parse(name).is_some_and(SoftwareEvent::is_time)
        || matches!(name, "duration_time" | "user_time" | "system_time")
}
