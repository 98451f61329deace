//! `tma list`: the TMA tree of a CPU model with descriptions, thresholds, formulas and
//! locate-with events.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use tma_catalog::{Model, NodeDef, Unit};
use tma_report::ReportError;

use crate::cmd::stat::{cpuinfo_path, select_model};
use tma_report::wrap;

/// Show the TMA tree of a CPU: nodes, descriptions, formulas, thresholds, locate-with events.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// CPU model (e.g. spr, icx, zen4); default: this machine.
    #[arg(long, value_name = "NAME")]
    pub cpu: Option<String>,
    /// Deepest level to show (default: all).
    #[arg(short = 'l', long = "level", value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: Option<u8>,
    /// Print JSON (schema `tma.list`, version 1).
    #[arg(long)]
    pub json: bool,
    /// Write the output to FILE (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (model, source) = select_model(args.cpu.as_deref(), None, &cpuinfo_path())?;
    let max = args.level.unwrap_or(u8::MAX);
    crate::render::emit(args.output.as_deref(), |w| {
        if args.json {
            render_json(w, model, max)
        } else {
            render_text(w, model, max, source.describe())
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Nodes of `model` down to `max_level`, depth-first in table order (parent, then its
/// children), so the listing reads as a tree.
pub fn tree_order(model: &Model, max_level: u8) -> Vec<&'static NodeDef> {
    fn walk(model: &Model, parent: Option<&str>, max: u8, out: &mut Vec<&'static NodeDef>) {
        for n in model.children(parent) {
            if n.level <= max {
                out.push(n);
                walk(model, Some(n.name), max, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(model, None, max_level, &mut out);
    out
}

pub fn unit_label(u: Unit) -> &'static str {
    match u {
        Unit::PercentSlots => "% of slots",
        Unit::Percent => "%",
        Unit::Number => "value",
    }
}

const WIDTH: usize = 100;

pub fn render_text(
    w: &mut dyn Write,
    model: &Model,
    max_level: u8,
    cpu_source: &str,
) -> Result<(), ReportError> {
    let nodes = tree_order(model, max_level);
    writeln!(
        w,
        "{} ({}, {cpu_source}): {} nodes, {} slots per cycle, {} general-purpose counters",
        model.name,
        model.key,
        nodes.len(),
        model.slots_per_cycle,
        model.gp_counters
    )?;
    writeln!(w, "Tables: {}", model.source)?;
    writeln!(
        w,
        "Values are percent of pipeline slots unless noted; a node is flagged when its threshold holds."
    )?;
    for n in nodes {
        let ind = "  ".repeat(n.level as usize - 1);
        let body = format!("{ind}    ");
        writeln!(w)?;
        let unit = if n.unit == Unit::PercentSlots {
            String::new()
        } else {
            format!("  ({})", unit_label(n.unit))
        };
        writeln!(w, "{ind}{}  [level {}]{unit}", n.name, n.level)?;
        if !n.description.is_empty() {
            for l in wrap(n.description, &body, WIDTH) {
                writeln!(w, "{l}")?;
            }
        }
        writeln!(w, "{body}formula:")?;
        for l in wrap(n.formula, &format!("{body}  "), WIDTH) {
            writeln!(w, "{l}")?;
        }
        if !n.threshold.is_empty() {
            writeln!(w, "{body}threshold: {}", n.threshold)?;
        }
        if !n.locate_with.is_empty() {
            writeln!(w, "{body}locate with: {}", n.locate_with.join(", "))?;
        }
    }
    let refs: Vec<_> = model.metrics.iter().collect();
    if !refs.is_empty() {
        writeln!(w)?;
        writeln!(w, "Helper metrics used by the formulas:")?;
        for m in refs {
            let one = format!("  {} = {}", m.name, m.formula);
            if one.len() <= WIDTH {
                writeln!(w, "{one}")?;
            } else {
                writeln!(w, "  {} =", m.name)?;
                for l in wrap(m.formula, "      ", WIDTH) {
                    writeln!(w, "{l}")?;
                }
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct ListJson<'a> {
    cpu: CpuJson<'a>,
    nodes: Vec<&'a NodeDef>,
    metrics: &'a [tma_catalog::MetricDef],
}

#[derive(Serialize)]
pub struct CpuJson<'a> {
    pub key: &'a str,
    pub name: &'a str,
    pub vendor: tma_catalog::Vendor,
    pub source: &'a str,
    pub slots_per_cycle: u32,
    pub gp_counters: u32,
    pub fixed_counters: u32,
}

impl<'a> CpuJson<'a> {
    pub fn of(m: &'a Model) -> Self {
        CpuJson {
            key: m.key,
            name: m.name,
            vendor: m.vendor,
            source: m.source,
            slots_per_cycle: m.slots_per_cycle,
            gp_counters: m.gp_counters,
            fixed_counters: m.fixed_counters,
        }
    }
}

pub fn render_json(w: &mut dyn Write, model: &Model, max_level: u8) -> Result<(), ReportError> {
    let doc = ListJson {
        cpu: CpuJson::of(model),
        nodes: tree_order(model, max_level),
        metrics: model.metrics,
    };
    tma_report::write_json(w, "tma.list", 1, &doc)
}
