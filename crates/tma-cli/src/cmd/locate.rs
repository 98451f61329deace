//! `tma locate`: clap arguments -> [`tma_profile::LocateConfig`] -> [`tma_profile::run`]
//! (notes on stderr) -> pprof file and the text, JSON or folded renderer; the exit status is
//! the sampled command's.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use tma_host::Host;
use tma_perf::sampling::Rate;
use tma_profile::hotspots::{ReportOptions, SortKey, Syntax};
use tma_profile::{render, LocateConfig};

use crate::cmd::args::{self, RootArg};

/// Sample a node's locate-with event (or -e EVENT) and show hot functions and annotated code.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  tma locate -- ./app args\n  tma locate --node Memory_Bound -- ./app\n  \
tma locate -e cpu-clock -g --folded -o app.folded -- ./app\n  tma locate -p 1234 --duration 10\n  \
tma locate --import perf.data --symdir ./build\n  \
tma locate -a -C 1 -g --duration 4s\n  \
tma locate --tree -- ./app\n  tma locate --tree --csv -o app.csv -- ./app"
)]
pub struct Args {
    /// Sample the locate-with event of this TMA node (first listed; :pp when precise).
    #[arg(long, conflicts_with = "event")]
    pub node: Option<String>,
    /// CPU model tables to use (`tma list --cpu` keys); default: this machine's CPU.
    #[arg(long, value_name = "KEY", hide_possible_values = true,
          value_parser = crate::cmd::completions::cpu_keys().parsing(args::cpu_model))]
    pub cpu: Option<String>,
    /// Sample this event: a catalog name (with :p/:pp/:ppp), cycles, instructions, a software
    /// event (cpu-clock, task-clock, page-faults, ...), a tracepoint SYS:NAME, PMU/terms/ or
    /// rHEX: what `tma stat -e` takes.
    #[arg(short = 'e', long = "event")]
    pub event: Option<String>,
    /// Attach to this process (all its threads) instead of running a command.
    #[arg(short = 'p', long, conflicts_with = "import")]
    pub pid: Option<i32>,
    /// Sample every process on every CPU (kernel code too, when permitted), like
    /// `perf record -a`; for --duration S or until Ctrl-C.
    #[arg(short = 'a', long = "all-cpus", conflicts_with_all = ["pid", "import"])]
    pub all_cpus: bool,
    /// System-wide, on these CPUs only (`0-3,6`; implies -a).
    #[arg(short = 'C', long = "cpu-list", alias = "cpus", value_name = "CPUS",
          conflicts_with_all = ["pid", "import"])]
    pub cpus: Option<String>,
    /// Group the function table by these keys: comm, pid, dso, sym (default: dso,sym;
    /// with -a: comm,dso,sym).
    #[arg(long, value_name = "KEYS")]
    pub sort: Option<String>,
    /// Show children (samples with the function anywhere in the call chain) beside self,
    /// ordered by children; the default with -a -g.
    #[arg(long, conflicts_with = "no_children")]
    pub children: bool,
    /// Self samples only, also with -a -g.
    #[arg(long)]
    pub no_children: bool,
    /// Stop sampling after this long: 10s, 500ms, 2m; a bare number is seconds (a launched
    /// command is then sent SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = args::seconds)]
    pub duration: Option<f64>,
    /// Sample every N events.
    #[arg(long, value_name = "N", conflicts_with = "freq")]
    pub period: Option<u64>,
    /// Samples per second (default 4000; at most /proc/sys/kernel/perf_event_max_sample_rate).
    #[arg(long, value_name = "HZ")]
    pub freq: Option<u64>,
    /// Record call chains (frame pointers), for --folded and pprof stacks.
    #[arg(short = 'g', long = "call-graph")]
    pub call_graph: bool,
    /// Also sample kernel code.
    #[arg(long)]
    pub kernel: bool,
    /// Annotate this function instead of the hottest one.
    #[arg(long, value_name = "FUNC")]
    pub annotate: Option<String>,
    /// Disassembly syntax: intel (default) or att (perf annotate's `-M` works too).
    #[arg(
        long = "syntax",
        short_alias = 'M',
        alias = "disassembler-style",
        value_name = "SYNTAX",
        default_value = "intel"
    )]
    pub syntax: String,
    /// Rows in the function table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Print the `tma.locate` v1 JSON document (the sampled command shares stdout: add -o FILE);
    /// with --tree, the `tma.locate.tree` v1 document.
    #[arg(long, conflicts_with = "folded")]
    pub json: bool,
    /// A TMA tree per function: sample core cycles with the level's events read in the same
    /// group at every sample (Ice Lake and later: slots leads), and show the tree of the
    /// --top functions and a function x node table; without a PMU, the software group
    /// {cpu-clock, page-faults, context-switches, task-clock} per function. Live, a second
    /// pass samples the bottleneck's locate-with event to compare two estimators (see
    /// --no-direct).
    #[arg(long, conflicts_with_all = ["node", "event", "folded", "record", "annotate"])]
    pub tree: bool,
    /// Tree level for --tree (1 or 2).
    #[arg(
        long = "tree-level",
        value_name = "N",
        default_value_t = 1,
        requires = "tree"
    )]
    pub tree_level: u8,
    /// With --tree: write the TMA flame graph to FILE (SVG): width slots (or the sampler's
    /// count), colour each frame's dominant level-1 node saturated by its share.
    #[arg(long, value_name = "FILE", requires = "tree")]
    pub flame: Option<PathBuf>,
    /// With --tree: skip the second pass. By default --tree runs the command again (or samples
    /// -p/-a for another --duration) sampling the bottleneck node's locate-with event (cpu-clock
    /// without a PMU), and shows each function's share of the bottleneck by the group reads next
    /// to its share of those samples, with where they disagree; with --import, those samples
    /// come from the file when it holds them (recorded beside the group: `perf record -e
    /// '{...}:S' -e EVENT`).
    #[arg(long, requires = "tree")]
    pub no_direct: bool,
    /// With --tree: print CSV (one row per function) instead of text.
    #[arg(long, requires = "tree", conflicts_with = "json")]
    pub csv: bool,
    /// Print folded stacks (`a;b;c count`) for flame graphs (use with -g).
    #[arg(long)]
    pub folded: bool,
    /// Also write a gzip-compressed pprof profile to FILE.
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write the report to FILE instead of standard output (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also save the samples as a perf.data file (perf's format; `perf report -i` reads it).
    #[arg(long, value_name = "FILE", conflicts_with = "import")]
    pub record: Option<PathBuf>,
    /// Analyse a perf.data file made by `perf record` (or --record) instead of sampling.
    #[arg(long, value_name = "FILE")]
    pub import: Option<PathBuf>,
    /// Look for binaries in DIR (by file name) before their recorded paths.
    #[arg(long, value_name = "DIR")]
    pub symdir: Vec<PathBuf>,
    /// Kernel symbols for imported data (a copy of that machine's /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
    /// The command to sample, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
}

/// This machine's model tables, when the catalog knows the CPU.
fn this_cpu_model(host: &Host) -> Option<&'static tma_catalog::Model> {
    let info = host.cpuinfo_bytes().ok()?;
    let (vendor, family, model, stepping) = tma_catalog::parse_cpuinfo(&info).ok()?;
    tma_catalog::identify(&vendor, family, model, stepping)
        .ok()?
        .into_iter()
        .next()
}

/// The clap-free configuration of these arguments.
pub fn config(args: &Args, root: &RootArg) -> anyhow::Result<LocateConfig> {
    let host = root.host();
    let syntax = match args.syntax.to_ascii_lowercase().as_str() {
        "intel" => Syntax::Intel,
        "att" | "at&t" | "gas" => Syntax::Att,
        other => bail!("unknown syntax {other:?} for --syntax: use intel or att"),
    };
    let system_wide = args.all_cpus || args.cpus.is_some();
    let cpus = match &args.cpus {
        Some(text) => Some(
            tma_host::parse_cpu_list(text.as_bytes())
                .map_err(|e| anyhow::anyhow!("bad -C {text:?} ({e}): give CPUs like 0-3,6"))?,
        ),
        None => None,
    };
    let sort = match &args.sort {
        Some(text) => SortKey::parse_list(text).map_err(anyhow::Error::msg)?,
        None if system_wide => vec![SortKey::Comm, SortKey::Dso, SortKey::Sym],
        None => Vec::new(),
    };
    Ok(LocateConfig {
        import: args.import.clone(),
        pid: args.pid,
        system_wide,
        cpus,
        command: args.command.clone(),
        node: args.node.clone(),
        event: args.event.clone(),
        cpu: args.cpu.clone(),
        this_cpu: this_cpu_model(&host),
        duration_s: args.duration,
        rate: match (args.period, args.freq) {
            (Some(p), _) => Some(Rate::Period(p)),
            (None, Some(f)) => Some(Rate::Freq(f)),
            (None, None) => None,
        },
        call_graph: args.call_graph,
        // Whole stacks only for the outputs that show them.
        stacks: args.folded || args.pprof.is_some() || args.flame.is_some(),
        kernel: args.kernel,
        report: ReportOptions {
            annotate: args.annotate.clone(),
            syntax,
            top: args.top,
            sort,
            children: args.children || (system_wide && !args.no_children),
            // Frame lines are shown by pprof only.
            no_frame_lines: args.pprof.is_none(),
        },
        folded: args.folded,
        // The text report on the terminal repeats the notes at its end.
        echo_notes: args.json || args.folded || args.csv || args.output.is_some(),
        record: args.record.clone(),
        symdir: args.symdir.clone(),
        kallsyms: args.kallsyms.clone(),
        host,
        tree: args.tree.then_some(args.tree_level),
        direct: args.tree && !args.no_direct,
        ..LocateConfig::default()
    })
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    crate::output::check(
        args.output.as_deref(),
        [
            ("--pprof", args.pprof.as_deref()),
            ("--record", args.record.as_deref()),
            ("--flame", args.flame.as_deref()),
        ],
    )?;
    let cfg = config(&args, root)?;
    let located = tma_profile::run(&cfg, &mut std::io::stderr())?;
    let profile = &located.profile;
    if let Some(path) = &args.pprof {
        tma_render::write_output(path, |w| {
            tma_profile::pprof::encode(profile, located.duration_ns, w)?;
            Ok(())
        })?;
    }
    if let Some(path) = &args.flame {
        let svg = tma_report::flame::tma_svg(profile, located.dominant.as_ref())?;
        tma_render::write_output(path, |w| {
            w.write_all(svg.as_bytes())?;
            Ok(())
        })?;
    }
    crate::output::emit(args.output.as_deref(), |w| {
        if let Some(tree) = &located.tree {
            return if args.json {
                tma_profile::tree::json(w, tree)
            } else if args.csv {
                tma_profile::tree::csv(w, tree)
            } else {
                tma_profile::tree::text(w, tree)
            };
        }
        if args.json {
            render::json(w, profile)
        } else if args.folded {
            Ok(render::folded(w, profile)?)
        } else {
            Ok(render::text(w, profile)?)
        }
    })?;
    Ok(ExitCode::from(located.exit_status))
}
