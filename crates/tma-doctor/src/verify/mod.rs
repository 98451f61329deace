//! `tma doctor --verify`: known-answer checks of the counting path.
//!
//! Two halves, joined by [`Recorded`] (the counts, serializable):
//! * [`measure`] takes the counts on this machine: software events of the calling thread
//!   against what the kernel reports by other means (thread CPU time, `getrusage`), and,
//!   when a hardware PMU can be opened, JIT-built loops (`tma_bench::jitloop`) whose retired
//!   instructions and branches are known exactly, counted user-only around the call through
//!   `tma_perf::selfcount` (our own perf_event_open path), plus the same loop under more
//!   counters than the PMU has (multiplexing);
//! * [`judge`] turns counts into a pass/fail table. It never measures, so it is tested with
//!   recorded counts (`--replay FILE`, written by `--record FILE` on a capable machine).

mod judgement;
mod loops;
mod measuring;
mod table;
pub mod tolerance;

pub use judgement::judge;
pub use loops::{run_kernel, run_loop, KernelSpec, LoopSpec, CHASE_BYTES, KERNELS, LOOPS, UNROLL};
pub use measuring::{level1_nodes, measure, measure_level1, parse_perf_stat_csv};
pub use table::render;

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};

/// Schema of the recorded counts file (`--record` / `--replay`).
pub const RECORDED_SCHEMA: &str = "tma.doctor.verify";
pub const RECORDED_SCHEMA_VERSION: u32 = 1;
/// The schema name of `tma doctor --verify --json`, the pass/fail report.
pub const REPORT_SCHEMA: &str = "tma.doctor.verify-report";
/// Its version: 2 since schema names 2026-11 (version 1 was named
/// `tma.doctor.verify_report`).
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// Everything [`judge`] needs, as measured (or recorded elsewhere).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// Where the counts come from (`live` or a file's description).
    #[serde(default)]
    pub source: String,
    /// Why hardware counting was not possible (None: it was).
    #[serde(default)]
    pub no_pmu: Option<String>,
    #[serde(default)]
    pub software: Option<SoftwareCounts>,
    /// Exact-count loops.
    #[serde(default)]
    pub loops: Vec<LoopCounts>,
    #[serde(default)]
    pub multiplex: Option<MultiplexCounts>,
    /// Level-1 (and the Backend_Bound split) of kernels with a known character.
    #[serde(default)]
    pub level1: Vec<Level1Counts>,
    /// The same loops counted by `perf stat`.
    #[serde(default)]
    pub perf: Vec<PerfCounts>,
    /// Why `perf stat` was not compared (not installed, cannot count).
    #[serde(default)]
    pub perf_skipped: Option<String>,
    /// Why the level-1 kernels were not measured (no TMA tables for this CPU, ...).
    #[serde(default)]
    pub level1_skipped: Option<String>,
    /// Set when SIGINT or SIGTERM stopped the measurement: which signal, and the step it
    /// stopped before. The steps before it were measured and are judged; the rest are not.
    #[serde(default)]
    pub interrupted: Option<String>,
}

/// Software events against the kernel's other accounts of the same thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftwareCounts {
    /// task-clock over a busy loop, and the thread CPU time over it.
    pub task_clock_ns: u64,
    pub thread_cpu_ns: u64,
    /// The wall time of that loop (0 in recordings made before it was kept). task-clock
    /// runs while the task is on its (virtual) CPU, including time the hypervisor took the
    /// CPU away, which the thread's CPU time leaves out: on a loaded host it lies between
    /// the two.
    #[serde(default)]
    pub wall_ns: u64,
    /// 1 ms sleeps, context-switches counted over them, and getrusage's switches.
    pub sleeps: u64,
    pub context_switches: u64,
    pub rusage_switches: u64,
    /// Fresh 4 KiB pages touched once each, page-faults counted, getrusage's minor faults.
    pub pages: u64,
    pub page_faults: u64,
    pub rusage_minor_faults: u64,
}

/// One loop run for two iteration counts, with its exact per-iteration counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopCounts {
    pub name: String,
    /// Retired instructions and branches per iteration, by construction.
    pub per_iter_instructions: u64,
    pub per_iter_branches: u64,
    pub iters: [u64; 2],
    /// instructions:u and branches:u for each iteration count (fewest of the repetitions).
    pub instructions: [u64; 2],
    pub branches: [u64; 2],
}

/// One event of the multiplexing check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scaled {
    pub event: String,
    /// The exact count of the run, from the loop model.
    pub expected: u64,
    pub value: u64,
    pub time_enabled: u64,
    pub time_running: u64,
}

impl Scaled {
    /// `value * enabled / running`, as `tma stat` scales (None when it never ran).
    pub fn scaled(&self) -> Option<f64> {
        (self.time_running > 0)
            .then(|| self.value as f64 * self.time_enabled as f64 / self.time_running as f64)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MultiplexCounts {
    pub counters: Vec<Scaled>,
}

/// TMA node percentages of a kernel with a known character.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Level1Counts {
    /// `imul_chain`, `pointer_chase_1g`, `random_branch`.
    pub kernel: String,
    /// The node that must dominate: `Core_Bound`, `Memory_Bound`, `Bad_Speculation`.
    pub expect: String,
    /// Node -> percent of slots: the four level-1 nodes, and Core_Bound / Memory_Bound.
    pub nodes: BTreeMap<String, f64>,
}

/// instructions:u of the same loop by `perf stat` and by us, each for two iteration counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerfCounts {
    pub name: String,
    pub per_iter_instructions: u64,
    pub iters: [u64; 2],
    pub ours: [u64; 2],
    pub perf: [u64; 2],
}

/// Outcome of one verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// Not checked here (no PMU, perf not installed); says why.
    Skip,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyRow {
    /// `software.task_clock`, `exact.add_loop.instructions`, `multiplex`, `level1.sum`, ...
    pub id: String,
    pub expected: String,
    pub measured: String,
    pub verdict: Verdict,
    /// Why it failed or was skipped (empty when it passed).
    pub reason: String,
}

/// The pass/fail table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    pub source: String,
    /// Whether hardware counting was verified (false: software path only).
    pub hardware: bool,
    pub rows: Vec<VerifyRow>,
    pub notes: Vec<String>,
}

impl VerifyReport {
    pub fn failed(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Verdict::Fail)
    }
}

/// Read recorded counts (`--replay FILE`): the `tma.doctor.verify` v1 document.
pub fn parse_recorded(bytes: &[u8]) -> Result<Recorded, String> {
    #[derive(Deserialize)]
    struct Doc {
        schema: String,
        schema_version: u32,
        #[serde(flatten)]
        rec: Recorded,
    }
    let doc: Doc = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if doc.schema != RECORDED_SCHEMA || doc.schema_version != RECORDED_SCHEMA_VERSION {
        return Err(format!(
            "schema {} v{}, expected {RECORDED_SCHEMA} v{RECORDED_SCHEMA_VERSION} \
             (written by `tma doctor --verify --record FILE`)",
            doc.schema, doc.schema_version
        ));
    }
    Ok(doc.rec)
}

/// Write recorded counts (`--record FILE`).
pub fn write_recorded(w: &mut dyn io::Write, r: &Recorded) -> Result<(), tma_render::OutputError> {
    tma_render::write_json(w, RECORDED_SCHEMA, RECORDED_SCHEMA_VERSION, r)
}
