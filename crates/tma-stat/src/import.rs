//! `tma stat --import FILE` of `perf stat -x,` CSV or `perf stat -j` JSON: read, resolve,
//! evaluate and hand on one interval at a time, so memory stays flat however long the
//! recording (a day of 100 ms intervals is 864,000 of them).

use std::io::{BufRead, Write};

use tma_perf::snapshot::Topology;
use tma_perfstat::{self as import, Breakdown, IntervalReader, Resolver};

use crate::eval::{IntervalReport, Request, RunInfo, TreeEval};
use crate::session::hybrid::CoreTable;
use crate::sink::{Finish, IntervalData, IntervalSink, Start};
use crate::{Outcome, StatConfig, StatError};

mod idle;

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

/// One core type of a hybrid recording: the events of its PMU, read with its table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoreType {
    /// `cpu_core`, `cpu_atom`, `cpu_lowpower`...
    pub pmu: &'static str,
    pub model: &'static tma_catalog::Model,
}

impl CoreType {
    /// Whether a perf event spec belongs to this core type's tree: its PMU's events, and
    /// events of no core PMU (software and tool events) for every type.
    fn keeps(&self, spec: &str) -> bool {
        match spec.split_once('/') {
            Some((pmu, _)) if is_core_type_pmu(pmu) => pmu == self.pmu,
            // Vendor names without a PMU are read by the P-core table.
            _ => import::is_generic_event(spec) || self.pmu == "cpu_core",
        }
    }

    /// `P-core`, `E-core`, else the PMU's name: the names live runs give the core types too.
    fn label(&self) -> &'static str {
        crate::session::hybrid::core_label(self.pmu)
    }

    /// The spec as the type's table reads it: a type without a table of its own is read
    /// with the E-core table, so its PMU (`cpu_lowpower/…/`) is that table's (`cpu_atom`).
    fn retarget(&self, spec: &str) -> String {
        match spec.split_once('/') {
            Some((pmu, rest)) if pmu == self.pmu && pmu != self.model.pmu => {
                format!("{}/{rest}", self.model.pmu)
            }
            _ => spec.to_string(),
        }
    }
}

/// A core type's PMU of a hybrid part: `cpu_core`, `cpu_atom`, or any further `cpu_…` type.
fn is_core_type_pmu(pmu: &str) -> bool {
    pmu.len() > "cpu_".len()
        && pmu.starts_with("cpu_")
        && pmu
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The core-type PMUs whose events `bytes` name (`cpu_core/…/`, `cpu_atom/…/`,
/// `cpu_lowpower/…/`): `cpu_core` and `cpu_atom` first, then the others by name.
pub(crate) fn core_pmus_in(bytes: &[u8]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(4).position(|w| w == b"cpu_") {
        let start = at + i;
        at = start + 4;
        if start > 0 && word(bytes[start - 1]) {
            continue;
        }
        let len = bytes[start..]
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .unwrap_or(bytes.len() - start);
        if bytes.get(start + len) != Some(&b'/') {
            continue;
        }
        let name = String::from_utf8_lossy(&bytes[start..start + len]).into_owned();
        if is_core_type_pmu(&name) && !found.contains(&name) {
            found.push(name);
        }
    }
    let rank = |n: &str| match n {
        "cpu_core" => 0,
        "cpu_atom" => 1,
        _ => 2,
    };
    found.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    found
}

/// Whether the first bytes of a recording hold events of several core-type PMUs of a
/// hybrid part.
pub(crate) fn is_hybrid(prefix: &[u8]) -> bool {
    core_pmus_in(prefix).len() > 1
}

/// A recording of a hybrid part (`cpu_core/…/`, `cpu_atom/…/` and any further core type's
/// events in one file): one tree per core type, each read with its own table (a type
/// without one, as `cpu_lowpower`, with the E-core table) and marked with its type. `--cpu`
/// names the machine (any core type's table); the core type of each event comes from its
/// PMU prefix.
pub(crate) fn run_hybrid(
    cfg: &StatConfig,
    bytes: &[u8],
    file: &str,
    sink: &mut dyn IntervalSink,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let first = IntervalReader::new(bytes).ok();
    let number_format = first.as_ref().and_then(|r| r.number_format());
    let hint = first.and_then(|r| r.cpu_hint().map(str::to_string));
    let (model, _) = crate::model::select_model(cfg.cpu.as_deref(), hint.as_deref(), &cfg.host)?;
    if crate::session::hybrid::core_family(model).is_empty() {
        // Not a hybrid table: read as one tree, which says what does not fit.
        return run_perf_stat(cfg, bytes, file, sink, notes);
    }
    note_number_format(notes, file, number_format)?;
    let mut pmus = core_pmus_in(bytes);
    if !cfg.one_tree {
        // A core type that counted nothing has no tree: a note, and the others' trees.
        idle::drop_idle_types(bytes, file, &mut pmus, notes)?;
    }
    let names: Vec<&str> = pmus.iter().map(String::as_str).collect();
    let mut tables = crate::session::hybrid::core_tables(model, &names)?;
    if cfg.one_tree {
        let keep = tables
            .iter()
            .position(|t| t.model.key == model.key && !t.borrowed)
            .unwrap_or(0);
        let this = tables.swap_remove(keep);
        let others = tables
            .iter()
            .filter(|t| !t.borrowed)
            .map(|t| t.model.key)
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(
            notes,
            "tma: note: {file} holds {} core types of a hybrid part; this reads the {} \
             tree ({} events, {} table); --cpu {others} gives another",
            names.len(),
            this.label,
            this.pmu,
            this.model.key,
        )?;
        tables = vec![this];
    } else if tables.len() > 1 {
        let list = tables
            .iter()
            .map(|t| {
                if t.borrowed {
                    format!(
                        "{} ({} events; no table of its own: read as E-cores, with the {} \
                         table)",
                        t.label, t.pmu, t.model.key
                    )
                } else {
                    format!("{} ({} events, {} table)", t.label, t.pmu, t.model.key)
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(
            notes,
            "tma: note: {file} holds {} core types of a hybrid part, one tree each: {list}",
            names.len()
        )?;
    }
    if let [t] = tables.as_slice() {
        let core = CoreType {
            pmu: tma_host::sysfs::core_pmu_name(&t.pmu),
            model: t.model,
        };
        return import_one(cfg, bytes, file, Some(core), sink, notes);
    }
    let interval_mode = IntervalReader::new(bytes).is_ok_and(|r| r.interval_mode());
    several_types(cfg, bytes, file, &tables, interval_mode, sink, notes)
}

/// What one core type's import hands on, from its thread to the one writing.
enum Piece {
    Start(Box<RunInfo>),
    Interval(Box<(tma_perf::Interval, IntervalReport)>),
    Finish,
    /// Notes, in their place among the steps.
    Note(Vec<u8>),
}

/// The notes of one core type's import in [`several_types`]: over the same channel as its
/// steps, so each note is written where it belongs among them.
struct NoteRelay(std::sync::mpsc::SyncSender<Piece>);

impl Write for NoteRelay {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .send(Piece::Note(buf.to_vec()))
            .map_err(|_| std::io::Error::other("the import was stopped"))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The next step of one core type's import, its notes written on the way; `None` at the
/// end of its thread.
fn next_piece(rx: &std::sync::mpsc::Receiver<Piece>, notes: &mut dyn Write) -> Option<Piece> {
    loop {
        match rx.recv() {
            Ok(Piece::Note(text)) => {
                // Notes are best effort, as everywhere.
                let _ = notes.write_all(&text);
            }
            Ok(p) => return Some(p),
            Err(_) => return None,
        }
    }
}

/// The sink of one core type's import in [`several_types`]: each step goes over a channel.
struct Relay(std::sync::mpsc::SyncSender<Piece>);

impl Relay {
    fn send(&self, p: Piece) -> Result<(), StatError> {
        // The writing side has stopped (an error of its own, which it reports).
        self.0
            .send(p)
            .map_err(|_| crate::error::usage("the import was stopped"))
    }
}

impl IntervalSink for Relay {
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        match start {
            Start::Tree { info, .. } => self.send(Piece::Start(Box::new(info.clone()))),
            Start::Software { .. } => Ok(()),
        }
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        match iv.report {
            Some(ir) => self.send(Piece::Interval(Box::new((iv.readings.clone(), ir.clone())))),
            None => Ok(()),
        }
    }
    fn finish(&mut self, _end: Finish<'_>) -> Result<(), StatError> {
        self.send(Piece::Finish)
    }
}

/// A recording of several core types: each type imported on a thread of its own, in step
/// with the others (a few intervals apart at most, so memory stays flat), and handed on as
/// a live run hands them: with intervals, every type's tree of each interval before the
/// next interval ([`IntervalSink::start_trees`], `tree_interval`, `finish_trees`); a whole
/// run, the trees one after the other as plain steps. When every type's cycles were
/// recorded, the merged view (the trees weighted by those cycles) comes last, as live.
fn several_types(
    cfg: &StatConfig,
    bytes: &[u8],
    file: &str,
    tables: &[CoreTable],
    interval_mode: bool,
    sink: &mut dyn IntervalSink,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let cores: Vec<CoreType> = tables
        .iter()
        .map(|t| CoreType {
            pmu: tma_host::sysfs::core_pmu_name(&t.pmu),
            model: t.model,
        })
        .collect();
    std::thread::scope(|scope| -> Result<Outcome, StatError> {
        let mut rxs = Vec::new();
        let mut threads = Vec::new();
        for &core in &cores {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Piece>(PENDING_BATCHES);
            rxs.push(rx);
            threads.push(scope.spawn(move || {
                let mut relay = Relay(tx.clone());
                import_one(cfg, bytes, file, Some(core), &mut relay, &mut NoteRelay(tx))
            }));
        }
        // The end of every thread: the rest of its notes, in core-type order, and the
        // first error.
        let join = |rxs: Vec<std::sync::mpsc::Receiver<Piece>>,
                    threads: Vec<std::thread::ScopedJoinHandle<'_, _>>,
                    notes: &mut dyn Write|
         -> Result<(), StatError> {
            for rx in &rxs {
                while next_piece(rx, notes).is_some() {}
            }
            let mut error = None;
            for t in threads {
                let r: Result<Outcome, StatError> = t
                    .join()
                    .unwrap_or_else(|_| Err(crate::error::usage("a core type's import failed")));
                if let Err(e) = r {
                    error.get_or_insert(e);
                }
            }
            error.map_or(Ok(()), Err)
        };
        let mut infos: Vec<RunInfo> = Vec::new();
        for rx in &rxs {
            match next_piece(rx, notes) {
                Some(Piece::Start(info)) => infos.push(*info),
                _ => break,
            }
        }
        if infos.len() < cores.len() {
            // A type's import ended before its first tree: its error says why.
            join(rxs, threads, notes)?;
            return Err(crate::error::usage(format!(
                "{file}: a core type's tree could not be read"
            )));
        }
        let cycles: Vec<Option<String>> = tables
            .iter()
            .map(|t| crate::session::hybrid::cycles_event(t.model).map(|e| e.name))
            .collect();
        let merged_info = RunInfo {
            source: format!(
                "imported from {file}; merged view: the core types' trees weighted by their \
                 cycles{}",
                if interval_mode {
                    " in each interval"
                } else {
                    ""
                }
            ),
            core_type: Some("merged"),
            event_map: Vec::new(),
            ..infos[0].clone()
        };
        let mut starts: Vec<Start> = infos.iter().map(recording_start).collect();
        let mut merged: Option<bool> = None;
        // A whole run: each tree as a plain step, once every type's is read.
        let mut whole: Vec<Option<(tma_perf::Interval, IntervalReport)>> = Vec::new();
        let mut bottleneck = None;
        let mut started = false;
        let mut open = vec![true; rxs.len()];
        loop {
            let mut parts: Vec<Option<(tma_perf::Interval, IntervalReport)>> = Vec::new();
            for (k, rx) in rxs.iter().enumerate() {
                let got = if open[k] {
                    match next_piece(rx, notes) {
                        Some(Piece::Interval(p)) => Some(*p),
                        Some(Piece::Start(_) | Piece::Finish | Piece::Note(_)) | None => {
                            open[k] = false;
                            None
                        }
                    }
                } else {
                    None
                };
                parts.push(got);
            }
            if parts.iter().all(Option::is_none) {
                break;
            }
            let weights: Vec<Option<f64>> = parts
                .iter()
                .zip(&cycles)
                .map(|(p, c)| {
                    let (iv, _) = p.as_ref()?;
                    iv.get(c.as_deref()?)?.value
                })
                .collect();
            let with_merged = *merged.get_or_insert_with(|| {
                let all = weights.iter().all(Option::is_some);
                if !all {
                    let missing = tables
                        .iter()
                        .zip(&weights)
                        .zip(&cycles)
                        .filter(|((_, w), _)| w.is_none())
                        .map(|((t, _), c)| {
                            format!("{}/{}/", t.pmu, c.as_deref().unwrap_or("cycles"))
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    let _ = writeln!(
                        notes,
                        "tma: note: no merged view: {file} holds no cycles of {missing}, \
                         which weigh each core type's tree; record them too for one"
                    );
                }
                all
            });
            if !started {
                // The first interval: every tree is known.
                if with_merged {
                    starts.push(recording_start(&merged_info));
                }
                if interval_mode {
                    sink.start_trees(&starts)?;
                }
                started = true;
            }
            let merged_ir = (with_merged && parts.iter().all(Option::is_some)).then(|| {
                let weighed: Vec<(&CoreTable, &IntervalReport, f64)> = tables
                    .iter()
                    .zip(&parts)
                    .zip(&weights)
                    .filter_map(|((t, p), w)| Some((t, &p.as_ref()?.1, (*w)?)))
                    .collect();
                crate::session::hybrid::merge_interval(&weighed)
            });
            let last = merged_ir
                .as_ref()
                .or(parts.iter().flatten().map(|p| &p.1).next())
                .map(|ir| ir.report.bottleneck.clone());
            bottleneck = Some(last);
            let merged_part = merged_ir.map(|ir| {
                let readings = tma_perf::Interval {
                    start_s: ir.start_s,
                    end_s: ir.end_s,
                    readings: Vec::new(),
                    printed: Vec::new(),
                };
                (readings, ir)
            });
            if !interval_mode {
                whole = parts.into_iter().chain([merged_part]).collect();
                continue;
            }
            for (k, p) in parts.into_iter().chain([merged_part]).enumerate() {
                let Some((readings, report)) = p else {
                    continue;
                };
                sink.tree_interval(
                    k,
                    starts[k],
                    IntervalData {
                        raw: None,
                        readings: &readings,
                        report: Some(&report),
                    },
                )?;
            }
        }
        let mut ends: Vec<Finish> = infos
            .iter()
            .map(|info| Finish::Tree { info, whole: None })
            .collect();
        if starts.len() > infos.len() {
            ends.push(Finish::Tree {
                info: &merged_info,
                whole: None,
            });
        }
        if interval_mode {
            if !started {
                sink.start_trees(&starts)?;
            }
            sink.finish_trees(&ends)?;
        } else {
            for (k, (start, end)) in starts.iter().zip(&ends).enumerate() {
                sink.start(*start)?;
                if let Some(Some((readings, report))) = whole.get(k) {
                    sink.interval(IntervalData {
                        raw: None,
                        readings,
                        report: Some(report),
                    })?;
                }
                sink.finish(*end)?;
            }
        }
        join(rxs, threads, notes)?;
        Ok(Outcome {
            ending: None,
            bottleneck: bottleneck.flatten(),
        })
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_types_of_a_recording_are_its_cpu_pmus() {
        let csv = b"1,,cpu_lowpower/TOPDOWN_RETIRING.ALL/,1,100.00,,\n\
                    2,,cpu_atom/CPU_CLK_UNHALTED.CORE/,1,100.00,,\n\
                    3,,cpu_clk_unhalted.thread,1,100.00,,\n\
                    4,,cpu/cycles/,1,100.00,,\n\
                    5,,msr_cpu_x/tsc/,1,100.00,,\n\
                    6,,cpu_core/TOPDOWN.SLOTS/,1,100.00,,\n";
        assert_eq!(core_pmus_in(csv), ["cpu_core", "cpu_atom", "cpu_lowpower"]);
        assert!(is_hybrid(csv));
        assert!(!is_hybrid(b"1,,cpu_core/TOPDOWN.SLOTS/,1,100.00,,\n"));
        let lp = CoreType {
            pmu: "cpu_lowpower",
            model: tma_catalog::by_name("adl-e").unwrap(),
        };
        assert!(lp.keeps("cpu_lowpower/TOPDOWN_RETIRING.ALL/"));
        assert!(!lp.keeps("cpu_atom/TOPDOWN_RETIRING.ALL/"));
        assert!(lp.keeps("task-clock"));
        assert_eq!(
            lp.retarget("cpu_lowpower/TOPDOWN_RETIRING.ALL/"),
            "cpu_atom/TOPDOWN_RETIRING.ALL/"
        );
    }
}
