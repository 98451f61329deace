//! What the pictures share: their errors and their palette.

use plotters::prelude::*;

/// A plotting failure (plotters reports drawing errors as text).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the plot: {0}")]
pub struct PlotError(String);

pub(super) fn perr<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

/// A colour-blind-friendly palette (Okabe and Ito), then greys.
pub(super) const PALETTE: [RGBColor; 8] = [
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
