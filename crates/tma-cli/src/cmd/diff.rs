//! `tma diff`: clap arguments -> [`tma_diff::DiffConfig`] -> [`tma_diff::run`] -> a renderer
//! of [`tma_diff::render`]. Exit status 1 when a `--fail-if` gate trips (one line per gate
//! on standard error), 2 on errors (a bad expression names the position). Two profiles
//! (perf.data files or `tma locate --json` outputs) go to [`tma_diff::profile::run`] instead.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd::args::{MetricArgs, ReadArgs, RootArg};

/// Compare two runs of the same TMA tree: before, after and delta of every node and metric,
/// where the bottleneck moved, and Welch's t-test where a side has several samples.
///
/// Inputs: `tma stat --json` outputs, `tma stat --record` snapshots, or `perf stat -x,` /
/// `-j` recordings (with --cpu). Or two profiles, perf.data files or `tma locate --json`
/// outputs: each hot function's share of the samples before and after, and the delta, as
/// `perf diff` does. Or two `tma stat --regions --json` outputs, region by region (a file
/// holding several runs one after the other gives each region's test over the runs;
/// `--fail-if 'REGION.time_ms > +10%'`).
///
/// Examples:
///   tma diff before.json after.json
///   tma diff before.csv after.csv --cpu spr -l 3 -m IPC --fail-if 'IPC < -10%'
///   tma diff before.perf.data after.perf.data --symdir ./build
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The run before the change.
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,
    /// The run after the change.
    #[arg(value_name = "AFTER")]
    pub after: PathBuf,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub metric: MetricArgs,
    /// Exit with status 1 when EXPR holds: `NODE.PATH > +5` (points up), `IPC < -10%`
    /// (relative change down); comparisons >, >=, <, <=. Repeatable.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Profiles: the event of perf.data files to compare (default: the first).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub event: Option<String>,
    /// Profiles: look for binaries in DIR (by file name) before their recorded paths.
    #[arg(long, value_name = "DIR")]
    pub symdir: Vec<PathBuf>,
    /// Profiles: kernel symbols for perf.data files (a copy of that machine's /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
    /// Print JSON (schema `tma.diff`, or `tma.diff.profile` for profiles; version 2;
    /// `tma.diff.regions` version 1 for regions).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: one row per node and metric (per function for profiles, per region and
    /// figure or node for regions).
    #[arg(long)]
    pub csv: bool,
    /// Write the output to FILE instead of standard output (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Profiles: also draw a differential flame graph of the two perf.data files (recorded
    /// with -g) into FILE.svg: each frame's width is its share after, its colour the change of
    /// its share (red: grew, blue: shrank); frames of one side only are kept and labelled.
    #[arg(long, value_name = "FILE.svg")]
    pub flame: Option<PathBuf>,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    if !args.metric.metric_groups.is_empty() || args.metric.bottlenecks {
        anyhow::bail!("tma diff takes -m LIST for metrics; -M and -B are for tma stat");
    }
    crate::output::check(args.output.as_deref(), [("--flame", args.flame.as_deref())])?;
    tma_render::files::check_one_stdin([args.before.as_path(), args.after.as_path()])?;
    if tma_diff::regions::inputs(&args.before, &args.after)? {
        return regions(args);
    }
    if tma_diff::inputs(&args.before, &args.after)? {
        return profiles(args);
    }
    if args.flame.is_some() {
        anyhow::bail!("--flame draws two profiles (perf.data files recorded with -g)");
    }
    if args.event.is_some() || !args.symdir.is_empty() || args.kallsyms.is_some() {
        anyhow::bail!("-e, --symdir and --kallsyms are for profiles (perf.data files)");
    }
    let cfg = tma_diff::DiffConfig {
        before: args.before,
        after: args.after,
        read: args.read.options(),
        metrics: args.metric.metric_words(),
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

/// Two region documents: region by region.
fn regions(args: Args) -> anyhow::Result<ExitCode> {
    if args.read.any()
        || args.metric.metric_words().is_some()
        || args.event.is_some()
        || !args.symdir.is_empty()
        || args.kallsyms.is_some()
        || args.flame.is_some()
    {
        anyhow::bail!(
            "region documents are compared as they were counted: --cpu, -l, --nodes, -m, \
             --smt, -e, --symdir, --kallsyms and --flame are for other inputs"
        );
    }
    let d = tma_diff::regions::run(&args.before, &args.after, &args.fail_if)?;
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            tma_diff::regions::json(w, &d)
        } else if args.csv {
            tma_diff::regions::csv(w, &d)
        } else {
            tma_diff::regions::text(w, &d, false)
        }
    })?;
    let mut tripped = false;
    for g in d.gates.iter().filter(|g| g.tripped) {
        eprintln!("tma: gate tripped: {}", g.reason);
        tripped = true;
    }
    Ok(if tripped {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Two profiles: function shares before and after.
fn profiles(args: Args) -> anyhow::Result<ExitCode> {
    if !args.fail_if.is_empty() || args.read.any() || args.metric.metric_words().is_some() {
        anyhow::bail!(
            "profiles are compared function by function: --fail-if, --cpu, -l, --nodes, -m \
             and --smt are for TMA trees"
        );
    }
    let cfg = tma_diff::profile::ProfileConfig {
        before: args.before,
        after: args.after,
        event: args.event,
        symdir: args.symdir,
        kallsyms: args.kallsyms,
    };
    let d = tma_diff::profile::run(&cfg)?;
    if let Some(path) = args.flame.as_deref() {
        let (Some(b), Some(a)) = (d.before.stacks.as_deref(), d.after.stacks.as_deref()) else {
            anyhow::bail!(
                "--flame needs the call chains of perf.data files; a tma locate --json \
                 document keeps none: give the perf.data files"
            );
        };
        let svg = tma_report::flame::differential_svg(b, a)?;
        tma_render::write_output(path, |w| Ok(w.write_all(svg.as_bytes())?))?;
    }
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            tma_diff::render::profile_json(w, &d)
        } else if args.csv {
            tma_diff::render::profile_csv(w, &d)
        } else {
            tma_diff::render::profile_text(w, &d)
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
