//! `tma locate --tree`: two estimators of where the bottleneck node is, side by side.
//!
//! * **Group reads**: a function's share of the node is the slots the group reads charge to
//!   the node in that function (the node's value, a percent of slots, times the function's
//!   slots, both from the increases charged to it) over the node's slots in all functions.
//! * **Direct samples**: the function's share of the samples of the node's locate-with event
//!   (the event `tma locate --node NODE` samples), taken in a second pass of the same target.
//!   Where the node has none, its nearest parent's is sampled, and the group reads are of
//!   that parent (`Memory_Bound` is compared as `Backend_Bound`).
//!   Both put a sample in the kernel on the first user frame of its call chain.
//!
//! Without a PMU there is no node: the group-read share is of the group's `task-clock`, and
//! the direct samples are of `cpu-clock` (what `tma locate` samples without a PMU).
//!
//! **Two passes, not one run with two sampling groups.** The group already holds the core's
//! counters (6 on Zen 4, 4 to 8 before the NMI watchdog on Intel); a second sampling event in
//! the same run would make the kernel multiplex the group, and a group that is scheduled
//! part of the time charges its increases to fewer samples. The second pass runs the command
//! again (or samples `-p`/`-a` for another `--duration`): the two estimates are of two runs.
//!
//! **Where they disagree** ([`DISAGREE_POINTS`]): a shown function disagrees when its two
//! shares differ by more than 10 percentage points; the estimators disagree when a shown
//! function does, or when they put different functions first. Skid (the direct samples of an
//! imprecise event land after the instruction that caused them, often in the next function)
//! and bleed (a group increase since a sample in another function, see
//! [`crate::tree::FunctionTree::mixed`]) are the usual causes.

use std::collections::HashMap;

use serde::Serialize;
use tma_catalog::Model;
use tma_metrics::Constants;

use crate::hotspots::{Profile, Stack, KERNEL_MODULE};

/// A function's two shares disagree when they differ by more than this many percentage
/// points.
pub const DISAGREE_POINTS: f64 = 10.0;

/// The rule, as the outputs state it.
pub fn rule() -> String {
    format!(
        "a function disagrees when its two shares differ by more than {DISAGREE_POINTS:.0} \
         percentage points; the estimators disagree when a shown function does or when they \
         put different functions first"
    )
}

/// (function, module).
pub type FuncKey = (String, String);

/// One function's two shares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EstimateRow {
    pub function: String,
    pub module: String,
    /// Percent of the node's slots (no PMU: of task-clock) charged here by the group reads.
    pub group_percent: f64,
    /// Percent of the direct samples.
    pub direct_percent: f64,
    /// The two differ by more than [`DISAGREE_POINTS`].
    pub disagree: bool,
}

/// The two estimators of where the bottleneck node is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimators {
    /// The whole run's bottleneck node (`None` without a PMU: no tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What the group-read share is of: `Backend_Bound slots` (the slots of the node whose
    /// locate-with event is sampled), or `task-clock`.
    pub group_basis: String,
    /// The event sampled directly.
    pub direct_event: String,
    /// The node whose locate-with event that is (the bottleneck, or the nearest parent
    /// with one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_node: Option<String>,
    /// Samples of the direct pass.
    pub direct_samples: u64,
    /// Where they come from: `a second pass`, or `the same file` (`--import`).
    pub direct_source: String,
    pub rule: String,
    /// The function each estimator puts first.
    pub top_group: Option<String>,
    pub top_direct: Option<String>,
    pub agree: bool,
    /// Each disagreement in words.
    pub disagreements: Vec<String>,
    /// The tree's shown functions, in its order.
    pub functions: Vec<EstimateRow>,
}

impl Estimators {
    /// One line: agree, or where they disagree.
    pub fn verdict(&self) -> String {
        let what = match &self.node {
            Some(n) => format!("the estimators of {n}"),
            None => "the two estimators".to_string(),
        };
        if self.agree {
            format!("{what} agree (within {DISAGREE_POINTS:.0} points, same first function)")
        } else {
            format!("{what} disagree: {}", self.disagreements.join("; "))
        }
    }

    /// A shown function's row.
    pub fn row(&self, function: &str, module: &str) -> Option<&EstimateRow> {
        self.functions
            .iter()
            .find(|r| r.function == function && r.module == module)
    }
}

/// The leaf a stack is charged to: its first user frame (kernel work belongs to the user code
/// that caused it), else its first frame.
pub fn charged_frame(profile: &Profile, st: &Stack) -> Option<usize> {
    st.frames
        .iter()
        .find(|&&f| profile.frames[f].module != KERNEL_MODULE)
        .or(st.frames.first())
        .copied()
}

/// Per function: (samples, the summed group values in [`Profile::value_names`] order).
pub fn function_values(profile: &Profile) -> HashMap<FuncKey, (u64, Vec<u64>)> {
    let width = profile.value_names.len();
    let mut per: HashMap<FuncKey, (u64, Vec<u64>)> = HashMap::new();
    for st in &profile.stacks {
        let Some(leaf) = charged_frame(profile, st) else {
            continue;
        };
        let f = &profile.frames[leaf];
        let e = per
            .entry((f.function.clone(), f.module.clone()))
            .or_insert_with(|| (0, vec![0; width]));
        e.0 += st.samples;
        for (a, v) in e.1.iter_mut().zip(&st.values) {
            *a += v;
        }
    }
    per
}

/// The helper metric that gives a function's slots (Intel `Info_Thread_SLOTS`, AMD
/// `total_dispatch_slots`).
const SLOTS_METRICS: [&str; 2] = ["Info_Thread_SLOTS", "total_dispatch_slots"];

/// Per function, the group-read amount: the slots charged to `node` (with a model), else the
/// function's `task-clock` (else the sampler's count, the first value of a read without a
/// leader).
pub fn group_amounts(
    profile: &Profile,
    model: Option<&'static Model>,
    node: Option<&str>,
    consts: &Constants,
) -> Result<HashMap<FuncKey, f64>, tma_metrics::MetricsError> {
    let per = function_values(profile);
    let mut out = HashMap::with_capacity(per.len());
    match (model, node) {
        (Some(m), Some(node)) => {
            for (k, (_, vals)) in per {
                let values: HashMap<String, f64> = profile
                    .value_names
                    .iter()
                    .zip(&vals)
                    .map(|(n, &v)| (n.clone(), v as f64))
                    .collect();
                let pct = tma_metrics::evaluate_metric(m, node, &values, consts)?
                    .and_then(|(v, _)| v)
                    .unwrap_or(0.0);
                let mut slots = 0.0;
                for s in SLOTS_METRICS {
                    if let Some((Some(v), _)) = tma_metrics::evaluate_metric(m, s, &values, consts)?
                    {
                        slots = v;
                        break;
                    }
                }
                out.insert(k, (pct / 100.0 * slots).max(0.0));
            }
        }
        _ => {
            let i = profile
                .value_names
                .iter()
                .position(|n| is_task_clock(n))
                .unwrap_or(0);
            for (k, (_, vals)) in per {
                out.insert(k, vals.get(i).copied().unwrap_or(0) as f64);
            }
        }
    }
    Ok(out)
}

/// What [`group_amounts`] sums, in words.
pub fn group_basis(profile: &Profile, node: Option<&str>) -> String {
    match node {
        Some(n) => format!("{n} slots"),
        None => match profile.value_names.iter().find(|n| is_task_clock(n)) {
            Some(n) => n.clone(),
            None => profile.value_names.first().cloned().unwrap_or_default(),
        },
    }
}

/// `task-clock`, with or without modifiers (`task-clock:u` in a perf.data file).
fn is_task_clock(name: &str) -> bool {
    name.split(':').next() == Some("task-clock")
}

/// Per function, the direct pass's samples (charged as the tree charges them).
pub fn direct_amounts(profile: &Profile) -> HashMap<FuncKey, f64> {
    let mut out: HashMap<FuncKey, f64> = HashMap::new();
    for st in &profile.stacks {
        if let Some(leaf) = charged_frame(profile, st) {
            let f = &profile.frames[leaf];
            *out.entry((f.function.clone(), f.module.clone()))
                .or_default() += st.samples as f64;
        }
    }
    out
}

/// The node whose locate-with event samples `node` directly: `node` itself, else the nearest
/// parent with one; `None` where none has (the AMD tables name none).
pub fn locate_with(model: &Model, node: &str) -> Option<(&'static str, &'static str)> {
    let mut n = model.node(node)?;
    loop {
        if let Some(e) = n.locate_with.first() {
            return Some((n.name, e));
        }
        n = model.node(n.parent?)?;
    }
}

fn first_by(amounts: &HashMap<FuncKey, f64>) -> Option<String> {
    amounts
        .iter()
        .filter(|(_, &v)| v > 0.0)
        .max_by(|a, b| a.1.total_cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(k, _)| k.0.clone())
}

fn percent(a: f64, total: f64) -> f64 {
    if total > 0.0 {
        100.0 * a / total
    } else {
        0.0
    }
}

/// What the comparison is of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compared {
    /// The whole run's bottleneck node (`None` without a PMU).
    pub node: Option<String>,
    /// What the group-read amounts are.
    pub group_basis: String,
    /// The event sampled directly, and the node whose locate-with event it is.
    pub direct_event: String,
    pub direct_node: Option<String>,
    /// Where the direct samples come from: `a second pass`, or `the same file`.
    pub direct_source: String,
}

/// Compare the two estimators over every function, showing `shown` (the tree's functions).
pub fn compare(
    what: Compared,
    group: &HashMap<FuncKey, f64>,
    direct: &HashMap<FuncKey, f64>,
    shown: &[FuncKey],
) -> Estimators {
    let gt: f64 = group.values().sum();
    let dt: f64 = direct.values().sum();
    let mut disagreements = Vec::new();
    let functions: Vec<EstimateRow> = shown
        .iter()
        .map(|k| {
            let g = percent(group.get(k).copied().unwrap_or(0.0), gt);
            let d = percent(direct.get(k).copied().unwrap_or(0.0), dt);
            EstimateRow {
                function: k.0.clone(),
                module: k.1.clone(),
                group_percent: g,
                direct_percent: d,
                disagree: (g - d).abs() > DISAGREE_POINTS,
            }
        })
        .collect();
    let (top_group, top_direct) = (first_by(group), first_by(direct));
    if dt <= 0.0 {
        disagreements.push(format!(
            "the direct pass took no samples of {}: nothing to compare",
            what.direct_event
        ));
    } else if gt <= 0.0 {
        disagreements.push(format!(
            "the group reads charged no {}: nothing to compare",
            what.group_basis
        ));
    } else {
        for r in functions.iter().filter(|r| r.disagree) {
            disagreements.push(format!(
                "{}: {:.1}% by the group reads, {:.1}% by the direct samples",
                r.function, r.group_percent, r.direct_percent
            ));
        }
        if top_group != top_direct {
            disagreements.push(format!(
                "the group reads put {} first, the direct samples {}",
                top_group.as_deref().unwrap_or("nothing"),
                top_direct.as_deref().unwrap_or("nothing")
            ));
        }
    }
    Estimators {
        node: what.node,
        group_basis: what.group_basis,
        direct_event: what.direct_event,
        direct_node: what.direct_node,
        direct_samples: dt as u64,
        direct_source: what.direct_source,
        rule: rule(),
        top_group,
        top_direct,
        agree: disagreements.is_empty(),
        disagreements,
        functions,
    }
}

/// The parse info of a plain sampling session's records: IP|TID|TIME|CPU|PERIOD,
/// sample_id_all (no read group).
fn direct_parse_info() -> linux_perf_event_reader::RecordParseInfo {
    use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};
    let mut a = [0u8; 136];
    a[0..4].copy_from_slice(&4u32.to_le_bytes());
    a[4..8].copy_from_slice(&136u32.to_le_bytes());
    a[16..24].copy_from_slice(&100_003u64.to_le_bytes());
    let st = 0x1u64 | 0x2 | 0x4 | 0x80 | 0x100;
    a[24..32].copy_from_slice(&st.to_le_bytes());
    let flags: u64 = (1 << 8) | (1 << 9) | (1 << 18) | (1 << 23);
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    match PerfEventAttr::parse::<_, byteorder::LittleEndian>(&a[..]) {
        Ok((attr, _)) => RecordParseInfo::new(&attr, Endianness::LittleEndian),
        Err(e) => unreachable!("a fixed, valid attr image: {e}"),
    }
}

/// Replay a direct sample stream of `event` (no read group): each `(tid, ip)` is a
/// PERF_RECORD_SAMPLE as the kernel writes it for IP|TID|TIME|CPU|PERIOD, handed to the live
/// path split in two as a record wrapping the ring's end arrives, and the profile analysed.
/// With [`crate::tree::replay`] this proves the two estimators of a hardware layout
/// without a PMU.
pub fn replay_direct(event: &str, samples: &[(i32, u64)]) -> Profile {
    let info = direct_parse_info();
    let mut agg = crate::aggregate::Aggregator::new();
    agg.keep_callchains = true;
    for (t, &(tid, ip)) in samples.iter().enumerate() {
        let mut b = Vec::with_capacity(40);
        b.extend_from_slice(&ip.to_le_bytes());
        b.extend_from_slice(&40i32.to_le_bytes());
        b.extend_from_slice(&tid.to_le_bytes());
        b.extend_from_slice(&(10 + t as u64).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&100_003u64.to_le_bytes());
        let (x, y) = b.split_at(b.len() / 2);
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
    crate::hotspots::analyze(
        &agg,
        &mut sym,
        event,
        &crate::hotspots::ReportOptions::default(),
    )
}
