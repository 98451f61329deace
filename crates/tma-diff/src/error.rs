//! The errors of `tma diff`. The CLI prints them as they are (`tma: error: ...`, exit status 2).

use thiserror::Error;

/// Why two runs could not be compared.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DiffError {
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: not a tma.stat document: {detail}")]
    StatJson { file: String, detail: String },
    #[error("{}", prefixed(.file, .source))]
    Stat {
        file: String,
        source: Box<tma_stat::StatError>,
    },
    /// The two sides were measured on (or evaluated for) different CPU models.
    #[error(
        "the runs are of different CPU models: {before} ({before_key}) before, {after} \
         ({after_key}) after; a diff compares the same tree on the same CPU"
    )]
    CpuMismatch {
        before: String,
        before_key: String,
        after: String,
        after_key: String,
    },
    /// A `--fail-if` expression that does not parse (`position` counts characters from 1).
    #[error("--fail-if {expr:?}: at position {position}: {message}")]
    Gate {
        expr: String,
        position: usize,
        message: String,
    },
    /// One input is a profile and the other a TMA tree.
    #[error(
        "{profile} is a profile (perf.data or tma locate --json) but {tree} is not: tma diff \
         compares two trees or two profiles"
    )]
    Mixed { profile: String, tree: String },
    /// One input is a region document and the other is not.
    #[error(
        "{regions} holds regions (tma stat --regions --json) but {other} does not: tma diff \
         compares two region documents region by region"
    )]
    MixedRegions { regions: String, other: String },
    #[error("{file}: not a tma.stat.regions document: {detail}")]
    RegionsJson { file: String, detail: String },
    #[error("{file}: not a profile (perf.data or tma locate --json)")]
    NotProfile { file: String },
    #[error("{file}: not a tma.locate document: {detail}")]
    LocateJson { file: String, detail: String },
    /// A perf.data file that could not be read as `tma locate --import` reads it.
    #[error(transparent)]
    Locate(Box<tma_profile::locate::LocateError>),
    #[error(transparent)]
    Output(#[from] tma_render::OutputError),
}

impl From<std::io::Error> for DiffError {
    fn from(e: std::io::Error) -> Self {
        DiffError::Output(tma_render::OutputError::Io(e))
    }
}

impl DiffError {
    /// The I/O error underneath, if writing the output failed.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            DiffError::Output(r) => r.io_error(),
            _ => None,
        }
    }
}

/// `FILE: message`, unless the message names the file already.
fn prefixed(file: &str, e: &tma_stat::StatError) -> String {
    let msg = e.to_string();
    if msg.contains(file) {
        msg
    } else {
        format!("{file}: {msg}")
    }
}
