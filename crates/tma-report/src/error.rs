//! The errors of `tma report`. The CLI prints them as they are (`tma: error: ...`, exit 2).

use thiserror::Error;

/// Why a report could not be made.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error("no input: give one or more tma JSON outputs, snapshots, perf stat recordings or perf.data files")]
    NoInput,
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// A JSON document of a kind the report does not draw.
    #[error(
        "{file}: a {schema:?} document; tma report draws tma.stat, tma.diff, tma.diff-profile, \
         tma.locate and tma.bench documents, tma stat --record snapshots, perf stat recordings \
         (with --cpu) and perf.data files"
    )]
    Unsupported { file: String, schema: String },
    /// A document of a known kind that does not read as that kind.
    #[error("{file}: not a valid {schema} document: {detail}")]
    Document {
        file: String,
        schema: &'static str,
        detail: String,
    },
    #[error("{file}: {schema} schema_version {found}; this tma reads versions 1 to {expected}; write it again with this tma")]
    Version {
        file: String,
        schema: &'static str,
        found: u32,
        expected: u32,
    },
    /// A recording (`perf stat` output or snapshot) that `tma stat --import` refuses.
    #[error("{}", prefixed(.file, .source))]
    Stat {
        file: String,
        source: Box<tma_stat::StatError>,
    },
    /// Neither a JSON document of ours nor perf.data, and unreadable as a `perf stat`
    /// recording either: most often a file that is none of the inputs.
    #[error("{file}: not an input tma report reads (tma stat/diff/locate/bench --json, a tma stat --record snapshot, perf stat -x, or -j output, or a perf.data file); read as a perf stat recording it fails: {}", strip(.file, .cause))]
    Unrecognized {
        file: String,
        /// Not a `source`: the message carries it (the chain would repeat it).
        cause: Box<tma_stat::StatError>,
    },
    /// A perf.data file that `tma locate --import` refuses.
    #[error("{}", prefixed(.file, .source))]
    Locate {
        file: String,
        source: Box<tma_profile::locate::LocateError>,
    },
    /// `--svg` with inputs that hold neither intervals nor a tree.
    #[error("--svg draws the timeline of intervals or a TMA tree, and no input holds one (the inputs are: {kinds})")]
    NothingToDraw { kinds: String },
    #[error("cannot draw: {0}")]
    Plot(String),
    #[error("cannot write the page: {0}")]
    Template(String),
    #[error(transparent)]
    Output(#[from] tma_render::OutputError),
}

impl From<std::io::Error> for ReportError {
    fn from(e: std::io::Error) -> Self {
        ReportError::Output(tma_render::OutputError::Io(e))
    }
}

impl ReportError {
    /// The I/O error underneath, if writing the output failed.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            ReportError::Output(r) => r.io_error(),
            _ => None,
        }
    }
}

/// `FILE: message`, unless the message names the file already.
/// The message of `e` without a leading `file: ` (the caller names the file already).
fn strip(file: &str, e: &dyn std::error::Error) -> String {
    let msg = e.to_string();
    match msg.strip_prefix(file).and_then(|m| m.strip_prefix(": ")) {
        Some(rest) => rest.to_string(),
        None => msg,
    }
}

fn prefixed(file: &str, e: &dyn std::error::Error) -> String {
    let msg = e.to_string();
    if msg.contains(file) {
        msg
    } else {
        format!("{file}: {msg}")
    }
}
