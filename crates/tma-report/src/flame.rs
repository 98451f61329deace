//! A profile's call chains as a flame graph: the folded stacks `tma locate --folded` writes,
//! drawn by `inferno` into one SVG (with inferno's own search and zoom script), wrapped in a
//! small HTML document for the page's `<iframe srcdoc>`: the script then runs in a document
//! of its own, where it finds its own `<svg>` and nothing of the page.

use inferno::flamegraph::{self, Options};
use tma_profile::hotspots::Profile;

use crate::ReportError;

/// The flame graph of `p`'s stacks, as an SVG document.
pub fn svg(p: &Profile) -> Result<String, ReportError> {
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
pub fn from_folded(folded: &str, title: &str) -> Result<String, ReportError> {
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
        .map_err(|e| ReportError::Plot(format!("flame graph: {e}")))?;
    String::from_utf8(out).map_err(|e| ReportError::Plot(format!("flame graph: {e}")))
}

// ------------------------------------------------------------------ TMA flame graphs

use std::collections::{BTreeMap, BTreeSet, HashMap};

use inferno::flamegraph::color::{Color, PaletteMap};
use tma_profile::tree::Dominant;

/// The hue (degrees) of a level-1 node: Frontend violet, Bad Speculation orange, Backend
/// red, Retiring green, SMT contention cyan; `None` for anything else.
fn node_hue(node: &str) -> Option<f64> {
    let n = node.to_ascii_lowercase();
    if n.contains("frontend") {
        Some(270.0)
    } else if n.contains("bad_spec") {
        Some(35.0)
    } else if n.contains("backend") {
        Some(0.0)
    } else if n.contains("retiring") {
        Some(120.0)
    } else if n.contains("smt") {
        Some(190.0)
    } else {
        None
    }
}

/// HSL (hue in degrees, saturation and lightness 0..=1) to RGB.
fn hsl(h: f64, s: f64, l: f64) -> Color {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = (h.rem_euclid(360.0)) / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m).clamp(0.0, 1.0) * 255.0).round() as u8;
    Color::new(byte(r), byte(g), byte(b))
}

/// The colour of a frame whose dominant node has `share` percent of its slots: the node's
/// hue, saturated by the share (a 25% share is pale, 100% is full).
pub fn dominant_colour(d: &Dominant) -> Color {
    match node_hue(&d.node) {
        Some(h) => hsl(h, (d.share / 100.0).clamp(0.1, 1.0), 0.55),
        None => Color::new(160, 160, 160),
    }
}

/// The legend of the TMA flame graph.
pub const TMA_LEGEND: &str = "colour: the frame's dominant level-1 node (Frontend violet, \
Bad Speculation orange, Backend red, Retiring green, SMT contention cyan), saturated by its \
share of the frame's slots";

fn flame_options(title: &str, count_name: &str) -> Options<'static> {
    let mut opts = Options::default();
    opts.title = title.to_string();
    opts.count_name = count_name.to_string();
    opts.hash = true;
    opts.deterministic = true;
    opts.image_width = Some(FLAME_WIDTH);
    opts
}

fn render(opts: &mut Options<'_>, lines: &[(String, u64)]) -> Result<String, ReportError> {
    let text: Vec<String> = lines
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    if text.is_empty() {
        return Err(ReportError::Plot(
            "flame graph: no stacks with a non-zero width".into(),
        ));
    }
    let mut out = Vec::new();
    flamegraph::from_lines(opts, text.iter().map(String::as_str), &mut out)
        .map_err(|e| ReportError::Plot(format!("flame graph: {e}")))?;
    String::from_utf8(out).map_err(|e| ReportError::Plot(format!("flame graph: {e}")))
}

/// The TMA flame graph of a profile with group values (`tma locate --tree`): width is slots
/// (where counted, else the sampler's count, else samples), colour each frame's dominant
/// level-1 node ([`tma_profile::tree::dominant_nodes`]) saturated by its share. Without
/// `dominant` (no PMU: no tree) the frames keep inferno's colours and the title says so.
pub fn tma_svg(
    p: &Profile,
    dominant: Option<&BTreeMap<String, Dominant>>,
) -> Result<String, ReportError> {
    let index = p
        .value_names
        .iter()
        .position(|n| tma_profile::pprof::sample_type_name(n) == "slots")
        .or_else(|| p.value_names.iter().position(|n| n == &p.event));
    let (weight_name, lines) = match index {
        Some(i) => (
            tma_profile::pprof::sample_type_name(&p.value_names[i]),
            tma_profile::render::folded_lines(p, &|st| st.values.get(i).copied().unwrap_or(0)),
        ),
        None => (
            "samples".to_string(),
            tma_profile::render::folded_lines(p, &|st| st.samples),
        ),
    };
    let mut palette = PaletteMap::default();
    let title = match dominant {
        Some(d) => {
            for (f, dom) in d {
                palette.insert(f.replace([';', '\n'], "_"), dominant_colour(dom));
            }
            format!("TMA flame graph: width {weight_name}")
        }
        None => format!("flame graph: width {weight_name} (no TMA tree without a PMU)"),
    };
    let mut opts = flame_options(&title, &weight_name);
    if dominant.is_some() {
        opts.subtitle = Some(TMA_LEGEND.to_string());
        opts.palette_map = Some(&mut palette);
    }
    render(&mut opts, &lines)
}

/// A differential flame graph of two profiles' call stacks: each frame as wide as its
/// samples in both (the before profile scaled to the after one's total), coloured by the
/// change of its function's share (red: more after, blue: less; the deeper the larger).
/// Frames only in one profile are kept and named `NAME [only before]` / `[only after]`.
pub fn differential_svg(before: &Profile, after: &Profile) -> Result<String, ReportError> {
    let b = tma_profile::render::folded_lines(before, &|st| st.samples);
    let a = tma_profile::render::folded_lines(after, &|st| st.samples);
    let total = |v: &[(String, u64)]| v.iter().map(|x| x.1).sum::<u64>().max(1) as f64;
    let scale = total(&a) / total(&b);
    let prefixes = |v: &[(String, u64)]| -> BTreeSet<String> {
        let mut set = BTreeSet::new();
        for (s, _) in v {
            let mut acc = String::new();
            for (k, f) in s.split(';').enumerate() {
                if k > 0 {
                    acc.push(';');
                }
                acc.push_str(f);
                set.insert(acc.clone());
            }
        }
        set
    };
    let (pb, pa) = (prefixes(&b), prefixes(&a));
    let mark = |s: &str, other: &BTreeSet<String>, tag: &str| -> String {
        let mut acc = String::new();
        let mut out = Vec::new();
        for (k, f) in s.split(';').enumerate() {
            if k > 0 {
                acc.push(';');
            }
            acc.push_str(f);
            if other.contains(&acc) {
                out.push(f.to_string());
            } else {
                out.push(format!("{f} [only {tag}]"));
            }
        }
        out.join(";")
    };
    // Per function name: inclusive share before and after (each stack once).
    let shares = |v: &[(String, u64)], t: f64| -> HashMap<String, f64> {
        let mut m: HashMap<String, f64> = HashMap::new();
        for (s, n) in v {
            let names: BTreeSet<&str> = s.split(';').collect();
            for f in names {
                *m.entry(f.to_string()).or_default() += *n as f64 / t;
            }
        }
        m
    };
    let (sb, sa) = (shares(&b, total(&b)), shares(&a, total(&a)));
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for (s, n) in &b {
        *merged.entry(mark(s, &pa, "before")).or_default() += (*n as f64 * scale).round() as u64;
    }
    for (s, n) in &a {
        *merged.entry(mark(s, &pb, "after")).or_default() += n;
    }
    let mut palette = PaletteMap::default();
    let names: BTreeSet<String> = merged
        .keys()
        .flat_map(|s| s.split(';').map(str::to_string).collect::<Vec<_>>())
        .collect();
    let deltas: Vec<(String, f64)> = names
        .iter()
        .map(|f| {
            let d = if f.ends_with("[only before]") {
                -1.0
            } else if f.ends_with("[only after]") {
                1.0
            } else {
                sa.get(f).copied().unwrap_or(0.0) - sb.get(f).copied().unwrap_or(0.0)
            };
            (f.clone(), d)
        })
        .collect();
    let max = deltas
        .iter()
        .filter(|(f, _)| !f.ends_with(']'))
        .map(|(_, d)| d.abs())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    for (f, d) in deltas {
        let rel = if f.ends_with(']') {
            1.0
        } else {
            (d.abs() / max).min(1.0)
        };
        let colour = if d > 0.0 {
            hsl(0.0, 0.85, 0.95 - 0.45 * rel)
        } else if d < 0.0 {
            hsl(220.0, 0.85, 0.95 - 0.45 * rel)
        } else {
            Color::new(235, 235, 235)
        };
        palette.insert(f, colour);
    }
    let lines: Vec<(String, u64)> = merged.into_iter().collect();
    let mut opts = flame_options("differential flame graph", "samples");
    opts.subtitle = Some(format!(
        "width: samples of both ({} before, scaled x{scale:.2}, and {} after); red: a larger \
         share after, blue: smaller; frames only in one profile are marked",
        before.event, after.event
    ));
    opts.palette_map = Some(&mut palette);
    render(&mut opts, &lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_metrics::Constants;
    use tma_profile::tree::{self, ReplaySample, TreeLayout};

    const CYC: &str = "ls_not_halted_cyc";
    const FE: &str = "de_no_dispatch_per_slot.no_ops_from_frontend";
    const RET: &str = "ex_ret_ops";
    const DISP: &str = "de_src_op_disp.all";
    const BE: &str = "de_no_dispatch_per_slot.backend_stalls";

    /// A replayed Zen 4 stream: 0x1000 backend bound (65%), 0x2000 frontend bound (50%).
    fn zen4_profile() -> tma_profile::hotspots::Profile {
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let layout = TreeLayout::hardware(zen4, 1, false, false).unwrap();
        let s = |tid, ip, v: &'static [(&'static str, u64)]| ReplaySample {
            tid,
            ip,
            group_id: tid as u64 * 100,
            values: v,
        };
        let (p, _) = tree::replay(
            &layout,
            &[
                s(
                    1,
                    0x1000,
                    &[
                        (CYC, 1000),
                        (FE, 600),
                        (DISP, 1500),
                        (RET, 1200),
                        (BE, 3900),
                    ],
                ),
                s(
                    2,
                    0x2000,
                    &[
                        (CYC, 2000),
                        (FE, 6000),
                        (DISP, 3000),
                        (RET, 2400),
                        (BE, 3000),
                    ],
                ),
            ],
        );
        p
    }

    /// Frames are coloured by their function's dominant level-1 node, saturated by its
    /// share; the width is the sampler's count (cycles: no slots event on Zen 4).
    #[test]
    fn tma_flame_graph_colours_frames_by_their_dominant_node() {
        let p = zen4_profile();
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let dom = tree::dominant_nodes(&p, zen4, &Constants::default()).unwrap();
        let be = &dom["[unknown] 0x1000"];
        assert_eq!((be.node.as_str(), be.share), ("backend_bound", 65.0));
        let fe = &dom["[unknown] 0x2000"];
        assert_eq!((fe.node.as_str(), fe.share), ("frontend_bound", 50.0));
        let svg = tma_svg(&p, Some(&dom)).unwrap();
        assert!(svg.contains("TMA flame graph: width cycles"), "title");
        assert!(svg.contains("Bad Speculation orange"), "legend");
        let colour = |c: Color| format!("rgb({},{},{})", c.r, c.g, c.b);
        // Backend red at 65% saturation, frontend violet at 50%.
        let red = colour(dominant_colour(be));
        let violet = colour(dominant_colour(fe));
        assert_eq!(red, colour(hsl(0.0, 0.65, 0.55)));
        assert!(svg.contains(&format!("fill=\"{red}\"")), "{red} in the SVG");
        assert!(
            svg.contains(&format!("fill=\"{violet}\"")),
            "{violet} in the SVG"
        );
        // Widths: 1000 and 2000 cycles.
        assert!(
            svg.contains("[unknown] 0x2000 (2,000 cycles, 66.67%)"),
            "{svg}"
        );
        // Without a tree: inferno's colours, and the title says why.
        let plain = tma_svg(&p, None).unwrap();
        assert!(plain.contains("no TMA tree without a PMU"));
    }

    #[test]
    fn differential_flame_graph_keeps_frames_of_one_side() {
        let before = zen4_profile();
        let mut after = zen4_profile();
        // After: 0x1000 sampled three times as often; 0x2000 gone, 0x3000 new.
        after.stacks[0].samples = 3;
        after.frames[after.stacks[1].frames[0]].function = "[unknown] 0x3000".into();
        let svg = differential_svg(&before, &after).unwrap();
        assert!(svg.contains("[unknown] 0x2000 [only before]"), "{svg}");
        assert!(svg.contains("[unknown] 0x3000 [only after]"), "{svg}");
        // 0x1000's share grew (1/2 -> 3/4): red; the before-only frame full blue.
        let red = hsl(0.0, 0.85, 0.5);
        let blue = hsl(220.0, 0.85, 0.5);
        assert!(svg.contains(&format!("fill=\"rgb({},{},{})\"", red.r, red.g, red.b)));
        assert!(svg.contains(&format!("fill=\"rgb({},{},{})\"", blue.r, blue.g, blue.b)));
    }
}
