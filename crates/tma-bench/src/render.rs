//! How `tma bench` results are written: the terminal table (with the clock, preset and note
//! lines, the SHA-256 bounds and the comparison with reference values) and the `tma.bench`
//! JSON document.

use std::io::Write;

use tma_render::OutputError;

use crate::compare::CompareRow;
use crate::doc::BenchDoc;
use crate::sweep::{BenchOutcome, InputError};
use crate::{Figure, FormReport, PairResult, ShaReport, ThroughputResult};

/// JSON schema name of `tma bench --json`: the envelope around a [`BenchDoc`]: `forms`
/// ([`FormReport`]s), `errors` ([{input, error}]), `sha` (the preset's report or null) and
/// `compare` ([`CompareRow`]s, empty without references).
pub const JSON_SCHEMA: &str = "tma.bench";
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// The `tma.bench` JSON document ([`BenchDoc`]).
pub fn json(w: &mut dyn Write, o: &BenchOutcome) -> Result<(), OutputError> {
    tma_render::write_json(w, JSON_SCHEMA, JSON_SCHEMA_VERSION, &BenchDoc::of(o))
}

/// Lines of the text report fit this many columns when the output is not a terminal.
pub const DEFAULT_WIDTH: usize = 100;

/// Bodies longer than this (in characters) are named in the table, not spelled out.
const LABEL_MAX: usize = 48;

/// The terminal report in [`DEFAULT_WIDTH`] columns; `verbose` shows every chain count, the
/// pairs not measured and every long body in full.
pub fn text(w: &mut dyn Write, o: &BenchOutcome, verbose: bool) -> Result<(), OutputError> {
    text_width(w, o, verbose, DEFAULT_WIDTH)
}

/// The terminal report with every line within `width` columns (the terminal's): the table's
/// notes wrap inside their column, a long body is named by what it is and its instruction
/// count (`-v` prints it in full below the table; JSON always has it), and the lines under
/// the table wrap with a hanging indent.
pub fn text_width(
    w: &mut dyn Write,
    o: &BenchOutcome,
    verbose: bool,
    width: usize,
) -> Result<(), OutputError> {
    let width = width.max(40);
    let mut body = Vec::new();
    table(&mut body, &o.forms, &o.errors, verbose, width)?;
    let mut rest = Vec::new();
    if verbose {
        long_bodies(&mut rest, &o.forms)?;
    }
    footer(&mut rest, &o.forms)?;
    if let Some(s) = &o.sha {
        sha(&mut rest, s)?;
    }
    w.write_all(&body)?;
    for line in String::from_utf8_lossy(&rest).lines() {
        for l in fit(line, width) {
            writeln!(w, "{l}")?;
        }
    }
    if let Some(rows) = &o.compare {
        compare(w, rows)?;
    }
    if let Some(sig) = o.interrupted {
        writeln!(
            w,
            "interrupted by {sig}: {} measured before it; the rest was not measured",
            match o.forms.len() {
                1 => "1 form".to_string(),
                n => format!("{n} forms"),
            }
        )?;
    }
    Ok(())
}

/// `line` wrapped to `width` columns, continuation lines indented two more than it.
fn fit(line: &str, width: usize) -> Vec<String> {
    if line.chars().count() <= width {
        return vec![line.to_string()];
    }
    let lead = line.len() - line.trim_start().len();
    let indent = " ".repeat(lead + 2);
    let mut out = tma_render::wrap(line.trim_start(), &indent, width);
    if let Some(first) = out.first_mut() {
        *first = format!("{}{}", &line[..lead], first.trim_start());
    }
    out
}

/// What the table calls a form: its body when short, else what the body is and its
/// instruction count (`SHA-256 block mix (102 instructions)`); `Some` full body with it when
/// shortened.
fn form_label(f: &FormReport) -> (String, Option<String>) {
    let body = f.instructions.join("; ");
    if body.chars().count() <= LABEL_MAX {
        return (body, None);
    }
    let name = if body == crate::sha::block_body() {
        "SHA-256 block mix".to_string()
    } else {
        format!("{} …", f.instructions.first().map_or("", String::as_str))
    };
    let n = f.instructions.len();
    let label = format!("{name} ({n} instruction{})", if n == 1 { "" } else { "s" });
    (label, Some(body))
}

/// `-v`: the bodies the table names, in full.
fn long_bodies(w: &mut dyn Write, forms: &[FormReport]) -> Result<(), OutputError> {
    for f in forms {
        if let (label, Some(body)) = form_label(f) {
            writeln!(w, "{label}: {body}")?;
        }
    }
    Ok(())
}

fn fmt_fig(f: &Figure) -> String {
    let mark = if f.snapped_ok { "" } else { "*" };
    let unconverged = if f.converged || f.dropped { "" } else { "?" };
    format!("{:.3}{mark}{unconverged}", f.median)
}

/// The note of a figure that did not converge: its independent repetitions and their spread.
fn unconverged_note(f: &Figure) -> Option<String> {
    if f.converged {
        return None;
    }
    let s = crate::stats::sorted(&f.repetitions);
    if s.is_empty() && !f.contended.is_empty() {
        return Some(format!(
            "UNCONVERGED: every repetition ({}) was discarded because the contention sentinel around it read off its expected cost; no figure",
            f.contended.len()
        ));
    }
    let (lo, hi) = (s.first()?, s.last()?);
    if f.dropped {
        return Some(format!(
            "not the best: stopped after {} repetitions ({lo:.3}-{hi:.3}) more than 5% above the best chain count",
            s.len()
        ));
    }
    let agreed = crate::stats::agreed(&f.repetitions, 0.01);
    let mut n = if f.outvoted_plausible {
        format!(
            "UNCONVERGED: repetitions agreed on {:.3}, which no pipe count explains, over a lower {lo:.3} that one does but no other repetition confirmed ({} repetitions, {lo:.3}-{hi:.3}); the lower is shown",
            agreed.unwrap_or(*hi),
            s.len()
        )
    } else if agreed.is_some() {
        "UNCONFIRMED: the repetitions agree, but the throughput check failed (see the note below)"
            .to_string()
    } else {
        format!(
            "UNCONVERGED: {} repetitions {lo:.3}-{hi:.3} (spread {:.1}%), the lowest never confirmed within 1%; the lowest is shown, the true figure may be lower",
            s.len(),
            f.repetition_spread() * 100.0
        )
    };
    if !f.contended.is_empty() {
        let c = crate::stats::sorted(&f.contended);
        n.push_str(&format!(
            "; {} more discarded because the contention sentinel around them read {:.3}-{:.3} cycles, off its expected cost (ALUs shared with another tenant, or the clock calibration off)",
            f.contended.len(),
            c[0],
            c[c.len() - 1]
        ));
    }
    Some(n)
}

/// `note` with the unconverged note of `f` first, when it has one.
fn with_unconverged(f: &Figure, note: String) -> String {
    match unconverged_note(f) {
        Some(u) if note.is_empty() => u,
        Some(u) => format!("{u}; {note}"),
        None => note,
    }
}

fn spread(f: &Figure) -> String {
    format!("{:.3}-{:.3}", f.p10, f.p90)
}

fn accepted(f: &Figure) -> String {
    format!("{}/{}", f.rejected, f.rejected + f.accepted)
}

/// The table's rows: a label column repeated only on the first row of a form, an optional
/// raw-ticks column (when several clocks were used), a note last.
struct Rows {
    t: comfy_table::Table,
    raw_ticks: bool,
    /// The notes, each once, printed under the table; a row's note cell holds `[k]`.
    notes: Vec<String>,
    /// Labels wrap (at spaces) to this many columns.
    label_width: usize,
}

impl Rows {
    fn new(raw_ticks: bool) -> Rows {
        let mut header = vec![
            "instruction",
            "pair",
            "latency",
            "throughput",
            "clock",
            "spread p10-p90",
            "chains",
            "rejected",
        ];
        if raw_ticks {
            header.push("raw tsc ticks");
        }
        header.push("note");
        Rows {
            t: tma_render::table(&header),
            raw_ticks,
            notes: Vec::new(),
            label_width: usize::MAX,
        }
    }

    /// The note cell of a row: `[k]` for note k under the table (empty without a note).
    fn note_ref(&mut self, note: String) -> String {
        if note.is_empty() {
            return note;
        }
        let k = match self.notes.iter().position(|n| *n == note) {
            Some(i) => i + 1,
            None => {
                self.notes.push(note);
                self.notes.len()
            }
        };
        format!("[{k}]")
    }

    /// A label wrapped to the label column.
    fn label(&self, label: String) -> String {
        if label.chars().count() <= self.label_width {
            return label;
        }
        tma_render::wrap(&label, "", self.label_width).join("\n")
    }

    /// A figure row (`fig` fills the clock, spread, rejected and raw-ticks columns).
    fn figure(&mut self, cells: [String; 4], chains: String, fig: &Figure, note: String) {
        let [label, pair, lat, tp] = cells;
        let note = self.note_ref(note);
        let mut row = vec![
            self.label(label),
            pair,
            lat,
            tp,
            fig.clock.to_string(),
            spread(fig),
            chains,
            accepted(fig),
        ];
        if self.raw_ticks {
            row.push(format!("{:.3}", fig.raw_tsc_ticks));
        }
        row.push(note);
        self.t.add_row(row);
    }

    /// A row without a figure: label, pair, the latency and throughput cells, a note.
    fn plain(&mut self, label: String, pair: String, lat: &str, tp: &str, note: String) {
        let note = self.note_ref(note);
        let mut row = vec![self.label(label), pair, lat.into(), tp.into()];
        row.extend(std::iter::repeat_n(String::new(), 4));
        if self.raw_ticks {
            row.push(String::new());
        }
        row.push(note);
        self.t.add_row(row);
    }
}

fn table(
    w: &mut dyn Write,
    forms: &[FormReport],
    errors: &[InputError],
    verbose: bool,
    width: usize,
) -> Result<(), OutputError> {
    let mut rows = Rows::new(forms.iter().any(|f| f.clocks.len() > 1));
    // The other columns take about 80 (90 with raw ticks); the label gets the rest.
    let others = if rows.raw_ticks { 90 } else { 80 };
    rows.label_width = width.saturating_sub(others).max(20);
    for f in forms {
        form_rows(&mut rows, f, verbose);
    }
    for e in errors {
        rows.plain(e.input.clone(), "error".into(), "", "", e.error.clone());
    }
    tma_render::align_right(&mut rows.t, &[2, 3, 6, 7]);
    for line in rows.t.to_string().lines() {
        writeln!(w, "{}", line.trim_end())?;
    }
    for (i, n) in rows.notes.iter().enumerate() {
        for l in fit(&format!("[{}] {n}", i + 1), width) {
            writeln!(w, "{l}")?;
        }
    }
    Ok(())
}

/// The rows of one form: latency pairs, pairs not measured (verbose), throughput.
fn form_rows(rows: &mut Rows, f: &FormReport, verbose: bool) {
    let body_text = f.instructions.join("; ");
    let (label_text, _) = form_label(f);
    let name = match &f.preset {
        Some(p) => format!("{label_text} [{}]", p.split(':').next().unwrap_or(p)),
        None => label_text,
    };
    let mut first = true;
    let mut label = || -> String {
        if std::mem::take(&mut first) {
            name.clone()
        } else {
            String::new()
        }
    };
    for p in &f.latency {
        for fig in &p.figures {
            let pair = if p.pair == "body" {
                "body".into()
            } else {
                format!("{} {}->{}", p.pair, p.from, p.to)
            };
            let lat = if p.derived.is_some() {
                format!("≤{}", fmt_fig(fig))
            } else {
                fmt_fig(fig)
            };
            let cells = [label(), pair, lat, String::new()];
            let note = with_unconverged(fig, latency_note(p, &body_text));
            rows.figure(cells, "1".into(), fig, note);
        }
    }
    if verbose {
        for (pair, why) in &f.latency_skipped {
            rows.plain(
                label(),
                pair.clone(),
                "-",
                "",
                format!("not measured: {why}"),
            );
        }
    }
    if let Some(tp) = &f.throughput {
        for (chains, fig, note) in throughput_rows(f, tp, verbose) {
            let cells = [label(), "throughput".into(), String::new(), fmt_fig(fig)];
            rows.figure(cells, chains.to_string(), fig, with_unconverged(fig, note));
        }
    } else if let Some(n) = &f.throughput_note {
        rows.plain(label(), "throughput".into(), "", "-", n.clone());
    }
}

/// A latency row's note: the derivation of a cross-file pair, the pair's own note, and the
/// timed body when it is not the body as written.
fn latency_note(p: &PairResult, body_text: &str) -> String {
    let mut note = p.note.clone().unwrap_or_default();
    if let Some(d) = &p.derived {
        let n = format!(
            "derived, not measured alone: chain with connector `{}` = {:.3}, connector round trip `{}` = {:.3}, so latency in [{:.3}, {:.3}] (each connector >= 1 cycle)",
            d.connector, d.chain, d.round_trip_body, d.round_trip, d.lower, d.upper
        );
        note = if note.is_empty() {
            n
        } else {
            format!("{n}; {note}")
        };
    }
    if p.body != body_text {
        note = if note.is_empty() {
            format!("timed: {}", p.body)
        } else {
            format!("timed: {}; {note}", p.body)
        };
    }
    note
}

/// (chain count, figure, note) per throughput row: every chain count when verbose, else the
/// best per clock.
fn throughput_rows<'a>(
    f: &FormReport,
    tp: &'a ThroughputResult,
    verbose: bool,
) -> Vec<(usize, &'a Figure, String)> {
    if verbose {
        return tp
            .per_chains
            .iter()
            .flat_map(|c| {
                c.figures
                    .iter()
                    .map(move |fig| (c.chains, fig, String::new()))
            })
            .collect();
    }
    let note = if f.preset.as_deref().is_some_and(|p| p.contains("rdx:rax")) {
        "independent copies (rax/rdx reloaded)"
    } else {
        "best over chain sweep"
    };
    tp.best
        .iter()
        .map(|fig| (tp.best_chains, fig, note.to_string()))
        .collect()
}

/// The legend, the clock lines (from the first form: they are the same machine), presets
/// and notes (each once).
fn footer(w: &mut dyn Write, forms: &[FormReport]) -> Result<(), OutputError> {
    writeln!(w, "cycles per instruction (per body copy for several instructions); * = not within 2% of an integer or of 1/n for n up to {} (this CPU's widest set of identical pipes)", crate::stats::pipes())?;
    if forms.iter().any(|f| all_figures(f).any(|g| !g.converged)) {
        writeln!(w, "? = UNCONVERGED: no two independent repetitions agreed within 1% within the time budget ({} repetitions); the lowest is shown and the note gives the spread; measure again on a quieter machine", crate::engine::MAX_ROUNDS)?;
    }
    if forms
        .iter()
        .any(|f| f.latency.iter().any(|p| p.derived.is_some()))
    {
        writeln!(w, "≤ = upper bound for a pair across register files (chain through a connector instruction minus 1 cycle); see the note for both bounds")?;
    }
    if let Some(f) = forms.first() {
        clock_lines(w, f)?;
    }
    let mut seen = Vec::new();
    for f in forms {
        if let Some(p) = &f.preset {
            writeln!(w, "preset {p}")?;
        }
        for n in &f.notes {
            if !seen.contains(n) {
                writeln!(w, "note: {n}")?;
                seen.push(n.clone());
            }
        }
    }
    Ok(())
}

/// Every reported figure of a form (latency pairs and the best throughput).
fn all_figures(f: &FormReport) -> impl Iterator<Item = &Figure> {
    f.latency
        .iter()
        .flat_map(|p| p.figures.iter())
        .chain(f.throughput.iter().flat_map(|t| t.best.iter()))
}

fn clock_lines(w: &mut dyn Write, f: &FormReport) -> Result<(), OutputError> {
    for c in &f.clocks {
        match (&c.unavailable, c.self_check) {
            (Some(why), _) => {
                let why = why.strip_prefix(&format!("{}: ", c.clock)).unwrap_or(why);
                writeln!(w, "{}: {why}", c.clock)?
            }
            (None, Some(r)) => {
                let ok = if c.self_check_ok == Some(true) {
                    "ok"
                } else {
                    "FAILED, figures withheld"
                };
                write!(w, "{}: self-check imul/add = {r:.3} ({ok})", c.clock)?;
                if let Some(t) = c.tsc_ticks_per_cycle {
                    write!(
                        w,
                        "; {t:.4} TSC ticks per core cycle, so raw rdtsc would read {:.0}% low",
                        (1.0 - t) * 100.0
                    )?;
                }
                writeln!(w, "; pinned to CPU {}", f.cpu)?;
            }
            (None, None) => writeln!(w, "{}: no figures", c.clock)?,
        }
    }
    Ok(())
}

fn compare(w: &mut dyn Write, rows: &[CompareRow]) -> Result<(), OutputError> {
    let mut t = tma_render::table(&[
        "instruction",
        "latency",
        "ref",
        "diff",
        "throughput",
        "ref",
        "diff",
        "",
    ]);
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let p = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:+.1}%"));
    for r in rows {
        t.add_row(vec![
            r.instruction.clone(),
            f(r.latency),
            f(r.ref_latency),
            p(r.latency_diff_pct),
            f(r.throughput),
            f(r.ref_throughput),
            p(r.throughput_diff_pct),
            if r.over_5pct {
                "DIFFERS >5%".into()
            } else {
                String::new()
            },
        ]);
    }
    tma_render::align_right(&mut t, &[1, 2, 3, 4, 5, 6]);
    writeln!(w, "\ncomparison with reference values:\n{t}")?;
    Ok(())
}

fn sha(w: &mut dyn Write, s: &ShaReport) -> Result<(), OutputError> {
    let b = &s.bounds;
    writeln!(w, "\nSHA-256 lower bounds (cycles per 64-byte block):")?;
    writeln!(
        w,
        "  one stream       {:.1} cycles/block = {:.2} cycles/byte (latency chain)",
        b.one_stream_cycles_per_block,
        b.one_stream_cycles_per_byte()
    )?;
    writeln!(
        w,
        "  interleaved      {:.1} cycles/block = {:.2} cycles/byte (throughput; bound by {}; K streams: at least one stream / K)",
        b.interleaved_cycles_per_block,
        b.interleaved_cycles_per_byte(),
        b.interleaved_binding
    )?;
    if let Some(r) = &b.reference {
        writeln!(
            w,
            "  reference        {:.1} cycles/block = {:.2} cycles/byte (not a bound: a straightforward schedule of this mix, {}, runs at this)",
            r.cycles,
            r.cycles / 64.0,
            r.name
        )?;
    }
    for x in &b.beaten {
        writeln!(w, "  NOT A LOWER BOUND: {}", x.message())?;
    }
    if !s.unconfirmed.is_empty() {
        writeln!(
            w,
            "  UNCONFIRMED: {} of the measured inputs did not converge (`{}`); the bounds are what this run measured, likely too high: measure again on a quieter machine",
            s.unconfirmed.len(),
            s.unconfirmed.join("`, `")
        )?;
    }
    writeln!(w, "derivation:")?;
    for line in &b.derivation {
        writeln!(w, "  {line}")?;
    }
    writeln!(w, "  model: {}", b.model)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(reps: &[f64], contended: &[f64], outvoted: bool) -> Figure {
        let low = crate::stats::sorted(reps).first().copied().unwrap_or(0.0);
        Figure {
            repetitions: reps.to_vec(),
            contended: contended.to_vec(),
            outvoted_plausible: outvoted,
            ..Figure::tsc_for_tests(low, false, 0)
        }
    }

    /// The SHA bounds print the reference point as no bound, and each term the block body beat
    /// as no lower bound; the bound printed is one that the body does not beat.
    #[test]
    fn sha_bounds_print_the_reference_and_the_beaten_terms() {
        use crate::sha::{bounds, ShaFigures, ShaOp, BLOCK_MIX, MIXES};
        let tp: Vec<(ShaOp, f64)> = BLOCK_MIX
            .iter()
            .map(|(o, _)| *o)
            .zip([1.0, 0.5, 1.0, 0.25, 0.5, 0.5])
            .collect();
        let t = |o: ShaOp| tp.iter().find(|(x, _)| *x == o).unwrap().1;
        // Every pair shares one pipe (65.5 cycles per pipe); the body ran at 45.
        let mixed = MIXES
            .iter()
            .map(|ops| (ops.to_vec(), ops.iter().map(|&o| t(o)).sum()))
            .collect();
        let b = bounds(&ShaFigures {
            rnds2_lat_src: 4.0,
            rnds2_lat_dst: 4.0,
            msg2_lat: 3.0,
            tp,
            mixed,
            block_body: Some(45.0),
        })
        .unwrap();
        let mut out = Vec::new();
        sha(
            &mut out,
            &ShaReport {
                forms: Vec::new(),
                bounds: b,
                unconfirmed: Vec::new(),
            },
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("interleaved      32.0 cycles/block = 0.50 cycles/byte (throughput; bound by sha256rnds2 alone"), "{text}");
        assert!(text.contains("reference        45.0 cycles/block = 0.70 cycles/byte (not a bound: a straightforward schedule of this mix, the block mix measured as one body, runs at this)"), "{text}");
        assert!(text.contains("NOT A LOWER BOUND: the model's term sha256rnds2's pipe (65.5 cycles/block = 1.023 cycles/byte) was beaten by the block mix measured as one body (45.0 cycles/block = 0.703 cycles/byte): it is not a lower bound"), "{text}");
    }

    /// The `--preset sha` table printed lines 3,156 characters wide, the
    /// instruction column padded to the 102-instruction block body. That body is named with
    /// its count (in full with -v), notes wrap, and every line fits the width.
    #[test]
    fn long_bodies_are_named_and_lines_fit_the_width() {
        let form = |body: &str, note: &str| {
            let instructions: Vec<String> = body.split("; ").map(str::to_string).collect();
            let best = fig(&[0.5, 0.5], &[], false);
            FormReport {
                input: body.to_string(),
                preset: None,
                instructions,
                bytes: String::new(),
                cpu: 1,
                clocks: Vec::new(),
                latency: Vec::new(),
                latency_skipped: Vec::new(),
                throughput: Some(ThroughputResult {
                    best: vec![best],
                    best_chains: 4,
                    per_chains: Vec::new(),
                    skipped_chains: Vec::new(),
                }),
                throughput_note: None,
                notes: vec![note.to_string()],
            }
        };
        let block = crate::sha::block_body();
        let n = block.split("; ").count();
        let named = format!("SHA-256 block mix ({n} instructions)");
        let long_note = "throughput not confirmed: 3 independent imul chains ran at 1.015 cycles \
                         per imul instead of 1.000 (every x86 core), so the clock calibration is \
                         off for independent work right now (shared host)";
        let forms = vec![
            form("paddd xmm1, xmm2", long_note),
            form("sha256rnds2 xmm1, xmm2; palignr xmm3, xmm2, 4", long_note),
            form(&block, long_note),
        ];
        for width in [100, 200] {
            let mut out = Vec::new();
            table(&mut out, &forms, &[], false, width).unwrap();
            let mut under = Vec::new();
            footer(&mut under, &forms).unwrap();
            let text = String::from_utf8(out).unwrap();
            let under = String::from_utf8(under).unwrap();
            // The lines under the table are fitted as `text_width` fits them.
            let fitted: Vec<String> = text
                .lines()
                .map(str::to_string)
                .chain(under.lines().flat_map(|l| fit(l, width)))
                .collect();
            for l in &fitted {
                assert!(
                    l.chars().count() <= width,
                    "{width}: {} wide: {l}",
                    l.chars().count()
                );
            }
            let text = fitted.join("\n");
            assert!(text.contains(&named) || width < 200, "{text}");
            assert!(text.contains("SHA-256 block mix"), "{text}");
            assert!(
                text.contains("sha256rnds2 xmm1, xmm2; palignr xmm3, xmm2, 4") || width < 200,
                "{text}"
            );
            assert!(!text.contains("movdqa xmm0, [rbx]"), "{text}");
        }
        let mut v = Vec::new();
        long_bodies(&mut v, &forms).unwrap();
        let v = String::from_utf8(v).unwrap();
        assert_eq!(v, format!("{named}: {block}\n"));
        let other = form(&vec!["add rax, rcx"; 20].join("; "), "");
        assert_eq!(form_label(&other).0, "add rax, rcx … (20 instructions)");
    }

    /// Each reason a figure is not clean gets its own note, whatever else happened to it.
    #[test]
    fn unconverged_notes_name_the_reason() {
        let note = |f: Figure| unconverged_note(&f).unwrap();
        // Agreeing repetitions, some others discarded by the sentinel: the throughput check
        // failed (not "never confirmed").
        let n = note(fig(&[0.2502, 0.2513], &[0.3, 0.31], false));
        assert!(n.starts_with("UNCONFIRMED: the repetitions agree"), "{n}");
        assert!(n.contains("2 more discarded"), "{n}");
        // Three agreeing on an implausible value over a plausible lower one.
        let n = note(fig(&[0.25, 0.284, 0.2841, 0.2842], &[], true));
        assert!(
            n.starts_with("UNCONVERGED: repetitions agreed on 0.284, which no pipe count explains, over a lower 0.250"),
            "{n}"
        );
        // Nothing agrees.
        let n = note(fig(&[0.25, 0.3], &[], false));
        assert!(n.contains("the lowest never confirmed within 1%"), "{n}");
        // Everything discarded.
        let n = note(fig(&[], &[0.3], false));
        assert!(n.contains("every repetition (1) was discarded"), "{n}");
    }
}
