//! Live sampling: the sampling session, `--record`, and how the session ended.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use tma_perf::sampling::{RawRecord, SampleEvent, SamplingConfig, SamplingError, Target};

use super::config::{usage, LocateConfig, LocateError};
use super::group::tree_plan;
use super::quick_stat::choose_event;
use super::recorded::{new_aggregator, read_kallsyms, LivePass, Recorded};
use crate::aggregate::Aggregator;
use crate::choose::Chosen;
use crate::live::{LiveError, LiveOutcome};
use crate::record::PerfDataWriter;
use crate::symbols::Kallsyms;

/// Live sampling: choose the event, sample, save `--record`, explain how the session ended.
pub(super) fn sample(
    cfg: &LocateConfig,
    target: &Target,
    out_notes: &mut dyn Write,
) -> Result<Recorded, LocateError> {
    let mut tree = None;
    let chosen = match cfg.tree {
        Some(level) => {
            let (layout, model, event, group) = tree_plan(cfg, level)?;
            tree = Some((layout, model, group));
            Chosen {
                wanted: event.name().to_string(),
                event,
                precise: 0,
                notes: Vec::new(),
            }
        }
        None => choose_event(cfg, target, out_notes)?,
    };
    if cfg.echo_notes {
        for n in &chosen.notes {
            writeln!(out_notes, "tma: note: {n}")?;
        }
    }
    let mut notes = chosen.notes.clone();
    if matches!(chosen.event, SampleEvent::CpuClock | SampleEvent::TaskClock)
        && chosen.notes.is_empty()
    {
        notes.push(format!(
            "{} is a timer: samples show where time goes, with skid",
            chosen.event.name()
        ));
    }
    let mut scfg = sampling_config(cfg, &chosen)?;
    let tree = tree.map(|(layout, model, group)| {
        scfg.group = Some(group);
        // Kernel work (page faults, system calls) is charged to the user function whose
        // call chain led there: sample the kernel too, with call chains.
        scfg.callchain = true;
        scfg.include_kernel = true;
        (layout, model)
    });
    let mut agg = new_aggregator(cfg);
    agg.keep_callchains |= tree.is_some();
    if tma_perf::process::interrupted() {
        // Stopped during the quick stat pass: nothing is launched or sampled.
        notes.push("interrupted (SIGINT/SIGTERM) before sampling began: no samples".into());
        return Ok(Recorded {
            agg,
            event_name: chosen.event.name().to_string(),
            kallsyms: None,
            notes,
            duration_ns: 0,
            exit_status: 0,
            tree,
            live: None,
            import_others: Vec::new(),
        });
    }
    let retry = (tree.is_some() && !cfg.kernel).then(|| {
        let mut user = scfg.clone();
        user.include_kernel = false;
        user
    });
    let mut include_kernel = scfg.include_kernel;
    let (outcome, records) = match record(cfg, scfg, target, &mut agg) {
        // Kernel samples refused (perf_event_paranoid): user code only, and say so.
        Err(LocateError::Live(LiveError::Sampling(SamplingError::Open { err, .. })))
            if retry.is_some()
                && matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) =>
        {
            let user = retry.unwrap_or_else(|| unreachable!("checked by the guard"));
            notes.push(format!(
                "kernel samples were refused (perf_event_paranoid is {}): the work the \
                 kernel does for a function (page faults, system calls) is charged to the \
                 next user sample",
                cfg.host.paranoid_text()
            ));
            agg = new_aggregator(cfg);
            agg.keep_callchains = true;
            include_kernel = false;
            record(cfg, user, target, &mut agg)?
        }
        r => r?,
    };
    if let Some(path) = &cfg.record {
        write_perf_data(path, outcome.attr.clone(), &records)?;
    }
    let exit_status = session_notes(cfg, &outcome, &mut notes);
    let kallsyms = match &cfg.kallsyms {
        Some(p) => read_kallsyms(p),
        None if cfg.kernel || (cfg.system_wide && outcome.summary.kernel_refused.is_none()) => cfg
            .host
            .proc_bytes("kallsyms")
            .ok()
            .and_then(|b| Kallsyms::parse(&b)),
        None => None,
    };
    Ok(Recorded {
        agg,
        event_name: chosen.event.name().to_string(),
        kallsyms,
        notes,
        duration_ns: outcome.summary.elapsed.as_nanos().min(i64::MAX as u128) as i64,
        exit_status,
        tree,
        live: Some(LivePass {
            target: target.clone(),
            include_kernel: include_kernel && outcome.summary.kernel_refused.is_none(),
            ended_early: outcome.summary.interrupted || outcome.summary.target_vanished,
        }),
        import_others: Vec::new(),
    })
}

pub(super) fn sampling_config(
    cfg: &LocateConfig,
    chosen: &Chosen,
) -> Result<SamplingConfig, LocateError> {
    let mut s = SamplingConfig::new(chosen.event.clone());
    s.precise = chosen.precise;
    s.callchain = cfg.call_graph;
    s.include_kernel = cfg.kernel || cfg.system_wide;
    s.host = cfg.host.clone();
    if let Some(r) = cfg.rate {
        s.rate = r;
    }
    if let Some(secs) = cfg.duration_s {
        if !(secs > 0.0 && secs.is_finite()) {
            return Err(usage("--duration must be a positive number of seconds"));
        }
        s.duration = Some(Duration::from_secs_f64(secs));
    }
    Ok(s)
}

/// A record kept for `--record`: (type, misc, body).
pub(super) type KeptRecord = (u32, u16, Vec<u8>);

/// Sample into `agg`; with `--record`, also keep every record (they come in time order, with
/// perf's FINISHED_ROUND markers) for the perf.data file, whose attr is known only once the
/// session is open.
pub(super) fn record(
    cfg: &LocateConfig,
    scfg: SamplingConfig,
    target: &Target,
    agg: &mut Aggregator,
) -> Result<(LiveOutcome, Vec<KeptRecord>), LocateError> {
    let keep = cfg.record.is_some();
    let mut records: Vec<KeptRecord> = Vec::new();
    let mut collect = |r: &RawRecord<'_>| {
        if keep {
            records.push((r.ty, r.misc, r.data.concat()));
        }
    };
    let outcome = crate::live::sample(scfg, target, agg, Some(&mut collect))?;
    Ok((outcome, records))
}

pub(super) fn write_perf_data(
    path: &Path,
    attr: Vec<u8>,
    records: &[KeptRecord],
) -> Result<(), LocateError> {
    let mut w = PerfDataWriter::new(attr);
    for (ty, misc, body) in records {
        w.push(*ty, *misc, &[&body[..]]);
    }
    let image = w.finish();
    tma_render::write_output(path, |out| {
        out.write_all(&image)?;
        Ok(())
    })?;
    Ok(())
}

/// Notes on how the session ended, and the exit status it gives.
pub(super) fn session_notes(
    cfg: &LocateConfig,
    outcome: &LiveOutcome,
    notes: &mut Vec<String>,
) -> u8 {
    let late = outcome.late_records;
    if late > 0 {
        notes.push(format!(
            "{late} records reached tma too late to be put in time order; \
             samples among them may be attributed to [unknown] or an old mapping"
        ));
    }
    let summary = &outcome.summary;
    if let Some(paranoid) = &summary.kernel_refused {
        notes.push(format!(
            "kernel samples were refused (perf_event_paranoid is {paranoid}): only user code \
             was sampled; run as root or lower perf_event_paranoid to -1 to include the kernel"
        ));
    }
    if cfg.system_wide {
        let cpus = match &cfg.cpus {
            Some(c) => {
                let v: Vec<String> = c.iter().map(u32::to_string).collect();
                format!("CPUs {}", v.join(","))
            }
            None => "all CPUs".to_string(),
        };
        notes.push(format!(
            "system-wide: every process on {cpus} for {:.1} s",
            summary.elapsed.as_secs_f64()
        ));
    }
    if summary.inherit_refused {
        notes.push(
            "this kernel refuses sample-read with inherit (it needs Linux 6.12): only the \
             command's first thread was sampled, not the threads and processes it started"
                .into(),
        );
    }
    if summary.target_vanished {
        notes.push("the attached process exited during sampling".into());
    }
    if summary.interrupted {
        notes.push(
            "interrupted (SIGINT/SIGTERM): the report covers the samples taken until then".into(),
        );
    }
    if summary.threads_vanished > 0 {
        notes.push(format!(
            "{} threads exited before their events could be opened",
            summary.threads_vanished
        ));
    }
    if summary.stopped_at_duration {
        notes.push(format!(
            "sampling stopped after --duration {}s; the command was sent SIGTERM",
            cfg.duration_s.unwrap_or(0.0)
        ));
        0
    } else if let Some(sig) = summary.signal {
        notes.push(format!("the command was killed by signal {sig}"));
        tma_perf::process::shell_status(None, Some(sig))
    } else {
        tma_perf::process::shell_status(summary.exit_code, None)
    }
}
