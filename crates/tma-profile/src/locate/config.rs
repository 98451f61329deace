//! What `tma locate` takes and gives: [`LocateConfig`], [`Located`], [`LocateError`].

use std::path::PathBuf;

use tma_catalog::Model;
use tma_host::Host;
use tma_perf::sampling::Rate;

use crate::choose::ChoiceError;
use crate::hotspots::{Profile, ReportOptions};
use crate::import::ImportError;
use crate::live::LiveError;

/// Errors of `tma locate`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocateError {
    /// Settings that do not go together, or are missing.
    #[error("{0}")]
    Usage(String),
    #[error("cannot import {path}")]
    Import {
        path: String,
        #[source]
        source: ImportError,
    },
    #[error(transparent)]
    Catalog(#[from] tma_catalog::CatalogError),
    #[error(transparent)]
    Choice(#[from] ChoiceError),
    #[error("the quick stat pass that finds the bottleneck failed (pass --node NAME or -e EVENT)")]
    QuickStat(#[source] tma_stat::StatError),
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error(transparent)]
    Output(#[from] tma_render::OutputError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tree(#[from] crate::tree::TreeError),
}

pub(super) fn usage(m: &str) -> LocateError {
    LocateError::Usage(m.to_string())
}

/// Everything `tma locate` needs; no clap.
#[derive(Debug, Clone)]
pub struct LocateConfig {
    /// Analyse this perf.data file instead of sampling.
    pub import: Option<PathBuf>,
    /// Sample this running process.
    pub pid: Option<i32>,
    /// Sample every process on [`LocateConfig::cpus`] (`-a`), kernel code included when
    /// perf_event_paranoid allows it.
    pub system_wide: bool,
    /// With `system_wide`: only these CPUs (`-C`); `None`: all online CPUs.
    pub cpus: Option<Vec<u32>>,
    /// Sample this command (argv, the OS strings given: exec'd as they are).
    pub command: Vec<std::ffi::OsString>,
    /// Sample the locate-with event of this TMA node.
    pub node: Option<String>,
    /// Sample this event (with `--import`: show this event of the file).
    pub event: Option<String>,
    /// CPU model key (`--cpu`); else `this_cpu`.
    pub cpu: Option<String>,
    /// This machine's model tables, when the catalog knows its CPU.
    pub this_cpu: Option<&'static Model>,
    /// Stop sampling after this many seconds.
    pub duration_s: Option<f64>,
    /// `--period N` or `--freq HZ`; default: the sampler's frequency.
    pub rate: Option<Rate>,
    /// Record call chains.
    pub call_graph: bool,
    /// Keep whole call stacks in the profile (folded stacks, pprof, children). Off, only the
    /// sampled instructions are aggregated: the flat report is all that is wanted, and
    /// walking every call chain of a large perf.data is most of the work.
    pub stacks: bool,
    /// Also sample kernel code.
    pub kernel: bool,
    pub report: ReportOptions,
    /// Folded stacks will be written (adds a note without call chains).
    pub folded: bool,
    /// Write the event-choice notes to the notes writer as they arise: the report will not
    /// be read on the terminal (the text report repeats them at its end).
    pub echo_notes: bool,
    /// Also save the samples as a perf.data file.
    pub record: Option<PathBuf>,
    /// Look for binaries here (by file name) before their recorded paths.
    pub symdir: Vec<PathBuf>,
    /// Kernel symbols (a copy of a machine's /proc/kallsyms).
    pub kallsyms: Option<PathBuf>,
    /// The host's /sys and /proc roots: the core PMU, mappings, kallsyms.
    pub host: Host,
    /// Where the quick stat pass counts (perf_event_open, or chosen counts in tests).
    pub stat_backend: tma_stat::BackendChoice,
    /// `--tree`: sample a group read with every sample and give a TMA tree of this level
    /// per function ([`crate::tree`]).
    pub tree: Option<u8>,
    /// With `tree`, live: a second pass samples the bottleneck node's locate-with event
    /// (cpu-clock without a PMU), and the two estimators are compared
    /// ([`crate::estimate`]).
    pub direct: bool,
}

impl Default for LocateConfig {
    fn default() -> Self {
        LocateConfig {
            import: None,
            pid: None,
            system_wide: false,
            cpus: None,
            command: Vec::new(),
            node: None,
            event: None,
            cpu: None,
            this_cpu: None,
            duration_s: None,
            rate: None,
            call_graph: false,
            stacks: true,
            kernel: false,
            report: ReportOptions::default(),
            folded: false,
            echo_notes: false,
            record: None,
            symdir: Vec::new(),
            kallsyms: None,
            host: Host::system(),
            stat_backend: tma_stat::BackendChoice::Live,
            tree: None,
            direct: false,
        }
    }
}

/// The result of `tma locate`.
#[derive(Debug, Clone)]
pub struct Located {
    pub profile: Profile,
    /// Wall time sampled, in nanoseconds (0 for imports): the pprof duration.
    pub duration_ns: i64,
    /// The exit status to end with: the sampled command's (128+N when killed by signal N).
    pub exit_status: u8,
    /// With `--tree`: the per-function trees.
    pub tree: Option<crate::tree::TreeProfile>,
    /// With `--tree` and a tree (a PMU, or `--cpu` for an import): each function's
    /// dominant level-1 node, the colours of the TMA flame graph.
    pub dominant: Option<std::collections::BTreeMap<String, crate::tree::Dominant>>,
}
