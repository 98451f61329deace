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
    let (mut quote, mut slash) = (false, false);
    for b in line.bytes() {
        quote |= b == b'"';
        slash |= b == b'/';
    }
    // Fast path: nothing quoted and no `pmu/.../` spec.
    if !quote && !slash {
        return split_plain(line, sep)
            .into_iter()
            .map(|f| (Cow::Borrowed(f), false))
            .collect();
    }
    // Nothing quoted: every field, joined spans too, is a slice of the line.
    if !quote {
        let raw = split_plain(line, sep);
        // Where a field of `raw` starts in the line (each is a slice of it).
        let at = |f: &str| f.as_ptr() as usize - line.as_ptr() as usize;
        let mut out: Fields<'_> = SmallVec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if let Some(j) = spec_end(raw.len(), i, |k| (raw[k], false)) {
                let span = &line[at(raw[i])..at(raw[j]) + raw[j].len()];
                out.push((Cow::Borrowed(span), false));
                i = j + 1;
                continue;
            }
            out.push((Cow::Borrowed(raw[i]), false));
            i += 1;
        }
        return out;
    }
    split_quoted(line, sep)
}

/// `line.split(sep)`, by bytes for the ASCII separators perf writes (the lines are short:
/// a loop beats a searcher set up per field).
fn split_plain(line: &str, sep: char) -> SmallVec<[&str; 16]> {
    let mut out = SmallVec::new();
    if !sep.is_ascii() {
        out.extend(line.split(sep));
        return out;
    }
    let s = sep as u8;
    let mut start = 0;
    for (i, &b) in line.as_bytes().iter().enumerate() {
        if b == s {
            // An ASCII byte is a char boundary on both sides.
            out.push(&line[start..i]);
            start = i + 1;
        }
    }
    out.push(&line[start..]);
    out
}

/// [`split_fields`] for a line with quotes (and, in tests, any line): fields unquoted into
/// owned strings first.
fn split_quoted(line: &str, sep: char) -> Fields<'_> {
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
        if let Some(j) = spec_end(raw.len(), i, |k| (raw[k].0.as_str(), raw[k].1)) {
            let joined: Vec<&str> = raw[i..=j].iter().map(|(s, _)| s.as_str()).collect();
            out.push((Cow::Owned(joined.join(&sep.to_string())), false));
            i = j + 1;
            continue;
        }
        let (f, q) = &raw[i];
        out.push((Cow::Owned(f.clone()), *q));
        i += 1;
    }
    out
}

/// Where the `pmu/.../` spec that opens at field `i` closes: a field with an odd number of
/// '/' opens a spec that the next unquoted field with an odd number of '/' closes, when the
/// span looks like event terms (no empty or spaced field inside, the closer starting with a
/// term). `None` when field `i` opens nothing or nothing closes it (e.g. a metric unit
/// `K/sec` at the end): the fields stay as they are. `field(k)`: field k of `n` and whether
/// it was quoted.
fn spec_end<'f>(n: usize, i: usize, field: impl Fn(usize) -> (&'f str, bool)) -> Option<usize> {
    let odd = |s: &str| s.bytes().filter(|&b| b == b'/').count() % 2 == 1;
    let (f, q) = field(i);
    if q || !odd(f) {
        return None;
    }
    let j = (i + 1..n).find(|&j| {
        let (s, q) = field(j);
        !q && odd(s)
    })?;
    let middle_ok = (i + 1..j).all(|k| {
        let s = field(k).0;
        !s.is_empty() && !s.contains(' ')
    });
    let (close, _) = field(j);
    (middle_ok && !close.is_empty() && is_term_start(close)).then_some(j)
}

/// The closing field of a `pmu/.../` spec starts with a term (`umask=0x1/`, `edge/u`).
fn is_term_start(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/')
}

/// `s` (trimmed) as a finite number.
fn number(s: &str) -> Option<f64> {
    // Every number starts with a digit, a sign or a point: reject names at once.
    if !s.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.')) {
        return None;
    }
    parse_finite(s)
}

/// `s.trim()`, without decoding a field that starts and ends with a visible ASCII character
/// (nearly every field perf writes).
fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

/// A finite number: plain digit strings (counts, the common case) without the float parser;
/// below 2^53 the two agree exactly.
fn parse_finite(s: &str) -> Option<f64> {
    if (1..=15).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<u64>().ok().map(|v| v as f64);
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
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
    let f: SmallVec<[&str; 16]> = fields.iter().map(|(s, _)| trim(s)).collect();
    // The first field, when it is a number: a timestamp (`-I`) or the count.
    // Each field as a number, parsed once: the layout checks below ask several times.
    let nums: SmallVec<[Option<f64>; 16]> = f.iter().map(|s| number(s)).collect();
    let num = |i: usize| nums.get(i).copied().flatten();
    let value_at = |i: usize| {
        f.get(i)
            .is_some_and(|s| num(i).is_some() || *s == "<not counted>" || *s == "<not supported>")
    };
    let parsed = |i: usize, field: &'static str| {
        num(i).ok_or_else(|| ImportError::BadNumber {
            line: lineno,
            field,
            value: f[i].to_string(),
        })
    };
    let first_number = num(0);
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
    if f.first() == Some(&"summary") && value_at(1) {
        summary = true;
        k = 1;
    } else if let (Some(t), true) = (
        first_number,
        f.len() > 1
            && (value_at(1)
                // `-I` with an aggregation column (`-A`: `1.001,CPU0,123,,cycles`; the
                // per-thread `comm-tid`): a word, then the value.
                || (!f[1].is_empty() && num(1).is_none() && value_at(2))),
    ) {
        timestamp = Some(t);
        k = 1;
    } else if let (Some(t), true) = (
        first_number,
        // A metric perf printed on a line of its own in `-I` output: the timestamp, then
        // empty count and event columns.
        f.len() > 5 && f[1].is_empty() && f[3].is_empty(),
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
        } else if !value_at(k) && value_at(k + 1) {
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
        s => match parsed(k, "count") {
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
    if num(k + 2).is_some() {
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
        let numbers_after = num(rest + 1).is_some() && num(rest + 2).is_some();
        match col {
            Some(c) if !c.is_empty() && num(rest).is_none() && !c.ends_with('%') => {
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
        let ns = parsed(rest, "counter-running time")?;
        let pct = parsed(rest + 1, "running percentage")?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The borrowing paths of split_fields (lines without quotes) give the fields the
        /// general one does: same text, same joins of `pmu/a=1,b=2/` specs.
        #[test]
        fn unquoted_lines_split_as_the_general_path_does(
            parts in proptest::collection::vec("[a-z0-9=/ .%]{0,6}", 1..12),
            sep in prop::sample::select(vec![',', ';', '\t', '|']),
        ) {
            let line = parts.join(&sep.to_string());
            let fast: Vec<(String, bool)> =
                split_fields(&line, sep).into_iter().map(|(f, q)| (f.into_owned(), q)).collect();
            let general: Vec<(String, bool)> =
                split_quoted(&line, sep).into_iter().map(|(f, q)| (f.into_owned(), q)).collect();
            prop_assert_eq!(fast, general, "{:?}", line);
        }
    }

    #[test]
    fn a_spec_with_commas_is_one_field() {
        let f = split_fields(
            "1.0,123,,cpu/event=0x1a0,umask=0x1,cmask=0x6/,500,50.00,,",
            ',',
        );
        let f: Vec<&str> = f.iter().map(|(s, _)| s.as_ref()).collect();
        assert_eq!(
            f,
            [
                "1.0",
                "123",
                "",
                "cpu/event=0x1a0,umask=0x1,cmask=0x6/",
                "500",
                "50.00",
                "",
                ""
            ]
        );
    }

    proptest! {
        #[test]
        fn split_plain_is_str_split(line in "[a-z,;|\t\u{e9}\u{2603}]{0,20}",
                                    sep in prop::sample::select(vec![',', ';', '\t', '|', '\u{2603}'])) {
            let want: Vec<&str> = line.split(sep).collect();
            prop_assert_eq!(split_plain(&line, sep).to_vec(), want);
        }
    }

    #[test]
    fn trim_is_str_trim() {
        for s in [
            "",
            " ",
            "a",
            " a ",
            "a b",
            "\u{a0}1\u{a0}",
            "1\u{202f}",
            "\t<not counted>",
            "x\r",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
    }

    #[test]
    fn plain_digits_parse_as_the_float_parser_does() {
        for s in [
            "0",
            "007",
            "123456789012345",
            "9007199254740991",
            "1e3",
            "12.5",
            "-4",
        ] {
            assert_eq!(parse_finite(s), s.parse::<f64>().ok(), "{s}");
        }
        assert_eq!(parse_finite(""), None);
        assert_eq!(parse_finite("inf"), None);
    }
}
