//! `tma stat`: the TMA tree of a command, a pid, the system (live counting, see
//! [`crate::cmd::stat_live`]) or of an imported recording (`--import FILE`: `perf stat -x,`
//! CSV, `perf stat -j` JSON, or a `tma stat --record` snapshot).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use tma_catalog::Model;
use tma_perf::import::{self, Breakdown, ImportFormat};

use crate::render::tree::{self, RenderOptions, StatRun};

/// Count events and print the TMA tree.
///
/// Examples:
///   tma stat -l 2 -- ./app args
///   tma stat --import perf-stat.csv --cpu spr -l 3
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Read a recording instead of counting: `perf stat -x,` CSV, `perf stat -j` JSON, or a
    /// `tma stat --record` snapshot.
    #[arg(long, value_name = "FILE", conflicts_with = "example")]
    pub import: Option<PathBuf>,
    /// Analyse the bundled example recording (synthetic Zen 4 counts of a SHA-256 run, solved
    /// from the methodology's published percentages): real output on any machine.
    #[arg(long)]
    pub example: bool,
    /// Whether SMT (Hyper-Threading) was on where an imported `perf stat` file was recorded;
    /// some Intel formulas depend on it. Live runs and snapshots know it already.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub smt: Option<String>,
    /// CPU model whose tables to use (e.g. spr, icx, zen4); default: from the recording, else
    /// this machine.
    #[arg(long, value_name = "NAME")]
    pub cpu: Option<String>,
    /// Deepest tree level to compute and print (1 = top level).
    #[arg(short = 'l', long = "level", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: u8,
    /// Only these nodes (comma-separated names) and their subtrees, down to --level.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Also show the nodes under their threshold.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print JSON (schema `tma.stat`, version 1).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: one row per node (per interval).
    #[arg(long)]
    pub csv: bool,
    /// Write the output to FILE (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// One line per interval instead of one tree per interval (interval data only).
    #[arg(long)]
    pub compact: bool,

    // ---- live counting (see `stat_live`) ----
    /// Attach to these processes (comma-separated pids); stop with Ctrl-C or --duration.
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Attach to these threads (comma-separated tids).
    #[arg(short = 't', long = "tid", value_name = "TID", value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Count system-wide, on every CPU.
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    /// Count only on these CPUs (e.g. 0-3,8), with -a.
    #[arg(short = 'C', long = "cpu-list", value_name = "CPUS")]
    pub cpu_list: Option<String>,
    /// Print a tree (or a --compact line) every MS milliseconds.
    #[arg(short = 'I', long = "interval", value_name = "MS")]
    pub interval_ms: Option<u64>,
    /// One tree per core (system-wide counting).
    #[arg(long)]
    pub per_core: bool,
    /// One tree per thread (-p / -t).
    #[arg(long)]
    pub per_thread: bool,
    /// Save a snapshot of the raw readings that `tma stat --import` replays.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Run the command once per counter group instead of multiplexing.
    #[arg(long)]
    pub no_multiplex: bool,
    /// Run the command N times; print the mean and spread.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Measure level 1, then descend into the bottleneck one level per run.
    #[arg(long)]
    pub drilldown: bool,
    /// Stop counting after S seconds (for -p, -t, -a).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Also count these events (vendor names or perf specs).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// The command to measure.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The bundled example recording behind `tma stat --example`.
const EXAMPLE_CSV: &[u8] =
    include_bytes!("../../../../tests/fixtures/import/zen4-sha256-synthetic.csv");

pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    let (bytes, path) = if args.example {
        check_import_flags(&args)?;
        if args.cpu.is_none() {
            args.cpu = Some("zen4".into());
        }
        if args.level == 1 {
            args.level = 2;
        }
        eprintln!(
            "tma: bundled example: synthetic Zen 4 counts of a SHA-256 run, solved from the \
             methodology's published percentages (not measured on this machine)"
        );
        (
            EXAMPLE_CSV.to_vec(),
            PathBuf::from("bundled-example-zen4-sha256.csv"),
        )
    } else if let Some(path) = args.import.clone() {
        check_import_flags(&args)?;
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        (bytes, path)
    } else {
        if args.smt.is_some() {
            bail!("--smt describes an imported recording; live runs read the topology themselves");
        }
        return crate::cmd::stat_live::run(&args);
    };
    let format = import::detect(&bytes).with_context(|| path.display().to_string())?;
    if format == ImportFormat::TmaSnapshot {
        if args.smt.is_some() {
            bail!("--smt is not needed with a snapshot: it records the machine's topology");
        }
        return crate::cmd::stat_live::import_snapshot(&bytes, &path, &args);
    }
    let opts = render_options(&args);
    let run = import_run(&bytes, &path, &args)?;
    crate::render::emit(args.output.as_deref(), |w| {
        if args.json {
            tree::render_json(w, &run, &opts)
        } else if args.csv {
            tree::render_csv(w, &run, &opts)
        } else {
            tree::render_text(w, &run, &opts)
        }
    })?;
    // The process ends here: freeing tens of thousands of reports one by one would only
    // cost time (a long `-I` recording spends a fifth of its run in free()).
    std::mem::forget(run);
    Ok(ExitCode::SUCCESS)
}

/// Live-only flags make no sense with --import: say so instead of ignoring them.
fn check_import_flags(a: &Args) -> anyhow::Result<()> {
    let mut bad: Vec<&str> = Vec::new();
    if !a.command.is_empty() {
        bad.push("-- CMD");
    }
    for (set, name) in [
        (!a.pid.is_empty(), "-p"),
        (!a.tid.is_empty(), "-t"),
        (a.all_cpus, "-a"),
        (a.cpu_list.is_some(), "-C"),
        (a.interval_ms.is_some(), "-I"),
        (a.per_core, "--per-core"),
        (a.per_thread, "--per-thread"),
        (a.record.is_some(), "--record"),
        (a.no_multiplex, "--no-multiplex"),
        (a.repeat.is_some(), "--repeat"),
        (a.drilldown, "--drilldown"),
        (a.duration.is_some(), "--duration"),
        (!a.events.is_empty(), "-e"),
    ] {
        if set {
            bad.push(name);
        }
    }
    if !bad.is_empty() {
        bail!(
            "--import reads a recording and cannot be combined with {} (those are for live counting)",
            bad.join(", ")
        );
    }
    Ok(())
}

pub fn render_options(a: &Args) -> RenderOptions {
    RenderOptions {
        verbose: a.verbose,
        compact: a.compact,
    }
}

/// Where the CPU model came from, for the header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    /// `--cpu NAME`.
    Flag,
    /// A `# cpu: KEY` line (or the snapshot's CPU) in the recording.
    Recording,
    /// CPUID of this machine (`/proc/cpuinfo`).
    ThisMachine,
}

impl CpuSource {
    pub fn describe(&self) -> &'static str {
        match self {
            CpuSource::Flag => "from --cpu",
            CpuSource::Recording => "named in the recording",
            CpuSource::ThisMachine => "identified from this machine",
        }
    }
}

/// The model for `--cpu NAME`, else the one named by the recording, else this machine's
/// (identified from `cpuinfo`, normally `/proc/cpuinfo`).
pub fn select_model(
    cpu: Option<&str>,
    hint: Option<&str>,
    cpuinfo: &Path,
) -> anyhow::Result<(&'static Model, CpuSource)> {
    if let Some(name) = cpu {
        return Ok((tma_catalog::by_name(name)?, CpuSource::Flag));
    }
    if let Some(name) = hint {
        let m = tma_catalog::by_name(name)
            .with_context(|| format!("the recording names CPU `{name}`; pass --cpu NAME"))?;
        return Ok((m, CpuSource::Recording));
    }
    let bytes = std::fs::read(cpuinfo).with_context(|| {
        format!(
            "cannot read {} to identify this CPU; pass --cpu NAME",
            cpuinfo.display()
        )
    })?;
    let (vendor, family, model, stepping) = tma_catalog::parse_cpuinfo(&bytes)?;
    let models = tma_catalog::identify(&vendor, family, model, stepping)?;
    match models.first() {
        Some(m) => Ok((m, CpuSource::ThisMachine)),
        None => bail!("this CPU has no table; pass --cpu NAME"),
    }
}

/// The cpuinfo file used to identify this machine; `TMA_CPUINFO` overrides it (tests).
pub fn cpuinfo_path() -> PathBuf {
    std::env::var_os("TMA_CPUINFO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/proc/cpuinfo"))
}

/// Read, parse, resolve and evaluate a recording.
fn import_run(bytes: &[u8], path: &Path, args: &Args) -> anyhow::Result<StatRun> {
    let file = path.display().to_string();
    let rec = import::parse(bytes).with_context(|| file.clone())?;
    let (model, source) = select_model(
        args.cpu.as_deref(),
        rec.cpu_hint.as_deref(),
        &cpuinfo_path(),
    )?;
    let mut resolved = import::resolve(
        &rec.intervals,
        model.key,
        |spec| model.resolve_perf_event_all(spec).unwrap_or_default(),
        |unknown| guess_other_cpu(unknown, model),
    )
    .with_context(|| file.clone())?;
    let intervals: Vec<_> = if rec.breakdown == Breakdown::Aggregated {
        std::mem::take(&mut resolved.intervals)
    } else {
        resolved.intervals.iter().map(import::aggregate).collect()
    };
    let what = match rec.breakdown {
        Breakdown::Aggregated => String::new(),
        Breakdown::PerCpu => ", per-CPU rows summed".to_string(),
        Breakdown::PerThread => ", per-thread rows summed".to_string(),
    };
    let smt = args.smt.as_deref().map(|v| v == "on");
    if smt.is_none() && model.nodes.iter().any(|n| n.formula.contains("#smt_on")) {
        eprintln!(
            "tma: note: assuming SMT was off where {file} was recorded; pass --smt on if it was \
             (some {} formulas differ)",
            model.key
        );
    }
    let sel = tree::Request {
        level: args.level,
        nodes: args.nodes.clone(),
        topology: smt.map(|smt| tma_perf::snapshot::Topology {
            smt,
            ..Default::default()
        }),
    };
    let mut run = StatRun::evaluate(
        model,
        source.describe(),
        format!("imported from {file} ({}{what})", rec.format),
        rec.interval_mode,
        &intervals,
        &sel,
    )?;
    run.event_map = resolved.mapping;
    Ok(run)
}

/// The model (other than `current`) on which most of `unknown` resolve, if that is at least
/// half of them.
fn guess_other_cpu(unknown: &[String], current: &Model) -> Option<&'static str> {
    let mut best: Option<(&'static str, usize)> = None;
    for m in tma_catalog::models() {
        if m.key == current.key {
            continue;
        }
        let n = unknown
            .iter()
            .filter(|s| m.resolve_perf_event(s).is_ok())
            .count();
        if n > 0 && best.is_none_or(|(_, b)| n > b) {
            best = Some((m.key, n));
        }
    }
    best.filter(|&(_, n)| 2 * n >= unknown.len())
        .map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    #[test]
    fn command_after_double_dash_keeps_its_flags() {
        let t = T::parse_from(["tma", "-l", "2", "--", "./app", "-v", "--json"]);
        assert_eq!(t.a.command, ["./app", "-v", "--json"]);
        assert!(!t.a.json);
        assert_eq!(t.a.level, 2);
    }

    #[test]
    fn nodes_are_comma_separated() {
        let t = T::parse_from(["tma", "--import", "f", "--nodes", "a,b"]);
        assert_eq!(t.a.nodes, ["a", "b"]);
    }

    #[test]
    fn import_refuses_live_flags() {
        let t = T::parse_from(["tma", "--import", "f", "-a", "-I", "100"]);
        let e = check_import_flags(&t.a).unwrap_err().to_string();
        assert!(e.contains("-a, -I"), "{e}");
    }
}
