//! `tma events`: the raw events a TMA level needs, with their perf encodings, and a ready
//! `perf stat` command (grouped as the vendor rules require) whose output `tma stat --import`
//! reads back.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use tma_catalog::{Encoding, EventKind, Model};
use tma_metrics::Selection;
use tma_report::ReportError;

use crate::cmd::list::CpuJson;
use crate::cmd::stat::{cpuinfo_path, select_model};

/// List the raw events a TMA level needs, with perf encodings and a ready perf command.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// CPU model (e.g. spr, icx, zen4); default: this machine.
    #[arg(long, value_name = "NAME")]
    pub cpu: Option<String>,
    /// Deepest tree level the events must cover.
    #[arg(short = 'l', long = "level", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: u8,
    /// Only the events of these nodes (comma-separated) and their subtrees.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Print a `perf stat -x,` command that records the events, grouped for the counters.
    #[arg(long)]
    pub perf_cmd: bool,
    /// File the printed perf command writes (with --perf-cmd).
    #[arg(long, value_name = "FILE", default_value = "perf-stat.csv")]
    pub perf_output: String,
    /// Print JSON (schema `tma.events`, version 1).
    #[arg(long)]
    pub json: bool,
    /// Write the output to FILE (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The command the printed perf command should measure (default: CMD).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// One event with its encoding.
#[derive(Debug, Clone, Serialize)]
pub struct EventRow {
    /// Event id as the formulas write it.
    pub id: String,
    /// What `perf stat -e` accepts.
    pub perf_spec: String,
    /// The name perf prints for it in `-x,` / `-j` output.
    pub perf_name: String,
    pub pmu: &'static str,
    /// `perf_event_attr.config`, hex.
    pub config: String,
    /// `perf_event_attr.config1`, hex (0x0 when unused).
    pub config1: String,
    /// `fixed`, `gp`, `slots`, `perf_metrics`, `tsc`.
    pub counter: String,
    pub taken_alone: bool,
}

/// The events, the groups and the perf command.
#[derive(Debug, Clone, Serialize)]
pub struct EventPlan {
    pub events: Vec<EventRow>,
    /// perf specs per group, in order; a group of one is an ungrouped event.
    pub groups: Vec<Vec<String>>,
    pub perf_command: String,
    /// `EV:retire_latency` operands the selection uses that have no default in the
    /// tables: they come from TPEBS sampling, not from counting.
    pub retire_latency_without_default: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (model, source) = select_model(args.cpu.as_deref(), None, &cpuinfo_path())?;
    let sel = Selection {
        max_level: args.level,
        nodes: args.nodes.clone(),
    };
    let cmd = if args.command.is_empty() {
        "CMD".to_string()
    } else {
        args.command
            .iter()
            .map(|a| tma_report::shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let plan = plan(model, &sel, &args.perf_output, &cmd)?;
    crate::render::emit(args.output.as_deref(), |w| {
        if args.json {
            #[derive(Serialize)]
            struct Doc<'a> {
                cpu: CpuJson<'a>,
                level: u8,
                nodes: &'a [String],
                #[serde(flatten)]
                plan: &'a EventPlan,
            }
            tma_report::write_json(
                w,
                "tma.events",
                1,
                &Doc {
                    cpu: CpuJson::of(model),
                    level: args.level,
                    nodes: &args.nodes,
                    plan: &plan,
                },
            )
        } else if args.perf_cmd {
            render_perf_cmd(w, model, &args, &plan)
        } else {
            render_table(w, model, source.describe(), &args, &plan)
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

fn counter_kind(e: &Encoding) -> &'static str {
    match e.kind {
        EventKind::Slots => "slots",
        EventKind::PerfMetrics(_) => "perf_metrics",
        EventKind::Tsc => "tsc",
        EventKind::Core if e.fixed.is_some() => "fixed",
        EventKind::Core => "gp",
    }
}

/// The name perf prints for a spec: the `name=` term when there is one, else the spec.
pub fn perf_name(spec: &str) -> String {
    if let Some(i) = spec.find("name=") {
        let rest = &spec[i + 5..];
        let end = rest.find([',', '/']).unwrap_or(rest.len());
        return rest[..end].to_string();
    }
    spec.to_string()
}

/// Events of the selection level by level, in the order the tree uses them (so the events of
/// one level, and of one formula, end up in the same group where they fit), then any others
/// `required_events` lists.
fn ordered_events(model: &Model, sel: &Selection) -> anyhow::Result<Vec<String>> {
    let required = tma_metrics::required_events(model, sel)?;
    let mut out: Vec<String> = Vec::new();
    fn visit(
        model: &Model,
        formula: &str,
        depth: usize,
        out: &mut Vec<String>,
        req: &std::collections::BTreeSet<String>,
    ) {
        for id in tma_catalog::encode::formula_identifiers(formula) {
            if let Some(m) = model.metric(id) {
                if depth < 16 {
                    visit(model, m.formula, depth + 1, out, req);
                }
            } else if model.node(id).is_some() {
                // A reference to another node: its events come with that node.
            } else if req.contains(id) && !out.iter().any(|o| o == id) {
                out.push(id.to_string());
            }
        }
    }
    // Level by level, so that the events of the upper levels share the first groups.
    let mut nodes = tma_metrics::node_order(model, sel);
    nodes.sort_by_key(|n| n.level);
    for n in nodes {
        visit(model, n.formula, 0, &mut out, &required);
        visit(model, n.threshold, 0, &mut out, &required);
    }
    for id in &required {
        if !out.contains(id) {
            out.push(id.clone());
        }
    }
    Ok(out)
}

/// Encode the events and pack them into perf groups:
/// * topdown metric events (Ice Lake+) in one group led by `slots`;
/// * `taken_alone` events alone;
/// * the TSC (`msr` PMU) ungrouped;
/// * the other events in groups of at most `gp_counters` general-purpose events, in tree
///   order; fixed-counter events join the first group without counting against the limit.
pub fn plan(model: &Model, sel: &Selection, output: &str, cmd: &str) -> anyhow::Result<EventPlan> {
    let ids = ordered_events(model, sel)?;
    let mut rows = Vec::with_capacity(ids.len());
    let mut encs = Vec::with_capacity(ids.len());
    for id in &ids {
        let e = model.encode(id)?;
        let spec = model.perf_event_spec(id)?;
        rows.push(EventRow {
            id: id.clone(),
            perf_name: perf_name(&spec),
            perf_spec: spec,
            pmu: e.pmu,
            config: format!("{:#x}", e.config),
            config1: format!("{:#x}", e.config1),
            counter: counter_kind(&e).to_string(),
            taken_alone: e.taken_alone,
        });
        encs.push(e);
    }
    let mut topdown: Vec<String> = Vec::new();
    let mut slots: Option<String> = None;
    let mut alone: Vec<Vec<String>> = Vec::new();
    let mut fixed: Vec<String> = Vec::new();
    let mut gp: Vec<String> = Vec::new();
    for (r, e) in rows.iter().zip(&encs) {
        let spec = r.perf_spec.clone();
        match e.kind {
            EventKind::Slots if e.fixed.is_some() => slots = Some(spec),
            EventKind::PerfMetrics(_) => topdown.push(spec),
            EventKind::Tsc => alone.push(vec![spec]),
            _ if e.taken_alone => alone.push(vec![spec]),
            _ if e.fixed.is_some() => fixed.push(spec),
            _ => gp.push(spec),
        }
    }
    let mut groups: Vec<Vec<String>> = Vec::new();
    if !topdown.is_empty() {
        // perf and the kernel require slots as the leader of the metric events.
        let leader = match slots.take() {
            Some(s) => s,
            None => {
                if model.pmu == "cpu" {
                    "slots".to_string()
                } else {
                    format!("{}/slots/", model.pmu)
                }
            }
        };
        let mut g = vec![leader];
        g.extend(topdown);
        groups.push(g);
    }
    if let Some(s) = slots {
        fixed.insert(0, s);
    }
    let limit = model.gp_counters.max(1) as usize;
    let mut first = true;
    for chunk in gp.chunks(limit) {
        let mut g = Vec::new();
        if first {
            g.append(&mut fixed);
            first = false;
        }
        g.extend(chunk.iter().cloned());
        groups.push(g);
    }
    if !fixed.is_empty() {
        groups.push(std::mem::take(&mut fixed));
    }
    groups.extend(alone);
    let es: Vec<String> = groups
        .iter()
        .map(|g| {
            if g.len() == 1 {
                format!("-e '{}'", g[0])
            } else {
                format!("-e '{{{}}}'", g.join(","))
            }
        })
        .collect();
    let perf_command = format!(
        "perf stat -x, {} -o {} -- {cmd}",
        es.join(" "),
        tma_report::shell_quote(output)
    );
    let retire_latency_without_default = tma_metrics::required_retire_latencies(model, sel)?
        .into_iter()
        .filter(|(_, d)| d.is_none())
        .map(|(id, _)| id)
        .collect();
    Ok(EventPlan {
        events: rows,
        groups,
        perf_command,
        retire_latency_without_default,
    })
}

fn render_table(
    w: &mut dyn Write,
    model: &Model,
    cpu_source: &str,
    args: &Args,
    plan: &EventPlan,
) -> Result<(), ReportError> {
    writeln!(
        w,
        "{} ({}, {cpu_source}): {} events for level {}{}",
        model.name,
        model.key,
        plan.events.len(),
        args.level,
        if args.nodes.is_empty() {
            String::new()
        } else {
            format!(" under {}", args.nodes.join(", "))
        }
    )?;
    let mut t = tma_report::table(&["event", "counter", "perf encoding"]);
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

fn render_perf_cmd(
    w: &mut dyn Write,
    model: &Model,
    args: &Args,
    plan: &EventPlan,
) -> Result<(), ReportError> {
    writeln!(
        w,
        "# {} level-{} events for {} ({}): {} events in {} groups (at most {} general-purpose counters each).",
        plan.events.len(),
        args.level,
        model.name,
        model.key,
        plan.events.len(),
        plan.groups.len(),
        model.gp_counters
    )?;
    writeln!(
        w,
        "# The NMI watchdog holds a counter when on: `sysctl kernel.nmi_watchdog=0` before recording."
    )?;
    rl_note(w, plan, "# ")?;
    writeln!(w, "{}", plan.perf_command)?;
    let nodes = if args.nodes.is_empty() {
        String::new()
    } else {
        format!(" --nodes {}", args.nodes.join(","))
    };
    writeln!(
        w,
        "# then: tma stat --import {} --cpu {} -l {}{nodes}",
        tma_report::shell_quote(&args.perf_output),
        model.key,
        args.level
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_name_takes_the_name_term() {
        assert_eq!(
            perf_name("cpu/event=0x1a0,umask=0x1,cmask=0x6,name=de_x__c6/"),
            "de_x__c6"
        );
        assert_eq!(perf_name("slots"), "slots");
    }

    #[test]
    fn zen4_level2_groups_fit_six_counters() {
        let m = tma_catalog::by_name("zen4").unwrap();
        let p = plan(m, &Selection::level(2), "out.csv", "CMD").unwrap();
        assert_eq!(p.events.len(), 12);
        assert!(p.groups.iter().all(|g| g.len() <= 6), "{:?}", p.groups);
        assert_eq!(p.groups.len(), 2);
        // Level 1 needs exactly the 6 counters: it is counted as one group.
        let l1 = plan(m, &Selection::level(1), "out.csv", "CMD").unwrap();
        let mut a = l1.groups[0].clone();
        let mut b = p.groups[0].clone();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        // Every event is in exactly one group.
        let mut all: Vec<&String> = p.groups.iter().flatten().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 12);
    }

    #[test]
    fn quoting() {
        assert_eq!(tma_report::shell_quote("./app"), "./app");
        assert_eq!(tma_report::shell_quote("a b"), "'a b'");
        assert_eq!(tma_report::shell_quote("it's"), "'it'\\''s'");
    }
}
