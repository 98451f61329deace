//! `tma demo [sha256|dram|thp|onednn]`: the method, walked through on this machine with a bundled case
//! (`tma_demo`). Every step runs this same executable as a child process.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tma_demo::{Case, DemoConfig, DemoError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CaseArg {
    /// SHA-256: portable code vs the SHA-NI instructions (and interleaved streams).
    Sha256,
    /// DRAM-bound pointer chase vs the same chase with a software prefetch.
    Dram,
    /// Reference matmul reading its weights column-wise, without and with huge pages.
    Thp,
    /// oneDNN's matmul primitive and the reference matmul, each without and with huge pages;
    /// oneDNN's primitive executions as ITT regions (`tma stat --itt`).
    Onednn,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Case study to run (default: both, sha256 then dram).
    #[arg(value_enum)]
    pub case: Option<CaseArg>,
    /// Small sizes: a walkthrough in seconds (figures are noisier).
    #[arg(long)]
    pub quick: bool,
    /// Keep the workload reports in DIR (default: a temporary directory, removed at the end).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Skip the `tma locate` step.
    #[arg(long)]
    pub no_locate: bool,
    /// Skip the `tma bench --preset sha` step.
    #[arg(long)]
    pub no_bench: bool,
    /// The oneDNN library for the onednn case (as `tma workload onednn --dnnl`).
    #[arg(long, value_name = "PATH")]
    pub dnnl: Option<PathBuf>,
    /// Print derivations too: the SHA-256 instruction-level bound behind the "of limit" column.
    #[arg(short, long)]
    pub verbose: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find the tma executable to run steps")?;
    let (dir, keep_dir) = match args.dir {
        Some(d) => (d, true),
        None => (
            std::env::temp_dir().join(format!("tma-demo-{}", std::process::id())),
            false,
        ),
    };
    let cases = match args.case {
        Some(CaseArg::Sha256) => vec![Case::Sha256],
        Some(CaseArg::Dram) => vec![Case::Dram],
        Some(CaseArg::Thp) => vec![Case::Thp],
        Some(CaseArg::Onednn) => vec![Case::Onednn],
        None => vec![Case::Sha256, Case::Dram],
    };
    let cfg = DemoConfig {
        exe,
        cases,
        quick: args.quick,
        dir,
        keep_dir,
        locate: !args.no_locate,
        bench: !args.no_bench,
        debug_build: cfg!(debug_assertions),
        verbose: args.verbose,
        host: tma_host::Host::system(),
        dnnl: args.dnnl,
    };
    let progress = crate::progress::Lines::new("tma demo", true);
    let mut shown = |p: tma_demo::StepStart<'_>| progress.line(p.step, p.steps, p.title);
    match tma_demo::run_with_progress(&cfg, &mut std::io::stdout(), &mut shown) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        // Keep the I/O error itself in the chain, so a closed pipe is recognised.
        Err(DemoError::Io(e)) => Err(e.into()),
        Err(e) => Err(e.into()),
    }
}
