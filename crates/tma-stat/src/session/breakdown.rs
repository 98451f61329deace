//! `--per-core` / `--per-thread`: the parts of a run and their trees (a stage between the
//! counting and the sinks).

use tma_host::Host;
use tma_perf::backend::Measurement;
use tma_perf::plan::Plan;

use super::measure::intervals_of;
use super::state::Session;
use crate::eval::{RunInfo, StatRun};
use crate::StatError;

/// `--per-core` / `--per-thread`: one breakdown key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Key {
    Core(String),
    Thread(u32),
}

impl Key {
    pub(super) fn label(&self) -> String {
        match self {
            Key::Core(c) => format!("core {c}"),
            Key::Thread(t) => format!("thread {t}"),
        }
    }
}

/// `S<package>-C<core>` of each CPU (`S?-C?` when its topology is unreadable).
pub(super) fn cpu_cores(host: &Host, cpus: &[u32]) -> Vec<(u32, String)> {
    cpus.iter()
        .map(|&c| {
            let label = host.cpu_topology(c).map_or_else(
                |_| "S?-C?".to_string(),
                |t| format!("S{}-C{}", t.package, t.core),
            );
            (c, label)
        })
        .collect()
}

pub(super) fn core_label(cores: &[(u32, String)], cpu: u32) -> String {
    cores
        .iter()
        .find(|(x, _)| *x == cpu)
        .map_or_else(|| format!("cpu{cpu}"), |(_, l)| l.clone())
}

/// The breakdown keys of a run, in order of first appearance.
pub(super) fn breakdown_keys(
    runs: &[Measurement],
    per_core: bool,
    per_thread: bool,
    cores: &[(u32, String)],
) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    for g in runs
        .iter()
        .flat_map(|m| &m.intervals)
        .flat_map(|iv| &iv.groups)
    {
        let k = if per_core {
            g.cpu.map(|c| Key::Core(core_label(cores, c)))
        } else if per_thread {
            g.tid.map(Key::Thread)
        } else {
            None
        };
        if let Some(k) = k {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// The part of a measurement that belongs to one breakdown key.
pub(super) fn only_key(m: &Measurement, key: &Key, cores: &[(u32, String)]) -> Measurement {
    let mut out = m.clone();
    for iv in &mut out.intervals {
        iv.groups.retain(|g| match key {
            Key::Core(label) => g.cpu.is_some_and(|c| core_label(cores, c) == *label),
            Key::Thread(t) => g.tid == Some(*t),
        });
    }
    out
}

/// `--per-core` / `--per-thread`: each core's or thread's share of the runs, labelled, in
/// order of first appearance.
pub(super) fn breakdown_runs(s: &Session, runs: &[Measurement]) -> Vec<(String, Vec<Measurement>)> {
    breakdown_keys(
        runs,
        s.settings.per_core,
        s.settings.per_thread,
        &s.cpu_cores,
    )
    .into_iter()
    .map(|key| {
        let part = runs
            .iter()
            .map(|m| only_key(m, &key, &s.cpu_cores))
            .collect();
        (key.label(), part)
    })
    .collect()
}

/// One tree per core / thread, shown after the aggregated tree.
pub(super) fn breakdown_parts(
    s: &Session,
    info: &RunInfo,
    plan: &Plan,
    runs: &[Measurement],
) -> Result<Vec<StatRun>, StatError> {
    breakdown_runs(s, runs)
        .into_iter()
        .map(|(label, part)| {
            let ivs = intervals_of(plan, &part, false, 1, s.interval_mode());
            let mut kinfo = info.clone();
            kinfo.source = format!("{}, {label}", info.source);
            StatRun::evaluate(kinfo, &ivs)
        })
        .collect()
}
