//! `tma list --metrics`: the helper metrics of a CPU model's tables, grouped as `tma stat -m`
//! shows them, with unit, the `perf stat -M` groups, description and formula, as text or
//! JSON (`tma.list-metrics` v1).

use std::io::Write;

use serde::Serialize;
use tma_catalog::{MetricDef, Model, Unit};
use tma_render::OutputError;

use super::list::CpuJson;

/// The schema name of `tma list --metrics --json`.
pub const SCHEMA: &str = "tma.list.metrics";
/// Its version: 2 since schema names 2026-11 (1 was named `tma.list-metrics`).
pub const SCHEMA_VERSION: u32 = 2;

/// The metrics whose name or group contains `filter` (case-insensitive; all when empty), in
/// table order.
pub fn entries<'m>(model: &'m Model, filter: &str) -> Vec<&'m MetricDef> {
    let filter = filter.to_ascii_lowercase();
    model
        .metrics
        .iter()
        .filter(|m| {
            m.name.to_ascii_lowercase().contains(&filter)
                || m.group.to_ascii_lowercase().contains(&filter)
        })
        .collect()
}

fn unit_word(u: Unit) -> &'static str {
    match u {
        Unit::PercentSlots => "% of slots",
        Unit::Percent => "%",
        Unit::Number => "",
    }
}

/// Text: one block per group, a line per metric (short name, unit, perf groups), its
/// description wrapped under it.
pub fn render_text(
    w: &mut dyn Write,
    model: &Model,
    filter: &str,
    cpu_source: &str,
) -> Result<(), OutputError> {
    let list = entries(model, filter);
    writeln!(
        w,
        "{} ({}, {cpu_source}): {} helper metric{}{}; `tma stat -m NAME,GROUP` shows them",
        model.name,
        model.key,
        list.len(),
        if list.len() == 1 { "" } else { "s" },
        if filter.is_empty() {
            String::new()
        } else {
            format!(" matching `{filter}`")
        }
    )?;
    let mut groups: Vec<&str> = Vec::new();
    for m in &list {
        if !groups.contains(&m.group) {
            groups.push(m.group);
        }
    }
    for g in groups {
        writeln!(w)?;
        writeln!(w, "{g}")?;
        for m in list.iter().filter(|m| m.group == g) {
            let unit = unit_word(m.unit);
            let perf = if m.perf_groups.is_empty() {
                String::new()
            } else {
                format!("  [-M {}]", m.perf_groups.replace(';', ","))
            };
            let line = format!(
                "  {:<34}{}{perf}",
                m.short_name(),
                if unit.is_empty() {
                    String::new()
                } else {
                    format!(" ({unit})")
                }
            );
            writeln!(w, "{}", line.trim_end())?;
            for line in tma_render::wrap(m.description, "      ", 100) {
                writeln!(w, "{line}")?;
            }
        }
    }
    Ok(())
}

/// JSON: the model and every matching metric with its formula.
pub fn render_json(w: &mut dyn Write, model: &Model, filter: &str) -> Result<(), OutputError> {
    #[derive(Serialize)]
    struct Entry<'a> {
        name: &'a str,
        short_name: &'a str,
        group: &'a str,
        perf_groups: Vec<&'a str>,
        unit: Unit,
        description: &'a str,
        formula: &'a str,
    }
    #[derive(Serialize)]
    struct Doc<'a> {
        cpu: CpuJson<'a>,
        filter: &'a str,
        metrics: Vec<Entry<'a>>,
    }
    let metrics = entries(model, filter)
        .into_iter()
        .map(|m| Entry {
            name: m.name,
            short_name: m.short_name(),
            group: m.group,
            perf_groups: m.perf_groups.split(';').filter(|g| !g.is_empty()).collect(),
            unit: m.unit,
            description: m.description,
            formula: m.formula,
        })
        .collect();
    tma_render::write_json(
        w,
        SCHEMA,
        SCHEMA_VERSION,
        &Doc {
            cpu: CpuJson::of(model),
            filter,
            metrics,
        },
    )
}
