//! The `tma report` use case as a library: draw `tma` results in one self-contained HTML page
//! (no network: styles, scripts and pictures inline), or the timeline or tree alone as SVG.
//!
//! The CLI turns its arguments into a [`ReportConfig`] and calls [`run`], then writes the
//! [`Report`] with [`render::html`] or [`render::svg`]. Data flow:
//!
//! * [`input`]: each input file, recognised by its content: a `tma.stat`, `tma.diff`,
//!   `tma.diff-profile`, `tma.locate` or `tma.bench` JSON document, a `tma stat --record`
//!   snapshot or `perf stat` recording (evaluated in-process by [`tma_stat::evaluate`] and read
//!   as the `tma.stat` document `tma stat --json` would write), or a perf.data file (read as
//!   `tma locate --import` reads it, call chains included) -> one [`Section`] each.
//! * [`page`]: what each section shows (tree rows with means over intervals, the
//!   [`tma_stat::render::plot::Timeline`], profile tables; the diff and bench documents as
//!   read through the writers' types, [`tma_diff::doc`] and [`tma_bench::doc`]).
//! * [`regions`]: a `tma stat --regions` document: its regions as a table and a timeline.
//! * [`flame`]: folded call chains -> a flame graph SVG (`inferno`).
//! * [`render`]: the page (an `askama` template, every text escaped) and `--svg` (plotters).

mod error;
pub mod flame;
pub mod input;
pub mod page;
pub mod regions;
pub mod render;

use std::io::Write;
use std::path::PathBuf;

use tma_host::Host;

pub use error::ReportError;
pub use page::{Report, Section};

/// Everything `tma report` needs; no clap.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportConfig {
    /// The files to draw, one section each, in this order.
    pub inputs: Vec<PathBuf>,
    /// How recordings are read (`--cpu`, `-l`, `--nodes`, `--smt`).
    pub read: tma_stat::ReadOptions,
    /// perf.data files: the event to show (else the first).
    pub event: Option<String>,
    /// perf.data files: look for binaries here (by file name) before their recorded paths.
    pub symdir: Vec<PathBuf>,
    /// perf.data files: kernel symbols (a copy of a machine's /proc/kallsyms).
    pub kallsyms: Option<PathBuf>,
    /// The page title (default: from the inputs).
    pub title: Option<String>,
    /// The `/sys` and `/proc` roots (a recording that names no CPU is of this machine).
    pub host: Host,
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            inputs: Vec::new(),
            read: tma_stat::ReadOptions::default(),
            event: None,
            symdir: Vec::new(),
            kallsyms: None,
            title: None,
            host: Host::system(),
        }
    }
}

/// Read every input into its section. Notes of the imports go to `notes`.
pub fn run(cfg: &ReportConfig, notes: &mut dyn Write) -> Result<Report, ReportError> {
    if cfg.inputs.is_empty() {
        return Err(ReportError::NoInput);
    }
    let sections = cfg
        .inputs
        .iter()
        .map(|p| input::load(cfg, p, notes))
        .collect::<Result<Vec<_>, _>>()?;
    let title = cfg.title.clone().unwrap_or_else(|| {
        let names: Vec<String> = cfg
            .inputs
            .iter()
            .map(|p| match p.file_name() {
                Some(f) if !tma_render::files::is_stdio(p) => f.to_string_lossy().into(),
                _ => tma_render::files::display_input(p),
            })
            .collect();
        format!("tma report: {}", names.join(", "))
    });
    Ok(Report { title, sections })
}
