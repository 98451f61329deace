//! The `tma.stat` document: what [`super::tree`] writes with `--json` (schema
//! [`super::tree::SCHEMA`], version [`super::tree::SCHEMA_VERSION`]) and what its readers
//! (`tma diff`, `tma report`) read back, one type for both. The envelope (`schema`,
//! `schema_version`) is [`tma_render::JsonEnvelope`]'s; readers check it first
//! ([`tma_render::recognize()`]).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use tma_catalog::Unit;
use tma_metrics::Bottleneck;

/// A `tma stat --json` document, less its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatDoc {
    #[serde(flatten)]
    pub head: StatHead,
    /// The samples: intervals, repetitions, or the whole run.
    pub intervals: Vec<IntervalDoc>,
}

/// Everything before the samples (written first, the samples streaming after it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatHead {
    pub cpu: CpuDoc,
    pub source: String,
    pub interval_mode: bool,
    pub level: u8,
    pub nodes_requested: Vec<String>,
    /// Imported data: how each perf event spec was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventMapDoc>,
    /// Imported data whose every event carries one of perf's scope modifiers: its letters
    /// (`u`: the counts are of user space only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// One core type's tree of a hybrid recording: `P-core` or `E-core`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventMapDoc {
    pub perf: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuDoc {
    pub key: String,
    pub name: String,
    /// How the model was chosen.
    pub chosen: String,
    /// TMA version of the tables (`null` when the data names none).
    pub tma_version: Option<String>,
}

/// One sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalDoc {
    pub start_s: f64,
    pub end_s: f64,
    pub nodes: Vec<NodeDoc>,
    pub bottleneck: Bottleneck,
    /// `-m`, `-M` and `-B` metrics; absent without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricDoc>,
    /// The counts the values were computed from (absent where the run does not carry them,
    /// as the per-core trees of a breakdown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<CountDoc>,
}

/// One event's count in an interval: what a node's value can be recomputed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountDoc {
    /// The event id the formulas use (`TOPDOWN.SLOTS`, `ls_not_halted_cyc`, `task-clock`).
    pub event: String,
    /// The count, scaled for multiplexing (`raw * enabled / running`); time events in
    /// nanoseconds. `null` when it was not counted.
    pub value: Option<f64>,
    /// `counted`, `not_counted` or `not_supported`.
    pub status: Cow<'static, str>,
    /// Share of the time the event was really on a counter, 0..=1.
    pub counted_share: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_ns: Option<u64>,
    /// The counter group (live), or the group of this copy (a `perf stat -M` recording that
    /// counts the event more than once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeDoc {
    pub name: Cow<'static, str>,
    pub parent: Option<Cow<'static, str>>,
    pub level: u8,
    pub value: Option<f64>,
    pub unit: Unit,
    /// `ok`, `division_by_zero`, `missing_events`, `missing_constant`, `out_of_range`, `error`.
    pub status: Cow<'static, str>,
    /// Human explanation when the status is not `ok`.
    pub status_detail: Option<String>,
    pub missing_events: Vec<String>,
    pub above_threshold: Option<bool>,
    pub counted_share: Option<f64>,
    /// Whether this node is the sample's bottleneck.
    pub bottleneck: bool,
    /// The value rests on a per-thread estimate (see `tma_metrics::NodeResult::estimated`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    /// The value perf printed for this node in the imported recording, beside tma's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<crate::crosscheck::PerfCheck>,
    /// In the merged view of a hybrid part: the core types the node exists on, when not
    /// all of them (`P-core`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_on: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricDoc {
    pub name: Cow<'static, str>,
    pub short_name: Cow<'static, str>,
    pub group: Cow<'static, str>,
    /// `metric` (grouped Info view) or `bottleneck_cost` (`-B`, ranked).
    pub kind: Cow<'static, str>,
    /// Place in the `-B` ranking (1 = highest cost); absent for `metric`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    pub value: Option<f64>,
    pub unit: Unit,
    pub status: Cow<'static, str>,
    pub status_detail: Option<String>,
    pub missing_events: Vec<String>,
    pub counted_share: Option<f64>,
    pub description: Cow<'static, str>,
}

/// `tma stat --json` without hardware counters (schema `tma.stat_software`): the software
/// counts of a whole run (the mean over `--repeat` runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftwareDoc {
    pub hardware_counters: bool,
    /// What was counted: `` `cmd args` ``, `pid 1,2`, `all CPUs`...
    pub target: String,
    pub runs: usize,
    pub wall_time_s: f64,
    pub events: Vec<SoftwareCount>,
}

/// The head of `tma.stat_software` with `-I`: the intervals follow, as an array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftwareHead {
    pub hardware_counters: bool,
    pub target: String,
}

/// The software counts of one `-I` interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftwareInterval {
    pub start_s: f64,
    pub end_s: f64,
    pub events: Vec<SoftwareCount>,
}

/// One software count: clocks in milliseconds (`unit` `msec`), the others plain counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftwareCount {
    pub event: String,
    /// `null` when the event was not counted.
    pub value: Option<f64>,
    pub unit: String,
}

/// The `tma.stat` documents of `tma stat --json` output read back as one tree: the one
/// document of a run of one tree, or, for a hybrid part (one document per core type, and
/// with `-I` one per core type and interval, each head's `core_type` naming it), the
/// documents of one core type joined, its intervals in order: the type whose table is
/// `cpu` (its key), else the first. Per-thread or per-core trees (another source) are left
/// out. An error names what does not parse.
pub fn one_tree(bytes: &[u8], cpu: Option<&str>) -> Result<StatDoc, serde_json::Error> {
    one_tree_of_types(bytes, cpu).map(|(doc, _)| doc)
}

/// [`one_tree`], and the trees the documents hold: each core type's name and table key
/// (`("P-core", "adl")`, `("merged", "adl")`), in the order they first appear; empty for a
/// run of one tree. For a reader that says which tree it read.
pub fn one_tree_of_types(
    bytes: &[u8],
    cpu: Option<&str>,
) -> Result<(StatDoc, Vec<(String, String)>), serde_json::Error> {
    let mut docs = Vec::new();
    for d in serde_json::Deserializer::from_slice(bytes).into_iter::<StatDoc>() {
        docs.push(d?);
    }
    if docs.len() <= 1 || docs.iter().any(|d| d.head.core_type.is_none()) {
        // Not a hybrid run: one document (or the error reading it as one).
        return Ok((serde_json::from_slice(bytes)?, Vec::new()));
    }
    let pick = docs
        .iter()
        .position(|d| {
            Some(d.head.cpu.key.as_str()) == cpu && d.head.core_type.as_deref() != Some("merged")
        })
        .unwrap_or(0);
    let (core_type, source) = (
        docs[pick].head.core_type.clone(),
        docs[pick].head.source.clone(),
    );
    let mut types: Vec<(String, String)> = Vec::new();
    let mut out: Option<StatDoc> = None;
    for d in docs {
        let t = (
            d.head.core_type.clone().unwrap_or_default(),
            d.head.cpu.key.clone(),
        );
        if !types.contains(&t) {
            types.push(t);
        }
        if d.head.core_type != core_type || d.head.source != source {
            continue;
        }
        match out.as_mut() {
            Some(o) => o.intervals.extend(d.intervals),
            None => out = Some(d),
        }
    }
    Ok((out.expect("the picked document is kept"), types))
}
