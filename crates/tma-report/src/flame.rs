//! A profile's call chains as a flame graph: the folded stacks `tma locate --folded` writes,
//! drawn by `inferno` into one SVG (with inferno's own search and zoom script), wrapped in a
//! small HTML document for the page's `<iframe srcdoc>`: the script then runs in a document
//! of its own, where it finds its own `<svg>` and nothing of the page.

use inferno::flamegraph::{self, Options};
use tma_profile::report::Profile;

use crate::HtmlError;

/// The flame graph of `p`'s stacks, as an SVG document.
pub fn svg(p: &Profile) -> Result<String, HtmlError> {
    let mut folded = Vec::new();
    tma_profile::render::folded(&mut folded, p)?;
    let text = String::from_utf8_lossy(&folded);
    from_folded(
        &text,
        &format!("{} samples of {}", p.counts.samples, p.event),
    )
}

/// The flame graph's width in pixels (the page's content width).
pub const FLAME_WIDTH: usize = 1040;

/// The flame graph as the HTML document of an `<iframe srcdoc>`: the SVG without its XML
/// prolog (an HTML parser would take it for a comment), in a body without margins.
pub fn document(svg: &str) -> String {
    let body = svg.find("<svg").map_or(svg, |i| &svg[i..]);
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{{margin:0}}</style></head><body>{body}</body></html>"
    )
}

/// A flame graph of folded stacks (`root;caller;leaf count` per line).
pub fn from_folded(folded: &str, title: &str) -> Result<String, HtmlError> {
    let mut opts = Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".to_string();
    // The same input gives the same picture (colours by name, not at random).
    opts.hash = true;
    opts.deterministic = true;
    // A fixed width: inferno's fluid layout reads the width of its parent, which an SVG
    // inline in an HTML document does not have when the script starts.
    opts.image_width = Some(FLAME_WIDTH);
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
        .map_err(|e| HtmlError::Plot(format!("flame graph: {e}")))?;
    String::from_utf8(out).map_err(|e| HtmlError::Plot(format!("flame graph: {e}")))
}
