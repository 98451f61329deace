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

/// `--json` and `-o FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Print JSON (a versioned schema, `tma.<command>`).
    #[arg(long)]
    pub json: bool,
    /// Write the output to FILE (atomically) instead of standard output.
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
