//! Several trees written interval by interval, interleaved: a hybrid part's run with `-I`
//! (every core type's tree, then their merged view, for each interval as it is read). Each
//! interval's output names its tree, as the rows of one core type's tree of an imported
//! hybrid recording do: the text rule (`--- interval 0.000 s .. 1.000 s, P-core tree ---`),
//! a `--compact` column, the CSV `core_type` column (one header for all trees), and in JSON
//! one `tma.stat` document per tree and interval, its head's `core_type` naming the tree.

use std::io::Write;

use tma_render::{JsonStream, OutputError};

use super::compact::*;
use super::csv::*;
use super::facts::tree_name;
use super::json::*;
use super::options::*;
use super::summary::*;
use super::text::*;
use crate::eval::{IntervalReport, RunInfo};
use crate::render::plot::Timeline;

/// Writes several trees interleaved: [`TreesWriter::begin`] with every tree's
/// [`RunInfo`], [`TreesWriter::interval`] for each tree of each interval, then
/// [`TreesWriter::end`].
#[derive(Debug)]
pub struct TreesWriter {
    opts: RenderOptions,
    /// Each tree's closing lines (text of interval data).
    summaries: Vec<RunSummary>,
    /// `--compact`: the columns, fixed by the first tree's first interval.
    columns: Vec<CompactColumn>,
    /// `--compact`: the width of the tree column.
    label_width: usize,
    count: usize,
    /// `--plot`: the timeline of one tree: the merged view, else the first.
    timeline: Option<Timeline>,
    plotted: usize,
}

impl TreesWriter {
    pub fn new(opts: RenderOptions) -> TreesWriter {
        let timeline = opts.plot.as_ref().map(|_| Timeline::new());
        TreesWriter {
            opts,
            summaries: Vec::new(),
            columns: Vec::new(),
            label_width: 0,
            count: 0,
            timeline,
            plotted: 0,
        }
    }

    /// Tree intervals written so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The headers: each tree's header line (text), the CSV header row once.
    pub fn begin(&mut self, w: &mut dyn Write, infos: &[RunInfo]) -> Result<(), OutputError> {
        self.summaries = vec![RunSummary::default(); infos.len()];
        self.plotted = infos
            .iter()
            .position(|i| i.core_type == Some("merged"))
            .unwrap_or(0);
        self.label_width = infos
            .iter()
            .map(|i| i.core_type.map_or(0, str::len))
            .max()
            .unwrap_or(0)
            .max("tree".len());
        match self.opts.format {
            Format::Text => {
                for (k, info) in infos.iter().enumerate() {
                    text_header_line(w, info)?;
                    if k + 1 == infos.len() {
                        text_levels_line(w, info)?;
                    }
                }
                Ok(())
            }
            Format::Csv => match infos.first() {
                Some(info) => csv_header(w, info),
                None => Ok(()),
            },
            Format::Json => Ok(()),
        }
    }

    /// One interval of tree `tree` (`info` its [`RunInfo`]).
    pub fn interval(
        &mut self,
        w: &mut dyn Write,
        tree: usize,
        info: &RunInfo,
        ir: &IntervalReport,
        readings: Option<&tma_perf::Interval>,
    ) -> Result<(), OutputError> {
        let label = info.core_type.unwrap_or("-");
        match self.opts.format {
            Format::Text if self.opts.compact => {
                if self.count == 0 {
                    self.columns = compact_columns(ir);
                    writeln!(w)?;
                    let head = compact_head(&self.columns);
                    let end = head.get(..10).unwrap_or_default();
                    let rest = head.get(10..).unwrap_or_default();
                    writeln!(w, "{end}  {:<lw$}{rest}", "tree", lw = self.label_width)?;
                }
                let line = compact_text(&self.columns, ir);
                let end = line.get(..10).unwrap_or_default();
                let rest = line.get(10..).unwrap_or_default();
                writeln!(w, "{end}  {label:<lw$}{rest}", lw = self.label_width)?;
            }
            Format::Text => {
                writeln!(w)?;
                let name = tree_name(info).unwrap_or_else(|| label.to_string());
                writeln!(
                    w,
                    "--- interval {:.3} s .. {:.3} s, {name} ---",
                    ir.start_s, ir.end_s
                )?;
                render_tree(w, info, ir, &self.opts)?;
                if let Some(s) = self.summaries.get_mut(tree) {
                    s.push(ir);
                }
            }
            Format::Csv => csv_rows(w, info, ir, readings)?,
            Format::Json => {
                let mut j =
                    JsonStream::begin(w, SCHEMA, SCHEMA_VERSION, &json_head(info), "intervals")?;
                j.item(w, &json_interval(info, ir, readings))?;
                j.end(w)?;
            }
        }
        if tree == self.plotted {
            if let Some(t) = self.timeline.as_mut() {
                t.push_report(ir);
            }
        }
        self.count += 1;
        Ok(())
    }

    /// Each tree's closing lines (text), and the `--plot` file (the timeline of the merged
    /// view, else of the first tree).
    pub fn end(&mut self, w: &mut dyn Write, infos: &[RunInfo]) -> Result<(), OutputError> {
        if self.opts.format == Format::Text && !self.opts.compact {
            for (s, info) in self.summaries.iter().zip(infos) {
                s.write(w, info)?;
            }
        }
        if let (Some(path), Some(t)) = (self.opts.plot.as_deref(), self.timeline.as_ref()) {
            let svg = t.svg().map_err(|e| OutputError::Output {
                path: path.display().to_string(),
                source: std::io::Error::other(e),
            })?;
            tma_render::write_output(path, |f| Ok(f.write_all(svg.as_bytes())?))?;
        }
        Ok(())
    }
}
