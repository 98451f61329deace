//! How a [`Profile`] is written: the terminal report (function table, annotated
//! instructions, notes), the `tma.locate` JSON document and folded stacks. (pprof:
//! [`crate::pprof::encode`].)

use std::collections::HashMap;
use std::fmt::Write as _;

use tma_render::OutputError;

use crate::hotspots::{Annotation, Profile, SortKey, Syntax};

/// JSON schema name and version of `tma locate --json`: the envelope
/// `{"schema": "tma.locate", "schema_version": 1, ...}` around a [`Profile`]:
/// `event` (sampled event name), `counts` ({samples, period, lost, lost_records,
/// kernel_samples, unknown_samples, bad_records, throttled}), `functions` ([{function, module,
/// samples, percent}], hottest first), `annotation` (optional: {function, module, start, size,
/// syntax: "intel"|"att", samples, instructions: [{address, text, samples, percent, hottest,
/// file?, line?, source?}]}), `notes` (`[string]`). Addresses are ELF virtual addresses (SVMA).
pub const JSON_SCHEMA: &str = "tma.locate";
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// The `tma.locate` JSON document.
pub fn json(w: &mut dyn std::io::Write, p: &Profile) -> Result<(), OutputError> {
    tma_render::write_json(w, JSON_SCHEMA, JSON_SCHEMA_VERSION, p)
}

/// Folded stacks (`root;caller;leaf count` per line), as flamegraph.pl and inferno read.
pub fn folded(w: &mut dyn std::io::Write, p: &Profile) -> std::io::Result<()> {
    for (s, n) in folded_lines(p, &|st| st.samples) {
        writeln!(w, "{s} {n}")?;
    }
    Ok(())
}

/// Folded stacks (`root;caller;leaf`, sorted, equal stacks merged) weighted by `weight`
/// (samples, or a group value such as slots).
pub fn folded_lines(
    p: &Profile,
    weight: &dyn Fn(&crate::hotspots::Stack) -> u64,
) -> Vec<(String, u64)> {
    let mut lines: Vec<(String, u64)> = Vec::with_capacity(p.stacks.len());
    let mut merged: HashMap<String, u64> = HashMap::new();
    for st in &p.stacks {
        let mut s = String::new();
        let mut prev: Option<&str> = None;
        for (k, &i) in st.frames.iter().rev().enumerate() {
            let f = &p.frames[i];
            // Unsymbolized kernel frames in a row say nothing more than one does.
            if f.function == "[kernel]" && prev == Some("[kernel]") {
                continue;
            }
            prev = Some(&f.function);
            if k > 0 {
                s.push(';');
            }
            // `;` separates frames and the last space separates the count: keep both out.
            s.push_str(&f.function.replace([';', '\n'], "_"));
        }
        *merged.entry(s).or_default() += weight(st);
    }
    lines.extend(merged);
    lines.sort();
    lines
}

/// The terminal report: function table, then the annotation, then notes.
pub fn text(w: &mut dyn std::io::Write, p: &Profile) -> std::io::Result<()> {
    w.write_all(text_string(p).as_bytes())
}

fn text_string(p: &Profile) -> String {
    let mut out = String::new();
    let c = &p.counts;
    let _ = writeln!(
        out,
        "{} samples of {} ({} lost)",
        c.samples, p.event, c.lost
    );
    let _ = writeln!(out);
    out.push_str(&function_table(p));
    if let Some(a) = &p.annotation {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{} ({}), {} samples, {} syntax; => marks the hottest instruction",
            a.function,
            a.module,
            a.samples,
            match a.syntax {
                Syntax::Intel => "Intel",
                Syntax::Att => "AT&T",
            }
        );
        let show = shown_instructions(a);
        let mut last: Option<(Option<&str>, Option<u32>)> = None;
        let mut prev_shown: Option<usize> = None;
        for (k, r) in a.instructions.iter().enumerate() {
            if !show[k] {
                continue;
            }
            if prev_shown.is_some_and(|p| p + 1 != k) || (prev_shown.is_none() && k > 0) {
                let _ = writeln!(out, "{:>10}  ...", "");
                last = None;
            }
            prev_shown = Some(k);
            let here = (r.file.as_deref(), r.line);
            if r.line.is_some() && last != Some(here) {
                let fname = r
                    .file
                    .as_deref()
                    .map(|f| f.rsplit('/').next().unwrap_or(f))
                    .unwrap_or("?");
                let _ = writeln!(
                    out,
                    "{:>8}  {}:{}  {}",
                    "",
                    fname,
                    r.line.unwrap_or(0),
                    r.source.as_deref().unwrap_or("")
                );
            }
            last = Some(here);
            let pct = if r.samples > 0 {
                format!("{:.1}%", r.percent)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{:>7} {} {:>8x}:  {}",
                pct,
                if r.hottest { "=>" } else { "  " },
                r.address,
                r.text
            );
        }
    }
    if let Some(a) = &p.annotation {
        let show = shown_instructions(a);
        let n = show.iter().filter(|&&b| b).count();
        if show.last() == Some(&false) {
            let _ = writeln!(out, "{:>10}  ...", "");
        }
        if n < a.instructions.len() {
            let _ = writeln!(
                out,
                "({n} of {} instructions shown, around the {HOT_WINDOWS} hottest; --json has all)",
                a.instructions.len()
            );
        }
    }
    if !p.notes.is_empty() {
        let _ = writeln!(out);
        for n in &p.notes {
            let _ = writeln!(out, "note: {n}");
        }
    }
    out
}

/// The function table: [Children, Self,] Samples, %, then one column per sort key.
fn function_table(p: &Profile) -> String {
    let children = p.functions.iter().any(|r| r.children.is_some());
    let mut header: Vec<&str> = Vec::new();
    if children {
        header.extend(["Children", "Self", "Samples"]);
    } else {
        header.extend(["Samples", "%"]);
    }
    let numeric = header.len();
    for k in &p.sort {
        header.push(match k {
            SortKey::Comm => "Command",
            SortKey::Pid => "Pid:Command",
            SortKey::Dso => "Module",
            SortKey::Sym => "Function",
        });
    }
    let mut t = tma_table(&header);
    for r in &p.functions {
        let mut row = Vec::with_capacity(header.len());
        if children {
            row.push(format!("{:.2}%", r.children_percent.unwrap_or(0.0)));
            row.push(format!("{:.2}%", r.percent));
            row.push(r.samples.to_string());
        } else {
            row.push(r.samples.to_string());
            row.push(format!("{:.1}%", r.percent));
        }
        for k in &p.sort {
            row.push(match k {
                SortKey::Comm => r.comm.clone().unwrap_or_default(),
                SortKey::Pid => format!(
                    "{}:{}",
                    r.pid.unwrap_or(-1),
                    r.comm.as_deref().unwrap_or("")
                ),
                SortKey::Dso => r.module.clone(),
                SortKey::Sym => r.function.clone(),
            });
        }
        t.push(row);
    }
    let right: Vec<usize> = (0..numeric).collect();
    render_rows(&t, &right)
}

/// Functions longer than this are shown around their hottest instructions only.
const FULL_LISTING_MAX: usize = 80;
const HOT_WINDOWS: usize = 10;
const WINDOW: usize = 6;

fn shown_instructions(a: &Annotation) -> Vec<bool> {
    let n = a.instructions.len();
    if n <= FULL_LISTING_MAX {
        return vec![true; n];
    }
    let mut hot: Vec<usize> = (0..n).filter(|&i| a.instructions[i].samples > 0).collect();
    hot.sort_by(|&x, &y| a.instructions[y].samples.cmp(&a.instructions[x].samples));
    hot.truncate(HOT_WINDOWS);
    let mut show = vec![false; n];
    for h in hot {
        for s in show
            .iter_mut()
            .take((h + WINDOW + 1).min(n))
            .skip(h.saturating_sub(WINDOW))
        {
            *s = true;
        }
    }
    if !show.iter().any(|&b| b) {
        for s in show.iter_mut().take(FULL_LISTING_MAX) {
            *s = true;
        }
    }
    show
}

struct Rows {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Rows {
    fn push(&mut self, r: Vec<String>) {
        self.rows.push(r);
    }
}

fn tma_table(h: &[&str]) -> Rows {
    Rows {
        header: h.iter().map(|s| s.to_string()).collect(),
        rows: Vec::new(),
    }
}

/// Plain padded columns (right-aligned numbers), last column unpadded.
fn render_rows(t: &Rows, right: &[usize]) -> String {
    let n = t.header.len();
    let mut w = vec![0usize; n];
    for r in std::iter::once(&t.header).chain(t.rows.iter()) {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |r: &Vec<String>, out: &mut String| {
        let mut s = String::new();
        for (i, c) in r.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            if i + 1 == n {
                s.push_str(c);
            } else if right.contains(&i) {
                let _ = write!(s, "{c:>width$}", width = w[i]);
            } else {
                let _ = write!(s, "{c:<width$}", width = w[i]);
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(&t.header, &mut out);
    for r in &t.rows {
        line(r, &mut out);
    }
    out
}
