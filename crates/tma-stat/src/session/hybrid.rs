//! Hybrid parts: every core type counted in one run. Each core type (a PMU with a `cpus`
//! file: `cpu_core`, `cpu_atom`, and any further type, see
//! [`Pmus::core_types`](tma_host::sysfs::Pmus::core_types)) is read with
//! its own table (`adl` and `adl-e`, `mtl` and `mtl-e`), planned with its own counters and
//! constraints, and its plan joined to the others' ([`Plan::for_core_types`]), so a command,
//! a pid or the whole system is counted once on every type. Out come a tree per core type
//! (marked with its type), each type's (and with `--per-thread` each thread's) share of the
//! cycles, and a merged view: the types' trees weighted by their cycles, a node that exists
//! on some types only marked as such. `--cputype TYPE` counts one type only.

use std::io::Write;

use tma_catalog::Model;
use tma_metrics::Bottleneck;
use tma_perf::backend::{self, Ending, Measurement, RawInterval, Target};
use tma_perf::event::EventSpec;
use tma_perf::plan::Plan;
use tma_perf::Interval;

use super::breakdown::breakdown_parts;
use super::measure::{ending_note, intervals_of, measure, source_text};
use super::state::{Session, Source};
use super::steps::step_end;
use super::type_shares::{
    cycles_note, only_type, thread_shares, took_turns, took_turns_in, took_turns_note,
    type_interval,
};
use crate::error::usage;
use crate::eval::{IntervalReport, Request, RunInfo, StatRun, TreeEval};
use crate::groups::{counting_plan, hw_groups};
use crate::hybrid::{cycles_event, merge_interval, CoreTable, Interleaver, TypeInterval};
use crate::render::counts;
use crate::sink::{Finish, IntervalData, Start, WholeStep};
use crate::{Outcome, RunStart, StatError};

/// One core type's plan: its tree's events on its own PMU, its cycles, and (for the first
/// type) the `-e` events.
fn type_plan(
    t: &CoreTable,
    request: &Request,
    extra: &[EventSpec],
    nmi: bool,
) -> Result<Plan, StatError> {
    let mut extra = extra.to_vec();
    extra.extend(cycles_event(t.model));
    let mut plan = counting_plan(t.model, &request.selection(), &extra, nmi)?;
    if t.borrowed {
        for g in plan.groups.iter_mut().filter(|g| g.pmu == t.model.pmu) {
            g.pmu = t.pmu.clone();
            for e in g.events.iter_mut() {
                e.pmu = t.pmu.clone();
            }
        }
    }
    Ok(plan)
}

/// The core types of a recorded plan of every core type: its hardware groups' PMUs that are
/// core types (`cpu_…`), when there are several.
pub(super) fn recorded_core_types(plan: &Plan) -> Vec<String> {
    let v: Vec<String> = plan
        .counter_pmus()
        .into_iter()
        .filter(|p| p.starts_with("cpu_"))
        .map(str::to_string)
        .collect();
    if v.len() > 1 {
        v
    } else {
        Vec::new()
    }
}

/// The request of one core type's tree.
fn type_request(s: &Session, model: &'static Model) -> Result<Request, StatError> {
    let choice = crate::eval::MetricChoice::resolve(s.cfg, model)?;
    Ok(Request {
        level: s.settings.level.max(choice.level),
        nodes: s.settings.nodes.clone(),
        topology: Some(s.topology),
        metrics: choice.metrics,
        bottlenecks: choice.bottlenecks,
    })
}

/// Count every core type in one run and hand on a tree per type, then the merged view.
pub(super) fn hybrid(
    s: &mut Session,
    tables: &[CoreTable],
    extra: &[EventSpec],
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    if s.settings.drilldown {
        return Err(usage(
            "--drilldown descends one tree: add --cputype TYPE on a hybrid part (core, atom, ...)",
        ));
    }
    s.hardware = true;
    s.note = Some(format!("cpu: {}", s.cpu_source));
    let nmi = s.cfg.host.nmi_watchdog_on();
    let mut requests = Vec::new();
    for t in tables {
        requests.push(type_request(s, t.model)?);
    }
    let plan = match &s.source {
        Source::Replay { plans, .. } => plans
            .first()
            .cloned()
            .ok_or_else(|| usage("the snapshot holds no plan"))?,
        Source::Live(_) => {
            let mut parts = Vec::new();
            for (i, (t, r)) in tables.iter().zip(&requests).enumerate() {
                parts.push(type_plan(t, r, if i == 0 { extra } else { &[] }, nmi)?);
            }
            Plan::for_core_types(&parts)
        }
    };
    if !s.replaying() {
        let list = tables
            .iter()
            .map(|t| {
                if t.borrowed {
                    format!(
                        "{} (no table of its own: read as E-cores, with the {} table)",
                        t.pmu, t.model.key
                    )
                } else {
                    format!("{} ({} table)", t.pmu, t.model.key)
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        if tables.len() == 1 {
            // `--cputype` of a type without a table of its own.
            writeln!(notes, "tma: note: one core type of a hybrid part: {list}")?;
        } else {
            writeln!(
                notes,
                "tma: note: a hybrid part with {} core types, each counted with its own table \
                 in one run: {list}",
                tables.len()
            )?;
        }
    }
    if s.cfg.render.verbose > 0 {
        write!(notes, "{plan}")?;
    }
    for (e, why) in &plan.unschedulable {
        writeln!(notes, "tma: warning: {e} cannot be counted here: {why}")?;
    }
    // With -I every interval's trees go on as soon as it is read, unless the intervals are
    // to be averaged (--repeat) or combined (one run per group, --no-multiplex).
    let one_run = !(s.settings.no_multiplex && hw_groups(&plan).len() > 1);
    if s.interval_mode() && s.repeat() == 1 && one_run {
        return streamed(s, tables, requests, &plan, notes);
    }
    let runs = s.lend_sink(|s, sink| {
        let mut progress = |r: RunStart| sink.borrow_mut().run_start(r);
        measure(s, &plan, 0, notes, &mut progress, &mut |_| {})
    })?;
    let core_pmus: Vec<&str> = tables.iter().map(|t| t.pmu.as_str()).collect();
    // A task's time on a core type is the longest any of that type's groups ran: exact when
    // they all ran together, short of it when they took turns (multiplexed within the type).
    for t in tables {
        if took_turns(&plan, &t.pmu, &runs) {
            took_turns_note(notes, t)?;
        }
    }
    let runs: Vec<Measurement> = runs
        .iter()
        .map(|m| {
            let mut m = m.clone();
            for iv in m.intervals.iter_mut() {
                *iv = backend::on_core_type_time(&plan, iv, &core_pmus);
            }
            m
        })
        .collect();
    let target = s.target.clone();
    let mut trees: Vec<(CoreTable, StatRun)> = Vec::new();
    let mut weights: Vec<Vec<f64>> = Vec::new();
    let mut totals: Vec<f64> = Vec::new();
    for (t, request) in tables.iter().zip(requests) {
        let view = plan.core_view(&t.pmu, &core_pmus);
        let mine = only_type(&view, &t.pmu, &runs);
        let intervals = intervals_of(
            &view,
            &mine,
            s.settings.no_multiplex,
            s.repeat(),
            s.interval_mode(),
        );
        let cycles = cycles_event(t.model).map(|e| e.name);
        let of = |iv: &Interval| cycles_in(cycles.as_deref(), iv);
        weights.push(intervals.iter().map(of).collect());
        let whole = intervals_of(&view, &mine, s.settings.no_multiplex, s.repeat(), false);
        totals.push(whole.last().map_or(0.0, of));
        let info = type_info(s, t, &view, request);
        let run = StatRun::evaluate(info.clone(), &intervals)?;
        {
            let sink = s.sink.as_deref_mut().expect("a session has a sink");
            sink.start(Start::Tree {
                info: &info,
                plan: Some(&view),
                target: Some(&target),
            })?;
            for (iv, ir) in intervals.iter().zip(&run.intervals) {
                sink.interval(IntervalData {
                    raw: None,
                    readings: iv,
                    report: Some(ir),
                })?;
            }
        }
        step_end(s, &view, &info, &mine, notes)?;
        trees.push((t.clone(), run));
    }
    cycles_note(notes, tables, &totals)?;
    if s.settings.per_thread && tables.len() > 1 {
        thread_shares(s, tables, &plan, &core_pmus, &runs, notes)?;
    }
    let mut bottleneck = trees.first().and_then(|(_, r)| r.bottleneck().cloned());
    if trees.len() > 1 {
        bottleneck = merged(s, &trees, &weights, &totals, &target)?;
    }
    let ending = runs.last().map_or(Ending::Exited(0), |m| m.ending);
    if !s.replaying() {
        ending_note(notes, ending, &s.target)?;
    }
    Ok(Outcome {
        ending: (!s.replaying()).then_some(ending),
        bottleneck,
    })
}

/// What one core type's tree is: read with its table, marked with its type.
fn type_info(s: &Session, t: &CoreTable, view: &Plan, request: Request) -> RunInfo {
    RunInfo {
        model: t.model,
        cpu_source: s.cpu_source.clone(),
        source: format!(
            "{}; {} tree: the {} events",
            source_text(&s.target, view, &s.settings),
            t.label,
            t.pmu
        ),
        interval_mode: s.interval_mode(),
        request,
        command: s.command(),
        event_map: Vec::new(),
        scope: None,
        core_type: Some(t.label),
    }
}

/// A core type's cycles in one interval's readings (0 where not counted).
fn cycles_in(cycles: Option<&str>, iv: &Interval) -> f64 {
    cycles
        .and_then(|c| iv.get(c))
        .and_then(|r| r.value)
        .unwrap_or(0.0)
}

/// `-I` on a hybrid part: each interval, as soon as it is read, gives every core type's
/// tree and the merged view ([`start_trees`](crate::IntervalSink::start_trees), `tree_interval`,
/// `finish_trees`; plain steps where there is one type only). What needs the whole run
/// (the cycles by core type, the per-thread shares and trees) comes at its end.
fn streamed(
    s: &mut Session,
    tables: &[CoreTable],
    requests: Vec<Request>,
    plan: &Plan,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let core_pmus: Vec<&str> = tables.iter().map(|t| t.pmu.as_str()).collect();
    let views: Vec<Plan> = tables
        .iter()
        .map(|t| plan.core_view(&t.pmu, &core_pmus))
        .collect();
    let infos: Vec<RunInfo> = tables
        .iter()
        .zip(requests)
        .zip(&views)
        .map(|((t, request), view)| type_info(s, t, view, request))
        .collect();
    let target = s.target.clone();
    let merged_info = (tables.len() > 1).then(|| RunInfo {
        source: format!(
            "counted live on {}; merged view: the core types' trees weighted by their cycles \
             in each interval",
            counts::describe_target(&target)
        ),
        core_type: Some("merged"),
        ..infos[0].clone()
    });
    let evals = infos
        .iter()
        .map(TreeEval::new)
        .collect::<Result<Vec<_>, _>>()?;
    let cycles: Vec<Option<String>> = tables
        .iter()
        .map(|t| cycles_event(t.model).map(|e| e.name))
        .collect();
    // The per-thread trees and shares need every interval; else the backend keeps their
    // sum only (and this loop the sum on each type's time, for the whole-run notes).
    let keep = s.breakdown() || s.cfg.live().is_some_and(|l| l.record.is_some());
    s.opts.stream_only = !keep;
    let starts: Vec<Start> = infos
        .iter()
        .zip(&views)
        .map(|(info, view)| Start::Tree {
            info,
            plan: Some(view),
            target: Some(&target),
        })
        .collect();
    let merged_start = merged_info.as_ref().map(|info| Start::Tree {
        info,
        plan: None,
        target: Some(&target),
    });
    let mut trees = Interleaver::new(tables, starts, merged_start, true);
    let mut first = true;
    let mut failed: Option<StatError> = None;
    let mut turns = vec![false; tables.len()];
    let mut sum: Option<RawInterval> = None;
    let runs = s.lend_sink(|s, sink| {
        let mut on_interval = |raw: &RawInterval| {
            if failed.is_some() {
                return;
            }
            for (t, turned) in tables.iter().zip(turns.iter_mut()) {
                *turned |= took_turns_in(plan, &t.pmu, raw);
            }
            let on_type = backend::on_core_type_time(plan, raw, &core_pmus);
            match sum.as_mut() {
                Some(x) => x.add(&on_type),
                None => sum = Some(on_type.clone()),
            }
            let r = (|| -> Result<(), StatError> {
                let mut parts = Vec::with_capacity(tables.len());
                for (i, t) in tables.iter().enumerate() {
                    let mine = type_interval(&views[i], &t.pmu, &on_type);
                    let readings = Measurement::interval_readings(&views[i], &mine, false);
                    if first {
                        evals[i].check_present(std::iter::once(&readings))?;
                    }
                    let report = evals[i].eval(&readings);
                    parts.push(Some(TypeInterval {
                        cycles: Some(cycles_in(cycles[i].as_deref(), &readings)),
                        raw: Some(mine),
                        readings,
                        report,
                    }));
                }
                first = false;
                trees.interval(&mut **sink.borrow_mut(), parts)
            })();
            if let Err(e) = r {
                failed = Some(e);
            }
        };
        let mut progress = |r: RunStart| sink.borrow_mut().run_start(r);
        measure(s, plan, 0, notes, &mut progress, &mut on_interval)
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    // The runs on each type's time: every interval where they were kept, else their sum.
    let runs: Vec<Measurement> = runs
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if keep {
                for iv in m.intervals.iter_mut() {
                    *iv = backend::on_core_type_time(plan, iv, &core_pmus);
                }
            } else {
                m.intervals = sum.iter().cloned().collect();
            }
            m
        })
        .collect();
    for (t, turned) in tables.iter().zip(&turns) {
        if *turned {
            took_turns_note(notes, t)?;
        }
    }
    let mut totals = Vec::new();
    for (t, view) in tables.iter().zip(&views) {
        let mine = only_type(view, &t.pmu, &runs);
        let whole = intervals_of(view, &mine, s.settings.no_multiplex, 1, false);
        let c = cycles_event(t.model).map(|e| e.name);
        totals.push(whole.last().map_or(0.0, |iv| cycles_in(c.as_deref(), iv)));
    }
    cycles_note(notes, tables, &totals)?;
    if s.settings.per_thread && tables.len() > 1 {
        thread_shares(s, tables, plan, &core_pmus, &runs, notes)?;
    }
    // Each type's end: its per-core or per-thread trees.
    let mut parts: Vec<Vec<StatRun>> = Vec::new();
    for ((t, view), info) in tables.iter().zip(&views).zip(&infos) {
        parts.push(if s.breakdown() {
            breakdown_parts(s, info, view, &only_type(view, &t.pmu, &runs))?
        } else {
            Vec::new()
        });
    }
    let events = s.settings.events.clone();
    let ends: Vec<Finish> = infos
        .iter()
        .zip(&parts)
        .map(|(info, parts)| Finish::Tree {
            info,
            whole: Some(WholeStep {
                events: &events,
                total: None,
                parts,
                repeats: None,
            }),
        })
        .collect();
    let sink = s.sink.as_deref_mut().expect("a session has a sink");
    let last = trees.finish(sink, ends)?;
    let ending = runs.last().map_or(Ending::Exited(0), |m| m.ending);
    if !s.replaying() {
        ending_note(notes, ending, &s.target)?;
    }
    Ok(Outcome {
        ending: (!s.replaying()).then_some(ending),
        bottleneck: last,
    })
}

/// The merged view: every type's tree weighted by its cycles, interval by interval, handed
/// on as one more tree (`merged`); its bottleneck is the run's.
fn merged(
    s: &mut Session,
    trees: &[(CoreTable, StatRun)],
    weights: &[Vec<f64>],
    totals: &[f64],
    target: &Target,
) -> Result<Option<Bottleneck>, StatError> {
    let all: f64 = totals.iter().sum();
    let shares = trees
        .iter()
        .zip(totals)
        .map(|((t, _), c)| {
            if all > 0.0 {
                format!("{} {:.1}%", t.label, 100.0 * c / all)
            } else {
                format!("{} -", t.label)
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let first = &trees[0].1.info;
    let info = RunInfo {
        source: format!(
            "counted live on {}; merged view: the core types' trees weighted by their cycles \
             ({shares})",
            counts::describe_target(target)
        ),
        core_type: Some("merged"),
        ..first.clone()
    };
    let n = trees[0].1.intervals.len();
    let mut reports = Vec::with_capacity(n);
    for k in 0..n {
        let parts: Vec<(&CoreTable, &IntervalReport, f64)> = trees
            .iter()
            .zip(weights)
            .filter_map(|((t, run), w)| Some((t, run.intervals.get(k)?, *w.get(k)?)))
            .collect();
        reports.push(merge_interval(&parts));
    }
    let empty = Interval {
        start_s: 0.0,
        end_s: 0.0,
        readings: Vec::new(),
        printed: Vec::new(),
    };
    let sink = s.sink.as_deref_mut().expect("a session has a sink");
    sink.start(Start::Tree {
        info: &info,
        plan: None,
        target: Some(target),
    })?;
    for ir in &reports {
        let iv = Interval {
            start_s: ir.start_s,
            end_s: ir.end_s,
            ..empty.clone()
        };
        sink.interval(IntervalData {
            raw: None,
            readings: &iv,
            report: Some(ir),
        })?;
    }
    sink.finish(Finish::Tree {
        info: &info,
        whole: None,
    })?;
    Ok(reports.last().map(|r| r.report.bottleneck.clone()))
}
