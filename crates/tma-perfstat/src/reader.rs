//! The streaming reader: one line in, at most one [`Interval`] out, so a recording of any
//! length is read in constant memory (one line buffer and the interval being assembled).

use std::collections::HashMap;
use std::io::BufRead;

use super::human::Text;
use super::locale::{Evidence, NumberFormat};
use super::replay::Replay;
use super::{
    csv, json, unit_to_ns, Breakdown, ImportError, ImportFormat, Metric, Parsed, Row, RowValue,
    TEXT_HEADER_LINES,
};
use tma_perf::readings::{Interval, PrintedMetric, Reading, ReadingStatus};

/// Control characters are looked for in this many leading bytes: enough to reject perf.data
/// or an executable at once without inspecting every byte of a large text file.
const BINARY_CHECK_BYTES: usize = 64 * 1024;

/// How much of perf's human-readable output is read ahead to decide how it wrote its
/// numbers: a pasted run whole, the first thousands of lines of a long `-I` one.
const LOCALE_LOOK_AHEAD: usize = 1 << 20;

/// Reads a `perf stat -x<sep>` or `perf stat -j` recording one interval at a time.
///
/// [`IntervalReader::new`] reads up to the first counter line, which fixes the format, whether
/// the data has `-I` intervals and which breakdown (`-A`, `--per-thread`) the rows carry.
/// [`IntervalReader::next_interval`] then returns each interval once its last row has been
/// read; errors name the line as [`parse`](super::parse) does.
pub struct IntervalReader<R> {
    input: Replay<R>,
    line: Vec<u8>,
    lineno: usize,
    offset: usize,
    format: ImportFormat,
    /// CSV: the file has no counter-running columns (decided on the first row).
    short: bool,
    /// Human-readable output: its decimal point.
    text: Text,
    cpu_hint: Option<String>,
    first: Option<Row>,
    asm: Assembler,
    done: bool,
    /// The last line read ended with a newline.
    terminated: bool,
    /// The file's last line had no line end and was read (it parsed): perf may have been
    /// stopped while writing it.
    unterminated: Option<usize>,
    cut: Option<CutOff>,
}

/// The recording ends in the middle of an interval (perf was stopped while writing): the
/// interval being read was dropped, and the complete ones before it were returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CutOff {
    /// The line that was cut (1-based); for a cut between lines, the last line read.
    pub line: usize,
    /// End of the dropped interval (seconds), with `-I` data.
    pub interval_end_s: Option<f64>,
    /// The dropped interval had this many rows of the previous interval's (cut between lines).
    pub rows: Option<(usize, usize)>,
}

impl std::fmt::Display for CutOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.rows {
            Some((have, want)) => write!(
                f,
                "the recording ends after line {} with {have} of the {want} rows of its last \
                 interval (perf was stopped while writing?)",
                self.line
            )?,
            None => write!(
                f,
                "the last line (line {}) is cut off (perf was stopped while writing?)",
                self.line
            )?,
        }
        match self.interval_end_s {
            Some(t) => write!(f, "; that interval (ending at {t} s) was dropped"),
            None => write!(f, "; that interval was dropped"),
        }
    }
}

impl<R: BufRead> IntervalReader<R> {
    /// Read up to the first counter line.
    pub fn new(input: R) -> Result<Self, ImportError> {
        let mut input = Replay::new(input);
        let mut line = Vec::new();
        let mut lineno = 0;
        let mut offset = 0;
        let mut cpu_hint = None;
        let mut any_text = false;
        let mut text: Option<Text> = None;
        // A line that is neither CSV nor JSON before any row: an error, unless the header of
        // perf's human-readable output follows within a few lines (published runs often
        // start with the command that made them).
        let mut first_error: Option<ImportError> = None;
        loop {
            let mut terminated = true;
            let Some(raw) = next_line(
                &mut input,
                &mut line,
                &mut lineno,
                &mut offset,
                &mut terminated,
            )?
            else {
                return Err(match first_error {
                    Some(e) => e,
                    None if any_text => ImportError::NoData,
                    None => ImportError::Empty,
                });
            };
            let t = raw.trim();
            if t.is_empty() {
                continue;
            }
            any_text = true;
            if text.is_none() && super::is_text(t) {
                let mut evidence = Evidence::default();
                evidence.line(t);
                let ahead = input
                    .look_ahead(LOCALE_LOOK_AHEAD)
                    .map_err(|e| ImportError::Io { why: e.to_string() })?;
                for l in ahead.split(|&b| b == b'\n') {
                    evidence.line(&String::from_utf8_lossy(l));
                }
                text = Some(Text::new(evidence.decide()));
            }
            if let Some(tx) = text.as_mut() {
                let parsed = tx.parse_line(raw, lineno)?;
                let row = match parsed {
                    Some(Parsed::Row(row)) => row,
                    _ => continue,
                };
                let text = std::mem::take(tx);
                let mut reader = Self::placeholder(
                    input,
                    line,
                    lineno,
                    offset,
                    ImportFormat::PerfText,
                    false,
                    cpu_hint,
                );
                reader.text = text;
                reader.unterminated = (!terminated).then_some(lineno);
                return Ok(reader.begin(row));
            }
            if is_toplev_header(t) {
                return Err(ImportError::Toplev { line: lineno });
            }
            if let Some(c) = t.strip_prefix('#') {
                if let Some(key) = c.trim().strip_prefix("cpu:").map(str::trim) {
                    if cpu_hint.is_none() && !key.is_empty() {
                        cpu_hint = Some(key.to_string());
                    }
                }
                continue;
            }
            let attempt = if t.starts_with('{') {
                json::parse_line(t, lineno).map(|p| (ImportFormat::PerfJson, false, p))
            } else {
                let separator = csv::detect_separator(t);
                let raw = raw.trim_end_matches('\r');
                // A file whose first row has no counter-running columns (`value,unit,event`
                // only) is read in that short layout; otherwise a short row is truncated.
                match csv::parse_line(raw, separator, lineno, false) {
                    Err(e @ ImportError::Truncated { .. }) => {
                        match csv::parse_line(raw, separator, lineno, true) {
                            Ok(r) => Ok((ImportFormat::PerfCsv { separator }, true, r)),
                            Err(_) => Err(e),
                        }
                    }
                    r => r.map(|r| (ImportFormat::PerfCsv { separator }, false, r)),
                }
            };
            let (format, short, parsed) = match attempt {
                Ok(a) => a,
                Err(e) => {
                    let short = match &e {
                        ImportError::Truncated { .. } => true,
                        ImportError::BadJson { why, .. } => why.contains("ends early"),
                        _ => false,
                    };
                    if !terminated && short && first_error.is_none() {
                        // The file's one counter line is cut short.
                        return Err(ImportError::CutOff { line: lineno });
                    }
                    if lineno > TEXT_HEADER_LINES {
                        return Err(first_error.unwrap_or(e));
                    }
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            if let Some(e) = first_error {
                return Err(e);
            }
            let mut reader =
                Self::placeholder(input, line, lineno, offset, format, short, cpu_hint);
            reader.unterminated = (!terminated).then_some(lineno);
            // A metric-only first line fixes the format and layout but opens no interval.
            let row = match parsed {
                Some(Parsed::Row(row)) => row,
                _ => reader.read_row()?.ok_or(ImportError::NoData)?,
            };
            return Ok(reader.begin(row));
        }
    }

    /// The reader with its first counter row, which fixes the interval mode and breakdown.
    fn begin(mut self, row: Row) -> Self {
        self.asm = Assembler::for_first(&row);
        self.first = Some(row);
        self
    }

    fn placeholder(
        input: Replay<R>,
        line: Vec<u8>,
        lineno: usize,
        offset: usize,
        format: ImportFormat,
        short: bool,
        cpu_hint: Option<String>,
    ) -> Self {
        IntervalReader {
            input,
            line,
            lineno,
            offset,
            format,
            short,
            text: Text::default(),
            cpu_hint,
            first: None,
            asm: Assembler::default(),
            done: false,
            terminated: true,
            unterminated: None,
            cut: None,
        }
    }

    pub fn format(&self) -> ImportFormat {
        self.format
    }

    /// How perf's human-readable output wrote its numbers, as decided from the file
    /// (`None` for CSV and JSON, which perf writes in the C locale).
    pub fn number_format(&self) -> Option<NumberFormat> {
        (self.format == ImportFormat::PerfText).then_some(self.text.format)
    }

    /// `true` when the data came from `perf stat -I` (one [`Interval`] per timestamp).
    pub fn interval_mode(&self) -> bool {
        self.asm.interval_mode
    }

    pub fn breakdown(&self) -> Breakdown {
        self.asm.breakdown
    }

    /// The cgroups of a `perf stat -G` / `--for-each-cgroup` recording, seen so far (all of
    /// them once the first interval is read; `""` for events counted outside any cgroup).
    /// Their rows are summed: each interval holds the tree of the cgroups together.
    pub fn cgroups(&self) -> &[String] {
        &self.asm.cgroups
    }

    /// Whether the recording has perf's cgroup column (known from its first row).
    pub fn has_cgroups(&self) -> bool {
        !self.asm.cgroups.is_empty() || self.first.as_ref().is_some_and(|r| r.cgroup.is_some())
    }

    /// CPU named by a `# cpu: KEY` comment before the first counter line, if any.
    pub fn cpu_hint(&self) -> Option<&str> {
        self.cpu_hint.as_deref()
    }

    /// Distinct event specs read so far, in order of first appearance.
    pub fn events(&self) -> &[String] {
        &self.asm.events
    }

    /// The last line, when the file ends without a line end after it and the line still
    /// read as a row (perf writes one after every line: the recording may be cut there).
    pub fn unterminated_end(&self) -> Option<usize> {
        self.unterminated
    }

    /// Where the recording was cut off, once [`next_interval`](Self::next_interval) has
    /// returned `None`: the interval that was being read then was dropped.
    pub fn cut_off(&self) -> Option<&CutOff> {
        self.cut.as_ref()
    }

    /// The next complete interval, `None` at the end of the recording. A recording whose
    /// last interval was cut off ends with the interval before it (see
    /// [`cut_off`](Self::cut_off)); one with no complete interval is an error.
    pub fn next_interval(&mut self) -> Result<Option<Interval>, ImportError> {
        if self.done {
            return Ok(None);
        }
        loop {
            let row = match self.first.take() {
                Some(r) => Some(r),
                None => self.read_row()?,
            };
            let Some(row) = row else {
                self.done = true;
                if self.cut.is_none() {
                    self.cut = self.asm.short_last(self.lineno);
                }
                if let Some(cut) = self.cut.as_mut() {
                    // `interval_end_s` holds the cut line's own time stamp, when it was whole.
                    let current = self.asm.current_ts.filter(|_| self.asm.interval_mode);
                    if current.is_some() && cut.interval_end_s.is_some_and(|t| Some(t) != current) {
                        // The cut line opened the next interval: the current one is whole.
                        return self.asm.finish();
                    }
                    cut.interval_end_s = current;
                    // No interval before the cut one (or a whole-run recording): nothing to use.
                    if self.asm.previous_rows.is_empty() || !self.asm.interval_mode {
                        return Err(ImportError::CutOff { line: cut.line });
                    }
                    return Ok(None);
                }
                return self.asm.finish();
            };
            if let Some(iv) = self.asm.push(row)? {
                return Ok(Some(iv));
            }
        }
    }

    /// The next counter row in the layout fixed by the first row.
    fn read_row(&mut self) -> Result<Option<Row>, ImportError> {
        loop {
            let Some(text) = next_line(
                &mut self.input,
                &mut self.line,
                &mut self.lineno,
                &mut self.offset,
                &mut self.terminated,
            )?
            else {
                return Ok(None);
            };
            // Only the last line of a file can lack its newline.
            let last_unterminated = !self.terminated;
            let t = text.trim();
            let parsed = match self.format {
                ImportFormat::PerfText => self.text.parse_line(text, self.lineno),
                _ if t.is_empty() || t.starts_with('#') => continue,
                ImportFormat::PerfCsv { separator } => csv::parse_line(
                    text.trim_end_matches('\r'),
                    separator,
                    self.lineno,
                    self.short,
                ),
                _ => json::parse_line(t, self.lineno),
            };
            let row = match parsed {
                Ok(row) => {
                    if last_unterminated {
                        self.unterminated = Some(self.lineno);
                    }
                    row
                }
                Err(_) if last_unterminated => {
                    // perf was stopped in the middle of this line; its time stamp, when
                    // whole, says which interval it belonged to.
                    let stamp = match self.format {
                        _ if !self.asm.interval_mode => None,
                        ImportFormat::PerfCsv { separator } => t
                            .split_once(separator)
                            .and_then(|(ts, _)| ts.trim().parse().ok()),
                        ImportFormat::PerfText => t
                            .split_whitespace()
                            .next()
                            .and_then(|ts| ts.replace(',', ".").parse().ok()),
                        _ => t
                            .split_once("\"interval\"")
                            .and_then(|(_, rest)| rest.trim_start().strip_prefix(':'))
                            .and_then(|rest| rest.split_once(','))
                            .and_then(|(ts, _)| ts.trim().parse().ok()),
                    };
                    self.cut = Some(CutOff {
                        line: self.lineno,
                        interval_end_s: stamp,
                        rows: None,
                    });
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            match row {
                Some(Parsed::Row(row)) => return Ok(Some(row)),
                Some(Parsed::Metric(m)) => self.asm.add_metric(m),
                Some(Parsed::Elapsed(s)) => self.asm.elapsed_s = Some(s),
                None => {}
            }
        }
    }
}

/// The header of toplev's `-x,` output: `Area,Value,Unit,Description,...`, after
/// `Timestamp,CPUs,` with `-I` and per-CPU output.
fn is_toplev_header(line: &str) -> bool {
    let fields: Vec<&str> = line.split([',', ';']).map(str::trim).collect();
    fields.windows(3).any(|w| w == ["Area", "Value", "Unit"])
}

/// Read one line into `buf` and return it as text without its line ending; `None` at the end.
/// Binary data (control characters in the leading bytes) and invalid UTF-8 are errors.
fn next_line<'b>(
    input: &mut impl BufRead,
    buf: &'b mut Vec<u8>,
    lineno: &mut usize,
    offset: &mut usize,
    terminated: &mut bool,
) -> Result<Option<&'b str>, ImportError> {
    buf.clear();
    let n = input
        .read_until(b'\n', buf)
        .map_err(|e| ImportError::Io { why: e.to_string() })?;
    if n == 0 {
        return Ok(None);
    }
    *lineno += 1;
    if *offset < BINARY_CHECK_BYTES {
        let take = (BINARY_CHECK_BYTES - *offset).min(buf.len());
        if let Some((i, &byte)) = buf[..take]
            .iter()
            .enumerate()
            .find(|(_, &b)| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c))
        {
            return Err(ImportError::Binary {
                offset: *offset + i,
                byte,
            });
        }
    }
    *offset += n;
    *terminated = buf.last() == Some(&b'\n');
    if *terminated {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    std::str::from_utf8(buf)
        .map(Some)
        .map_err(|_| ImportError::NotUtf8 { line: *lineno })
}

/// Groups rows into intervals: checks duplicates and interval order, builds readings.
#[derive(Default)]
struct Assembler {
    interval_mode: bool,
    breakdown: Breakdown,
    current: Option<Interval>,
    current_ts: Option<f64>,
    prev_end: f64,
    duration_ns: Option<f64>,
    in_summary: bool,
    events: Vec<String>,
    event_index: HashMap<String, usize>,
    /// Keys and lines of the rows of the current interval, and of the previous one.
    rows: Vec<(Key, usize)>,
    previous_rows: Vec<(Key, usize)>,
    /// The current interval repeats the previous one's rows so far (perf prints the same
    /// events in the same order every interval): no lookup or duplicate check is needed.
    /// Once a row differs, every key goes through `seen`.
    repeating: bool,
    /// key -> line of first occurrence, within the current interval (when not repeating).
    seen: HashMap<Key, usize>,
    /// The recording counts an event more than once (`perf stat -M` repeats the events
    /// metrics share in each metric's group): each interval's groups are told at its end.
    repeats: bool,
    /// The current interval counts a generic hardware event (`cycles`): with perf's metrics
    /// printed, it may be a second copy of a vendor-named one (perf's older metrics read
    /// `cycles` in one group and `CPU_CLK_UNHALTED.THREAD` in another), so groups are told.
    aliases: bool,
    /// The elapsed time perf printed after a whole run (human-readable output).
    elapsed_s: Option<f64>,
    /// `perf stat -G` / `--for-each-cgroup`: the cgroups named, in order of appearance;
    /// the cgroup of each reading of the current interval; and whether the cgroups of the
    /// events were checked (on the first interval).
    cgroups: Vec<String>,
    reading_cgroups: Vec<Option<u32>>,
    cgroups_checked: bool,
}

/// (event index, cpu, tid, cgroup index): what must be unique within an interval.
type Key = (usize, Option<u32>, Option<u32>, Option<u32>);

impl Assembler {
    /// The first row decides between interval and whole-run data and the breakdown.
    fn for_first(first: &Row) -> Self {
        Assembler {
            interval_mode: first.timestamp.is_some() || first.summary,
            breakdown: if first.cpu.is_some() {
                Breakdown::PerCpu
            } else if first.tid.is_some() {
                Breakdown::PerThread
            } else {
                Breakdown::Aggregated
            },
            ..Default::default()
        }
    }

    /// Add a row; returns the previous interval when this row opens a new one.
    fn push(&mut self, row: Row) -> Result<Option<Interval>, ImportError> {
        if let RowValue::Count(v) = row.value {
            // perf's counts are u64 (time events a fraction of one); a count outside that
            // range is a damaged file, and a tree computed from it would be silently wrong.
            if !(0.0..=u64::MAX as f64).contains(&v) {
                return Err(ImportError::ImpossibleCount {
                    line: row.line,
                    event: row.event,
                    value: format!("{v}"),
                });
            }
        }
        // `perf stat -I --summary` ends with whole-run rows (`summary,...` in CSV, rows
        // without `interval` in JSON or with --no-csv-summary): the intervals already hold
        // the data, so they are skipped.
        if self.interval_mode && (row.summary || row.timestamp.is_none()) {
            self.in_summary = true;
            return Ok(None);
        }
        if row.summary || row.timestamp.is_some() != self.interval_mode || self.in_summary {
            return Err(ImportError::MixedIntervals { line: row.line });
        }
        let new_interval = match (row.timestamp, self.current_ts) {
            (Some(t), Some(c)) => t != c,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        let mut done = None;
        if new_interval {
            if let (Some(t), Some(c)) = (row.timestamp, self.current_ts) {
                if t < c {
                    return Err(ImportError::IntervalOrder {
                        line: row.line,
                        time: t,
                        previous: c,
                    });
                }
            }
            let end = row.timestamp.unwrap_or(0.0);
            let capacity = self.current.as_ref().map_or(0, |iv| iv.readings.len());
            done = self.current.replace(Interval {
                start_s: if self.interval_mode {
                    self.prev_end
                } else {
                    0.0
                },
                end_s: end,
                readings: Vec::with_capacity(capacity),
                printed: Vec::new(),
            });
            if let Some(iv) = done.as_mut() {
                if self.repeats || self.aliases && !iv.printed.is_empty() {
                    assign_groups(iv, &self.rows);
                }
                self.sum_cgroups(iv, row.line)?;
            }
            // `repeats` and `aliases` stay: perf prints every interval's rows alike, and the
            // rows of the next ones take the fast path that does not look for them again.
            self.prev_end = end;
            self.current_ts = Some(end);
            self.seen.clear();
            std::mem::swap(&mut self.rows, &mut self.previous_rows);
            self.rows.clear();
            self.reading_cgroups.clear();
            self.repeating = true;
        }
        let key = self.key_of(&row)?;
        self.rows.push((key, row.line));
        self.reading_cgroups.push(key.3);
        let line = row.line;
        let mut row = row;
        // The event's name is copied only for a row that carries a metric of perf's.
        let metric = row.metric.take().map(|m| (m, row.event.clone()));
        let reading = reading_of(row);
        if let (Some((m, event)), Some(iv)) = (metric, self.current.as_mut()) {
            let at = iv.readings.len();
            iv.printed.push(printed(m, event, at));
            debug_assert_eq!(iv.printed.last().map(|p| p.line), Some(line));
        }
        if !self.interval_mode && reading.event == "duration_time" && reading.cpu.is_none() {
            self.duration_ns = reading.value;
        }
        if let Some(iv) = self.current.as_mut() {
            iv.readings.push(reading);
        }
        Ok(done)
    }

    /// The row's key, checked to be new in this interval.
    fn key_of(&mut self, row: &Row) -> Result<Key, ImportError> {
        let pos = self.rows.len();
        let cgroup =
            row.cgroup
                .as_deref()
                .map(|name| match self.cgroups.iter().position(|c| c == name) {
                    Some(i) => i as u32,
                    None => {
                        self.cgroups.push(name.to_string());
                        self.cgroups.len() as u32 - 1
                    }
                });
        if self.repeating {
            if let Some(&((idx, cpu, tid, cg), _)) = self.previous_rows.get(pos) {
                if cpu == row.cpu && tid == row.tid && cg == cgroup && self.events[idx] == row.event
                {
                    return Ok((idx, cpu, tid, cg));
                }
            }
            // The rows so far were distinct (they repeat the previous interval's).
            self.repeating = false;
            self.seen.extend(self.rows.iter().copied());
        }
        let idx = match self.event_index.get(row.event.as_str()) {
            Some(&i) => i,
            None => {
                self.event_index
                    .insert(row.event.clone(), self.events.len());
                self.events.push(row.event.clone());
                self.events.len() - 1
            }
        };
        let key = (idx, row.cpu, row.tid, cgroup);
        self.aliases |= super::resolve::is_generic_hardware(&row.event);
        match self.seen.entry(key) {
            // Counted again, in another group.
            std::collections::hash_map::Entry::Occupied(_) => self.repeats = true,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(row.line);
            }
        }
        Ok(key)
    }

    /// A metric perf printed on a line of its own: it belongs to the row above.
    fn add_metric(&mut self, m: Metric) {
        if let Some(iv) = self.current.as_mut() {
            if let Some(last) = iv.readings.len().checked_sub(1) {
                let r = &mut iv.readings[last];
                if let (Some(pct), Some(_)) = (m.share, r.value) {
                    r.counted_share = Some((pct / 100.0).clamp(0.0, 1.0));
                }
                let event = r.event.clone();
                iv.printed.push(printed(m, event, last));
            }
        }
    }

    /// The last interval (whole-run data: its end is `duration_time` when that was counted).
    /// At the end: the last `-I` interval holds fewer rows than the one before it, so the
    /// recording was cut between two lines. (Per-thread rows come and go with the threads.)
    fn short_last(&self, line: usize) -> Option<CutOff> {
        let short = self.interval_mode
            && self.breakdown != Breakdown::PerThread
            && self.current.is_some()
            && !self.previous_rows.is_empty()
            && self.rows.len() < self.previous_rows.len();
        short.then_some(CutOff {
            line,
            interval_end_s: None,
            rows: Some((self.rows.len(), self.previous_rows.len())),
        })
    }

    fn finish(&mut self) -> Result<Option<Interval>, ImportError> {
        let Some(mut iv) = self.current.take() else {
            return Ok(None);
        };
        if self.repeats || self.aliases && !iv.printed.is_empty() {
            assign_groups(&mut iv, &self.rows);
        }
        let line = self.rows.last().map_or(0, |&(_, line)| line);
        self.sum_cgroups(&mut iv, line)?;
        if !self.interval_mode {
            if let Some(s) = self.duration_ns.map(|ns| ns / 1e9).or(self.elapsed_s) {
                iv.end_s = s;
            }
        }
        Ok(Some(iv))
    }

    /// `perf stat -G` / `--for-each-cgroup` rows: each event's rows of the cgroups are
    /// summed into one reading (the tree of the cgroups together), as per-CPU rows are. The
    /// first interval is checked to count every event in the same cgroups: otherwise the
    /// sums would mix events of different cgroups into one tree. perf's printed metrics are
    /// per cgroup, so they are dropped from the sums.
    fn sum_cgroups(&mut self, iv: &mut Interval, line: usize) -> Result<(), ImportError> {
        if self.cgroups.is_empty() {
            return Ok(());
        }
        let cg = std::mem::take(&mut self.reading_cgroups);
        if !self.cgroups_checked {
            self.cgroups_checked = true;
            let mut sets: Vec<(&str, Vec<u32>)> = Vec::new();
            for (r, c) in iv.readings.iter().zip(&cg) {
                let Some(c) = *c else { continue };
                match sets.iter_mut().find(|(e, _)| *e == r.event) {
                    Some((_, v)) if !v.contains(&c) => v.push(c),
                    Some(_) => {}
                    None => sets.push((&r.event, vec![c])),
                }
            }
            let names = |v: &[u32]| {
                v.iter()
                    .map(|&i| match self.cgroups[i as usize].as_str() {
                        "" => "no cgroup".to_string(),
                        n => n.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if let Some((first, first_set)) = sets.first() {
                let mut a = first_set.clone();
                a.sort_unstable();
                for (other, set) in &sets[1..] {
                    let mut b = set.clone();
                    b.sort_unstable();
                    if a != b {
                        return Err(ImportError::MixedCgroups {
                            line,
                            counted: format!(
                                "{first} in {}; {other} in {}",
                                names(first_set),
                                names(set)
                            ),
                        });
                    }
                }
            }
        }
        if cg.iter().all(Option::is_none) {
            return Ok(());
        }
        // Sum in order of first appearance, per (event, cpu, tid, group).
        let mut out: Vec<Reading> = Vec::with_capacity(iv.readings.len());
        let mut parts: Vec<usize> = Vec::with_capacity(iv.readings.len());
        for (r, c) in std::mem::take(&mut iv.readings).into_iter().zip(cg) {
            let same = |o: &Reading| {
                o.event == r.event && o.cpu == r.cpu && o.tid == r.tid && o.group == r.group
            };
            match (c, out.iter().position(same)) {
                (Some(_), Some(i)) => {
                    let o = &mut out[i];
                    // Counted share: the mean over the cgroups' rows (an uncounted one adds 0).
                    let n = parts[i] as f64;
                    o.counted_share = Some(
                        (o.counted_share.unwrap_or(0.0) * n + r.counted_share.unwrap_or(0.0))
                            / (n + 1.0),
                    );
                    o.value = match (o.value, r.value) {
                        (Some(a), Some(b)) => Some(a + b),
                        (a, b) => a.or(b),
                    };
                    if r.value.is_some() {
                        o.status = tma_perf::readings::ReadingStatus::Counted;
                    }
                    // Running times past u64 (a corrupt recording) make the sum unknown,
                    // as in `resolve::aggregate`.
                    o.time_running_ns = match (o.time_running_ns, r.time_running_ns) {
                        (Some(a), Some(b)) => a.checked_add(b),
                        (a, b) => a.or(b),
                    };
                    parts[i] += 1;
                }
                _ => {
                    out.push(r);
                    parts.push(1);
                }
            }
        }
        iv.readings = out;
        iv.printed.clear();
        Ok(())
    }
}

fn printed(m: Metric, event: String, row: usize) -> PrintedMetric {
    PrintedMetric {
        name: m.name,
        value: m.value,
        unit: m.unit,
        decimals: m.decimals,
        line: m.line,
        event,
        row,
        group: None,
        block: None,
    }
}

/// Tell the event groups of an interval that counts some events more than once, as `perf
/// stat -M` does (each metric's events form one group, and an event several metrics use is
/// counted in each of their groups). perf does not print where a group starts, so:
/// 1. The members of one group are counted at the same time: where the counter-running
///    time (or, when perf did not print it, the counted share) changes, a new group starts.
/// 2. Two copies of one event are in different groups: when no boundary lies between them
///    yet, one is put before the last row between them (the second copy included) that
///    carries a metric on its own line, since perf prints a metric beside the first event
///    of its group; without such a row, before the second copy.
///
/// Each row of a (CPU, thread) stream gets its group's index in [`Reading::group`], and in
/// [`Reading::block`] the index of the block perf listed it in (rule 2 alone): perf lists
/// each metric's events together even when it could not count them as one group.
fn assign_groups(iv: &mut Interval, rows: &[(Key, usize)]) {
    let annotated: std::collections::HashSet<usize> = iv
        .printed
        .iter()
        .filter(|m| rows.get(m.row).is_some_and(|&(_, line)| line == m.line))
        .map(|m| m.row)
        .collect();
    // The rows of each (CPU, thread) stream.
    type Stream = ((Option<u32>, Option<u32>), Vec<usize>);
    let mut streams: Vec<Stream> = Vec::new();
    for (i, &((_, cpu, tid, _), _)) in rows.iter().enumerate().take(iv.readings.len()) {
        match streams.iter_mut().find(|(k, _)| *k == (cpu, tid)) {
            Some((_, v)) => v.push(i),
            None => streams.push(((cpu, tid), vec![i])),
        }
    }
    for (_, idx) in streams {
        let n = idx.len();
        let mut cut = vec![false; n];
        for k in 1..n {
            let (a, b) = (&iv.readings[idx[k - 1]], &iv.readings[idx[k]]);
            cut[k] = match (a.time_running_ns, b.time_running_ns) {
                (Some(x), Some(y)) => x != y,
                _ => match (a.counted_share, b.counted_share) {
                    (Some(x), Some(y)) => (x - y).abs() > 1e-9,
                    (x, y) => x.is_some() != y.is_some(),
                },
            };
        }
        // Consecutive copies of each event, ordered by the second copy.
        let mut last: HashMap<usize, usize> = HashMap::new();
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for (k, &i) in idx.iter().enumerate() {
            let event = rows[i].0 .0;
            if let Some(prev) = last.insert(event, k) {
                pairs.push((prev, k));
            }
        }
        // Where two copies of an event are listed, a new block of perf's listing starts.
        let place = |cut: &mut Vec<bool>| {
            for &(a, b) in &pairs {
                if (a + 1..=b).any(|k| cut[k]) {
                    continue;
                }
                let at = (a + 1..=b)
                    .rev()
                    .find(|&k| annotated.contains(&idx[k]))
                    .unwrap_or(b);
                cut[at] = true;
            }
        };
        let mut block_cut = vec![false; n];
        place(&mut block_cut);
        place(&mut cut);
        let (mut group, mut block) = (0, 0);
        for (k, &i) in idx.iter().enumerate() {
            group += usize::from(cut[k]);
            block += usize::from(block_cut[k]);
            iv.readings[i].group = Some(group);
            iv.readings[i].block = Some(block);
        }
    }
    // perf computed each metric from the group of the count it printed it beside.
    for m in &mut iv.printed {
        if let Some(r) = iv.readings.get(m.row) {
            m.group = r.group;
            m.block = r.block;
        }
    }
}

fn reading_of(row: Row) -> Reading {
    let scale = unit_to_ns(&row.unit);
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
    reading
}
