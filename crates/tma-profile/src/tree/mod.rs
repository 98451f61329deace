//! `tma locate --tree`: a TMA tree per function, from group sampling.
//!
//! One event samples; the events of the requested level are read with every sample
//! (`PERF_SAMPLE_READ` with `PERF_FORMAT_GROUP`, see `tma_perf::sampling::group`). The
//! increase of each value since the previous sample of the same thread is charged to the
//! sample's stack ([`crate::aggregate::GroupCounts`]); summed per function (the leaf's), the
//! counts go through the same formula engine, thresholds and bottleneck rule as `tma stat`
//! (`tma_metrics::evaluate`).
//!
//! **Layouts** ([`TreeLayout`]):
//! * Ice Lake and later (`slots` + PERF_METRICS): `slots` leads the group but cannot
//!   sample, so the second event (core cycles, fixed counter 1) samples; the topdown metric
//!   events are members (they take no counter and read zero outside a slots group), the
//!   other events of the level take general-purpose counters.
//! * Earlier Intel, Intel E-cores and AMD Zen: the sampler (core cycles) leads; the level's
//!   events (on AMD the PipelineL1 events) are members, within the core's counters.
//! * No PMU: a software group (cpu-clock samples; page faults, context switches and
//!   task-clock read with each sample). There is no tree then: the per-function software
//!   counts are shown.
//!
//! What does not fit in the one group is listed with the reason ([`TreeLayout::dropped`]);
//! the nodes that need it show "missing events", as `tma stat` shows them.
//!
//! **Functions** are user functions: a sample in the kernel (a page fault, a system call)
//! is charged to the first user frame of its call chain, the code that caused the work.
//!
//! **Attribution bleed.** A sample's increase covers the whole period since the thread's
//! previous sample. When that sample was in another function, part of the increase belongs
//! there: such samples are counted per function as "mixed" ([`FunctionTree::mixed`]).

use std::collections::{BTreeSet, HashMap};
use std::io::Write;

use serde::Serialize;
use tma_catalog::{Model, Topdown, Vendor};
use tma_metrics::{Bottleneck, Constants, Report, Selection};
use tma_perf::event::{EventSpec, SoftwareEvent, SpecKind};
use tma_render::OutputError;

use crate::hotspots::Profile;

/// JSON schema of `tma locate --tree --json`.
pub const TREE_SCHEMA: &str = "tma.locate.tree";
pub const TREE_SCHEMA_VERSION: u32 = 1;

/// Errors planning a group.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    #[error(transparent)]
    Catalog(#[from] tma_catalog::CatalogError),
    #[error(transparent)]
    Metrics(#[from] tma_metrics::MetricsError),
    #[error("the {cpu} tables name no core-cycles event to sample with")]
    NoSampler { cpu: String },
    #[error("--tree takes level 1 or 2 (a group is read with every sample; deeper levels need more counters than a core has)")]
    Level,
}

/// How the sampled group is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutKind {
    /// Software events only (no PMU): no tree.
    Software,
    /// `slots` leads, the second event samples, PERF_METRICS members (Ice Lake and later).
    SlotsLeader,
    /// The sampler leads, the level's events are members (earlier Intel, E-cores, AMD).
    SamplerLeads,
}

/// The group one sample reads.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeLayout {
    pub kind: LayoutKind,
    /// The catalog model (`None` for the software group).
    pub cpu: Option<&'static str>,
    pub sampler: EventSpec,
    /// A counting leader before the sampler (`slots`).
    pub leader: Option<EventSpec>,
    pub members: Vec<EventSpec>,
    /// Events of the level that are not in the group, with why.
    pub dropped: Vec<(String, String)>,
    /// The event whose per-function sum ranks the functions (slots, else cycles);
    /// `None`: by samples.
    pub rank: Option<String>,
    /// Caveats that apply to this layout.
    pub notes: Vec<String>,
}

/// The software group of a machine without PMU.
pub const SOFTWARE_MEMBERS: [SoftwareEvent; 3] = [
    SoftwareEvent::PageFaults,
    SoftwareEvent::ContextSwitches,
    SoftwareEvent::TaskClock,
];

impl TreeLayout {
    /// `{cpu-clock, page-faults, context-switches, task-clock}`, cpu-clock sampling.
    pub fn software() -> TreeLayout {
        TreeLayout {
            kind: LayoutKind::Software,
            cpu: None,
            sampler: EventSpec::software(SoftwareEvent::CpuClock),
            leader: None,
            members: SOFTWARE_MEMBERS
                .iter()
                .map(|&e| EventSpec::software(e))
                .collect(),
            dropped: Vec::new(),
            rank: None,
            notes: vec![
                "no hardware PMU: a TMA tree needs one (core cycles, slots and the level's \
                 events); this is the software group, read with every sample, per function"
                    .into(),
            ],
        }
    }

    /// The group of a recorded file (`perf record -e '{a,b,c}:S'`): `names` in read order,
    /// the sampler among them; a tree is evaluated when `model` is given (the names must
    /// then be the formulas' event names).
    pub fn imported(names: &[String], sampler: &str, model: Option<&'static Model>) -> TreeLayout {
        let spec = |n: &str| EventSpec::raw(n, "", 0);
        let software = names
            .iter()
            .all(|n| SoftwareEvent::parse(n.split(':').next().unwrap_or(n)).is_some());
        TreeLayout {
            kind: if software {
                LayoutKind::Software
            } else {
                LayoutKind::SamplerLeads
            },
            cpu: model.map(|m| m.key),
            sampler: spec(sampler),
            leader: None,
            members: names
                .iter()
                .filter(|n| n.as_str() != sampler)
                .map(|n| spec(n))
                .collect(),
            dropped: Vec::new(),
            rank: None,
            notes: vec![format!(
                "the recorded group, values read with each sample of {sampler}"
            )],
        }
    }

    /// The names of each read's values, in the kernel's order (leader first).
    pub fn read_order(&self) -> Vec<String> {
        let mut v = Vec::with_capacity(self.members.len() + 2);
        if let Some(l) = &self.leader {
            v.push(l.name.clone());
        }
        v.push(self.sampler.name.clone());
        v.extend(self.members.iter().map(|m| m.name.clone()));
        v
    }

    /// The group as perf writes it: `{a,b,c}:S` with the sampler marked.
    pub fn describe(&self) -> String {
        let mut names = Vec::new();
        if let Some(l) = &self.leader {
            names.push(l.name.clone());
        }
        names.push(format!("{} (samples)", self.sampler.name));
        names.extend(self.members.iter().map(|m| m.name.clone()));
        format!("{{{}}}", names.join(", "))
    }

    /// Plan the group of `level` for `model` (`nmi_watchdog`: the watchdog holds a
    /// general-purpose counter; `smt_on`: SMT is active, which before Ice Lake makes the
    /// formulas estimate core clocks from two more events).
    pub fn hardware(
        model: &'static Model,
        level: u8,
        nmi_watchdog: bool,
        smt_on: bool,
    ) -> Result<TreeLayout, TreeError> {
        if !(1..=2).contains(&level) {
            return Err(TreeError::Level);
        }
        // The level's events in node order, for the constants of a per-thread count (the
        // branches of `#smt_on` / `#core_wide` that do not apply are left out).
        let consts = Constants {
            smt_on,
            threads_per_core: if smt_on { 2 } else { 1 },
            core_wide: !smt_on,
            ..Constants::default()
        };
        let mut ids: Vec<String> = Vec::new();
        let sel = Selection::level(level);
        for node in tma_metrics::node_order(model, &sel) {
            let one = Selection {
                max_level: node.level,
                nodes: vec![node.name.to_string()],
                metrics: Vec::new(),
            };
            for id in tma_metrics::required_events_for(model, &one, &consts)? {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        // Where not all fit, the events some node's value needs go first; those only a
        // threshold reads, after.
        let all: HashMap<String, f64> = ids.iter().map(|i| (i.clone(), 1.0)).collect();
        let value_needs = |id: &String| -> bool {
            let mut less = all.clone();
            less.remove(id);
            tma_metrics::evaluate(model, &sel, &less, &consts)
                .map(|r| {
                    r.nodes
                        .iter()
                        .any(|n| n.missing_events.contains(id) && !n.status.has_value())
                })
                .unwrap_or(true)
        };
        let (first, rest): (Vec<String>, Vec<String>) = ids.into_iter().partition(value_needs);
        let ids: Vec<String> = first.into_iter().chain(rest).collect();
        let mut specs: Vec<EventSpec> = Vec::new();
        for id in &ids {
            if let Some(s) = EventSpec::from_encoding(&model.encode(id)?) {
                specs.push(s);
            }
        }
        let cycles_names: &[&str] = match model.vendor {
            Vendor::Amd => &["ls_not_halted_cyc"],
            _ => &["CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.CORE"],
        };
        let sampler = match specs
            .iter()
            .position(|s| cycles_names.iter().any(|c| s.name.eq_ignore_ascii_case(c)))
        {
            Some(i) => specs.remove(i),
            None => cycles_names
                .iter()
                .find_map(|c| {
                    model
                        .encode(c)
                        .ok()
                        .and_then(|e| EventSpec::from_encoding(&e))
                })
                .ok_or_else(|| TreeError::NoSampler {
                    cpu: model.key.to_string(),
                })?,
        };
        let mut notes = Vec::new();
        let mut dropped = Vec::new();
        let mut leader = None;
        let kind = if model.topdown == Topdown::Generic {
            LayoutKind::SamplerLeads
        } else {
            LayoutKind::SlotsLeader
        };
        if kind == LayoutKind::SlotsLeader {
            match specs.iter().position(|s| s.kind == SpecKind::Slots) {
                Some(i) => leader = Some(specs.remove(i)),
                None => notes.push("the level names no slots event: no slots leader".into()),
            }
            notes.push(
                "slots leads the group and cannot sample: the second event (core cycles) \
                 samples; the topdown metric events read zero outside a slots group"
                    .into(),
            );
            notes.push(
                "each topdown metric is an 8-bit fraction of the slots since the previous \
                 read: with short periods a sample's share is quantized to 1/255; use a \
                 period of many thousand cycles"
                    .into(),
            );
        }
        // The host's caveats (the NMI watchdog's counter, SMT before Ice Lake, the kernel
        // release) are the `tma doctor` checks `tma locate` says for a live run
        // (`tma_checks::tree_caveats`); what they cost the group is in `dropped`.
        // Counters: fixed by index, general-purpose by mask.
        let usable = model.gp_counters.saturating_sub(nmi_watchdog as u32);
        let mut fixed_used: Vec<u8> = Vec::new();
        let mut gp_used: u32 = 0;
        let mut take = |s: &EventSpec, gp_used: &mut u32| -> Result<(), String> {
            match s.kind {
                SpecKind::PerfMetrics(_) => {
                    return if kind == LayoutKind::SlotsLeader {
                        Ok(())
                    } else {
                        Err("a topdown metric event needs a slots leader".into())
                    };
                }
                SpecKind::Software(_) | SpecKind::Tracepoint(_) | SpecKind::Tsc => return Ok(()),
                _ => {}
            }
            if let Some(f) = s.fixed {
                if f < model.fixed_counters as u8 && !fixed_used.contains(&f) {
                    fixed_used.push(f);
                    return Ok(());
                }
            }
            if s.taken_alone {
                return Err(format!(
                    "needs MSR {:#x} of its own (taken alone): it cannot share the group",
                    s.msr_index
                ));
            }
            // Highest counter first: restricted events usually want the low ones.
            for c in (0..usable).rev() {
                if s.counter_mask & (1 << c) != 0 && *gp_used & (1 << c) == 0 {
                    *gp_used |= 1 << c;
                    return Ok(());
                }
            }
            Err(format!(
                "no general-purpose counter left: {} usable{} are taken",
                usable,
                if nmi_watchdog {
                    " (one more is held by the NMI watchdog)"
                } else {
                    ""
                }
            ))
        };
        if let Some(l) = &leader {
            take(l, &mut gp_used).map_err(|_| TreeError::NoSampler {
                cpu: model.key.to_string(),
            })?;
        }
        if take(&sampler, &mut gp_used).is_err() {
            return Err(TreeError::NoSampler {
                cpu: model.key.to_string(),
            });
        }
        let mut members = Vec::new();
        for s in specs {
            let intel_generic = model.vendor == Vendor::Intel && kind == LayoutKind::SamplerLeads;
            let upper = s.name.to_ascii_uppercase();
            if intel_generic && upper.ends_with("_ANY") {
                dropped.push((
                    s.name.clone(),
                    "a core-wide (AnyThread) count: samples of one thread cannot use it".into(),
                ));
                continue;
            }
            match take(&s, &mut gp_used) {
                Ok(()) => members.push(s),
                Err(why) => dropped.push((s.name.clone(), why)),
            }
        }
        let rank = match &leader {
            Some(l) => Some(l.name.clone()),
            None => Some(sampler.name.clone()),
        };
        Ok(TreeLayout {
            kind,
            cpu: Some(model.key),
            sampler,
            leader,
            members,
            dropped,
            rank,
            notes,
        })
    }
}

/// One event's per-function count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventCount {
    pub event: String,
    pub count: u64,
    /// Share of the event's total over all functions, in percent.
    pub percent: f64,
    /// Share of `count` that mixed samples carried (their increase began in another
    /// function), in percent.
    pub mixed_percent: f64,
}

/// One evaluated node of a function's tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeNode {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub level: u8,
    /// Percent of slots (`None` when it could not be computed: see `status`).
    pub value: Option<f64>,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub above_threshold: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_events: Vec<String>,
}

/// A function's tree (or the whole run's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionTree {
    pub function: String,
    pub module: String,
    pub samples: u64,
    /// Share of all samples, in percent.
    pub percent: f64,
    /// Samples whose thread's previous sample was in another function.
    pub mixed: u64,
    /// `mixed` as a percent of `samples`.
    pub mixed_percent: f64,
    /// The read group's increases charged here, in read order.
    pub counts: Vec<EventCount>,
    /// The tree (no PMU: empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<TreeNode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Bottleneck>,
}

impl FunctionTree {
    /// The count of `event`.
    pub fn count(&self, event: &str) -> Option<u64> {
        self.counts
            .iter()
            .find(|c| c.event == event)
            .map(|c| c.count)
    }
    /// A node by name (case-insensitive).
    pub fn node(&self, name: &str) -> Option<&TreeNode> {
        self.nodes
            .iter()
            .find(|n| n.name.eq_ignore_ascii_case(name))
    }
}

/// The group as the document describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutDoc {
    pub kind: LayoutKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    pub sampler: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    pub members: Vec<String>,
    /// (event, why it is not in the group).
    pub dropped: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<String>,
}

/// The `tma.locate.tree` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeProfile {
    pub layout: LayoutDoc,
    /// Tree level computed (0: no tree, software group).
    pub level: u8,
    /// The values of each read, in order.
    pub events: Vec<String>,
    /// The whole run.
    pub total: FunctionTree,
    /// The top functions, by the rank event (else samples).
    pub functions: Vec<FunctionTree>,
    /// Samples that were the first of their thread (their increase counts from the
    /// thread's start).
    pub first_reads: u64,
    /// The bottleneck's two estimators side by side ([`crate::estimate`]), when a direct
    /// pass was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimators: Option<crate::estimate::Estimators>,
    pub notes: Vec<String>,
}

/// (function, module).
type FuncKey = (String, String);
/// (samples, mixed samples, summed group values, the part of them mixed samples carried).
type Acc = (u64, u64, Vec<u64>, Vec<u64>);

/// Per-function counts of a profile with group values, each function's tree evaluated with
/// `model` at `level` (no model: counts only), the top `top` functions kept.
pub fn build(
    profile: &Profile,
    layout: &TreeLayout,
    model: Option<&'static Model>,
    level: u8,
    consts: &Constants,
    top: usize,
    first_reads: u64,
) -> Result<TreeProfile, TreeError> {
    let names = &profile.value_names;
    let width = names.len();
    // Function of each frame: (function, module).
    let func_of = |frame: usize| -> (String, String) {
        let f = &profile.frames[frame];
        (f.function.clone(), f.module.clone())
    };
    let mut per: HashMap<FuncKey, Acc> = HashMap::new();
    let mut total: Acc = (0, 0, vec![0; width], vec![0; width]);
    for st in &profile.stacks {
        // The first user frame (kernel work is charged to the user code that caused it).
        let leaf = st
            .frames
            .iter()
            .find(|&&f| profile.frames[f].module != crate::hotspots::KERNEL_MODULE)
            .or(st.frames.first());
        let Some(&leaf) = leaf else { continue };
        let e = per
            .entry(func_of(leaf))
            .or_insert_with(|| (0, 0, vec![0; width], vec![0; width]));
        e.0 += st.samples;
        total.0 += st.samples;
        for (i, v) in st.values.iter().enumerate().take(width) {
            e.2[i] += v;
            total.2[i] += v;
        }
    }
    for t in &profile.transitions {
        let (p, c) = (func_of(t.from), func_of(t.to));
        if p != c {
            if let Some(e) = per.get_mut(&c) {
                e.1 += t.samples;
                total.1 += t.samples;
                for (i, v) in t.values.iter().enumerate().take(width) {
                    e.3[i] += v;
                    total.3[i] += v;
                }
            }
        }
    }
    let rank = layout
        .rank
        .as_ref()
        .and_then(|r| names.iter().position(|n| n == r));
    let mut rows: Vec<(FuncKey, Acc)> = per.into_iter().collect();
    rows.sort_by(|a, b| {
        let key = |r: &Acc| rank.map_or(r.0, |i| r.2[i]);
        key(&b.1)
            .cmp(&key(&a.1))
            .then(b.1 .0.cmp(&a.1 .0))
            .then(a.0.cmp(&b.0))
    });
    let tree_level = if model.is_some() { level } else { 0 };
    let make = |func: &str, module: &str, r: &Acc| -> Result<FunctionTree, TreeError> {
        let counts = names
            .iter()
            .enumerate()
            .map(|(i, n)| EventCount {
                event: n.clone(),
                count: r.2[i],
                percent: pct(r.2[i], total.2[i]),
                mixed_percent: pct(r.3[i], r.2[i]),
            })
            .collect();
        let (nodes, bottleneck) = match model {
            Some(m) => {
                let values: HashMap<String, f64> = names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.clone(), r.2[i] as f64))
                    .collect();
                let rep = tma_metrics::evaluate(m, &Selection::level(level), &values, consts)?;
                (tree_nodes(&rep), Some(rep.bottleneck))
            }
            None => (Vec::new(), None),
        };
        Ok(FunctionTree {
            function: func.to_string(),
            module: module.to_string(),
            samples: r.0,
            percent: pct(r.0, total.0),
            mixed: r.1,
            mixed_percent: pct(r.1, r.0),
            counts,
            nodes,
            bottleneck,
        })
    };
    let mut functions = Vec::new();
    for ((f, m), r) in rows.iter().take(top) {
        functions.push(make(f, m, r)?);
    }
    let total = make("(all)", "", &total)?;
    let mut notes = layout.notes.clone();
    for (e, why) in &layout.dropped {
        notes.push(format!("{e} is not in the group: {why}"));
    }
    notes.push(
        "a sample is charged the increase since its thread's previous sample; \"mixed\" \
         counts samples whose previous sample was in another function (part of their \
         increase belongs there)"
            .into(),
    );
    for f in &functions {
        for c in &f.counts {
            if c.count > 0 && c.mixed_percent >= 25.0 && c.event != layout.sampler.name {
                notes.push(format!(
                    "{}: {:.0}% of its {} came with mixed samples: much of it may belong to \
                     the function that ran before",
                    f.function, c.mixed_percent, c.event
                ));
            }
        }
    }
    Ok(TreeProfile {
        layout: LayoutDoc {
            kind: layout.kind,
            cpu: layout.cpu.map(str::to_string),
            sampler: layout.sampler.name.clone(),
            leader: layout.leader.as_ref().map(|l| l.name.clone()),
            members: layout.members.iter().map(|m| m.name.clone()).collect(),
            dropped: layout.dropped.clone(),
            rank: layout.rank.clone(),
        },
        level: tree_level,
        events: names.clone(),
        total,
        functions,
        first_reads,
        estimators: None,
        notes,
    })
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn tree_nodes(rep: &Report) -> Vec<TreeNode> {
    rep.nodes
        .iter()
        .map(|n| TreeNode {
            name: n.name.to_string(),
            parent: n.parent.map(str::to_string),
            level: n.level,
            value: n.value,
            status: n.status.label(),
            above_threshold: n.above_threshold,
            missing_events: n.missing_events.clone(),
        })
        .collect()
}

/// The level-1 (and level-2) node names of the trees, in tree order.
fn node_columns(t: &TreeProfile) -> Vec<String> {
    t.total.nodes.iter().map(|n| n.name.clone()).collect()
}

fn value_text(n: Option<&TreeNode>) -> String {
    match n.and_then(|n| n.value) {
        Some(v) => format!("{v:.1}%"),
        None => "-".into(),
    }
}

/// The text report: each function's tree (with a PMU) or its software counts, then the
/// function × node table.
pub fn text(w: &mut dyn Write, t: &TreeProfile) -> Result<(), OutputError> {
    let l = &t.layout;
    writeln!(
        w,
        "per-function {} from the group {} ({} samples)",
        if t.level > 0 {
            format!("TMA tree, level {}", t.level)
        } else {
            "counts".to_string()
        },
        describe_doc(l),
        t.total.samples
    )?;
    writeln!(w)?;
    if t.level > 0 {
        for f in std::iter::once(&t.total).chain(&t.functions) {
            writeln!(
                w,
                "{} {}: {} samples ({:.1}%), {:.1}% mixed",
                f.function,
                if f.module.is_empty() {
                    String::new()
                } else {
                    format!("[{}]", f.module)
                },
                f.samples,
                f.percent,
                f.mixed_percent
            )?;
            let path: BTreeSet<&str> = f
                .bottleneck
                .as_ref()
                .map(|b| b.path.iter().map(String::as_str).collect())
                .unwrap_or_default();
            for n in &f.nodes {
                let indent = "  ".repeat(n.level as usize);
                let mark = if f.bottleneck.as_ref().and_then(|b| b.node.as_deref()) == Some(&n.name)
                {
                    "  <== bottleneck"
                } else if path.contains(n.name.as_str()) {
                    "  <"
                } else {
                    ""
                };
                let value = match n.value {
                    Some(v) => format!("{v:6.1}%"),
                    None => format!("  ({})", n.status),
                };
                let above = if n.above_threshold == Some(true) {
                    " *"
                } else {
                    ""
                };
                writeln!(w, "{indent}{:<28} {value}{above}{mark}", n.name)?;
            }
            writeln!(w)?;
        }
    }
    // The table.
    let cols = node_columns(t);
    let mut header: Vec<String> = vec!["function".into(), "samples".into(), "mixed".into()];
    if t.level > 0 {
        header.extend(cols.iter().cloned());
    } else {
        header.extend(t.events.iter().cloned());
    }
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = tma_render::table(&hdr);
    for f in t.functions.iter().chain(std::iter::once(&t.total)) {
        let mut row = vec![
            if f.module.is_empty() {
                f.function.clone()
            } else {
                format!("{} [{}]", f.function, f.module)
            },
            format!("{} ({:.1}%)", f.samples, f.percent),
            format!("{:.1}%", f.mixed_percent),
        ];
        if t.level > 0 {
            row.extend(cols.iter().map(|c| value_text(f.node(c))));
        } else {
            row.extend(
                f.counts
                    .iter()
                    .map(|c| format!("{} ({:.1}%)", c.count, c.percent)),
            );
        }
        table.add_row(row);
    }
    let right: Vec<usize> = (1..header.len()).collect();
    tma_render::align_right(&mut table, &right);
    writeln!(w, "{table}")?;
    if let Some(e) = &t.estimators {
        writeln!(w)?;
        estimators_text(w, e)?;
    }
    if !t.notes.is_empty() {
        writeln!(w)?;
        for n in &t.notes {
            writeln!(w, "note: {n}")?;
        }
    }
    Ok(())
}

/// The two estimators' table and verdict.
fn estimators_text(w: &mut dyn Write, e: &crate::estimate::Estimators) -> Result<(), OutputError> {
    let via = match (&e.node, &e.direct_node) {
        (Some(n), Some(d)) if n != d => format!(", the locate-with event of {d}"),
        (Some(_), _) => ", its locate-with event".to_string(),
        _ => String::new(),
    };
    let basis = &e.group_basis;
    writeln!(
        w,
        "{}: each function's share by two estimators: group reads (its {basis} / all {basis}) \
         and direct samples (its share of {} samples of {}{via}, {})",
        match &e.node {
            Some(n) => format!("bottleneck {n}"),
            None => "where the time goes".to_string(),
        },
        e.direct_samples,
        e.direct_event,
        e.direct_source,
    )?;
    let mut table = tma_render::table(&["function", "group reads", "direct samples", "disagree"]);
    for r in &e.functions {
        table.add_row(vec![
            if r.module.is_empty() {
                r.function.clone()
            } else {
                format!("{} [{}]", r.function, r.module)
            },
            format!("{:.1}%", r.group_percent),
            format!("{:.1}%", r.direct_percent),
            if r.disagree {
                "yes".into()
            } else {
                String::new()
            },
        ]);
    }
    tma_render::align_right(&mut table, &[1, 2]);
    writeln!(w, "{table}")?;
    writeln!(w, "{}", e.verdict())?;
    writeln!(w, "rule: {}", e.rule)?;
    Ok(())
}

fn describe_doc(l: &LayoutDoc) -> String {
    let mut names = Vec::new();
    if let Some(x) = &l.leader {
        names.push(x.clone());
    }
    names.push(format!("{} (samples)", l.sampler));
    names.extend(l.members.iter().cloned());
    format!("{{{}}}", names.join(", "))
}

/// The `tma.locate.tree` v1 JSON document.
pub fn json(w: &mut dyn Write, t: &TreeProfile) -> Result<(), OutputError> {
    tma_render::write_json(w, TREE_SCHEMA, TREE_SCHEMA_VERSION, t)
}

/// CSV: one row per function (then `(all)`): samples, mixed, each event's count, each
/// node's value (percent of slots; empty when not computed).
pub fn csv(w: &mut dyn Write, t: &TreeProfile) -> Result<(), OutputError> {
    let cols = node_columns(t);
    let mut header: Vec<String> = vec![
        "function".into(),
        "module".into(),
        "samples".into(),
        "mixed".into(),
        "mixed_percent".into(),
    ];
    header.extend(t.events.iter().cloned());
    header.extend(cols.iter().cloned());
    let est = t.estimators.as_ref();
    if est.is_some() {
        header.extend([
            "group_share".into(),
            "direct_share".into(),
            "disagree".into(),
        ]);
    }
    tma_render::csv_row(w, &header)?;
    for f in t.functions.iter().chain(std::iter::once(&t.total)) {
        let mut row = vec![
            f.function.clone(),
            f.module.clone(),
            f.samples.to_string(),
            f.mixed.to_string(),
            format!("{:.2}", f.mixed_percent),
        ];
        row.extend(f.counts.iter().map(|c| c.count.to_string()));
        row.extend(cols.iter().map(|c| {
            f.node(c)
                .and_then(|n| n.value)
                .map(|v| format!("{v:.2}"))
                .unwrap_or_default()
        }));
        if let Some(e) = est {
            // The `(all)` row: 100% each, and whether the estimators disagree at all.
            let (g, d, x) = match e.row(&f.function, &f.module) {
                Some(r) => (r.group_percent, r.direct_percent, r.disagree),
                None => (100.0, 100.0, !e.agree),
            };
            row.extend([
                format!("{g:.2}"),
                format!("{d:.2}"),
                if x { "yes" } else { "no" }.to_string(),
            ]);
        }
        tma_render::csv_row(w, &row)?;
    }
    Ok(())
}

/// One sample of a replayed stream ([`replay`]): thread `tid` at address `ip` (a function
/// of its own, `[unknown] 0xIP`), its group (`group_id`: the first value's id; each CPU's
/// group has its own) reading the cumulative `values` by event name (absent names read 0).
#[derive(Debug, Clone, Copy)]
pub struct ReplaySample<'a> {
    pub tid: i32,
    pub ip: u64,
    pub group_id: u64,
    pub values: &'a [(&'a str, u64)],
}

/// The parse info of a group-sampling session's records: IP|TID|TIME|READ|CPU|PERIOD,
/// read format GROUP|ID|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING, sample_id_all.
pub fn replay_parse_info() -> linux_perf_event_reader::RecordParseInfo {
    use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};
    let mut a = [0u8; 136];
    a[0..4].copy_from_slice(&1u32.to_le_bytes());
    a[4..8].copy_from_slice(&136u32.to_le_bytes());
    a[16..24].copy_from_slice(&4000u64.to_le_bytes());
    let st = 0x1u64 | 0x2 | 0x4 | 0x10 | 0x80 | 0x100;
    a[24..32].copy_from_slice(&st.to_le_bytes());
    a[32..40].copy_from_slice(&tma_perf::sampling::group::GROUP_READ_FORMAT.to_le_bytes());
    let flags: u64 = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 18) | (1 << 23);
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    match PerfEventAttr::parse::<_, byteorder::LittleEndian>(&a[..]) {
        Ok((attr, _)) => RecordParseInfo::new(&attr, Endianness::LittleEndian),
        Err(e) => unreachable!("a fixed, valid attr image: {e}"),
    }
}

/// Replay a hardware sample stream: each sample is built as the kernel lays out a
/// PERF_RECORD_SAMPLE with its read group (`layout`'s read order), handed to the live
/// path as a ring-buffer record split in two (as one wrapping the ring's end arrives), and
/// the profile analysed. Returns the profile (with [`Profile::value_names`]) and the
/// number of first reads. This is how hardware layouts are proved without a PMU.
pub fn replay(layout: &TreeLayout, samples: &[ReplaySample<'_>]) -> (Profile, u64) {
    use tma_perf::sampling::group::{build_sample, GroupValue, ReadGroup};
    let order = layout.read_order();
    let info = replay_parse_info();
    let mut agg = crate::aggregate::Aggregator::new();
    for (t, r) in samples.iter().enumerate() {
        let g = ReadGroup {
            time_enabled: Some(1000 * t as u64),
            time_running: Some(1000 * t as u64),
            values: order
                .iter()
                .enumerate()
                .map(|(i, n)| GroupValue {
                    value: r.values.iter().find(|(m, _)| m == n).map_or(0, |v| v.1),
                    id: Some(r.group_id + i as u64),
                    lost: None,
                })
                .collect(),
        };
        let body = build_sample(r.ip, 40, r.tid, 10 + t as u64, 0, 1000, &g, None);
        let (x, y) = body.split_at(body.len() / 2);
        crate::live::handle_raw(
            &mut agg,
            &tma_perf::sampling::RawRecord {
                ty: 9,
                misc: 2,
                data: &[x, y],
            },
            info,
        );
    }
    let mut sym = crate::symbols::Symbolizer::new(Vec::new(), None);
    let mut p = crate::hotspots::analyze(
        &agg,
        &mut sym,
        &layout.sampler.name,
        &crate::hotspots::ReportOptions::default(),
    );
    p.value_names = order;
    let first = agg.group().map_or(0, |g| g.first_reads);
    (p, first)
}

/// A frame's colour in the TMA flame graph: the level-1 node with the largest share of the
/// function's slots (counted over every stack the function is on), and that share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dominant {
    pub node: String,
    /// Percent of the function's slots.
    pub share: f64,
}

/// Per function name: its dominant level-1 node, from the values of every stack it is on
/// (each stack once). Functions whose tree has no level-1 value are left out.
pub fn dominant_nodes(
    profile: &Profile,
    model: &'static Model,
    consts: &Constants,
) -> Result<std::collections::BTreeMap<String, Dominant>, TreeError> {
    let width = profile.value_names.len();
    let mut per: HashMap<&str, Vec<u64>> = HashMap::new();
    for st in &profile.stacks {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for &f in &st.frames {
            let name = profile.frames[f].function.as_str();
            if seen.insert(name) {
                let e = per.entry(name).or_insert_with(|| vec![0; width]);
                for (a, v) in e.iter_mut().zip(&st.values) {
                    *a += v;
                }
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for (name, vals) in per {
        let values: HashMap<String, f64> = profile
            .value_names
            .iter()
            .zip(&vals)
            .map(|(n, &v)| (n.clone(), v as f64))
            .collect();
        let rep = tma_metrics::evaluate(model, &Selection::level(1), &values, consts)?;
        let best = rep
            .nodes
            .iter()
            .filter(|n| n.level == 1)
            .filter_map(|n| Some((n.name, n.value?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((node, share)) = best {
            out.insert(
                name.to_string(),
                Dominant {
                    node: node.to_string(),
                    share,
                },
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! Replayed hardware sample streams: PERF_RECORD_SAMPLE bodies with read groups, built
    //! as the kernel lays them out, fed through the live path (ring-buffer records) into
    //! per-function trees whose expected values were worked out by hand from the formulas
    //! (shown next to each figure).
    use std::collections::BTreeMap;

    use tma_perf::sampling::group::{build_sample, GroupValue, ReadGroup};
    use tma_perf::sampling::RawRecord;

    use super::*;
    use crate::aggregate::Aggregator;

    const A: u64 = 0x1000;
    const B: u64 = 0x2000;

    fn values(f: &FunctionTree) -> BTreeMap<String, f64> {
        f.nodes
            .iter()
            .filter_map(|n| Some((n.name.clone(), n.value?)))
            .collect()
    }

    fn assert_tree(f: &FunctionTree, want: &[(&str, f64)], bottleneck: &str) {
        let got = values(f);
        for (n, v) in want {
            let g = got
                .get(*n)
                .unwrap_or_else(|| panic!("{}: no value for {n}: {got:?}", f.function));
            assert!((g - v).abs() < 1e-9, "{} {n}: {g} != {v}", f.function);
        }
        assert_eq!(
            f.bottleneck.as_ref().and_then(|b| b.node.as_deref()),
            Some(bottleneck),
            "{}",
            f.function
        );
    }

    fn by_name(t: &TreeProfile, addr: u64) -> &FunctionTree {
        let name = format!("[unknown] {addr:#x}");
        t.functions.iter().find(|f| f.function == name).unwrap()
    }

    /// Zen 4: ls_not_halted_cyc samples and leads; the PipelineL1 events are members.
    /// Thread 101 samples A, A, then B; thread 102 (another CPU's group) samples B once.
    #[test]
    fn zen4_sampler_leads_pipeline_l1_members() {
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let layout = TreeLayout::hardware(zen4, 1, false, false).unwrap();
        assert_eq!(layout.kind, LayoutKind::SamplerLeads);
        assert_eq!(layout.leader, None);
        assert_eq!(layout.sampler.name, "ls_not_halted_cyc");
        assert_eq!(layout.members.len(), 5);
        assert!(layout.dropped.is_empty());
        const CYC: &str = "ls_not_halted_cyc";
        const FE: &str = "de_no_dispatch_per_slot.no_ops_from_frontend";
        const DISP: &str = "de_src_op_disp.all";
        const RET: &str = "ex_ret_ops";
        const BE: &str = "de_no_dispatch_per_slot.backend_stalls";
        let reads = [
            ReplaySample {
                tid: 101,
                ip: A,
                group_id: 10,
                values: &[(CYC, 400), (FE, 240), (DISP, 600), (RET, 480), (BE, 1560)],
            },
            ReplaySample {
                tid: 101,
                ip: A,
                group_id: 10,
                values: &[
                    (CYC, 1000),
                    (FE, 600),
                    (DISP, 1500),
                    (RET, 1200),
                    (BE, 3900),
                ],
            },
            ReplaySample {
                tid: 101,
                ip: B,
                group_id: 10,
                values: &[
                    (CYC, 2000),
                    (FE, 5600),
                    (DISP, 3000),
                    (RET, 2400),
                    (BE, 5400),
                ],
            },
            ReplaySample {
                tid: 102,
                ip: B,
                group_id: 20,
                values: &[
                    (CYC, 1000),
                    (FE, 1000),
                    (DISP, 1500),
                    (RET, 1200),
                    (BE, 1500),
                ],
            },
        ];
        let (p, first) = replay(&layout, &reads);
        let t = build(&p, &layout, Some(zen4), 1, &Constants::default(), 10, first).unwrap();
        assert_eq!(t.first_reads, 2);
        // A: 1000 cycles = 6000 slots; FE 600/6000, BS (1500-1200)/6000, RET 1200/6000,
        // BE 3900/6000.
        let a = by_name(&t, A);
        assert_eq!((a.samples, a.mixed), (2, 0));
        assert_eq!(a.count(CYC), Some(1000));
        assert_tree(
            a,
            &[
                ("frontend_bound", 10.0),
                ("bad_speculation", 5.0),
                ("retiring", 20.0),
                ("backend_bound", 65.0),
                ("smt_contention", 0.0),
            ],
            "backend_bound",
        );
        // B: thread 101's increase (1000, 5000, 1500, 1200, 1500) plus thread 102's first
        // read = 2000 cycles = 12000 slots; FE 6000, BS 600, RET 2400, BE 3000.
        let b = by_name(&t, B);
        assert_eq!((b.samples, b.mixed), (2, 1));
        assert!((b.mixed_percent - 50.0).abs() < 1e-9);
        // Thread 101's increase at B began at A: 5000 of B's 6000 frontend slots.
        let fe = b.counts.iter().find(|c| c.event == FE).unwrap();
        assert!((fe.mixed_percent - 500.0 / 6.0).abs() < 1e-9, "{fe:?}");
        assert!(t.notes.iter().any(|n| n.starts_with("[unknown] 0x2000: 83% of its de_no_dispatch_per_slot.no_ops_from_frontend came with mixed samples")), "{:?}", t.notes);
        assert_tree(
            b,
            &[
                ("frontend_bound", 50.0),
                ("bad_speculation", 5.0),
                ("retiring", 20.0),
                ("backend_bound", 25.0),
            ],
            "frontend_bound",
        );
        // Ranked by cycles: B first.
        assert_eq!(t.functions[0].function, format!("[unknown] {B:#x}"));
        // The whole run: 3000 cycles = 18000 slots; FE 6600, RET 3600, BE 6900, BS 900.
        assert_tree(
            &t.total,
            &[
                ("frontend_bound", 100.0 * 6600.0 / 18000.0),
                ("retiring", 20.0),
                ("backend_bound", 100.0 * 6900.0 / 18000.0),
                ("bad_speculation", 5.0),
            ],
            "backend_bound",
        );
    }

    /// Ice Lake: slots leads and cannot sample; cycles (the second event) samples; the
    /// PERF_METRICS slices (slot counts, as the kernel reports them) are members.
    #[test]
    fn icelake_slots_leader_second_event_samples() {
        let icl = tma_catalog::by_name("icl").unwrap();
        let layout = TreeLayout::hardware(icl, 1, false, false).unwrap();
        assert_eq!(layout.kind, LayoutKind::SlotsLeader);
        assert_eq!(layout.leader.as_ref().unwrap().kind, SpecKind::Slots);
        assert_eq!(layout.sampler.name, "CPU_CLK_UNHALTED.THREAD");
        assert_eq!(
            layout.read_order()[..2],
            ["TOPDOWN.SLOTS:perf_metrics", "CPU_CLK_UNHALTED.THREAD"]
        );
        // 8 general-purpose counters hold the six other events and the two UOPS_DECODED
        // ones (Retiring's threshold, through Heavy_Operations), which may only use
        // counters 0-3; with the NMI watchdog holding one, the last does not fit.
        assert!(layout.dropped.is_empty(), "{:?}", layout.dropped);
        assert_eq!(layout.members.len(), 4 + 8);
        let with_nmi = TreeLayout::hardware(icl, 1, true, false).unwrap();
        assert_eq!(with_nmi.dropped.len(), 1, "{:?}", with_nmi.dropped);
        // What is left out is read by a threshold only; the values' events are kept.
        let threshold_only = [
            "IDQ.MITE_UOPS",
            "IDQ.MS_UOPS",
            "UOPS_ISSUED.ANY",
            "UOPS_RETIRED.SLOTS",
            "UOPS_DECODED.DEC0",
            "UOPS_DECODED.DEC0:c1",
        ];
        assert!(
            threshold_only.contains(&with_nmi.dropped[0].0.as_str()),
            "{:?}",
            with_nmi.dropped
        );
        for kept in ["INT_MISC.UOP_DROPPING", "INT_MISC.CLEARS_COUNT"] {
            assert!(with_nmi.members.iter().any(|m| m.name == kept), "{kept}");
        }
        assert!(
            with_nmi.dropped[0]
                .1
                .contains("7 usable (one more is held by the NMI watchdog)"),
            "{:?}",
            with_nmi.dropped
        );
        const SLOTS: &str = "TOPDOWN.SLOTS:perf_metrics";
        const FE: &str = "PERF_METRICS.FRONTEND_BOUND";
        const BS: &str = "PERF_METRICS.BAD_SPECULATION";
        const RET: &str = "PERF_METRICS.RETIRING";
        const BE: &str = "PERF_METRICS.BACKEND_BOUND";
        const DROP: &str = "INT_MISC.UOP_DROPPING";
        const CLEARS: &str = "INT_MISC.CLEARS_COUNT";
        let reads = [
            ReplaySample {
                tid: 7,
                ip: A,
                group_id: 1,
                values: &[
                    (SLOTS, 10000),
                    ("CPU_CLK_UNHALTED.THREAD", 2000),
                    (FE, 2000),
                    (BS, 1000),
                    (RET, 3000),
                    (BE, 4000),
                    (DROP, 400),
                    (CLEARS, 100),
                ],
            },
            ReplaySample {
                tid: 7,
                ip: B,
                group_id: 1,
                values: &[
                    (SLOTS, 30000),
                    ("CPU_CLK_UNHALTED.THREAD", 6000),
                    (FE, 12000),
                    (BS, 3000),
                    (RET, 9000),
                    (BE, 6000),
                    (DROP, 400),
                    (CLEARS, 100),
                ],
            },
        ];
        let (p, first) = replay(&layout, &reads);
        let t = build(&p, &layout, Some(icl), 1, &Constants::default(), 10, first).unwrap();
        // A: slots 10000; FE 2000/10000 - 400/10000 = 16%; BE 4000/10000 + 5*100/10000 =
        // 45%; RET 30%; BS 1 - (0.16 + 0.45 + 0.30) = 9%.
        let a = by_name(&t, A);
        assert_tree(
            a,
            &[
                ("Frontend_Bound", 16.0),
                ("Bad_Speculation", 9.0),
                ("Backend_Bound", 45.0),
                ("Retiring", 30.0),
            ],
            "Backend_Bound",
        );
        // B: increases slots 20000, FE 10000, BS 2000, RET 6000, BE 2000, no drops or
        // clears: FE 50%, BS 10%, RET 30%, BE 10%.
        let b = by_name(&t, B);
        assert_tree(
            b,
            &[
                ("Frontend_Bound", 50.0),
                ("Bad_Speculation", 10.0),
                ("Backend_Bound", 10.0),
                ("Retiring", 30.0),
            ],
            "Frontend_Bound",
        );
        assert_eq!((b.mixed, a.mixed), (1, 0));
        assert_eq!(t.functions[0].count(SLOTS), Some(20000), "ranked by slots");
        // Thresholds as tma stat applies them: Backend_Bound > 20, Frontend_Bound > 15.
        assert_eq!(a.node("Backend_Bound").unwrap().above_threshold, Some(true));
        assert_eq!(
            b.node("Backend_Bound").unwrap().above_threshold,
            Some(false)
        );
        assert_eq!(
            b.node("Frontend_Bound").unwrap().above_threshold,
            Some(true)
        );
    }

    /// Skylake, SMT off: cycles samples and leads; the AnyThread and SMT-estimate events
    /// are left out, and the four general-purpose counters hold the level's events.
    #[test]
    fn skylake_sampler_leads_within_four_counters() {
        let skl = tma_catalog::by_name("skl").unwrap();
        let layout = TreeLayout::hardware(skl, 1, false, false).unwrap();
        assert_eq!(layout.kind, LayoutKind::SamplerLeads);
        assert_eq!(layout.sampler.name, "CPU_CLK_UNHALTED.THREAD");
        let mut members: Vec<&str> = layout.members.iter().map(|m| m.name.as_str()).collect();
        members.sort();
        assert_eq!(
            members,
            [
                "IDQ_UOPS_NOT_DELIVERED.CORE",
                "INST_RETIRED.ANY",
                "INT_MISC.RECOVERY_CYCLES",
                "UOPS_ISSUED.ANY",
                "UOPS_RETIRED.RETIRE_SLOTS"
            ]
        );
        let reads = [ReplaySample {
            tid: 3,
            ip: A,
            group_id: 1,
            values: &[
                ("CPU_CLK_UNHALTED.THREAD", 1000),
                ("IDQ_UOPS_NOT_DELIVERED.CORE", 800),
                ("UOPS_ISSUED.ANY", 1400),
                ("UOPS_RETIRED.RETIRE_SLOTS", 1200),
                ("INT_MISC.RECOVERY_CYCLES", 50),
                ("INST_RETIRED.ANY", 900),
            ],
        }];
        let (p, first) = replay(&layout, &reads);
        let t = build(&p, &layout, Some(skl), 1, &Constants::default(), 10, first).unwrap();
        // 4 x 1000 = 4000 slots: FE 800/4000 = 20%; BS (1400 - 1200 + 4*50)/4000 = 10%;
        // RET 1200/4000 = 30%; BE 1 - 0.2 - (1400 + 200)/4000 = 40%.
        assert_tree(
            by_name(&t, A),
            &[
                ("Frontend_Bound", 20.0),
                ("Bad_Speculation", 10.0),
                ("Retiring", 30.0),
                ("Backend_Bound", 40.0),
            ],
            "Backend_Bound",
        );
        // With SMT on the estimate's events are kept; the caveat is tma doctor's, said for a
        // host with SMT on (tests/fixtures/roots/skx-smt-5.15) and not for one with it off.
        let smt = TreeLayout::hardware(skl, 1, false, true).unwrap();
        assert!(smt
            .members
            .iter()
            .any(|m| m.name == "CPU_CLK_UNHALTED.REF_XCLK"));
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/roots/skx-smt-5.15");
        let caveats = tma_checks::tree_caveats(&tma_host::Host::under(&root), Some(skl));
        assert!(caveats.iter().any(
            |c| c.id == "smt_level1" && c.summary.contains("per-thread level 1 is meaningless")
        ));
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/doctor/this-vm");
        let caveats = tma_checks::tree_caveats(&tma_host::Host::under(&root), Some(skl));
        assert!(
            !caveats.iter().any(|c| c.id == "smt_level1"),
            "SMT off: {caveats:?}"
        );
    }

    /// The text, CSV and JSON renderings of the replayed Zen 4 trees.
    #[test]
    fn renderings_show_each_functions_tree_and_the_table() {
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let layout = TreeLayout::hardware(zen4, 1, false, false).unwrap();
        const CYC: &str = "ls_not_halted_cyc";
        const FE: &str = "de_no_dispatch_per_slot.no_ops_from_frontend";
        const DISP: &str = "de_src_op_disp.all";
        const RET: &str = "ex_ret_ops";
        const BE: &str = "de_no_dispatch_per_slot.backend_stalls";
        let a: &[(&str, u64)] = &[
            (CYC, 1000),
            (FE, 600),
            (DISP, 1500),
            (RET, 1200),
            (BE, 3900),
        ];
        let (p, first) = replay(
            &layout,
            &[ReplaySample {
                tid: 1,
                ip: A,
                group_id: 1,
                values: a,
            }],
        );
        let t = build(&p, &layout, Some(zen4), 1, &Constants::default(), 10, first).unwrap();
        let mut text = Vec::new();
        super::text(&mut text, &t).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with(
                "per-function TMA tree, level 1 from the group {ls_not_halted_cyc (samples), "
            ),
            "{text}"
        );
        assert!(
            text.contains("[unknown] 0x1000 [[unknown]]: 1 samples (100.0%), 0.0% mixed"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("backend_bound")
                    && l.contains("65.0% *  <== bottleneck")),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("retiring") && l.contains("20.0%")),
            "{text}"
        );
        let mut csv = Vec::new();
        super::csv(&mut csv, &t).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "function,module,samples,mixed,mixed_percent,ls_not_halted_cyc,\
             de_no_dispatch_per_slot.no_ops_from_frontend,de_src_op_disp.all,ex_ret_ops,\
             de_no_dispatch_per_slot.backend_stalls,de_no_dispatch_per_slot.smt_contention,\
             frontend_bound,bad_speculation,backend_bound,smt_contention,retiring"
        );
        assert_eq!(
            lines.next().unwrap(),
            "[unknown] 0x1000,[unknown],1,0,0.00,1000,600,1500,1200,3900,0,10.00,5.00,65.00,0.00,20.00"
        );
        let mut json = Vec::new();
        super::json(&mut json, &t).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["schema"], TREE_SCHEMA);
        assert_eq!(v["functions"][0]["bottleneck"]["node"], "backend_bound");
        assert_eq!(v["layout"]["kind"], "sampler_leads");
    }

    /// Values that go down between reads are charged 0 and counted; a read of another
    /// width is skipped; a truncated record is a bad record, not a panic.
    #[test]
    fn inconsistent_reads_are_counted_not_charged() {
        let layout = TreeLayout::software();
        let (p, _) = replay(
            &layout,
            &[
                ReplaySample {
                    tid: 1,
                    ip: A,
                    group_id: 1,
                    values: &[("page-faults", 10), ("task-clock", 500)],
                },
                ReplaySample {
                    tid: 1,
                    ip: A,
                    group_id: 1,
                    values: &[("page-faults", 5), ("task-clock", 900)],
                },
            ],
        );
        let t = build(&p, &layout, None, 1, &Constants::default(), 10, 0).unwrap();
        assert_eq!(t.level, 0);
        assert!(t.total.nodes.is_empty());
        assert_eq!(t.total.count("page-faults"), Some(10));
        assert_eq!(t.total.count("task-clock"), Some(900));
        let mut agg = Aggregator::new();
        let g = ReadGroup {
            time_enabled: Some(1),
            time_running: Some(1),
            values: vec![GroupValue::default(); 2],
        };
        let body = build_sample(A, 1, 1, 1, 0, 1, &g, None);
        crate::live::handle_raw(
            &mut agg,
            &RawRecord {
                ty: 9,
                misc: 2,
                data: &[&body[..body.len() - 4]],
            },
            replay_parse_info(),
        );
        assert_eq!(agg.counts().bad_records, 1);
    }
}
