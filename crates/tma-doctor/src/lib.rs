//! Measurement-environment checks for `tma doctor`: can this machine count PMU events, and
//! what should be changed for reproducible measurements.
//!
//! Every check reads files under a `/proc` root and a `/sys` root given as parameters
//! ([`Roots`]), so tests run against fake trees. CPUID facts (counters per core type on Intel)
//! come in through [`CpuidFacts`], read live by the caller or taken from a fixture. Nothing is
//! changed unless [`apply_fixes`] is called; it records every previous value in a
//! [`FixState`] that [`restore`] writes back.

use serde::{Deserialize, Serialize};

mod checks;
pub mod cpuid;
mod fix;

pub use checks::run_checks;
pub use fix::{apply_fixes, planned_fixes, restore, FixAction, FixState, FixedValue, RootKind};

/// Where `/proc` and `/sys` are: the host-facts roots of `tma_perf` (`Roots::system()`,
/// `Roots::under(base)`).
pub use tma_perf::host::Host as Roots;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warning,
    Problem,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Problem => "problem",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable id (`pmu`, `paranoid`, `rdpmc`, `nmi_watchdog`, `counters`, `hybrid`, `smt`,
    /// `governor`, `boost`, `cstate`, `thp`, `isolation`, `hypervisor`, `tsc`).
    pub id: &'static str,
    pub status: Status,
    /// One-line finding.
    pub summary: String,
    /// Why it matters.
    pub explanation: String,
    /// The exact command that fixes it, when there is one.
    pub fix: Option<String>,
}

/// CPUID facts the checks use (Intel leaf 0xA for counter numbers; vendor).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuidFacts {
    /// `GenuineIntel`, `AuthenticAMD`, ...
    pub vendor: Option<String>,
    /// Leaf 0xA: architectural perfmon version (0 = none visible).
    pub perfmon_version: Option<u32>,
    /// Leaf 0xA: general-purpose counters per logical CPU.
    pub gp_counters: Option<u32>,
    /// Leaf 0xA: fixed-function counters.
    pub fixed_counters: Option<u32>,
    /// TSC rate measured against CLOCK_MONOTONIC (live runs only).
    pub tsc_mhz: Option<f64>,
}

/// All checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoctorReport {
    pub checks: Vec<Check>,
}

impl DoctorReport {
    pub fn get(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Worst status of all checks.
    pub fn worst(&self) -> Status {
        if self.checks.iter().any(|c| c.status == Status::Problem) {
            Status::Problem
        } else if self.checks.iter().any(|c| c.status == Status::Warning) {
            Status::Warning
        } else {
            Status::Ok
        }
    }
}

/// Render as text.
pub fn render(w: &mut dyn std::io::Write, r: &DoctorReport) -> std::io::Result<()> {
    for c in &r.checks {
        writeln!(w, "[{:<7}] {:<12} {}", c.status.label(), c.id, c.summary)?;
        if !c.explanation.trim().is_empty() {
            for line in tma_report::wrap(&c.explanation, &" ".repeat(24), 24 + 92) {
                writeln!(w, "{line}")?;
            }
        }
        if let Some(f) = &c.fix {
            writeln!(w, "{:24}fix: {f}", "")?;
        }
    }
    let (ok, warn, prob) = r
        .checks
        .iter()
        .fold((0, 0, 0), |(a, b, c), x| match x.status {
            Status::Ok => (a + 1, b, c),
            Status::Warning => (a, b + 1, c),
            Status::Problem => (a, b, c + 1),
        });
    writeln!(w)?;
    writeln!(w, "{ok} ok, {warn} warnings, {prob} problems")?;
    Ok(())
}

/// Errors of `--fix` / `--restore`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoctorError {
    #[error("cannot write {path}: {source}; run as root to apply fixes")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read state file {path}: {source}")]
    ReadState {
        path: String,
        source: std::io::Error,
    },
    #[error("state file {path} is not a tma doctor state file: {reason}")]
    BadState { path: String, reason: String },
    #[error("cannot save state file {path}: {reason}; nothing was changed")]
    SaveState { path: String, reason: String },
}
