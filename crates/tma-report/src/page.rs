//! What the page shows: one [`Section`] per input. The diff, profile and bench sections are
//! the documents `tma diff --json`, `tma locate --json` and `tma bench --json` write, read
//! through the types of the crates that write them; the stat section summarises a `tma.stat`
//! document.

use tma_bench::doc::BenchDoc;
use tma_diff::doc::{DiffDoc, ProfileDiffDoc};
use tma_metrics::{Bottleneck, Phase};
use tma_profile::hotspots::Profile;
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
    Diff(Box<Document<DiffDoc>>),
    ProfileDiff(Box<Document<ProfileDiffDoc>>),
    Locate(Box<LocateView>),
    Bench(Box<Document<BenchDoc>>),
    /// A `tma stat --regions` document.
    Regions(Box<Document<tma_regions::report::Report>>),
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
            Section::Regions(_) => "regions",
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
    /// The bottleneck of the tree shown: one sample's own, or the rule run on the means
    /// (`tma_metrics::decide_summary`), as `tma stat` and `tma diff` find it.
    pub verdict: Bottleneck,
    /// Runs of samples with the same bottleneck (one when it never changes).
    pub phases: Vec<Phase>,
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
    /// `percent_slots`, `percent` or `number` (`PercentSlots`, `Percent`, `Number` in
    /// documents written before schema names 2026-11).
    pub unit: String,
    /// The node's own threshold (the clause `Name > N` of its rule), where it has one.
    pub threshold: Option<f64>,
    /// Over its threshold: the sample's verdict, or its rule on the means
    /// (`tma_metrics::summary_threshold`); `None`: not known.
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

// ------------------------------------------------------------------ tma.diff, tma.bench

/// A document another command wrote (read through the writing crate's type: [`DiffDoc`],
/// [`ProfileDiffDoc`], [`BenchDoc`]), and the input it was read from.
#[derive(Debug, Clone)]
pub struct Document<T> {
    pub file: String,
    pub doc: T,
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
