//! `tma events`: the raw events a TMA level needs, with their perf encodings, and the
//! `perf stat` command that records them grouped as `tma stat` counts them
//! (`tma_stat::groups::perf_plan`; rendering in `tma_stat::render::events`).

use std::process::ExitCode;

use tma_metrics::Selection;
use tma_stat::render::events::{self as render, EventsRequest};

use crate::cmd::args::{CpuArg, MetricArgs, OutputArgs, RootArg, TreeArgs};

/// List the raw events a TMA level needs, with perf encodings and a ready perf command.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub cpu: CpuArg,
    #[command(flatten)]
    pub tree: TreeArgs,
    #[command(flatten)]
    pub metric: MetricArgs,
    /// Print a `perf stat -x,` command that records the events, grouped as `tma stat`
    /// counts them.
    #[arg(long)]
    pub perf_cmd: bool,
    /// File the printed perf command writes (with --perf-cmd).
    #[arg(long, value_name = "FILE", default_value = "perf-stat.csv")]
    pub perf_output: String,
    #[command(flatten)]
    pub out: OutputArgs,
    /// The command the printed perf command should measure (default: CMD).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    crate::output::check(args.out.output.as_deref(), [])?;
    let (model, source) = tma_stat::select_model(args.cpu.cpu.as_deref(), None, &root.host())?;
    // The events of the metrics `tma stat -m/-M/-B` would show are recorded too.
    let choice = tma_stat::MetricChoice::resolve_with(
        args.metric.metric_words().as_deref(),
        &args.metric.metric_groups,
        args.metric.bottlenecks,
        model,
    )?;
    let level = args.tree.level.max(choice.level);
    let sel = Selection {
        max_level: level,
        nodes: args.tree.nodes.clone(),
        metrics: choice
            .metrics
            .iter()
            .chain(&choice.bottlenecks)
            .cloned()
            .collect(),
    };
    let cmd = if args.command.is_empty() {
        "CMD".to_string()
    } else {
        tma_render::shell_words(&args.command)
    };
    let plan = tma_stat::groups::perf_plan(model, &sel, &args.perf_output, &cmd)?;
    let mut metric_flags: Vec<String> = Vec::new();
    if let Some(list) = &args.metric.metrics {
        metric_flags.push(if list.is_empty() {
            "-m".to_string()
        } else {
            format!("--metrics={list}")
        });
    }
    if !args.metric.metric_groups.is_empty() {
        metric_flags.push(format!("-M{}", args.metric.metric_groups.join(",")));
    }
    if args.metric.bottlenecks {
        metric_flags.push("-B".to_string());
    }
    let req = EventsRequest {
        level,
        metric_flags: &metric_flags,
        nodes: &args.tree.nodes,
        perf_output: &args.perf_output,
    };
    crate::output::emit(args.out.output.as_deref(), |w| {
        if args.out.json {
            render::render_json(w, model, &req, &plan)
        } else if args.perf_cmd {
            render::render_perf_cmd(w, model, &req, &plan)
        } else {
            render::render_table(w, model, source.describe(), &req, &plan)
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
