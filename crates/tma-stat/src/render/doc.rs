//! The `tma.stat` document as its readers see it (`tma diff`, `tma report`): the fields they
//! use of what [`super::tree`] writes with `--json`, one read model for both.

use serde::Deserialize;

/// A `tma stat --json` document (schema [`super::tree::SCHEMA`]).
#[derive(Debug, Deserialize)]
pub struct StatDoc {
    pub schema_version: u32,
    pub cpu: CpuDoc,
    pub source: String,
    pub interval_mode: bool,
    pub intervals: Vec<IntervalDoc>,
}

#[derive(Debug, Deserialize)]
pub struct CpuDoc {
    pub key: String,
    pub name: String,
}

/// One sample: an interval, a repetition, or the whole run.
#[derive(Debug, Deserialize)]
pub struct IntervalDoc {
    pub start_s: f64,
    pub end_s: f64,
    pub nodes: Vec<NodeDoc>,
    pub bottleneck: BottleneckDoc,
    #[serde(default)]
    pub metrics: Vec<MetricDoc>,
}

#[derive(Debug, Deserialize)]
pub struct NodeDoc {
    pub name: String,
    #[serde(default)]
    pub parent: Option<String>,
    pub level: u8,
    pub value: Option<f64>,
    pub unit: String,
    pub status: String,
    #[serde(default)]
    pub status_detail: Option<String>,
    #[serde(default)]
    pub above_threshold: Option<bool>,
    #[serde(default)]
    pub counted_share: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct MetricDoc {
    pub name: String,
    pub value: Option<f64>,
    pub unit: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Deserialize)]
pub struct BottleneckDoc {
    pub path: Vec<String>,
}
