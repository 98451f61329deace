//! `tma events`: the raw events a TMA level needs, with their perf encodings, and the
//! `perf stat` command that records them grouped as `tma stat` counts them
//! (`tma_stat::groups::perf_plan`; rendering in `tma_stat::render::events`).

use std::ffi::OsString;
use std::path::PathBuf;
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
    pub perf_output: PathBuf,
    /// On a hybrid part (adl, mtl), the events of this core type only: core or atom.
    /// Without it, --perf-cmd lists each core type's events and records them all at once.
    #[arg(long, value_name = "TYPE")]
    pub cputype: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// The command the printed perf command should measure (default: CMD).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    crate::output::check(args.out.output.as_deref(), [])?;
    let host = root.host();
    let (mut model, source) = tma_stat::select_model(args.cpu.cpu.as_deref(), None, &host)?;
    let (types, here) = tma_stat::recording_core_types(model, &host)?;
    let cmd = if args.command.is_empty() {
        "CMD".to_string()
    } else {
        tma_render::shell_words(&args.command)
    };
    let metric_flags = metric_flags(&args);
    if let Some(want) = &args.cputype {
        if types.is_empty() {
            anyhow::bail!(
                "--cputype {want}: the {} tables are for a part with one core type (leave \
                 --cputype out)",
                model.key
            );
        }
        let pmus: Vec<&str> = types.iter().map(|t| t.pmu.as_str()).collect();
        let whose = if here {
            "this machine's".to_string()
        } else {
            format!("the {} tables'", model.key)
        };
        let pmu = tma_stat::pick_core_type(&pmus, want, &whose)?;
        let Some(t) = types.iter().find(|t| t.pmu == pmu) else {
            unreachable!("pick_core_type returns one of the types it is given")
        };
        if t.borrowed {
            anyhow::bail!(
                "--cputype {want}: {} has no table of its own (tma reads it with the {} table, \
                 on its own PMU): `tma events --perf-cmd` without --cputype records it with the \
                 other core types, `tma stat --cputype {want}` counts it alone, and --cputype {} \
                 lists that table's events",
                t.pmu,
                t.model.key,
                t.model.pmu.strip_prefix("cpu_").unwrap_or(t.model.pmu)
            );
        }
        model = t.model;
    } else if args.perf_cmd && !args.out.json && types.len() > 1 {
        crate::output::emit(args.out.output.as_deref(), |w| {
            every_core_type(w, &args, model.key, &types, here, &metric_flags, &cmd)
        })?;
        return Ok(ExitCode::SUCCESS);
    }
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
    let plan = tma_stat::groups::perf_plan(model, &sel, &args.perf_output, &cmd)?;
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

/// The `-m`/`-M`/`-B` flags the printed `tma stat --import` line repeats.
fn metric_flags(args: &Args) -> Vec<String> {
    let mut flags: Vec<String> = Vec::new();
    if let Some(list) = &args.metric.metrics {
        flags.push(if list.is_empty() {
            "-m".to_string()
        } else {
            format!("--metrics={list}")
        });
    }
    if !args.metric.metric_groups.is_empty() {
        flags.push(format!("-M{}", args.metric.metric_groups.join(",")));
    }
    if args.metric.bottlenecks {
        flags.push("-B".to_string());
    }
    flags
}

/// `--perf-cmd` on a hybrid part: each core type's events (its tree's, planned as `tma
/// stat` counts them with that type's table, and its cycles), on its own PMU, and one perf
/// command that records every type, which `tma stat --import` reads as a tree per type.
fn every_core_type(
    w: &mut dyn std::io::Write,
    args: &Args,
    key: &str,
    types: &[tma_stat::CoreTable],
    here: bool,
    metric_flags: &[String],
    cmd: &str,
) -> anyhow::Result<()> {
    let mut parts = Vec::with_capacity(types.len());
    let mut level = args.tree.level;
    for t in types {
        let choice = tma_stat::MetricChoice::resolve_with(
            args.metric.metric_words().as_deref(),
            &args.metric.metric_groups,
            args.metric.bottlenecks,
            t.model,
        )?;
        let sel = Selection {
            max_level: args.tree.level.max(choice.level),
            nodes: args.tree.nodes.clone(),
            metrics: choice
                .metrics
                .iter()
                .chain(&choice.bottlenecks)
                .cloned()
                .collect(),
        };
        level = level.max(sel.max_level);
        parts.push(render::CoreTypeEvents {
            table: t,
            level: sel.max_level,
            groups: tma_stat::groups::core_type_groups(t, &sel)?,
        });
    }
    let req = EventsRequest {
        level,
        metric_flags,
        nodes: &args.tree.nodes,
        perf_output: &args.perf_output,
    };
    render::render_core_types_perf_cmd(w, key, &parts, here, &req, cmd)?;
    Ok(())
}
