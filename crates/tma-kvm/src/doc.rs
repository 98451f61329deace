//! The `tma.kvm` and `tma.kvm-memory` documents: what [`crate::render::json`] and
//! [`crate::render::memory_json`] write (schemas [`crate::render::SCHEMA`] and
//! [`crate::render::MEMORY_SCHEMA`], version 1), one type each for the writer and its
//! readers. `tma.kvm-memory` is a [`MemoryReport`] as it is; `tma.kvm` is a [`KvmDoc`]. The
//! envelope (`schema`, `schema_version`) is [`tma_render::JsonEnvelope`]'s; readers check it
//! first ([`tma_render::recognize()`]).

use serde::{Deserialize, Serialize};

pub use crate::memory::MemoryReport;
use crate::stats::KvmReport;

/// A `tma kvm --json` document, less its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvmDoc {
    /// The whole run.
    pub report: KvmReport,
    /// Each `-I` interval's report (empty without `-I`).
    pub intervals: Vec<KvmReport>,
}

impl KvmDoc {
    /// The document of a run and its intervals.
    pub fn of(report: &KvmReport, intervals: &[KvmReport]) -> KvmDoc {
        KvmDoc {
            report: report.clone(),
            intervals: intervals.to_vec(),
        }
    }
}
