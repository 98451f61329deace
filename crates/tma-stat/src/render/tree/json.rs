//! JSON: the `tma.stat` document ([`crate::render::doc`]) of a run, written as a stream.

use std::borrow::Cow;

use tma_metrics::{MetricResult, Status};

use super::facts::*;
use super::text::*;
use crate::eval::{IntervalReport, RunInfo};
use crate::render::doc::{
    CountDoc, CpuDoc, EventMapDoc, IntervalDoc, MetricDoc, NodeDoc, StatHead,
};

pub(super) fn status_code(s: &Status) -> &'static str {
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
pub(super) fn json_head(info: &RunInfo) -> StatHead {
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
        scope: info.scope.clone(),
        core_type: info.core_type.map(str::to_string),
    }
}

/// The document's sample for an interval.
/// The aggregated counts of an interval, as the documents carry them.
pub(super) fn counts(readings: Option<&tma_perf::Interval>) -> Vec<CountDoc> {
    let Some(iv) = readings else {
        return Vec::new();
    };
    iv.readings
        .iter()
        .filter(|r| r.cpu.is_none() && r.tid.is_none())
        .map(|r| CountDoc {
            event: r.event.clone(),
            value: r.value,
            status: match r.status {
                tma_perf::ReadingStatus::Counted => "counted",
                tma_perf::ReadingStatus::NotCounted => "not_counted",
                tma_perf::ReadingStatus::NotSupported => "not_supported",
            }
            .into(),
            counted_share: r.counted_share,
            enabled_ns: r.time_enabled_ns,
            running_ns: r.time_running_ns,
            group: r.group,
        })
        .collect()
}

pub(super) fn json_interval(
    info: &RunInfo,
    ir: &IntervalReport,
    readings: Option<&tma_perf::Interval>,
) -> IntervalDoc {
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
                estimated: n.estimated,
                perf: ir.perf.iter().find(|c| c.node == n.name).cloned(),
                only_on: ir
                    .only_on
                    .iter()
                    .find(|(x, _)| *x == n.name)
                    .map(|(_, t)| t.clone()),
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
        events: counts(readings),
    }
}

/// The metrics in output order with their kind and `-B` rank.
pub(super) fn metric_rows<'r>(
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
