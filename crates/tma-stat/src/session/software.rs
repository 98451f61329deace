//! No hardware counters: software counts only.

use std::io::Write;

use tma_perf::backend::{self, Ending, Measurement, RawInterval};
use tma_perf::event::EventSpec;
use tma_perf::plan::Plan;

use super::breakdown::breakdown_runs;
use super::measure::{ending_note, measure};
use super::state::Session;
use crate::sink::{Finish, IntervalData, Start};
use crate::{Outcome, RunStart, StatError};

/// The plan that stands in for a tree where no hardware counter opens (`tma stat`, the
/// regions of `tma stat --regions`): perf's software events, and of the `-e` events those
/// that need no PMU; each of the others is named in a warning.
pub fn software_plan(extra: &[EventSpec], notes: &mut dyn Write) -> std::io::Result<Plan> {
    let mut events = backend::software_events();
    for e in extra {
        if e.is_hardware() {
            writeln!(
                notes,
                "tma: warning: -e {} needs a hardware PMU; not counted",
                e.name
            )?;
        } else if !events.iter().any(|x| x.name == e.name) {
            events.push(e.clone());
        }
    }
    Ok(Plan::software(&events))
}

/// No hardware counters: count (or replay) software events and hand their counts on.
pub(super) fn software(
    s: &mut Session,
    plan: Plan,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    s.hardware = false;
    if s.cfg.render.verbose > 0 {
        write!(notes, "{plan}")?;
    }
    if let Some(p) = &s.cfg.render.plot {
        writeln!(
            notes,
            "tma: --plot {}: not written: there is no TMA tree to draw without hardware counters \
             (software counts only)",
            p.display()
        )?;
    }
    let stream = s.interval_mode() && !s.breakdown() && s.repeat() == 1;
    s.opts.stream_only = stream && s.cfg.live().is_none_or(|l| l.record.is_none());
    let target = s.target.clone();
    let reason = s.note.clone().map(|n| {
        n.strip_prefix("hardware counters not available: ")
            .map_or(n.clone(), str::to_string)
    });
    s.lend_sink(|s, sink| {
        sink.borrow_mut().start(Start::Software {
            plan: &plan,
            target: Some(&target),
            reason: reason.as_deref(),
            streamed: stream,
        })?;
        let mut failed: Option<StatError> = None;
        let runs = {
            let mut on_interval = |raw: &RawInterval| {
                if !stream || failed.is_some() {
                    return;
                }
                let iv = Measurement::interval_readings(&plan, raw, false);
                let r = sink.borrow_mut().interval(IntervalData {
                    raw: Some(raw),
                    readings: &iv,
                    report: None,
                });
                if let Err(e) = r {
                    failed = Some(e);
                }
            };
            let mut progress = |r: RunStart| sink.borrow_mut().run_start(r);
            measure(s, &plan, 0, notes, &mut progress, &mut on_interval)?
        };
        if let Some(e) = failed {
            return Err(e);
        }
        let mut sink = sink.borrow_mut();
        if !stream {
            // The whole-run counts of each run.
            for m in &runs {
                let total = m.total();
                let iv = Measurement::interval_readings(&plan, &total, false);
                sink.interval(IntervalData {
                    raw: Some(&total),
                    readings: &iv,
                    report: None,
                })?;
            }
        }
        let last = runs.last().map_or(Ending::Exited(0), |m| m.ending);
        if !s.replaying() {
            ending_note(notes, last, &s.target)?;
        }
        let parts = if s.breakdown() && !stream {
            breakdown_runs(s, &runs)
        } else {
            Vec::new()
        };
        sink.finish(Finish::Software {
            plan: &plan,
            target: &s.target,
            runs: &runs,
            interval_mode: s.interval_mode(),
            parts: &parts,
        })?;
        Ok(Outcome {
            ending: (!s.replaying()).then_some(last),
            bottleneck: None,
        })
    })
}
