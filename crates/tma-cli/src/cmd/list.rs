//! `tma list`: the TMA tree of a CPU model (rendering in `tma_stat::render::list`), or with
//! `--events` every event of its tables (`tma_stat::render::event_list`), or with `--metrics`
//! its helper metrics (`tma_stat::render::metric_list`).

use std::process::ExitCode;

use tma_stat::render::{event_list, list, metric_list};

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
    /// List every event of the CPU's tables with its encoding instead of the tree: all the
    /// core events of the vendor's event file, `*` marking those the TMA formulas use.
    /// With FILTER, only the events whose name contains it (case-insensitive).
    #[arg(long = "events", value_name = "FILTER", num_args = 0..=1, default_missing_value = "",
          conflicts_with = "level")]
    pub events: Option<String>,
    /// List the helper metrics of the CPU's tables instead of the tree (what `tma stat -m`
    /// and `-B` can show), by group, with units, `-M` groups and descriptions. With FILTER,
    /// only the metrics whose name or group contains it (case-insensitive).
    #[arg(long = "metrics", value_name = "FILTER", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["level", "events"])]
    pub metrics: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    crate::output::check(args.out.output.as_deref(), [])?;
    let (model, source) = tma_stat::select_model(args.cpu.cpu.as_deref(), None, &root.host())?;
    if let Some(filter) = args.events.as_deref() {
        crate::output::emit(args.out.output.as_deref(), |w| {
            if args.out.json {
                event_list::render_json(w, model, filter)
            } else {
                event_list::render_text(w, model, filter, source.describe())
            }
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(filter) = args.metrics.as_deref() {
        crate::output::emit(args.out.output.as_deref(), |w| {
            if args.out.json {
                metric_list::render_json(w, model, filter)
            } else {
                metric_list::render_text(w, model, filter, source.describe())
            }
        })?;
        return Ok(ExitCode::SUCCESS);
    }
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
