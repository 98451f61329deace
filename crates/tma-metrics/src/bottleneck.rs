//! Bottleneck selection over an evaluated tree.
//!
//! The rule (issue 11, section 3; it follows what the reference tool reports):
//! 1. The candidates are the level-1 nodes of the selection, minus the overlap views
//!    ([`OVERLAP_VIEWS`]).
//! 2. No candidate: stop ([`StopReason::NotMeasured`] at level 1, [`StopReason::Leaf`]
//!    below). Every candidate without a value: stop with `NotMeasured`. Some candidates
//!    without a value: stop with [`StopReason::Undecided`] naming them, since any of them
//!    could be the largest.
//! 3. Keep the candidates whose threshold is true (`above_threshold == Some(true)`) and
//!    order them by their descent value, highest first (ties keep table order). The descent
//!    value of a percent node is its value with anything over 100 counted as 100; the
//!    reported value and its [`Status::OutOfRange`](crate::Status) stay as they are.
//! 4. None kept: stop ([`StopReason::NothingOverThreshold`] at level 1,
//!    [`StopReason::NoChildOverThreshold`] below).
//! 5. At level 1 the highest kept node always joins the path: there is no ambiguity stop
//!    there. When the next one is within [`AMBIGUITY_POINTS`] of it, it is recorded as the
//!    [`Bottleneck::close_second`] so that the output can mention it.
//! 6. Below level 1, when the two highest kept children are within [`AMBIGUITY_POINTS`]
//!    (gap <= 5), stop with [`StopReason::Ambiguous`] naming both: the parent stays the
//!    bottleneck. Otherwise the highest child joins the path.
//! 7. The node that joined the path has its children within the selection, minus the overlap
//!    views, as the new candidates: back to 2.
//!
//! Only nodes in the selection (levels and subtrees shown) take part. The locate-with events
//! are those of the final node, or, when it has none, those of its nearest ancestor on the
//! path that has some (`locate_with_node` names the node they come from).

use serde::{Deserialize, Serialize};

use crate::NodeResult;

/// Two sibling values at most this many percentage points apart are ambiguous (below level
/// 1) or a close second (at level 1).
pub const AMBIGUITY_POINTS: f64 = 5.0;

/// Nodes that overlap their siblings rather than take a share of their parent, so they never
/// compete with their siblings for the bottleneck (they are still evaluated and shown).
///
/// Source: the reference implementation, pmu-tools/toplev. Its generated model files set the
/// node attribute `overlap = True` on exactly `L3_Hit_Latency` (level 4, under `L3_Bound`:
/// an estimate of unloaded L3-hit latency that overlaps the contention nodes beside it) and
/// `Store_Latency` (level 4, under `Store_Bound`: store-miss cycles that overlap
/// `Lock_Latency` / `FB_Full`), in the "siblings cross-tree" part of the model's `Setup`.
/// Read in `andikleen/pmu-tools` `spr_server_ratios.py` (commit 8eb68aff, TMA 5.01) and
/// `clx_server_ratios.py` (commit 393e7b3f): in both, these two are the only nodes with the
/// attribute; `Branch_Resteers` has none, so the reference descends into it like into any
/// other child of `Fetch_Latency`.
///
/// Why a list and not a field of the tables: the Intel perfmon data our tables come from
/// (`shared/pmu-data/intel/*/metrics/*.json`) has no field with this set. Its nearest marks
/// differ: `Threshold.ThresholdIssues` carries `~overlap` on `Branch_Resteers`,
/// `L3_Hit_Latency` and `Store_Latency` (every model: SKL, SKX, CLX, ICL, ICX, TGL, ADL, MTL,
/// SPR, EMR, GNR), and the description note "the value of this node may overlap with its
/// siblings" is on `Branch_Resteers` and `L3_Hit_Latency` only. Following either would keep
/// `Branch_Resteers` out of the descent, where the reference picks it (issue 26, section 5:
/// tma stopped at `Fetch_Latency` on a Sapphire Rapids count set where the reference named
/// `Branch_Resteers`). The Linux perf metrics carry no such mark. Both names exist in every
/// Intel P-core table; the E-core trees and AMD have neither.
///
/// `FP_Arith` and `Int_Operations` carry a different note (their value "may exceed its
/// parent" because they count uops, not slots); they still partition `Light_Operations`
/// with their siblings, so they stay candidates.
pub const OVERLAP_VIEWS: &[&str] = &["L3_Hit_Latency", "Store_Latency"];

/// True for a node of [`OVERLAP_VIEWS`] (names compare case-insensitively).
pub fn is_overlap_view(name: &str) -> bool {
    OVERLAP_VIEWS.iter().any(|o| o.eq_ignore_ascii_case(name))
}

/// The value the descent compares: a percent over 100 counts as 100.
fn descent_value(n: &NodeResult, v: f64) -> f64 {
    if crate::is_percent(n.unit) {
        v.min(100.0)
    } else {
        v
    }
}

/// Why the descent stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum StopReason {
    /// The bottleneck node has no children in the selection (overlap views aside).
    Leaf,
    /// The bottleneck node has measured children but none is over its threshold.
    NoChildOverThreshold,
    /// Below level 1, the two highest children over threshold are within
    /// [`AMBIGUITY_POINTS`]; their parent is the bottleneck.
    Ambiguous {
        first: String,
        second: String,
        /// first - second in descent values, in percentage points.
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

/// A level-1 node over threshold within [`AMBIGUITY_POINTS`] of the chosen level-1 node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloseSecond {
    pub node: String,
    /// Its value as reported (not capped).
    pub value: f64,
    /// Chosen minus this one, in descent values, in percentage points.
    pub gap: f64,
}

/// The result of the descent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// Chosen nodes from level 1 down, the last being `node`.
    pub path: Vec<String>,
    /// The bottleneck, `None` when not even a level-1 node could be chosen.
    pub node: Option<String>,
    pub stop: StopReason,
    /// The runner-up at level 1 when it is within [`AMBIGUITY_POINTS`] of the chosen one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub close_second: Option<CloseSecond>,
    /// Events to sample to locate it in code (see `locate_with_node`).
    pub locate_with: Vec<String>,
    /// The node whose locate-with events are given: `node` itself or its nearest ancestor
    /// that has some; `None` when no node on the path has any.
    pub locate_with_node: Option<String>,
}

pub(crate) fn find(nodes: &[NodeResult]) -> Bottleneck {
    let mut path: Vec<usize> = Vec::new();
    let mut close_second = None;
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
        let cands: Vec<usize> = cands
            .into_iter()
            .filter(|&i| !is_overlap_view(nodes[i].name))
            .collect();
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
                (Some(v), Some(true)) => Some((i, descent_value(&nodes[i], v))),
                _ => None,
            })
            .collect();
        // Highest first; ties keep table order (stable sort).
        over.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top = match over.as_slice() {
            [] => {
                break if path.is_empty() {
                    StopReason::NothingOverThreshold
                } else {
                    StopReason::NoChildOverThreshold
                }
            }
            [(a, va), (b, vb), ..] if va - vb <= AMBIGUITY_POINTS => {
                if !path.is_empty() {
                    break StopReason::Ambiguous {
                        first: nodes[*a].name.to_string(),
                        second: nodes[*b].name.to_string(),
                        gap: va - vb,
                    };
                }
                close_second = Some(CloseSecond {
                    node: nodes[*b].name.to_string(),
                    value: nodes[*b].value.unwrap_or(*vb),
                    gap: va - vb,
                });
                *a
            }
            [(a, _), ..] => *a,
        };
        if path.contains(&top) || path.len() > nodes.len() {
            break StopReason::Leaf; // malformed parent cycle; never loop
        }
        path.push(top);
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
        close_second,
        locate_with,
        locate_with_node,
    }
}
