//! What to write: the layout, how much of the tree, and the `tma.stat` schema's name.

/// The schema name of `tma stat --json`.
pub const SCHEMA: &str = "tma.stat";
/// Its version: 2 since schema names 2026-11 (units as `percent_slots`; version 1 wrote
/// `PercentSlots`, which readers still read).
pub const SCHEMA_VERSION: u32 = 2;

/// Which layout to write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// The indented tree (or one `--compact` line per interval), with closing lines.
    #[default]
    Text,
    /// `tma.stat` version 1: every node of every interval, full precision.
    Json,
    /// One row per node (per interval), full precision.
    Csv,
}

/// How to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    pub format: Format,
    /// 0: hide nodes under threshold; 1+: show every node.
    pub verbose: u8,
    /// One line per interval instead of one tree per interval (interval data, text).
    pub compact: bool,
    /// `--plot FILE.svg`: also draw the run (the timeline of intervals, else the tree as
    /// bars) into this file when the run ends.
    pub plot: Option<std::path::PathBuf>,
}
