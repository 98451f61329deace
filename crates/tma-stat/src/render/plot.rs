//! Static SVG pictures of `tma stat` results, drawn with `plotters` (SVG backend): the
//! stacked-area timeline of `-I` intervals (level 1, and the children of the bottleneck) and
//! the tree as horizontal bars. `tma stat --plot FILE.svg` writes them; `tma report` inlines
//! them in its page and writes them alone with `--svg`.
//!
//! A [`Timeline`] keeps bounded memory however long the run: at most [`Timeline::MAX_COLUMNS`]
//! columns; when full, neighbouring columns are merged pairwise (their means, weighted by the
//! intervals they hold) and later intervals are averaged in groups of the doubled width.

use std::fmt::Write as _;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::eval::IntervalReport;

/// A plotting failure (plotters reports drawing errors as text).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the plot: {0}")]
pub struct PlotError(String);

fn perr<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

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

/// A colour-blind-friendly palette (Okabe and Ito), then greys.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(86, 180, 233),
    RGBColor(204, 121, 167),
    RGBColor(240, 228, 66),
    RGBColor(120, 120, 120),
];

/// The colour of the `i`th series of a panel.
pub fn series_color(i: usize) -> (u8, u8, u8) {
    let c = PALETTE[i % PALETTE.len()];
    (c.0, c.1, c.2)
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
            let color = PALETTE[k % PALETTE.len()];
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

/// One bar of the tree picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub name: String,
    pub level: u8,
    pub value: Option<f64>,
    /// The node's own threshold, where its rule is a plain `Name > N`.
    pub threshold: Option<f64>,
    pub above_threshold: Option<bool>,
    /// On the bottleneck path.
    pub on_path: bool,
    /// Text after the value (`[62.5% counted]`, a status).
    pub note: String,
}

/// The colour of a bar: the bottleneck path red, over threshold orange, the rest blue-grey.
pub fn bar_color(b: &Bar) -> (u8, u8, u8) {
    if b.on_path {
        (213, 94, 0)
    } else if b.above_threshold == Some(true) {
        (230, 159, 0)
    } else {
        (120, 144, 156)
    }
}

/// The node's own threshold in a threshold rule like `Memory_Bound > 20 & Backend_Bound > 20`:
/// the number of the clause about `name` itself (`None` when the rule has no such clause).
pub fn own_threshold(name: &str, rule: &str) -> Option<f64> {
    rule.split('&').find_map(|clause| {
        let c = clause
            .trim()
            .trim_matches(|ch| ch == '(' || ch == ')')
            .trim();
        let rest = c.strip_prefix(name)?.trim_start();
        let rest = rest
            .strip_prefix(">=")
            .or_else(|| rest.strip_prefix('>'))?
            .trim();
        rest.parse::<f64>().ok()
    })
}

/// The tree as horizontal bars (name, value, threshold tick), as one SVG document.
pub fn tree_svg(title: &str, bars: &[Bar]) -> Result<String, PlotError> {
    let n = bars.len().max(1);
    let row = 26u32;
    let height = 70 + row * n as u32;
    let xmax = bars
        .iter()
        .filter_map(|b| b.value)
        .chain(bars.iter().filter_map(|b| b.threshold))
        .fold(100.0f64, f64::max);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (960, height)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .margin_right(30)
            .x_label_area_size(30)
            .y_label_area_size(300)
            .build_cartesian_2d(0f64..xmax, 0f64..n as f64)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc("% of slots")
            .light_line_style(WHITE)
            .draw()
            .map_err(perr)?;
        let y_of = |i: usize| (n - i) as f64;
        for (i, b) in bars.iter().enumerate() {
            let (r, g, bl) = bar_color(b);
            let color = RGBColor(r, g, bl);
            let y = y_of(i);
            if let Some(v) = b.value {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, y - 0.85), (v.clamp(0.0, xmax), y - 0.15)],
                        color.filled(),
                    )))
                    .map_err(perr)?;
            }
            if let Some(t) = b.threshold {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(t, y - 0.95), (t, y - 0.05)],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(perr)?;
            }
            let (_, py) = chart.backend_coord(&(0.0, y - 0.5));
            // Names left-aligned in the label area, indented by level.
            let indent = 16 * i32::from(b.level.saturating_sub(1));
            let style = TextStyle::from(("sans-serif", 14).into_font())
                .pos(Pos::new(HPos::Left, VPos::Center));
            root.draw(&Text::new(b.name.clone(), (12 + indent, py), style))
                .map_err(perr)?;
            let mut value = b.value.map_or("-".to_string(), |v| format!("{v:.1}%"));
            if !b.note.is_empty() {
                let _ = write!(value, "  {}", b.note);
            }
            let end = b.value.unwrap_or(0.0).clamp(0.0, xmax);
            let (vx, _) = chart.backend_coord(&(end, y - 0.5));
            let style = TextStyle::from(("sans-serif", 13).into_font())
                .pos(Pos::new(HPos::Left, VPos::Center));
            root.draw(&Text::new(value, (vx + 6, py), style))
                .map_err(perr)?;
        }
        root.present().map_err(perr)?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(t: &mut Timeline, i: usize, fe: f64, be: f64) {
        let nodes = [
            ("Frontend_Bound", None, 1u8, Some(fe)),
            ("Backend_Bound", None, 1, Some(be)),
            ("Memory_Bound", Some("Backend_Bound"), 2, Some(be * 0.75)),
            ("Core_Bound", Some("Backend_Bound"), 2, Some(be * 0.25)),
        ];
        let path = vec!["Backend_Bound".to_string(), "Memory_Bound".to_string()];
        t.push(i as f64, i as f64 + 1.0, nodes, &path);
    }

    #[test]
    fn a_long_run_keeps_at_most_max_columns_and_the_means() {
        let mut t = Timeline::new();
        for i in 0..5000 {
            push(&mut t, i, 10.0, if i < 2500 { 40.0 } else { 60.0 });
        }
        let cols = t.columns();
        assert!(
            cols.len() <= Timeline::MAX_COLUMNS,
            "{} columns",
            cols.len()
        );
        assert_eq!(cols.iter().map(|c| c.n as usize).sum::<usize>(), 5000);
        assert_eq!(cols.first().unwrap().start_s, 0.0);
        assert_eq!(cols.last().unwrap().end_s, 5000.0);
        // The mean over all columns, weighted, is the mean of the intervals: 50.
        let be = t
            .nodes
            .iter()
            .position(|k| k.name == "Backend_Bound")
            .unwrap();
        let sum: f64 = cols
            .iter()
            .map(|c| c.values[be].unwrap() * f64::from(c.n))
            .sum();
        assert!((sum / 5000.0 - 50.0).abs() < 1e-9);
        assert_eq!(t.intervals(), 5000);
    }

    #[test]
    fn a_short_run_is_drawn_interval_by_interval() {
        let mut t = Timeline::new();
        for i in 0..1000 {
            push(&mut t, i, 10.0, 40.0);
        }
        assert_eq!(t.columns().len(), 1000);
        assert!(t.columns().iter().all(|c| c.n == 1));
    }

    #[test]
    fn the_second_panel_shows_the_bottlenecks_measured_children() {
        let mut t = Timeline::new();
        push(&mut t, 0, 10.0, 40.0);
        assert_eq!(t.bottleneck(), ["Backend_Bound", "Memory_Bound"]);
        // Memory_Bound has no children here: its parent's are drawn.
        assert_eq!(t.drill_node().as_deref(), Some("Backend_Bound"));
        assert_eq!(
            t.panels(),
            [Panel::Level1, Panel::ChildrenOf("Backend_Bound".into())]
        );
        let kids: Vec<&str> = t
            .panel_series(&Panel::ChildrenOf("Backend_Bound".into()))
            .into_iter()
            .map(|i| t.nodes[i].name.as_str())
            .collect();
        assert_eq!(kids, ["Memory_Bound", "Core_Bound"]);
    }

    #[test]
    fn svg_names_every_series_and_escapes_text() {
        let mut t = Timeline::new();
        for i in 0..20 {
            push(&mut t, i, 10.0 + i as f64, 40.0);
        }
        let svg = t.svg().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for name in [
            "Frontend_Bound",
            "Backend_Bound",
            "Memory_Bound",
            "Core_Bound",
        ] {
            assert!(svg.contains(name), "{name} missing");
        }
        let bars = [Bar {
            name: "A<&>B".into(),
            level: 1,
            value: Some(30.0),
            threshold: Some(20.0),
            above_threshold: Some(true),
            on_path: true,
            note: String::new(),
        }];
        let svg = tree_svg("t", &bars).unwrap();
        assert!(svg.contains("A&lt;&amp;&gt;B"), "{svg}");
        assert!(!svg.contains("A<&>B"));
    }

    #[test]
    fn own_threshold_reads_the_clause_about_the_node() {
        assert_eq!(
            own_threshold("Memory_Bound", "Memory_Bound > 20 & Backend_Bound > 20"),
            Some(20.0)
        );
        assert_eq!(
            own_threshold("Backend_Bound", "Memory_Bound > 20 & Backend_Bound > 20"),
            Some(20.0)
        );
        assert_eq!(
            own_threshold("Fetch_Latency", "Fetch_Latency > 10 & Frontend_Bound > 15"),
            Some(10.0)
        );
        assert_eq!(own_threshold("X", "Y > 3"), None);
        assert_eq!(own_threshold("X", ""), None);
    }
}
