//! `tma report`: clap arguments -> [`tma_report::ReportConfig`] -> [`tma_report::run`] -> the page
//! ([`tma_report::render::html`]) and/or the picture alone ([`tma_report::render::svg`]).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd::args::{ReadArgs, RootArg};

/// Draw tma results in one self-contained HTML page (no network: styles, scripts and
/// pictures inline), one section per input.
///
/// Inputs, recognised by their content: `tma stat --json` (the tree as bars with thresholds,
/// the bottleneck path highlighted; with -I intervals, stacked-area timelines of level 1 and
/// of the bottleneck's children), `tma stat --record` snapshots and `perf stat` recordings
/// (with --cpu; evaluated as `tma stat --import` does), `tma diff --json` (side-by-side bars,
/// deltas, significance), `tma locate --json` and perf.data files (hot functions, annotated
/// instructions; a flame graph when call chains were recorded), `tma bench --json`
/// (latency and throughput tables).
///
/// Examples:
///   tma report run.json -o report.html
///   tma report before.json after.json diff.json app.perf.data -o report.html
///   tma report intervals.json --svg timeline.svg
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The files to draw, one section each, in this order.
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Write the HTML page to FILE (`-`: standard output; a file is replaced only when the command succeeds). Without -o and --svg, the page goes to
    /// standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write the timeline of the first input with intervals (else the tree of the first
    /// tree) alone, as a static SVG picture.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// The page title (default: the input file names).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    #[command(flatten)]
    pub read: ReadArgs,
    /// perf.data files: the event to show (default: the first).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub event: Option<String>,
    /// perf.data files: look for binaries in DIR (by file name) before their recorded paths.
    #[arg(long, value_name = "DIR")]
    pub symdir: Vec<PathBuf>,
    /// perf.data files: kernel symbols (a copy of that machine's /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    // The page is written unless --svg alone was asked for.
    let page = args.output.is_some() || args.svg.is_none();
    let svg = ("--svg", args.svg.as_deref());
    if page {
        crate::output::check(args.output.as_deref(), [svg])?;
    } else if let Some(p) = args.svg.as_deref() {
        tma_render::check_outputs([("--svg", p)])?;
    }
    tma_render::files::check_one_stdin(args.inputs.iter().map(|p| p.as_path()))?;
    let cfg = tma_report::ReportConfig {
        inputs: args.inputs,
        read: args.read.options(),
        event: args.event,
        symdir: args.symdir,
        kallsyms: args.kallsyms,
        title: args.title,
        host: root.host(),
    };
    let report = tma_report::run(&cfg, &mut std::io::stderr())?;
    if let Some(path) = &args.svg {
        let svg = tma_report::render::svg(&report)?;
        tma_render::write_output(path, |w| Ok(w.write_all(svg.as_bytes())?))?;
    }
    if page {
        crate::output::emit(args.output.as_deref(), |w| {
            tma_report::render::html(w, &report)
        })?;
    }
    Ok(ExitCode::SUCCESS)
}
