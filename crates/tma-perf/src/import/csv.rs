//! `perf stat -x<sep>` rows.
//!
//! A row is `[timestamp,] [aggregation columns,] value, unit, event, [variance%,]
//! running-ns, running-%[, metric-value, metric-unit]`. perf does not quote fields, so an
//! event spec with commas (`cpu/event=0x1a0,umask=0x1/`) spans several raw fields: fields
//! are re-joined between the opening `pmu/` and the closing `/`.

use std::borrow::Cow;

use smallvec::SmallVec;

/// Fields of one line: perf writes at most about a dozen, so they stay on the stack.
type Fields<'a> = SmallVec<[(Cow<'a, str>, bool); 16]>;

use super::{human, ImportError, Metric, Parsed, Row, RowValue};

/// Pick the separator of a data line: the one of `,` `;` tab `|` that splits it into the
/// most fields (`,` wins ties), after re-joining event specs.
pub(super) fn detect_separator(line: &str) -> char {
    let mut best = (',', split_fields(line, ',').len());
    for sep in [';', '\t', '|'] {
        let n = split_fields(line, sep).len();
        if n > best.1 {
            best = (sep, n);
        }
    }
    best.0
}

/// Split a line into fields: RFC-4180 quotes are honoured (a quoted field is one field even
/// with separators inside), then unquoted fields of a `pmu/.../` spec are re-joined.
fn split_fields(line: &str, sep: char) -> Fields<'_> {
    // Fast path: nothing quoted and no `pmu/.../` spec.
    if !line.bytes().any(|b| b == b'"' || b == b'/') {
        return line.split(sep).map(|f| (Cow::Borrowed(f), false)).collect();
    }
    let mut raw: Vec<(String, bool)> = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut in_quotes = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_quotes {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    cur.push('"');
                    chars.next();
                } else {
                    in_quotes = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && cur.trim().is_empty() {
            in_quotes = true;
            quoted = true;
            cur.clear();
        } else if c == sep {
            raw.push((std::mem::take(&mut cur), quoted));
            quoted = false;
        } else {
            cur.push(c);
        }
    }
    raw.push((cur, quoted));
    // Re-join `pmu/a=1,b=2/mods`: a field with an odd number of '/' opens a spec that the
    // next field with an odd number of '/' closes. Without a closer (e.g. a metric unit
    // `K/sec` at the end), the fields stay as they are.
    let mut out: Fields<'_> = SmallVec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let (f, q) = &raw[i];
        if !q && f.matches('/').count() % 2 == 1 {
            if let Some(j) =
                (i + 1..raw.len()).find(|&j| !raw[j].1 && raw[j].0.matches('/').count() % 2 == 1)
            {
                // Only join spans that look like event terms (`name=value` or a bare term).
                let joined: Vec<&str> = raw[i..=j].iter().map(|(s, _)| s.as_str()).collect();
                let middle_ok = raw[i + 1..j]
                    .iter()
                    .all(|(s, _)| !s.is_empty() && !s.contains(' '));
                if middle_ok && !raw[j].0.is_empty() && is_term_start(&raw[j].0) {
                    out.push((Cow::Owned(joined.join(&sep.to_string())), false));
                    i = j + 1;
                    continue;
                }
            }
        }
        out.push((Cow::Owned(f.clone()), *q));
        i += 1;
    }
    out
}

/// The closing field of a `pmu/.../` spec starts with a term (`umask=0x1/`, `edge/u`).
fn is_term_start(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/')
}

fn is_number(s: &str) -> bool {
    number(s).is_some()
}

/// `s` as a finite number.
fn number(s: &str) -> Option<f64> {
    let s = s.trim();
    // Every number starts with a digit, a sign or a point: reject names at once.
    if !s.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.')) {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn is_value(s: &str) -> bool {
    let s = s.trim();
    is_number(s) || s == "<not counted>" || s == "<not supported>"
}

/// Digit groups joined by a thousands separator: `1,234,567`, `1.234.567`, `1 234 567`,
/// `1'234'567`, or the same split across fields (`1`, `234`, `567`).
fn is_grouped_number(s: &str) -> bool {
    let s = s.trim();
    // Cheap reject: a grouped number holds only digits and separators.
    if !s.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    for sep in [',', '.', ' ', '\'', '\u{a0}', '\u{202f}'] {
        let mut parts = s.split(sep);
        let first = parts.next().unwrap_or("");
        let mut groups = 0usize;
        let ok = (1..=3).contains(&first.len())
            && first.bytes().all(|c| c.is_ascii_digit())
            && parts.all(|p| {
                groups += 1;
                p.len() == 3 && p.bytes().all(|c| c.is_ascii_digit())
            });
        // `1.234` alone is a decimal number, not a grouped one.
        if ok && groups >= 1 && !(sep == '.' && groups == 1) {
            return true;
        }
    }
    false
}

fn three_digits(s: &str) -> bool {
    s.len() == 3 && s.chars().all(|c| c.is_ascii_digit())
}

/// Parse one data line: a count, or a metric perf printed on a line of its own (`perf
/// stat -M`); `Ok(None)` for a line that carries neither.
/// `short`: the file has no counter-running columns (`value,unit,event` only).
pub(super) fn parse_line(
    line: &str,
    sep: char,
    lineno: usize,
    short: bool,
) -> Result<Option<Parsed>, ImportError> {
    Ok(match parse_fields(line, sep, lineno, short)? {
        Some(Fielded::Row(row)) => Some(Parsed::Row(row)),
        Some(Fielded::Metric(value, text)) => metric(&value, &text, lineno).map(Parsed::Metric),
        None => None,
    })
}

/// The metric in perf's two metric columns: a value and `%  tma_retiring` or
/// `insn per cycle`. `None` when the value column is empty or not a number.
fn metric(value: &str, text: &str, line: usize) -> Option<Metric> {
    let v = value.trim().parse::<f64>().ok().filter(|v| v.is_finite())?;
    let (unit, name) = human::split_metric_text(text);
    Some(Metric {
        value: v,
        unit: unit.to_string(),
        name: name.to_string(),
        decimals: human::decimals_of(value),
        line,
        share: None,
    })
}

// One line's result, on the stack for one line at a time: boxing the common variant (a row)
// would allocate for every row of a long recording to save bytes no one keeps.
#[allow(clippy::large_enum_variant)]
enum Fielded {
    Row(Row),
    /// A metric-only line: its value and unit-and-name columns.
    Metric(String, String),
}

fn parse_fields(
    line: &str,
    sep: char,
    lineno: usize,
    short: bool,
) -> Result<Option<Fielded>, ImportError> {
    let fields = split_fields(line, sep);
    let f: SmallVec<[&str; 16]> = fields.iter().map(|(s, _)| s.as_ref().trim()).collect();
    // The first field, when it is a number: a timestamp (`-I`) or the count.
    let first_number = f.first().and_then(|t| number(t));
    let truncated = || ImportError::Truncated {
        line: lineno,
        found: if f.len() == 1 {
            "1 field".to_string()
        } else {
            format!("{} fields", f.len())
        },
    };
    // Thousands separators, quoted (`"1,234,567",,cycles`) or not (`1,234,567,,cycles`).
    for (s, q) in &fields {
        if *q && is_grouped_number(s) {
            return Err(ImportError::ThousandsSeparator {
                line: lineno,
                value: s.to_string(),
            });
        }
    }
    // Unquoted thousands separators split the count over fields: `1,234,567,,cycles`
    // (or after a timestamp). A unit column is never a number, so digit groups there
    // give it away.
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    for k in 0..2usize {
        if k == 1 && first_number.is_none() {
            break;
        }
        if f.len() > k + 1 && digits(f[k]) && f[k].len() <= 3 && three_digits(f[k + 1]) {
            let mut j = k + 1;
            while j < f.len() && three_digits(f[j]) {
                j += 1;
            }
            return Err(ImportError::ThousandsSeparator {
                line: lineno,
                value: f[k..j].join(&sep.to_string()),
            });
        }
    }
    let mut k = 0usize;
    let mut timestamp = None;
    let mut summary = false;
    // Leading timestamp: a number followed by a value (a unit is never a number); the
    // `--summary` rows that end `-I` output carry the word `summary` instead.
    if f.first() == Some(&"summary") && f.len() > 1 && is_value(f[1]) {
        summary = true;
        k = 1;
    } else if let (Some(t), true) = (
        first_number,
        f.len() > 1
            && (is_value(f[1])
                // `-I` with an aggregation column (`-A`: `1.001,CPU0,123,,cycles`; the
                // per-thread `comm-tid`): a word, then the value.
                || (!f[1].is_empty() && !is_number(f[1]) && f.get(2).is_some_and(|v| is_value(v)))),
    ) {
        timestamp = Some(t);
        k = 1;
    }
    // Aggregation columns.
    let mut cpu = None;
    let mut tid = None;
    if let Some(col) = f.get(k) {
        if let Some(n) = col.strip_prefix("CPU").and_then(|n| n.parse::<u32>().ok()) {
            cpu = Some(n);
            k += 1;
        } else if let Some(flag) = aggregation_flag(col) {
            if f.get(k + 1).is_some_and(|c| c.parse::<u32>().is_ok()) {
                return Err(ImportError::UnsupportedAggregation {
                    line: lineno,
                    column: col.to_string(),
                    flag,
                });
            }
        } else if !is_value(col) && f.get(k + 1).is_some_and(|v| is_value(v)) {
            // `--per-thread`: `comm-tid`.
            if let Some(t) = col
                .rsplit_once('-')
                .and_then(|(_, t)| t.parse::<u32>().ok())
            {
                tid = Some(t);
                k += 1;
            }
        }
    }
    if f.len() < k + 3 {
        return Err(truncated());
    }
    let (value_s, unit, event) = (f[k], f[k + 1], f[k + 2]);
    if value_s.is_empty() && event.is_empty() {
        // `perf stat -M` prints metric-only lines with empty count and event columns; the
        // metric is in the last two.
        let n = fields.len();
        return Ok((n >= 2 && !f[n - 2].is_empty())
            .then(|| Fielded::Metric(f[n - 2].to_string(), f[n - 1].to_string())));
    }
    if event.is_empty() {
        return Err(truncated());
    }
    let value = match value_s {
        "<not counted>" => RowValue::NotCounted,
        "<not supported>" => RowValue::NotSupported,
        s => match parse_f64(s, lineno, "count") {
            Ok(v) => RowValue::Count(v),
            Err(_) if is_grouped_number(s) => {
                return Err(ImportError::ThousandsSeparator {
                    line: lineno,
                    value: s.to_string(),
                })
            }
            Err(e) => return Err(e),
        },
    };
    if is_number(event) {
        return Err(truncated());
    }
    let mut rest = k + 3;
    // `-G` / `--for-each-cgroup`: the cgroup's name follows the event (perf prints it
    // before the variance and counter-running columns). It is told by its place: a word
    // where a number (or nothing) stands otherwise, or an empty column followed by the two
    // counter-running numbers.
    let mut cgroup = None;
    if !short {
        let col = f.get(rest).copied();
        let numbers_after = f.get(rest + 1).is_some_and(|v| number(v).is_some())
            && f.get(rest + 2).is_some_and(|v| number(v).is_some());
        match col {
            Some(c) if !c.is_empty() && number(c).is_none() && !c.ends_with('%') => {
                cgroup = Some(c.to_string());
                rest += 1;
            }
            Some("") if numbers_after => {
                cgroup = Some(String::new());
                rest += 1;
            }
            _ => {}
        }
    }
    // `-r N` adds a variance column such as `7.46%`.
    if f.get(rest).is_some_and(|v| v.ends_with('%')) {
        rest += 1;
    }
    let (running_ns, running_pct) = if short {
        if f.len() > rest && f[rest..].iter().any(|x| !x.is_empty()) {
            return Err(truncated());
        }
        (None, None)
    } else if f.len() < rest + 2 {
        return Err(truncated());
    } else if f[rest].is_empty() && f[rest + 1].is_empty() {
        // Empty counter-running columns: perf did not say.
        (None, None)
    } else {
        let ns = parse_f64(f[rest], lineno, "counter-running time")?;
        let pct = parse_f64(f[rest + 1], lineno, "running percentage")?;
        if !(0.0..=100.0001).contains(&pct) || ns < 0.0 {
            return Err(ImportError::BadNumber {
                line: lineno,
                field: "running percentage",
                value: f[rest + 1].to_string(),
            });
        }
        (Some(ns as u64), Some(pct))
    };
    // The metric columns follow the counter-running ones.
    let metric_at = if short { rest } else { rest + 2 };
    let printed = match (f.get(metric_at), fields.get(metric_at + 1)) {
        (Some(v), Some((text, _))) if !v.is_empty() => metric(v, text, lineno),
        _ => None,
    };
    Ok(Some(Fielded::Row(Row {
        line: lineno,
        timestamp,
        summary,
        cpu,
        tid,
        cgroup,
        event: event.to_string(),
        value,
        unit: unit.to_string(),
        running_ns,
        running_pct,
        metric: printed,
    })))
}

/// Columns of perf's `--per-socket`, `--per-die`, `--per-core`, `--per-node`,
/// `--per-cache`, `--per-cluster` modes: `S0`, `S0-D0`, `S0-D0-C1`, `N0`, `S0-D0-L3-ID0`.
fn aggregation_flag(col: &str) -> Option<&'static str> {
    let starts_num = |s: &str, p: char| {
        s.strip_prefix(p)
            .is_some_and(|r| r.chars().next().is_some_and(|c| c.is_ascii_digit()))
    };
    if starts_num(col, 'N') && col[1..].chars().all(|c| c.is_ascii_digit()) {
        return Some("--per-node");
    }
    if !starts_num(col, 'S') {
        return None;
    }
    let parts: Vec<&str> = col.split('-').collect();
    Some(match parts.as_slice() {
        [_] => "--per-socket",
        [_, d] if starts_num(d, 'D') => "--per-die",
        [_, _, c] if starts_num(c, 'C') => "--per-core",
        [_, _, c] if starts_num(c, 'L') => "--per-cache",
        [_, _, ..] => "--per-cache",
        _ => return None,
    })
}

fn parse_f64(s: &str, line: usize, field: &'static str) -> Result<f64, ImportError> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| ImportError::BadNumber {
            line,
            field,
            value: s.to_string(),
        })
}
