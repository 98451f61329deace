//! Arm Neoverse tables from Arm's telemetry specifications (`arm/neoverse-*.json`,
//! Apache-2.0, pmu-data README section 6b) -> `crates/tma-catalog/src/generated/arm/`.
//!
//! What is taken from the data (facts): event names and PMUv3 event numbers, metric formulas,
//! units, the metric groups, the decision tree (`root_nodes`, `next_items`,
//! `sample_events`) and each core's slot count (already inside Arm's formulas). What is ours:
//! every description ([`DESCRIPTIONS`]), the thresholds and the way the tree is laid out:
//!
//! * Level 1 is `decision_tree.root_nodes`: `frontend_bound`, `backend_bound`, `retiring`,
//!   `bad_speculation` (percent of slots) on V1, N2, V2, N3, V3; the two cycle-accounting
//!   nodes `frontend_stalled_cycles`, `backend_stalled_cycles` (percent of cycles) on N1,
//!   whose specification has no slot-based stage 1.
//! * A `next_items` entry naming another decision-tree metric makes it a child (N3 and V3:
//!   the `Topdown_Frontend` / `Topdown_Backend` nodes, down to level 5). A decision-tree
//!   metric no `next_items` names (`backend_busy_bound`) goes beside the nodes whose
//!   formula divides by the same event (`... / STALL_BACKEND * 100`): it is a share of the
//!   same stall cycles.
//! * A `next_items` entry naming a stage-2 metric group makes each metric of the group a
//!   drill-down child, named `PARENT__metric` (a metric can sit under several nodes and node
//!   names must be unique; `.` would clash with the dotted node paths of `tma diff --fail-if`
//!   and `tma serve`). Its formula refers to the metric, so the value is the metric's.
//! * Every other metric of the file is a helper metric for `-m`, in the first stage-2 group
//!   (in `metric_grouping.stage_2` order) that lists it; all groups that list it are its
//!   `perf_groups` (the names Linux perf's arm64 metrics use as `MetricGroup`).
//! * Locate-with events: the decision-tree node's `sample_events`, else the metric's own.
//!
//! Thresholds (our choice; the specification gives none): a level-1 node is worth a look
//! above 20% (15% for bad speculation; retiring above 70%), like the AMD tables. A node
//! below level 1 is a share of its parent's stall cycles and is flagged above 30% when its
//! parent is flagged. The drill-down metric nodes have the threshold `0`: they are figures
//! to read, not candidates for the bottleneck (their units differ: MPKI, ratios, shares of
//! operations), so the bottleneck walk stops at the deepest slot or stall node and `-v`
//! shows them.
//!
//! Counters: six general-purpose event counters (PMCR_EL0.N on these cores) and no fixed
//! counter in the tables: the dedicated cycle counter is left to the kernel, so a plan made
//! from the tables never needs more than the hardware has.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::{emit_tables, is_event_id, num, read_json, s, Ev, MetricOut, NodeOut};

/// Where the Arm files go, relative to the workspace root.
pub const OUT_DIR: &str = "crates/tma-catalog/src/generated/arm";

/// One Neoverse core we convert: (model key, module name, file under `arm/`).
pub const ARM_MODELS: &[(&str, &str, &str)] = &[
    ("neoverse-n1", "neoverse_n1", "neoverse-n1.json"),
    ("neoverse-v1", "neoverse_v1", "neoverse-v1.json"),
    ("neoverse-n2", "neoverse_n2", "neoverse-n2.json"),
    ("neoverse-v2", "neoverse_v2", "neoverse-v2.json"),
    ("neoverse-n3", "neoverse_n3", "neoverse-n3.json"),
    ("neoverse-v3", "neoverse_v3", "neoverse-v3.json"),
];

/// General-purpose event counters (PMCR_EL0.N) of these cores.
const GP_COUNTERS: u32 = 6;

/// Our one-line description of every metric the specifications define. A metric missing
/// here stops the generator: new data needs a description written for it.
const DESCRIPTIONS: &[(&str, &str)] = &[
    ("frontend_bound", "Slots left empty because the frontend delivered no operations (fetch, decode, branch prediction), mispredict recovery excluded"),
    ("backend_bound", "Slots lost because the backend could not take operations: execution resources, loads and stores, rename"),
    ("retiring", "Slots that carried operations which went on to retire: useful work"),
    ("bad_speculation", "Slots spent on operations thrown away after a misprediction, plus the refill that follows it"),
    ("frontend_stalled_cycles", "Cycles in which the frontend sent nothing to rename"),
    ("backend_stalled_cycles", "Cycles in which the backend could not accept what the frontend had ready"),
    ("frontend_core_bound", "Share of the frontend stall cycles caused inside the core (flushes, fetch flow), not by instruction memory"),
    ("frontend_mem_bound", "Share of the frontend stall cycles spent waiting on instruction memory: caches and TLBs"),
    ("frontend_core_flush_bound", "Share of the core-caused frontend stalls spent refilling after a pipeline flush"),
    ("frontend_core_flow_bound", "Share of the core-caused frontend stalls caused by the fetch flow itself: redirects, prediction bubbles"),
    ("frontend_mem_cache_bound", "Share of the instruction-memory stalls spent on instruction cache misses (L1I, and beyond)"),
    ("frontend_mem_tlb_bound", "Share of the instruction-memory stalls spent on instruction address translation"),
    ("frontend_cache_l1i_bound", "Share of the instruction-cache stalls served by the L1 instruction cache path"),
    ("frontend_cache_l2i_bound", "Share of the instruction-cache stalls that had to go past L1, to L2 or further"),
    ("backend_core_bound", "Share of the backend stall cycles caused by core resources rather than memory"),
    ("backend_mem_bound", "Share of the backend stall cycles spent waiting on the memory system"),
    ("backend_core_rename_bound", "Share of the core-caused backend stalls where rename ran out of physical registers or similar resources"),
    ("backend_busy_bound", "Share of the backend stall cycles where the issue queues were full"),
    ("backend_mem_cache_bound", "Share of the memory stalls spent on data cache misses"),
    ("backend_mem_tlb_bound", "Share of the memory stalls spent on data address translation"),
    ("backend_mem_store_bound", "Share of the memory stalls caused by stores that could not drain"),
    ("backend_cache_l1d_bound", "Share of the data-cache stalls that the L1 data cache path accounts for"),
    ("backend_cache_l2d_bound", "Share of the data-cache stalls that had to go past L1, to L2 or further"),
    ("ipc", "Instructions retired per CPU cycle"),
    ("branch_mpki", "Mispredicted retired branches per thousand retired instructions"),
    ("itlb_mpki", "Instruction-side translation table walks per thousand retired instructions"),
    ("dtlb_mpki", "Data-side translation table walks per thousand retired instructions"),
    ("l1i_tlb_mpki", "L1 instruction TLB refills per thousand retired instructions"),
    ("l1d_tlb_mpki", "L1 data TLB refills per thousand retired instructions"),
    ("l2_tlb_mpki", "L2 (unified) TLB refills per thousand retired instructions"),
    ("l1i_cache_mpki", "L1 instruction cache refills per thousand retired instructions"),
    ("l1d_cache_mpki", "L1 data cache refills per thousand retired instructions"),
    ("l2_cache_mpki", "L2 cache refills (instruction and data) per thousand retired instructions"),
    ("ll_cache_read_mpki", "Last-level cache read misses per thousand retired instructions"),
    ("branch_misprediction_ratio", "Fraction of retired branches that were mispredicted"),
    ("itlb_walk_ratio", "Fraction of L1 instruction TLB lookups that needed a table walk"),
    ("dtlb_walk_ratio", "Fraction of L1 data TLB lookups that needed a table walk"),
    ("l1i_tlb_miss_ratio", "Fraction of L1 instruction TLB lookups that missed"),
    ("l1d_tlb_miss_ratio", "Fraction of L1 data TLB lookups that missed"),
    ("l2_tlb_miss_ratio", "Fraction of L2 TLB lookups that missed"),
    ("l1i_cache_miss_ratio", "Fraction of L1 instruction cache lookups that missed"),
    ("l1d_cache_miss_ratio", "Fraction of L1 data cache lookups that missed"),
    ("l2_cache_miss_ratio", "Fraction of L2 cache lookups that missed"),
    ("ll_cache_read_miss_ratio", "Fraction of last-level cache reads that missed"),
    ("ll_cache_read_hit_ratio", "Fraction of last-level cache reads that hit"),
    ("branch_direct_ratio", "Fraction of retired branches that were direct (immediate target)"),
    ("branch_indirect_ratio", "Fraction of retired branches that were indirect (register target)"),
    ("branch_return_ratio", "Fraction of retired branches that were procedure returns"),
    ("load_percentage", "Loads among the speculatively executed operations"),
    ("store_percentage", "Stores among the speculatively executed operations"),
    ("integer_dp_percentage", "Scalar integer data-processing operations among the speculatively executed operations"),
    ("simd_percentage", "Advanced SIMD (Neon) operations among the speculatively executed operations"),
    ("scalar_fp_percentage", "Scalar floating-point operations among the speculatively executed operations"),
    ("barrier_percentage", "Barrier instructions (ISB, DSB, DMB) among the speculatively executed operations"),
    ("branch_percentage", "Branches among the speculatively executed operations"),
    ("crypto_percentage", "Cryptographic-extension operations among the speculatively executed operations"),
    ("sve_all_percentage", "SVE operations, loads and stores included, among the speculatively executed operations"),
    ("sve_predicate_percentage", "Predicated SVE operations among the speculatively executed operations"),
    ("sve_predicate_full_percentage", "Share of predicated SVE operations that ran with every lane active"),
    ("sve_predicate_partial_percentage", "Share of predicated SVE operations that ran with some lanes inactive"),
    ("sve_predicate_empty_percentage", "Share of predicated SVE operations that ran with no lane active"),
    ("nonsve_fp_ops_per_cycle", "Floating-point operations per cycle from non-SVE instructions, counted per lane (fused multiply-add counts two)"),
    ("sve_fp_ops_per_cycle", "Floating-point operations per cycle from SVE instructions, counted per lane (fused multiply-add counts two)"),
    ("fp_ops_per_cycle", "Floating-point operations per cycle from all instructions, counted per lane (fused multiply-add counts two)"),
    ("fp16_percentage", "Half-precision floating-point operations among the speculatively executed operations"),
    ("fp32_percentage", "Single-precision floating-point operations among the speculatively executed operations"),
    ("fp64_percentage", "Double-precision floating-point operations among the speculatively executed operations"),
];

fn description(name: &str) -> Result<&'static str> {
    DESCRIPTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
        .ok_or_else(|| {
            anyhow!("metric `{name}` has no description in xtask/src/gen/arm.rs DESCRIPTIONS")
        })
}

/// Level-1 thresholds (module doc).
fn level1_threshold(name: &str) -> String {
    let limit = match name {
        "bad_speculation" => 15,
        "retiring" => 70,
        _ => 20,
    };
    format!("{name} > {limit}")
}

/// (unit, count domain) of a metric from the specification's `units`.
fn unit_of(units: &str) -> Result<(&'static str, &'static str)> {
    Ok(match units {
        "percent of slots" => ("Unit::PercentSlots", "Slots"),
        "percent of cycles" => ("Unit::Percent", "Clocks"),
        "percent of operations" => ("Unit::Percent", "Operations"),
        "MPKI"
        | "per TLB access"
        | "per cache access"
        | "per branch"
        | "per cycle"
        | "operations per cycle" => ("Unit::Number", ""),
        u => bail!("unknown units `{u}`"),
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The `/ DENOMINATOR * 100` tail of a share formula, for placing an orphan node.
fn share_denominator(formula: &str) -> Option<&str> {
    let f = formula.trim().strip_suffix("* 100")?.trim_end();
    let (_, d) = f.rsplit_once('/')?;
    let d = d.trim();
    is_event_id(d).then_some(d)
}

/// One converted model: the generated module text.
fn gen_model(json: &Value, key: &str, file: &str) -> Result<String> {
    let pc = &json["product_configuration"];
    let doc = &json["document"];
    let slots = pc["num_slots"]
        .as_u64()
        .ok_or_else(|| anyhow!("no product_configuration.num_slots"))?;
    let product = s(pc, "product_name");
    if product.is_empty() {
        bail!("no product_configuration.product_name");
    }

    // Events: every event of the file, by name.
    let mut events: BTreeMap<String, Ev> = BTreeMap::new();
    for (name, e) in json["events"]
        .as_object()
        .ok_or_else(|| anyhow!("no events object"))?
    {
        if !is_event_id(name) {
            bail!("event `{name}` is no event id");
        }
        let code = num(s(e, "code"))?;
        if code > 0xFFFF {
            bail!("{name}: event number {code:#x} over 16 bits");
        }
        events.insert(
            name.clone(),
            Ev {
                name: name.clone(),
                code,
                umask: 0,
                cmask: 0,
                inv: false,
                edge: false,
                any: false,
                msr_index: 0,
                msr_value: 0,
                counter_mask: (1u32 << GP_COUNTERS) - 1,
                fixed: None,
                precise: false,
                taken_alone: false,
                kind: "EventKind::Core".to_string(),
                sample_after: 0,
            },
        );
    }

    let metrics = json["metrics"]
        .as_object()
        .ok_or_else(|| anyhow!("no metrics object"))?;
    let metric = |name: &str| -> Result<&Value> {
        metrics
            .get(name)
            .ok_or_else(|| anyhow!("metric `{name}` is named but not defined"))
    };
    // Every metric's formula names only events of the file.
    for (name, m) in metrics {
        for w in s(m, "formula").split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if w.starts_with(|c: char| c.is_ascii_alphabetic()) && !events.contains_key(w) {
                bail!("metric `{name}`: `{w}` is not an event of the file");
            }
        }
        for e in strings(&m["sample_events"]) {
            if !events.contains_key(&e) {
                bail!("metric `{name}`: sample event `{e}` is not an event of the file");
            }
        }
    }

    let groups = json["groups"]["metrics"]
        .as_object()
        .ok_or_else(|| anyhow!("no groups.metrics object"))?;
    let group_metrics = |g: &str| -> Result<Vec<String>> {
        Ok(strings(
            &groups
                .get(g)
                .ok_or_else(|| anyhow!("group `{g}` is named but not defined"))?["metrics"],
        ))
    };
    let td = &json["methodologies"]["topdown_methodology"];
    let stage2 = strings(&td["metric_grouping"]["stage_2"]);
    let roots = strings(&td["decision_tree"]["root_nodes"]);
    let tree: Vec<&Value> = td["decision_tree"]["metrics"]
        .as_array()
        .ok_or_else(|| anyhow!("no decision_tree.metrics"))?
        .iter()
        .collect();
    let tree_names: Vec<String> = tree.iter().map(|t| s(t, "name").to_string()).collect();
    if roots.is_empty() {
        bail!("no decision_tree.root_nodes");
    }

    // Parent of each decision-tree node.
    let mut parent: BTreeMap<String, Option<String>> = BTreeMap::new();
    for r in &roots {
        if !tree_names.contains(r) {
            bail!("root node `{r}` is not in decision_tree.metrics");
        }
        parent.insert(r.clone(), None);
    }
    for t in &tree {
        for item in strings(&t["next_items"]) {
            if tree_names.contains(&item) {
                if parent.contains_key(&item) {
                    bail!("`{item}` is named by two decision-tree nodes");
                }
                parent.insert(item, Some(s(t, "name").to_string()));
            } else if !groups.contains_key(&item) {
                bail!("next item `{item}` is neither a decision-tree metric nor a group");
            }
        }
    }
    for name in &tree_names {
        if parent.contains_key(name) {
            continue;
        }
        // An orphan: beside the placed nodes that divide by the same event.
        let den = share_denominator(s(metric(name)?, "formula"))
            .ok_or_else(|| anyhow!("`{name}` has no parent and is no share of an event"))?;
        let sibling_parent = tree_names
            .iter()
            .filter(|o| *o != name)
            .filter_map(|o| {
                let f = s(metrics.get(o)?, "formula");
                (share_denominator(f) == Some(den)).then(|| parent.get(o).cloned().flatten())
            })
            .flatten()
            .next()
            .ok_or_else(|| anyhow!("`{name}`: no placed node divides by `{den}` too"))?;
        parent.insert(name.clone(), Some(sibling_parent));
    }

    // Nodes, parents first: depth-first from the roots, children in next_items order (the
    // orphans last among their siblings).
    let mut nodes: Vec<NodeOut> = Vec::new();
    let mut thresholds: BTreeMap<String, String> = BTreeMap::new();
    fn children_of(
        p: &str,
        tree: &[&Value],
        tree_names: &[String],
        parent: &BTreeMap<String, Option<String>>,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(t) = tree.iter().find(|t| s(t, "name") == p) {
            for i in strings(&t["next_items"]) {
                if tree_names.contains(&i) {
                    out.push(i);
                }
            }
        }
        for n in tree_names {
            if parent.get(n).cloned().flatten().as_deref() == Some(p) && !out.contains(n) {
                out.push(n.clone());
            }
        }
        out
    }
    let mut stack: Vec<(String, u64)> = roots.iter().rev().map(|r| (r.clone(), 1)).collect();
    while let Some((name, level)) = stack.pop() {
        if nodes.len() > tree_names.len() * 64 {
            bail!("the decision tree has a cycle");
        }
        let m = metric(&name)?;
        let t = tree
            .iter()
            .find(|t| s(t, "name") == name)
            .ok_or_else(|| anyhow!("`{name}` not in the decision tree"))?;
        let par = parent.get(&name).cloned().flatten();
        let threshold = match &par {
            None => level1_threshold(&name),
            Some(p) => format!("{name} > 30 & {}", thresholds[p]),
        };
        thresholds.insert(name.clone(), threshold.clone());
        let (unit, mut domain) = unit_of(s(m, "units"))?;
        if par.is_some() && unit == "Unit::Percent" {
            domain = "Parent's stall cycles";
        }
        let mut locate = strings(&t["sample_events"]);
        if locate.is_empty() {
            locate = strings(&m["sample_events"]);
        }
        for e in &locate {
            if !events.contains_key(e) {
                bail!("`{name}`: sample event `{e}` is not an event of the file");
            }
        }
        nodes.push(NodeOut {
            name: name.clone(),
            parent: par,
            level,
            formula: s(m, "formula").to_string(),
            threshold,
            locate,
            description: description(&name)?.to_string(),
            unit,
            count_domain: domain.to_string(),
        });
        // Drill-down metric nodes of the groups this node names.
        let mut drill: Vec<String> = Vec::new();
        for item in strings(&t["next_items"]) {
            if groups.contains_key(&item) {
                for mname in group_metrics(&item)? {
                    if !drill.contains(&mname) && !tree_names.contains(&mname) {
                        drill.push(mname);
                    }
                }
            }
        }
        for mname in &drill {
            let dm = metric(mname)?;
            let (unit, domain) = unit_of(s(dm, "units"))?;
            nodes.push(NodeOut {
                name: format!("{name}__{mname}"),
                parent: Some(name.clone()),
                level: level + 1,
                formula: mname.clone(),
                threshold: "0".to_string(),
                locate: strings(&dm["sample_events"]),
                description: description(mname)?.to_string(),
                unit,
                count_domain: domain.to_string(),
            });
        }
        let kids = children_of(&name, &tree, &tree_names, &parent);
        for k in kids.into_iter().rev() {
            stack.push((k, level + 1));
        }
    }
    let placed: Vec<&str> = nodes
        .iter()
        .filter(|n| !n.name.contains("__"))
        .map(|n| n.name.as_str())
        .collect();
    for n in &tree_names {
        if !placed.contains(&n.as_str()) {
            bail!("decision-tree node `{n}` is not below a root node");
        }
    }

    // Helper metrics: every metric that is not a tree node.
    let mut out_metrics: Vec<MetricOut> = Vec::new();
    for (name, m) in metrics {
        if tree_names.contains(name) {
            continue;
        }
        let in_groups: Vec<&String> = stage2
            .iter()
            .filter(|g| {
                groups
                    .get(g.as_str())
                    .is_some_and(|v| strings(&v["metrics"]).contains(name))
            })
            .collect();
        let group = in_groups
            .first()
            .map_or_else(|| "General".to_string(), |g| g.to_string());
        let (unit, _) = unit_of(s(m, "units"))?;
        out_metrics.push(MetricOut {
            name: name.clone(),
            formula: s(m, "formula").to_string(),
            description: description(name)?.to_string(),
            unit,
            group,
            perf_groups: in_groups
                .iter()
                .map(|g| g.as_str())
                .collect::<Vec<_>>()
                .join(";"),
        });
    }

    // Metrics in stage-2 order: by their group, then as the group lists them.
    let rank = |m: &MetricOut| -> (usize, usize) {
        let g = stage2
            .iter()
            .position(|g| *g == m.group)
            .unwrap_or(stage2.len());
        let i = stage2
            .get(g)
            .and_then(|g| group_metrics(g).ok())
            .and_then(|v| v.iter().position(|x| *x == m.name))
            .unwrap_or(usize::MAX);
        (g, i)
    };
    out_metrics.sort_by_key(|m| (rank(m), m.name.clone()));

    let mut o = String::from(HEADER);
    writeln!(
        o,
        "\n//! {product} (part {}), from `arm/{file}` ({}, sha1 {}).",
        s(pc, "part_num"),
        s(doc, "timestamp"),
        s(doc, "sha1")
    )?;
    writeln!(
        o,
        "//! {} slots per cycle; level 1 from the decision tree's root nodes, drill-down from its\n//! `next_items` (xtask/src/gen/arm.rs says how).",
        slots
    )?;
    emit_tables(&mut o, &events, &nodes, &out_metrics, &[])?;
    writeln!(o, "pub static MODEL: Model = Model {{")?;
    writeln!(o, "    key: {key:?},")?;
    writeln!(o, "    name: {:?},", format!("Arm {product}"))?;
    writeln!(o, "    vendor: Vendor::Arm,")?;
    writeln!(o, "    core_kind: CoreKind::Uniform,")?;
    writeln!(o, "    pmu: \"armv8_pmuv3_0\",")?;
    writeln!(
        o,
        "    source: {:?},",
        format!(
            "Arm telemetry specification for {product} ({}, {})",
            s(doc, "timestamp"),
            s(doc, "quality")
        )
    )?;
    writeln!(
        o,
        "    // Arm's specification is not a versioned TMA release."
    )?;
    writeln!(o, "    tma_version: None,")?;
    writeln!(o, "    // product_configuration.num_slots.")?;
    writeln!(o, "    slots_per_cycle: {slots},")?;
    writeln!(o, "    gp_counters: {GP_COUNTERS},")?;
    writeln!(o, "    fixed_counters: 0,")?;
    writeln!(o, "    topdown: Topdown::Generic,")?;
    o.push_str("    events: EVENTS,\n    nodes: NODES,\n    metrics: METRICS,\n    retire_latencies: RETIRE_LATENCIES,\n};\n");
    Ok(o)
}

const HEADER: &str =
    "// @generated by `cargo xtask gen-tables` from Arm's Neoverse telemetry specification\n\
// (Apache-2.0; notice in LICENSE-arm-telemetry next to this file). Do not edit by hand:\n\
// change xtask/src/gen/arm.rs and regenerate. Descriptions and thresholds are ours.\n";

/// Every Arm file: one module per core, `mod.rs` and the license notice.
pub fn gen_all(arm: &Path) -> Result<Vec<(PathBuf, String)>> {
    let mut files = Vec::new();
    let mut copyrights: Vec<String> = Vec::new();
    let mut parts: Vec<(String, String, &str)> = Vec::new();
    for (key, module, file) in ARM_MODELS {
        let path = arm.join(file);
        let json = read_json(&path)?;
        let doc = &json["document"];
        if s(doc, "license") != "Apache-2.0" {
            bail!(
                "{}: license is `{}`, not Apache-2.0",
                path.display(),
                s(doc, "license")
            );
        }
        let c = s(doc, "copyright").to_string();
        if !copyrights.contains(&c) {
            copyrights.push(c);
        }
        let pc = &json["product_configuration"];
        parts.push((
            s(pc, "implementer").to_string(),
            s(pc, "part_num").to_string(),
            key,
        ));
        let text = gen_model(&json, key, file).with_context(|| format!("{}", path.display()))?;
        files.push((PathBuf::from(OUT_DIR).join(format!("{module}.rs")), text));
    }
    let mut m = String::from(HEADER);
    m.push_str("\n//! Arm Neoverse tables, one module per core, and the `/proc/cpuinfo` ids that pick them.\n\nuse crate::types::Model;\n\n");
    for (_, module, _) in ARM_MODELS {
        writeln!(m, "#[rustfmt::skip]\npub mod {module};")?;
    }
    m.push_str("\n/// Every Neoverse model.\npub static MODELS: &[&Model] = &[\n");
    for (_, module, _) in ARM_MODELS {
        writeln!(m, "    &{module}::MODEL,")?;
    }
    m.push_str("];\n\n/// (`CPU implementer`, `CPU part`, model key) from each specification's\n/// `product_configuration`.\npub static CPU_PARTS: &[(u32, u32, &str)] = &[\n");
    for (imp, part, key) in &parts {
        let imp = num(imp)?;
        let part = num(part)?;
        writeln!(m, "    ({imp:#x}, {part:#x}, {key:?}),")?;
    }
    m.push_str("];\n");
    files.push((PathBuf::from(OUT_DIR).join("mod.rs"), m));
    let mut notice = String::from(
        "The Rust tables in this folder are generated by `cargo xtask gen-tables` from Arm's\n\
         telemetry specifications for the Neoverse N1, V1, N2, V2, N3 and V3 cores (the\n\
         `neoverse-*.json` files of Arm's telemetry-solution project), which are licensed\n\
         under the Apache License, Version 2.0:\n\n",
    );
    for c in &copyrights {
        writeln!(notice, "    {c}")?;
    }
    notice.push_str(
        "\n    Licensed under the Apache License, Version 2.0 (the \"License\");\n\
         \x20   you may not use these files except in compliance with the License.\n\
         \x20   You may obtain a copy of the License at\n\n\
         \x20       http://www.apache.org/licenses/LICENSE-2.0\n\n\
         \x20   Unless required by applicable law or agreed to in writing, software\n\
         \x20   distributed under the License is distributed on an \"AS IS\" BASIS,\n\
         \x20   WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.\n\
         \x20   See the License for the specific language governing permissions and\n\
         \x20   limitations under the License.\n\n\
         A copy of the License is in LICENSE-APACHE at the root of this repository.\n\n\
         Changes made: the event names and numbers, formulas, units, metric groups and the\n\
         decision tree were converted into Rust tables and laid out as a tree\n\
         (xtask/src/gen/arm.rs); the descriptions were rewritten in our own words and the\n\
         thresholds added by us. The specifications' own descriptions are not included.\n",
    );
    files.push((PathBuf::from(OUT_DIR).join("LICENSE-arm-telemetry"), notice));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(file: &str) -> Option<Value> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/pmu-data/arm")
            .join(file);
        if !p.is_file() {
            eprintln!("skipped: no Arm data at {}", p.display());
            return None;
        }
        Some(read_json(&p).unwrap())
    }

    #[test]
    fn share_denominators() {
        assert_eq!(
            share_denominator("STALL_BACKEND_BUSY / STALL_BACKEND * 100"),
            Some("STALL_BACKEND")
        );
        assert_eq!(
            share_denominator("(A + B) / STALL_FRONTEND_MEMBOUND * 100"),
            Some("STALL_FRONTEND_MEMBOUND")
        );
        assert_eq!(share_denominator("A / (B + C) * 100"), None);
        assert_eq!(share_denominator("A / B"), None);
    }

    #[test]
    fn the_converter_refuses_what_it_cannot_place() {
        let Some(json) = data("neoverse-n3.json") else {
            return;
        };
        assert!(gen_model(&json, "neoverse-n3", "neoverse-n3.json").is_ok());
        // A metric without our description.
        let mut j = json.clone();
        let m = j["metrics"]["ipc"].clone();
        j["metrics"]["new_metric"] = m;
        let e = gen_model(&j, "neoverse-n3", "x.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("new_metric") && e.contains("DESCRIPTIONS"),
            "{e}"
        );
        // A formula naming an event the file does not define.
        let mut j = json.clone();
        j["metrics"]["ipc"]["formula"] = "INST_RETIRED / NO_SUCH_EVENT".into();
        let e = gen_model(&j, "neoverse-n3", "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("NO_SUCH_EVENT"), "{e}");
        // An orphan whose denominator no placed node shares.
        let mut j = json.clone();
        j["metrics"]["backend_busy_bound"]["formula"] =
            "STALL_BACKEND_BUSY / CPU_CYCLES * 100".into();
        let e = gen_model(&j, "neoverse-n3", "x.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("backend_busy_bound") && e.contains("CPU_CYCLES"),
            "{e}"
        );
        // A node two decision-tree nodes name as their next item.
        let mut j = json;
        let tree = j["methodologies"]["topdown_methodology"]["decision_tree"]["metrics"]
            .as_array_mut()
            .unwrap();
        let fe = tree
            .iter_mut()
            .find(|t| t["name"] == "frontend_bound")
            .unwrap();
        fe["next_items"]
            .as_array_mut()
            .unwrap()
            .push("backend_core_bound".into());
        let e = gen_model(&j, "neoverse-n3", "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("backend_core_bound"), "{e}");
    }
}
