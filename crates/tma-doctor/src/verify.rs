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

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};
use tma_perf::event::SoftwareEvent;
use tma_perf::selfcount::{self, SelfGroup};

use tma_bench::jitloop::{JitLoop, LoopBody, DEFAULT_MEM, MAX_MEM};

use crate::verify_sys;

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

/// `Some(what to record)` when a signal asked the run to stop, before `step`.
fn stop_before(step: &str) -> Option<String> {
    tma_sys::signal::interrupted().map(|sig| format!("{} before {step}", sig.name()))
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

/// Tolerances, in one place.
pub mod tolerance {
    /// task-clock vs thread CPU time: relative, plus an absolute allowance for the reads.
    pub const TASK_CLOCK_REL: f64 = 0.02;
    pub const TASK_CLOCK_ABS_NS: u64 = 500_000;
    /// Context switches and page faults against getrusage.
    pub const RUSAGE_SLACK: u64 = 2;
    /// Page faults beyond the pages touched (the stack, the counter read path).
    pub const FAULT_EXTRA: u64 = 16;
    /// Fixed instructions of the harness and the enable/disable path per run (prologue,
    /// epilogue, ioctl wrappers): the intercept may not exceed this.
    pub const HARNESS_INSTRUCTIONS: u64 = 400;
    pub const HARNESS_BRANCHES: u64 = 100;
    /// Instruction counts may gain one per interrupt on some parts: this many per 10^7.
    pub const PER_TEN_MILLION: u64 = 1;
    /// Multiplexed (scaled) totals against the exact count.
    pub const MULTIPLEX_REL: f64 = 0.01;
    /// Level 1 sums to 100 within this many points.
    pub const LEVEL1_SUM_POINTS: f64 = 1.0;
    /// A kernel's expected node must reach this percent of slots.
    pub const KERNEL_NODE_MIN: f64 = 30.0;
    /// perf stat against our count per iteration, relative.
    pub const PERF_REL: f64 = 1e-4;
}

fn row(
    id: impl Into<String>,
    expected: String,
    measured: String,
    ok: bool,
    why: String,
) -> VerifyRow {
    VerifyRow {
        id: id.into(),
        expected,
        measured,
        verdict: if ok { Verdict::Pass } else { Verdict::Fail },
        reason: if ok { String::new() } else { why },
    }
}

fn skip(id: impl Into<String>, why: impl Into<String>) -> VerifyRow {
    VerifyRow {
        id: id.into(),
        expected: String::new(),
        measured: String::new(),
        verdict: Verdict::Skip,
        reason: why.into(),
    }
}

/// Judge recorded counts.
pub fn judge(r: &Recorded) -> VerifyReport {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    match &r.software {
        Some(s) => judge_software(s, &mut rows),
        None => rows.push(skip("software", "no software counts recorded")),
    }
    if let Some(why) = &r.interrupted {
        rows.push(skip("interrupted", format!("stopped by {why}")));
        notes.push(format!(
            "interrupted ({why}): the checks from that step on were not run; the rows above \
             it are judged as measured"
        ));
    }
    let hardware = r.no_pmu.is_none();
    if let Some(why) = &r.no_pmu {
        notes.push(format!(
            "no hardware PMU here ({why}): only the software counting path was verified; \
             run `tma doctor --verify` on a machine with a PMU for the exact-count, \
             multiplexing and level-1 checks"
        ));
        for id in ["exact", "multiplex", "level1"] {
            rows.push(skip(id, "no hardware PMU"));
        }
    } else {
        if r.loops.is_empty() && r.interrupted.is_none() {
            rows.push(row(
                "exact",
                "loop counts".into(),
                "none".into(),
                false,
                "the PMU opened but no loop was counted".into(),
            ));
        }
        for l in &r.loops {
            judge_loop(l, &mut rows);
        }
        match &r.multiplex {
            Some(m) => judge_multiplex(m, &mut rows),
            None if r.interrupted.is_some() => rows.push(skip("multiplex", "interrupted")),
            None => rows.push(skip("multiplex", "not measured")),
        }
        if r.level1.is_empty() {
            rows.push(match &r.level1_skipped {
                Some(why) => skip("level1", why.clone()),
                None if r.interrupted.is_some() => skip("level1", "interrupted"),
                None => row(
                    "level1",
                    "three kernels".into(),
                    "none".into(),
                    false,
                    "no level-1 result was recorded".into(),
                ),
            });
        }
        for k in &r.level1 {
            judge_level1(k, &mut rows);
        }
    }
    for p in &r.perf {
        judge_perf(p, &mut rows);
    }
    if let Some(why) = &r.perf_skipped {
        rows.push(skip("perf", why.clone()));
    }
    VerifyReport {
        source: r.source.clone(),
        hardware,
        rows,
        notes,
    }
}

fn judge_software(s: &SoftwareCounts, rows: &mut Vec<VerifyRow>) {
    use tolerance::*;
    let allowed = (s.thread_cpu_ns as f64 * TASK_CLOCK_REL) as u64 + TASK_CLOCK_ABS_NS;
    let diff = s.task_clock_ns.abs_diff(s.thread_cpu_ns);
    if s.wall_ns > 0 {
        // Between the thread's CPU time (less the allowance) and the loop's wall time: a
        // single task cannot be on its CPU longer than the time that passed.
        let low = s.thread_cpu_ns.saturating_sub(allowed);
        let high = s.wall_ns.max(s.thread_cpu_ns) + allowed;
        let ok = s.thread_cpu_ns > 0 && (low..=high).contains(&s.task_clock_ns);
        rows.push(row(
            "software.task_clock",
            format!(
                "{low}..{high} ns (thread CPU time {} .. wall time {}, ± {allowed})",
                s.thread_cpu_ns, s.wall_ns
            ),
            format!("{} ns", s.task_clock_ns),
            ok,
            if s.task_clock_ns < low {
                format!("task-clock is {diff} ns under the thread's CPU time")
            } else {
                format!(
                    "task-clock is {} ns over the loop's wall time: it counted time the task \
                     was not running",
                    s.task_clock_ns
                        .saturating_sub(s.wall_ns.max(s.thread_cpu_ns))
                )
            },
        ));
    } else {
        rows.push(row(
            "software.task_clock",
            format!("{} ns (thread CPU time) ± {allowed}", s.thread_cpu_ns),
            format!("{} ns", s.task_clock_ns),
            s.thread_cpu_ns > 0 && diff <= allowed,
            format!("task-clock is {diff} ns away from the thread's CPU time"),
        ));
    }
    let cs_ok = s.context_switches >= s.sleeps
        && s.context_switches.abs_diff(s.rusage_switches) <= RUSAGE_SLACK;
    rows.push(row(
        "software.context_switches",
        format!(
            ">= {} sleeps, = getrusage {} ± {RUSAGE_SLACK}",
            s.sleeps, s.rusage_switches
        ),
        s.context_switches.to_string(),
        cs_ok,
        if s.context_switches < s.sleeps {
            format!(
                "fewer context switches than sleeps ({} < {})",
                s.context_switches, s.sleeps
            )
        } else {
            format!(
                "getrusage counted {} switches, the counter {}",
                s.rusage_switches, s.context_switches
            )
        },
    ));
    let pf_ok = s.page_faults >= s.pages
        && s.page_faults <= s.pages + FAULT_EXTRA
        && s.page_faults.abs_diff(s.rusage_minor_faults) <= RUSAGE_SLACK;
    rows.push(row(
        "software.page_faults",
        format!(
            "{}..{} (one per fresh page), = getrusage {} ± {RUSAGE_SLACK}",
            s.pages,
            s.pages + FAULT_EXTRA,
            s.rusage_minor_faults
        ),
        s.page_faults.to_string(),
        pf_ok,
        if s.page_faults < s.pages || s.page_faults > s.pages + FAULT_EXTRA {
            format!("{} faults for {} fresh pages", s.page_faults, s.pages)
        } else {
            format!(
                "getrusage counted {} minor faults, the counter {}",
                s.rusage_minor_faults, s.page_faults
            )
        },
    ));
}

/// One event of a loop: the difference between the two runs must be exactly the model's,
/// and the intercept (the harness) small and non-negative.
fn judge_exact(
    id: String,
    per_iter: u64,
    iters: [u64; 2],
    counts: [u64; 2],
    harness_max: u64,
    rows: &mut Vec<VerifyRow>,
) {
    let di = iters[1].saturating_sub(iters[0]);
    let want = di * per_iter;
    let got = counts[1] as i128 - counts[0] as i128;
    let slack = (want / 10_000_000) * tolerance::PER_TEN_MILLION;
    let intercept = counts[0] as i128 - (iters[0] * per_iter) as i128;
    let diff_ok = (got - want as i128).unsigned_abs() <= slack as u128;
    let intercept_ok = (0..=harness_max as i128).contains(&intercept);
    let why = if !diff_ok {
        format!(
            "{} more iterations gave {got}, not {want} = {di} x {per_iter}",
            di
        )
    } else {
        format!(
            "the harness adds {intercept} (expected 0..={harness_max}): counts include \
             something other than the loop"
        )
    };
    rows.push(row(
        id,
        format!("{want} (+{di} iterations x {per_iter}), harness 0..={harness_max}"),
        format!("{got}, harness {intercept}"),
        diff_ok && intercept_ok,
        why,
    ));
}

fn judge_loop(l: &LoopCounts, rows: &mut Vec<VerifyRow>) {
    judge_exact(
        format!("exact.{}.instructions", l.name),
        l.per_iter_instructions,
        l.iters,
        l.instructions,
        tolerance::HARNESS_INSTRUCTIONS,
        rows,
    );
    judge_exact(
        format!("exact.{}.branches", l.name),
        l.per_iter_branches,
        l.iters,
        l.branches,
        tolerance::HARNESS_BRANCHES,
        rows,
    );
}

fn judge_multiplex(m: &MultiplexCounts, rows: &mut Vec<VerifyRow>) {
    let multiplexed = m.counters.iter().any(|c| c.time_running < c.time_enabled);
    if !multiplexed {
        rows.push(row(
            "multiplex",
            "some counters multiplexed (running < enabled)".into(),
            format!("{} counters, all always running", m.counters.len()),
            false,
            "the kernel scheduled every counter all the time: more counters than the PMU has \
             should have forced multiplexing (is the NMI watchdog off and the PMU larger than \
             expected?)"
                .into(),
        ));
        return;
    }
    let mut worst: Option<(f64, &Scaled)> = None;
    for c in &m.counters {
        let err = match c.scaled() {
            Some(s) => (s - c.expected as f64).abs() / (c.expected.max(1) as f64),
            None => f64::INFINITY,
        };
        if worst.is_none_or(|(w, _)| err > w) {
            worst = Some((err, c));
        }
    }
    let Some((err, c)) = worst else { return };
    rows.push(row(
        "multiplex",
        format!(
            "{} scaled totals within {}% of exact",
            m.counters.len(),
            tolerance::MULTIPLEX_REL * 100.0
        ),
        format!("worst {:.3}% ({})", err * 100.0, c.event),
        err <= tolerance::MULTIPLEX_REL,
        match c.scaled() {
            Some(s) => format!(
                "{} scaled to {s:.0} ({} x {}/{}) against exactly {}",
                c.event, c.value, c.time_enabled, c.time_running, c.expected
            ),
            None => format!("{} never ran", c.event),
        },
    ));
}

const LEVEL1: [&str; 4] = [
    "Frontend_Bound",
    "Bad_Speculation",
    "Backend_Bound",
    "Retiring",
];

fn judge_level1(k: &Level1Counts, rows: &mut Vec<VerifyRow>) {
    let missing: Vec<&str> = LEVEL1
        .iter()
        .copied()
        .filter(|n| !k.nodes.contains_key(*n))
        .collect();
    if !missing.is_empty() {
        rows.push(row(
            format!("level1.{}.sum", k.kernel),
            "four level-1 nodes".into(),
            format!("missing {}", missing.join(", ")),
            false,
            "level 1 is incomplete".into(),
        ));
        return;
    }
    let sum: f64 = LEVEL1.iter().map(|n| k.nodes[*n]).sum();
    rows.push(row(
        format!("level1.{}.sum", k.kernel),
        format!("100% ± {}", tolerance::LEVEL1_SUM_POINTS),
        format!("{sum:.1}%"),
        (sum - 100.0).abs() <= tolerance::LEVEL1_SUM_POINTS,
        format!("level 1 sums to {sum:.1}%, not 100%"),
    ));
    // The rivals of the expected node: the other level-1 nodes (for Core/Memory_Bound,
    // whose parent is Backend_Bound, the sibling instead of the parent).
    let rivals: Vec<&str> = match k.expect.as_str() {
        "Core_Bound" => vec![
            "Frontend_Bound",
            "Bad_Speculation",
            "Retiring",
            "Memory_Bound",
        ],
        "Memory_Bound" => vec![
            "Frontend_Bound",
            "Bad_Speculation",
            "Retiring",
            "Core_Bound",
        ],
        e => LEVEL1.iter().copied().filter(|n| *n != e).collect(),
    };
    let Some(&got) = k.nodes.get(&k.expect) else {
        rows.push(row(
            format!("level1.{}.{}", k.kernel, k.expect),
            format!("{} high", k.expect),
            "missing".into(),
            false,
            format!("no {} value", k.expect),
        ));
        return;
    };
    let top_rival = rivals
        .iter()
        .filter_map(|n| k.nodes.get(*n).map(|v| (*n, *v)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let beats = top_rival.is_none_or(|(_, v)| got > v);
    let ok = got >= tolerance::KERNEL_NODE_MIN && beats;
    rows.push(row(
        format!("level1.{}.{}", k.kernel, k.expect),
        format!(
            "{} >= {}% and above {}",
            k.expect,
            tolerance::KERNEL_NODE_MIN,
            rivals.join("/")
        ),
        format!("{got:.1}%"),
        ok,
        match top_rival {
            Some((n, v)) if !beats => format!("{n} is higher ({v:.1}%)"),
            _ => format!("{} is only {got:.1}%", k.expect),
        },
    ));
}

fn judge_perf(p: &PerfCounts, rows: &mut Vec<VerifyRow>) {
    let di = p.iters[1].saturating_sub(p.iters[0]).max(1) as f64;
    let ours = (p.ours[1] as f64 - p.ours[0] as f64) / di;
    let perf = (p.perf[1] as f64 - p.perf[0] as f64) / di;
    let rel = (ours - perf).abs() / perf.abs().max(1.0);
    rows.push(row(
        format!("perf.{}", p.name),
        format!(
            "perf stat = ours per iteration ({} by construction)",
            p.per_iter_instructions
        ),
        format!("ours {ours:.3}, perf {perf:.3}"),
        rel <= tolerance::PERF_REL,
        format!("per iteration we count {ours:.3}, perf stat {perf:.3}"),
    ));
}

// ---------------------------------------------------------------------------------------
// Measuring.

/// A loop: `copy` (encoded instructions, with how many of them are branches) unrolled
/// `UNROLL` times, plus the harness's `dec r15; jnz` per iteration.
pub struct LoopSpec {
    pub name: &'static str,
    pub copy: &'static [&'static [u8]],
    pub branches_per_copy: u64,
}

/// Copies per iteration.
pub const UNROLL: u64 = 100;

/// `add rax, rbx` (48 01 d8).
const ADD_RAX_RBX: &[u8] = &[0x48, 0x01, 0xd8];
/// `jmp short $+2`: a taken branch to the next instruction (eb 00).
const JMP_NEXT: &[u8] = &[0xeb, 0x00];

/// The exact-count loops.
pub const LOOPS: [LoopSpec; 2] = [
    LoopSpec {
        name: "add_loop",
        copy: &[ADD_RAX_RBX],
        branches_per_copy: 0,
    },
    LoopSpec {
        name: "add_jmp_loop",
        copy: &[ADD_RAX_RBX, JMP_NEXT],
        branches_per_copy: 1,
    },
];

impl LoopSpec {
    pub fn per_iter_instructions(&self) -> u64 {
        UNROLL * self.copy.len() as u64 + 2
    }

    pub fn per_iter_branches(&self) -> u64 {
        UNROLL * self.branches_per_copy + 1
    }

    /// What runs: the copy, unrolled [`UNROLL`] times, no register init, the default buffer.
    pub fn body(&self) -> LoopBody<'static> {
        LoopBody {
            copy: self.copy,
            unroll: UNROLL as usize,
            init: &[],
            mem: DEFAULT_MEM,
            chase: None,
        }
    }

    /// The harness image bytes ([`LoopBody::image`]).
    pub fn image(&self) -> io::Result<Vec<u8>> {
        self.body().image()
    }

    fn load(&self) -> io::Result<JitLoop> {
        verify_sys::load(&self.body())
    }
}

/// Iteration counts of the exact check, and repetitions (the fewest counts are kept: an
/// interrupt can only add).
const EXACT_ITERS: [u64; 2] = [1_000, 101_000];
const REPEAT: usize = 3;
/// Iterations and counters of the multiplexing run (about 0.1-0.3 s).
const MUX_ITERS: u64 = 2_000_000;
const MUX_COUNTERS: usize = 12;

/// Run one of [`LOOPS`] for `iters` iterations (`tma doctor --run-loop NAME --iters N`: the
/// process `perf stat` counts for the side-by-side check).
pub fn run_loop(name: &str, iters: u64) -> io::Result<()> {
    let spec = LOOPS.iter().find(|l| l.name == name).ok_or_else(|| {
        let names: Vec<&str> = LOOPS.iter().map(|l| l.name).collect();
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no loop {name:?}: choose from {}", names.join(", ")),
        )
    })?;
    spec.load()?.run(iters.max(1));
    Ok(())
}

/// A kernel of known character for the level-1 check.
pub struct KernelSpec {
    pub name: &'static str,
    /// The node that must dominate.
    pub expect: &'static str,
    copy: &'static [&'static [u8]],
    /// Harness iterations for about a second.
    iters: u64,
}

/// `imul rax, rax` (48 0f af c0): each result feeds the next.
const IMUL_RAX_RAX: &[u8] = &[0x48, 0x0f, 0xaf, 0xc0];
/// `mov rax, [rax]` (48 8b 00): each load's address is the previous load's value.
const LOAD_RAX_RAX: &[u8] = &[0x48, 0x8b, 0x00];
/// `imul rax, rbx` (48 0f af c3), `add rax, rcx` (48 01 c8): a 64-bit LCG step.
const LCG_MUL: &[u8] = &[0x48, 0x0f, 0xaf, 0xc3];
const LCG_ADD: &[u8] = &[0x48, 0x01, 0xc8];
/// `bt rax, 63` (48 0f ba e0 3f), `jc $+2` (72 00): a branch taken on a random bit.
const BT_RAX_63: &[u8] = &[0x48, 0x0f, 0xba, 0xe0, 0x3f];
const JC_NEXT: &[u8] = &[0x72, 0x00];

/// Bytes of the pointer-chase buffer (the bench's largest `--mem`).
pub const CHASE_BYTES: usize = MAX_MEM;

pub const KERNELS: [KernelSpec; 3] = [
    KernelSpec {
        name: "imul_chain",
        expect: "Core_Bound",
        copy: &[IMUL_RAX_RAX],
        iters: 10_000_000,
    },
    KernelSpec {
        name: "pointer_chase_1g",
        expect: "Memory_Bound",
        copy: &[LOAD_RAX_RAX],
        // 3e7 dependent loads, a few seconds: longer than building the cycle.
        iters: 300_000,
    },
    KernelSpec {
        name: "random_branch",
        expect: "Bad_Speculation",
        copy: &[LCG_MUL, LCG_ADD, BT_RAX_63, JC_NEXT],
        iters: 1_000_000,
    },
];

/// Run one of [`KERNELS`] for about a second (`tma doctor --run-kernel NAME`: the process
/// `tma stat` counts for the level-1 check).
pub fn run_kernel(name: &str) -> io::Result<()> {
    let spec = KERNELS.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no kernel {name:?}: choose from {}", names.join(", ")),
        )
    })?;
    let (init, mem, chase): (&[(&str, u64)], usize, Option<&str>) = match spec.name {
        "pointer_chase_1g" => (&[], CHASE_BYTES, Some("rax")),
        "random_branch" => (
            &[
                ("rax", 0x1234_5678_9abc_def1),
                ("rbx", 6_364_136_223_846_793_005),
                ("rcx", 1_442_695_040_888_963_407),
            ],
            DEFAULT_MEM,
            None,
        ),
        _ => (&[("rax", 3)], DEFAULT_MEM, None),
    };
    // The pointer chase follows the bench's ring: one pointer per line, a random single cycle
    // from the first line.
    let body = LoopBody {
        copy: spec.copy,
        unroll: UNROLL as usize,
        init,
        mem,
        chase,
    };
    verify_sys::load(&body)?.run(spec.iters);
    Ok(())
}

/// The percent-of-slots nodes of a `tma.stat` JSON document, under the names the checks use
/// (`tma_core_bound` and Zen's `backend_bound_cpu` are both `Core_Bound`).
pub fn level1_nodes(stat_json: &[u8]) -> Result<BTreeMap<String, f64>, String> {
    let v: serde_json::Value = serde_json::from_slice(stat_json).map_err(|e| e.to_string())?;
    let nodes = v["intervals"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|i| i["nodes"].as_array())
        .ok_or("the tma.stat document has no intervals with nodes")?;
    let mut out = BTreeMap::new();
    for n in nodes {
        let (Some(name), Some(value)) = (n["name"].as_str(), n["value"].as_f64()) else {
            continue;
        };
        let canonical = match name.trim_start_matches("tma_") {
            "frontend_bound" => "Frontend_Bound",
            "bad_speculation" => "Bad_Speculation",
            "backend_bound" => "Backend_Bound",
            "retiring" => "Retiring",
            "core_bound" | "backend_bound_cpu" => "Core_Bound",
            "memory_bound" | "backend_bound_memory" => "Memory_Bound",
            _ => continue,
        };
        out.insert(canonical.to_string(), value);
    }
    Ok(out)
}

/// `tma stat -l 2` of each kernel (`exe doctor --run-kernel NAME`), in process, with the
/// given backend (perf_event_open, or chosen counts in tests).
pub fn measure_level1(
    exe: &std::path::Path,
    backend: tma_stat::BackendChoice,
    cpu: Option<String>,
    host: tma_host::Host,
) -> Result<Vec<Level1Counts>, String> {
    let mut out = Vec::new();
    for k in &KERNELS {
        if let Some(sig) = tma_sys::signal::interrupted() {
            return Err(format!(
                "interrupted by {} before the kernel {}",
                sig.name(),
                k.name
            ));
        }
        let cfg = tma_stat::StatConfig {
            cpu: cpu.clone(),
            level: 2,
            render: tma_stat::RenderOptions {
                format: tma_stat::Format::Json,
                verbose: 1,
                ..tma_stat::RenderOptions::default()
            },
            input: tma_stat::Input::Live(tma_stat::LiveOptions {
                target: tma_stat::LiveTarget::Command(vec![
                    exe.as_os_str().to_owned(),
                    "doctor".into(),
                    "--run-kernel".into(),
                    k.name.into(),
                ]),
                backend: backend.clone(),
                command_stdout: tma_perf::process::CommandStdout::Null,
                ..tma_stat::LiveOptions::default()
            }),
            host: host.clone(),
            ..tma_stat::StatConfig::default()
        };
        let mut json = Vec::new();
        let mut sink = tma_stat::TreeOutput::new(&mut json, &cfg.render);
        tma_stat::run(&cfg, &mut sink, &mut std::io::sink())
            .map_err(|e| format!("tma stat -l 2 of {}: {e}", k.name))?;
        out.push(Level1Counts {
            kernel: k.name.into(),
            expect: k.expect.into(),
            nodes: level1_nodes(&json)?,
        });
    }
    Ok(out)
}

/// The first field of `perf stat -x,` output for an event: its count, or why there is none.
pub fn parse_perf_stat_csv(text: &str, event: &str) -> Result<u64, String> {
    let line = text
        .lines()
        .find(|l| l.split(',').nth(2).is_some_and(|e| e.starts_with(event)))
        .ok_or_else(|| format!("perf stat printed no {event} line"))?;
    let first = line.split(',').next().unwrap_or("").trim();
    first
        .parse::<u64>()
        .map_err(|_| format!("perf stat could not count {event} ({first})"))
}

/// `perf stat -x, -e instructions:u` of `exe doctor --run-loop NAME --iters N`, for the two
/// iteration counts of each exact loop.
fn measure_perf(exe: &std::path::Path, loops: &[LoopCounts]) -> Result<Vec<PerfCounts>, String> {
    let mut out = Vec::new();
    for l in loops {
        let mut perf = [0u64; 2];
        for (k, &iters) in l.iters.iter().enumerate() {
            let o = std::process::Command::new("perf")
                .args(["stat", "-x,", "-e", "instructions:u", "--"])
                .arg(exe)
                .args([
                    "doctor",
                    "--run-loop",
                    &l.name,
                    "--iters",
                    &iters.to_string(),
                ])
                .output()
                .map_err(|e| format!("perf is not installed or cannot run ({e})"))?;
            if !o.status.success() {
                return Err(format!(
                    "perf stat failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            perf[k] = parse_perf_stat_csv(&String::from_utf8_lossy(&o.stderr), "instructions")?;
        }
        out.push(PerfCounts {
            name: l.name.clone(),
            per_iter_instructions: l.per_iter_instructions,
            iters: l.iters,
            ours: l.instructions,
            perf,
        });
    }
    Ok(out)
}

/// Take the counts on this machine (`exe`: this program, for `perf stat` to run the loops;
/// `None` skips the perf comparison). Errors only when even software counting of this
/// thread is impossible.
pub fn measure(exe: Option<&std::path::Path>) -> io::Result<Recorded> {
    let software = measure_software()?;
    let mut rec = Recorded {
        source: "live".into(),
        software: Some(software),
        ..Recorded::default()
    };
    if let Some(at) = stop_before("the hardware checks") {
        rec.interrupted = Some(at);
        return Ok(rec);
    }
    let hw = [
        selfcount::hardware(selfcount::HW_INSTRUCTIONS, true),
        selfcount::hardware(selfcount::HW_BRANCH_INSTRUCTIONS, true),
    ];
    let group = match SelfGroup::open(&hw) {
        Ok(g) => g,
        Err(e) => {
            rec.no_pmu = Some(format!(
                "perf_event_open of instructions:u and branches:u failed: {}",
                tma_sys::advice::explain(tma_sys::advice::Op::PerfOpenUser, &e)
            ));
            return Ok(rec);
        }
    };
    let mut intercepts = Vec::new();
    for spec in &LOOPS {
        if let Some(at) = stop_before(&format!("the exact-count loop {}", spec.name)) {
            rec.interrupted = Some(at);
            return Ok(rec);
        }
        let mut code = spec.load()?;
        let mut lc = LoopCounts {
            name: spec.name.into(),
            per_iter_instructions: spec.per_iter_instructions(),
            per_iter_branches: spec.per_iter_branches(),
            iters: EXACT_ITERS,
            instructions: [u64::MAX; 2],
            branches: [u64::MAX; 2],
        };
        for (k, &iters) in EXACT_ITERS.iter().enumerate() {
            for _ in 0..REPEAT {
                group.start()?;
                code.run(iters);
                group.stop()?;
                let r = group.read()?;
                lc.instructions[k] = lc.instructions[k].min(r.values[0].0);
                lc.branches[k] = lc.branches[k].min(r.values[1].0);
            }
        }
        intercepts.push((
            lc.instructions[0].saturating_sub(EXACT_ITERS[0] * lc.per_iter_instructions),
            lc.branches[0].saturating_sub(EXACT_ITERS[0] * lc.per_iter_branches),
        ));
        rec.loops.push(lc);
    }
    drop(group);
    if let Some(at) = stop_before("the multiplexing check") {
        rec.interrupted = Some(at);
        return Ok(rec);
    }
    rec.multiplex = Some(measure_multiplex(intercepts.first().copied())?);
    match exe {
        Some(exe) => {
            if let Some(at) = stop_before("the perf stat comparison") {
                rec.interrupted = Some(at);
                return Ok(rec);
            }
            match measure_perf(exe, &rec.loops) {
                Ok(p) => rec.perf = p,
                Err(why) => rec.perf_skipped = Some(why),
            }
            if let Some(at) = stop_before("the level-1 kernels") {
                rec.interrupted = Some(at);
                return Ok(rec);
            }
            match measure_level1(
                exe,
                tma_stat::BackendChoice::Live,
                None,
                tma_host::Host::system(),
            ) {
                Ok(l) => rec.level1 = l,
                Err(why) => rec.level1_skipped = Some(why),
            }
        }
        None => {
            rec.perf_skipped = Some("no program path to run the loops under perf".into());
            rec.level1_skipped = Some("no program path to run the kernels under tma stat".into());
        }
    }
    Ok(rec)
}

/// More single-event groups than the PMU has counters, over one long run of the first loop.
fn measure_multiplex(intercept: Option<(u64, u64)>) -> io::Result<MultiplexCounts> {
    let spec = &LOOPS[0];
    let mut code = spec.load()?;
    let (ci, cb) = intercept.unwrap_or((0, 0));
    let mut groups = Vec::with_capacity(MUX_COUNTERS);
    for k in 0..MUX_COUNTERS {
        let (cfg, name, expected) = if k % 2 == 0 {
            (
                selfcount::HW_INSTRUCTIONS,
                "instructions:u",
                MUX_ITERS * spec.per_iter_instructions() + ci,
            )
        } else {
            (
                selfcount::HW_BRANCH_INSTRUCTIONS,
                "branches:u",
                MUX_ITERS * spec.per_iter_branches() + cb,
            )
        };
        let g = SelfGroup::open(&[selfcount::hardware(cfg, true)])?;
        groups.push((g, format!("{name}#{k}"), expected));
    }
    for (g, ..) in &groups {
        g.start()?;
    }
    code.run(MUX_ITERS);
    for (g, ..) in &groups {
        g.stop()?;
    }
    let mut counters = Vec::with_capacity(groups.len());
    for (g, event, expected) in groups {
        let r = g.read()?;
        counters.push(Scaled {
            event,
            expected,
            value: r.values[0].0,
            time_enabled: r.time_enabled,
            time_running: r.time_running,
        });
    }
    Ok(MultiplexCounts { counters })
}

/// task-clock against thread CPU time, context switches of a known sleeper, page faults of
/// a known touch of fresh pages: software events of this thread.
fn measure_software() -> io::Result<SoftwareCounts> {
    let mut s = SoftwareCounts::default();
    // task-clock over ~100 ms of work.
    let g = SelfGroup::open(&[selfcount::software(SoftwareEvent::TaskClock)])?;
    let t0 = tma_sys::clock::thread_cpu_ns();
    let wall = std::time::Instant::now();
    g.start()?;
    let mut x = 1u64;
    while tma_sys::clock::thread_cpu_ns() - t0 < 100_000_000 {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    g.stop()?;
    let t1 = tma_sys::clock::thread_cpu_ns();
    s.wall_ns = wall.elapsed().as_nanos() as u64;
    s.task_clock_ns = g.read()?.values[0].0;
    s.thread_cpu_ns = t1 - t0;

    // 50 sleeps of 1 ms: each one is a context switch.
    let g = SelfGroup::open(&[selfcount::software(SoftwareEvent::ContextSwitches)])?;
    s.sleeps = 50;
    let u0 = tma_sys::usage::thread_usage()?;
    g.start()?;
    for _ in 0..s.sleeps {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    g.stop()?;
    let u1 = tma_sys::usage::thread_usage()?;
    s.context_switches = g.read()?.values[0].0;
    s.rusage_switches = u1.switches - u0.switches;

    // 256 fresh pages (no huge pages), each touched once.
    s.pages = 256;
    let mut map = memmap2::MmapMut::map_anon(s.pages as usize * 4096)?;
    // Without THP advice the kernel may back the range with huge pages: fewer faults.
    let _ = map.advise(memmap2::Advice::NoHugePage);
    let g = SelfGroup::open(&[selfcount::software(SoftwareEvent::PageFaults)])?;
    let u0 = tma_sys::usage::thread_usage()?;
    g.start()?;
    for p in 0..s.pages as usize {
        map[p * 4096] = 1;
    }
    g.stop()?;
    let u1 = tma_sys::usage::thread_usage()?;
    std::hint::black_box(&map);
    s.page_faults = g.read()?.values[0].0;
    s.rusage_minor_faults = u1.minor_faults - u0.minor_faults;
    Ok(s)
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

/// The pass/fail table.
pub fn render(w: &mut dyn io::Write, r: &VerifyReport) -> io::Result<()> {
    writeln!(
        w,
        "tma doctor --verify ({}; {})",
        r.source,
        if r.hardware {
            "hardware and software counting"
        } else {
            "software counting only"
        }
    )?;
    writeln!(w)?;
    let mut t = tma_render::table(&["Check", "Result", "Expected", "Measured"]);
    for row in &r.rows {
        t.add_row(vec![
            row.id.clone(),
            row.verdict.label().to_string(),
            row.expected.clone(),
            row.measured.clone(),
        ]);
    }
    writeln!(w, "{t}")?;
    let bad: Vec<&VerifyRow> = r
        .rows
        .iter()
        .filter(|x| x.verdict != Verdict::Pass && !x.reason.is_empty())
        .collect();
    if !bad.is_empty() {
        writeln!(w)?;
        for x in bad {
            writeln!(w, "{} {}: {}", x.verdict.label(), x.id, x.reason)?;
        }
    }
    for n in &r.notes {
        writeln!(w)?;
        for (i, line) in tma_render::wrap(n, "", 94).iter().enumerate() {
            writeln!(w, "{}{line}", if i == 0 { "note: " } else { "      " })?;
        }
    }
    let (p, f, s) = r
        .rows
        .iter()
        .fold((0, 0, 0), |(p, f, s), x| match x.verdict {
            Verdict::Pass => (p + 1, f, s),
            Verdict::Fail => (p, f + 1, s),
            Verdict::Skip => (p, f, s + 1),
        });
    writeln!(w)?;
    writeln!(w, "{p} passed, {f} failed, {s} skipped")?;
    Ok(())
}
