//! `tma diff`: clap arguments -> [`tma_diff::DiffConfig`] -> [`tma_diff::run`] -> a renderer
//! of [`tma_diff::render`]. Exit status 1 when a `--fail-if` gate trips (one line per gate
//! on standard error), 2 on errors (a bad expression names the position).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd::args::{CpuArg, MetricArgs, RootArg};

/// Compare two runs of the same TMA tree: before, after and delta of every node and metric,
/// where the bottleneck moved, and Welch's t-test where a side has several samples.
///
/// Inputs: `tma stat --json` outputs, `tma stat --record` snapshots, or `perf stat -x,` /
/// `-j` recordings (with --cpu).
///
/// Examples:
///   tma diff before.json after.json
///   tma diff before.csv after.csv --cpu spr -l 3 -m IPC --fail-if 'IPC < -10%'
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The run before the change.
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,
    /// The run after the change.
    #[arg(value_name = "AFTER")]
    pub after: PathBuf,
    #[command(flatten)]
    pub cpu: CpuArg,
    /// Deepest tree level: evaluated for recordings (default 1); for `tma stat --json`
    /// inputs, a filter (default: every node they hold).
    #[arg(short = 'l', long = "level", value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: Option<u8>,
    /// Recordings: only these nodes (comma-separated names) and their subtrees.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub nodes: Vec<String>,
    #[command(flatten)]
    pub metric: MetricArgs,
    /// Whether SMT was on where `perf stat` recordings were made.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub smt: Option<String>,
    /// Exit with status 1 when EXPR holds: `NODE.PATH > +5` (points up), `IPC < -10%`
    /// (relative change down); comparisons >, >=, <, <=. Repeatable.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Print JSON (schema `tma.diff`, version 1).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: one row per node and metric.
    #[arg(long)]
    pub csv: bool,
    /// Write the output to FILE (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    if !args.metric.metric_groups.is_empty() || args.metric.bottlenecks {
        anyhow::bail!("tma diff takes -m LIST for metrics; -M and -B are for tma stat");
    }
    let cfg = tma_diff::DiffConfig {
        before: args.before,
        after: args.after,
        cpu: args.cpu.cpu,
        level: args.level,
        nodes: args.nodes,
        metrics: args.metric.metric_words(),
        smt: args.smt.map(|s| s == "on"),
        gates: args.fail_if,
        host: root.host(),
    };
    let d = tma_diff::run(&cfg, &mut std::io::stderr())?;
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            tma_diff::render::json(w, &d)
        } else if args.csv {
            tma_diff::render::csv(w, &d)
        } else {
            tma_diff::render::text(w, &d)
        }
    })?;
    let mut tripped = false;
    for g in d.tripped() {
        eprintln!("tma: gate tripped: {}", g.reason);
        tripped = true;
    }
    Ok(if tripped {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
