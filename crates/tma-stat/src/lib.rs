//! The `tma stat` use case as a library: count the events of a TMA tree for a command, pids,
//! threads or the whole system (or read a recording of them), evaluate the tree and write it.
//!
//! The CLI turns its arguments into a [`StatConfig`] and calls [`run`] with a sink
//! ([`sink::TreeOutput`] prints); `tma locate` calls [`run`] too, for the bottleneck
//! ([`Outcome::bottleneck`]) of a quick pass, `tma diff` and `tma report` collect the trees
//! ([`evaluate`], [`sink::Collect`]), and `tma serve`'s collector is a sink. Data flow:
//!
//! * [`model`]: which CPU tables to use (`--cpu`, the recording, this machine's cpuinfo);
//!   `fit`: without `--cpu`, the tables an imported recording's events are those of.
//! * [`groups`]: the one event-group planner (used by `tma events --perf-cmd` too).
//! * `session`: a live run or the replay of a `--record` snapshot, through the same code
//!   (backend: perf_event_open, the synthetic backend, or the snapshot's readings);
//!   drill-down, `--repeat`, `--no-multiplex`, per-core / per-thread trees, software counts
//!   without a PMU.
//! * `import`: `perf stat -x,` / `-j` recordings, streamed one interval at a time.
//! * [`eval`]: readings to [`eval::IntervalReport`]s; [`render`]: text, JSON, CSV.
//! * [`sink`]: the one interface of every consumer, [`IntervalSink`]: each step starts, gets
//!   its intervals as they are evaluated, and finishes.
//!
//! Notes and warnings go to a second writer (standard error).

mod config;
pub mod crosscheck;
mod error;
pub mod eval;
pub mod event;
mod fit;
pub mod groups;
mod hybrid;
mod import;
pub mod model;
mod read_options;
pub mod render;
mod session;
pub mod sink;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

pub use config::{BackendChoice, Input, LiveOptions, LiveTarget, Outcome, RunStart, StatConfig};
pub use error::StatError;
pub use eval::{IntervalReport, MetricChoice, Request, RunInfo, StatRun};
pub use hybrid::{
    core_family, core_label as core_type_label, pick_core_type, recording_core_types, CoreTable,
};
pub use model::{select_model, CpuSource};
pub use read_options::ReadOptions;
pub use render::tree::{Format, RenderOptions};
pub use session::software::software_plan;
pub use sink::{Collect, Discard, IntervalSink, TreeOutput};

use crate::error::usage;

/// The bundled example recording behind `tma stat --example`.
pub(crate) const EXAMPLE_CSV: &[u8] =
    include_bytes!("../../../tests/fixtures/import/zen4-sha256-synthetic.csv");
/// The name the example goes by in the output.
pub(crate) const EXAMPLE_NAME: &str = "bundled-example-zen4-sha256.csv";

/// Run `tma stat`: count (or read) and evaluate, each step into `sink`; notes and warnings
/// to `notes`. The one entry point of every consumer.
pub fn run(
    cfg: &StatConfig,
    sink: &mut dyn IntervalSink,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    match &cfg.input {
        Input::Live(live) => {
            if cfg.smt.is_some() {
                return Err(usage(
                    "--smt describes an imported recording; live runs read the topology themselves",
                ));
            }
            // Checked before counting, as for a recording: without a PMU the tables are not
            // needed, and a misspelt --cpu would otherwise pass unnoticed.
            if let Some(name) = cfg.cpu.as_deref() {
                tma_catalog::by_name(name)?;
            }
            session::run_live(cfg, live, sink, notes)
        }
        Input::Example => {
            let mut c = cfg.clone();
            c.cpu.get_or_insert_with(|| "zen4".into());
            if c.level == 1 {
                c.level = 2;
            }
            writeln!(
                notes,
                "tma: bundled example: synthetic Zen 4 counts of a SHA-256 run, solved from the \
                 methodology's published percentages (not measured on this machine)"
            )?;
            import::run_perf_stat(&c, EXAMPLE_CSV, EXAMPLE_NAME, sink, notes)
        }
        Input::Import(path) => match open_import(cfg, path)? {
            ImportSource::Stream(mut input, file) => {
                // The bytes already read (up to 64 KiB): enough for the first interval.
                let prefix = input.fill_buf().map_err(|source| StatError::Read {
                    path: path.clone(),
                    source,
                })?;
                let cfg = &with_cpu_of_events(cfg, prefix, &file, notes)?;
                import::run_perf_stat(cfg, input, &file, sink, notes)
            }
            ImportSource::Hybrid(bytes, file) => {
                let cfg = &with_cpu_of_events(cfg, &bytes, &file, notes)?;
                import::hybrid::run_hybrid(cfg, &bytes, &file, sink, notes)
            }
            ImportSource::Whole(FileInput::PerfStat(bytes, file)) if import::is_hybrid(&bytes) => {
                let cfg = &with_cpu_of_events(cfg, &bytes, &file, notes)?;
                import::hybrid::run_hybrid(cfg, &bytes, &file, sink, notes)
            }
            ImportSource::Whole(FileInput::PerfStat(bytes, file)) => {
                let cfg = &with_cpu_of_events(cfg, &bytes, &file, notes)?;
                import::run_perf_stat(cfg, &bytes[..], &file, sink, notes)
            }
            ImportSource::Whole(FileInput::Snapshot(snap)) => {
                session::replay(cfg, *snap, sink, notes)
            }
        },
    }
}

/// `cfg`, with the table an imported recording's events are those of as `--cpu` when it was
/// not given and this machine has no table that fits them ([`fit::cpu_of_recording`]).
fn with_cpu_of_events<'c>(
    cfg: &'c StatConfig,
    prefix: &[u8],
    file: &str,
    notes: &mut dyn Write,
) -> Result<std::borrow::Cow<'c, StatConfig>, StatError> {
    Ok(match fit::cpu_of_recording(cfg, prefix, file, notes)? {
        Some(model) => std::borrow::Cow::Owned(StatConfig {
            cpu: Some(model.key.to_string()),
            cpu_from_events: true,
            ..cfg.clone()
        }),
        None => std::borrow::Cow::Borrowed(cfg),
    })
}

/// How the samples of an [`Evaluated`] run were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleKind {
    /// One tree for the whole run.
    Whole,
    /// One tree per `-I` interval.
    Intervals,
    /// One tree per `--repeat` run.
    Repeats,
}

/// A recording evaluated in memory ([`evaluate`]): every sample's tree, nothing written.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// The header and one [`IntervalReport`] per sample.
    pub run: StatRun,
    pub samples: SampleKind,
}

/// Evaluate a recording (`cfg.input`: a `perf stat` CSV/JSON file, a `--record` snapshot, or
/// the bundled example) through the same import and replay code as [`run`], but keep every
/// sample's evaluated tree instead of writing it: the `-I` intervals, or one tree per
/// `--repeat` run of a snapshot (where `tma stat` prints their mean). Notes go to `notes`.
/// Live counting is not a recording: an error.
pub fn evaluate(cfg: &StatConfig, notes: &mut dyn Write) -> Result<Evaluated, StatError> {
    if matches!(cfg.input, Input::Live(_)) {
        return Err(usage(
            "evaluate reads a recording: give a perf stat file or a --record snapshot",
        ));
    }
    let mut collect = Collect::default();
    let cfg = &StatConfig {
        one_tree: true,
        ..cfg.clone()
    };
    run(cfg, &mut collect, notes)?;
    let (run, repeats) = collect.into_run()?;
    let samples = if repeats {
        SampleKind::Repeats
    } else if run.info.interval_mode {
        SampleKind::Intervals
    } else {
        SampleKind::Whole
    };
    Ok(Evaluated { run, samples })
}

/// A recording read whole, by kind.
pub(crate) enum FileInput {
    /// `perf stat` output (its bytes) and the file's name for messages.
    PerfStat(Vec<u8>, String),
    Snapshot(Box<tma_perf::snapshot::Snapshot>),
}

/// A file that starts like a JSON document: a snapshot, or (a one-line JSON start) perf
/// stat output after all.
pub(crate) fn document_input(
    cfg: &StatConfig,
    bytes: Vec<u8>,
    file: String,
) -> Result<FileInput, StatError> {
    let format = tma_perfstat::detect(&bytes).map_err(|source| StatError::Import {
        file: file.clone(),
        source,
    })?;
    if format != tma_perfstat::ImportFormat::TmaSnapshot {
        return Ok(FileInput::PerfStat(bytes, file));
    }
    if cfg.smt.is_some() {
        return Err(usage(
            "--smt is not needed with a snapshot: it records the machine's topology",
        ));
    }
    let snap = tma_perf::snapshot::read(&bytes).map_err(|source| StatError::Snapshot {
        file: file.clone(),
        source,
    })?;
    Ok(FileInput::Snapshot(Box::new(snap)))
}

/// An `--import FILE` opened for its kind: perf stat output streams from the file; a document
/// (a snapshot, or `perf stat -j` read whole to tell them apart) is in memory.
pub(crate) enum ImportSource {
    Stream(BufReader<Box<dyn Read + Send>>, String),
    /// perf stat output of both core types of a hybrid part: read whole, once per type.
    Hybrid(Vec<u8>, String),
    Whole(FileInput),
}

/// Open `--import FILE` and tell a stream of perf stat lines from a document by its first bytes.
pub(crate) fn open_import(cfg: &StatConfig, path: &Path) -> Result<ImportSource, StatError> {
    let read_err = |source| StatError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = tma_render::files::display_input(path);
    let f = tma_render::files::open_input(path).map_err(read_err)?;
    let mut input = BufReader::with_capacity(1 << 16, f);
    let prefix = input.fill_buf().map_err(read_err)?;
    if import::is_hybrid(prefix) {
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes).map_err(read_err)?;
        return Ok(ImportSource::Hybrid(bytes, file));
    }
    if !tma_perfstat::is_document(prefix) {
        return Ok(ImportSource::Stream(input, file));
    }
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes).map_err(read_err)?;
    Ok(ImportSource::Whole(document_input(cfg, bytes, file)?))
}
