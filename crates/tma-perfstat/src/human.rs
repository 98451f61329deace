//! perf stat's human-readable output, the form most published runs take:
//!
//! ```text
//!  Performance counter stats for 'system wide':
//!
//!        113,357,334      cpu_core/TOPDOWN.SLOTS/          #     30.5 %  tma_backend_bound
//!                                                   #      9.2 %  tma_retiring
//!               0.57 msec task-clock:u                     #    0.385 CPUs utilized
//!      5,364,230,382      CPU_CLK_UNHALTED.THREAD          # 0.48 Retiring      (50.02%)
//!
//!        1.003818397 seconds time elapsed
//! ```
//!
//! A row is `[timestamp] [CPUn | comm-tid] count [unit] event [# metric] [(share%)]`; a line
//! that holds only `# metric` continues the row above it. The counts are perf's scaled
//! counts, exact integers with thousands separators; the counted share is the percentage in
//! parentheses (none printed: counted all the time). The counter-running time itself is not
//! printed. Locales that write `,` for the decimal point (and `.` between thousands) are
//! told from the numbers themselves.

use super::locale::{is_stamp, join_groups, leading_columns, NumberFormat};
use super::{ImportError, Metric, Parsed, Row, RowValue, UNITS};

/// Units perf prints between a metric value and the metric's name, or alone.
const METRIC_UNITS: &[&str] = &["%", "K/sec", "M/sec", "G/sec", "/sec", "GHz", "MHz"];

/// State of a human-readable recording: how its numbers are written, and whether its
/// counter lines have begun.
#[derive(Debug, Default, Clone)]
pub(super) struct Text {
    /// Decided from the file before its first row is read (see [`super::locale`]).
    pub format: NumberFormat,
    /// perf's header (`Performance counter stats for`, or `-I`'s `#  time  counts`) or a
    /// first counter line has been read: from here on a line that starts like a row and is
    /// not one is an error, not prose.
    in_body: bool,
}

impl Text {
    pub fn new(format: NumberFormat) -> Self {
        Text {
            format,
            in_body: false,
        }
    }

    /// Parse one line (without its line ending). `Ok(None)` for lines that carry nothing:
    /// blank lines, the header, perf's prose (hints, `seconds user`).
    pub fn parse_line(&mut self, line: &str, lineno: usize) -> Result<Option<Parsed>, ImportError> {
        let (joined, _) = join_groups(line);
        let t = joined.trim();
        if t.is_empty() {
            return Ok(None);
        }
        if t.starts_with("Performance counter stats for") {
            self.in_body = true;
            return Ok(None);
        }
        // A metric continuation line, with or without the interval's time stamp first.
        let (stamp, body) = match t.split_once(char::is_whitespace) {
            Some((first, rest)) if is_stamp(first) && rest.trim_start().starts_with('#') => {
                (Some(first), rest.trim_start())
            }
            _ => (None, t),
        };
        if let Some(m) = body.strip_prefix('#') {
            if stamp.is_none() && m.trim_start().starts_with("time") {
                // `#  time  counts unit events`: the header of `-I` output.
                self.in_body = true;
                return Ok(None);
            }
            if !self.in_body {
                // A comment before any counter line (`# started on ...`).
                return Ok(None);
            }
            // The counted share of the row above may close its last metric line.
            let (m, share) = match m
                .trim_end()
                .strip_suffix(')')
                .and_then(|x| x.rsplit_once('('))
            {
                Some((text, pct)) => (text, self.share(&format!("{pct})"))),
                None => (m, None),
            };
            return Ok(self.metric(m, lineno).map(|mut metric| {
                metric.share = share;
                Parsed::Metric(metric)
            }));
        }
        if t.ends_with("seconds time elapsed") {
            let v = t.split_whitespace().next().unwrap_or("");
            return Ok(self.format.parse(v).map(Parsed::Elapsed));
        }
        if t.ends_with("seconds user") || t.ends_with("seconds sys") {
            return Ok(None);
        }
        if !self.in_body {
            // Before perf's header, only a line of a counter row's shape is one: the rest
            // is the command line a user pasted, the program's own output, `Run on ...`.
            return Ok(looks_like_row(t)
                .then(|| self.row(t, lineno))
                .flatten()
                .map(|row| {
                    self.in_body = true;
                    Parsed::Row(row)
                }));
        }
        // A signed number is no count perf prints, but a damaged one: an error, not prose.
        let signed = t.len() > 1
            && t.starts_with(['-', '+'])
            && t[1..].starts_with(|c: char| c.is_ascii_digit());
        let starts_row = t.starts_with(|c: char| c.is_ascii_digit())
            || signed
            || t.starts_with("<not counted>")
            || t.starts_with("<not supported>")
            || t.starts_with("CPU");
        if !starts_row {
            // perf's prose: hints (`Some events weren't counted...`).
            return Ok(None);
        }
        match self.row(t, lineno) {
            Some(row) => Ok(Some(Parsed::Row(row))),
            None => Err(ImportError::TextRow { line: lineno }),
        }
    }

    fn row(&mut self, t: &str, lineno: usize) -> Option<Row> {
        // `(50.02%)` at the end: the counted share; `( +-  0.12% )` of `-r`: the variance.
        let mut rest = t;
        let mut running_pct = Some(100.0);
        if let Some(open) = rest.rfind('(') {
            let inner = rest[open + 1..].trim_end().strip_suffix(')')?.trim();
            if inner.starts_with("+-") {
                rest = rest[..open].trim_end();
                if let Some(open) = rest.rfind('(') {
                    if let Some(p) = self.share(&rest[open + 1..]) {
                        running_pct = Some(p);
                        rest = rest[..open].trim_end();
                    }
                }
            } else {
                running_pct = Some(self.share(&rest[open + 1..])?);
                rest = rest[..open].trim_end();
            }
        }
        let (counts, metric) = match rest.split_once('#') {
            Some((c, m)) => (c.trim_end(), self.metric(m, lineno)),
            None => (rest, None),
        };
        let mut tokens = counts.split_whitespace().peekable();
        let mut timestamp = None;
        let first = *tokens.peek()?;
        if is_stamp(first) {
            let next = counts.split_whitespace().nth(1)?;
            if next.starts_with(|c: char| c.is_ascii_digit() || c == '<') || next.starts_with("CPU")
            {
                timestamp = Some(self.format.parse(first)?);
                tokens.next();
            }
        }
        let mut cpu = None;
        let mut tid = None;
        let col = *tokens.peek()?;
        if let Some(n) = col.strip_prefix("CPU").and_then(|n| n.parse::<u32>().ok()) {
            cpu = Some(n);
            tokens.next();
        } else if !col.starts_with(|c: char| c.is_ascii_digit() || c == '<') {
            tid = col
                .rsplit_once('-')
                .and_then(|(_, t)| t.parse::<u32>().ok());
            tid?;
            tokens.next();
        }
        let value = match tokens.next()? {
            "<not" => match tokens.next()? {
                "counted>" => RowValue::NotCounted,
                "supported>" => RowValue::NotSupported,
                _ => return None,
            },
            v => RowValue::Count(self.format.parse(v)?),
        };
        let mut event = tokens.next()?;
        let mut unit = "";
        if let Some(&next) = tokens.peek() {
            if UNITS.contains(&event) {
                unit = event;
                event = next;
                tokens.next();
            }
        }
        // `-G` / `--for-each-cgroup`: the cgroup's name follows the event.
        let cgroup = tokens.next().map(str::to_string);
        if tokens.next().is_some() {
            // More words than a row has: not a counter line.
            return None;
        }
        Some(Row {
            line: lineno,
            timestamp,
            summary: false,
            cpu,
            tid,
            cgroup,
            event: event.to_string(),
            value,
            unit: unit.to_string(),
            running_ns: None,
            running_pct: if value == RowValue::NotCounted {
                Some(0.0)
            } else {
                running_pct
            },
            metric,
        })
    }

    /// `50.02%)` -> 50.02.
    fn share(&mut self, s: &str) -> Option<f64> {
        let s = s.trim().strip_suffix(')')?.trim().strip_suffix('%')?.trim();
        let v = self.format.parse(s)?;
        (0.0..=100.0001).contains(&v).then_some(v)
    }

    /// What follows `#`: `30.5 %  tma_backend_bound`, `0.32 Bad_Speculation`,
    /// `7.78% of all branches`, `6.437 K/sec`. `None` when it does not start with a number.
    fn metric(&mut self, text: &str, line: usize) -> Option<Metric> {
        let text = text.trim();
        let (num, rest) = match text.split_once(char::is_whitespace) {
            Some((n, r)) => (n, r.trim()),
            None => (text, ""),
        };
        let (num, percent) = match num.strip_suffix('%') {
            Some(n) => (n, true),
            None => (num, false),
        };
        let value = self.format.parse(num)?;
        let decimals = self.format.decimals(num);
        let (unit, name) = if percent {
            ("%", rest)
        } else {
            split_metric_text(rest)
        };
        Some(Metric {
            value,
            unit: unit.to_string(),
            name: name.to_string(),
            decimals,
            line,
            share: None,
        })
    }
}

/// Whether a line has the shape of a counter row of perf's human-readable output, told
/// apart from a CSV row by its columns: `[stamp] [CPUn] count [unit] event [# metric]
/// [(share%)]`, the count alone in its column (digits and separators, or `<not counted>`),
/// the event a name after whitespace. A CSV row's first column runs into its separator.
pub(super) fn looks_like_row(line: &str) -> bool {
    let (joined, _) = join_groups(line);
    let body = joined.split('#').next().unwrap_or("");
    let body = match body.trim_end().strip_suffix(')') {
        Some(b) if b.contains("%") => b.rsplit_once('(').map_or(b, |(head, _)| head),
        _ => body,
    };
    let mut tokens = body.split_whitespace().peekable();
    let count_ok = match leading_columns(&mut tokens).1 {
        Some("<not") => matches!(tokens.next(), Some("counted>" | "supported>")),
        Some(c) => {
            c.starts_with(|c: char| c.is_ascii_digit())
                && c.chars()
                    .all(|c| c.is_ascii_digit() || ".,'\u{2019}_".contains(c))
        }
        None => false,
    };
    if !count_ok {
        return false;
    }
    let mut event = tokens.next();
    if event.is_some_and(|e| UNITS.contains(&e)) {
        event = tokens.next();
    }
    // An event name, and at most a cgroup after it.
    event.is_some_and(|e| e.starts_with(|c: char| c.is_ascii_alphabetic() || c == '{'))
        && tokens.nth(1).is_none()
}

/// `%  tma_retiring` -> (`%`, `tma_retiring`); `K/sec` -> (`K/sec`, ``); `insn per cycle`
/// -> (``, `insn per cycle`).
pub(super) fn split_metric_text(text: &str) -> (&str, &str) {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('%') {
        return ("%", rest.trim());
    }
    let (first, rest) = match text.split_once(char::is_whitespace) {
        Some((f, r)) => (f, r.trim()),
        None => (text, ""),
    };
    if METRIC_UNITS.contains(&first) {
        (first, rest)
    } else {
        ("", text)
    }
}

/// Digits after the decimal point of a number written with `.` (CSV and JSON: perf writes
/// them in the C locale).
pub(super) fn decimals_of(s: &str) -> u8 {
    NumberFormat::default().decimals(s.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: &mut Text, line: &str) -> Row {
        match t.parse_line(line, 1) {
            Ok(Some(Parsed::Row(r))) => r,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn rows_metrics_and_shares() {
        let mut t = Text {
            in_body: true,
            ..Text::default()
        };
        let r = row(
            &mut t,
            "       113,357,334      cpu_core/TOPDOWN.SLOTS/          #     30.5 %  tma_backend_bound",
        );
        assert_eq!(r.event, "cpu_core/TOPDOWN.SLOTS/");
        assert_eq!(r.value, RowValue::Count(113_357_334.0));
        assert_eq!(r.running_pct, Some(100.0));
        let m = r.metric.unwrap();
        assert_eq!(
            (m.value, m.unit.as_str(), m.name.as_str(), m.decimals),
            (30.5, "%", "tma_backend_bound", 1)
        );
        let r = row(&mut t, "   608,066,701      INT_MISC.RECOVERY_CYCLES         # 0.32 Bad_Speculation          (50.02%)");
        assert_eq!(r.running_pct, Some(50.02));
        let m = r.metric.unwrap();
        assert_eq!(
            (m.value, m.unit.as_str(), m.name.as_str(), m.decimals),
            (0.32, "", "Bad_Speculation", 2)
        );
        let r = row(
            &mut t,
            "  10,194,062,626 UOPS_RETIRED.RETIRE_SLOTS (50.02%)",
        );
        assert_eq!(
            (r.event.as_str(), r.value),
            (
                "UOPS_RETIRED.RETIRE_SLOTS",
                RowValue::Count(10_194_062_626.0)
            )
        );
        let r = row(
            &mut t,
            "              0.57 msec task-clock:u                     #    0.385 CPUs utilized",
        );
        assert_eq!(
            (r.unit.as_str(), r.event.as_str(), r.value),
            ("msec", "task-clock:u", RowValue::Count(0.57))
        );
        let r = row(&mut t, "     8,019,190,455      cpu/de_no_dispatch_per_slot.no_ops_from_frontend,cmask=0x6/ #      7.6 %  frontend_bound_latency   (24.99%)");
        assert_eq!(
            r.event,
            "cpu/de_no_dispatch_per_slot.no_ops_from_frontend,cmask=0x6/"
        );
        assert_eq!(r.running_pct, Some(24.99));
        let r = row(
            &mut t,
            "     <not counted>      cpu_atom/cycles/                                      (0.00%)",
        );
        assert_eq!(r.value, RowValue::NotCounted);
        match t.parse_line(
            "                                                  #      9.2 %  tma_retiring",
            3,
        ) {
            Ok(Some(Parsed::Metric(m))) => {
                assert_eq!((m.value, m.name.as_str(), m.line), (9.2, "tma_retiring", 3))
            }
            other => panic!("{other:?}"),
        }
        match t.parse_line("       1.003818397 seconds time elapsed", 4) {
            Ok(Some(Parsed::Elapsed(s))) => assert_eq!(s, 1.003818397),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn comma_decimal_locale() {
        let mut t = Text {
            in_body: true,
            format: NumberFormat {
                decimal: ',',
                thousands: Some('.'),
            },
        };
        let r = row(&mut t, "    1.234.567      cycles      (66,67%)");
        assert_eq!(
            (r.value, r.running_pct),
            (RowValue::Count(1_234_567.0), Some(66.67))
        );
        let r = row(
            &mut t,
            "    0,57 msec task-clock       #    0,385 CPUs utilized",
        );
        assert_eq!(r.value, RowValue::Count(0.57));
        assert_eq!(r.metric.unwrap().value, 0.385);
    }

    #[test]
    fn interval_and_per_cpu_rows() {
        let mut t = Text {
            in_body: true,
            ..Text::default()
        };
        let r = row(&mut t, "     1.001097825      2,007,000,123      cycles");
        assert_eq!(
            (r.timestamp, r.value),
            (Some(1.001097825), RowValue::Count(2_007_000_123.0))
        );
        let r = row(&mut t, "CPU3        1,234      cycles");
        assert_eq!((r.cpu, r.value), (Some(3), RowValue::Count(1234.0)));
        let r = row(
            &mut t,
            "     2.002195317 CPU0        1,234      instructions   #    0.61  insn per cycle",
        );
        assert_eq!((r.timestamp, r.cpu), (Some(2.002195317), Some(0)));
    }

    #[test]
    fn prose_before_the_header_is_skipped_and_bad_rows_after_it_are_errors() {
        let mut t = Text::default();
        assert!(t.parse_line("$ perf stat -a sleep 1", 1).unwrap().is_none());
        assert!(t
            .parse_line("Run on (15 X 4966.64 MHz CPU s)", 2)
            .unwrap()
            .is_none());
        assert!(t
            .parse_line(" Performance counter stats for 'system wide':", 3)
            .unwrap()
            .is_none());
        assert!(t
            .parse_line(
                "Some events weren't counted. Try disabling the NMI watchdog:",
                4
            )
            .unwrap()
            .is_none());
        assert!(matches!(
            t.parse_line("   12 34 56 cycles extra words", 5),
            Err(ImportError::TextRow { line: 5 })
        ));
    }
}
