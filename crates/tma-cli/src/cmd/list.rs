//! `tma list`: the TMA tree of a CPU model (rendering in `tma_stat::render::list`).

use std::process::ExitCode;

use tma_stat::render::list;

use crate::cmd::args::{CpuArg, OutputArgs, RootArg};

/// Show the TMA tree of a CPU: nodes, descriptions, formulas, thresholds, locate-with events.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub cpu: CpuArg,
    /// Deepest level to show (default: all).
    #[arg(short = 'l', long = "level", value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: Option<u8>,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    let (model, source) = tma_stat::select_model(args.cpu.cpu.as_deref(), None, &root.host())?;
    let max = args.level.unwrap_or(u8::MAX);
    crate::output::emit(args.out.output.as_deref(), |w| {
        if args.out.json {
            list::render_json(w, model, max)
        } else {
            list::render_text(w, model, max, source.describe())
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
