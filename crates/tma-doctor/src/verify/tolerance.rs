//! Tolerances, in one place.

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
