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
    /// On a hybrid part (adl, mtl), the events of this core type only: core or atom.
    /// Without it, --perf-cmd lists each core type's events and records them all at once.
    #[arg(long, value_name = "TYPE")]
    pub cputype: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// The command the printed perf command should measure (default: CMD).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    crate::output::check(args.out.output.as_deref(), [])?;
    let (mut model, source) = tma_stat::select_model(args.cpu.cpu.as_deref(), None, &root.host())?;
    let family = tma_stat::core_family(model);
    if let Some(t) = &args.cputype {
        let pmu = format!("cpu_{}", t.strip_prefix("cpu_").unwrap_or(t));
        model = family
            .iter()
            .copied()
            .find(|m| m.pmu == pmu)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--cputype {t}: the {} tables are for the core types {}",
                    model.key,
                    if family.is_empty() {
                        "of a part with one (no --cputype)".to_string()
                    } else {
                        family.iter().map(|m| m.pmu).collect::<Vec<_>>().join(", ")
                    }
                )
            })?;
    } else if args.perf_cmd && !args.out.json && family.len() > 1 {
        let cmd = if args.command.is_empty() {
            "CMD".to_string()
        } else {
            tma_render::shell_words(&args.command)
        };
        crate::output::emit(args.out.output.as_deref(), |w| {
            every_core_type(w, &args, &family, &cmd)
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

/// `--perf-cmd` on a hybrid part: each core type's event list (its PMU's events, grouped as
/// `tma stat` counts them with that type's table), and one perf command that records every
/// type, which `tma stat --import` reads as a tree per type.
fn every_core_type(
    w: &mut dyn std::io::Write,
    args: &Args,
    family: &[&'static tma_catalog::Model],
    cmd: &str,
) -> anyhow::Result<()> {
    let mut es: Vec<String> = Vec::new();
    let mut level = args.tree.level;
    for m in family {
        let choice = tma_stat::MetricChoice::resolve_with(
            args.metric.metric_words().as_deref(),
            &args.metric.metric_groups,
            args.metric.bottlenecks,
            m,
        )?;
        level = level.max(choice.level);
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
        let plan = tma_stat::groups::perf_plan(m, &sel, &args.perf_output, cmd)?;
        let list: Vec<String> = plan
            .groups
            .iter()
            .map(|g| {
                if g.len() == 1 {
                    format!("-e '{}'", g[0])
                } else {
                    format!("-e '{{{}}}'", g.join(","))
                }
            })
            .collect();
        writeln!(
            w,
            "# {} ({}, {} table): {} level-{} events in {} groups (at most {} general-purpose counters each):",
            tma_stat::core_type_label(m.pmu),
            m.pmu,
            m.key,
            plan.events.len(),
            sel.max_level,
            plan.groups.len(),
            m.gp_counters
        )?;
        writeln!(w, "#   {}", list.join(" "))?;
        es.extend(list);
    }
    writeln!(
        w,
        "# The NMI watchdog holds a counter when on: {} before recording.",
        tma_sys::advice::NMI_WATCHDOG_OFF
    )?;
    writeln!(
        w,
        "perf stat -x, {} -o {} -- {cmd}",
        es.join(" "),
        tma_render::shell_quote(&args.perf_output)
    )?;
    writeln!(
        w,
        "# then: tma stat --import {} --cpu {} -l {level} (a tree per core type)",
        tma_render::shell_quote(&args.perf_output),
        family[0].key
    )?;
    Ok(())
}
