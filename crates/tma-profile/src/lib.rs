//! Samples to hotspots: perf record parsing (live ring buffer and perf.data through one path),
//! symbolization, instruction annotation, pprof and folded output.
//!
//! Pipeline: records ([`live`] or [`import`]) -> [`aggregate::Aggregator`] (sample counts per
//! stack of module+offset frames, no file I/O) -> [`hotspots::analyze`] with a
//! [`symbols::Symbolizer`] (ELF symbols, DWARF lines, kallsyms) -> [`hotspots::Profile`], rendered
//! as text, JSON (`tma.locate` v1) or folded stacks ([`render`]) or pprof ([`pprof::encode`]).
//! [`record`] writes perf.data files.
//!
//! The `tma locate` command is [`locate`]: a clap-free [`LocateConfig`] -> [`run`] (choose the
//! event, with the bottleneck of an in-process `tma_stat` pass when none was named; record;
//! aggregate and symbolize) -> [`Located`].

pub mod aggregate;
pub mod choose;
pub mod estimate;
pub mod hotspots;
pub mod import;
pub mod live;
pub mod locate;
pub mod order;
pub mod pprof;
pub mod record;
pub mod render;
pub mod symbols;
#[cfg(test)]
mod test_records;
pub mod tree;

pub use locate::{run, LocateConfig, LocateError, Located};
pub use render::{JSON_SCHEMA, JSON_SCHEMA_VERSION};
