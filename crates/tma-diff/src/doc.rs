//! The `tma.diff` and `tma.diff-profile` documents: what [`crate::render::json`] and
//! [`crate::render::profile_json`] write (schemas [`crate::render::SCHEMA`] and
//! [`crate::render::PROFILE_SCHEMA`], version 1) and what their readers (`tma report`) read
//! back, one type for both. The envelope (`schema`, `schema_version`) is
//! [`tma_render::JsonEnvelope`]'s; readers check it first ([`tma_render::recognize()`]).
//!
//! Fields that older readers did without are read with their defaults when absent.

use serde::{Deserialize, Serialize};

use crate::profile::{ProfileDiff, ProfileRow, ProfileSide};
use crate::stats::ALPHA;
use crate::{BottleneckMove, Diff, GateResult, Row, Side};

/// A `tma diff --json` document (two trees), less its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffDoc {
    pub before: SideDoc,
    pub after: SideDoc,
    pub significance: TestDoc,
    pub nodes: Vec<Row>,
    #[serde(default)]
    pub metrics: Vec<Row>,
    pub bottleneck: BottleneckMove,
    #[serde(default)]
    pub gates: Vec<GateResult>,
}

/// One run of a [`DiffDoc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideDoc {
    pub file: String,
    pub cpu: CpuDoc,
    pub source: String,
    pub samples: usize,
    /// `whole`, `intervals` or `repeats`.
    pub sample_kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuDoc {
    pub key: String,
    pub name: String,
}

/// The significance test the rows carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestDoc {
    /// `welch_t_two_sided`.
    pub test: String,
    pub alpha: f64,
}

impl SideDoc {
    fn of(s: &Side) -> SideDoc {
        SideDoc {
            file: s.file.clone(),
            cpu: CpuDoc {
                key: s.cpu_key.clone(),
                name: s.cpu_name.clone(),
            },
            source: s.source.clone(),
            samples: s.samples,
            sample_kind: s.sample_kind.to_string(),
        }
    }
}

impl DiffDoc {
    /// The document of a diff.
    pub fn of(d: &Diff) -> DiffDoc {
        DiffDoc {
            before: SideDoc::of(&d.before),
            after: SideDoc::of(&d.after),
            significance: TestDoc {
                test: "welch_t_two_sided".into(),
                alpha: ALPHA,
            },
            nodes: d.nodes.clone(),
            metrics: d.metrics.clone(),
            bottleneck: d.bottleneck.clone(),
            gates: d.gates.clone(),
        }
    }
}

/// A `tma diff --json` document of two profiles, less its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileDiffDoc {
    pub before: ProfileSideDoc,
    pub after: ProfileSideDoc,
    /// Sorted by |delta|, largest first.
    pub functions: Vec<ProfileRow>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One profile of a [`ProfileDiffDoc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSideDoc {
    pub file: String,
    /// `perf.data` or `tma.locate`.
    #[serde(default)]
    pub kind: String,
    pub event: String,
    pub samples: u64,
}

impl ProfileSideDoc {
    fn of(s: &ProfileSide) -> ProfileSideDoc {
        ProfileSideDoc {
            file: s.file.clone(),
            kind: s.kind.to_string(),
            event: s.event.clone(),
            samples: s.samples,
        }
    }
}

impl ProfileDiffDoc {
    /// The document of a profile diff.
    pub fn of(d: &ProfileDiff) -> ProfileDiffDoc {
        ProfileDiffDoc {
            before: ProfileSideDoc::of(&d.before),
            after: ProfileSideDoc::of(&d.after),
            functions: d.rows.clone(),
            notes: d.notes(),
        }
    }
}
