//! `tma stat --import FILE` of `perf stat -x,` CSV or `perf stat -j` JSON: read, resolve,
//! evaluate and hand on one interval at a time, so memory stays flat however long the
//! recording (a day of 100 ms intervals is 864,000 of them).

use std::io::{BufRead, Write};

use tma_perf::snapshot::Topology;
use tma_perfstat::{self as import, Breakdown, IntervalReader, Resolver};

use crate::eval::{Request, RunInfo, TreeEval};
use crate::sink::{Finish, IntervalData, IntervalSink, Start};
use crate::{Outcome, StatConfig, StatError};

mod core_type;
pub(crate) mod hybrid;
mod idle;

use core_type::CoreType;
pub(crate) use core_type::{core_pmus_in, is_hybrid};

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
    cut: Option<tma_perfstat::CutOff>,
    /// At the end: the last line, when it had no line end.
    unterminated: Option<usize>,
    /// With the first batch: the part of the work every event was counted in.
    scope: Option<tma_perfstat::Scope>,
    /// With the first batch: specs of a scope of their own, read as their events.
    rescoped: Vec<String>,
}

enum BatchError {
    Import(tma_perfstat::ImportError),
    Resolve(tma_perfstat::ResolveError),
}

/// Read, resolve and (per-CPU/thread rows) aggregate up to [`BATCH`] intervals; `Ok(true)`
/// at the end of the recording.
fn read_batch<R, F, G>(
    reader: &mut IntervalReader<R>,
    resolver: &mut Resolver<F, G>,
    aggregated: bool,
    core: Option<CoreType>,
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
        unterminated: None,
        scope: None,
        rescoped: Vec::new(),
    };
    let ignored_before = resolver.ignored().len();
    let mut result = Ok(false);
    while batch.intervals.len() < BATCH {
        let iv = match reader.next_interval() {
            Ok(Some(mut iv)) => {
                if let Some(c) = core {
                    iv.readings.retain(|r| c.keeps(&r.event));
                    iv.printed.retain(|m| c.keeps(&m.event));
                }
                iv
            }
            Ok(None) => {
                batch.cut = reader.cut_off().cloned();
                batch.unterminated = reader.unterminated_end();
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
            batch.scope = resolver.scope().cloned();
            batch.rescoped = resolver.rescoped().to_vec();
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
    import_one(cfg, input, file, None, sink, notes)
}

/// Import one tree of a recording: all of it, or one core type's events of a hybrid one.
fn import_one(
    cfg: &StatConfig,
    input: impl BufRead + Send,
    file: &str,
    core: Option<CoreType>,
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
    if core.is_none() {
        note_number_format(notes, file, reader.number_format())?;
    }
    let (model, source) = match core {
        Some(c) => (c.model, crate::model::given_source(cfg)),
        None => crate::model::select_for_import(cfg, reader.cpu_hint())?,
    };
    let mut what = match reader.breakdown() {
        Breakdown::Aggregated => String::new(),
        Breakdown::PerCpu => ", per-CPU rows summed".to_string(),
        Breakdown::PerThread => ", per-thread rows summed".to_string(),
    };
    if reader.has_cgroups() {
        what += ", per-cgroup rows (perf stat -G) summed";
    }
    if let Some(c) = core {
        what += &format!("; {} tree: the {} events", c.label(), c.pmu);
    }
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
        scope: None,
        core_type: core.map(|c| c.label()),
    };
    let mut eval = TreeEval::new(&info)?;
    let level = cfg.level;
    let mut resolver = Resolver::new(
        model.key,
        move |spec: &str| {
            let spec = core.map_or_else(|| spec.to_string(), |c| c.retarget(spec));
            model.resolve_perf_event_all(&spec).unwrap_or_default()
        },
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
                    read_batch(&mut reader, &mut resolver, aggregated, core, &mut first);
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
            if tma_sys::signal::interrupted().is_some() {
                // Dropping `rx` stops the reader thread at its next batch.
                writeln!(notes, "tma: interrupted: printing what was read so far")?;
                break;
            }
            let batch = batch?;
            if batch.cut.is_some() {
                cut = batch.cut.clone();
            }
            // No tree from the first interval: say which file, and whether it looks cut.
            let no_tree = |e: StatError| match e {
                StatError::NoEvents(m) => {
                    let cut = match (&batch.cut, batch.unterminated) {
                        (Some(c), _) => format!("; {c}"),
                        (None, Some(line)) => format!(
                            "; its last line (line {line}) has no line end, as when perf is \
                             stopped while writing: the recording may be cut off there, so \
                             record again and let perf finish"
                        ),
                        (None, None) => String::new(),
                    };
                    StatError::NoEvents(format!("{file}: {m}{cut}"))
                }
                e => e,
            };
            if let Some(map) = batch.event_map {
                info.event_map = map;
            }
            if !batch.rescoped.is_empty() {
                writeln!(
                    notes,
                    "tma: warning: {file} counts some events in another scope than the rest \
                     ({}): they were read as their events, so the tree mixes what was counted; \
                     record every event with the same modifiers",
                    batch.rescoped.join(", ")
                )?;
            }
            if let Some(scope) = batch.scope.filter(|s| !s.is_all()) {
                writeln!(
                    notes,
                    "tma: note: every count of {file} is of {} (perf's `:{}`): the tree is \
                     that part of the work, not all of it",
                    scope.describe(),
                    scope.letters
                )?;
                info.scope = Some(scope.letters);
            }
            for iv in &batch.intervals {
                if evaluated == 0 {
                    eval.check_present(std::iter::once(iv)).map_err(no_tree)?;
                    note_groups(notes, file, &eval, iv)?;
                    if eval.per_thread(iv) {
                        writeln!(
                            notes,
                            "tma: note: {file} holds no CPU_CLK_UNHALTED.THREAD_ANY, so with SMT \
                             on its counts are one thread's: the core's clocks are estimated \
                             from CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE and REF_XCLK, as perf does \
                             (the nodes that use them are marked `estimated`)"
                        )?;
                    }
                }
                let ir = eval.eval(iv);
                if evaluated == 0 {
                    eval.check_computable(iv, &ir).map_err(no_tree)?;
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
            return Err(import_err(tma_perfstat::ImportError::CutOffStrict {
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

/// How a recording that counts events in several groups (`perf stat -M`) was read.
fn note_groups(
    notes: &mut dyn Write,
    file: &str,
    eval: &TreeEval,
    iv: &tma_perf::Interval,
) -> std::io::Result<()> {
    let repeated = TreeEval::repeated_events(iv);
    if repeated.is_empty() {
        return Ok(());
    }
    let list = repeated
        .iter()
        .map(|(e, n)| format!("{e} ({n} times)"))
        .collect::<Vec<_>>()
        .join(", ");
    writeln!(
        notes,
        "tma: note: {file} counts events more than once, as `perf stat -M` does: {list}; \
         each node reads the copies counted (or, where perf could not group them, listed) \
         together with its other events, as perf does"
    )?;
    for (node, events) in eval.mixed_groups(iv) {
        writeln!(
            notes,
            "tma: note: no group of {file} counted all of {node}'s events together; it reads \
             the copies of {} counted the longest, which mixes groups",
            events.join(", ")
        )?;
    }
    Ok(())
}

/// The note, once per file, that perf's text was written in another locale than C, and how
/// its numbers were read.
pub(crate) fn note_number_format(
    notes: &mut dyn Write,
    file: &str,
    format: Option<tma_perfstat::NumberFormat>,
) -> Result<(), StatError> {
    if let Some(f) = format.filter(|f| !f.is_c()) {
        writeln!(
            notes,
            "tma: note: {file}: numbers written with {f}; read that way"
        )?;
    }
    Ok(())
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
