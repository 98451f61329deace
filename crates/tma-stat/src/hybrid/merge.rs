//! The merged view of a hybrid part's trees: one interval of every core type's tree,
//! weighted by each type's cycles.

use tma_metrics::{decide, NodeResult, TreeNode};

use super::tables::CoreTable;
use crate::eval::IntervalReport;

/// One interval of the merged view. A node on every type with a value is the mean of its
/// values weighted by each type's cycles; a node on some types only is the weighted mean
/// over those and marked with them. Its threshold verdict is that of the type that ran the
/// most cycles; the bottleneck is found by the one rule on the merged tree.
pub(crate) fn merge_interval(parts: &[(&CoreTable, &IntervalReport, f64)]) -> IntervalReport {
    let first = parts[0].1;
    let mut union: Vec<NodeResult> = Vec::new();
    for (_, ir, _) in parts {
        for n in &ir.report.nodes {
            if !union.iter().any(|x| x.name.eq_ignore_ascii_case(n.name)) {
                union.push(n.clone());
            }
        }
    }
    // Tree order: each node after its parent and the siblings before it, a node of a later
    // type after the first type's siblings.
    fn place(union: &[NodeResult], parent: Option<&str>, out: &mut Vec<NodeResult>) {
        for n in union.iter().filter(|n| match (n.parent, parent) {
            (None, None) => true,
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
            _ => false,
        }) {
            if out.iter().any(|x| x.name == n.name) {
                continue;
            }
            out.push(n.clone());
            place(union, Some(n.name), out);
        }
    }
    let mut nodes: Vec<NodeResult> = Vec::with_capacity(union.len());
    place(&union, None, &mut nodes);
    // Nodes whose parent is not shown (a `--nodes` subtree) keep their place at the end.
    for n in &union {
        if !nodes.iter().any(|x| x.name == n.name) {
            nodes.push(n.clone());
        }
    }
    let mut only_on: Vec<(&'static str, String)> = Vec::new();
    for node in nodes.iter_mut() {
        let here: Vec<(&CoreTable, &NodeResult, f64)> = parts
            .iter()
            .filter_map(|(t, ir, w)| Some((*t, ir.report.node(node.name)?, *w)))
            .collect();
        if here.len() < parts.len() {
            let types = here
                .iter()
                .map(|h| h.0.label)
                .collect::<Vec<_>>()
                .join(", ");
            only_on.push((node.name, types));
        }
        // A type that ran no cycles in this interval has nothing to weigh (its tree is
        // 0/0); the others make the value.
        let ran: Vec<&(&CoreTable, &NodeResult, f64)> = here.iter().filter(|h| h.2 > 0.0).collect();
        let valued: Vec<(f64, f64)> = ran
            .iter()
            .filter_map(|(_, n, w)| Some((n.value?, *w)))
            .collect();
        let wsum: f64 = valued.iter().map(|v| v.1).sum();
        node.value = if !ran.is_empty() && valued.len() == ran.len() && wsum > 0.0 {
            Some(valued.iter().map(|(v, w)| v * w).sum::<f64>() / wsum)
        } else {
            None
        };
        let here: Vec<(&CoreTable, &NodeResult, f64)> = if ran.is_empty() {
            here
        } else {
            ran.into_iter().copied().collect()
        };
        if node.value.is_none() {
            node.status = here
                .iter()
                .map(|h| h.1.status.clone())
                .find(|st| *st != tma_metrics::Status::Ok)
                .unwrap_or(tma_metrics::Status::DivisionByZero);
        } else {
            node.status = tma_metrics::Status::Ok;
        }
        // The verdict of the type that ran the most cycles (where types disagree).
        node.above_threshold = here
            .iter()
            .max_by(|a, b| a.2.total_cmp(&b.2))
            .and_then(|h| h.1.above_threshold);
        node.counted_share = here
            .iter()
            .filter_map(|h| h.1.counted_share)
            .reduce(f64::min);
        node.estimated = here.iter().any(|h| h.1.estimated);
        let mut missing: Vec<String> = Vec::new();
        for h in &here {
            for e in &h.1.missing_events {
                if !missing.contains(e) {
                    missing.push(e.clone());
                }
            }
        }
        node.missing_events = missing;
    }
    let tree: Vec<TreeNode> = nodes.iter().map(TreeNode::of).collect();
    let bottleneck = decide(&tree);
    // One state per event (the first core type's), sorted as IntervalReport keeps them.
    let mut missing_states: Vec<(String, crate::eval::EventState)> = Vec::new();
    let mut zero_events = Vec::new();
    for (_, ir, _) in parts {
        for m in &ir.missing_states {
            if !missing_states.iter().any(|(e, _)| *e == m.0) {
                missing_states.push(m.clone());
            }
        }
        for z in &ir.zero_events {
            if !zero_events.contains(z) {
                zero_events.push(z.clone());
            }
        }
    }
    missing_states.sort_by(|a, b| a.0.cmp(&b.0));
    IntervalReport {
        start_s: first.start_s,
        end_s: first.end_s,
        report: tma_metrics::Report {
            cpu: first.report.cpu.clone(),
            nodes,
            bottleneck,
            metrics: Vec::new(),
        },
        missing_states,
        zero_events,
        all_zero: parts.iter().all(|p| p.1.all_zero),
        perf: Vec::new(),
        only_on,
    }
}
