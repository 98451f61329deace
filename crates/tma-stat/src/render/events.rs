//! `tma events`: the raw events of a tree selection with their perf encodings (a table or
//! JSON, `tma.events` v1), or the `perf stat` command that records them grouped as `tma stat`
//! counts them.

use std::io::Write;

use serde::Serialize;
use tma_catalog::Model;
use tma_render::OutputError;

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
    pub perf_output: &'a std::path::Path,
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
) -> Result<(), OutputError> {
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
) -> Result<(), OutputError> {
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
) -> Result<(), OutputError> {
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
    let (nodes, metrics) = import_flags(req);
    writeln!(
        w,
        "# then: tma stat --import {} --cpu {} -l {}{nodes}{metrics}",
        tma_render::shell_quote_os(req.perf_output.as_os_str()),
        model.key,
        req.level
    )?;
    Ok(())
}

/// The `--nodes` and metric flags the printed `tma stat --import` line repeats (each with
/// its leading space, empty when not asked for).
fn import_flags(req: &EventsRequest) -> (String, String) {
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
    (nodes, metrics)
}

fn rl_note(w: &mut dyn Write, plan: &EventPlan, prefix: &str) -> Result<(), OutputError> {
    if !plan.retire_latency_without_default.is_empty() {
        writeln!(
            w,
            "{prefix}Retire latencies without a default in the tables (need TPEBS sampling; nodes using them show as missing): {}",
            plan.retire_latency_without_default.join(", ")
        )?;
    }
    Ok(())
}

/// One core type's part of a `perf stat` recording of every core type of a hybrid part
/// ([`crate::groups::core_type_groups`]).
pub struct CoreTypeEvents<'a> {
    pub table: &'a crate::CoreTable,
    /// The level its tree is recorded to (deeper than asked where its metrics need it).
    pub level: u8,
    pub groups: Vec<Vec<String>>,
}

/// `tma events --perf-cmd` on a hybrid part: each core type's event list, then one perf
/// command that records them all, which `tma stat --import` reads as a tree per core type
/// and the merged view. `here`: the types are this machine's, not only those of the tables.
pub fn render_core_types_perf_cmd(
    w: &mut dyn Write,
    key: &str,
    types: &[CoreTypeEvents],
    here: bool,
    req: &EventsRequest,
    cmd: &str,
) -> Result<(), OutputError> {
    let names: Vec<&str> = types.iter().map(|t| t.table.label).collect();
    if here {
        writeln!(
            w,
            "# This machine's {} core types ({}), each counted on its own PMU:",
            types.len(),
            names.join(", ")
        )?;
    } else {
        writeln!(
            w,
            "# The {} core types the {key} tables know ({}), each counted on its own PMU \
             (a machine with a further type, as cpu_lowpower, lists it when this runs there):",
            types.len(),
            names.join(", ")
        )?;
    }
    let mut all: Vec<String> = Vec::new();
    for t in types {
        let list = crate::groups::e_args(&t.groups);
        let mut events: Vec<&str> = t.groups.iter().flatten().map(String::as_str).collect();
        events.sort_unstable();
        events.dedup();
        let table = if t.table.borrowed {
            format!(
                "no table of its own: the {} table's events on its PMU",
                t.table.model.key
            )
        } else {
            format!("{} table", t.table.model.key)
        };
        writeln!(
            w,
            "# {} ({}, {table}): {} level-{} events in {} groups (at most {} general-purpose counters each):",
            t.table.label,
            t.table.pmu,
            events.len(),
            t.level,
            t.groups.len(),
            t.table.model.gp_counters
        )?;
        writeln!(w, "#   {}", list.join(" "))?;
        all.extend(list);
    }
    writeln!(
        w,
        "# The events carry no name= term: perf prints a named event by that name alone, \
         which would lose its core type."
    )?;
    writeln!(
        w,
        "# The NMI watchdog holds a counter when on: {} before recording.",
        tma_sys::advice::NMI_WATCHDOG_OFF
    )?;
    writeln!(
        w,
        "perf stat -x, {} -o {} -- {cmd}",
        all.join(" "),
        tma_render::shell_quote_os(req.perf_output.as_os_str())
    )?;
    let (nodes, metrics) = import_flags(req);
    writeln!(
        w,
        "# then: tma stat --import {} --cpu {key} -l {}{nodes}{metrics} (a tree per core type, \
         and the merged view)",
        tma_render::shell_quote_os(req.perf_output.as_os_str()),
        req.level
    )?;
    Ok(())
}
