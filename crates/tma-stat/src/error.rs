//! The errors of `tma stat`. Every message says what was wrong and what to do; the CLI prints
//! them as they are (`tma: error: ...`, exit status 2).

use std::path::PathBuf;

use thiserror::Error;

/// Why a `tma stat` run could not be done.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StatError {
    /// A combination of settings that cannot work (the message names the flags).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Catalog(#[from] tma_catalog::CatalogError),
    #[error("the recording names CPU `{name}`; pass --cpu NAME: {source}")]
    RecordingCpu {
        name: String,
        source: tma_catalog::CatalogError,
    },
    #[error("cannot read {} to identify this CPU; pass --cpu NAME: {source}", path.display())]
    Cpuinfo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("this CPU has no table; pass --cpu NAME")]
    NoTable,
    /// This machine's CPU has no tables (`reason`: empty, or why, in parentheses).
    #[error(
        "no tables for this machine's CPU, {cpuid}{reason}; pass --cpu NAME ({})",
        keys()
    )]
    NoTableHere { cpuid: String, reason: String },
    /// An import without `--cpu` whose events are those of no table, where this machine
    /// gives none either (`why`).
    #[error(
        "{file}: no --cpu, {why}, and its events are those of none of tma's tables; pass \
         --cpu NAME of the CPU that recorded it ({})",
        keys()
    )]
    NoFit { file: String, why: String },
    /// An import without `--cpu` whose events fit several tables that give different trees.
    #[error(
        "{file}: no --cpu, and its events fit the tables of {}, which give different trees; \
         pass --cpu NAME of the CPU that recorded it",
        keys.join(", ")
    )]
    SeveralFits {
        file: String,
        keys: Vec<&'static str>,
    },
    #[error(transparent)]
    Metrics(#[from] tma_metrics::MetricsError),
    /// The data holds none of the events the requested tree needs.
    #[error("{0}")]
    NoEvents(String),
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Import {
        file: String,
        source: tma_perfstat::ImportError,
    },
    #[error("{file}: {source}")]
    Resolve {
        file: String,
        source: tma_perfstat::ResolveError,
    },
    #[error("{file}: {source}")]
    Snapshot {
        file: String,
        source: tma_perf::snapshot::SnapshotError,
    },
    #[error(transparent)]
    Run(#[from] tma_perf::backend::RunError),
    #[error(transparent)]
    Plan(#[from] tma_perf::plan::PlanError),
    /// An event of `-e` that no table, PMU or raw form describes.
    #[error("{0}")]
    UnknownEvent(String),
    #[error(transparent)]
    Output(#[from] tma_render::OutputError),
}

impl From<std::io::Error> for StatError {
    fn from(e: std::io::Error) -> Self {
        StatError::Output(tma_render::OutputError::Io(e))
    }
}

impl StatError {
    /// The I/O error underneath, if writing the output failed (a closed pipe is not an
    /// error for a Unix filter: the CLI checks this).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            StatError::Output(r) => r.io_error(),
            _ => None,
        }
    }
}

pub(crate) fn usage(msg: impl Into<String>) -> StatError {
    StatError::Usage(msg.into())
}

/// The keys `--cpu` takes, space-separated, a family's shared prefix said once
/// (`neoverse-n1/v1/n2`).
fn keys() -> String {
    let mut out: Vec<String> = Vec::new();
    let mut family: Option<&str> = None;
    for m in tma_catalog::models() {
        match m.key.rsplit_once('-') {
            Some((prefix, rest)) if prefix.len() > 3 => {
                if family == Some(prefix) {
                    if let Some(last) = out.last_mut() {
                        last.push('/');
                        last.push_str(rest);
                        continue;
                    }
                }
                family = Some(prefix);
                out.push(m.key.to_string());
            }
            _ => {
                family = None;
                out.push(m.key.to_string());
            }
        }
    }
    out.join(" ")
}
