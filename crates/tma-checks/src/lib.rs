//! The checks of the measurement environment over host roots: can this machine count PMU
//! events, what should change for reproducible measurements (the list `tma doctor` prints),
//! and the caveats of group sampling that `tma locate --tree` states ([`tree_caveats`]).
//!
//! Every check reads files under a `/proc` root and a `/sys` root given as parameters
//! ([`Roots`]), so tests run against fake trees. CPUID facts (counters per core type on Intel)
//! come in through [`CpuidFacts`], read live by the caller ([`cpuid::live`]) or taken from a
//! fixture. Nothing here changes the machine: `tma-doctor` applies and restores fixes.

use serde::{Deserialize, Serialize};

mod checks;
pub mod cpuid;

pub use checks::{bracketed, cpu_model, kernel_version, run_checks, tree_caveats};

/// Where `/proc` and `/sys` are: the host-facts roots (`Roots::system()`,
/// `Roots::under(base)`).
pub use tma_host::Host as Roots;

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
    /// `governor`, `boost`, `cstate`, `thp`, `isolation`, `hypervisor`, `tsc`, `sample_read`,
    /// `topdown_group`, `smt_level1`; `vm_memory`
    /// once per VM found, see [`Check::vm_memory`]).
    pub id: &'static str,
    pub status: Status,
    /// One-line finding.
    pub summary: String,
    /// Why it matters.
    pub explanation: String,
    /// The exact command that fixes it, when there is one.
    pub fix: Option<String>,
}

impl Check {
    /// The huge-page backing of one VM's guest memory, judged by the caller (`tma_kvm::memory`
    /// from the VMM's smaps and THP settings): `verdict` is its one line, `fix` what to do.
    pub fn vm_memory(vmm: &str, on_huge_pages: bool, verdict: &str, fix: Option<String>) -> Check {
        Check {
            id: "vm_memory",
            status: if on_huge_pages {
                Status::Ok
            } else {
                Status::Warning
            },
            summary: format!("{vmm}: {verdict}"),
            explanation: "Guest memory on 4 KiB host pages costs the guest more TLB misses and two-dimensional page walks; KVM cannot tell the guest, so this is read from the VMM's smaps (`tma kvm --memory`).".to_string(),
            fix,
        }
    }
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
