//! The stacked-area timeline of `-I` intervals, in bounded memory.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{perr, series_color, PlotError};
use crate::eval::IntervalReport;

/// One node of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesKey {
    pub name: String,
    pub parent: Option<String>,
    pub level: u8,
}

/// One column of the timeline: one interval, or the mean of `n` neighbouring intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub start_s: f64,
    pub end_s: f64,
    /// One value per [`Timeline::nodes`] entry (`None`: no value in any interval merged).
    pub values: Vec<Option<f64>>,
    /// Intervals merged into this column.
    pub n: u32,
    /// Per value: the intervals that had one (for the weighted mean).
    counts: Vec<u32>,
}

impl Column {
    fn merge(&mut self, o: &Column) {
        self.end_s = o.end_s;
        self.n += o.n;
        let len = self.values.len().max(o.values.len());
        self.values.resize(len, None);
        self.counts.resize(len, 0);
        for i in 0..len {
            let (a, ca) = (self.values[i], self.counts[i]);
            let (b, cb) = (
                o.values.get(i).copied().flatten(),
                o.counts.get(i).copied().unwrap_or(0),
            );
            self.values[i] = match (a, b) {
                (Some(a), Some(b)) => {
                    Some((a * f64::from(ca) + b * f64::from(cb)) / f64::from(ca + cb))
                }
                (x, None) | (None, x) => x,
            };
            self.counts[i] = ca + cb;
        }
    }
}

/// Interval values of every node over time, with bounded memory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timeline {
    pub nodes: Vec<SeriesKey>,
    columns: Vec<Column>,
    /// Intervals still being averaged into one column (`stride` of them make one).
    pending: Option<Column>,
    stride: u32,
    /// Bottleneck paths and how many intervals named each.
    paths: Vec<(Vec<String>, usize)>,
    intervals: usize,
}

/// Which picture of a timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Panel {
    /// The level-1 nodes.
    Level1,
    /// The children of this node.
    ChildrenOf(String),
}

/// The pixel and time span of a drawn timeline panel, for hover read-outs over it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlotArea {
    /// Left and right edge of the plotting area, in SVG pixels.
    pub x0: i32,
    pub x1: i32,
    /// The times at those edges, in seconds.
    pub t0: f64,
    pub t1: f64,
}

impl Timeline {
    /// Columns kept at most (a 1,000-interval run is drawn interval by interval).
    pub const MAX_COLUMNS: usize = 1024;

    pub fn new() -> Timeline {
        Timeline {
            stride: 1,
            ..Timeline::default()
        }
    }

    /// Add one evaluated interval.
    pub fn push_report(&mut self, ir: &IntervalReport) {
        let nodes = ir
            .report
            .nodes
            .iter()
            .map(|n| (n.name, n.parent, n.level, n.value));
        self.push(ir.start_s, ir.end_s, nodes, &ir.report.bottleneck.path);
    }

    /// Add one interval: its nodes (name, parent, level, value) and bottleneck path.
    pub fn push<'a, I>(&mut self, start_s: f64, end_s: f64, nodes: I, bottleneck: &[String])
    where
        I: IntoIterator<Item = (&'a str, Option<&'a str>, u8, Option<f64>)>,
    {
        if self.stride == 0 {
            self.stride = 1;
        }
        let mut values = vec![None; self.nodes.len()];
        for (name, parent, level, value) in nodes {
            let i = match self.nodes.iter().position(|k| k.name == name) {
                Some(i) => i,
                None => {
                    self.nodes.push(SeriesKey {
                        name: name.to_string(),
                        parent: parent.map(str::to_string),
                        level,
                    });
                    values.push(None);
                    self.nodes.len() - 1
                }
            };
            values[i] = value.filter(|v| v.is_finite());
        }
        let counts = values.iter().map(|v| u32::from(v.is_some())).collect();
        let col = Column {
            start_s,
            end_s,
            values,
            n: 1,
            counts,
        };
        match self.pending.as_mut() {
            Some(p) => p.merge(&col),
            None => self.pending = Some(col),
        }
        if self.pending.as_ref().is_some_and(|p| p.n >= self.stride) {
            let p = self.pending.take().expect("pending column");
            self.columns.push(p);
            if self.columns.len() >= Self::MAX_COLUMNS {
                self.halve();
            }
        }
        if !bottleneck.is_empty() {
            match self.paths.iter_mut().find(|(p, _)| p == bottleneck) {
                Some((_, n)) => *n += 1,
                None => self.paths.push((bottleneck.to_vec(), 1)),
            }
        }
        self.intervals += 1;
    }

    /// Merge neighbouring columns pairwise and double the stride.
    fn halve(&mut self) {
        let old = std::mem::take(&mut self.columns);
        let mut it = old.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.merge(&b);
            }
            self.columns.push(a);
        }
        self.stride *= 2;
    }

    /// The columns, the last partial one included.
    pub fn columns(&self) -> Vec<&Column> {
        self.columns.iter().chain(self.pending.as_ref()).collect()
    }

    /// Intervals added.
    pub fn intervals(&self) -> usize {
        self.intervals
    }

    /// The bottleneck path most intervals named (the later one on a tie); empty if none.
    pub fn bottleneck(&self) -> Vec<String> {
        let mut best: Option<&(Vec<String>, usize)> = None;
        for p in &self.paths {
            if best.is_none_or(|b| p.1 >= b.1) {
                best = Some(p);
            }
        }
        best.map(|b| b.0.clone()).unwrap_or_default()
    }

    /// The node whose children the second panel shows: the deepest node of the most common
    /// bottleneck path that has children in the data.
    pub fn drill_node(&self) -> Option<String> {
        self.bottleneck().into_iter().rev().find(|n| {
            self.nodes.iter().any(|k| {
                k.parent
                    .as_deref()
                    .is_some_and(|p| p.eq_ignore_ascii_case(n))
            })
        })
    }

    /// The indices of a panel's series.
    pub fn panel_series(&self, panel: &Panel) -> Vec<usize> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, k)| match panel {
                Panel::Level1 => k.level == 1,
                Panel::ChildrenOf(p) => k
                    .parent
                    .as_deref()
                    .is_some_and(|q| q.eq_ignore_ascii_case(p)),
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// The colour of the `k`th series of `panel`: the panels' series take the palette in
    /// turn, so a node of the children's panel never shares a colour with a level-1 node.
    pub fn series_color_in(&self, panel: &Panel, k: usize) -> (u8, u8, u8) {
        let before: usize = self
            .panels()
            .iter()
            .take_while(|p| *p != panel)
            .map(|p| self.panel_series(p).len())
            .sum();
        series_color(before + k)
    }

    /// The panels worth drawing: level 1, and the bottleneck's children when measured.
    pub fn panels(&self) -> Vec<Panel> {
        let mut v = vec![Panel::Level1];
        if let Some(n) = self.drill_node() {
            v.push(Panel::ChildrenOf(n));
        }
        v
    }

    fn time_span(&self) -> (f64, f64) {
        let cols = self.columns();
        let t0 = cols.first().map_or(0.0, |c| c.start_s);
        let mut t1 = cols.last().map_or(1.0, |c| c.end_s);
        if t1 <= t0 {
            t1 = t0 + 1.0;
        }
        (t0, t1)
    }

    fn draw_panel(
        &self,
        area: &DrawingArea<SVGBackend<'_>, Shift>,
        panel: &Panel,
    ) -> Result<PlotArea, PlotError> {
        let series = self.panel_series(panel);
        let cols = self.columns();
        let (t0, t1) = self.time_span();
        // Stacked: the running sum over the panel's series, column by column.
        let mut stacked: Vec<Vec<f64>> = Vec::with_capacity(series.len());
        let mut below = vec![0.0f64; cols.len()];
        for &si in &series {
            for (c, b) in cols.iter().zip(below.iter_mut()) {
                *b += c.values.get(si).copied().flatten().unwrap_or(0.0).max(0.0);
            }
            stacked.push(below.clone());
        }
        let top = below.iter().copied().fold(0.0f64, f64::max);
        let ymax = if top <= 100.5 { 100.0 } else { top * 1.05 };
        let title = match panel {
            Panel::Level1 => "TMA level 1 over time".to_string(),
            Panel::ChildrenOf(p) => format!("{p}: its children over time"),
        };
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(t0..t1, 0f64..ymax)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("% of slots")
            .light_line_style(WHITE)
            .draw()
            .map_err(perr)?;
        // Tallest layer first, so each lower layer is drawn over the one above it.
        for (k, &si) in series.iter().enumerate().rev() {
            let (r, g, b) = self.series_color_in(panel, k);
            let color = RGBColor(r, g, b);
            let mut pts = Vec::with_capacity(cols.len() * 2);
            for (c, y) in cols.iter().zip(&stacked[k]) {
                pts.push((c.start_s, *y));
                pts.push((c.end_s, *y));
            }
            chart
                .draw_series(AreaSeries::new(pts, 0.0, color.filled()).border_style(color))
                .map_err(perr)?
                .label(self.nodes[si].name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        if !series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(perr)?;
        }
        let (x0, _) = chart.backend_coord(&(t0, 0.0));
        let (x1, _) = chart.backend_coord(&(t1, 0.0));
        Ok(PlotArea { x0, x1, t0, t1 })
    }

    /// One panel as an SVG document of `size` pixels, and where its plotting area lies.
    pub fn panel_svg(
        &self,
        panel: &Panel,
        size: (u32, u32),
    ) -> Result<(String, PlotArea), PlotError> {
        let mut buf = String::new();
        let area = {
            let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
            root.fill(&WHITE).map_err(perr)?;
            let a = self.draw_panel(&root, panel)?;
            root.present().map_err(perr)?;
            a
        };
        Ok((buf, area))
    }

    /// Every panel, one above the other, as one SVG document.
    pub fn svg(&self) -> Result<String, PlotError> {
        let panels = self.panels();
        let mut buf = String::new();
        {
            let h = 360 * panels.len() as u32;
            let root = SVGBackend::with_string(&mut buf, (960, h)).into_drawing_area();
            root.fill(&WHITE).map_err(perr)?;
            let areas = root.split_evenly((panels.len(), 1));
            for (p, a) in panels.iter().zip(&areas) {
                self.draw_panel(a, p)?;
            }
            root.present().map_err(perr)?;
        }
        Ok(buf)
    }
}
