//! The tree as horizontal bars (a run without intervals).

use std::fmt::Write as _;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{perr, PlotError};

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
