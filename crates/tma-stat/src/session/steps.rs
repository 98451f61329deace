//! The TMA tree of each step: count, hand the tree to the sink, descend with `--drilldown`.

use std::cell::RefCell;
use std::io::Write;

use tma_catalog::Model;
use tma_metrics::{Bottleneck, StopReason};
use tma_perf::backend::{self, Ending, Measurement, RawInterval};
use tma_perf::event::EventSpec;
use tma_perf::plan::Plan;

use super::breakdown::breakdown_parts;
use super::measure::{ending_note, intervals_of, measure, repeat_totals, source_text};
use super::state::{Session, Source};
use crate::error::usage;
use crate::eval::{Request, RunInfo, StatRun, TreeEval};
use crate::groups::counting_plan;
use crate::sink::{Finish, IntervalData, IntervalSink, Start, WholeStep};
use crate::{Outcome, RunStart, StatError};

/// The TMA tree of each step: count, write, descend with `--drilldown`.
pub(super) fn hardware(
    s: &mut Session,
    model: &'static Model,
    extra: &[EventSpec],
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    s.hardware = true;
    s.note = Some(format!("cpu: {}", s.cpu_source));
    let nmi = s.cfg.host.nmi_watchdog_on();
    let drilldown = s.settings.drilldown;
    let choice = crate::eval::MetricChoice::resolve(s.cfg, model)?;
    let mut request = Request {
        level: if drilldown {
            1
        } else {
            s.settings.level.max(choice.level)
        },
        nodes: if drilldown {
            Vec::new()
        } else {
            s.settings.nodes.clone()
        },
        topology: Some(s.topology),
        metrics: choice.metrics,
        bottlenecks: choice.bottlenecks,
    };
    if drilldown && !s.replaying() {
        s.settings.nodes = Vec::new();
    }
    let mut step = 0u32;
    let mut path: Vec<String> = Vec::new();
    let mut last_ending = Ending::Exited(0);
    let mut bottleneck: Option<Bottleneck>;
    loop {
        let plan = step_plan(s, model, &request, step, extra, nmi)?;
        if s.cfg.render.verbose > 0 {
            write!(notes, "{plan}")?;
        }
        for (e, why) in &plan.unschedulable {
            writeln!(notes, "tma: warning: {e} cannot be counted here: {why}")?;
        }
        if drilldown && !s.replaying() {
            s.settings.nodes.push(format!(
                "{step}:{}:{}",
                request.level,
                request.nodes.first().map_or("", String::as_str)
            ));
        }
        let info = RunInfo {
            model,
            cpu_source: s.cpu_source.clone(),
            source: match s.core_type {
                // `--cputype`: one core type of a hybrid part.
                Some(t) => format!("{}; {t} tree", source_text(&s.target, &plan, &s.settings)),
                None => source_text(&s.target, &plan, &s.settings),
            },
            interval_mode: s.interval_mode(),
            request: request.clone(),
            command: s.command(),
            event_map: Vec::new(),
            scope: None,
            core_type: s.core_type,
        };
        let (runs, b) = count_step(s, &plan, &info, step, notes)?;
        bottleneck = b;
        last_ending = runs.last().map_or(last_ending, |m| m.ending);
        step_end(s, &plan, &info, &runs, notes)?;
        if !drilldown || last_ending == Ending::Interrupted {
            break;
        }
        let b = bottleneck
            .as_ref()
            .ok_or_else(|| usage("--drilldown: the run gave no data"))?;
        match descend(model, &request, b, &mut path) {
            Some(next) => {
                request = next;
                step += 1;
            }
            None => {
                drilldown_note(notes, step, &path, &b.stop)?;
                break;
            }
        }
    }
    if !s.replaying() {
        ending_note(notes, last_ending, &s.target)?;
    }
    Ok(Outcome {
        ending: (!s.replaying()).then_some(last_ending),
        bottleneck,
    })
}

/// The groups of one step: planned for a live run, as recorded for a replay.
pub(super) fn step_plan(
    s: &Session,
    model: &'static Model,
    request: &Request,
    step: u32,
    extra: &[EventSpec],
    nmi: bool,
) -> Result<Plan, StatError> {
    match &s.source {
        Source::Replay { plans, .. } => plans.get(step as usize).cloned().ok_or_else(|| {
            usage("the snapshot holds fewer drill-down steps than its data leads to")
        }),
        Source::Live(_) => Ok(counting_plan(model, &request.selection(), extra, nmi)?),
    }
}

/// Count one step and hand its tree to the sink; the runs and the bottleneck of the last
/// tree. In interval mode each interval is evaluated and handed on as soon as it is read.
pub(super) fn count_step(
    s: &mut Session,
    plan: &Plan,
    info: &RunInfo,
    step: u32,
    notes: &mut dyn Write,
) -> Result<(Vec<Measurement>, Option<Bottleneck>), StatError> {
    s.lend_sink(|s, sink| count_step_into(s, sink, plan, info, step, notes))
}

pub(super) fn count_step_into(
    s: &mut Session,
    sink: &RefCell<&mut dyn IntervalSink>,
    plan: &Plan,
    info: &RunInfo,
    step: u32,
    notes: &mut dyn Write,
) -> Result<(Vec<Measurement>, Option<Bottleneck>), StatError> {
    let stream = s.interval_mode() && s.repeat() == 1 && !s.breakdown();
    // Streamed intervals are not kept unless a snapshot is to hold them.
    s.opts.stream_only = stream && s.cfg.live().is_none_or(|l| l.record.is_none());
    let eval = TreeEval::new(info)?;
    let target = s.target.clone();
    let start = || Start::Tree {
        info,
        plan: Some(plan),
        target: Some(&target),
    };
    let mut last = None;
    let mut failed: Option<StatError> = None;
    let mut started = false;
    let runs = {
        let mut on_interval = |raw: &RawInterval| {
            if !stream || failed.is_some() {
                return;
            }
            let iv = Measurement::interval_readings(plan, raw, false);
            let r = (|| -> Result<_, StatError> {
                let mut sink = sink.borrow_mut();
                if !started {
                    eval.check_present(std::iter::once(&iv))?;
                    sink.start(start())?;
                    started = true;
                }
                let ir = eval.eval(&iv);
                sink.interval(IntervalData {
                    raw: Some(raw),
                    readings: &iv,
                    report: Some(&ir),
                })?;
                Ok(ir)
            })();
            match r {
                Ok(ir) => last = Some(ir.report.bottleneck),
                Err(e) => failed = Some(e),
            }
        };
        let mut progress = |r: RunStart| sink.borrow_mut().run_start(r);
        measure(s, plan, step, notes, &mut progress, &mut on_interval)
    };
    let runs = runs?;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut sink = sink.borrow_mut();
    if stream {
        if !started {
            sink.start(start())?;
        }
        return Ok((runs, last));
    }
    // A whole step: its tree (one per interval with breakdowns or --repeat, the mean of the
    // runs with --repeat).
    let intervals = intervals_of(
        plan,
        &runs,
        s.settings.no_multiplex,
        s.repeat(),
        s.interval_mode(),
    );
    let run = StatRun::evaluate(info.clone(), &intervals)?;
    let bottleneck = run.bottleneck().cloned();
    sink.start(start())?;
    for (iv, ir) in intervals.iter().zip(&run.intervals) {
        sink.interval(IntervalData {
            raw: None,
            readings: iv,
            report: Some(ir),
        })?;
    }
    Ok((runs, bottleneck))
}

/// The end of a step: `-e` totals, the per-core/thread trees and the `--repeat` samples
/// to the sink; `--repeat` spreads to the notes.
pub(super) fn step_end(
    s: &mut Session,
    plan: &Plan,
    info: &RunInfo,
    runs: &[Measurement],
    notes: &mut dyn Write,
) -> Result<(), StatError> {
    let total = (!s.interval_mode())
        .then(|| intervals_of(plan, runs, s.settings.no_multiplex, s.repeat(), false))
        .and_then(|mut v| v.pop());
    let parts = if s.breakdown() {
        breakdown_parts(s, info, plan, runs)?
    } else {
        Vec::new()
    };
    let repeats = if s.repeat() > 1 {
        let totals = repeat_totals(plan, runs, s.settings.no_multiplex, s.repeat());
        Some(StatRun::evaluate(info.clone(), &totals)?)
    } else {
        None
    };
    let events = s.settings.events.clone();
    s.sink
        .as_deref_mut()
        .expect("a session has a sink between steps")
        .finish(Finish::Tree {
            info,
            whole: Some(WholeStep {
                events: &events,
                total: total.as_ref(),
                parts: &parts,
                repeats: repeats.as_ref(),
            }),
        })?;
    if s.repeat() > 1 {
        for (ev, mean, pct) in backend::repeat_stats(plan, runs) {
            if s.cfg.render.verbose > 0 || !plan.events().any(|e| e.name == ev && !e.is_hardware())
            {
                writeln!(
                    notes,
                    "tma: {ev}: mean {mean:.0} +- {pct:.2}% over {} runs",
                    s.repeat()
                )?;
            }
        }
    }
    Ok(())
}

/// Drill-down: the next request, one level into the bottleneck, or `None` where the descent
/// ends. `path` collects the nodes descended through.
pub(super) fn descend(
    model: &'static Model,
    request: &Request,
    b: &Bottleneck,
    path: &mut Vec<String>,
) -> Option<Request> {
    let reached = b.path.len() as u8 == request.level;
    match (&b.node, reached) {
        (Some(node), true) if model.children(Some(node)).next().is_some() && request.level < 6 => {
            path.push(node.clone());
            Some(Request {
                level: request.level + 1,
                nodes: vec![node.clone()],
                topology: request.topology,
                metrics: request.metrics.clone(),
                bottlenecks: request.bottlenecks.clone(),
            })
        }
        _ => {
            if let Some(n) = &b.node {
                if !path.contains(n) {
                    path.push(n.clone());
                }
            }
            None
        }
    }
}

pub(super) fn drilldown_note(
    notes: &mut dyn Write,
    step: u32,
    path: &[String],
    stop: &StopReason,
) -> std::io::Result<()> {
    writeln!(
        notes,
        "tma: drill-down: {} run{}: {} (stopped: {})",
        step + 1,
        if step == 0 { "" } else { "s" },
        if path.is_empty() {
            "-".to_string()
        } else {
            path.join(" -> ")
        },
        stop_words(stop)
    )
}

pub(super) fn stop_words(stop: &StopReason) -> String {
    match stop {
        StopReason::Leaf => "a leaf of the tree".to_string(),
        StopReason::NoChildOverThreshold => "no child over threshold".to_string(),
        StopReason::Ambiguous { first, second, gap } => {
            format!("{first} and {second} within {gap:.1} points")
        }
        StopReason::NothingOverThreshold => "nothing over threshold at level 1".to_string(),
        StopReason::NotMeasured => "not measured".to_string(),
        StopReason::Undecided { not_computed } => {
            format!("undecided: {} not computed", not_computed.join(", "))
        }
    }
}
