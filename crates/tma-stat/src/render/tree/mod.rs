//! The TMA tree of `tma stat` as text, JSON (`tma.stat` v1) and CSV, written one interval at
//! a time ([`TreeWriter`]), so live runs print as they count and a long import streams from
//! input to output. [`render`] writes a whole [`StatRun`].

mod compact;
mod csv;
mod facts;
mod json;
mod options;
mod summary;
mod text;
mod trees;

use compact::*;
use csv::*;
use json::*;
use summary::RunSummary;
use text::*;
pub use trees::TreesWriter;

pub use facts::{bars, metric_status_text, status_text, tree_name, tree_title};
pub use options::{Format, RenderOptions, SCHEMA, SCHEMA_VERSION};

use std::io::Write;

use tma_render::{JsonStream, OutputError};

use crate::eval::{IntervalReport, RunInfo, StatRun};
use crate::render::doc::{IntervalDoc, StatHead};
use crate::render::plot::{tree_svg, Bar, Timeline};

/// The head of the `tma.stat` document of a run (what [`TreeWriter`] writes before the
/// intervals), for consumers that read a run interval by interval without the JSON.
pub fn head_doc(info: &RunInfo) -> StatHead {
    json_head(info)
}

/// One interval of the `tma.stat` document, as [`TreeWriter`] writes it (`readings`: the
/// counts it was computed from, when known).
pub fn interval_doc(
    info: &RunInfo,
    ir: &IntervalReport,
    readings: Option<&tma_perf::Interval>,
) -> IntervalDoc {
    json_interval(info, ir, readings)
}

/// Write a whole run.
pub fn render(w: &mut dyn Write, run: &StatRun, opts: &RenderOptions) -> Result<(), OutputError> {
    let mut t = TreeWriter::new(opts.clone());
    t.begin(w, &run.info)?;
    for ir in &run.intervals {
        t.interval(w, &run.info, ir)?;
    }
    t.end(w, &run.info)
}

/// Writes a run interval by interval: [`TreeWriter::begin`], then
/// [`TreeWriter::interval`] for each, then [`TreeWriter::end`]. The bytes equal what
/// [`render`] writes for the same run.
#[derive(Debug)]
pub struct TreeWriter {
    opts: RenderOptions,
    count: usize,
    json: Option<JsonStream>,
    /// `--compact`: the level-1 and metric columns, fixed by the first interval.
    columns: Vec<CompactColumn>,
    /// `--plot`: the intervals so far (bounded, see [`Timeline`]) and the last tree's bars.
    timeline: Option<Timeline>,
    last_bars: Vec<Bar>,
    /// Text of interval data: the intervals so far, for the closing lines at the end.
    summary: RunSummary,
}

impl TreeWriter {
    pub fn new(opts: RenderOptions) -> TreeWriter {
        let timeline = opts.plot.as_ref().map(|_| Timeline::new());
        TreeWriter {
            opts,
            count: 0,
            json: None,
            columns: Vec::new(),
            timeline,
            last_bars: Vec::new(),
            summary: RunSummary::default(),
        }
    }

    /// Intervals written so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The header: text lines, the JSON envelope, or the CSV header row.
    pub fn begin(&mut self, w: &mut dyn Write, info: &RunInfo) -> Result<(), OutputError> {
        match self.opts.format {
            Format::Text => text_header(w, info),
            Format::Csv => csv_header(w, info),
            Format::Json => {
                self.json = Some(JsonStream::begin(
                    w,
                    SCHEMA,
                    SCHEMA_VERSION,
                    &json_head(info),
                    "intervals",
                )?);
                Ok(())
            }
        }
    }

    /// One interval.
    pub fn interval(
        &mut self,
        w: &mut dyn Write,
        info: &RunInfo,
        ir: &IntervalReport,
    ) -> Result<(), OutputError> {
        self.interval_with_counts(w, info, ir, None)
    }

    /// One interval, with the counts its values were computed from (JSON and CSV carry
    /// them).
    pub fn interval_with_counts(
        &mut self,
        w: &mut dyn Write,
        info: &RunInfo,
        ir: &IntervalReport,
        readings: Option<&tma_perf::Interval>,
    ) -> Result<(), OutputError> {
        match self.opts.format {
            Format::Text if info.interval_mode && self.opts.compact => {
                if self.count == 0 {
                    self.columns = compact_columns(ir);
                    compact_header(w, &self.columns)?;
                }
                compact_line(w, &self.columns, ir)?;
            }
            Format::Text => {
                writeln!(w)?;
                if info.interval_mode {
                    // One core type's tree of a hybrid part says which.
                    let of = tree_name(info)
                        .map(|n| format!(", {n}"))
                        .unwrap_or_default();
                    writeln!(
                        w,
                        "--- interval {:.3} s .. {:.3} s{of} ---",
                        ir.start_s, ir.end_s
                    )?;
                }
                render_tree(w, info, ir, &self.opts)?;
                if info.interval_mode {
                    self.summary.push(ir);
                }
            }
            Format::Csv => csv_rows(w, info, ir, readings)?,
            Format::Json => {
                if let Some(j) = self.json.as_mut() {
                    j.item(w, &json_interval(info, ir, readings))?;
                }
            }
        }
        if let Some(t) = self.timeline.as_mut() {
            t.push_report(ir);
            self.last_bars = bars(info, ir, self.opts.verbose);
        }
        self.count += 1;
        Ok(())
    }

    /// Whatever closes the document (the closing lines of an interval run's text, the JSON
    /// brackets), and the `--plot` file.
    pub fn end(&mut self, w: &mut dyn Write, info: &RunInfo) -> Result<(), OutputError> {
        self.summary.write(w, info)?;
        if let Some(j) = self.json.take() {
            j.end(w)?;
        }
        if let (Some(path), Some(t)) = (self.opts.plot.as_deref(), self.timeline.as_ref()) {
            let svg = if info.interval_mode {
                t.svg()
            } else {
                tree_svg(&tree_title(info), &self.last_bars)
            };
            let svg = svg.map_err(|e| OutputError::Output {
                path: path.display().to_string(),
                source: std::io::Error::other(e),
            })?;
            tma_render::write_output(path, |f| Ok(f.write_all(svg.as_bytes())?))?;
        }
        Ok(())
    }
}
