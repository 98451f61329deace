//! The one event-group planner of `tma stat` and `tma events`: the formula event sets of a
//! tree request, packed by [`tma_perf::plan::plan`] under the model's counter limits. `tma
//! events --perf-cmd` prints the groups of the same plan, so the perf command we tell users
//! to run records exactly what `tma stat` itself would open.

use std::collections::BTreeSet;

use serde::Serialize;
use tma_catalog::{Encoding, EventKind, Model};
use tma_metrics::Selection;
use tma_perf::event::EventSpec;
use tma_perf::plan::{Limits, Plan, Slot};

use crate::StatError;

/// Counter limits of the model's core PMU; `nmi`: the NMI watchdog holds a counter.
pub fn limits_for(model: &Model, nmi: bool) -> impl Fn(&str) -> Limits + '_ {
    move |_pmu: &str| Limits {
        gp: model.gp_counters,
        fixed: model.fixed_counters,
        nmi_watchdog: nmi,
    }
}

fn encode_all(model: &Model, ids: &BTreeSet<String>) -> Result<Vec<EventSpec>, StatError> {
    let mut v = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(s) = EventSpec::from_encoding(&model.encode(id)?) {
            v.push(s);
        }
    }
    Ok(v)
}

/// The formula event sets of a selection: one set per node (its own events, so the events
/// of one formula land in one group where they fit), then every event of the selection.
pub fn formula_sets(model: &Model, sel: &Selection) -> Result<Vec<Vec<EventSpec>>, StatError> {
    let all = tma_metrics::required_events(model, sel)?;
    let mut sets: Vec<Vec<EventSpec>> = Vec::new();
    for node in tma_metrics::node_order(model, sel) {
        let one = Selection {
            max_level: node.level,
            nodes: vec![node.name.to_string()],
            metrics: Vec::new(),
        };
        if let Ok(ids) = tma_metrics::required_events(model, &one) {
            sets.push(encode_all(model, &ids)?);
        }
    }
    sets.push(encode_all(model, &all)?);
    Ok(sets)
}

/// The plan `tma stat` counts with: the tree's formula sets, the software events it always
/// takes, and the `-e` events.
pub fn counting_plan(
    model: &Model,
    sel: &Selection,
    extra: &[EventSpec],
    nmi: bool,
) -> Result<Plan, StatError> {
    let mut sets = formula_sets(model, sel)?;
    sets.push(tma_perf::backend::software_events());
    sets.push(extra.to_vec());
    Ok(tma_perf::plan::plan(&sets, &limits_for(model, nmi))?)
}

/// perf's `-e` arguments for event groups: `-e 'EV'` for a group of one, `-e '{A,B}'`.
pub fn e_args(groups: &[Vec<String>]) -> Vec<String> {
    groups
        .iter()
        .map(|g| {
            if g.len() == 1 {
                format!("-e '{}'", g[0])
            } else {
                format!("-e '{{{}}}'", g.join(","))
            }
        })
        .collect()
}

/// The hardware-counter groups of a plan (one run each with `--no-multiplex`).
pub fn hw_groups(plan: &Plan) -> Vec<usize> {
    (0..plan.groups.len())
        .filter(|&i| {
            plan.groups[i]
                .slots
                .iter()
                .any(|s| !matches!(s, Slot::NoCounter))
        })
        .collect()
}

/// One event of `tma events`, with its encoding.
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

/// The events of a selection, the groups `tma stat` would open and the perf command that
/// records them.
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

/// Events of the selection level by level, in the order the tree uses them, then any
/// others `required_events` lists (the row order of `tma events`).
fn ordered_events(model: &Model, sel: &Selection) -> Result<Vec<String>, StatError> {
    let required = tma_metrics::required_events(model, sel)?;
    let mut out: Vec<String> = Vec::new();
    fn visit(
        model: &Model,
        formula: &str,
        depth: usize,
        out: &mut Vec<String>,
        req: &BTreeSet<String>,
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

/// The events of `sel`, the groups of the plan `tma stat` counts with (NMI watchdog off, as
/// the printed command asks; without `tma stat`'s own software events) and a `perf stat -x,`
/// command writing `output` while running `cmd`.
pub fn perf_plan(
    model: &Model,
    sel: &Selection,
    output: impl AsRef<std::ffi::OsStr>,
    cmd: &str,
) -> Result<EventPlan, StatError> {
    let ids = ordered_events(model, sel)?;
    let mut rows = Vec::with_capacity(ids.len());
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
    }
    let plan = tma_perf::plan::plan(&formula_sets(model, sel)?, &limits_for(model, false))?;
    let groups = perf_groups(model, &plan)?;
    let es = e_args(&groups);
    let perf_command = format!(
        "perf stat -x, {} -o {} -- {cmd}",
        es.join(" "),
        tma_render::shell_quote_os(output.as_ref())
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

/// The perf specs of each group of `plan` (software groups left out: perf counts what it
/// is told, and `tma stat --import` needs none of them).
pub fn perf_groups(model: &Model, plan: &Plan) -> Result<Vec<Vec<String>>, StatError> {
    let mut out = Vec::new();
    for g in &plan.groups {
        if g.slots.iter().all(|s| matches!(s, Slot::NoCounter)) && g.pmu == "software" {
            continue;
        }
        let mut specs = Vec::with_capacity(g.events.len());
        for e in &g.events {
            specs.push(model.perf_event_spec(&e.name)?);
        }
        if !specs.is_empty() {
            out.push(specs);
        }
    }
    Ok(out)
}

/// One core type's `perf stat` event groups in a recording of every core type of a hybrid
/// part: the groups `tma stat` opens for its tree, its cycles (which weigh the merged view)
/// among them, on its own PMU (a type without a table of its own, as `cpu_lowpower`, takes
/// the E-core table's events) and without `name=` terms: perf prints a named event by its
/// name alone, so the count would lose its core type, and an unnamed one as written, PMU
/// prefix and all, which the import reads back by encoding.
pub fn core_type_groups(
    t: &crate::CoreTable,
    sel: &Selection,
) -> Result<Vec<Vec<String>>, StatError> {
    let mut sets = formula_sets(t.model, sel)?;
    sets.push(crate::hybrid::cycles_event(t.model).into_iter().collect());
    let plan = tma_perf::plan::plan(&sets, &limits_for(t.model, false))?;
    let groups = perf_groups(t.model, &plan)?;
    let table_pmu = format!("{}/", t.model.pmu);
    Ok(groups
        .into_iter()
        .map(|g| {
            g.iter()
                .map(|spec| {
                    let spec = unnamed(spec);
                    match spec.strip_prefix(&table_pmu) {
                        Some(rest) => format!("{}/{rest}", t.pmu),
                        None => spec,
                    }
                })
                .collect()
        })
        .collect())
}

/// A perf event spec without its `name=` term: `cpu_atom/event=0x3c,umask=0x0,name=X/k` gives
/// `cpu_atom/event=0x3c,umask=0x0/k`.
fn unnamed(spec: &str) -> String {
    let Some(at) = spec.find(",name=") else {
        return spec.to_string();
    };
    let rest = &spec[at + ",name=".len()..];
    let end = rest.find([',', '/']).unwrap_or(rest.len());
    format!("{}{}", &spec[..at], &rest[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unnamed_drops_the_name_term_only() {
        assert_eq!(
            unnamed("cpu_atom/event=0x3c,umask=0x0,name=CPU_CLK_UNHALTED.CORE/k"),
            "cpu_atom/event=0x3c,umask=0x0/k"
        );
        assert_eq!(
            unnamed("cpu_core/event=0xa3,umask=0x4,cmask=0x4,name=X__c4,any/"),
            "cpu_core/event=0xa3,umask=0x4,cmask=0x4,any/"
        );
        assert_eq!(unnamed("cpu_core/slots/"), "cpu_core/slots/");
    }

    #[test]
    fn perf_name_takes_the_name_term() {
        assert_eq!(
            perf_name("cpu/event=0x1a0,umask=0x1,cmask=0x6,name=de_x__c6/"),
            "de_x__c6"
        );
        assert_eq!(perf_name("slots"), "slots");
    }

    /// The perf command's groups are the groups `tma stat` opens (NMI watchdog off), for
    /// every model and level: same events, same grouping, same order.
    #[test]
    fn perf_cmd_groups_are_the_live_plan_groups() {
        for m in tma_catalog::models() {
            let depth = m.nodes.iter().map(|n| n.level).max().unwrap_or(1);
            for level in 1..=depth {
                let sel = Selection::level(level);
                let p = perf_plan(m, &sel, "out.csv", "CMD").unwrap();
                let live = counting_plan(m, &sel, &[], false).unwrap();
                let live_groups: Vec<Vec<String>> = live
                    .groups
                    .iter()
                    .filter(|g| g.pmu != "software")
                    .map(|g| {
                        g.events
                            .iter()
                            .map(|e| m.perf_event_spec(&e.name).unwrap())
                            .collect()
                    })
                    .collect();
                assert_eq!(p.groups, live_groups, "{} level {level}", m.key);
                // And the printed command holds exactly those groups.
                let printed: Vec<Vec<String>> = p
                    .perf_command
                    .split(" -e '")
                    .skip(1)
                    .map(|s| {
                        let g = &s[..s.find('\'').unwrap()];
                        let g = g
                            .strip_prefix('{')
                            .and_then(|g| g.strip_suffix('}'))
                            .unwrap_or(g);
                        split_specs(g)
                    })
                    .collect();
                assert_eq!(printed, p.groups, "{} level {level}", m.key);
                // Every required event is counted (or is an alias of a counted one).
                let counted: BTreeSet<&str> = live.events().map(|e| e.name.as_str()).collect();
                for r in &p.events {
                    let aliased = live.aliases.iter().any(|(a, _)| a == &r.id);
                    let rl = r.id.ends_with(":retire_latency");
                    assert!(
                        counted.contains(r.id.as_str()) || aliased || rl,
                        "{} {}",
                        m.key,
                        r.id
                    );
                }
            }
        }
    }

    /// Split a group's text at the commas between specs (not those inside `pmu/a=1,b=2/`).
    fn split_specs(g: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut inside = false;
        for c in g.chars() {
            match c {
                '/' => {
                    inside = !inside;
                    cur.push(c);
                }
                ',' if !inside => out.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            }
        }
        out.push(cur);
        out
    }

    #[test]
    fn zen4_level2_groups_fit_six_counters() {
        let m = tma_catalog::by_name("zen4").unwrap();
        let p = perf_plan(m, &Selection::level(2), "out.csv", "CMD").unwrap();
        assert_eq!(p.events.len(), 12);
        assert!(p.groups.iter().all(|g| g.len() <= 6), "{:?}", p.groups);
        let mut all: Vec<&String> = p.groups.iter().flatten().collect();
        all.sort();
        all.dedup();
        assert_eq!(
            all.len(),
            p.groups.iter().flatten().count(),
            "an event twice"
        );
    }
}
