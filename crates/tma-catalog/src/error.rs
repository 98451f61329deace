//! Errors of the catalog. Every message says what was wrong and what to do next.

use thiserror::Error;

/// Something the catalog could not answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// `--cpu NAME` named no table we have.
    #[error("unknown CPU name `{name}`; supported names: {supported}")]
    UnknownCpuName { name: String, supported: String },
    /// The CPU identified from CPUID has no table.
    #[error(
        "unsupported CPU {cpuid}{reason}; supported CPUs: {supported}. \
         Pick a table with `--cpu NAME`, or analyse counts recorded elsewhere with `--import FILE`"
    )]
    UnsupportedCpu {
        /// perf-style CPUID string, e.g. `AuthenticAMD-23-31-0`.
        cpuid: String,
        /// Empty, or ` (why)` with a leading space.
        reason: String,
        supported: String,
    },
    /// `/proc/cpuinfo` text without the fields we need.
    #[error("cannot read the CPU identity from cpuinfo: {0}; pass the CPU with `--cpu NAME`")]
    BadCpuinfo(String),
    /// An event id whose base name is not in the model's table.
    #[error("event `{id}` is not in the {model} event table; run `tma events --cpu {model}` to see the expected names")]
    UnknownEvent { model: &'static str, id: String },
    /// An event id with a modifier we do not understand.
    #[error("event `{id}`: unknown or malformed modifier `{modifier}` (known: cN, e0/e1, i0/i1, u0xNN, SUP, USER, perf_metrics, percore, ocr_msr_val=0xN, retire_latency)")]
    BadModifier { id: String, modifier: String },
    /// A perf event spec (from `perf stat` output) that matches no event of the model.
    #[error("perf event `{spec}` matches no event of the {model} tables; run `tma events --cpu {model}` to see the expected names")]
    UnknownPerfEvent { spec: String, model: &'static str },
    /// A perf event spec that cannot be parsed.
    #[error("cannot parse perf event `{spec}`: {why}; run `tma events --cpu {model}` to see the expected forms")]
    BadPerfEvent {
        spec: String,
        why: String,
        model: &'static str,
    },
}
