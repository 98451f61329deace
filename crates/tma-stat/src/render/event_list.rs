//! `tma list --events`: every event of a CPU model's tables (the whole vendor event file, not
//! only the events the formulas use) with its encoding, as text or JSON (`tma.list-events` v1).

use std::collections::BTreeSet;
use std::io::Write;

use serde::Serialize;
use tma_catalog::{EventDef, EventId, EventKind, Model};
use tma_render::OutputError;

use super::list::CpuJson;

/// The schema name of `tma list --events --json`.
pub const SCHEMA: &str = "tma.list.events";
/// Its version: 2 since schema names 2026-11 (1 was named `tma.list-events`).
pub const SCHEMA_VERSION: u32 = 2;

/// One event of the listing.
#[derive(Debug, Clone, Serialize)]
pub struct EventEntry {
    #[serde(flatten)]
    pub def: EventDef,
    /// The PMU and `perf_event_attr.config` / `config1` the event is programmed with.
    pub pmu: &'static str,
    pub config: String,
    pub config1: String,
    /// The form `perf stat -e` accepts (`cpu/event=0xd1,umask=0x80/`, `slots`, `msr/tsc/`).
    pub perf: String,
    /// A TMA formula or locate-with list of the model names the event.
    pub used: bool,
}

/// Every event of `model` whose name contains `filter` (case-insensitive; all when empty),
/// in table order (by name).
pub fn entries(model: &Model, filter: &str) -> Vec<EventEntry> {
    let used: BTreeSet<String> = model
        .event_ids()
        .iter()
        .map(|id| EventId::parse(id).base.to_ascii_uppercase())
        .collect();
    let filter = filter.to_ascii_uppercase();
    model
        .events
        .iter()
        .filter(|d| d.name.to_ascii_uppercase().contains(&filter))
        .filter_map(|d| {
            let e = model.encode(d.name).ok()?;
            let spec = model.perf_event_spec(d.name).ok()?;
            // The listing names the event in its own column: drop perf's `name=` term.
            let perf = match spec.rsplit_once(",name=") {
                Some((head, _)) => format!("{head}/"),
                None => spec,
            };
            Some(EventEntry {
                def: *d,
                pmu: e.pmu,
                config: format!("{:#x}", e.config),
                config1: format!("{:#x}", e.config1),
                perf,
                used: used.contains(&d.name.to_ascii_uppercase()),
            })
        })
        .collect()
}

/// The counters an event may use: `0-7`, `0,1,2,3`, `fixed 1`, `fixed 1, 0-7`.
fn counters(d: &EventDef) -> String {
    let mut parts = Vec::new();
    if let Some(f) = d.fixed {
        parts.push(format!("fixed {f}"));
    }
    let m = d.counter_mask;
    if m != 0 {
        let bits: Vec<u32> = (0..32).filter(|i| m & (1 << i) != 0).collect();
        let contiguous = bits.windows(2).all(|w| w[1] == w[0] + 1);
        parts.push(match (bits.first(), bits.last()) {
            (Some(a), Some(b)) if contiguous && a != b => format!("{a}-{b}"),
            _ => bits
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        });
    }
    match d.kind {
        EventKind::Slots | EventKind::PerfMetrics(_) if parts.is_empty() => "PERF_METRICS".into(),
        EventKind::Tsc => "msr".into(),
        _ => parts.join(", "),
    }
}

/// The listing as a table: formula events marked `*`, then encoding, counters and notes
/// (precise, taken alone, extra MSR).
pub fn render_text(
    w: &mut dyn Write,
    model: &Model,
    filter: &str,
    cpu_source: &str,
) -> Result<(), OutputError> {
    let list = entries(model, filter);
    let used = list.iter().filter(|e| e.used).count();
    writeln!(
        w,
        "{} ({}, {cpu_source}): {} events on the `{}` PMU{}, {used} of them used by the TMA formulas (*)",
        model.name,
        model.key,
        list.len(),
        model.pmu,
        if filter.is_empty() {
            String::new()
        } else {
            format!(" matching `{filter}`")
        },
    )?;
    writeln!(w, "Tables: {}", model.source)?;
    writeln!(w)?;
    let mut t = tma_render::table(&["", "event", "perf encoding", "counters", "notes"]);
    for e in &list {
        let mut notes = Vec::new();
        if e.def.precise {
            notes.push("precise".to_string());
        }
        if e.def.taken_alone {
            notes.push("alone".to_string());
        }
        if e.def.msr_index != 0 {
            notes.push(format!("msr {:#x}", e.def.msr_index));
        }
        t.add_row(vec![
            if e.used { "*" } else { "" }.to_string(),
            e.def.name.to_string(),
            e.perf.clone(),
            counters(&e.def),
            notes.join(", "),
        ]);
    }
    for line in t.to_string().lines() {
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

#[derive(Serialize)]
struct ListEventsJson<'a> {
    cpu: CpuJson<'a>,
    pmu: &'a str,
    events: Vec<EventEntry>,
}

/// The listing as JSON: the CPU, then every event with its table fields and encoding.
pub fn render_json(w: &mut dyn Write, model: &Model, filter: &str) -> Result<(), OutputError> {
    let doc = ListEventsJson {
        cpu: CpuJson::of(model),
        pmu: model.pmu,
        events: entries(model, filter),
    };
    tma_render::write_json(w, SCHEMA, SCHEMA_VERSION, &doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spr_lists_documented_events_no_formula_uses() {
        let spr = tma_catalog::by_name("spr").unwrap();
        let all = entries(spr, "");
        assert_eq!(all.len(), spr.events.len());
        let pmm = all
            .iter()
            .find(|e| e.def.name == "MEM_LOAD_RETIRED.LOCAL_PMM")
            .expect("MEM_LOAD_RETIRED.LOCAL_PMM is in the SPR event file");
        assert_eq!(pmm.perf, "cpu/event=0xd1,umask=0x80/");
        assert!(!pmm.used && pmm.def.precise);
        let slots = all.iter().find(|e| e.def.name == "TOPDOWN.SLOTS").unwrap();
        assert_eq!((slots.perf.as_str(), slots.used), ("slots", true));
        assert_eq!(counters(&slots.def), "fixed 3");
        let f = entries(spr, "local_pmm");
        assert!(f.iter().all(|e| e.def.name.contains("LOCAL_PMM")) && !f.is_empty());

        let mut out = Vec::new();
        render_text(&mut out, spr, "", "--cpu spr").unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("MEM_LOAD_RETIRED.LOCAL_PMM"))
            .unwrap();
        assert!(line.contains("cpu/event=0xd1,umask=0x80/") && line.contains("precise"));
        let mut out = Vec::new();
        render_json(&mut out, spr, "LOCAL_PMM").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let ev = &v["events"][0];
        assert_eq!(ev["name"], "MEM_LOAD_RETIRED.LOCAL_PMM");
        assert_eq!(
            (ev["code"].as_u64(), ev["umask"].as_u64()),
            (Some(0xd1), Some(0x80))
        );
        assert_eq!(ev["config"], "0x80d1");
    }
}
