//! The methodology parameters of a measurement ([`Method`]) and their defaults.

use std::time::Duration;

/// Methodology parameters (see the crate docs and docs/measurements.md).
#[derive(Debug, Clone)]
pub struct Method {
    /// Two unroll counts; the per-copy cost is the difference of the two runs. Each job rounds
    /// them up to a whole number of rounds through its chains ([`super::job_unroll`]).
    ///
    /// Default 256/512. With fewer copies the loop's taken branch does not cancel for bodies
    /// that fill the four ALUs (on a Zen 3, 64/128 read `popcnt` at 0.240 to 0.243 where four
    /// pipes allow 0.25; 256/512 read 0.250 for every form; the runs are in
    /// `docs/measurements.md`). The time per figure does not change: the iterations are sized so
    /// that the large run takes `min_ticks`.
    pub unroll: (usize, usize),
    /// Accepted timings per independent repetition of a figure (median taken).
    pub reps: usize,
    /// Trials per unroll count within a repetition (minimum taken).
    pub trials: usize,
    /// Iterations are doubled until one run of the larger unroll takes this many TSC ticks.
    pub min_ticks: u64,
    /// A repetition is rejected when the calibrations before and after differ by more.
    pub reject: f64,
    /// At most `reps * max_rep_factor` repetitions are attempted per figure.
    pub max_rep_factor: usize,
    /// Independent repetitions of every figure: at least `min_rounds`, at most `max_rounds`
    /// (the time budget, [`MAX_ROUNDS`]: 10 x the two a quiet machine needs).
    /// Each repetition is `reps` accepted repetitions of the timing; the figure is accepted when
    /// the medians of the lowest repetitions agree within `agree` ([`crate::stats::agreed`]).
    pub min_rounds: usize,
    pub max_rounds: usize,
    pub agree: f64,
    /// The imul/add self-check tolerance (relative).
    pub self_check_tol: f64,
    pub timeout: Duration,
    pub cpu: Option<usize>,
    /// `--mem SIZE`: the memory buffer r14 and memory base registers point at (default
    /// [`crate::harness::DEFAULT_MEM`]); a pointer chase then walks all of it (default: one line).
    pub mem: Option<usize>,
    /// Where the MSR clock's device and sysfs live (the real machine by default).
    pub msr: tma_perf::msr::MsrSetup,
    /// `--force`: borrow counter 0 for the MSR clock even when its enable bit is set.
    pub force: bool,
}

impl Default for Method {
    fn default() -> Self {
        Method {
            unroll: (256, 512),
            reps: 11,
            trials: 3,
            min_ticks: 100_000,
            reject: 0.002,
            max_rep_factor: 4,
            min_rounds: 2,
            max_rounds: MAX_ROUNDS,
            agree: 0.01,
            self_check_tol: 0.01,
            timeout: Duration::from_secs(120),
            cpu: None,
            mem: None,
            msr: tma_perf::msr::MsrSetup::system(),
            force: false,
        }
    }
}

impl Method {
    /// `--precise`: 21 reps x 5 trials x 200k-tick regions.
    pub fn precise() -> Method {
        Method {
            reps: 21,
            trials: 5,
            min_ticks: 200_000,
            ..Method::default()
        }
    }
}

/// The default time budget of a figure in independent repetitions: 10 x the two that agree
/// on a quiet machine. A burst of contention on the host (a busy SMT sibling of another
/// tenant) has been seen to outlast 10 repetitions of a 4-wide body (1 run of 160 in
/// `scripts/bench-microbench.sh --repeat 20`); the figure is then shown unconverged.
pub const MAX_ROUNDS: usize = 20;
