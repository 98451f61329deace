//! Bottleneck selection over an evaluated tree.
//!
//! The rule (it follows what the reference tool reports):
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
//! A candidate with a value but no threshold verdict (`above_threshold == None`: its threshold
//! could not be evaluated) is not kept in step 3; when its value is at least that of the node
//! chosen (or nothing was chosen), it is recorded in [`Bottleneck::passed_over`] so that the
//! output can say why it was not chosen.
//!
//! The rule reads [`TreeNode`]s: [`decide`] runs it on any tree, e.g. the means over the
//! intervals of a run that `tma report` and `tma diff` show (their thresholds from
//! [`summary_threshold`]); `evaluate` runs it on each evaluated tree. Every output words the
//! result with [`Bottleneck::wording`] (the sentence and its notes) or
//! [`Bottleneck::label`] (one cell), and a run's changes over time with [`phases`] and
//! [`phases_text`].
//!
//! Only nodes in the selection (levels and subtrees shown) take part. The locate-with events
//! are those of the final node, or, when it has none, those of its nearest ancestor on the
//! path that has some (`locate_with_node` names the node they come from).

use serde::{Deserialize, Serialize};

use crate::expr::{BinOp, Expr, Func};
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
/// `Branch_Resteers` out of the descent, where the reference picks it (once
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
fn descent_value(n: &TreeNode, v: f64) -> f64 {
    if n.percent {
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

/// A candidate with a value whose threshold could not be evaluated, passed over by the
/// descent although its value is at least that of the node chosen at its level (or no node
/// was chosen there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassedOver {
    pub node: String,
    /// Its value as reported.
    pub value: f64,
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
    /// Candidates without a threshold verdict that the descent passed over (see the module
    /// doc); empty in most trees.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed_over: Vec<PassedOver>,
}

/// One node of a tree as the rule reads it: a node of an evaluated [`Report`](crate::Report)
/// ([`TreeNode::of`]), or of a tree summarised over samples.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeNode<'a> {
    pub name: &'a str,
    pub parent: Option<&'a str>,
    pub level: u8,
    pub value: Option<f64>,
    /// A percentage: over 100 counts as 100 in the descent.
    pub percent: bool,
    /// `None`: the threshold could not be evaluated.
    pub above_threshold: Option<bool>,
    pub locate_with: &'a [&'a str],
}

impl<'a> TreeNode<'a> {
    /// The node of an evaluated report.
    pub fn of(n: &'a NodeResult) -> TreeNode<'a> {
        TreeNode {
            name: n.name,
            parent: n.parent,
            level: n.level,
            value: n.value,
            percent: crate::is_percent(n.unit),
            above_threshold: n.above_threshold,
            locate_with: n.locate_with,
        }
    }
}

pub(crate) fn find(nodes: &[NodeResult]) -> Bottleneck {
    let nodes: Vec<TreeNode> = nodes.iter().map(TreeNode::of).collect();
    decide(&nodes)
}

/// The rule of this module on any tree (nodes in table order, parents before children).
pub fn decide(nodes: &[TreeNode]) -> Bottleneck {
    let mut path: Vec<usize> = Vec::new();
    let mut close_second = None;
    let mut passed_over: Vec<PassedOver> = Vec::new();
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
        // Candidates with no threshold verdict at least as high as the highest kept one.
        let highest = over.first().map(|o| o.1);
        passed_over.extend(cands.iter().filter_map(|&i| {
            let v = nodes[i].value?;
            (nodes[i].above_threshold.is_none()
                && highest.is_none_or(|h| descent_value(&nodes[i], v) >= h))
            .then(|| PassedOver {
                node: nodes[i].name.to_string(),
                value: v,
            })
        }));
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
        passed_over,
    }
}

/// How a [`Bottleneck`] reads: the sentence every output prints, and the lines that qualify
/// it (indented by the text tree, run on by the HTML page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wording {
    /// `Bottleneck: …`, `No bottleneck: …`.
    pub headline: String,
    /// A close second at level 1, children that could not be computed, candidates passed
    /// over for want of a threshold verdict.
    pub notes: Vec<String>,
}

impl Wording {
    /// The headline and its notes as one paragraph.
    pub fn paragraph(&self) -> String {
        std::iter::once(self.headline.as_str())
            .chain(self.notes.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl Bottleneck {
    /// The one wording of the verdict, for every output (the text tree, `tma report`'s
    /// page, `tma diff`). `value` formats a node's value as the output shows it (`26.0%`,
    /// `-` when it has none).
    pub fn wording(&self, value: &dyn Fn(&str) -> String) -> Wording {
        let path = self.path.join(" > ");
        let at = |n: &str| format!("{n} ({})", value(n));
        let node_v = self.node.as_deref().map(value).unwrap_or_default();
        let mut notes = Vec::new();
        let headline = match (&self.stop, &self.node) {
            (StopReason::Ambiguous { first, second, gap }, _) => format!(
                "Bottleneck: {path} ({node_v}); below it, ambiguous between {} and {}, within {gap:.1} points.",
                at(first),
                at(second)
            ),
            (StopReason::Undecided { not_computed }, node) => {
                let names: Vec<&str> = not_computed.iter().map(String::as_str).collect();
                let where_ = match node {
                    None => "at level 1".to_string(),
                    Some(_) => format!("below {path} ({node_v})"),
                };
                format!(
                    "Bottleneck: undecided {where_}: {} could not be computed, and {} be the largest.",
                    and_list(&names),
                    if names.len() == 1 { "it could" } else { "any of them could" }
                )
            }
            (StopReason::NothingOverThreshold, _) if !self.passed_over.is_empty() => {
                let names: Vec<&str> = self.passed_over.iter().map(|p| p.node.as_str()).collect();
                format!(
                    "No bottleneck known: no level-1 node with a threshold verdict is over its threshold, and the threshold of {} could not be evaluated.",
                    and_list(&names)
                )
            }
            (StopReason::NothingOverThreshold, _) => {
                "No bottleneck: no level-1 node is over its threshold.".to_string()
            }
            (_, None) => "No bottleneck: the level-1 nodes could not be computed.".to_string(),
            (stop, Some(_)) => {
                if *stop == StopReason::NotMeasured {
                    notes.push(
                        "Its children could not be computed, so the descent stopped there."
                            .to_string(),
                    );
                }
                format!("Bottleneck: {path} ({node_v})")
            }
        };
        if let Some(c) = &self.close_second {
            notes.push(format!(
                "Close second at level 1: {} {} is within {:.1} points.",
                c.node,
                value(&c.node),
                c.gap
            ));
        }
        let known = self.stop != StopReason::NothingOverThreshold;
        for p in self.passed_over.iter().filter(|_| known) {
            notes.push(format!(
                "Passed over: {}, whose threshold could not be evaluated, so it is not known to be over it.",
                at(&p.node)
            ));
        }
        Wording { headline, notes }
    }

    /// The verdict in one cell (`--compact`): [`Bottleneck::phase_label`] and a close
    /// second at level 1 (`(close: NODE)`).
    pub fn label(&self) -> String {
        match &self.close_second {
            Some(c) => format!("{} (close: {})", self.phase_label(), c.node),
            None => self.phase_label(),
        }
    }

    /// The verdict as a phase of [`phases`] names it: the node, and what stopped the descent
    /// where it is not a plain choice.
    pub fn phase_label(&self) -> String {
        let passed = if self.passed_over.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.passed_over.iter().map(|p| p.node.as_str()).collect();
            format!(" ({} threshold ?)", names.join(", "))
        };
        match (&self.stop, &self.node) {
            (StopReason::Ambiguous { first, second, .. }, Some(n)) => {
                format!("{n} ({first} ~ {second}){passed}")
            }
            (StopReason::Ambiguous { first, second, .. }, None) => {
                format!("{first} ~ {second} (ambiguous)")
            }
            (StopReason::Undecided { .. }, None) => "undecided (nodes not computed)".into(),
            (StopReason::Undecided { .. }, Some(n)) => format!("{n} (undecided below)"),
            (StopReason::NotMeasured, Some(n)) => format!("{n} (children not computed)"),
            (_, Some(n)) => format!("{n}{passed}"),
            (StopReason::NothingOverThreshold, None) if !self.passed_over.is_empty() => {
                format!("none known over threshold{passed}")
            }
            (StopReason::NothingOverThreshold, None) => "none over threshold".into(),
            _ => "not measured".into(),
        }
    }
}

/// Consecutive samples (intervals) with the same bottleneck [`Bottleneck::phase_label`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// The first and last sample, counted from 1.
    pub first: usize,
    pub last: usize,
    pub label: String,
}

/// The runs of samples with the same bottleneck, in order.
pub fn phases(per_sample: &[Bottleneck]) -> Vec<Phase> {
    let mut t = Phases::default();
    for b in per_sample {
        t.push(b);
    }
    t.into_phases()
}

/// [`phases`] sample by sample, for a reader that does not keep the samples: memory grows
/// with the number of changes, not of samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Phases {
    out: Vec<Phase>,
    samples: usize,
}

impl Phases {
    /// The next sample's verdict.
    pub fn push(&mut self, b: &Bottleneck) {
        self.samples += 1;
        let label = b.phase_label();
        match self.out.last_mut() {
            Some(p) if p.label == label => p.last = self.samples,
            _ => self.out.push(Phase {
                first: self.samples,
                last: self.samples,
                label,
            }),
        }
    }

    /// Samples pushed so far.
    pub fn samples(&self) -> usize {
        self.samples
    }

    pub fn into_phases(self) -> Vec<Phase> {
        self.out
    }
}

/// At most this many phases are listed; more are counted.
pub const PHASES_LISTED: usize = 6;

/// The sentence for a run whose bottleneck changes over its samples (`what`: `intervals`),
/// e.g. `The mean hides phases: intervals 1-30: backend_bound_memory; 31-60:
/// backend_bound_cpu.`; `None` when it never changes.
pub fn phases_text(phases: &[Phase], what: &str) -> Option<String> {
    if phases.len() < 2 {
        return None;
    }
    let span = |p: &Phase| {
        if p.first == p.last {
            p.first.to_string()
        } else {
            format!("{}-{}", p.first, p.last)
        }
    };
    let listed: Vec<String> = phases
        .iter()
        .take(PHASES_LISTED)
        .map(|p| format!("{}: {}", span(p), p.label))
        .collect();
    let more = if phases.len() > PHASES_LISTED {
        format!("; … ({} changes in all)", phases.len() - 1)
    } else {
        String::new()
    };
    Some(format!(
        "The bottleneck changes over time, which the means hide: {what} {}{more}.",
        listed.join("; ")
    ))
}

/// The threshold verdict of a node of a tree summarised over samples (the means `tma
/// report` and `tma diff` show): its threshold rule (`threshold`, as the tables write it)
/// applied to the means (`mean` gives a node's mean by name), as [`decide`] needs it. Where
/// the rule names something the summary lacks (an event, a helper metric, a constant, a
/// node without a value), the samples' verdict when every sample had the same one
/// (`above` and `below` of `samples`), else `None`.
pub fn summary_threshold(
    threshold: &str,
    mean: &dyn Fn(&str) -> Option<f64>,
    above: usize,
    below: usize,
    samples: usize,
) -> Option<bool> {
    let on_means = crate::expr::parse(threshold)
        .ok()
        .and_then(|e| eval_on(&e, mean))
        .filter(|v| v.is_finite())
        .map(|v| v != 0.0);
    on_means.or(match (above, below) {
        (a, 0) if a == samples && a > 0 => Some(true),
        (0, b) if b == samples && b > 0 => Some(false),
        _ => None,
    })
}

/// An expression over named values; `None` when a name has no value or a division is by 0.
fn eval_on(e: &Expr, get: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
    let b2f = |b: bool| if b { 1.0 } else { 0.0 };
    Some(match e {
        Expr::Num(n) => *n,
        Expr::Const(_) => return None,
        Expr::Ident(id) => get(&id.unescaped())?,
        Expr::Neg(a) => -eval_on(a, get)?,
        Expr::Bin(op, a, b) => {
            let (x, y) = (eval_on(a, get)?, eval_on(b, get)?);
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div | BinOp::Rem if y == 0.0 => return None,
                BinOp::Div => x / y,
                BinOp::Rem => x % y,
                BinOp::Lt => b2f(x < y),
                BinOp::Gt => b2f(x > y),
                BinOp::And => b2f(x != 0.0 && y != 0.0),
                BinOp::Or => b2f(x != 0.0 || y != 0.0),
                BinOp::Xor => b2f((x != 0.0) != (y != 0.0)),
            }
        }
        Expr::If {
            then,
            cond,
            otherwise,
        } => {
            if eval_on(cond, get)? != 0.0 {
                eval_on(then, get)?
            } else {
                eval_on(otherwise, get)?
            }
        }
        Expr::Call(f, a, b) => {
            let (x, y) = (eval_on(a, get)?, eval_on(b, get)?);
            match f {
                Func::Min => x.min(y),
                Func::Max => x.max(y),
                Func::DRatio if y == 0.0 => 0.0,
                Func::DRatio => x / y,
            }
        }
    })
}

/// One node of a tree summarised over samples (intervals, repeats): its mean and how its
/// samples judged its threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryNode<'a> {
    pub name: &'a str,
    pub parent: Option<&'a str>,
    pub level: u8,
    /// The mean over the samples with a value.
    pub mean: Option<f64>,
    pub percent: bool,
    /// Its threshold rule as the tables write it (empty when unknown).
    pub threshold: &'a str,
    /// Samples where it was over / under its threshold.
    pub above: usize,
    pub below: usize,
    pub locate_with: &'a [&'a str],
}

/// The verdict on the means of several samples, as `tma report` and `tma diff` show them:
/// each node's threshold verdict ([`summary_threshold`]) and the rule of this module run on
/// the means with them ([`decide`]). One sample: its own verdicts, so the result is the one
/// `tma stat` gives for that sample.
pub fn decide_summary(nodes: &[SummaryNode], samples: usize) -> (Vec<Option<bool>>, Bottleneck) {
    let mean = |name: &str| {
        nodes
            .iter()
            .find(|n| n.name.eq_ignore_ascii_case(name))
            .and_then(|n| n.mean)
    };
    let verdicts: Vec<Option<bool>> = nodes
        .iter()
        .map(|n| match (samples, n.above, n.below) {
            (1, 1, 0) => Some(true),
            (1, 0, 1) => Some(false),
            (1, _, _) => None,
            _ => summary_threshold(n.threshold, &mean, n.above, n.below, samples),
        })
        .collect();
    let tree: Vec<TreeNode> = nodes
        .iter()
        .zip(&verdicts)
        .map(|(n, v)| TreeNode {
            name: n.name,
            parent: n.parent,
            level: n.level,
            value: n.mean,
            percent: n.percent,
            above_threshold: *v,
            locate_with: n.locate_with,
        })
        .collect();
    let b = decide(&tree);
    (verdicts, b)
}
