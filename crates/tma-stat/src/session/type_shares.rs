//! Each core type's part of a hybrid run's readings: its groups, CPUs and threads
//! ([`only_type`]), whether its groups took turns on its counters, each thread's cycles on
//! each type, and the notes that say so.

use std::io::Write;

use tma_perf::backend::{Ending, Measurement, RawInterval};
use tma_perf::plan::Plan;

use super::measure::intervals_of;
use super::state::Session;
use crate::hybrid::{cycles_event, CoreTable};
use crate::StatError;

/// The note on a core type whose groups took turns on its counters.
pub(super) fn took_turns_note(notes: &mut dyn Write, t: &CoreTable) -> std::io::Result<()> {
    writeln!(
        notes,
        "tma: note: the {l} events took turns on the counters; a task's time on the \
         {l}s is taken as the longest any of its groups ran, so the {l} counts may be \
         low and the merged view weighs that type too little (the {l} tree's shares \
         are not affected); fewer nodes or --cputype {} count without turns",
        t.pmu.strip_prefix("cpu_").unwrap_or(&t.pmu),
        l = t.label,
    )
}

/// The note on each core type's share of the run's cycles.
pub(super) fn cycles_note(
    notes: &mut dyn Write,
    tables: &[CoreTable],
    totals: &[f64],
) -> std::io::Result<()> {
    let all: f64 = totals.iter().sum();
    if all > 0.0 && tables.len() > 1 {
        let shares = tables
            .iter()
            .zip(totals)
            .map(|(t, c)| format!("{} {:.1}%", t.label, 100.0 * c / all))
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(notes, "tma: cycles by core type: {shares}")?;
    }
    Ok(())
}

/// One interval's readings of one core type (`pmu`): as [`only_type`], with the threads
/// that ran on that type in this interval.
pub(super) fn type_interval(view: &Plan, pmu: &str, raw: &RawInterval) -> RawInterval {
    let one = [Measurement {
        start_unix_s: 0.0,
        wall_ns: 0,
        intervals: vec![raw.clone()],
        ending: Ending::Exited(0),
        failed_groups: Vec::new(),
    }];
    only_type(view, pmu, &one)
        .pop()
        .and_then(|mut m| m.intervals.pop())
        .unwrap_or_else(|| raw.clone())
}

/// The readings of one core type (`pmu`): its view's groups only; with per-CPU counting only
/// the CPUs of that type (those its groups were opened on), with per-thread counting only
/// the threads that ran on it (their software counts too).
pub(super) fn only_type(view: &Plan, pmu: &str, runs: &[Measurement]) -> Vec<Measurement> {
    let mut ran: Vec<u32> = Vec::new();
    let mut cpus: Vec<u32> = Vec::new();
    for g in runs
        .iter()
        .flat_map(|m| &m.intervals)
        .flat_map(|iv| &iv.groups)
    {
        let on_type = view.groups.get(g.group).is_some_and(|x| x.pmu == pmu);
        if let Some(t) = g
            .tid
            .filter(|t| on_type && g.time_running_ns > 0 && !ran.contains(t))
        {
            ran.push(t);
        }
        if let Some(c) = g.cpu.filter(|c| on_type && !cpus.contains(c)) {
            cpus.push(c);
        }
    }
    runs.iter()
        .map(|m| {
            let mut m = m.clone();
            for iv in m.intervals.iter_mut() {
                iv.groups.retain(|g| {
                    view.groups
                        .get(g.group)
                        .is_some_and(|x| !x.events.is_empty())
                        && g.cpu.is_none_or(|c| cpus.is_empty() || cpus.contains(&c))
                        && g.tid.is_none_or(|t| ran.contains(&t))
                });
            }
            m
        })
        .collect()
}

/// A task attach point (thread, cgroup) with the shortest and longest running time of a
/// core type's groups there.
type Spans = Vec<((Option<u32>, Option<u32>), u64, u64)>;

/// Whether a core type's groups took turns at some task attach point: one ran clearly
/// shorter than another there (per-CPU readings have the plain multiplexing scale).
pub(super) fn took_turns(plan: &Plan, pmu: &str, runs: &[Measurement]) -> bool {
    runs.iter()
        .flat_map(|m| &m.intervals)
        .any(|iv| took_turns_in(plan, pmu, iv))
}

/// [`took_turns`] in one interval.
pub(super) fn took_turns_in(plan: &Plan, pmu: &str, iv: &RawInterval) -> bool {
    {
        let mut spans: Spans = Vec::new();
        for g in iv
            .groups
            .iter()
            .filter(|g| g.cpu.is_none() && plan.groups.get(g.group).is_some_and(|x| x.pmu == pmu))
        {
            let key = (g.tid, g.cgroup);
            match spans.iter_mut().find(|s| s.0 == key) {
                Some(s) => {
                    s.1 = s.1.min(g.time_running_ns);
                    s.2 = s.2.max(g.time_running_ns);
                }
                None => spans.push((key, g.time_running_ns, g.time_running_ns)),
            }
        }
        spans
            .iter()
            .any(|(_, lo, hi)| (*lo as f64) < 0.99 * *hi as f64)
    }
}

/// `--per-thread`: each thread's share of its cycles on each core type.
pub(super) fn thread_shares(
    s: &Session,
    tables: &[CoreTable],
    plan: &Plan,
    core_pmus: &[&str],
    runs: &[Measurement],
    notes: &mut dyn Write,
) -> Result<(), StatError> {
    let mut tids: Vec<u32> = Vec::new();
    for g in runs
        .iter()
        .flat_map(|m| &m.intervals)
        .flat_map(|iv| &iv.groups)
    {
        if let Some(t) = g.tid.filter(|t| !tids.contains(t)) {
            tids.push(t);
        }
    }
    for tid in tids {
        let mut cycles = Vec::new();
        for t in tables {
            let view = plan.core_view(&t.pmu, core_pmus);
            let mine: Vec<Measurement> = runs
                .iter()
                .map(|m| {
                    let mut m = m.clone();
                    for iv in m.intervals.iter_mut() {
                        iv.groups.retain(|g| g.tid == Some(tid));
                    }
                    m
                })
                .collect();
            let whole = intervals_of(&view, &mine, s.settings.no_multiplex, s.repeat(), false);
            let c = cycles_event(t.model)
                .and_then(|e| whole.last().and_then(|iv| iv.get(&e.name)?.value))
                .unwrap_or(0.0);
            cycles.push((t.label, c));
        }
        let sum: f64 = cycles.iter().map(|c| c.1).sum();
        if sum > 0.0 {
            let text = cycles
                .iter()
                .map(|(l, c)| format!("{l} {:.1}%", 100.0 * c / sum))
                .collect::<Vec<_>>()
                .join(", ");
            writeln!(notes, "tma: cycles by core type, thread {tid}: {text}")?;
        }
    }
    Ok(())
}
