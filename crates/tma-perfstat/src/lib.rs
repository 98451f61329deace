//! Import recorded `perf stat` output: `perf stat -x<sep>` CSV and `perf stat -j` JSON, with
//! or without `-I` intervals, `-A` per-CPU rows, `--per-thread` rows and `-r` variance columns.
//!
//! Parsing is the first of two steps and needs no CPU model: it yields [`Interval`]s whose
//! [`Reading::event`](tma_perf::Reading::event) is the event spec exactly as perf printed it (`cycles`, `r1a0`,
//! `cpu/event=0x1a0,umask=0x1,cmask=6/`, `TOPDOWN.SLOTS`...). [`resolve`] then maps the specs
//! onto a model's canonical event ids.
//!
//! Conventions of the readings produced here:
//! * `value` is perf's (already multiplex-scaled) count; time events printed in `msec` /
//!   `usec` / `sec` are converted to nanoseconds, so `task-clock` has the same unit as a live
//!   reading.
//! * `counted_share` is perf's "counter running" percentage / 100; `time_running_ns` is
//!   perf's counter-running time.
//! * Non-interval data is one [`Interval`] with `start_s = end_s = 0` (perf prints no
//!   duration unless `duration_time` was counted, in which case `end_s` is that duration).
//!   Interval data: `end_s` is perf's timestamp, `start_s` the previous timestamp (0 first).
//!
//! Parsers take bytes; the caller reads the file.

mod csv;
mod error;
mod human;
mod json;
mod locale;
mod reader;
mod replay;
mod resolve;

pub use error::{ImportError, ResolveError};
pub use locale::NumberFormat;
pub use reader::{CutOff, IntervalReader};
pub use resolve::{
    aggregate, is_generic_event, resolve, split_modifiers, ResolveOutcome, Resolver, Scope,
    GENERIC_HARDWARE,
};

use tma_perf::readings::Interval;

/// What kind of recording a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// `perf stat -x<sep>` output.
    PerfCsv { separator: char },
    /// `perf stat -j` output (one JSON object per line).
    PerfJson,
    /// perf stat's human-readable output (counts with thousands separators, the counted
    /// share in parentheses, metrics after `#`).
    PerfText,
    /// A `tma stat --record` snapshot (JSON document with `"schema": "tma.snapshot"`).
    TmaSnapshot,
}

impl std::fmt::Display for ImportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportFormat::PerfCsv { separator } => write!(f, "perf stat -x{separator} CSV"),
            ImportFormat::PerfJson => f.write_str("perf stat -j JSON"),
            ImportFormat::PerfText => f.write_str("perf stat text"),
            ImportFormat::TmaSnapshot => f.write_str("tma snapshot"),
        }
    }
}

/// Which breakdown the rows of a recording carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Breakdown {
    /// One row per event (perf's default aggregation).
    #[default]
    Aggregated,
    /// `-A` / `--no-aggr`: one row per CPU ([`Reading::cpu`](tma_perf::Reading::cpu) set).
    PerCpu,
    /// `--per-thread`: one row per thread ([`Reading::tid`](tma_perf::Reading::tid) set).
    PerThread,
}

/// A parsed perf recording (before event resolution).
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub format: ImportFormat,
    /// `true` when the data came from `perf stat -I` (one [`Interval`] per timestamp).
    pub interval_mode: bool,
    pub breakdown: Breakdown,
    /// CPU named by a `# cpu: KEY` comment line, if any (tma writes it; users may add it).
    pub cpu_hint: Option<String>,
    pub intervals: Vec<Interval>,
    /// Distinct event specs in order of first appearance.
    pub events: Vec<String>,
    /// Where the recording was cut off; the interval cut was dropped.
    pub cut_off: Option<CutOff>,
}

/// Tell the format of a recording from its bytes, without parsing all of it.
pub fn detect(bytes: &[u8]) -> Result<ImportFormat, ImportError> {
    check_text(bytes)?;
    let text = std::str::from_utf8(bytes).map_err(|e| ImportError::NotUtf8 {
        line: line_of(bytes, e.valid_up_to()),
    })?;
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(ImportError::Empty);
    }
    // A JSON document with a `schema` key is one of tma's own files (the one recognizer
    // every input goes through).
    if let Some(schema) = tma_render::recognize(bytes).schema() {
        return if schema == tma_perf::snapshot::SCHEMA {
            Ok(ImportFormat::TmaSnapshot)
        } else {
            Err(ImportError::NotARecording {
                schema: schema.to_string(),
            })
        };
    }
    if is_text(text) {
        return Ok(ImportFormat::PerfText);
    }
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if l.starts_with('{') {
            return Ok(ImportFormat::PerfJson);
        }
        return Ok(ImportFormat::PerfCsv {
            separator: csv::detect_separator(l),
        });
    }
    Err(ImportError::NoData)
}

/// Lines looked at for the header of perf's human-readable output: published runs often
/// start with the command that made them, or a few lines of the program's own output.
const TEXT_HEADER_LINES: usize = 64;

/// Whether `text` is perf stat's human-readable output: its `Performance counter stats for`
/// header (or the `#  time  counts unit events` header of `-I`), or a line with the shape
/// of its counter rows (excerpts are pasted without the header), comes within the first
/// [`TEXT_HEADER_LINES`] lines, before any line that reads as a CSV or JSON row. The shape
/// decides, not the first comma: `255,351      ex_ret_brn_misp   # 0.0 %  ...` is text.
pub(crate) fn is_text(text: &str) -> bool {
    for line in text.lines().take(TEXT_HEADER_LINES) {
        let l = line.trim();
        if l.starts_with("Performance counter stats for") || human::looks_like_row(l) {
            return true;
        }
        if let Some(c) = l.strip_prefix('#') {
            let c = c.trim_start();
            if c.starts_with("time") && c.contains("counts") {
                return true;
            }
            continue;
        }
        if l.starts_with('{') {
            return false;
        }
        if !l.is_empty()
            && csv::parse_line(l, csv::detect_separator(l), 1, false).is_ok_and(|r| r.is_some())
        {
            return false;
        }
    }
    false
}

/// Whether a file that starts with `prefix` is a JSON document (one of tma's own files, such
/// as a snapshot) rather than perf stat output, judged by its first non-blank, non-comment
/// line: a lone `{` or an object with a `"schema"` key. Such files are read whole (see
/// [`detect`]); perf stat output streams through [`IntervalReader`].
pub fn is_document(prefix: &[u8]) -> bool {
    if tma_render::recognize(prefix).schema().is_some() {
        return true;
    }
    // A document whose `schema` key comes after more than the prefix holds.
    let text = String::from_utf8_lossy(prefix);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l == "{")
}

/// Parse a whole `perf stat -x<sep>` or `perf stat -j` recording into memory.
///
/// tma snapshots are not handled here (see `ImportFormat::TmaSnapshot`): the caller hands
/// those to the snapshot reader. Long recordings should stream through [`IntervalReader`].
pub fn parse(bytes: &[u8]) -> Result<Recording, ImportError> {
    if is_document(bytes) && detect(bytes)? == ImportFormat::TmaSnapshot {
        return Err(ImportError::Snapshot {
            why: "snapshots are read by the snapshot module, not the perf importer".into(),
        });
    }
    let mut reader = IntervalReader::new(bytes)?;
    let mut intervals = Vec::new();
    while let Some(iv) = reader.next_interval()? {
        intervals.push(iv);
    }
    Ok(Recording {
        format: reader.format(),
        interval_mode: reader.interval_mode(),
        breakdown: reader.breakdown(),
        cpu_hint: reader.cpu_hint().map(str::to_string),
        events: reader.events().to_vec(),
        cut_off: reader.cut_off().cloned(),
        intervals,
    })
}

/// One counter row of either format, before grouping into intervals.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub line: usize,
    pub timestamp: Option<f64>,
    /// A `summary` row of `perf stat -I --summary`.
    pub summary: bool,
    pub cpu: Option<u32>,
    pub tid: Option<u32>,
    /// The cgroup column of `perf stat -G` / `--for-each-cgroup` (`""` for an event perf
    /// counted outside any cgroup).
    pub cgroup: Option<String>,
    pub event: String,
    pub value: RowValue,
    pub unit: String,
    pub running_ns: Option<u64>,
    pub running_pct: Option<f64>,
    /// The metric perf printed on the same line.
    pub metric: Option<Metric>,
}

/// A metric value perf printed (see [`tma_perf::readings::PrintedMetric`]), before it is tied
/// to its row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metric {
    pub value: f64,
    pub unit: String,
    pub name: String,
    pub decimals: u8,
    pub line: usize,
    /// The counted share (percent) of the row above, when perf printed it at the end of
    /// this line (human-readable output puts it after the row's last metric).
    pub share: Option<f64>,
}

/// What one line of a recording holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Parsed {
    /// A count.
    Row(Row),
    /// A metric printed on a line of its own: it belongs to the row above.
    Metric(Metric),
    /// The elapsed time of a whole run (`1.003818397 seconds time elapsed`), in seconds.
    Elapsed(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RowValue {
    Count(f64),
    NotCounted,
    NotSupported,
}

/// Units perf prints between a count and its event (`0.57 msec task-clock`).
pub(crate) const UNITS: &[&str] = &[
    "msec", "usec", "nsec", "sec", "ns", "us", "ms", "Joules", "MiB", "MB", "GiB", "W",
];

/// Factor that turns a value printed in `unit` into nanoseconds (1 for non-time units).
pub(crate) fn unit_to_ns(unit: &str) -> f64 {
    match unit {
        "msec" | "ms" => 1e6,
        "usec" | "us" => 1e3,
        "sec" | "s" => 1e9,
        _ => 1.0,
    }
}

/// Reject binary data early: NUL bytes or control characters other than tab/CR/LF/FF.
fn check_text(bytes: &[u8]) -> Result<(), ImportError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ImportError::Empty);
    }
    if let Some((offset, &byte)) = bytes
        .iter()
        .enumerate()
        .take(64 * 1024)
        .find(|(_, &b)| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c))
    {
        return Err(ImportError::Binary { offset, byte });
    }
    Ok(())
}

fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pasted;
