//! The `tma.locate.tree` document: per-function counts and trees.

use serde::Serialize;
use tma_metrics::Bottleneck;

use super::layout::LayoutKind;

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
