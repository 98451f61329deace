//! One side of a diff: a `tma stat --json` document read as it is, or a recording (`perf
//! stat` CSV/JSON, `--record` snapshot) evaluated in-process by [`tma_stat::evaluate`].

use std::io::Write;
use std::path::Path;

use tma_metrics::{Bottleneck, Phase, SummaryNode};
use tma_stat::{SampleKind, StatConfig};

use crate::{DiffConfig, DiffError};
use tma_stat::render::doc::StatDoc;

/// One node or metric over a side's samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub parent: Option<String>,
    /// Tree level (0 for metrics).
    pub level: u8,
    /// `percent_slots`, `percent` or `number` (or, from documents written before schema names 2026-11, `PercentSlots`, `Percent`, `Number`), as in `tma.stat`.
    pub unit: String,
    /// The samples that have a value.
    pub values: Vec<f64>,
    /// Samples where the node was over its threshold.
    pub above: usize,
    /// Samples where it was under its threshold (the rest had no verdict).
    pub below: usize,
}

/// Everything a diff needs of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub file: String,
    pub cpu_key: String,
    pub cpu_name: String,
    /// Where the data came from (the `tma stat` source line).
    pub source: String,
    pub samples: usize,
    /// `whole`, `intervals` or `repeats` (from a `tma.stat` document: `whole` or
    /// `intervals`).
    pub sample_kind: &'static str,
    pub nodes: Vec<Series>,
    pub metrics: Vec<Series>,
    /// The bottleneck path of the tree compared (the means): `verdict.path`.
    pub bottleneck: Vec<String>,
    /// The bottleneck of the means, by the rule of `tma stat`
    /// ([`tma_metrics::decide_summary`]; one sample: its own verdict).
    pub verdict: Bottleneck,
    /// Runs of samples with the same bottleneck.
    pub phases: Vec<Phase>,
}

/// Read one side.
pub fn load(cfg: &DiffConfig, path: &Path, notes: &mut dyn Write) -> Result<Side, DiffError> {
    let file = tma_render::files::display_input(path);
    let bytes = tma_render::files::read_input(path).map_err(|source| DiffError::Read {
        file: file.clone(),
        source,
    })?;
    match tma_render::recognize(&bytes).schema() {
        Some(tma_stat::render::tree::SCHEMA) => return from_stat_json(cfg, &file, &bytes),
        Some(tma_stat::render::counts::SOFTWARE_SCHEMA) => {
            return from_software_json(&file, &bytes)
        }
        _ => {}
    }
    let stat = StatConfig {
        metrics: cfg.metrics.clone(),
        ..cfg.read.stat_config(path, &cfg.host)
    };
    let ev = tma_stat::evaluate(&stat, notes).map_err(|source| DiffError::Stat {
        file: file.clone(),
        source: Box::new(source),
    })?;
    Ok(from_evaluated(&file, ev))
}

/// Collects series in first-seen order over the samples.
#[derive(Default)]
struct Collect {
    series: Vec<Series>,
}

impl Collect {
    fn add(
        &mut self,
        name: &str,
        parent: Option<&str>,
        level: u8,
        unit: &str,
        value: Option<f64>,
        above: Option<bool>,
    ) {
        let i = match self.series.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                self.series.push(Series {
                    name: name.to_string(),
                    parent: parent.map(str::to_string),
                    level,
                    unit: unit.to_string(),
                    values: Vec::new(),
                    above: 0,
                    below: 0,
                });
                self.series.len() - 1
            }
        };
        let s = &mut self.series[i];
        if let Some(v) = value.filter(|v| v.is_finite()) {
            s.values.push(v);
        }
        s.above += usize::from(above == Some(true));
        s.below += usize::from(above == Some(false));
    }
}

/// The bottleneck of a side's means by the rule of `tma stat` (one sample: its own), and
/// its phases over the samples.
fn verdict(cpu_key: &str, nodes: &[Series], per_sample: &[Bottleneck]) -> (Bottleneck, Vec<Phase>) {
    let model = tma_catalog::models().iter().find(|m| m.key == cpu_key);
    let summary: Vec<SummaryNode> = nodes
        .iter()
        .map(|s| {
            let def = model.and_then(|m| m.node(&s.name));
            SummaryNode {
                name: &s.name,
                parent: s.parent.as_deref(),
                level: s.level,
                mean: (!s.values.is_empty())
                    .then(|| s.values.iter().sum::<f64>() / s.values.len() as f64),
                percent: tma_catalog::Unit::names_percent(&s.unit),
                threshold: def.map_or("", |d| d.threshold),
                above: s.above,
                below: s.below,
                locate_with: def.map_or(&[], |d| d.locate_with),
            }
        })
        .collect();
    let b = match per_sample {
        [one] => one.clone(),
        _ => tma_metrics::decide_summary(&summary, per_sample.len()).1,
    };
    (b, tma_metrics::phases(per_sample))
}

fn from_stat_json(cfg: &DiffConfig, file: &str, bytes: &[u8]) -> Result<Side, DiffError> {
    let found = tma_render::recognize(bytes).version().unwrap_or(0);
    if !tma_render::schema::reads_version(found, 1, tma_stat::render::tree::SCHEMA_VERSION) {
        return Err(DiffError::StatJson {
            file: file.to_string(),
            detail: format!(
                "schema_version {found} (this tma reads versions 1 to {})",
                tma_stat::render::tree::SCHEMA_VERSION
            ),
        });
    }
    // A hybrid part's output holds a document per core type (and interval): one type's.
    let doc: StatDoc =
        tma_stat::render::doc::one_tree(bytes, cfg.read.cpu.as_deref()).map_err(|e| {
            DiffError::StatJson {
                file: file.to_string(),
                detail: e.to_string(),
            }
        })?;
    let level_ok = |l: u8| cfg.read.level.is_none_or(|max| l <= max);
    let (mut nodes, mut metrics) = (Collect::default(), Collect::default());
    let mut per_sample = Vec::new();
    for iv in &doc.intervals {
        for n in iv.nodes.iter().filter(|n| level_ok(n.level)) {
            nodes.add(
                &n.name,
                n.parent.as_deref(),
                n.level,
                n.unit.name(),
                n.value,
                n.above_threshold,
            );
        }
        for m in &iv.metrics {
            metrics.add(&m.name, None, 0, m.unit.name(), m.value, None);
        }
        per_sample.push(iv.bottleneck.clone());
    }
    let (verdict, phases) = verdict(&doc.head.cpu.key, &nodes.series, &per_sample);
    Ok(Side {
        file: file.to_string(),
        cpu_key: doc.head.cpu.key,
        cpu_name: doc.head.cpu.name,
        source: doc.head.source,
        samples: doc.intervals.len(),
        sample_kind: if doc.head.interval_mode {
            "intervals"
        } else {
            "whole"
        },
        nodes: nodes.series,
        metrics: metrics.series,
        bottleneck: verdict.path.clone(),
        verdict,
        phases,
    })
}

/// The `cpu_key` of a side that has software counts and no tree: two such sides compare;
/// such a side and a tree do not ([`DiffError::CpuMismatch`] says so).
pub const SOFTWARE: &str = "software";

/// A `tma stat --json` document of a run without hardware counters: its software counts, as
/// the side's metrics (one sample for a whole run, one per interval with `-I`).
fn from_software_json(file: &str, bytes: &[u8]) -> Result<Side, DiffError> {
    use tma_stat::render::doc::{SoftwareCount, SoftwareDoc, SoftwareHead, SoftwareInterval};
    let bad = |e: serde_json::Error| DiffError::StatJson {
        file: file.to_string(),
        detail: e.to_string(),
    };
    #[derive(serde::Deserialize)]
    struct Intervals {
        #[serde(flatten)]
        head: SoftwareHead,
        intervals: Vec<SoftwareInterval>,
    }
    let found = tma_render::recognize(bytes).version().unwrap_or(0);
    let newest = tma_stat::render::counts::SOFTWARE_SCHEMA_VERSION;
    if !tma_render::schema::reads_version(found, 1, newest) {
        return Err(DiffError::StatJson {
            file: file.to_string(),
            detail: format!("schema_version {found} (this tma reads versions 1 to {newest})"),
        });
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(bad)?;
    let (target, samples): (String, Vec<Vec<SoftwareCount>>) = if value.get("intervals").is_some() {
        let d: Intervals = serde_json::from_value(value).map_err(bad)?;
        (
            d.head.target,
            d.intervals.into_iter().map(|i| i.events).collect(),
        )
    } else {
        let d: SoftwareDoc = serde_json::from_value(value).map_err(bad)?;
        (d.target, vec![d.events])
    };
    let interval_mode = samples.len() > 1;
    let mut metrics = Collect::default();
    for counts in &samples {
        for c in counts {
            let unit = if c.unit.is_empty() { "number" } else { &c.unit };
            metrics.add(&c.event, None, 0, unit, c.value, None);
        }
    }
    Ok(Side {
        file: file.to_string(),
        cpu_key: SOFTWARE.to_string(),
        cpu_name: "software counts (no hardware counters)".to_string(),
        source: format!("software counts of {target}"),
        samples: samples.len(),
        sample_kind: if interval_mode { "intervals" } else { "whole" },
        nodes: Vec::new(),
        metrics: metrics.series,
        bottleneck: Vec::new(),
        // No tree: nothing was measured to decide on.
        verdict: tma_metrics::Bottleneck {
            path: Vec::new(),
            node: None,
            stop: tma_metrics::StopReason::NotMeasured,
            close_second: None,
            locate_with: Vec::new(),
            locate_with_node: None,
            passed_over: Vec::new(),
        },
        phases: Vec::new(),
    })
}

fn from_evaluated(file: &str, ev: tma_stat::Evaluated) -> Side {
    let (mut nodes, mut metrics) = (Collect::default(), Collect::default());
    let mut per_sample = Vec::new();
    for ir in &ev.run.intervals {
        for n in &ir.report.nodes {
            nodes.add(
                n.name,
                n.parent,
                n.level,
                n.unit.name(),
                n.value,
                n.above_threshold,
            );
        }
        for m in &ir.report.metrics {
            metrics.add(m.name, None, 0, m.unit.name(), m.value, None);
        }
        per_sample.push(ir.report.bottleneck.clone());
    }
    let info = &ev.run.info;
    let (verdict, phases) = verdict(info.model.key, &nodes.series, &per_sample);
    Side {
        file: file.to_string(),
        cpu_key: info.model.key.to_string(),
        cpu_name: info.model.name.to_string(),
        source: info.source.clone(),
        samples: ev.run.intervals.len(),
        sample_kind: match ev.samples {
            SampleKind::Whole => "whole",
            SampleKind::Intervals => "intervals",
            SampleKind::Repeats => "repeats",
        },
        nodes: nodes.series,
        metrics: metrics.series,
        bottleneck: verdict.path.clone(),
        verdict,
        phases,
    }
}
