//! Per-function counts of a profile with group values, and each function's tree.

use std::collections::HashMap;

use tma_catalog::Model;
use tma_metrics::{Constants, Report, Selection};

use super::doc::{EventCount, FunctionTree, LayoutDoc, TreeNode, TreeProfile};
use super::layout::TreeLayout;
use super::TreeError;
use crate::hotspots::Profile;

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
