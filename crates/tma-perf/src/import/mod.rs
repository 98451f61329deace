//! Import recorded `perf stat` output: `perf stat -x<sep>` CSV and `perf stat -j` JSON, with
//! or without `-I` intervals, `-A` per-CPU rows, `--per-thread` rows and `-r` variance columns.
//!
//! Parsing is the first of two steps and needs no CPU model: it yields [`Interval`]s whose
//! [`Reading::event`] is the event spec exactly as perf printed it (`cycles`, `r1a0`,
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
mod json;
mod resolve;

pub use error::{ImportError, ResolveError};
pub use resolve::{aggregate, resolve, ResolveOutcome};

use crate::readings::{Interval, Reading, ReadingStatus};

/// What kind of recording a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// `perf stat -x<sep>` output.
    PerfCsv { separator: char },
    /// `perf stat -j` output (one JSON object per line).
    PerfJson,
    /// A `tma stat --record` snapshot (JSON document with `"schema": "tma.snapshot"`).
    TmaSnapshot,
}

impl std::fmt::Display for ImportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportFormat::PerfCsv { separator } => write!(f, "perf stat -x{separator} CSV"),
            ImportFormat::PerfJson => f.write_str("perf stat -j JSON"),
            ImportFormat::TmaSnapshot => f.write_str("tma snapshot"),
        }
    }
}

/// Which breakdown the rows of a recording carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakdown {
    /// One row per event (perf's default aggregation).
    Aggregated,
    /// `-A` / `--no-aggr`: one row per CPU ([`Reading::cpu`] set).
    PerCpu,
    /// `--per-thread`: one row per thread ([`Reading::tid`] set).
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
    if trimmed.starts_with('{') {
        // A single JSON document with a `schema` key is one of tma's own files.
        if let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(text)
        {
            if let Some(schema) = obj.get("schema").and_then(|s| s.as_str()) {
                return if schema == "tma.snapshot" {
                    Ok(ImportFormat::TmaSnapshot)
                } else {
                    Err(ImportError::NotARecording {
                        schema: schema.to_string(),
                    })
                };
            }
        }
    }
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if l.starts_with('{') {
            return Ok(ImportFormat::PerfJson);
        }
        if l.starts_with("Performance counter stats for") {
            return Err(ImportError::HumanReadable { line: i + 1 });
        }
        return Ok(ImportFormat::PerfCsv {
            separator: csv::detect_separator(l),
        });
    }
    Err(ImportError::NoData)
}

/// Parse a `perf stat -x<sep>` or `perf stat -j` recording.
///
/// tma snapshots are not handled here (see `ImportFormat::TmaSnapshot`): the caller hands
/// those to the snapshot reader.
pub fn parse(bytes: &[u8]) -> Result<Recording, ImportError> {
    let format = detect(bytes)?;
    // detect() validated UTF-8.
    let text = std::str::from_utf8(bytes).map_err(|e| ImportError::NotUtf8 {
        line: line_of(bytes, e.valid_up_to()),
    })?;
    let cpu_hint = cpu_hint(text);
    let rows = match format {
        ImportFormat::PerfCsv { separator } => csv::parse_rows(text, separator)?,
        ImportFormat::PerfJson => json::parse_rows(text)?,
        ImportFormat::TmaSnapshot => {
            return Err(ImportError::Snapshot {
                why: "snapshots are read by the snapshot module, not the perf importer".into(),
            })
        }
    };
    let mut rec = assemble(rows)?;
    rec.format = format;
    rec.cpu_hint = cpu_hint;
    Ok(rec)
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
    pub event: String,
    pub value: RowValue,
    pub unit: String,
    pub running_ns: Option<u64>,
    pub running_pct: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RowValue {
    Count(f64),
    NotCounted,
    NotSupported,
}

/// Group rows into intervals, check duplicates and interval order, build readings.
fn assemble(rows: Vec<Row>) -> Result<Recording, ImportError> {
    let Some(first) = rows.first() else {
        return Err(ImportError::NoData);
    };
    let interval_mode = first.timestamp.is_some() || first.summary;
    let breakdown = if first.cpu.is_some() {
        Breakdown::PerCpu
    } else if first.tid.is_some() {
        Breakdown::PerThread
    } else {
        Breakdown::Aggregated
    };
    let mut intervals: Vec<Interval> = Vec::new();
    let mut events: Vec<String> = Vec::new();
    let mut event_index: std::collections::HashMap<String, usize> = Default::default();
    // (event index, cpu, tid) -> line of first occurrence, within the current interval.
    let mut seen: std::collections::HashMap<(usize, Option<u32>, Option<u32>), usize> =
        Default::default();
    let mut current_ts: Option<f64> = None;
    let mut prev_end = 0.0f64;
    let mut duration_ns: Option<f64> = None;
    let mut in_summary = false;
    for row in rows {
        // `perf stat -I --summary` ends with whole-run rows (`summary,...` in CSV, rows
        // without `interval` in JSON or with --no-csv-summary): the intervals already hold
        // the data, so they are skipped.
        if interval_mode && (row.summary || row.timestamp.is_none()) {
            in_summary = true;
            continue;
        }
        if row.summary || row.timestamp.is_some() != interval_mode || in_summary {
            return Err(ImportError::MixedIntervals { line: row.line });
        }
        let new_interval = match (row.timestamp, current_ts) {
            (Some(t), Some(c)) => t != c,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if new_interval {
            if let (Some(t), Some(c)) = (row.timestamp, current_ts) {
                if t < c {
                    return Err(ImportError::IntervalOrder {
                        line: row.line,
                        time: t,
                        previous: c,
                    });
                }
            }
            let end = row.timestamp.unwrap_or(0.0);
            intervals.push(Interval {
                start_s: if interval_mode { prev_end } else { 0.0 },
                end_s: end,
                readings: Vec::new(),
            });
            prev_end = end;
            current_ts = Some(row.timestamp.unwrap_or(0.0));
            seen.clear();
        }
        let idx = match event_index.get(row.event.as_str()) {
            Some(&i) => i,
            None => {
                event_index.insert(row.event.clone(), events.len());
                events.push(row.event.clone());
                events.len() - 1
            }
        };
        let key = (idx, row.cpu, row.tid);
        if let Some(&first_line) = seen.get(&key) {
            return Err(ImportError::Duplicate {
                line: row.line,
                event: row.event,
                first_line,
            });
        }
        seen.insert(key, row.line);
        let scale = unit_to_ns(&row.unit);
        let is_duration = row.event == "duration_time";
        let mut reading = match row.value {
            RowValue::Count(v) => Reading::from_scaled(row.event, v * scale, row.running_pct),
            RowValue::NotCounted => Reading::missing(row.event, ReadingStatus::NotCounted),
            RowValue::NotSupported => Reading::missing(row.event, ReadingStatus::NotSupported),
        };
        reading.time_running_ns = row.running_ns;
        if row.running_pct.is_none() && reading.value.is_some() {
            // perf did not say how long the event was counted.
            reading.counted_share = None;
        }
        reading.cpu = row.cpu;
        reading.tid = row.tid;
        if !interval_mode && is_duration && row.cpu.is_none() {
            duration_ns = reading.value;
        }
        // `intervals` is non-empty: the first row always opens one.
        if let Some(iv) = intervals.last_mut() {
            iv.readings.push(reading);
        }
    }
    if let (false, Some(ns), Some(iv)) = (interval_mode, duration_ns, intervals.first_mut()) {
        iv.end_s = ns / 1e9;
    }
    Ok(Recording {
        format: ImportFormat::PerfJson,
        interval_mode,
        breakdown,
        cpu_hint: None,
        intervals,
        events,
    })
}

/// Factor that turns a value printed in `unit` into nanoseconds (1 for non-time units).
fn unit_to_ns(unit: &str) -> f64 {
    match unit {
        "msec" | "ms" => 1e6,
        "usec" | "us" => 1e3,
        "sec" | "s" => 1e9,
        _ => 1.0,
    }
}

/// `# cpu: KEY` metadata comment.
fn cpu_hint(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix('#'))
        .filter_map(|l| l.trim().strip_prefix("cpu:"))
        .map(|k| k.trim().to_string())
        .find(|k| !k.is_empty())
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
