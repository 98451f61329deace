//! `tma events`: the raw events of a tree selection with their perf encodings (a table or
//! JSON, `tma.events` v1), or the `perf stat` command that records them grouped as `tma stat`
//! counts them.

use std::io::Write;

use serde::Serialize;
use tma_catalog::Model;
use tma_render::ReportError;

use crate::groups::EventPlan;
use crate::render::list::CpuJson;

/// The schema name of `tma events --json`.
pub const SCHEMA: &str = "tma.events";

/// What the user asked for: the selection, and the file and command of the perf command.
#[derive(Debug, Clone)]
pub struct EventsRequest<'a> {
    pub level: u8,
    pub nodes: &'a [String],
    /// The file the printed perf command writes.
    pub perf_output: &'a str,
    /// The metric flags (`-m ...`, `-M ...`, `-B`) the follow-up `tma stat` should repeat,
    /// each a separate word; empty without metrics.
    pub metric_flags: &'a [String],
}

/// `tma.events` v1: the model, the selection and the plan.
pub fn render_json(
    w: &mut dyn Write,
    model: &Model,
    req: &EventsRequest,
    plan: &EventPlan,
) -> Result<(), ReportError> {
    #[derive(Serialize)]
    struct Doc<'a> {
        cpu: CpuJson<'a>,
        level: u8,
        nodes: &'a [String],
        #[serde(flatten)]
        plan: &'a EventPlan,
    }
    tma_render::write_json(
        w,
        SCHEMA,
        1,
        &Doc {
            cpu: CpuJson::of(model),
            level: req.level,
            nodes: req.nodes,
            plan,
        },
    )
}

/// The events as a table, and the number of groups.
pub fn render_table(
    w: &mut dyn Write,
    model: &Model,
    cpu_source: &str,
    req: &EventsRequest,
    plan: &EventPlan,
) -> Result<(), ReportError> {
    writeln!(
        w,
        "{} ({}, {cpu_source}): {} events for level {}{}",
        model.name,
        model.key,
        plan.events.len(),
        req.level,
        if req.nodes.is_empty() {
            String::new()
        } else {
            format!(" under {}", req.nodes.join(", "))
        }
    )?;
    let mut t = tma_render::table(&["event", "counter", "perf encoding"]);
    for r in &plan.events {
        let counter = if r.taken_alone {
            format!("{} (alone)", r.counter)
        } else {
            r.counter.clone()
        };
        t.add_row(vec![r.id.clone(), counter, r.perf_spec.clone()]);
    }
    for line in t.to_string().lines() {
        writeln!(w, "{}", line.trim_end())?;
    }
    rl_note(w, plan, "")?;
    writeln!(
        w,
        "\n{} group{} for {} general-purpose counters; `--perf-cmd` prints the perf command.",
        plan.groups.len(),
        if plan.groups.len() == 1 { "" } else { "s" },
        model.gp_counters
    )?;
    Ok(())
}

/// The perf command, with comments on how to record and import.
pub fn render_perf_cmd(
    w: &mut dyn Write,
    model: &Model,
    req: &EventsRequest,
    plan: &EventPlan,
) -> Result<(), ReportError> {
    writeln!(
        w,
        "# {} level-{} events for {} ({}): {} events in {} groups (at most {} general-purpose counters each).",
        plan.events.len(),
        req.level,
        model.name,
        model.key,
        plan.events.len(),
        plan.groups.len(),
        model.gp_counters
    )?;
    writeln!(
        w,
        "# The NMI watchdog holds a counter when on: {} before recording.",
        tma_sys::advice::NMI_WATCHDOG_OFF
    )?;
    rl_note(w, plan, "# ")?;
    writeln!(w, "{}", plan.perf_command)?;
    let nodes = if req.nodes.is_empty() {
        String::new()
    } else {
        format!(" --nodes {}", req.nodes.join(","))
    };
    let metrics = if req.metric_flags.is_empty() {
        String::new()
    } else {
        format!(" {}", tma_render::shell_words(req.metric_flags))
    };
    writeln!(
        w,
        "# then: tma stat --import {} --cpu {} -l {}{nodes}{metrics}",
        tma_render::shell_quote(req.perf_output),
        model.key,
        req.level
    )?;
    Ok(())
}

fn rl_note(w: &mut dyn Write, plan: &EventPlan, prefix: &str) -> Result<(), ReportError> {
    if !plan.retire_latency_without_default.is_empty() {
        writeln!(
            w,
            "{prefix}Retire latencies without a default in the tables (need TPEBS sampling; nodes using them show as missing): {}",
            plan.retire_latency_without_default.join(", ")
        )?;
    }
    Ok(())
}
