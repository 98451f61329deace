//! The error of reading a perf.data file.

/// Errors from reading a perf.data file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    #[error("cannot read {path}: {err}")]
    Read { path: String, err: std::io::Error },
    #[error(
        "not a perf.data file (magic {magic:?}, expected \"PERFILE2\"); \
         record one with `perf record` or `tma locate --record`"
    )]
    BadMagic { magic: String },
    #[error(
        "unsupported perf.data version 1 (magic \"PERFFILE\", perf before 2.6.38); \
         re-record it with a current perf"
    )]
    Version1,
    #[error("perf.data is truncated: {what} ends at byte {end}, but the file has {len} bytes")]
    Truncated { what: String, end: u64, len: u64 },
    #[error("the file has no event {want:?}; it has: {have}")]
    NoSuchEvent { want: String, have: String },
    #[error("perf.data header is inconsistent: {0}")]
    BadHeader(String),
    #[error("cannot parse perf.data: {0}")]
    Parse(String),
}
