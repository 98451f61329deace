//! E-core (hybrid `cpu_atom`) TMA tables: Gracemont (Alder Lake / Raptor Lake E-cores,
//! Alder Lake-N) and Crestmont (Meteor Lake E-cores).
//!
//! perfmon publishes no TMA metrics for these cores, so the node list below is written by
//! hand. Its FORMULAS and THRESHOLDS are facts read from the Linux kernel's perf metric files
//! `tools/perf/pmu-events/arch/x86/alderlake/adl-metrics.json` and
//! `meteorlake/mtl-metrics.json` (Debian 7.2.13 source, in `shared/pmu-data/linux-perf-intel/`),
//! rows with `"Unit": "cpu_atom"` in the metric groups `TopdownL1`..`TopdownL3`. Those files
//! are GPL-2.0 and were only read: nothing is copied from them. (`alderlaken/adln-metrics.json`,
//! for the E-core-only Alder Lake-N, has the same Gracemont formulas without the PMU prefix.) The formulas are re-expressed
//! in our formula language with values x100 (percent of slots, as in the perfmon tables), the
//! thresholds are the kernel's ratios converted to percent, and the names are written in the
//! perfmon style (`Ifetch_Latency` for the kernel's `tma_ifetch_latency`). The descriptions
//! are ours (`crates/tma-catalog/src/descriptions.rs`, `ECORE_NODE_DESCRIPTIONS`).
//!
//! The EVENT ENCODINGS are converted from the perfmon E-core event files (BSD-3-Clause),
//! exactly as for the P-core tables.
//!
//! Facts used, per core (W = slots per cycle, the allocation width the kernel formulas use:
//! 5 on Gracemont, 6 on Crestmont; SLOTS = W * CPU_CLK_UNHALTED.CORE):
//! * every node except three is `EVENT / SLOTS`;
//! * Gracemont Bad_Speculation is the slots the other three level-1 events leave:
//!   `(SLOTS - (FE_BOUND.ALL + BE_BOUND.ALL + RETIRING.ALL)) / SLOTS`; Crestmont counts it
//!   (`TOPDOWN_BAD_SPECULATION.ALL_P`);
//! * Resource_Bound = Backend_Bound - Core_Bound; Allocation_Restriction = Core_Bound;
//! * Crestmont uses the `_P` names of the level-1 events and `TOPDOWN_FE_BOUND.ITLB_MISS`
//!   (same encodings as the plain names; `ITLB` is deprecated there);
//! * thresholds (ratios): Frontend_Bound > 0.2, Bad_Speculation > 0.15, Backend_Bound > 0.1,
//!   Retiring > 0.75; level 2: Ifetch_Latency > 0.15, Ifetch_Bandwidth > 0.1,
//!   Branch_Mispredicts > 0.05, Machine_Clears > 0.05, Core_Bound > 0.1, Resource_Bound > 0.2;
//!   level 3: > 0.05 under the frontend and bad-speculation nodes, > 0.1 under the backend
//!   ones; each AND its ancestors' thresholds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};

use super::{all_events, descriptions, emit_tables, event_from_json, preorder, read_json, s};
use super::{Ev, MetricOut, NodeOut};

/// One E-core platform.
pub struct EcorePlatform {
    /// `--cpu` key, also the generated file name with `-` as `_`.
    pub key: &'static str,
    pub name: &'static str,
    /// perfmon folder under `intel/`.
    pub dir: &'static str,
    /// The E-core event file, relative to `dir`; the mapfile rows naming it pick the model.
    pub events: &'static str,
    /// Slots per cycle the kernel formulas use.
    pub width: u32,
    /// Event names of the level-1 counts.
    pub fe_all: &'static str,
    pub be_all: &'static str,
    pub ret_all: &'static str,
    /// `None`: Bad_Speculation is the remainder of the slots (Gracemont).
    pub bad_spec_all: Option<&'static str>,
    /// The iTLB-miss frontend event.
    pub itlb: &'static str,
}

pub const ECORE_PLATFORMS: &[EcorePlatform] = &[
    EcorePlatform {
        key: "adl-e",
        name: "Alder Lake / Raptor Lake E-core and Alder Lake-N (Gracemont)",
        dir: "ADL",
        events: "events/alderlake_gracemont_core.json",
        width: 5,
        fe_all: "TOPDOWN_FE_BOUND.ALL",
        be_all: "TOPDOWN_BE_BOUND.ALL",
        ret_all: "TOPDOWN_RETIRING.ALL",
        bad_spec_all: None,
        itlb: "TOPDOWN_FE_BOUND.ITLB",
    },
    EcorePlatform {
        key: "mtl-e",
        name: "Meteor Lake E-core (Crestmont)",
        dir: "MTL",
        events: "events/meteorlake_crestmont_core.json",
        width: 6,
        fe_all: "TOPDOWN_FE_BOUND.ALL_P",
        be_all: "TOPDOWN_BE_BOUND.ALL_P",
        ret_all: "TOPDOWN_RETIRING.ALL_P",
        bad_spec_all: Some("TOPDOWN_BAD_SPECULATION.ALL_P"),
        itlb: "TOPDOWN_FE_BOUND.ITLB_MISS",
    },
];

impl EcorePlatform {
    /// Rust module name of the generated file.
    pub fn module(&self) -> String {
        self.key.replace('-', "_")
    }
}

/// One hand-written node: name, parent, formula, threshold (percent).
struct Spec {
    name: &'static str,
    parent: Option<&'static str>,
    formula: String,
    threshold: String,
}

/// The level 1-3 tree of an E-core platform, parents first.
fn specs(p: &EcorePlatform) -> Vec<Spec> {
    let slots = format!("( {} * CPU_CLK_UNHALTED.CORE )", p.width);
    let share = |ev: &str| format!("100 * {ev} / {slots}");
    // (name, parent, formula, own threshold in percent)
    let mut v: Vec<(&'static str, Option<&'static str>, String, u32)> = vec![
        ("Frontend_Bound", None, share(p.fe_all), 20),
        (
            "Bad_Speculation",
            None,
            match p.bad_spec_all {
                Some(ev) => share(ev),
                None => format!(
                    "100 * ( {slots} - ( {} + {} + {} ) ) / {slots}",
                    p.fe_all, p.be_all, p.ret_all
                ),
            },
            15,
        ),
        ("Backend_Bound", None, share(p.be_all), 10),
        ("Retiring", None, share(p.ret_all), 75),
    ];
    let fe = Some("Frontend_Bound");
    let bs = Some("Bad_Speculation");
    let be = Some("Backend_Bound");
    v.extend([
        (
            "Ifetch_Latency",
            fe,
            share("TOPDOWN_FE_BOUND.FRONTEND_LATENCY"),
            15,
        ),
        (
            "ICache_Misses",
            Some("Ifetch_Latency"),
            share("TOPDOWN_FE_BOUND.ICACHE"),
            5,
        ),
        ("ITLB_Misses", Some("Ifetch_Latency"), share(p.itlb), 5),
        (
            "Branch_Detect",
            Some("Ifetch_Latency"),
            share("TOPDOWN_FE_BOUND.BRANCH_DETECT"),
            5,
        ),
        (
            "Branch_Resteer",
            Some("Ifetch_Latency"),
            share("TOPDOWN_FE_BOUND.BRANCH_RESTEER"),
            5,
        ),
        (
            "Ifetch_Bandwidth",
            fe,
            share("TOPDOWN_FE_BOUND.FRONTEND_BANDWIDTH"),
            10,
        ),
        (
            "CISC",
            Some("Ifetch_Bandwidth"),
            share("TOPDOWN_FE_BOUND.CISC"),
            5,
        ),
        (
            "Decode",
            Some("Ifetch_Bandwidth"),
            share("TOPDOWN_FE_BOUND.DECODE"),
            5,
        ),
        (
            "Predecode",
            Some("Ifetch_Bandwidth"),
            share("TOPDOWN_FE_BOUND.PREDECODE"),
            5,
        ),
        (
            "Other_FB",
            Some("Ifetch_Bandwidth"),
            share("TOPDOWN_FE_BOUND.OTHER"),
            5,
        ),
        (
            "Branch_Mispredicts",
            bs,
            share("TOPDOWN_BAD_SPECULATION.MISPREDICT"),
            5,
        ),
        (
            "Machine_Clears",
            bs,
            share("TOPDOWN_BAD_SPECULATION.MACHINE_CLEARS"),
            5,
        ),
        (
            "Nuke",
            Some("Machine_Clears"),
            share("TOPDOWN_BAD_SPECULATION.NUKE"),
            5,
        ),
        (
            "Fast_Nuke",
            Some("Machine_Clears"),
            share("TOPDOWN_BAD_SPECULATION.FASTNUKE"),
            5,
        ),
        (
            "Core_Bound",
            be,
            share("TOPDOWN_BE_BOUND.ALLOC_RESTRICTIONS"),
            10,
        ),
        (
            "Allocation_Restriction",
            Some("Core_Bound"),
            "Core_Bound".to_string(),
            10,
        ),
        (
            "Resource_Bound",
            be,
            "Backend_Bound - Core_Bound".to_string(),
            20,
        ),
        (
            "Mem_Scheduler",
            Some("Resource_Bound"),
            share("TOPDOWN_BE_BOUND.MEM_SCHEDULER"),
            10,
        ),
        (
            "Non_Mem_Scheduler",
            Some("Resource_Bound"),
            share("TOPDOWN_BE_BOUND.NON_MEM_SCHEDULER"),
            10,
        ),
        (
            "Register",
            Some("Resource_Bound"),
            share("TOPDOWN_BE_BOUND.REGISTER"),
            10,
        ),
        (
            "Reorder_Buffer",
            Some("Resource_Bound"),
            share("TOPDOWN_BE_BOUND.REORDER_BUFFER"),
            10,
        ),
        (
            "Serialization",
            Some("Resource_Bound"),
            share("TOPDOWN_BE_BOUND.SERIALIZATION"),
            10,
        ),
    ]);
    let own: HashMap<&str, (Option<&str>, u32)> =
        v.iter().map(|(n, p, _, t)| (*n, (*p, *t))).collect();
    v.into_iter()
        .map(|(name, parent, formula, t)| {
            // The node's own test, then each ancestor's, nearest first (as perfmon writes them).
            let mut parts = vec![format!("{name} > {t}")];
            let mut up = parent;
            while let Some(a) = up {
                let (pp, pt) = own[a];
                parts.push(format!("{a} > {pt}"));
                up = pp;
            }
            Spec {
                name,
                parent,
                formula,
                threshold: parts.join(" & "),
            }
        })
        .collect()
}

/// Helper metrics: (name, formula, unit). Facts from the same kernel rows
/// (`tma_info_core_ipc` / `_cpi`, `tma_info_system_{turbo,kernel}_utilization`) plus the slots and
/// clocks the node formulas are normalized by.
fn helper_metrics(p: &EcorePlatform) -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "Info_Thread_CLKS",
            "CPU_CLK_UNHALTED.CORE".to_string(),
            "Unit::Number",
        ),
        (
            "Info_Thread_SLOTS",
            format!("{} * CPU_CLK_UNHALTED.CORE", p.width),
            "Unit::Number",
        ),
        (
            "Info_Thread_IPC",
            "INST_RETIRED.ANY / CPU_CLK_UNHALTED.CORE".to_string(),
            "Unit::Number",
        ),
        (
            "Info_Thread_CPI",
            "CPU_CLK_UNHALTED.CORE / INST_RETIRED.ANY".to_string(),
            "Unit::Number",
        ),
        (
            "Info_System_Turbo_Utilization",
            "CPU_CLK_UNHALTED.CORE / CPU_CLK_UNHALTED.REF_TSC".to_string(),
            "Unit::Number",
        ),
        (
            "Info_System_Kernel_Utilization",
            "CPU_CLK_UNHALTED.CORE_P:SUP / CPU_CLK_UNHALTED.CORE".to_string(),
            "Unit::Number",
        ),
    ]
}

/// Identifiers of a formula (no modifiers) that are not node or metric names.
fn event_words<'a>(formula: &'a str, names: &BTreeSet<&str>) -> Vec<&'a str> {
    formula
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == ':'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        .map(|w| w.split(':').next().unwrap_or(w))
        .filter(|w| !names.contains(w) && !matches!(*w, "if" | "else" | "min" | "max"))
        .collect()
}

pub const ECORE_HEADER: &str =
    "// @generated by `cargo xtask gen-tables` (xtask/src/gen/ecore.rs). Do not edit by hand.\n\
// Event encodings: Intel perfmon E-core event file (BSD-3-Clause; notice in\n\
// LICENSE-intel-perfmon next to this file). Tree, formulas and thresholds: hand-written in\n\
// xtask/src/gen/ecore.rs from the facts of the Linux perf `cpu_atom` TopdownL1-L3 metrics\n\
// (nothing copied); descriptions: crates/tma-catalog/src/descriptions.rs.\n";

/// The generated Rust source of one E-core platform.
pub fn gen_ecore(intel: &Path, p: &EcorePlatform) -> Result<String> {
    let path = intel.join(p.dir).join(p.events);
    let json = read_json(&path)?;
    let events_version = s(&json["Header"], "Version").to_string();
    let mut catalog: HashMap<String, Ev> = HashMap::new();
    let mut max_gp = 0u32;
    let mut fixed_set = BTreeSet::new();
    for e in json["Events"].as_array().into_iter().flatten() {
        if s(e, "EventName").is_empty() {
            continue;
        }
        let ev = event_from_json(e)?;
        if !super::is_event_id(&ev.name) {
            bail!("{}: event `{}` is no event id", path.display(), ev.name);
        }
        if ev.counter_mask != 0 {
            max_gp = max_gp.max(32 - ev.counter_mask.leading_zeros());
        }
        if let Some(f) = ev.fixed {
            fixed_set.insert(f);
        }
        catalog.entry(ev.name.clone()).or_insert(ev);
    }

    let specs = specs(p);
    let helpers = helper_metrics(p);
    let names: BTreeSet<&str> = specs
        .iter()
        .map(|n| n.name)
        .chain(helpers.iter().map(|h| h.0))
        .collect();
    let mut used: BTreeMap<String, Ev> = BTreeMap::new();
    let mut add = |formula: &str, owner: &str| -> Result<()> {
        for w in event_words(formula, &names) {
            let ev = catalog
                .get(w)
                .cloned()
                .ok_or_else(|| anyhow!("{owner}: event `{w}` is not in {}", path.display()))?;
            used.entry(ev.name.clone()).or_insert(ev);
        }
        Ok(())
    };
    let mut nodes = Vec::new();
    for sp in &specs {
        add(&sp.formula, sp.name)?;
        let description = descriptions::describe_ecore(sp.name)
            .ok_or_else(|| {
                anyhow!(
                    "no description for E-core node {}: add it to ECORE_NODE_DESCRIPTIONS in descriptions.rs",
                    sp.name
                )
            })?
            .to_string();
        nodes.push(NodeOut {
            name: sp.name.to_string(),
            parent: sp.parent.map(str::to_string),
            level: 0, // set by preorder from the parent links
            formula: sp.formula.clone(),
            threshold: sp.threshold.clone(),
            locate: Vec::new(),
            description,
            unit: "Unit::PercentSlots",
            count_domain: "Slots".to_string(),
        });
    }
    let mut metrics = Vec::new();
    for (name, formula, unit) in &helpers {
        add(formula, name)?;
        metrics.push(MetricOut {
            name: name.to_string(),
            formula: formula.clone(),
            description: super::metric_description(name),
            unit,
            group: super::metric_group(name)?.to_string(),
            perf_groups: String::new(),
        });
    }
    let mut nodes = preorder(nodes)?;
    for n in &mut nodes {
        if n.level > 3 {
            bail!("E-core node {} is at level {}", n.name, n.level);
        }
    }
    if nodes.iter().filter(|n| n.level == 1).count() != 4 {
        bail!("{}: the E-core tree needs the four level-1 nodes", p.key);
    }
    if max_gp == 0 || fixed_set.is_empty() {
        bail!("{}: no counters in {}", p.key, path.display());
    }

    let events = all_events(&catalog, &used);
    let mut o = String::from(ECORE_HEADER);
    writeln!(
        o,
        "//\n// {} ({}): {} tree nodes, {} helper metrics, {} events ({} used by the formulas).",
        p.name,
        p.key,
        nodes.len(),
        metrics.len(),
        events.len(),
        used.len()
    )?;
    emit_tables(&mut o, &events, &nodes, &metrics, &[])?;
    let source = format!(
        "Linux perf cpu_atom TopdownL1-L3 formulas (facts, re-expressed); Intel perfmon {} E-core events {}",
        p.dir, events_version
    );
    writeln!(o, "pub static MODEL: Model = Model {{")?;
    writeln!(o, "    key: {:?},", p.key)?;
    writeln!(o, "    name: {:?},", p.name)?;
    writeln!(o, "    vendor: Vendor::Intel,")?;
    writeln!(o, "    core_kind: CoreKind::Efficiency,")?;
    writeln!(o, "    pmu: \"cpu_atom\",")?;
    writeln!(o, "    source: {source:?},")?;
    writeln!(
        o,
        "    // The kernel cpu_atom metrics carry no TMA version."
    )?;
    writeln!(o, "    tma_version: None,")?;
    writeln!(
        o,
        "    // Allocation width the kernel formulas use (xtask/src/gen/ecore.rs)."
    )?;
    writeln!(o, "    slots_per_cycle: {},", p.width)?;
    writeln!(
        o,
        "    // Highest index in the E-core file's `Counter` fields + 1."
    )?;
    writeln!(o, "    gp_counters: {max_gp},")?;
    writeln!(
        o,
        "    // Distinct `Fixed counter N` values in the E-core file."
    )?;
    writeln!(o, "    fixed_counters: {},", fixed_set.len())?;
    writeln!(
        o,
        "    // E-cores have no PERF_METRICS: every level is read with generic counters."
    )?;
    writeln!(o, "    topdown: Topdown::Generic,")?;
    o.push_str("    events: EVENTS,\n    nodes: NODES,\n    metrics: METRICS,\n    retire_latencies: RETIRE_LATENCIES,\n};\n");
    Ok(o)
}

/// Does a mapfile row (`Family-model, Version, Filename, EventType, Core Type, ...`) select
/// this E-core platform? Hybrid rows with core type 0x20 (Atom), and the plain `core` row of
/// an E-core-only part (Alder Lake-N), naming the platform's event file.
pub fn mapfile_row_selects(cols: &[&str], p: &EcorePlatform) -> bool {
    if cols.len() < 4 {
        return false;
    }
    let file = format!("/{}/{}", p.dir, p.events);
    if cols[2] != file {
        return false;
    }
    match cols[3] {
        "hybridcore" => cols.get(4).is_some_and(|t| t.eq_ignore_ascii_case("0x20")),
        "core" => true,
        _ => false,
    }
}

/// Context for errors.
pub fn gen_all(intel: &Path) -> Result<Vec<(String, String)>> {
    ECORE_PLATFORMS
        .iter()
        .map(|p| {
            gen_ecore(intel, p)
                .with_context(|| format!("E-core platform {}", p.key))
                .map(|t| (p.module(), t))
        })
        .collect()
}
