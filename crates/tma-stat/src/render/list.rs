//! `tma list`: the TMA tree of a CPU model with descriptions, thresholds, formulas and
//! locate-with events, as text or JSON (`tma.list` v1).

use std::io::Write;

use serde::Serialize;
use tma_catalog::{Model, NodeDef, Unit};
use tma_render::{wrap, OutputError};

/// The schema name of `tma list --json`.
pub const SCHEMA: &str = "tma.list";

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

/// How a unit reads in the listing.
pub fn unit_label(u: Unit) -> &'static str {
    match u {
        Unit::PercentSlots => "% of slots",
        Unit::Percent => "%",
        Unit::Number => "value",
    }
}

const WIDTH: usize = 100;

/// The tree as text, wrapped at 100 columns.
pub fn render_text(
    w: &mut dyn Write,
    model: &Model,
    max_level: u8,
    cpu_source: &str,
) -> Result<(), OutputError> {
    let nodes = tree_order(model, max_level);
    let version = model
        .tma_version
        .map(|v| format!("TMA {v}, "))
        .unwrap_or_default();
    writeln!(
        w,
        "{} ({}, {cpu_source}): {version}{} nodes, {} slots per cycle, {} general-purpose counters",
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

/// The CPU model of `tma list` and `tma events` JSON documents.
#[derive(Serialize)]
pub struct CpuJson<'a> {
    pub key: &'a str,
    pub name: &'a str,
    pub vendor: tma_catalog::Vendor,
    pub source: &'a str,
    /// TMA version of the tables (`null` when the data names none).
    pub tma_version: Option<&'a str>,
    pub slots_per_cycle: u32,
    pub gp_counters: u32,
    pub fixed_counters: u32,
}

impl<'a> CpuJson<'a> {
    /// The JSON view of a model.
    pub fn of(m: &'a Model) -> Self {
        CpuJson {
            key: m.key,
            name: m.name,
            vendor: m.vendor,
            source: m.source,
            tma_version: m.tma_version,
            slots_per_cycle: m.slots_per_cycle,
            gp_counters: m.gp_counters,
            fixed_counters: m.fixed_counters,
        }
    }
}

/// The tree as JSON: every node and helper metric down to `max_level`.
pub fn render_json(w: &mut dyn Write, model: &Model, max_level: u8) -> Result<(), OutputError> {
    let doc = ListJson {
        cpu: CpuJson::of(model),
        nodes: tree_order(model, max_level),
        metrics: model.metrics,
    };
    tma_render::write_json(w, SCHEMA, 1, &doc)
}
