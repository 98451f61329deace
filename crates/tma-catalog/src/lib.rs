//! CPU identification, PMU event encodings and TMA metric-tree definitions, as data.
//!
//! # Design constraints
//! * Pure: no file, sysfs or CPUID access here. Callers read CPUID / `/proc/cpuinfo` and pass
//!   the numbers in; the catalog only answers questions about static tables.
//! * Intel tables under `src/generated/` are produced by `cargo xtask gen-tables` from the
//!   Intel perfmon data (BSD-3-Clause, notice in `src/generated/LICENSE-intel-perfmon`).
//!   They are checked in; `cargo xtask check-tables` (and a test) fails when they are stale.
//! * Hybrid E-core tables (`adl-e` Gracemont, `mtl-e` Crestmont; `cpu_atom` PMU) are
//!   generated too: a hand-written level 1-3 tree in `xtask/src/gen/ecore.rs` (formulas are
//!   facts of the Linux perf `cpu_atom` metrics, re-expressed) joined with the perfmon E-core
//!   event encodings. perfmon itself has no E-core TMA metrics.
//! * AMD Zen 4 / Zen 5 pipeline-utilization tables are hand-written in `src/amd.rs` from the
//!   facts (encodings and formulas) listed in `shared/pmu-data/README.md`, section 5.
//! * Arm Neoverse N1, V1, N2, V2, N3, V3 tables (`src/generated/arm/`, [`Vendor::Arm`]) are
//!   generated from Arm's telemetry specifications (Apache-2.0, notice in
//!   `src/generated/arm/LICENSE-arm-telemetry`) by `xtask/src/gen/arm.rs`: PMUv3 event numbers
//!   (`config` = the number), Arm's decision tree as the tree, its stage-2 groups as drill-down
//!   nodes `PARENT__metric`, the other metrics as helper metrics. [`parse_cpuinfo`] reads the
//!   arm64 `CPU implementer` / `CPU part` lines and [`identify`] picks the core by part.
//!
//! # Formula language (the contract with `tma-metrics`)
//! Every `formula` and `threshold` string in this crate uses one syntax, the perf
//! `MetricExpr` grammar restricted as follows:
//! * numbers (`12`, `0.5`, `1e9`), `+ - * / %`, `< >`, `& | ^` (logical, non-zero is true),
//!   unary minus, parentheses, `A if COND else B`, `min(a, b)`, `max(a, b)`, `d_ratio(a, b)`
//!   (a / b, or 0 when b is 0);
//! * `#name` constants, case-insensitive: `#smt_on`, `#threads` (threads per core),
//!   `#core_wide`, `#num_cpus_online`, `#num_cores`, `#num_sockets`, `#tsc_freq` (Hz),
//!   `#duration_time` (seconds), `#chas_per_socket`;
//! * identifiers `[A-Za-z_][A-Za-z0-9_.]*` followed by zero or more `:modifier`
//!   (`[A-Za-z0-9_=]+`), e.g. `UOPS_RETIRED.MS:c1:e1`, `TOPDOWN.SLOTS:perf_metrics`,
//!   `MEM_LOAD_RETIRED.L3_MISS:retire_latency`. An identifier equal to the `name` of a
//!   [`NodeDef`] or [`MetricDef`] of the same [`Model`] is a reference to that metric's value;
//!   any other identifier is an event id, resolved with [`Model::event`] after stripping
//!   the modifiers (see [`EventId`]).
//!
//! * `TSC` is an event id (kind [`EventKind::Tsc`], perf `msr/tsc/`): the TSC tick count of
//!   ONE CPU over the measurement, i.e. `#tsc_freq * #duration_time` (perfmon's
//!   `SYSTEM_TSC_FREQ` in its tick-count role). Frequency, CPU-utilization and some latency
//!   nodes use it. When counts are summed over N CPUs, the summed `msr/tsc/` is N times it;
//!   an engine may substitute `#tsc_freq * #duration_time` when the TSC was not counted;
//! * the modifiers that occur are `cN` (counter mask), `e1` (edge), `i1` (invert), `u0xNN`
//!   (replace the umask), `SUP` / `USER` (kernel-only / user-only), `perf_metrics` and
//!   `percore` (no effect on the encoding), `ocr_msr_val=0xN` (offcore MSR value, config1) and
//!   `retire_latency` (the operand is the event's average retire latency in cycles, see
//!   [`Model::retire_latencies`]); [`Model::encode`] applies them.
//!
//! There is no `>=`/`<=`/`!`: the converter writes perfmon's `a >= b` as `( ( a < b ) ^ 1 )`.
//! perfmon node names starting with a digit get a leading `_` (`_4K_Aliasing`) so that they
//! are identifiers.
//!
//! Values are in the node's [`Unit`]: TMA nodes are percent of slots (0..100), as in perfmon.

//!
//! # API
//! * [`models`], [`by_name`] (`--cpu NAME`), [`identify`] (CPUID, mapfile rules),
//!   [`parse_cpuinfo`];
//! * [`Model::encode`], [`Model::perf_event_spec`], [`Model::resolve_perf_event`] /
//!   [`Model::resolve_perf_event_all`], [`Model::event_ids`] (module [`encode`]).
//!
//! # Regenerating the Intel tables
//! `cargo xtask gen-tables [--data DIR]` (default `../shared/pmu-data` from the workspace
//! root) rewrites `src/generated/`; `cargo xtask check-tables` exits non-zero when the
//! checked-in files differ from what the converter makes. See `crates/tma-catalog/README.md`.

pub mod amd;
#[rustfmt::skip]
mod amd_events;
pub mod cache;
pub mod conversions;
pub mod descriptions;
pub mod encode;
pub mod error;
pub mod generated;
pub mod registry;
pub mod types;

pub use conversions::{conversion_for, EncodingConversion, ENCODING_CONVERSIONS};
pub use error::CatalogError;
pub use registry::{by_name, cpuid_string, identify, models, parse_cpuinfo, supported_names};
pub use types::*;
