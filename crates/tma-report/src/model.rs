//! What the page shows: one [`Section`] per input. The diff, profile and bench sections are
//! the documents `tma diff --json`, `tma locate --json` and `tma bench --json` write, read
//! back with the fields the page draws; the stat section summarises a `tma.stat` document.

use serde::Deserialize;
use tma_profile::report::Profile;
use tma_stat::render::plot::Timeline;

/// The whole page.
#[derive(Debug, Clone)]
pub struct Report {
    pub title: String,
    pub sections: Vec<Section>,
}

/// One input's part of the page.
#[derive(Debug, Clone)]
pub enum Section {
    Stat(Box<StatView>),
    Diff(Box<DiffDoc>),
    ProfileDiff(Box<ProfileDiffDoc>),
    Locate(Box<LocateView>),
    Bench(Box<BenchDoc>),
}

impl Section {
    /// What kind of input this was, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Section::Stat(s) if s.timeline.is_some() => "intervals",
            Section::Stat(_) => "tree",
            Section::Diff(_) => "diff",
            Section::ProfileDiff(_) => "profile diff",
            Section::Locate(_) => "profile",
            Section::Bench(_) => "bench",
        }
    }
}

/// A TMA tree (one sample), or the mean tree and timeline of several.
#[derive(Debug, Clone)]
pub struct StatView {
    pub file: String,
    pub cpu_key: String,
    pub cpu_name: String,
    pub source: String,
    pub interval_mode: bool,
    /// Samples in the document (intervals, or 1).
    pub samples: usize,
    /// The tree: the sample's values, or their means over the samples.
    pub rows: Vec<TreeRow>,
    /// Helper metrics (`-m`), means over the samples.
    pub metrics: Vec<MetricRow>,
    /// The bottleneck path most samples named.
    pub bottleneck: Vec<String>,
    /// The values over time, when there are several samples.
    pub timeline: Option<Timeline>,
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    pub name: String,
    pub parent: Option<String>,
    pub level: u8,
    /// The mean over the samples with a value.
    pub value: Option<f64>,
    /// `PercentSlots`, `Percent` or `Number`.
    pub unit: String,
    /// The node's own threshold (the clause `Name > N` of its rule), where it has one.
    pub threshold: Option<f64>,
    /// Over its threshold in most samples (`None`: no verdict in any sample).
    pub above_threshold: Option<bool>,
    /// The smallest share of the time its events were counted.
    pub counted_share: Option<f64>,
    /// `ok`, or the status of the last sample without a value.
    pub status: String,
    pub status_detail: Option<String>,
    /// On the bottleneck path / the bottleneck itself.
    pub on_path: bool,
    pub bottleneck: bool,
    /// One line from the tables (empty when the model is unknown).
    pub description: String,
    /// Whether any node names this one as its parent.
    pub has_children: bool,
}

/// One helper metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    pub name: String,
    pub value: Option<f64>,
    pub unit: String,
    pub description: String,
}

// ------------------------------------------------------------------ tma.diff

/// A `tma.diff` document.
#[derive(Debug, Clone, Deserialize)]
pub struct DiffDoc {
    #[serde(skip)]
    pub file: String,
    pub before: DiffSide,
    pub after: DiffSide,
    pub significance: DiffTest,
    pub nodes: Vec<DiffRow>,
    #[serde(default)]
    pub metrics: Vec<DiffRow>,
    pub bottleneck: DiffBottleneck,
    #[serde(default)]
    pub gates: Vec<DiffGate>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DiffSide {
    pub file: String,
    pub cpu: DiffCpu,
    pub source: String,
    pub samples: usize,
    pub sample_kind: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DiffCpu {
    pub key: String,
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DiffTest {
    pub test: String,
    pub alpha: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DiffRow {
    pub name: String,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub level: u8,
    pub unit: String,
    pub before: Option<DiffSummary>,
    pub after: Option<DiffSummary>,
    pub delta: Option<f64>,
    pub relative: Option<f64>,
    pub welch: Option<DiffWelch>,
    pub significance: DiffSignificance,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct DiffSummary {
    pub n: usize,
    pub mean: f64,
    pub sd: Option<f64>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct DiffWelch {
    pub t: f64,
    pub df: f64,
    pub p: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DiffSignificance {
    /// `significant`, `not_significant` or `unknown`.
    pub verdict: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DiffBottleneck {
    pub text: String,
    #[serde(default)]
    pub verdict: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DiffGate {
    #[serde(default)]
    pub tripped: bool,
    #[serde(default)]
    pub reason: String,
}

// ------------------------------------------------------------------ tma.diff-profile

/// A `tma.diff-profile` document.
#[derive(Debug, Clone, Deserialize)]
pub struct ProfileDiffDoc {
    #[serde(skip)]
    pub file: String,
    pub before: ProfileDiffSide,
    pub after: ProfileDiffSide,
    pub functions: Vec<ProfileDiffRow>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProfileDiffSide {
    pub file: String,
    pub event: String,
    pub samples: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProfileDiffRow {
    pub function: String,
    pub module: String,
    pub before_percent: f64,
    pub after_percent: f64,
    pub delta: f64,
}

// ------------------------------------------------------------------ tma.locate

/// A profile: a `tma.locate` document, or a perf.data file read as `tma locate` reads it.
#[derive(Debug, Clone)]
pub struct LocateView {
    pub file: String,
    pub doc: Profile,
    /// The flame graph (an HTML document holding its SVG), when call chains were recorded.
    pub flame: Option<String>,
    /// Why there is no flame graph.
    pub no_flame: Option<String>,
}

// ------------------------------------------------------------------ tma.bench

/// A `tma.bench` document (the fields the tables show; the rest is ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct BenchDoc {
    #[serde(skip)]
    pub file: String,
    pub forms: Vec<BenchForm>,
    #[serde(default)]
    pub errors: Vec<BenchInputError>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchForm {
    pub input: String,
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub latency: Vec<BenchPair>,
    #[serde(default)]
    pub throughput: Option<BenchThroughput>,
    #[serde(default)]
    pub throughput_note: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchPair {
    pub pair: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub figures: Vec<BenchFigure>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchThroughput {
    #[serde(default)]
    pub best: Vec<BenchFigure>,
    #[serde(default)]
    pub best_chains: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchFigure {
    pub clock: serde_json::Value,
    pub median: f64,
    #[serde(default)]
    pub p10: f64,
    #[serde(default)]
    pub p90: f64,
    /// `false`: the repetitions did not agree, so the median is no claim (absent in older
    /// documents: taken as converged).
    #[serde(default)]
    pub converged: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchInputError {
    pub input: String,
    pub error: String,
}
