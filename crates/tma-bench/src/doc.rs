//! The `tma.bench` document: what [`crate::render::json`] writes (schema
//! [`crate::render::JSON_SCHEMA`], version [`crate::render::JSON_SCHEMA_VERSION`]) and what its
//! readers (`tma report`) read back, one type for both. The envelope (`schema`,
//! `schema_version`) is [`tma_render::JsonEnvelope`]'s; readers check it first
//! ([`tma_render::recognize()`]).
//!
//! Fields that older readers did without are read with their defaults when absent.

use serde::{Deserialize, Serialize};

use crate::compare::CompareRow;
use crate::{BenchOutcome, FormReport, InputError, ShaReport};

/// A `tma bench --json` document, less its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchDoc {
    /// Each input measured.
    pub forms: Vec<FormReport>,
    /// Inputs of a `--file` list that failed.
    #[serde(default)]
    pub errors: Vec<InputError>,
    /// The `--preset sha` report, or null.
    #[serde(default)]
    pub sha: Option<ShaReport>,
    /// The comparison with `--compare` reference values (empty without them).
    #[serde(default)]
    pub compare: Vec<CompareRow>,
    /// `"SIGINT"` or `"SIGTERM"` when the run was stopped by it (the forms are those measured
    /// before); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

impl BenchDoc {
    /// The document of a run.
    pub fn of(o: &BenchOutcome) -> BenchDoc {
        BenchDoc {
            forms: o.forms.clone(),
            errors: o.errors.clone(),
            sha: o.sha.clone(),
            compare: o.compare.clone().unwrap_or_default(),
            interrupted: o.interrupted.map(|s| s.name().to_string()),
        }
    }
}
