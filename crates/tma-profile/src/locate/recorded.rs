//! What a recording (live or imported) yields before symbolization.

use std::path::Path;

use tma_catalog::Model;
use tma_perf::sampling::Target;

use super::config::LocateConfig;
use crate::aggregate::Aggregator;
use crate::symbols::Kallsyms;
use crate::tree::TreeLayout;

/// Samples aggregated, before symbolization.
pub(super) struct Recorded {
    pub(super) agg: Aggregator,
    pub(super) event_name: String,
    pub(super) kallsyms: Option<Kallsyms>,
    pub(super) notes: Vec<String>,
    pub(super) duration_ns: i64,
    pub(super) exit_status: u8,
    /// With `--tree`: the group's layout and the model its tree is evaluated with.
    pub(super) tree: Option<(TreeLayout, Option<&'static Model>)>,
    /// A live session: what a second (direct) pass needs.
    pub(super) live: Option<LivePass>,
    /// `--import --tree`: the file's events that are not in the sampled group (one may be
    /// the direct samples of the bottleneck's locate-with event).
    pub(super) import_others: Vec<String>,
}

/// How the live session went, for a second pass of the same target.
#[derive(Debug, Clone)]
pub(super) struct LivePass {
    pub(super) target: Target,
    /// Kernel samples were taken (the second pass takes them too).
    pub(super) include_kernel: bool,
    /// The session was interrupted, or its attached process went away.
    pub(super) ended_early: bool,
}

/// An aggregator that keeps call chains where stacks or children are shown.
pub(super) fn new_aggregator(cfg: &LocateConfig) -> Aggregator {
    let mut agg = Aggregator::new();
    agg.keep_callchains = cfg.stacks || cfg.report.children;
    agg
}

/// Kernel symbols from a copy of /proc/kallsyms (`None`: unreadable, or no usable symbols).
pub(super) fn read_kallsyms(path: &Path) -> Option<Kallsyms> {
    std::fs::read(path).ok().and_then(|b| Kallsyms::parse(&b))
}
