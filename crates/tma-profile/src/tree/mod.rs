//! `tma locate --tree`: a TMA tree per function, from group sampling.
//!
//! One event samples; the events of the requested level are read with every sample
//! (`PERF_SAMPLE_READ` with `PERF_FORMAT_GROUP`, see `tma_perf::sampling::group`). The
//! increase of each value since the previous sample of the same thread is charged to the
//! sample's stack ([`crate::aggregate::GroupCounts`]); summed per function (the leaf's), the
//! counts go through the same formula engine, thresholds and bottleneck rule as `tma stat`
//! (`tma_metrics::evaluate`).
//!
//! **Layouts** ([`TreeLayout`]):
//! * Ice Lake and later (`slots` + PERF_METRICS): `slots` leads the group but cannot
//!   sample, so the second event (core cycles, fixed counter 1) samples; the topdown metric
//!   events are members (they take no counter and read zero outside a slots group), the
//!   other events of the level take general-purpose counters.
//! * Earlier Intel, Intel E-cores and AMD Zen: the sampler (core cycles) leads; the level's
//!   events (on AMD the PipelineL1 events) are members, within the core's counters.
//! * No PMU: a software group (cpu-clock samples; page faults, context switches and
//!   task-clock read with each sample). There is no tree then: the per-function software
//!   counts are shown.
//!
//! What does not fit in the one group is listed with the reason ([`TreeLayout::dropped`]);
//! the nodes that need it show "missing events", as `tma stat` shows them.
//!
//! **Functions** are user functions: a sample in the kernel (a page fault, a system call)
//! is charged to the first user frame of its call chain, the code that caused the work.
//!
//! **Attribution bleed.** A sample's increase covers the whole period since the thread's
//! previous sample. When that sample was in another function, part of the increase belongs
//! there: such samples are counted per function as "mixed" ([`FunctionTree::mixed`]).

mod build;
mod doc;
mod dominant;
mod layout;
mod render;
mod replay;
#[cfg(test)]
mod tests;

pub use build::build;
pub use doc::{EventCount, FunctionTree, LayoutDoc, TreeNode, TreeProfile};
pub use dominant::{dominant_nodes, Dominant};
pub use layout::{LayoutKind, TreeLayout, SOFTWARE_MEMBERS};
pub use render::{csv, json, text};
pub use replay::{replay, replay_parse_info, ReplaySample};

/// JSON schema of `tma locate --tree --json`.
pub const TREE_SCHEMA: &str = "tma.locate.tree";
pub const TREE_SCHEMA_VERSION: u32 = 1;

/// Errors planning a group.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    #[error(transparent)]
    Catalog(#[from] tma_catalog::CatalogError),
    #[error(transparent)]
    Metrics(#[from] tma_metrics::MetricsError),
    #[error("the {cpu} tables name no core-cycles event to sample with")]
    NoSampler { cpu: String },
    #[error("--tree takes level 1 or 2 (a group is read with every sample; deeper levels need more counters than a core has)")]
    Level,
}
