//! `--compare FILE`: reference values (CSV with the columns instruction, latency, throughput)
//! and the differences of the measured figures from them.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{BenchError, FormReport};

/// A reference row from `--compare`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefRow {
    pub latency: Option<f64>,
    pub throughput: Option<f64>,
}

/// A measured form next to its reference values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    pub instruction: String,
    pub latency: Option<f64>,
    pub ref_latency: Option<f64>,
    pub latency_diff_pct: Option<f64>,
    pub throughput: Option<f64>,
    pub ref_throughput: Option<f64>,
    pub throughput_diff_pct: Option<f64>,
    /// Either difference is over 5%.
    pub over_5pct: bool,
}

/// Reference rows keyed by the normalized instruction text (`norm`).
pub type References = HashMap<String, RefRow>;

/// Lowercase, single spaces, no space before a comma: `ADD  rax ,rcx` -> `add rax, rcx`...
fn norm(s: &str) -> String {
    s.to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" ,", ",")
}

/// Parse the reference CSV (header first; columns in any order; quoted fields).
pub fn parse(text: &str) -> Result<References, BenchError> {
    let bad = |m: String| BenchError::BadOption(format!("--compare{m}"));
    let mut out = HashMap::new();
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(bad(
            ": the file is empty; expected a header `instruction,latency,throughput`".into(),
        ));
    };
    let cols: Vec<String> = split_csv(header)
        .iter()
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let idx = |name: &str| cols.iter().position(|c| c == name);
    let (Some(ii), li, ti) = (idx("instruction"), idx("latency"), idx("throughput")) else {
        return Err(bad(format!(
            ": the header must name the columns instruction,latency,throughput (got `{header}`)"
        )));
    };
    for (n, line) in lines {
        let f = split_csv(line);
        let num = |i: Option<usize>| -> Result<Option<f64>, BenchError> {
            match i
                .and_then(|i| f.get(i))
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
            {
                None => Ok(None),
                Some(s) => s
                    .parse::<f64>()
                    .map(Some)
                    .map_err(|e| bad(format!(" line {}: `{s}` is not a number: {e}", n + 1))),
            }
        };
        let Some(ins) = f.get(ii) else {
            return Err(bad(format!(" line {}: missing instruction column", n + 1)));
        };
        out.insert(
            norm(ins),
            RefRow {
                latency: num(li)?,
                throughput: num(ti)?,
            },
        );
    }
    Ok(out)
}

/// One CSV record's fields (RFC 4180 quoting).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut q = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if q && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => q = !q,
            ',' if !q => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// The forms that have a reference (by input text, else by the instructions measured).
pub fn rows(forms: &[FormReport], refs: &References) -> Vec<CompareRow> {
    let diff = |m: Option<f64>, r: Option<f64>| match (m, r) {
        (Some(m), Some(r)) if r != 0.0 => Some((m - r) / r * 100.0),
        _ => None,
    };
    forms
        .iter()
        .filter_map(|f| {
            let r = refs
                .get(&norm(&f.input))
                .or_else(|| refs.get(&norm(&f.instructions.join("; "))))?;
            let (lat, tp) = (f.latency_summary(), f.throughput_summary());
            let (ld, td) = (diff(lat, r.latency), diff(tp, r.throughput));
            Some(CompareRow {
                instruction: f.input.clone(),
                latency: lat,
                ref_latency: r.latency,
                latency_diff_pct: ld,
                throughput: tp,
                ref_throughput: r.throughput,
                throughput_diff_pct: td,
                over_5pct: ld.is_some_and(|d| d.abs() > 5.0) || td.is_some_and(|d| d.abs() > 5.0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_csv_is_parsed_with_quotes() {
        let r = parse("instruction,latency,throughput\n\"add rax, rcx\",1,0.25\nimul rax,3,\n")
            .unwrap();
        assert_eq!(r["add rax, rcx"].throughput, Some(0.25));
        assert_eq!(r["imul rax"].throughput, None);
        assert!(parse("a,b\n").is_err());
        let e = parse("instruction,latency\nx,abc\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--compare line 2: `abc` is not a number: invalid float literal"
        );
    }
}
