//! Bottleneck selection over an evaluated tree.
//!
//! The rule (issue 2, implemented exactly):
//! 1. Start with the level-1 nodes of the selection as the candidates.
//! 2. Among the candidates, keep those with a value whose threshold is true
//!    (`above_threshold == Some(true)`), highest value first.
//! 3. None kept: stop. At level 1 that is [`StopReason::NothingOverThreshold`] (or
//!    [`StopReason::NotMeasured`] when no candidate has a value at all); below level 1 it is
//!    [`StopReason::NoChildOverThreshold`] (or `NotMeasured` when no child has a value).
//! 4. Two or more kept and the top two are within [`AMBIGUITY_POINTS`] percentage points
//!    (gap <= 5): stop with [`StopReason::Ambiguous`], recording both; the bottleneck stays
//!    at the last unambiguous node (none at level 1).
//! 5. Otherwise the highest one joins the path. Its children within the selection become the
//!    candidates and we go back to 2; when it has none, stop with [`StopReason::Leaf`].
//!
//! Only nodes in the selection (levels and subtrees shown) take part. The locate-with events
//! are those of the final node, or, when it has none, those of its nearest ancestor on the
//! path that has some (`locate_with_node` names the node they come from).

use serde::Serialize;

use crate::NodeResult;

/// Two sibling values at most this many percentage points apart are ambiguous.
pub const AMBIGUITY_POINTS: f64 = 5.0;

/// Why the descent stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum StopReason {
    /// The bottleneck node has no children in the selection.
    Leaf,
    /// The bottleneck node has measured children but none is over its threshold.
    NoChildOverThreshold,
    /// The two highest candidates over threshold are within [`AMBIGUITY_POINTS`].
    Ambiguous {
        first: String,
        second: String,
        /// first - second, in percentage points.
        gap: f64,
    },
    /// No level-1 node is over its threshold.
    NothingOverThreshold,
    /// The candidates (level 1, or the bottleneck's children) have no values.
    NotMeasured,
    /// Some candidates have values but these have none (missing events, division by zero):
    /// any of them could be the largest, so the descent stops rather than guess.
    Undecided { not_computed: Vec<String> },
}

/// The result of the descent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bottleneck {
    /// Chosen nodes from level 1 down, the last being `node`.
    pub path: Vec<String>,
    /// The bottleneck, `None` when not even a level-1 node could be chosen.
    pub node: Option<String>,
    pub stop: StopReason,
    /// Events to sample to locate it in code (see `locate_with_node`).
    pub locate_with: Vec<String>,
    /// The node whose locate-with events are given: `node` itself or its nearest ancestor
    /// that has some; `None` when no node on the path has any.
    pub locate_with_node: Option<String>,
}

pub(crate) fn find(nodes: &[NodeResult]) -> Bottleneck {
    let mut path: Vec<usize> = Vec::new();
    let stop = loop {
        let cands: Vec<usize> = match path.last() {
            None => (0..nodes.len())
                .filter(|&i| nodes[i].parent.is_none() || nodes[i].level == 1)
                .collect(),
            Some(&p) => (0..nodes.len())
                .filter(|&i| {
                    nodes[i]
                        .parent
                        .is_some_and(|n| n.eq_ignore_ascii_case(nodes[p].name))
                })
                .collect(),
        };
        if cands.is_empty() {
            break if path.is_empty() {
                StopReason::NotMeasured
            } else {
                StopReason::Leaf
            };
        }
        if cands.iter().all(|&i| nodes[i].value.is_none()) {
            break StopReason::NotMeasured;
        }
        let not_computed: Vec<String> = cands
            .iter()
            .filter(|&&i| nodes[i].value.is_none())
            .map(|&i| nodes[i].name.to_string())
            .collect();
        if !not_computed.is_empty() {
            break StopReason::Undecided { not_computed };
        }
        let mut over: Vec<(usize, f64)> = cands
            .iter()
            .filter_map(|&i| match (nodes[i].value, nodes[i].above_threshold) {
                (Some(v), Some(true)) => Some((i, v)),
                _ => None,
            })
            .collect();
        // Highest first; ties keep table order (stable sort).
        over.sort_by(|a, b| b.1.total_cmp(&a.1));
        match over.as_slice() {
            [] => {
                break if path.is_empty() {
                    StopReason::NothingOverThreshold
                } else {
                    StopReason::NoChildOverThreshold
                }
            }
            [(a, va), (b, vb), ..] if va - vb <= AMBIGUITY_POINTS => {
                break StopReason::Ambiguous {
                    first: nodes[*a].name.to_string(),
                    second: nodes[*b].name.to_string(),
                    gap: va - vb,
                }
            }
            [(a, _), ..] => {
                if path.contains(a) || path.len() > nodes.len() {
                    break StopReason::Leaf; // malformed parent cycle; never loop
                }
                path.push(*a);
            }
        }
    };
    let (locate_with, locate_with_node) = path
        .iter()
        .rev()
        .find(|&&i| !nodes[i].locate_with.is_empty())
        .map(|&i| {
            (
                nodes[i].locate_with.iter().map(|s| s.to_string()).collect(),
                Some(nodes[i].name.to_string()),
            )
        })
        .unwrap_or_default();
    Bottleneck {
        path: path.iter().map(|&i| nodes[i].name.to_string()).collect(),
        node: path.last().map(|&i| nodes[i].name.to_string()),
        stop,
        locate_with,
        locate_with_node,
    }
}
