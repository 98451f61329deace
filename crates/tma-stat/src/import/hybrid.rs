//! A `perf stat` recording of a hybrid part: one tree per core type, each type read on a
//! thread of its own, its intervals handed to the one [`Interleaver`] that live runs use.

use std::io::Write;
use std::sync::mpsc::{Receiver, SyncSender};

use tma_perfstat::IntervalReader;

use super::core_type::{core_pmus_in, CoreType};
use super::{import_one, note_number_format, recording_start, run_perf_stat, PENDING_BATCHES};
use crate::config::{Outcome, StatConfig};
use crate::error::StatError;
use crate::eval::{IntervalReport, RunInfo};
use crate::hybrid::{core_family, core_tables, cycles_event, CoreTable, Interleaver, TypeInterval};
use crate::sink::{Finish, IntervalData, IntervalSink, Start};

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
    if core_family(model).is_empty() {
        // Not a hybrid table: read as one tree, which says what does not fit.
        return run_perf_stat(cfg, bytes, file, sink, notes);
    }
    note_number_format(notes, file, number_format)?;
    let mut pmus = core_pmus_in(bytes);
    if !cfg.one_tree {
        // A core type that counted nothing has no tree: a note, and the others' trees.
        super::idle::drop_idle_types(bytes, file, &mut pmus, notes)?;
    }
    let names: Vec<&str> = pmus.iter().map(String::as_str).collect();
    let mut tables = core_tables(model, &names)?;
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

/// The next step of one core type's import, its notes written on the way; `None` at the
/// end of its thread.
fn next_piece(rx: &Receiver<Piece>, notes: &mut dyn Write) -> Option<Piece> {
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

/// The sink and the notes of one core type's import in [`several_types`]: each step and
/// each note over one channel, so each note is written where it belongs among the steps.
struct Relay(SyncSender<Piece>);

impl Write for Relay {
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
                let (mut steps, mut type_notes) = (Relay(tx.clone()), Relay(tx));
                import_one(cfg, bytes, file, Some(core), &mut steps, &mut type_notes)
            }));
        }
        // The end of every thread: the rest of its notes, in core-type order, and the
        // first error.
        let join = |rxs: Vec<Receiver<Piece>>,
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
            .map(|t| cycles_event(t.model).map(|e| e.name))
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
        let starts: Vec<Start> = infos.iter().map(recording_start).collect();
        let merged = Some(recording_start(&merged_info));
        let mut trees = Interleaver::new(tables, starts, merged, interval_mode);
        let mut first = true;
        let mut open = vec![true; rxs.len()];
        loop {
            let mut parts: Vec<Option<TypeInterval>> = Vec::new();
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
                parts.push(got.map(|(readings, report)| TypeInterval {
                    cycles: cycles[k].as_deref().and_then(|c| readings.get(c)?.value),
                    raw: None,
                    readings,
                    report,
                }));
            }
            if parts.iter().all(Option::is_none) {
                break;
            }
            if std::mem::take(&mut first) {
                // The merged view needs every type's cycles.
                let missing = tables
                    .iter()
                    .zip(&parts)
                    .zip(&cycles)
                    .filter(|((_, p), _)| p.as_ref().and_then(|p| p.cycles).is_none())
                    .map(|((t, _), c)| format!("{}/{}/", t.pmu, c.as_deref().unwrap_or("cycles")))
                    .collect::<Vec<_>>();
                if !missing.is_empty() {
                    let _ = writeln!(
                        notes,
                        "tma: note: no merged view: {file} holds no cycles of {}, which weigh \
                         each core type's tree; record them too for one",
                        missing.join(", ")
                    );
                    trees.without_merged();
                }
            }
            trees.interval(sink, parts)?;
        }
        if first {
            // No interval: no merged view.
            trees.without_merged();
        }
        let ends: Vec<Finish> = infos
            .iter()
            .map(|info| Finish::Tree { info, whole: None })
            .collect();
        let bottleneck = trees.finish(sink, ends)?;
        join(rxs, threads, notes)?;
        Ok(Outcome {
            ending: None,
            bottleneck,
        })
    })
}
