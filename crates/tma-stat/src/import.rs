//! `tma stat --import FILE` of `perf stat -x,` CSV or `perf stat -j` JSON: read, resolve,
//! evaluate and hand on one interval at a time, so memory stays flat however long the
//! recording (a day of 100 ms intervals is 864,000 of them).

use std::io::{BufRead, Write};

use tma_perf::import::{self, Breakdown, IntervalReader, Resolver};
use tma_perf::snapshot::Topology;

use crate::eval::{Request, RunInfo, TreeEval};
use crate::sink::{Finish, IntervalData, IntervalSink, Start};
use crate::{Outcome, StatConfig, StatError};

/// Intervals handed from the reading thread to the writing one at a time.
const BATCH: usize = 64;
/// Batches read ahead of the writer.
const PENDING_BATCHES: usize = 4;

struct Batch {
    intervals: Vec<tma_perf::Interval>,
    /// perf spec -> canonical id, with the first batch.
    event_map: Option<Vec<(String, String)>>,
    /// Every spec ignored so far (tolerant imports), when the batch added some.
    ignored: Option<Vec<String>>,
    /// At the end: where the recording was cut off.
    cut: Option<tma_perf::import::CutOff>,
}

enum BatchError {
    Import(tma_perf::import::ImportError),
    Resolve(tma_perf::import::ResolveError),
}

/// Read, resolve and (per-CPU/thread rows) aggregate up to [`BATCH`] intervals; `Ok(true)`
/// at the end of the recording.
fn read_batch<R, F, G>(
    reader: &mut IntervalReader<R>,
    resolver: &mut Resolver<F, G>,
    aggregated: bool,
    first: &mut bool,
) -> (Batch, Result<bool, BatchError>)
where
    R: BufRead,
    F: FnMut(&str) -> Vec<String>,
    G: FnMut(&[String], &[String]) -> Option<&'static str>,
{
    let mut batch = Batch {
        intervals: Vec::with_capacity(BATCH),
        event_map: None,
        ignored: None,
        cut: None,
    };
    let ignored_before = resolver.ignored().len();
    let mut result = Ok(false);
    while batch.intervals.len() < BATCH {
        let iv = match reader.next_interval() {
            Ok(Some(iv)) => iv,
            Ok(None) => {
                batch.cut = reader.cut_off().cloned();
                result = Ok(true);
                break;
            }
            Err(e) => {
                result = Err(BatchError::Import(e));
                break;
            }
        };
        let iv = match resolver.resolve(iv) {
            Ok(iv) => iv,
            Err(e) => {
                result = Err(BatchError::Resolve(e));
                break;
            }
        };
        if *first {
            // How each event spec was read: known from the first interval, where perf
            // lists every event it counted.
            batch.event_map = Some(resolver.mapping());
            *first = false;
        }
        batch.intervals.push(if aggregated {
            iv
        } else {
            import::aggregate(&iv)
        });
    }
    if resolver.ignored().len() > ignored_before {
        batch.ignored = Some(resolver.ignored().to_vec());
    }
    (batch, result)
}

/// Import a perf stat recording from `input` (named `file` in messages) into `sink`.
pub(crate) fn run_perf_stat(
    cfg: &StatConfig,
    input: impl BufRead + Send,
    file: &str,
    sink: &mut dyn IntervalSink,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let import_err = |source| StatError::Import {
        file: file.to_string(),
        source,
    };
    let resolve_err = |source| StatError::Resolve {
        file: file.to_string(),
        source,
    };
    let mut reader = IntervalReader::new(input).map_err(import_err)?;
    let (model, source) =
        crate::model::select_model(cfg.cpu.as_deref(), reader.cpu_hint(), &cfg.host)?;
    let what = match reader.breakdown() {
        Breakdown::Aggregated => "",
        Breakdown::PerCpu => ", per-CPU rows summed",
        Breakdown::PerThread => ", per-thread rows summed",
    };
    if cfg.smt.is_none() && model.nodes.iter().any(|n| n.formula.contains("#smt_on")) {
        writeln!(
            notes,
            "tma: note: assuming SMT was off where {file} was recorded; pass --smt on if it was \
             (some {} formulas differ)",
            model.key
        )?;
    }
    let choice = crate::eval::MetricChoice::resolve(cfg, model)?;
    let mut info = RunInfo {
        model,
        cpu_source: source.describe().to_string(),
        source: format!("imported from {file} ({}{what})", reader.format()),
        interval_mode: reader.interval_mode(),
        request: Request {
            level: cfg.level.max(choice.level),
            nodes: cfg.nodes.clone(),
            topology: cfg.smt.map(|smt| Topology {
                smt,
                ..Default::default()
            }),
            metrics: choice.metrics,
            bottlenecks: choice.bottlenecks,
        },
        command: None,
        event_map: Vec::new(),
    };
    let eval = TreeEval::new(&info)?;
    let level = cfg.level;
    let mut resolver = Resolver::new(
        model.key,
        |spec: &str| model.resolve_perf_event_all(spec).unwrap_or_default(),
        move |unknown: &[String], specs: &[String]| {
            crate::model::guess_other_cpu(unknown, specs, model, level)
        },
    );
    if !cfg.strict {
        resolver = resolver.tolerant();
    }
    let aggregated = reader.breakdown() == Breakdown::Aggregated;
    let mut bottleneck = None;
    // Intervals evaluated so far.
    let mut evaluated = 0usize;
    // Where the recording was cut off (its last interval dropped).
    let mut cut = None;
    // Two stages on two threads, so a long recording takes the time of the slower one:
    // reading and resolving text here, evaluating and writing below. The channel holds a
    // few batches, so memory stays flat however long the recording.
    std::thread::scope(|scope| -> Result<(), StatError> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Batch, StatError>>(PENDING_BATCHES);
        scope.spawn(move || {
            let mut first = true;
            loop {
                let (batch, result) =
                    read_batch(&mut reader, &mut resolver, aggregated, &mut first);
                let result = result.map_err(|e| match e {
                    BatchError::Import(e) => import_err(e),
                    BatchError::Resolve(e) => resolve_err(e),
                });
                // Intervals read before an error are still shown, then the error.
                let done = !matches!(result, Ok(false));
                let worth = !batch.intervals.is_empty() || batch.cut.is_some();
                if worth && tx.send(Ok(batch)).is_err() {
                    return; // the writer stopped (an error of its own)
                }
                if let Err(e) = result {
                    let _ = tx.send(Err(e));
                }
                if done {
                    return;
                }
            }
        });
        // Ignored specs already named in a note.
        let mut noted = 0;
        for batch in rx {
            let batch = batch?;
            if batch.cut.is_some() {
                cut = batch.cut.clone();
            }
            if let Some(map) = batch.event_map {
                info.event_map = map;
            }
            for iv in &batch.intervals {
                if evaluated == 0 {
                    eval.check_present(std::iter::once(iv))?;
                }
                let ir = eval.eval(iv);
                if evaluated == 0 {
                    eval.check_computable(iv, &ir)?;
                }
                evaluated += 1;
                if let Some(ignored) = batch.ignored.as_deref().filter(|v| v.len() > noted) {
                    note_ignored(notes, file, model.key, &ignored[noted..], noted > 0)?;
                    noted = ignored.len();
                }
                bottleneck = Some(ir.report.bottleneck.clone());
                if evaluated == 1 {
                    sink.start(recording_start(&info))?;
                }
                sink.interval(IntervalData {
                    raw: None,
                    readings: iv,
                    report: Some(&ir),
                })?;
            }
        }
        Ok(())
    })?;
    if evaluated == 0 {
        sink.start(recording_start(&info))?;
    }
    sink.finish(Finish::Tree {
        info: &info,
        whole: None,
    })?;
    if let Some(cut) = cut {
        if cfg.strict {
            return Err(import_err(tma_perf::import::ImportError::CutOffStrict {
                line: cut.line,
            }));
        }
        writeln!(notes, "tma: note: {file}: {cut}")?;
    }
    Ok(Outcome {
        ending: None,
        bottleneck,
    })
}

/// A recording's step: a tree, without a plan or a target.
fn recording_start(info: &RunInfo) -> Start<'_> {
    Start::Tree {
        info,
        plan: None,
        target: None,
    }
}

/// One note for the events a tolerant import dropped: how many, and the first few.
fn note_ignored(
    notes: &mut dyn Write,
    file: &str,
    model: &str,
    ignored: &[String],
    more: bool,
) -> std::io::Result<()> {
    const SHOWN: usize = 5;
    let n = ignored.len();
    let mut names = ignored
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if n > SHOWN {
        names += &format!(" and {} more", n - SHOWN);
    }
    writeln!(
        notes,
        "tma: note: ignored {n}{} {} of {file} that the {model} tree cannot use (not in the \
         {model} event tables, or an event recorded twice): {names}; --strict refuses them",
        if more { " more" } else { "" },
        if n == 1 { "event" } else { "events" },
    )
}
