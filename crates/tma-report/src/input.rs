//! Each input file, recognised by its content, read into its [`Section`].

use std::io::Write;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use tma_bench::doc::BenchDoc;
use tma_diff::doc::{DiffDoc, ProfileDiffDoc};
use tma_profile::hotspots::{Profile, ReportOptions};
use tma_profile::locate::LocateConfig;
use tma_stat::render::plot::{own_threshold, Timeline};
use tma_stat::StatConfig;

use crate::page::{Document, LocateView, MetricRow, Section, StatView, TreeRow};
use crate::{ReportConfig, ReportError};
use tma_metrics::{Bottleneck, SummaryNode};
use tma_stat::render::doc::{IntervalDoc, StatHead};

/// What an input holds, by its first bytes and its `schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `tma stat --json`.
    Stat,
    Diff,
    ProfileDiff,
    Locate,
    Bench,
    /// `tma stat --regions --json`.
    Regions,
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

/// The kind of an input's bytes; a JSON document of another kind is [`ReportError::Unsupported`].
pub fn kind_of(file: &str, bytes: &[u8]) -> Result<Kind, ReportError> {
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
        s if s == tma_regions::report::SCHEMA => Kind::Regions,
        _ => {
            return Err(ReportError::Unsupported {
                file: file.to_string(),
                schema,
            })
        }
    })
}

/// Read one input into its section.
pub fn load(
    cfg: &ReportConfig,
    path: &Path,
    notes: &mut dyn Write,
) -> Result<Section, ReportError> {
    let file = tma_render::files::display_input(path);
    let read = |whole: bool| {
        if whole {
            tma_render::files::read_input(path)
        } else {
            tma_render::files::read_input_head(path, 64 * 1024)
        }
        .map_err(|source| ReportError::Read {
            file: file.clone(),
            source,
        })
    };
    // What it holds, from its start: a recording is then read by the pipeline, which streams
    // it; only the documents are read whole.
    let kind = kind_of(&file, &read(false)?)?;
    let bytes = match kind {
        Kind::Recording | Kind::PerfData => Vec::new(),
        _ => read(true)?,
    };
    match kind {
        Kind::Stat => Ok(Section::Stat(Box::new(stat_view(
            &file,
            &bytes,
            cfg.read.cpu.as_deref(),
            notes,
        )?))),
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
        Kind::Regions => regions(&file, &bytes, notes),
    }
}

/// A `tma.stat.regions` document; a file of several (runs written one after the other, as
/// `tma diff` reads them) draws the first.
fn regions(file: &str, bytes: &[u8], notes: &mut dyn Write) -> Result<Section, ReportError> {
    let schema = tma_regions::report::SCHEMA;
    let mut docs = serde_json::Deserializer::from_slice(bytes).into_iter::<serde_json::Value>();
    let first = docs
        .next()
        .transpose()
        .map_err(|e| ReportError::Document {
            file: file.to_string(),
            schema,
            detail: e.to_string(),
        })?
        .unwrap_or_default();
    let first = serde_json::to_vec(&first).map_err(|e| ReportError::Template(e.to_string()))?;
    let doc: tma_regions::report::Report =
        document(file, &first, schema, tma_regions::report::SCHEMA_VERSION)?;
    let more = docs.count();
    if more > 0 {
        writeln!(
            notes,
            "tma: {file} holds {} region documents (runs): the page draws the first",
            more + 1
        )?;
    }
    Ok(Section::Regions(Box::new(Document {
        file: file.to_string(),
        doc,
    })))
}

/// A JSON document of a known schema and version.
fn document<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
    schema: &'static str,
    version: u32,
) -> Result<T, ReportError> {
    let head: Head = serde_json::from_slice(bytes).map_err(|e| ReportError::Document {
        file: file.to_string(),
        schema,
        detail: e.to_string(),
    })?;
    if !tma_render::schema::reads_version(head.schema_version, 1, version) {
        return Err(ReportError::Version {
            file: file.to_string(),
            schema,
            found: head.schema_version,
            expected: version,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| ReportError::Document {
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
) -> Result<Section, ReportError> {
    let stat = cfg.read.stat_config(path, &cfg.host);
    let stat_err = |source| match source {
        e @ tma_stat::StatError::Import { .. } => ReportError::Unrecognized {
            file: file.to_string(),
            cause: Box::new(e),
        },
        e => ReportError::Stat {
            file: file.to_string(),
            source: Box::new(e),
        },
    };
    // The one pipeline, read interval by interval into the view: a recording of any length
    // costs the tree, the bounded timeline and the phases, never all its intervals.
    let stat = StatConfig {
        one_tree: true,
        ..stat
    };
    let mut sink = ViewSink {
        file,
        info: None,
        builder: None,
    };
    tma_stat::run(&stat, &mut sink, notes).map_err(stat_err)?;
    let builder = sink.builder.ok_or_else(|| ReportError::Stat {
        file: file.to_string(),
        source: Box::new(tma_stat::StatError::Usage(
            "the recording gave no tree to draw".into(),
        )),
    })?;
    Ok(Section::Stat(Box::new(builder.finish())))
}

/// The sink `tma report` reads a recording through: each interval's document (the one `tma
/// stat --json` writes) goes into a [`StatViewBuilder`]; a snapshot of `--repeat` runs
/// gives its runs as the samples, as `tma stat --import` evaluates it.
struct ViewSink<'f> {
    file: &'f str,
    info: Option<tma_stat::RunInfo>,
    builder: Option<StatViewBuilder>,
}

impl tma_stat::IntervalSink for ViewSink<'_> {
    fn start(&mut self, start: tma_stat::sink::Start<'_>) -> Result<(), tma_stat::StatError> {
        use tma_stat::sink::Start;
        match start {
            Start::Software { .. } => Err(tma_stat::StatError::Usage(
                "the recording holds software counts only (no hardware counters where it was \
                 recorded): there is no TMA tree to draw"
                    .into(),
            )),
            Start::Tree { .. } if self.info.is_some() => Err(tma_stat::StatError::Usage(
                "the recording is a --drilldown run (one partial tree per step): record with \
                 -l N for one whole tree to draw"
                    .into(),
            )),
            Start::Tree { info, .. } => {
                self.builder = Some(StatViewBuilder::new(
                    self.file,
                    tma_stat::render::tree::head_doc(info),
                ));
                self.info = Some(info.clone());
                Ok(())
            }
        }
    }

    fn interval(
        &mut self,
        iv: tma_stat::sink::IntervalData<'_>,
    ) -> Result<(), tma_stat::StatError> {
        if let (Some(info), Some(b), Some(ir)) = (&self.info, self.builder.as_mut(), iv.report) {
            b.push(&tma_stat::render::tree::interval_doc(
                info,
                ir,
                Some(iv.readings),
            ));
        }
        Ok(())
    }

    fn finish(&mut self, end: tma_stat::sink::Finish<'_>) -> Result<(), tma_stat::StatError> {
        use tma_stat::sink::Finish;
        if let Finish::Tree {
            info,
            whole: Some(w),
        } = end
        {
            if !w.parts.is_empty() {
                return Err(tma_stat::StatError::Usage(
                    "the recording is a --per-core/--per-thread run: record without them to \
                     draw one whole tree"
                        .into(),
                ));
            }
            if let Some(runs) = w.repeats {
                // `--repeat N`: the samples are the runs (the intervals were their mean).
                let mut b = StatViewBuilder::new(self.file, tma_stat::render::tree::head_doc(info));
                for ir in &runs.intervals {
                    b.push(&tma_stat::render::tree::interval_doc(&runs.info, ir, None));
                }
                self.builder = Some(b);
            }
        }
        Ok(())
    }
}

/// A perf.data file, read as `tma locate --import` reads it; a flame graph when its samples
/// carry call chains.
fn perf_data(cfg: &ReportConfig, path: &Path, file: String) -> Result<Section, ReportError> {
    // A group recording (`perf record -e '{…}:S'`) with --cpu: the per-function trees, whose
    // dominant level-1 nodes colour the flame graph (the TMA flame graph).
    let groups =
        cfg.read.cpu.is_some() && tma_profile::import::file_has_read_groups(path).unwrap_or(false);
    let lc = LocateConfig {
        import: Some(path.to_path_buf()),
        event: cfg.event.clone(),
        symdir: cfg.symdir.clone(),
        kallsyms: cfg.kallsyms.clone(),
        report: ReportOptions::default(),
        cpu: cfg.read.cpu.clone(),
        tree: groups.then_some(cfg.read.level.unwrap_or(1).clamp(1, 2)),
        ..LocateConfig::default()
    };
    let located = match tma_profile::locate::run(&lc, &mut std::io::sink()) {
        Ok(l) => Ok(l),
        // The trees could not be formed (events of another CPU's tables): the profile
        // without them, drawn in plain colours, as for any recording.
        Err(_) if groups => {
            tma_profile::locate::run(&LocateConfig { tree: None, ..lc }, &mut std::io::sink())
        }
        Err(e) => Err(e),
    }
    .map_err(|e| ReportError::Locate {
        file: file.clone(),
        source: Box::new(e),
    })?;
    let doc = located.profile;
    let chains = doc.stacks.iter().any(|s| s.frames.len() > 1);
    let (flame, no_flame) = if chains {
        let svg = match located.dominant.as_ref() {
            Some(d) => crate::flame::tma_svg(&doc, Some(d))?,
            None => crate::flame::svg(&doc)?,
        };
        (Some(crate::flame::document(&svg)), None)
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
/// are several. The intervals are read one at a time into a [`StatViewBuilder`], never held
/// all at once, so a long run costs what its tree and its bounded timeline cost.
///
/// The `tma stat --json` output of a hybrid part (a document per core type) gives one core
/// type's tree: the one whose table `cpu` names, else the first; `notes` says which, and
/// what else the file holds.
pub fn stat_view(
    file: &str,
    bytes: &[u8],
    cpu: Option<&str>,
    notes: &mut dyn Write,
) -> Result<StatView, ReportError> {
    let found = tma_render::recognize(bytes).version().unwrap_or(0);
    if !tma_render::schema::reads_version(found, 1, tma_stat::render::tree::SCHEMA_VERSION) {
        return Err(ReportError::Version {
            file: file.to_string(),
            schema: "tma.stat",
            found,
            expected: tma_stat::render::tree::SCHEMA_VERSION,
        });
    }
    let bad = |detail: String| ReportError::Document {
        file: file.to_string(),
        schema: "tma.stat",
        detail,
    };
    let mut builder: Option<StatViewBuilder> = None;
    let mut head_fields = serde_json::Map::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde::Deserializer::deserialize_map(
        &mut de,
        StatDocVisitor {
            file,
            head_fields: &mut head_fields,
            builder: &mut builder,
        },
    )
    .map_err(|e| bad(e.to_string()))?;
    if let Err(e) = de.end() {
        // A hybrid part's output: a document per core type (and interval).
        let (doc, types) =
            tma_stat::render::doc::one_tree_of_types(bytes, cpu).map_err(|_| bad(e.to_string()))?;
        if types.len() > 1 {
            let drawn = doc.head.core_type.clone().unwrap_or_default();
            let others: Vec<String> = types
                .iter()
                .filter(|(t, _)| *t != drawn)
                .map(|(t, key)| match t.as_str() {
                    "merged" => "the merged view".to_string(),
                    _ => format!("{t} (--cpu {key})"),
                })
                .collect();
            writeln!(
                notes,
                "tma: note: {file} holds the trees of a hybrid part; this report draws the \
                 {drawn} tree ({}); also there: {}",
                doc.head.cpu.key,
                others.join(", ")
            )?;
        }
        let mut b = StatViewBuilder::new(file, doc.head);
        for iv in &doc.intervals {
            b.push(iv);
        }
        return Ok(b.finish());
    }
    let builder = match builder {
        Some(b) => b,
        // A document without intervals: its head still names the CPU.
        None => StatViewBuilder::new(file, head_from(head_fields).map_err(bad)?),
    };
    Ok(builder.finish())
}

fn head_from(fields: serde_json::Map<String, serde_json::Value>) -> Result<StatHead, String> {
    serde_json::from_value(serde_json::Value::Object(fields)).map_err(|e| e.to_string())
}

/// Reads a `tma.stat` document's top level: the head's fields (the envelope writes them
/// before `intervals`), then the intervals one by one into the builder.
struct StatDocVisitor<'a> {
    file: &'a str,
    head_fields: &'a mut serde_json::Map<String, serde_json::Value>,
    builder: &'a mut Option<StatViewBuilder>,
}

impl<'de> serde::de::Visitor<'de> for StatDocVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a tma.stat document")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::Error;
        while let Some(key) = map.next_key::<String>()? {
            if key == "intervals" {
                let head = head_from(std::mem::take(self.head_fields)).map_err(A::Error::custom)?;
                let mut b = StatViewBuilder::new(self.file, head);
                map.next_value_seed(IntervalsSeed(&mut b))?;
                *self.builder = Some(b);
            } else if self.builder.is_none() {
                let v: serde_json::Value = map.next_value()?;
                self.head_fields.insert(key, v);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The `intervals` array, pushed into the builder element by element.
struct IntervalsSeed<'b>(&'b mut StatViewBuilder);

impl<'de> serde::de::DeserializeSeed<'de> for IntervalsSeed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for IntervalsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of intervals")
    }

    fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        while let Some(iv) = seq.next_element::<IntervalDoc>()? {
            self.0.push(&iv);
        }
        Ok(())
    }
}

/// The view of a stat run, built interval by interval: sums per node and metric, the
/// bounded timeline, and the bottleneck phases (which grow with the changes, not the
/// intervals).
pub struct StatViewBuilder {
    file: String,
    head: StatHead,
    model: Option<&'static tma_catalog::Model>,
    rows: Vec<(TreeRow, Acc)>,
    metrics: Vec<(MetricRow, f64, usize)>,
    timeline: Timeline,
    phases: tma_metrics::Phases,
    /// The first sample's verdict (a one-sample view shows it as `tma stat` printed it).
    first: Option<Bottleneck>,
}

impl StatViewBuilder {
    pub fn new(file: &str, head: StatHead) -> StatViewBuilder {
        let model = tma_catalog::models()
            .iter()
            .find(|m| m.key == head.cpu.key)
            .copied();
        StatViewBuilder {
            file: file.to_string(),
            head,
            model,
            rows: Vec::new(),
            metrics: Vec::new(),
            timeline: Timeline::new(),
            phases: tma_metrics::Phases::default(),
            first: None,
        }
    }

    /// The next sample.
    pub fn push(&mut self, iv: &IntervalDoc) {
        let model = self.model;
        for n in &iv.nodes {
            let i = match self.rows.iter().position(|(r, _)| r.name == n.name) {
                Some(i) => i,
                None => {
                    let def = model.and_then(|m| m.node(&n.name));
                    self.rows.push((
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
                    self.rows.len() - 1
                }
            };
            let a = &mut self.rows[i].1;
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
            let i = match self.metrics.iter().position(|(r, _, _)| r.name == m.name) {
                Some(i) => i,
                None => {
                    self.metrics.push((
                        MetricRow {
                            name: m.name.to_string(),
                            value: None,
                            unit: m.unit.name().into(),
                            description: m.description.to_string(),
                        },
                        0.0,
                        0,
                    ));
                    self.metrics.len() - 1
                }
            };
            if let Some(v) = m.value.filter(|v| v.is_finite()) {
                self.metrics[i].1 += v;
                self.metrics[i].2 += 1;
            }
        }
        self.timeline.push(
            iv.start_s,
            iv.end_s,
            iv.nodes
                .iter()
                .map(|n| (&*n.name, n.parent.as_deref(), n.level, n.value)),
            &iv.bottleneck.path,
        );
        if self.first.is_none() {
            self.first = Some(iv.bottleneck.clone());
        }
        self.phases.push(&iv.bottleneck);
    }

    /// The view: the means, the verdict on them, the phases and (several samples) the
    /// timeline.
    pub fn finish(self) -> StatView {
        let model = self.model;
        let samples = self.phases.samples();
        let rows = self.rows;
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
                    percent: tma_catalog::Unit::names_percent(&r.unit),
                    threshold: def.map_or("", |d| d.threshold),
                    above: a.above,
                    below: a.verdicts - a.above,
                    locate_with: def.map_or(&[], |d| d.locate_with),
                }
            })
            .collect();
        let (verdicts, verdict) = match (samples, self.first) {
            // One sample: its own verdict, exactly as `tma stat` printed it.
            (1, Some(one)) => (
                summary
                    .iter()
                    .map(|n| node_verdict(n.above, n.below))
                    .collect(),
                one,
            ),
            _ => tma_metrics::decide_summary(&summary, samples),
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
        StatView {
            file: self.file,
            cpu_key: self.head.cpu.key,
            cpu_name: self.head.cpu.name,
            source: self.head.source,
            interval_mode: self.head.interval_mode,
            samples,
            rows,
            metrics: self
                .metrics
                .into_iter()
                .map(|(mut m, sum, n)| {
                    m.value = (n > 0).then(|| sum / n as f64);
                    m
                })
                .collect(),
            phases: self.phases.into_phases(),
            verdict,
            timeline: (samples > 1).then_some(self.timeline),
        }
    }
}

/// One sample's threshold verdict from its counts.
fn node_verdict(above: usize, below: usize) -> Option<bool> {
    match (above, below) {
        (1, 0) => Some(true),
        (0, 1) => Some(false),
        _ => None,
    }
}
