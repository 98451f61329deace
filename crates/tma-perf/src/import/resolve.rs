//! Second import step: map perf event specs onto a CPU model's canonical event ids, and sum
//! per-CPU / per-thread rows into aggregated readings.

use std::collections::HashMap;

use super::ResolveError;
use crate::readings::{Interval, Reading, ReadingStatus};

/// Events perf counts on any machine that no CPU table lists: software, tool and generic
/// hardware events. They are kept under their perf name when the model does not know them.
const GENERIC_EVENTS: &[&str] = &[
    "task-clock",
    "cpu-clock",
    "page-faults",
    "faults",
    "minor-faults",
    "major-faults",
    "context-switches",
    "cs",
    "cpu-migrations",
    "migrations",
    "alignment-faults",
    "emulation-faults",
    "duration_time",
    "user_time",
    "system_time",
    "cycles",
    "cpu-cycles",
    "instructions",
    "branches",
    "branch-instructions",
    "branch-misses",
    "cache-references",
    "cache-misses",
    "ref-cycles",
    "bus-cycles",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "msr/tsc/",
    "msr/aperf/",
    "msr/mperf/",
];

/// Whether `spec` is a generic perf event (with or without `:u`/`:k` style modifiers).
pub fn is_generic_event(spec: &str) -> bool {
    let base = spec.split(':').next().unwrap_or(spec);
    GENERIC_EVENTS.iter().any(|g| g.eq_ignore_ascii_case(base))
}

/// The result of [`resolve`].
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveOutcome {
    /// Readings renamed to canonical ids (generic events keep their perf name).
    pub intervals: Vec<Interval>,
    /// perf spec -> canonical id, for every spec the model knows.
    pub mapping: Vec<(String, String)>,
    /// Generic events kept under their perf name.
    pub generic: Vec<String>,
}

/// Rename every reading's `event` from its perf spec to the canonical ids given by
/// `resolve_spec` (normally `Model::resolve_perf_event_all`; empty = unknown). When several
/// ids share the spec's encoding (`TOPDOWN.SLOTS` and `TOPDOWN.SLOTS:perf_metrics`), the
/// reading is provided under each of them.
///
/// Specs the model does not know and that are not generic perf events are an error; when
/// `guess_other_cpu` names a model on which they resolve, the error says so. Two specs
/// resolving to the same canonical id in one interval are an error too.
pub fn resolve(
    intervals: &[Interval],
    model_key: &'static str,
    mut resolve_spec: impl FnMut(&str) -> Vec<String>,
    guess_other_cpu: impl FnOnce(&[String]) -> Option<&'static str>,
) -> Result<ResolveOutcome, ResolveError> {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for iv in intervals {
        for r in &iv.readings {
            if !map.contains_key(&r.event) {
                let c = resolve_spec(&r.event);
                map.insert(r.event.clone(), c);
                order.push(r.event.clone());
            }
        }
    }
    let unknown: Vec<String> = order
        .iter()
        .filter(|s| map[*s].is_empty() && !is_generic_event(s))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        let other_cpu = guess_other_cpu(&unknown);
        return Err(ResolveError::UnknownEvents {
            model: model_key,
            events: unknown,
            other_cpu,
        });
    }
    // Two specs for one canonical event.
    let mut by_canonical: HashMap<&str, &str> = HashMap::new();
    for spec in &order {
        for c in &map[spec] {
            if let Some(first) = by_canonical.insert(c.as_str(), spec.as_str()) {
                if first != spec {
                    return Err(ResolveError::SameEvent {
                        model: model_key,
                        first: first.to_string(),
                        second: spec.clone(),
                        canonical: c.clone(),
                    });
                }
            }
        }
    }
    let out = intervals
        .iter()
        .map(|iv| {
            let mut readings = Vec::with_capacity(iv.readings.len());
            for r in &iv.readings {
                match map.get(&r.event).map(Vec::as_slice) {
                    Some([]) | None => readings.push(r.clone()),
                    Some(ids) => {
                        for id in ids {
                            let mut c = r.clone();
                            c.event = id.clone();
                            readings.push(c);
                        }
                    }
                }
            }
            Interval {
                start_s: iv.start_s,
                end_s: iv.end_s,
                readings,
            }
        })
        .collect();
    Ok(ResolveOutcome {
        intervals: out,
        mapping: order
            .iter()
            .filter_map(|s| map[s].first().map(|c| (s.clone(), c.clone())))
            .collect(),
        generic: order
            .iter()
            .filter(|s| map[*s].is_empty())
            .cloned()
            .collect(),
    })
}

/// Add an aggregated reading for every event that only has per-CPU / per-thread readings in
/// an interval: values are summed; the counted share is the mean share over the rows (a
/// row that was not counted contributes 0); the event is missing when no row was counted.
pub fn aggregate(iv: &Interval) -> Interval {
    let mut out = iv.clone();
    let mut order: Vec<&str> = Vec::new();
    let mut groups: HashMap<&str, Vec<&Reading>> = HashMap::new();
    for r in &iv.readings {
        if r.cpu.is_some() || r.tid.is_some() {
            let e = groups.entry(r.event.as_str()).or_default();
            if e.is_empty() {
                order.push(r.event.as_str());
            }
            e.push(r);
        }
    }
    for ev in order {
        if iv.get(ev).is_some() {
            continue;
        }
        let rows = &groups[ev];
        let counted: Vec<&&Reading> = rows.iter().filter(|r| r.value.is_some()).collect();
        let reading = if counted.is_empty() {
            let status = if rows.iter().all(|r| r.status == ReadingStatus::NotSupported) {
                ReadingStatus::NotSupported
            } else {
                ReadingStatus::NotCounted
            };
            Reading::missing(ev, status)
        } else {
            let sum: f64 = counted.iter().filter_map(|r| r.value).sum();
            let share: f64 = rows
                .iter()
                .map(|r| r.counted_share.unwrap_or(0.0))
                .sum::<f64>()
                / rows.len() as f64;
            let mut r = Reading::from_scaled(ev, sum, Some(share * 100.0));
            r.time_running_ns = counted.iter().map(|r| r.time_running_ns).sum();
            r
        };
        out.readings.push(reading);
    }
    out
}
