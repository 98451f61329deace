//! Hybrid parts: what a live run of every core type and the import of a recording of them
//! share. Each core type (a PMU with a `cpus` file: `cpu_core`, `cpu_atom`, and any further
//! type) is read with its own table ([`CoreTable`]: `adl` and `adl-e`, `mtl` and `mtl-e`);
//! its tree is weighed by its cycles ([`cycles_event`]) in the merged view
//! ([`merge_interval`]); and one [`Interleaver`] hands every type's tree of each interval
//! and the merged view on to the sink, whether the intervals were counted live or read by
//! an import's thread per type.

mod interleave;
mod merge;
mod tables;

pub(crate) use interleave::{Interleaver, TypeInterval};
pub(crate) use merge::merge_interval;
pub use tables::{core_family, core_label, pick_core_type, recording_core_types, CoreTable};
pub(crate) use tables::{core_tables, cycles_event};
