//! What a run is asked to do ([`StatConfig`]: the input, live or a recording, and how to
//! read and print it) and what it gives back ([`Outcome`], [`RunStart`]).

use std::ffi::OsString;
use std::path::PathBuf;

use tma_host::Host;
use tma_metrics::Bottleneck;
use tma_perf::backend::{Ending, Synthetic};

use crate::RenderOptions;

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
    /// measure (refused by [`run`](crate::run)). The arguments are OS strings, passed to exec as given.
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
    /// `cpu` was not given but chosen by [`run`](crate::run) from an imported recording's events (its
    /// header says so): set by [`run`](crate::run) itself, `false` in a configuration made by a caller.
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
    /// [`evaluate`](crate::evaluate) sets it: diff and report compare one tree.
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
