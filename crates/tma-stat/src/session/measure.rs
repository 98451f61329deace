//! Counting one plan (once, per group, N times) and what a run leaves: the intervals and
//! totals of its runs, the `--record` snapshot, the notes on how it ended.

use std::io::Write;

use tma_perf::backend::{self, Backend, Ending, Measurement, RawInterval, Target};
use tma_perf::plan::Plan;
use tma_perf::snapshot::{self, CpuIdentity, RecordedRun, Settings, Snapshot};
use tma_perf::{Interval, ReadingStatus};

use super::state::{Session, Source};
use crate::groups::hw_groups;
use crate::render::counts;
use crate::{LiveOptions, RunStart, StatError};

/// Readings to evaluate: per interval (interval mode) or the whole run; `--no-multiplex`
/// runs combined; `--repeat` runs averaged.
pub(super) fn intervals_of(
    plan: &Plan,
    runs: &[Measurement],
    no_multiplex: bool,
    repeat: u32,
    interval_mode: bool,
) -> Vec<Interval> {
    if interval_mode && runs.len() == 1 {
        return runs[0]
            .intervals
            .iter()
            .map(|iv| Measurement::interval_readings(plan, iv, false))
            .collect();
    }
    let totals = repeat_totals(plan, runs, no_multiplex, repeat);
    if totals.len() == 1 {
        return totals;
    }
    vec![mean_interval(&totals)]
}

/// The readings of each `--repeat` run over its whole time (`--no-multiplex` runs of one
/// repetition combined).
pub(super) fn repeat_totals(
    plan: &Plan,
    runs: &[Measurement],
    no_multiplex: bool,
    repeat: u32,
) -> Vec<Interval> {
    let per_repeat = if repeat == 0 {
        runs.len()
    } else {
        runs.len() / repeat as usize
    };
    runs.chunks(per_repeat.max(1))
        .map(|chunk| {
            let m = if no_multiplex || chunk.len() > 1 {
                backend::combine_runs(chunk)
            } else {
                chunk[0].clone()
            };
            Measurement::interval_readings(plan, &m.total(), false)
        })
        .collect()
}

/// Mean of each aggregated reading over repeated runs.
pub(super) fn mean_interval(ivs: &[Interval]) -> Interval {
    let mut out = ivs[0].clone();
    let n = ivs.len() as f64;
    for r in out.readings.iter_mut() {
        let vals: Vec<&tma_perf::Reading> = ivs.iter().filter_map(|iv| iv.get(&r.event)).collect();
        let counted: Vec<f64> = vals.iter().filter_map(|x| x.value).collect();
        if counted.len() == vals.len() && !counted.is_empty() {
            r.value = Some(counted.iter().sum::<f64>() / counted.len() as f64);
            r.status = ReadingStatus::Counted;
        }
        let shares: Vec<f64> = vals.iter().filter_map(|x| x.counted_share).collect();
        if !shares.is_empty() {
            r.counted_share = Some(shares.iter().cloned().fold(f64::INFINITY, f64::min));
        }
        r.raw = None;
    }
    out.end_s = ivs.iter().map(|iv| iv.end_s - iv.start_s).sum::<f64>() / n;
    out.start_s = 0.0;
    out
}

/// The "where the data came from" header text; the same for a live run and its replay.
pub(super) fn source_text(target: &Target, plan: &Plan, settings: &Settings) -> String {
    let hw = hw_groups(plan).len();
    let how = if settings.no_multiplex {
        format!("{hw} runs, one per counter group")
    } else if hw > 1 {
        format!("{hw} counter groups multiplexed")
    } else {
        "1 counter group".to_string()
    };
    let rep = if settings.repeat > 1 {
        format!(", mean of {} runs", settings.repeat)
    } else {
        String::new()
    };
    format!(
        "counted live on {} ({how}{rep})",
        counts::describe_target(target)
    )
}

/// Save the session as a snapshot (`--record FILE`), atomically.
pub(super) fn write_record(s: &Session, live: &LiveOptions) -> Result<(), StatError> {
    let Some(path) = &live.record else {
        return Ok(());
    };
    let cpuinfo = s.cfg.host.cpuinfo_bytes().unwrap_or_default();
    let mut cpu = CpuIdentity::from_cpuinfo(&cpuinfo);
    if s.model_key.is_some() {
        cpu.catalog_key = s.model_key.clone();
    }
    let start = s.runs.first().map_or(0.0, |r| r.measurement.start_unix_s);
    let dur: u64 = s.runs.iter().map(|r| r.measurement.wall_ns).sum();
    let snap = Snapshot {
        schema: snapshot::SCHEMA.into(),
        schema_version: snapshot::SCHEMA_VERSION,
        tool: format!("tma {}", env!("CARGO_PKG_VERSION")),
        cpu,
        topology: s.topology,
        command_line: s.cfg.command_line.clone(),
        target: s.target.clone(),
        settings: s.settings.clone(),
        hardware: s.hardware,
        note: s.note.clone(),
        start_unix_s: start,
        duration_s: dur as f64 / 1e9,
        plans: s.plans.clone(),
        runs: s.runs.clone(),
        cpu_cores: s.cpu_cores.clone(),
    };
    tma_render::write_output(path, |w| {
        snap.write(w)?;
        Ok(())
    })?;
    Ok(())
}

pub(super) fn ending_note(
    notes: &mut dyn Write,
    e: Ending,
    target: &Target,
) -> std::io::Result<()> {
    match e {
        Ending::Interrupted => {
            writeln!(notes, "tma: interrupted: printing what was counted so far")
        }
        Ending::TargetsExited if matches!(target, Target::Pids(_)) => writeln!(
            notes,
            "tma: the attached process exited; counts cover it until then"
        ),
        _ => Ok(()),
    }
}

/// Run one plan (once, per group with --no-multiplex, N times with --repeat). Each interval
/// of a run goes to `on_interval` as it is read.
pub(super) fn measure(
    s: &mut Session,
    plan: &Plan,
    step: u32,
    notes: &mut dyn Write,
    progress: &mut dyn FnMut(RunStart),
    on_interval: &mut dyn FnMut(&RawInterval),
) -> Result<Vec<Measurement>, StatError> {
    let plan_idx = s.plans.len();
    s.plans.push(plan.clone());
    let repeat = s.repeat();
    let hw = hw_groups(plan);
    let sw: Vec<usize> = (0..plan.groups.len()).filter(|i| !hw.contains(i)).collect();
    let subsets: Vec<Vec<usize>> = if s.settings.no_multiplex && hw.len() > 1 {
        hw.iter()
            .enumerate()
            .map(|(k, &g)| {
                let mut v = vec![g];
                if k == 0 {
                    v.extend(&sw);
                }
                v
            })
            .collect()
    } else {
        vec![(0..plan.groups.len()).collect()]
    };
    if s.settings.no_multiplex && hw.len() > 1 && step == 0 && !s.replaying() {
        writeln!(
            notes,
            "tma: --no-multiplex: {} counter groups, so the target runs {} times{}",
            hw.len(),
            subsets.len() * repeat as usize,
            if repeat > 1 {
                format!(" ({} per repetition)", subsets.len())
            } else {
                String::new()
            }
        )?;
    }
    let mut out = Vec::new();
    let runs = repeat as usize * subsets.len();
    for r in 0..repeat {
        for (k, sub) in subsets.iter().enumerate() {
            if !s.replaying() {
                progress(RunStart {
                    step,
                    run: r as usize * subsets.len() + k + 1,
                    runs,
                });
            }
            let p = if sub.len() == plan.groups.len() {
                plan.clone()
            } else {
                backend::sub_plan(plan, sub)
            };
            let m = match &mut s.source {
                Source::Live(be) => be.run_with(&p, &s.target, &s.opts, on_interval)?,
                Source::Replay { backend, .. } => {
                    backend.run_with(&p, &s.target, &s.opts, on_interval)?
                }
            };
            let m = backend::only_groups(&m, sub);
            if r == 0 {
                for (g, why) in &m.failed_groups {
                    writeln!(notes, "tma: warning: counter group {g} not counted ({why}); its events show as not supported")?;
                }
            }
            let ending = m.ending;
            s.runs.push(RecordedRun {
                step,
                plan: plan_idx,
                repeat: r,
                groups: sub.clone(),
                measurement: m.clone(),
            });
            out.push(m);
            if ending == Ending::Interrupted {
                return Ok(out);
            }
        }
    }
    Ok(out)
}
