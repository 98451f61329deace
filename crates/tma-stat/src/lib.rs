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

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

pub use error::StatError;
pub use eval::{IntervalReport, MetricChoice, Request, RunInfo, StatRun};
pub use hybrid::{
    core_family, core_label as core_type_label, pick_core_type, recording_core_types, CoreTable,
};
pub use model::{select_model, CpuSource};
pub use read_options::ReadOptions;
pub use session::software::software_plan;
pub use render::tree::{Format, RenderOptions};
pub use sink::{Collect, Discard, IntervalSink, TreeOutput};
use tma_host::Host;
use tma_metrics::Bottleneck;
use tma_perf::backend::{Ending, Synthetic};

use crate::error::usage;

/// What to analyse: count live, or read a recording. Live settings exist only with
/// [`Input::Live`], so a recording cannot be given a target, an interval or `--record`.
// One config per run: the size of the live variant costs nothing, and a plain value keeps
// building and matching it simple.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Count live: the target and how.
    Live(LiveOptions),
    /// Read a recording: `perf stat -x,` CSV, `perf stat -j` JSON or a `tma stat --record`
    /// snapshot.
    Import(PathBuf),
    /// The bundled example recording (synthetic Zen 4 counts of a SHA-256 run).
    Example,
}

impl Default for Input {
    fn default() -> Self {
        Input::Live(LiveOptions::default())
    }
}

/// Where live counts come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum BackendChoice {
    /// perf_event_open.
    #[default]
    Live,
    /// Chosen counts (tests and demonstrations of the hardware paths without a PMU).
    Synthetic(Synthetic),
}

/// What a live run counts: one target, so that combinations that mean nothing (a pid and a
/// cgroup, threads and a CPU list) cannot be written.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveTarget {
    /// Launch this command (argv) and count it, its threads and children. Empty: nothing to
    /// measure (refused by [`run`]). The arguments are OS strings, passed to exec as given.
    Command(Vec<OsString>),
    /// Existing processes, all their threads (`-p`).
    Pids(Vec<u32>),
    /// Existing threads (`-t`).
    Tids(Vec<u32>),
    /// Every task on these CPUs (`-a`; `-C 0-3,8`: only those): until `command` exits when
    /// one is given (`perf stat -a -- sleep 10`), else for `--duration` or until Ctrl-C.
    System {
        cpus: Option<String>,
        command: Option<Vec<OsString>>,
    },
    /// `-G`: the tasks of these cgroups (v2 directories: absolute, or relative to the cgroup2
    /// mount), on every CPU, in perf_event's cgroup mode; summed into one tree.
    Cgroups(Vec<PathBuf>),
}

impl Default for LiveTarget {
    /// No command: nothing to measure until one is set.
    fn default() -> Self {
        LiveTarget::Command(Vec::new())
    }
}

impl LiveTarget {
    /// Every CPU, until --duration or Ctrl-C (`-a`).
    pub fn all_cpus() -> Self {
        LiveTarget::System {
            cpus: None,
            command: None,
        }
    }

    /// The command launched (alone, or bounding a system-wide run).
    pub fn command(&self) -> Option<&[OsString]> {
        match self {
            LiveTarget::Command(argv)
            | LiveTarget::System {
                command: Some(argv),
                ..
            } if !argv.is_empty() => Some(argv),
            _ => None,
        }
    }
}

/// The settings of live counting (ignored for imports, which refuse them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveOptions {
    /// What to count.
    pub target: LiveTarget,
    /// `-I MS`.
    pub interval_ms: Option<u64>,
    pub per_core: bool,
    pub per_thread: bool,
    /// Save a snapshot of the raw readings here.
    pub record: Option<PathBuf>,
    /// Run the target once per counter group.
    pub no_multiplex: bool,
    /// Run the target N times and average.
    pub repeat: Option<u32>,
    /// Measure level 1, then descend into the bottleneck one level per run.
    pub drilldown: bool,
    /// Stop after this many seconds.
    pub duration_s: Option<f64>,
    /// Extra events (`-e`).
    pub events: Vec<String>,
    pub backend: BackendChoice,
    /// Where the launched command's stdout goes (`Null` for a silent preliminary pass).
    pub command_stdout: tma_perf::process::CommandStdout,
    /// `--cputype TYPE`: on a hybrid part, count this core type only (`core`, `atom`, a
    /// PMU name); else every core type in one run.
    pub cputype: Option<String>,
}

/// Everything `tma stat` needs; no clap, no environment.
#[derive(Debug, Clone, PartialEq)]
pub struct StatConfig {
    pub input: Input,
    /// CPU model name (`--cpu`).
    pub cpu: Option<String>,
    /// `cpu` was not given but chosen by [`run`] from an imported recording's events (its
    /// header says so): set by [`run`] itself, `false` in a configuration made by a caller.
    pub cpu_from_events: bool,
    /// Deepest tree level.
    pub level: u8,
    /// Only these nodes and their subtrees.
    pub nodes: Vec<String>,
    /// Whether SMT was on where an imported perf stat file was recorded.
    pub smt: Option<bool>,
    /// Imports: refuse a `perf stat` recording with events the model's tables do not know (or
    /// one event twice) instead of ignoring them with a note (`--strict`).
    pub strict: bool,
    /// `-m/--metrics`: `None` = no helper metrics, `Some([])` = the default set, else
    /// metric names, groups or `all` (see [`tma_metrics::select_metrics`]).
    pub metrics: Option<Vec<String>>,
    /// `-M`: `perf stat -M` group names (`TopdownL2`, `PipelineL1`, `Summary`...).
    pub metric_groups: Vec<String>,
    /// `-B/--bottlenecks`: the `Bottleneck_*` costs as a ranked list.
    pub bottlenecks: bool,
    pub render: RenderOptions,
    /// The `/sys` and `/proc` roots; this machine's CPU is read from its `cpuinfo`.
    pub host: Host,
    /// The command line a `--record` snapshot stores.
    pub command_line: Vec<String>,
    /// A recording of both core types of a hybrid part gives one tree: the core type of the
    /// chosen table (`--cpu adl`: the P-cores, `adl-e`: the E-cores), not one per core type.
    /// [`evaluate`] sets it: diff and report compare one tree.
    pub one_tree: bool,
}

impl Default for StatConfig {
    fn default() -> Self {
        StatConfig {
            input: Input::default(),
            cpu: None,
            cpu_from_events: false,
            level: 1,
            nodes: Vec::new(),
            smt: None,
            strict: false,
            metrics: None,
            metric_groups: Vec::new(),
            bottlenecks: false,
            render: RenderOptions::default(),
            host: Host::system(),
            command_line: Vec::new(),
            one_tree: false,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// How the counted target ended (live runs); `None` for imports and replays.
    pub ending: Option<Ending>,
    /// The bottleneck of the last tree written (the last drill-down step, the last
    /// interval); `None` without hardware counters.
    pub bottleneck: Option<Bottleneck>,
}

impl Outcome {
    /// The exit status `tma stat` ends with: the command's own (128+N when killed by signal
    /// N, 130 after Ctrl-C), 0 otherwise.
    pub fn exit_status(&self) -> u8 {
        match self.ending {
            Some(Ending::Exited(c)) => tma_perf::process::shell_status(Some(c), None),
            Some(Ending::Signaled(s)) => tma_perf::process::shell_status(None, Some(s)),
            Some(Ending::Interrupted) => 130,
            Some(Ending::Duration | Ending::TargetsExited) | None => 0,
        }
    }
}

/// The bundled example recording behind `tma stat --example`.
pub(crate) const EXAMPLE_CSV: &[u8] =
    include_bytes!("../../../tests/fixtures/import/zen4-sha256-synthetic.csv");
/// The name the example goes by in the output.
pub(crate) const EXAMPLE_NAME: &str = "bundled-example-zen4-sha256.csv";

/// One run of the counted target about to start (live counting only), for a progress
/// display: the caller decides whether and how to show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunStart {
    /// The drill-down step, from 0 (always 0 without `--drilldown`).
    pub step: u32,
    /// This run's number within the step, from 1.
    pub run: usize,
    /// The runs of the step: `--repeat` N times the counter groups run one at a time with
    /// `--no-multiplex` (1 each otherwise).
    pub runs: usize,
}

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

impl StatConfig {
    /// The live settings, when counting live.
    pub fn live(&self) -> Option<&LiveOptions> {
        match &self.input {
            Input::Live(l) => Some(l),
            _ => None,
        }
    }
}

impl LiveOptions {
    /// The options of live counting that are set, as `tma stat` spells them (a front end
    /// that reads a recording refuses them by name).
    pub fn flags_set(&self) -> Vec<&'static str> {
        let a = self;
        let mut set_flags: Vec<&'static str> = Vec::new();
        match &a.target {
            LiveTarget::Command(argv) if argv.is_empty() => {}
            LiveTarget::Command(_) => set_flags.push("-- CMD"),
            LiveTarget::Pids(_) => set_flags.push("-p"),
            LiveTarget::Tids(_) => set_flags.push("-t"),
            LiveTarget::System { cpus, command } => {
                set_flags.push(if cpus.is_some() { "-C" } else { "-a" });
                if command.is_some() {
                    set_flags.push("-- CMD");
                }
            }
            LiveTarget::Cgroups(_) => set_flags.push("-G"),
        }
        for (set, name) in [
            (a.interval_ms.is_some(), "-I"),
            (a.per_core, "--per-core"),
            (a.per_thread, "--per-thread"),
            (a.record.is_some(), "--record"),
            (a.no_multiplex, "--no-multiplex"),
            (a.repeat.is_some(), "--repeat"),
            (a.drilldown, "--drilldown"),
            (a.duration_s.is_some(), "--duration"),
            (!a.events.is_empty(), "-e"),
            (a.cputype.is_some(), "--cputype"),
        ] {
            if set {
                set_flags.push(name);
            }
        }
        set_flags
    }
}
