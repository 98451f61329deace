//! Each input file, recognised by its content, read into its [`Section`].

use std::io::Write;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use tma_bench::doc::BenchDoc;
use tma_diff::doc::{DiffDoc, ProfileDiffDoc};
use tma_profile::locate::LocateConfig;
use tma_profile::report::{Profile, ReportOptions};
use tma_stat::render::plot::{own_threshold, Timeline};
use tma_stat::{Format, Input, RenderOptions, StatConfig};

use crate::model::{Document, LocateView, MetricRow, Section, StatView, TreeRow};
use crate::{HtmlError, ReportConfig};
use tma_metrics::{Bottleneck, SummaryNode};
use tma_stat::render::doc::StatDoc;

/// What an input holds, by its first bytes and its `schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `tma stat --json`.
    Stat,
    Diff,
    ProfileDiff,
    Locate,
    Bench,
    /// A perf.data file (magic `PERFILE2`).
    PerfData,
    /// A `tma stat --record` snapshot or `perf stat` output: evaluated as `tma stat --import`.
    Recording,
}

/// The envelope's version, checked before the payload is read.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    schema_version: u32,
}

/// The kind of an input's bytes; a JSON document of another kind is [`HtmlError::Unsupported`].
pub fn kind_of(file: &str, bytes: &[u8]) -> Result<Kind, HtmlError> {
    use tma_render::Recognized;
    let schema = match tma_render::recognize(bytes) {
        Recognized::PerfData => return Ok(Kind::PerfData),
        Recognized::Text => return Ok(Kind::Recording),
        Recognized::Document { schema, .. } => schema,
    };
    Ok(match schema.as_str() {
        s if s == tma_stat::render::tree::SCHEMA => Kind::Stat,
        s if s == tma_perf::snapshot::SCHEMA => Kind::Recording,
        s if s == tma_diff::render::SCHEMA => Kind::Diff,
        s if s == tma_diff::render::PROFILE_SCHEMA => Kind::ProfileDiff,
        s if s == tma_profile::render::JSON_SCHEMA => Kind::Locate,
        s if s == tma_bench::render::JSON_SCHEMA => Kind::Bench,
        _ => {
            return Err(HtmlError::Unsupported {
                file: file.to_string(),
                schema,
            })
        }
    })
}

/// Read one input into its section.
pub fn load(cfg: &ReportConfig, path: &Path, notes: &mut dyn Write) -> Result<Section, HtmlError> {
    let file = tma_render::files::display_input(path);
    let bytes = tma_render::files::read_input(path).map_err(|source| HtmlError::Read {
        file: file.clone(),
        source,
    })?;
    match kind_of(&file, &bytes)? {
        Kind::Stat => Ok(Section::Stat(Box::new(stat_view(&file, &bytes)?))),
        Kind::Recording => recording(cfg, path, &file, notes),
        Kind::Diff => {
            let doc: DiffDoc = document(
                &file,
                &bytes,
                tma_diff::render::SCHEMA,
                tma_diff::render::SCHEMA_VERSION,
            )?;
            Ok(Section::Diff(Box::new(Document { file, doc })))
        }
        Kind::ProfileDiff => {
            let doc: ProfileDiffDoc = document(
                &file,
                &bytes,
                tma_diff::render::PROFILE_SCHEMA,
                tma_diff::render::PROFILE_SCHEMA_VERSION,
            )?;
            Ok(Section::ProfileDiff(Box::new(Document { file, doc })))
        }
        Kind::Bench => {
            let doc: BenchDoc = document(
                &file,
                &bytes,
                tma_bench::render::JSON_SCHEMA,
                tma_bench::render::JSON_SCHEMA_VERSION,
            )?;
            Ok(Section::Bench(Box::new(Document { file, doc })))
        }
        Kind::Locate => {
            let doc: Profile = document(
                &file,
                &bytes,
                tma_profile::render::JSON_SCHEMA,
                tma_profile::render::JSON_SCHEMA_VERSION,
            )?;
            Ok(Section::Locate(Box::new(LocateView {
                file,
                doc,
                flame: None,
                no_flame: Some(
                    "a tma locate --json document holds no call chains; give the perf.data file \
                     (recorded with -g) for a flame graph"
                        .into(),
                ),
            })))
        }
        Kind::PerfData => perf_data(cfg, path, file),
    }
}

/// A JSON document of a known schema and version.
fn document<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
    schema: &'static str,
    version: u32,
) -> Result<T, HtmlError> {
    let head: Head = serde_json::from_slice(bytes).map_err(|e| HtmlError::Document {
        file: file.to_string(),
        schema,
        detail: e.to_string(),
    })?;
    if head.schema_version != version {
        return Err(HtmlError::Version {
            file: file.to_string(),
            schema,
            found: head.schema_version,
            expected: version,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| HtmlError::Document {
        file: file.to_string(),
        schema,
        detail: e.to_string(),
    })
}

/// A recording, evaluated as `tma stat --import` evaluates it and drawn from the `tma.stat`
/// document `tma stat --json` would write for it (one path for every tree).
fn recording(
    cfg: &ReportConfig,
    path: &Path,
    file: &str,
    notes: &mut dyn Write,
) -> Result<Section, HtmlError> {
    let stat = StatConfig {
        input: Input::Import(path.to_path_buf()),
        cpu: cfg.cpu.clone(),
        level: cfg.level.unwrap_or(1),
        nodes: cfg.nodes.clone(),
        smt: cfg.smt,
        host: cfg.host.clone(),
        ..StatConfig::default()
    };
    let stat_err = |source| match source {
        e @ tma_stat::StatError::Import { .. } => HtmlError::Unrecognized {
            file: file.to_string(),
            cause: Box::new(e),
        },
        e => HtmlError::Stat {
            file: file.to_string(),
            source: Box::new(e),
        },
    };
    let ev = tma_stat::evaluate(&stat, notes).map_err(stat_err)?;
    let mut json = Vec::new();
    let opts = RenderOptions {
        format: Format::Json,
        ..RenderOptions::default()
    };
    tma_stat::render::tree::render(&mut json, &ev.run, &opts)?;
    let mut view = stat_view(file, &json)?;
    view.file = file.to_string();
    Ok(Section::Stat(Box::new(view)))
}

/// A perf.data file, read as `tma locate --import` reads it; a flame graph when its samples
/// carry call chains.
fn perf_data(cfg: &ReportConfig, path: &Path, file: String) -> Result<Section, HtmlError> {
    let lc = LocateConfig {
        import: Some(path.to_path_buf()),
        event: cfg.event.clone(),
        symdir: cfg.symdir.clone(),
        kallsyms: cfg.kallsyms.clone(),
        report: ReportOptions::default(),
        ..LocateConfig::default()
    };
    let located =
        tma_profile::locate::run(&lc, &mut std::io::sink()).map_err(|e| HtmlError::Locate {
            file: file.clone(),
            source: Box::new(e),
        })?;
    let doc = located.profile;
    let chains = doc.stacks.iter().any(|s| s.frames.len() > 1);
    let (flame, no_flame) = if chains {
        (
            Some(crate::flame::document(&crate::flame::svg(&doc)?)),
            None,
        )
    } else {
        (
            None,
            Some("the samples carry no call chains (record with -g for a flame graph)".into()),
        )
    };
    Ok(Section::Locate(Box::new(LocateView {
        file,
        doc,
        flame,
        no_flame,
    })))
}

// ------------------------------------------------------------------ tma.stat

/// Sums over the samples of one node.
#[derive(Default)]
struct Acc {
    sum: f64,
    n: usize,
    above: usize,
    verdicts: usize,
    share: Option<f64>,
    status: Option<(String, Option<String>)>,
}

/// A `tma.stat` document: the tree (means over the samples), and the timeline when there
/// are several.
pub fn stat_view(file: &str, bytes: &[u8]) -> Result<StatView, HtmlError> {
    let found = tma_render::recognize(bytes).version().unwrap_or(0);
    if found != tma_stat::render::tree::SCHEMA_VERSION {
        return Err(HtmlError::Version {
            file: file.to_string(),
            schema: "tma.stat",
            found,
            expected: tma_stat::render::tree::SCHEMA_VERSION,
        });
    }
    let doc: StatDoc = serde_json::from_slice(bytes).map_err(|e| HtmlError::Document {
        file: file.to_string(),
        schema: "tma.stat",
        detail: e.to_string(),
    })?;
    let model = tma_catalog::models()
        .iter()
        .find(|m| m.key == doc.head.cpu.key)
        .copied();
    let mut rows: Vec<(TreeRow, Acc)> = Vec::new();
    let mut metrics: Vec<(MetricRow, f64, usize)> = Vec::new();
    let several = doc.intervals.len() > 1;
    let mut timeline = several.then(Timeline::new);
    let mut per_sample: Vec<Bottleneck> = Vec::new();
    for iv in &doc.intervals {
        for n in &iv.nodes {
            let i = match rows.iter().position(|(r, _)| r.name == n.name) {
                Some(i) => i,
                None => {
                    let def = model.and_then(|m| m.node(&n.name));
                    rows.push((
                        TreeRow {
                            name: n.name.to_string(),
                            parent: n.parent.as_deref().map(str::to_string),
                            level: n.level,
                            value: None,
                            unit: n.unit.name().into(),
                            threshold: def.and_then(|d| own_threshold(&n.name, d.threshold)),
                            above_threshold: None,
                            counted_share: None,
                            status: "ok".into(),
                            status_detail: None,
                            on_path: false,
                            bottleneck: false,
                            description: def.map(|d| d.description.to_string()).unwrap_or_default(),
                            has_children: false,
                        },
                        Acc::default(),
                    ));
                    rows.len() - 1
                }
            };
            let a = &mut rows[i].1;
            if let Some(v) = n.value.filter(|v| v.is_finite()) {
                a.sum += v;
                a.n += 1;
            }
            if let Some(b) = n.above_threshold {
                a.verdicts += 1;
                a.above += usize::from(b);
            }
            if let Some(s) = n.counted_share {
                a.share = Some(a.share.map_or(s, |m: f64| m.min(s)));
            }
            if n.status != "ok" {
                a.status = Some((n.status.to_string(), n.status_detail.clone()));
            }
        }
        for m in &iv.metrics {
            let i = match metrics.iter().position(|(r, _, _)| r.name == m.name) {
                Some(i) => i,
                None => {
                    metrics.push((
                        MetricRow {
                            name: m.name.to_string(),
                            value: None,
                            unit: m.unit.name().into(),
                            description: m.description.to_string(),
                        },
                        0.0,
                        0,
                    ));
                    metrics.len() - 1
                }
            };
            if let Some(v) = m.value.filter(|v| v.is_finite()) {
                metrics[i].1 += v;
                metrics[i].2 += 1;
            }
        }
        if let Some(t) = timeline.as_mut() {
            t.push(
                iv.start_s,
                iv.end_s,
                iv.nodes
                    .iter()
                    .map(|n| (&*n.name, n.parent.as_deref(), n.level, n.value)),
                &iv.bottleneck.path,
            );
        }
        per_sample.push(iv.bottleneck.clone());
    }
    // The verdict of the tree shown (the means), by the rule every command uses.
    let summary: Vec<SummaryNode> = rows
        .iter()
        .map(|(r, a)| {
            let def = model.and_then(|m| m.node(&r.name));
            SummaryNode {
                name: &r.name,
                parent: r.parent.as_deref(),
                level: r.level,
                mean: (a.n > 0).then(|| a.sum / a.n as f64),
                percent: r.unit.starts_with("Percent"),
                threshold: def.map_or("", |d| d.threshold),
                above: a.above,
                below: a.verdicts - a.above,
                locate_with: def.map_or(&[], |d| d.locate_with),
            }
        })
        .collect();
    let (verdicts, verdict) = match doc.intervals.as_slice() {
        // One sample: its own verdict, exactly as `tma stat` printed it.
        [one] => (
            summary
                .iter()
                .map(|n| node_verdict(n.above, n.below))
                .collect(),
            one.bottleneck.clone(),
        ),
        _ => tma_metrics::decide_summary(&summary, doc.intervals.len()),
    };
    let names: Vec<Option<String>> = rows.iter().map(|(r, _)| r.parent.clone()).collect();
    let rows: Vec<TreeRow> = rows
        .into_iter()
        .zip(verdicts)
        .map(|((mut r, a), above)| {
            r.value = (a.n > 0).then(|| a.sum / a.n as f64);
            r.above_threshold = above;
            r.counted_share = a.share;
            if a.n == 0 {
                if let Some((s, d)) = a.status {
                    r.status = s;
                    r.status_detail = d;
                }
            } else if let Some((s, d)) = a.status.filter(|(s, _)| s == "out_of_range") {
                r.status = s;
                r.status_detail = d;
            }
            r.on_path = verdict.path.iter().any(|b| b == &r.name);
            r.bottleneck = verdict.node.as_deref() == Some(&r.name);
            r.has_children = names.iter().any(|p| {
                p.as_deref()
                    .is_some_and(|p| p.eq_ignore_ascii_case(&r.name))
            });
            r
        })
        .collect();
    Ok(StatView {
        file: file.to_string(),
        cpu_key: doc.head.cpu.key,
        cpu_name: doc.head.cpu.name,
        source: doc.head.source,
        interval_mode: doc.head.interval_mode,
        samples: doc.intervals.len(),
        rows,
        metrics: metrics
            .into_iter()
            .map(|(mut m, sum, n)| {
                m.value = (n > 0).then(|| sum / n as f64);
                m
            })
            .collect(),
        phases: tma_metrics::phases(&per_sample),
        verdict,
        timeline,
    })
}

/// One sample's threshold verdict from its counts.
fn node_verdict(above: usize, below: usize) -> Option<bool> {
    match (above, below) {
        (1, 0) => Some(true),
        (0, 1) => Some(false),
        _ => None,
    }
}
