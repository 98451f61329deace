//! Counting for an exporter (`tma serve`): the same sessions as `tma stat` (planning,
//! multiplexing, scaling, the software fallback without a PMU, snapshot replay, streamed perf
//! stat imports), but each interval goes to a [`Watcher`] as soon as it is read and
//! evaluated, instead of being written. Nothing is kept: memory stays flat however long it
//! runs.

use std::io::Write;

use tma_perf::backend::{RawInterval, Target};
use tma_perf::plan::Plan;
use tma_perf::Interval;

use crate::error::usage;
use crate::eval::{IntervalReport, RunInfo};
use crate::{import, session, FileInput, ImportSource, Input, Outcome, StatConfig, StatError};

/// What is known before the first interval.
#[derive(Debug, Clone, Copy)]
pub enum WatchStart<'a> {
    /// Hardware counters (or a recording of them): every interval comes with its tree.
    Tree {
        info: &'a RunInfo,
        /// The counter groups (live counting and snapshots; `None` for perf stat imports).
        plan: Option<&'a Plan>,
        /// What is counted (`None` for perf stat imports).
        target: Option<&'a Target>,
    },
    /// No hardware counters: software counts only, and no tree.
    Software {
        plan: &'a Plan,
        target: Option<&'a Target>,
        /// Why there are no hardware counters, when known.
        reason: Option<&'a str>,
    },
}

/// One interval.
#[derive(Debug, Clone, Copy)]
pub struct WatchInterval<'a> {
    /// The raw group readings per attach point (CPU, thread, cgroup), for breakdowns
    /// through [`tma_perf::backend::Measurement::interval_readings`]; `None` for perf stat
    /// imports and whole-run recordings.
    pub raw: Option<&'a RawInterval>,
    /// The aggregated, multiplex-scaled readings.
    pub readings: &'a Interval,
    /// The evaluated tree ([`WatchStart::Tree`] only).
    pub report: Option<&'a IntervalReport>,
}

/// Receives a watched run.
pub trait Watcher {
    /// Once, before the first interval.
    fn start(&mut self, start: WatchStart<'_>);
    /// Each interval, in order, as soon as it is read.
    fn interval(&mut self, iv: WatchInterval<'_>);
}

/// Count `cfg`'s live target every `-I` interval until SIGINT/SIGTERM or `--duration`
/// (`Input::Live`), or read a recording (`Input::Import`, `Input::Example`), handing each
/// interval to `w`. Notes and warnings go to `notes`. Settings that need a whole run
/// (`--repeat`, `--drilldown`, `--no-multiplex`, `--per-core`, `--per-thread`, `--record`)
/// are refused: an exporter streams.
pub fn watch(
    cfg: &StatConfig,
    w: &mut dyn Watcher,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    match &cfg.input {
        Input::Live => {
            let l = &cfg.live;
            if l.interval_ms.is_none() {
                return Err(usage("watching live counts needs an interval (-I MS)"));
            }
            let mut bad = Vec::new();
            for (set, name) in [
                (l.repeat.is_some_and(|n| n > 1), "--repeat"),
                (l.drilldown, "--drilldown"),
                (l.no_multiplex, "--no-multiplex"),
                (l.per_core, "--per-core"),
                (l.per_thread, "--per-thread"),
                (l.record.is_some(), "--record"),
            ] {
                if set {
                    bad.push(name);
                }
            }
            if !bad.is_empty() {
                return Err(usage(format!(
                    "{} need a whole run; an exporter streams intervals",
                    bad.join(", ")
                )));
            }
            session::run_live(cfg, l, &mut std::io::sink(), notes, &mut |_| {}, Some(w))
        }
        Input::Example => {
            let mut c = cfg.clone();
            c.cpu.get_or_insert_with(|| "zen4".into());
            import::watch_perf_stat(&c, crate::EXAMPLE_CSV, crate::EXAMPLE_NAME, w, notes)
        }
        Input::Import(path) => {
            crate::check_import_flags(&cfg.live)?;
            match crate::open_import(cfg, path)? {
                ImportSource::Stream(input, file) => {
                    import::watch_perf_stat(cfg, input, &file, w, notes)
                }
                ImportSource::Whole(FileInput::PerfStat(bytes, file)) => {
                    import::watch_perf_stat(cfg, &bytes[..], &file, w, notes)
                }
                ImportSource::Whole(FileInput::Snapshot(snap)) => {
                    session::replay_watch(cfg, *snap, w, notes)
                }
            }
        }
    }
}
