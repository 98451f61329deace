//! Static SVG pictures of `tma stat` results, drawn with `plotters` (SVG backend): the
//! stacked-area timeline of `-I` intervals (level 1, and the children of the bottleneck) and
//! the tree as horizontal bars. `tma stat --plot FILE.svg` writes them; `tma report` inlines
//! them in its page and writes them alone with `--svg`.
//!
//! A [`Timeline`] keeps bounded memory however long the run: at most [`Timeline::MAX_COLUMNS`]
//! columns; when full, neighbouring columns are merged pairwise (their means, weighted by the
//! intervals they hold) and later intervals are averaged in groups of the doubled width.

mod bars;
mod timeline;

pub use bars::*;
pub use timeline::*;

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

#[cfg(test)]
mod tests;
