//! Static SVG pictures of `tma stat` results, drawn with `plotters` (SVG backend): the
//! stacked-area timeline of `-I` intervals (level 1, and the children of the bottleneck) and
//! the tree as horizontal bars. `tma stat --plot FILE.svg` writes them; `tma report` inlines
//! them in its page and writes them alone with `--svg`.
//!
//! A [`Timeline`] keeps bounded memory however long the run: at most [`Timeline::MAX_COLUMNS`]
//! columns; when full, neighbouring columns are merged pairwise (their means, weighted by the
//! intervals they hold) and later intervals are averaged in groups of the doubled width.

mod bars;
mod style;
mod timeline;

pub use bars::*;
pub use style::{series_color, PlotError};
pub use timeline::*;

#[cfg(test)]
mod tests;
