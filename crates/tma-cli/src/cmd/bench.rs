//! `tma bench`: instruction latency and throughput in core cycles.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use tma_bench::{
    asm, ClockChoice, ClockKind, FormReport, InitValue, Method, Options, PairFilter, ShaReport,
    Source,
};

/// Measure instruction latency (per input->output operand pair) and reciprocal throughput
/// (independent chains swept) in core cycles. Runs in a forked child pinned to one CPU; works
/// without a PMU (calibrated rdtsc).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  tma bench 'sha256rnds2 xmm1, xmm2'\n  tma bench 'mulx r64, r64, r64' --lat\n  tma bench 'add rax, rcx; imul rdx, rax' --tp -v\n  tma bench 'div rcx' --init rcx=7,rdx=0\n  tma bench 'mulps xmm0, xmm1' --init xmm1=0x3f800000,xmm0=f64:2.5\n  tma bench --bytes 0f38cbca\n  tma bench --preset sha\n  tma bench --file forms.txt --progress --compare ref.csv\n\nRegisters: r15 is the loop counter, r14 points at a 1 MiB scratch buffer (use [r14+disp]), rsp is the stack; bodies may not write them."
)]
pub struct Args {
    /// Instructions in Intel syntax separated by `;`. Operand kinds (r64, xmm, ymm, m64) let tma pick.
    pub body: Option<String>,
    /// Raw machine code in hex instead of text (e.g. 0f38cbca).
    #[arg(long, value_name = "HEX", conflicts_with_all = ["body", "file", "preset"])]
    pub bytes: Option<String>,
    /// A file with one instruction body per line (`#` comments).
    #[arg(long, value_name = "LIST", conflicts_with_all = ["body", "preset"])]
    pub file: Option<PathBuf>,
    /// A predefined set: `sha` (SHA-NI instructions and the SHA-256 bounds they imply).
    #[arg(long, value_parser = ["sha"], conflicts_with = "body")]
    pub preset: Option<String>,
    /// Measure latency (per operand pair).
    #[arg(long)]
    pub lat: bool,
    /// Measure reciprocal throughput.
    #[arg(long)]
    pub tp: bool,
    /// Latency pair to measure, e.g. 2->1 (operands numbered from 1, implicit ones after).
    #[arg(long, value_name = "IN->OUT")]
    pub pair: Option<String>,
    /// Latency from this register.
    #[arg(long, value_name = "REG")]
    pub from: Option<String>,
    /// Latency to this register.
    #[arg(long, value_name = "REG")]
    pub to: Option<String>,
    /// Independent chain counts swept for throughput.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,12")]
    pub chains: Vec<usize>,
    /// Cycle source: auto (perf cycles when available, else calibrated tsc), tsc, perf, rdpmc, all.
    #[arg(long, default_value = "auto", value_parser = ["auto", "tsc", "perf", "rdpmc", "all"])]
    pub clock: String,
    /// Initial register values, e.g. rcx=3,rdx=0. Vector registers: xmm1=0x3f800000 (hex digit
    /// count sets the broadcast lane: <=8 digits 32-bit, <=16 64-bit, <=32 a full 128-bit value,
    /// <=64 256-bit, <=128 512-bit; last digits are lane 0), or xmm1=f32:1.5 / f64:1.5.
    /// Unnamed vector registers hold f32 1.5 in every lane (normal, never denormal).
    #[arg(long, value_delimiter = ',', value_name = "REG=VALUE")]
    pub init: Vec<String>,
    /// The two unroll counts whose difference is taken.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "A,B",
        default_value = "64,128"
    )]
    pub unroll: Vec<usize>,
    /// CPU to pin the measurement to (default: the current one).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// 21 repetitions x 5 trials x 200k-tick regions (slower, for noisy hosts).
    #[arg(long)]
    pub precise: bool,
    /// Accepted repetitions per figure.
    #[arg(long)]
    pub reps: Option<usize>,
    /// Give up on one input after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Compare with a CSV of reference values (columns: instruction,latency,throughput); differences over 5% are marked.
    #[arg(long, value_name = "FILE")]
    pub compare: Option<PathBuf>,
    /// Show progress on stderr (for --file and --preset): a bar on a terminal, one line per
    /// input otherwise. Never written to stdout or the -o file.
    #[arg(long)]
    pub progress: bool,
    /// Show every chain count and clock details.
    #[arg(short, long)]
    pub verbose: bool,
    /// JSON output (schema tma.bench, version 1).
    #[arg(long)]
    pub json: bool,
    /// Write the output to FILE (atomically).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// A reference row from --compare.
#[derive(Debug, Clone, Serialize)]
struct RefRow {
    latency: Option<f64>,
    throughput: Option<f64>,
}

#[derive(Debug, Serialize)]
struct CompareRow {
    instruction: String,
    latency: Option<f64>,
    ref_latency: Option<f64>,
    latency_diff_pct: Option<f64>,
    throughput: Option<f64>,
    ref_throughput: Option<f64>,
    throughput_diff_pct: Option<f64>,
    over_5pct: bool,
}

#[derive(Debug, Serialize)]
struct ErrorRow {
    input: String,
    error: String,
}

#[derive(Debug, Serialize)]
struct Payload<'a> {
    forms: &'a [FormReport],
    errors: &'a [ErrorRow],
    sha: Option<&'a ShaReport>,
    compare: &'a [CompareRow],
}

fn norm(s: &str) -> String {
    s.to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" ,", ",")
}

fn parse_compare(text: &str) -> anyhow::Result<HashMap<String, RefRow>> {
    let mut out = HashMap::new();
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        bail!("--compare: the file is empty; expected a header `instruction,latency,throughput`")
    };
    let cols: Vec<String> = split_csv(header)
        .iter()
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let idx = |name: &str| cols.iter().position(|c| c == name);
    let (Some(ii), li, ti) = (idx("instruction"), idx("latency"), idx("throughput")) else {
        bail!("--compare: the header must name the columns instruction,latency,throughput (got `{header}`)")
    };
    for (n, line) in lines {
        let f = split_csv(line);
        let num = |i: Option<usize>| -> anyhow::Result<Option<f64>> {
            match i
                .and_then(|i| f.get(i))
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
            {
                None => Ok(None),
                Some(s) => s
                    .parse::<f64>()
                    .map(Some)
                    .with_context(|| format!("--compare line {}: `{s}` is not a number", n + 1)),
            }
        };
        let Some(ins) = f.get(ii) else {
            bail!("--compare line {}: missing instruction column", n + 1)
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

fn options(a: &Args) -> anyhow::Result<Options> {
    let mut init = Vec::new();
    let mut vec_init = Vec::new();
    for kv in &a.init {
        match tma_bench::parse_init(kv)? {
            InitValue::Gpr(r, v) => init.push((r, v)),
            InitValue::Vector(r, b) => vec_init.push((r, b)),
        }
    }
    let [u1, u2] = a.unroll[..] else {
        bail!("--unroll needs two counts, e.g. 64,128")
    };
    let mut method = if a.precise {
        Method::precise()
    } else {
        Method::default()
    };
    method.unroll = (u1, u2);
    method.cpu = a.cpu;
    method.timeout = Duration::from_secs(a.timeout.max(1));
    if let Some(r) = a.reps {
        if r < 3 {
            bail!("--reps must be at least 3");
        }
        method.reps = r;
    }
    let clock = match a.clock.as_str() {
        "tsc" => ClockChoice::One(ClockKind::Tsc),
        "perf" => ClockChoice::One(ClockKind::Perf),
        "rdpmc" => ClockChoice::One(ClockKind::Rdpmc),
        "all" => ClockChoice::All,
        _ => ClockChoice::Auto,
    };
    let both = !a.lat && !a.tp;
    Ok(Options {
        latency: a.lat || both,
        throughput: a.tp || both,
        pairs: PairFilter {
            pair: a.pair.clone(),
            from: a.from.clone(),
            to: a.to.clone(),
        },
        chains: a.chains.clone(),
        clock,
        init,
        vec_init,
        method,
    })
}

fn fmt_fig(f: &tma_bench::Figure) -> String {
    let mark = if f.snapped_ok { "" } else { "*" };
    format!("{:.3}{mark}", f.median)
}

fn spread(f: &tma_bench::Figure) -> String {
    format!("{:.3}-{:.3}", f.p10, f.p90)
}

fn render_table(
    w: &mut dyn Write,
    forms: &[FormReport],
    errors: &[ErrorRow],
    verbose: bool,
) -> anyhow::Result<()> {
    let all_clocks = forms.iter().any(|f| f.clocks.len() > 1);
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
    if all_clocks {
        header.push("raw tsc ticks");
    }
    header.push("note");
    let mut t = tma_report::table(&header);
    for f in forms {
        let body_text = f.instructions.join("; ");
        let name = match &f.preset {
            Some(p) => format!("{body_text} [{}]", p.split(':').next().unwrap_or(p)),
            None => body_text.clone(),
        };
        let mut first = true;
        let mut label = |t: &str| -> String {
            if std::mem::take(&mut first) {
                t.to_string()
            } else {
                String::new()
            }
        };
        for p in &f.latency {
            for fig in &p.figures {
                let mut row = vec![
                    label(&name),
                    if p.pair == "body" {
                        "body".into()
                    } else {
                        format!("{} {}->{}", p.pair, p.from, p.to)
                    },
                    if p.derived.is_some() {
                        format!("≤{}", fmt_fig(fig))
                    } else {
                        fmt_fig(fig)
                    },
                    String::new(),
                    fig.clock.to_string(),
                    spread(fig),
                    "1".into(),
                    format!("{}/{}", fig.rejected, fig.rejected + fig.accepted),
                ];
                if all_clocks {
                    row.push(format!("{:.3}", fig.raw_tsc_ticks));
                }
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
                row.push(note);
                t.add_row(row);
            }
        }
        if verbose {
            for (pair, why) in &f.latency_skipped {
                let mut row = vec![
                    label(&name),
                    pair.clone(),
                    "-".into(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ];
                if all_clocks {
                    row.push(String::new());
                }
                row.push(format!("not measured: {why}"));
                t.add_row(row);
            }
        }
        if let Some(tp) = &f.throughput {
            let rows: Vec<(usize, &tma_bench::Figure, String)> = if verbose {
                tp.per_chains
                    .iter()
                    .flat_map(|c| {
                        c.figures
                            .iter()
                            .map(move |fig| (c.chains, fig, String::new()))
                    })
                    .collect()
            } else {
                tp.best
                    .iter()
                    .map(|fig| {
                        (
                            tp.best_chains,
                            fig,
                            String::from(
                                if f.preset.as_deref().is_some_and(|p| p.contains("rdx:rax")) {
                                    "independent copies (rax/rdx reloaded)"
                                } else {
                                    "best over chain sweep"
                                },
                            ),
                        )
                    })
                    .collect()
            };
            for (chains, fig, note) in rows {
                let mut row = vec![
                    label(&name),
                    "throughput".into(),
                    String::new(),
                    fmt_fig(fig),
                    fig.clock.to_string(),
                    spread(fig),
                    chains.to_string(),
                    format!("{}/{}", fig.rejected, fig.rejected + fig.accepted),
                ];
                if all_clocks {
                    row.push(format!("{:.3}", fig.raw_tsc_ticks));
                }
                row.push(note);
                t.add_row(row);
            }
        } else if let Some(n) = &f.throughput_note {
            let mut row = vec![
                label(&name),
                "throughput".into(),
                String::new(),
                "-".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ];
            if all_clocks {
                row.push(String::new());
            }
            row.push(n.clone());
            t.add_row(row);
        }
    }
    for e in errors {
        let mut row = vec![
            e.input.clone(),
            "error".into(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ];
        if all_clocks {
            row.push(String::new());
        }
        row.push(e.error.clone());
        t.add_row(row);
    }
    tma_report::align_right(&mut t, &[2, 3, 6, 7]);
    writeln!(w, "{t}")?;
    writeln!(w, "cycles per instruction (per body copy for several instructions); * = not within 2% of an integer or a multiple of 1/12")?;
    if forms
        .iter()
        .any(|f| f.latency.iter().any(|p| p.derived.is_some()))
    {
        writeln!(w, "≤ = upper bound for a pair across register files (chain through a connector instruction minus 1 cycle); see the note for both bounds")?;
    }
    // Clock lines (from the first form; they are the same machine).
    if let Some(f) = forms.first() {
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

fn render_compare(w: &mut dyn Write, rows: &[CompareRow]) -> anyhow::Result<()> {
    let mut t = tma_report::table(&[
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
    tma_report::align_right(&mut t, &[1, 2, 3, 4, 5, 6]);
    writeln!(w, "\ncomparison with reference values:\n{t}")?;
    Ok(())
}

fn render_sha(w: &mut dyn Write, s: &ShaReport) -> anyhow::Result<()> {
    let b = &s.bounds;
    writeln!(w, "\nSHA-256 lower bounds (cycles per 64-byte block):")?;
    writeln!(
        w,
        "  round chain      max(32 x {:.2} (rnds2 2->1), 16 x {:.2} (1->1)) = {:.1}",
        b.rnds2_lat_src, b.rnds2_lat_dst, b.round_chain_cycles
    )?;
    writeln!(
        w,
        "  schedule chain   12 x ({:.2} (msg2) + 1 (paddd)) = {:.1}",
        b.msg2_lat, b.schedule_chain_cycles
    )?;
    writeln!(
        w,
        "  one stream       {:.1} cycles/block = {:.2} cycles/byte",
        b.one_stream_cycles_per_block,
        b.one_stream_cycles_per_byte()
    )?;
    writeln!(
        w,
        "  interleaved      {:.1} cycles/block = {:.2} cycles/byte (rnds2/msg1/msg2 on separate units; {:.1} if they share one)",
        b.interleaved_cycles_per_block,
        b.interleaved_cycles_per_block / 64.0,
        b.interleaved_shared_unit_cycles_per_block
    )?;
    writeln!(w, "  model: {}", b.model)?;
    Ok(())
}

fn compare_rows(forms: &[FormReport], refs: &HashMap<String, RefRow>) -> Vec<CompareRow> {
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

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = options(&args)?;
    let refs = match &args.compare {
        Some(p) => Some(parse_compare(
            &std::fs::read_to_string(p).with_context(|| format!("--compare {}", p.display()))?,
        )?),
        None => None,
    };
    let mut sources: Vec<Source> = Vec::new();
    if let Some(h) = &args.bytes {
        sources.push(Source::Bytes(asm::parse_hex(h)?));
    } else if let Some(f) = &args.file {
        let text = std::fs::read_to_string(f).with_context(|| format!("--file {}", f.display()))?;
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            sources.push(Source::Text(line.to_string()));
        }
        if sources.is_empty() {
            bail!("--file {}: no instructions in the file", f.display());
        }
    } else if let Some(b) = &args.body {
        sources.push(Source::Text(b.clone()));
    } else if args.preset.is_none() {
        bail!("nothing to measure: give instructions ('imul rax, rbx'), --bytes HEX, --file LIST or --preset sha");
    }
    let mut forms = Vec::new();
    let mut errors = Vec::new();
    let mut sha = None;
    if args.preset.as_deref() == Some("sha") {
        let pb = args.progress.then(|| spinner("SHA preset"));
        if args.progress && !std::io::stderr().is_terminal() {
            eprintln!("tma bench: measuring the SHA preset");
        }
        let r = tma_bench::preset_sha(&opts)?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        forms.extend(r.forms.iter().cloned());
        sha = Some(r);
    } else if sources.len() == 1 {
        forms.extend(tma_bench::bench_all(&sources[0], &opts)?);
    } else {
        // A bar on a terminal; one plain line per input when stderr is a file or a pipe (a
        // log), where indicatif would draw nothing.
        let lines = args.progress && !std::io::stderr().is_terminal();
        let pb = (args.progress && !lines).then(|| {
            let pb = indicatif::ProgressBar::new(sources.len() as u64);
            pb.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            pb
        });
        for (i, s) in sources.iter().enumerate() {
            let input = match s {
                Source::Text(t) => t.clone(),
                Source::Bytes(b) => format!("{b:02x?}"),
            };
            if let Some(pb) = &pb {
                pb.set_message(input.clone());
            }
            if lines {
                eprintln!("tma bench: [{}/{}] {input}", i + 1, sources.len());
            }
            match tma_bench::bench_all(s, &opts) {
                Ok(r) => forms.extend(r),
                Err(e) => errors.push(ErrorRow {
                    input,
                    error: e.to_string(),
                }),
            }
            if let Some(pb) = &pb {
                pb.inc(1);
            }
        }
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
    }
    let compare = refs.map(|r| compare_rows(&forms, &r)).unwrap_or_default();
    let render = |w: &mut dyn Write| -> anyhow::Result<()> {
        if args.json {
            tma_report::write_json(
                w,
                "tma.bench",
                1,
                &Payload {
                    forms: &forms,
                    errors: &errors,
                    sha: sha.as_ref(),
                    compare: &compare,
                },
            )?;
        } else {
            render_table(w, &forms, &errors, args.verbose)?;
            if let Some(s) = &sha {
                render_sha(w, s)?;
            }
            if args.compare.is_some() {
                render_compare(w, &compare)?;
            }
        }
        Ok(())
    };
    match &args.output {
        Some(p) => {
            let mut buf = Vec::new();
            render(&mut buf)?;
            tma_report::write_atomic(p, |w| Ok(w.write_all(&buf)?))?;
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            render(&mut lock)?;
        }
    }
    Ok(if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn spinner(msg: &'static str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_message(msg);
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_csv_is_parsed_with_quotes() {
        let r =
            parse_compare("instruction,latency,throughput\n\"add rax, rcx\",1,0.25\nimul rax,3,\n")
                .unwrap();
        assert_eq!(r["add rax, rcx"].throughput, Some(0.25));
        assert_eq!(r["imul rax"].throughput, None);
        assert!(parse_compare("a,b\n").is_err());
        assert!(parse_compare("instruction,latency\nx,abc\n").is_err());
    }
}
