//! `tma stat`: clap arguments -> [`tma_stat::StatConfig`] -> [`tma_stat::run`]; the tree goes
//! to standard output or `-o FILE`, notes to standard error, and the exit status is the
//! measured command's (see `tma_stat::Outcome::exit_status`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tma_stat::{BackendChoice, Format, Input, LiveOptions, LiveTarget, RenderOptions, StatConfig};

use crate::cmd::args::{self, CpuArg, MetricArgs, RootArg, TreeArgs};

/// Count events and print the TMA tree.
///
/// Examples:
///   tma stat -l 2 -- ./app args
///   tma stat -a -I 1s -- sleep 10
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
    /// Refuse an imported `perf stat` file that holds events the CPU's tables do not know (or
    /// one event twice), instead of ignoring them with a note.
    #[arg(long, requires = "import")]
    pub strict: bool,
    #[command(flatten)]
    pub cpu: CpuArg,
    #[command(flatten)]
    pub tree: TreeArgs,
    #[command(flatten)]
    pub metric: MetricArgs,
    /// Also show the nodes under their threshold.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print JSON (schema `tma.stat`, version 1).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: one row per node (per interval).
    #[arg(long)]
    pub csv: bool,
    /// perf's field separator: `-x,` prints CSV (as --csv); tma's CSV is comma-separated only.
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", conflicts_with = "json",
          value_parser = csv_separator)]
    pub field_separator: Option<char>,
    /// Write the output to FILE instead of standard output (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// One line per interval instead of one tree per interval (interval data only).
    #[arg(long)]
    pub compact: bool,

    // ---- live counting ----
    /// Attach to these processes (comma-separated pids); stop with Ctrl-C or --duration.
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',',
          conflicts_with_all = ["tid", "all_cpus", "cpu_list", "cgroup", "command"])]
    pub pid: Vec<u32>,
    /// Attach to these threads (comma-separated tids).
    #[arg(short = 't', long = "tid", value_name = "TID", value_delimiter = ',',
          conflicts_with_all = ["all_cpus", "cpu_list", "cgroup", "command"])]
    pub tid: Vec<u32>,
    /// Count system-wide, on every CPU: while the command runs when one is given (as
    /// `perf stat -a -- sleep 10`), else for --duration or until Ctrl-C.
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    /// Count system-wide on these CPUs only (e.g. 0-3,8): while the command runs when one is
    /// given, else for --duration or until Ctrl-C.
    #[arg(
        short = 'C',
        long = "cpu-list",
        value_name = "CPUS",
        conflicts_with = "cgroup"
    )]
    pub cpu_list: Option<String>,
    /// Count the tasks of this cgroup on every CPU (perf_event cgroup mode): a cgroup v2
    /// directory, absolute or relative to the cgroup2 mount (system.slice/nginx.service);
    /// repeat for several (summed into one tree).
    #[arg(
        short = 'G',
        long = "cgroup",
        value_name = "PATH",
        conflicts_with = "command"
    )]
    pub cgroup: Vec<PathBuf>,
    /// Print a tree (or a --compact line) every interval: 100ms, 1s, 1m; a bare number is
    /// milliseconds (as perf's -I).
    #[arg(short = 'I', long = "interval", value_name = "DURATION", value_parser = args::interval_ms)]
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
    /// Also draw the run as an SVG picture in FILE: the stacked-area timeline of the -I
    /// intervals (level 1 and the bottleneck's children), else the tree as bars. Memory
    /// stays bounded: past 1024 columns, neighbouring intervals are averaged.
    #[arg(long, value_name = "FILE.svg", conflicts_with_all = ["per_core", "per_thread"])]
    pub plot: Option<PathBuf>,
    /// Run the command once per counter group instead of multiplexing.
    #[arg(long)]
    pub no_multiplex: bool,
    /// Run the command N times; print the mean and spread.
    #[arg(short = 'r', long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Measure level 1, then descend into the bottleneck one level per run.
    #[arg(long)]
    pub drilldown: bool,
    /// Stop counting after this long: 10s, 500ms, 2m; a bare number is seconds (for -p, -t,
    /// -a; a command is stopped then).
    #[arg(long, value_name = "DURATION", value_parser = args::seconds)]
    pub duration: Option<f64>,
    /// Also count these events (vendor names or perf specs).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// On a hybrid part, count this core type only: core, atom (or a PMU name such as
    /// cpu_lowpower). Without it every core type is counted in one run: a tree per type and
    /// a merged view weighted by cycles.
    #[arg(long, value_name = "TYPE")]
    pub cputype: Option<String>,
    /// Count with the synthetic backend read from FILE (JSON: chosen true counts and
    /// multiplexing shares) instead of perf_event_open: the hardware paths without a PMU
    /// (tests).
    #[arg(long, value_name = "FILE", hide = true)]
    pub synthetic_backend: Option<PathBuf>,
    /// Count each named region of the command: it finds a control FIFO in
    /// $TMA_REGIONS_FIFO to write `begin TID NAME` / `end TID NAME` lines on (or marks its
    /// regions with the tma-marker library); prints a tree per region, per thread and merged.
    #[arg(long, conflicts_with = "itt")]
    pub regions: bool,
    /// As --regions, from the command's ITT tasks and frames (oneDNN, TBB, OpenMP...): sets
    /// INTEL_LIBITTNOTIFY64 to tma's collector, libtma_itt.so.
    #[arg(long)]
    pub itt: bool,
    /// With --regions or --itt: keep tma's control thread where the scheduler puts it. By
    /// default it follows the thread that sends acknowledged lines onto its CPU, at the idle
    /// scheduling policy, which saves the cross-CPU wake-ups of each round trip (and goes
    /// back when that CPU is busy); see the README's regions section.
    #[arg(long)]
    pub no_follow: bool,
    /// The ITT collector for --itt (default: libtma_itt.so beside the tma binary, in its
    /// deps/ directory (a cargo build), or in ../lib/tma/).
    #[arg(long, value_name = "FILE", requires = "itt")]
    pub itt_lib: Option<PathBuf>,
    /// The command to measure (after `--`, or the first argument that is not an option, as
    /// with perf: its own options follow it).
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `-x SEP`: tma writes CSV with commas only.
fn csv_separator(text: &str) -> Result<char, String> {
    match text {
        "," => Ok(','),
        _ => Err(format!(
            "tma writes CSV separated by commas only: use -x, (or --csv), not -x {text:?}"
        )),
    }
}

/// The one thing a live run counts, from the target flags (clap refuses the combinations
/// that mean nothing: -p with -t, a pid with a command, a cgroup with a CPU list...).
fn live_target(a: &Args) -> LiveTarget {
    let command = (!a.command.is_empty()).then(|| a.command.clone());
    if !a.cgroup.is_empty() {
        // -G counts the cgroups on every CPU: -a may be given with it, as for perf stat.
        LiveTarget::Cgroups(a.cgroup.clone())
    } else if !a.pid.is_empty() {
        LiveTarget::Pids(a.pid.clone())
    } else if !a.tid.is_empty() {
        LiveTarget::Tids(a.tid.clone())
    } else if a.all_cpus || a.cpu_list.is_some() {
        LiveTarget::System {
            cpus: a.cpu_list.clone(),
            command,
        }
    } else {
        LiveTarget::Command(command.unwrap_or_default())
    }
}

/// The clap-free configuration of these arguments.
pub fn config(a: &Args, root: &RootArg) -> anyhow::Result<StatConfig> {
    let backend = match &a.synthetic_backend {
        None => BackendChoice::Live,
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
            BackendChoice::Synthetic(
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a synthetic backend file", p.display()))?,
            )
        }
    };
    let live = LiveOptions {
        target: live_target(a),
        interval_ms: a.interval_ms,
        per_core: a.per_core,
        per_thread: a.per_thread,
        record: a.record.clone(),
        no_multiplex: a.no_multiplex,
        repeat: a.repeat,
        drilldown: a.drilldown,
        duration_s: a.duration,
        events: a.events.clone(),
        backend,
        cputype: a.cputype.clone(),
        ..LiveOptions::default()
    };
    let input = match (&a.import, a.example) {
        (None, false) => Input::Live(live),
        (recording, _) => {
            // Live settings make no sense with a recording: say so instead of ignoring them.
            let set = live.flags_set();
            if !set.is_empty() {
                anyhow::bail!(
                    "{} reads a recording and cannot be combined with {} (those are for live \
                     counting)",
                    if recording.is_some() {
                        "--import"
                    } else {
                        "--example"
                    },
                    set.join(", ")
                );
            }
            match recording {
                Some(p) => Input::Import(p.clone()),
                None => Input::Example,
            }
        }
    };
    Ok(StatConfig {
        input,
        cpu: a.cpu.cpu.clone(),
        cpu_from_events: false,
        level: a.tree.level,
        nodes: a.tree.nodes.clone(),
        smt: a.smt.as_deref().map(|v| v == "on"),
        strict: a.strict,
        metrics: a.metric.metric_words(),
        metric_groups: a.metric.metric_groups.clone(),
        bottlenecks: a.metric.bottlenecks,
        render: RenderOptions {
            format: if a.json {
                Format::Json
            } else if a.csv || a.field_separator.is_some() {
                Format::Csv
            } else {
                Format::Text
            },
            verbose: a.verbose,
            compact: a.compact,
            plot: a.plot.clone(),
        },
        host: root.host(),
        // The snapshot stores text: an argument that is not UTF-8 is kept with U+FFFD.
        command_line: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        one_tree: false,
    })
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    crate::output::check(
        args.output.as_deref(),
        [
            ("--record", args.record.as_deref()),
            ("--plot", args.plot.as_deref()),
        ],
    )?;
    let cfg = config(&args, root)?;
    if args.regions || args.itt {
        return regions(&args, cfg);
    }
    let progress = crate::progress::Lines::new("tma stat", long_run(&cfg));
    let outcome = crate::output::emit(args.output.as_deref(), |w| {
        let mut show = |p: tma_stat::RunStart| {
            let msg = if cfg.live().is_some_and(|l| l.drilldown) {
                format!("drill-down step {}", p.step + 1)
            } else {
                "run".to_string()
            };
            progress.line(p.run, p.runs, &msg);
        };
        let mut sink = tma_stat::TreeOutput::new(w, &cfg.render).with_progress(&mut show);
        tma_stat::run(&cfg, &mut sink, &mut std::io::stderr())
    })?;
    Ok(ExitCode::from(outcome.exit_status()))
}

/// `--regions` / `--itt`: the tree of each named region of the command.
fn regions(args: &Args, stat: StatConfig) -> anyhow::Result<ExitCode> {
    let way = if args.itt {
        let lib = match &args.itt_lib {
            Some(p) => p.clone(),
            None => tma_regions::default_itt_lib(
                &std::env::current_exe()
                    .context("cannot find the tma binary to find libtma_itt.so beside it")?,
            ),
        };
        tma_regions::Way::Itt(lib)
    } else {
        tma_regions::Way::Fifo
    };
    let cfg = tma_regions::RegionsConfig {
        stat,
        way,
        follow: !args.no_follow,
    };
    let outcome = crate::output::emit(args.output.as_deref(), |w| {
        tma_regions::run(&cfg, w, &mut std::io::stderr())
    })?;
    Ok(ExitCode::from(outcome.exit_status()))
}

/// Live runs that run the target more than once (or step by step) show progress.
fn long_run(cfg: &StatConfig) -> bool {
    cfg.live()
        .is_some_and(|l| l.drilldown || l.no_multiplex || l.repeat.is_some_and(|n| n > 1))
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
        assert_eq!(t.a.tree.level, 2);
    }

    fn live(argv: &[&str]) -> LiveOptions {
        let mut v = vec!["tma"];
        v.extend(argv);
        config(&T::try_parse_from(v).unwrap().a, &RootArg::default())
            .unwrap()
            .live()
            .cloned()
            .unwrap()
    }

    #[test]
    fn a_command_without_double_dash_takes_the_rest_as_perf_does() {
        let t = T::parse_from(["tma", "-l", "2", "ls", "-l", "--json"]);
        assert_eq!(t.a.command, ["ls", "-l", "--json"]);
        assert!(!t.a.json);
        // A misspelt option before the command is still an error, not a command.
        assert!(T::try_parse_from(["tma", "--improt", "x"]).is_err());
    }

    #[test]
    fn system_wide_with_a_command_counts_while_it_runs() {
        let cmd = || Some(vec![OsString::from("sleep"), "10".into()]);
        assert_eq!(
            live(&["-a", "--", "sleep", "10"]).target,
            LiveTarget::System {
                cpus: None,
                command: cmd()
            }
        );
        assert_eq!(
            live(&["-C", "0-3", "sleep", "10"]).target,
            LiveTarget::System {
                cpus: Some("0-3".into()),
                command: cmd()
            }
        );
        assert_eq!(live(&["-a"]).target, LiveTarget::all_cpus());
        assert_eq!(
            live(&["-a", "-G", "x.slice"]).target,
            LiveTarget::Cgroups(vec!["x.slice".into()])
        );
        assert_eq!(live(&["-p", "1,2"]).target, LiveTarget::Pids(vec![1, 2]));
        assert_eq!(live(&[]).target, LiveTarget::Command(vec![]));
        // Combinations that mean nothing are refused by the parser.
        for bad in [
            &["-p", "1", "--", "true"][..],
            &["-t", "1", "-a"],
            &["-p", "1", "-t", "2"],
            &["-G", "x", "-C", "0"],
            &["-G", "x", "--", "true"],
        ] {
            let mut v = vec!["tma"];
            v.extend(bad);
            assert!(T::try_parse_from(v).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn perf_spellings_of_csv_repeat_and_durations() {
        let t = T::parse_from(["tma", "-x,", "-r", "3", "--", "true"]);
        let c = config(&t.a, &RootArg::default()).unwrap();
        assert_eq!(c.render.format, Format::Csv);
        assert_eq!(c.live().unwrap().repeat, Some(3));
        assert!(T::try_parse_from(["tma", "-x", ";", "true"]).is_err());
        assert!(T::try_parse_from(["tma", "-x,", "--json", "true"]).is_err());
        assert_eq!(live(&["-I", "100", "true"]).interval_ms, Some(100));
        assert_eq!(live(&["-I", "2s", "true"]).interval_ms, Some(2000));
        assert_eq!(live(&["-a", "--duration", "10"]).duration_s, Some(10.0));
        assert_eq!(live(&["-a", "--duration", "1m"]).duration_s, Some(60.0));
        assert_eq!(live(&["-a", "--duration", "250ms"]).duration_s, Some(0.25));
        assert!(T::try_parse_from(["tma", "--cpu", "0", "-a"]).is_err());
    }

    #[test]
    fn nodes_are_comma_separated() {
        let t = T::parse_from(["tma", "--import", "f", "--nodes", "a,b"]);
        assert_eq!(t.a.tree.nodes, ["a", "b"]);
    }

    #[test]
    fn only_repeated_or_stepped_live_runs_are_long() {
        let long = |argv: &[&str]| {
            let mut v = vec!["tma"];
            v.extend(argv);
            long_run(&config(&T::parse_from(v).a, &RootArg::default()).unwrap())
        };
        assert!(!long(&["--", "true"]));
        assert!(!long(&["--repeat", "1", "--", "true"]));
        assert!(long(&["--repeat", "3", "--", "true"]));
        assert!(long(&["--drilldown", "--", "true"]));
        assert!(long(&["--no-multiplex", "--", "true"]));
        assert!(!long(&["--import", "f.csv"]));
    }

    #[test]
    fn root_gives_both_trees() {
        let t = T::parse_from(["tma", "--", "true"]);
        let root = RootArg {
            root: Some("/x".into()),
        };
        let c = config(&t.a, &root).unwrap();
        assert_eq!(c.host.sys, PathBuf::from("/x/sys"));
        assert_eq!(c.host.cpuinfo_path(), PathBuf::from("/x/proc/cpuinfo"));
    }
}
