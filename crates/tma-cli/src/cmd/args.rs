//! Argument groups several commands share (`#[command(flatten)]`), so a flag reads and
//! behaves the same everywhere.

use std::path::PathBuf;

use tma_perf::host::Host;

/// `--cpu NAME`.
#[derive(Debug, Clone, clap::Args)]
pub struct CpuArg {
    /// CPU model whose tables to use (e.g. spr, icx, zen4); default: from the recording,
    /// else this machine.
    #[arg(long, value_name = "NAME")]
    pub cpu: Option<String>,
}

/// `-l N` and `--nodes LIST`: which part of the tree.
#[derive(Debug, Clone, clap::Args)]
pub struct TreeArgs {
    /// Deepest tree level (1 = top level).
    #[arg(short = 'l', long = "level", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: u8,
    /// Only these nodes (comma-separated names) and their subtrees, down to --level.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub nodes: Vec<String>,
}

/// `-m`, `-M` and `-B`: the helper metrics shown (stat) or recorded (events) with the tree.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricArgs {
    /// Print helper metrics after the tree, grouped (Thread, Core, Memory...): without LIST a
    /// default set (IPC, CPI, CoreIPC, ILP, MLP, ...); `all`; or metric names and groups,
    /// comma-separated (`IPC,Memory`). `tma list --metrics` shows them.
    #[arg(short = 'm', long = "metrics", value_name = "LIST", num_args = 0..=1,
          default_missing_value = "")]
    pub metrics: Option<String>,
    /// Select by `perf stat -M` group names, comma-separated: TopdownL1..TopdownL6 and
    /// PipelineL1/PipelineL2 set the tree level, other names (Summary, Mem, ...) add the
    /// metrics the tables list under them.
    #[arg(short = 'M', value_name = "NAME", value_delimiter = ',')]
    pub metric_groups: Vec<String>,
    /// Print the Bottleneck_* costs (% of pipeline slots) as a ranked list after the tree.
    #[arg(short = 'B', long = "bottlenecks")]
    pub bottlenecks: bool,
}

impl MetricArgs {
    /// `-m LIST` as words (`Some(empty)` for `-m` alone: the default set).
    pub fn metric_words(&self) -> Option<Vec<String>> {
        self.metrics.as_deref().map(|l| {
            l.split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect()
        })
    }
}

/// `--json` and `-o FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Print JSON (a versioned schema, `tma.<command>`).
    #[arg(long)]
    pub json: bool,
    /// Write the output to FILE instead of standard output (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `--root DIR` (hidden, global): read `DIR/proc` and `DIR/sys` instead of `/proc` and
/// `/sys`, for tests on fake trees. The one convention of every command that reads the host;
/// accepted before or after the subcommand.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RootArg {
    /// Read proc/ and sys/ under DIR instead of /proc and /sys (fake trees, tests).
    #[arg(long, value_name = "DIR", hide = true, global = true)]
    pub root: Option<PathBuf>,
}

impl RootArg {
    /// The `/sys` and `/proc` roots the host facts are read from.
    pub fn host(&self) -> Host {
        match &self.root {
            Some(r) => Host::under(r),
            None => Host::system(),
        }
    }
}
