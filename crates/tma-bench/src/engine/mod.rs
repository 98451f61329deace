//! The measurement engine. The parent builds every harness image (pure bytes), forks; the
//! child pins itself, locks memory, maps the images W^X, installs the fault handlers, runs the
//! calibration self-check and every job, and streams results back through a pipe. The parent
//! enforces a deadline and turns faults into messages.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::harness::{self, Image};
use crate::stats;
use crate::sys;
use crate::{BenchError, ClockKind};
use tma_sys::jit::ExecCode;
use tma_sys::process::Exit;

mod method;
mod repeat;
mod wire;

pub use method::{Method, MAX_ROUNDS};
use repeat::{still_needed, Estimate, Repeated};
use wire::{parse_frames, send};
pub use wire::{Fault, Msg, Outcome};

/// A job: one body at two unroll counts (image indices), and those counts.
#[derive(Debug, Clone)]
pub struct Job {
    pub small: usize,
    pub large: usize,
    /// Copies of the body in the small and the large image ([`job_unroll`]).
    pub unroll: (usize, usize),
}

/// The unroll counts of a body of `copies` distinct copies (chains): the method's two counts,
/// each rounded up to a whole number of rounds through the copies. With a count that is not a
/// multiple, one loop iteration gives some chains one copy more than the others; when the
/// chains are just enough to fill the pipes (3 `imul` chains, latency 3) the longest chain then
/// sets the pace, and the difference of the two runs is off by up to 6% depending on the pair
/// (64/128 read 0.970 cycles per imul, 80/160 1.025, 96/192 1.000 on a Zen 3).
pub fn job_unroll(method: (usize, usize), copies: usize) -> (usize, usize) {
    let n = copies.max(1);
    let up = |u: usize| u.div_ceil(n) * n;
    let (a, b) = (up(method.0), up(method.1));
    (a, if b > a { b } else { a + n })
}

/// Jobs 0 and 1 are always the calibration (`add rax, rax`) and check (`imul rax, rax`) chains.
pub const CALIB_JOB: usize = 0;
pub const CHECK_JOB: usize = 1;

/// Images laid out in one buffer at 64-byte boundaries.
pub struct Layout {
    pub bytes: Vec<u8>,
    pub offsets: Vec<usize>,
    pub images: Vec<Image>,
    /// The vector constant pool written to the scratch buffer (initial vector register values).
    pub pool: Vec<u8>,
    /// The memory buffer r14 (and the body's memory base registers) point at, in bytes.
    pub mem: usize,
    /// A pointer chase (`mov rax, [rax+d]`): the buffer's first `len` bytes hold a ring of
    /// pointers, one per 64-byte line in random order, each at `d` within its line
    /// ([`harness::chase_ring`]).
    pub chase: Option<Chase>,
}

pub use crate::harness::Chase;

impl Layout {
    pub fn new(images: Vec<Image>) -> Layout {
        let mut bytes = Vec::new();
        let mut offsets = Vec::new();
        for img in &images {
            let pad = (64 - bytes.len() % 64) % 64;
            bytes.extend(std::iter::repeat_n(0xCCu8, pad));
            offsets.push(bytes.len());
            bytes.extend_from_slice(&img.bytes);
        }
        Layout {
            bytes,
            offsets,
            images,
            pool: harness::pool_bytes(),
            mem: harness::DEFAULT_MEM,
            chase: None,
        }
    }

    /// (image index, offset within image) for a buffer offset.
    pub fn locate(&self, off: usize) -> Option<(usize, usize)> {
        let i = self.offsets.partition_point(|&o| o <= off).checked_sub(1)?;
        let rel = off - self.offsets[i];
        (rel < self.images[i].bytes.len()).then_some((i, rel))
    }
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run `jobs` (figures wanted for `wanted`, a list of job indices; `tp` are the throughput
/// chain counts among them that are alternatives of one figure and nothing else, so they may
/// stop early: see `still_needed`) on `clocks` in a forked child. `sentinel`: the
/// contention sentinel's job and expected cycles per copy; every repetition of a `tp` job is
/// discarded when the sentinel timed right before or after it is off.
pub fn run(
    layout: &Layout,
    jobs: &[Job],
    wanted: &[usize],
    tp: &[usize],
    sentinel: Option<(usize, f64)>,
    clocks: &[ClockKind],
    method: &Method,
) -> Result<Outcome, BenchError> {
    if let Some(sig) = tma_sys::signal::interrupted() {
        return Err(BenchError::Interrupted(sig));
    }
    // One measurement at a time per process: two would compete for the CPU.
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let io = |what: &str, e: std::io::Error| BenchError::Os {
        what: what.to_string(),
        source: e,
    };
    let cpu = method.cpu.or_else(sys::current_cpu).unwrap_or(0);
    let allowed = sys::allowed_cpus();
    if !allowed.contains(&cpu) {
        return Err(BenchError::BadOption(format!(
            "--cpu {cpu}: this process may only run on CPUs {allowed:?}"
        )));
    }
    // ...and one at a time per machine (best effort: without a writable temp dir, no lock).
    let _machine_lock = sys::FileLock::acquire(&std::env::temp_dir().join("tma-bench.lock")).ok();
    // The MSR clock: counter 0 of the measuring CPU is programmed here, in the parent, and
    // restored when `_msr` drops (after the child is reaped, also when it was killed) or on a
    // signal; the child only reads it with rdpmc.
    #[cfg(not(target_arch = "x86_64"))]
    let (_msr, msr_error): (Option<()>, Option<String>) = if clocks.contains(&ClockKind::Msr) {
        (None, Some("the MSR clock is x86-64 only".to_string()))
    } else {
        (None, None)
    };
    #[cfg(target_arch = "x86_64")]
    let (_msr, msr_error) = if clocks.contains(&ClockKind::Msr) {
        let vendor = tma_sys::cpu::vendor();
        match tma_perf::msr::ProgrammedCounter::program(&method.msr, cpu, &vendor, method.force) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, None)
    };
    let (rd, wr) = std::io::pipe().map_err(|e| io("pipe", e))?;
    let (rd, wr) = (OwnedFd::from(rd), OwnedFd::from(wr));
    match sys::fork().map_err(|e| io("fork", e))? {
        sys::Forked::Child => {
            drop(rd);
            let ctx = ChildCtx {
                wanted,
                tp,
                clocks,
                cpu,
                msr_error,
                sentinel,
            };
            child_main(layout, jobs, &ctx, method, wr)
        }
        sys::Forked::Parent(pid) => {
            drop(wr);
            let deadline = Instant::now() + method.timeout + Duration::from_secs(2);
            let mut buf = Vec::new();
            let finished = sys::read_until_eof(&rd, &mut buf, deadline)
                .map_err(|e| io("read from child", e))?;
            let mut out = Outcome::default();
            let interrupted = tma_sys::signal::interrupted();
            if !finished {
                // Our own child, not yet reaped: the pid cannot have been reused.
                let _ = tma_sys::process::kill(pid, libc::SIGKILL);
                out.timed_out = interrupted.is_none();
            }
            let exit = tma_sys::process::wait_blocking(pid).map_err(|e| io("waitpid", e))?;
            if let (Some(sig), false) = (interrupted, finished) {
                return Err(BenchError::Interrupted(sig));
            }
            parse_frames(&buf, &mut out);
            match exit {
                Exit::Code(0) => {}
                Exit::Code(3) if out.fault.is_some() => {}
                Exit::Code(c) => {
                    out.exit = Some(format!("measurement process exited with status {c}"))
                }
                Exit::Signal(s) => {
                    out.exit = Some(format!(
                        "measurement process killed by {}",
                        sys::signal_name(s)
                    ))
                }
            }
            Ok(out)
        }
    }
}

/// One clock reading around a call.
enum Counter {
    Tsc,
    Perf(tma_perf::cycles::Cycles),
    Rdpmc(tma_perf::cycles::UserCycles),
    /// Counter 0, programmed by the parent ([`tma_perf::msr`]), read with rdpmc.
    Msr,
}

impl Counter {
    fn open(clock: ClockKind) -> Result<Counter, String> {
        match clock {
            ClockKind::Tsc => Ok(Counter::Tsc),
            ClockKind::Perf => {
                let mut c = crate::clock::open_cycles().map_err(|e| e.to_string())?;
                c.enable()
                    .map_err(|e| format!("perf: cannot enable cycles counter: {e}"))?;
                Ok(Counter::Perf(c))
            }
            ClockKind::Rdpmc => {
                let c = crate::clock::open_cycles().map_err(|e| e.to_string())?;
                let mut s = c
                    .into_user_reads()
                    .map_err(|e| format!("rdpmc: cannot map the perf page: {e}"))?;
                s.enable()
                    .map_err(|e| format!("rdpmc: cannot enable: {e}"))?;
                if s.read().is_none() {
                    return Err("rdpmc: the kernel does not allow user-space counter reads (cap_user_rdpmc=0; see /sys/bus/event_source/devices/cpu/rdpmc)".into());
                }
                Ok(Counter::Rdpmc(s))
            }
            ClockKind::Msr => Ok(Counter::Msr),
        }
    }

    fn read(&mut self) -> u64 {
        match self {
            Counter::Tsc => 0,
            Counter::Perf(c) => c.read().unwrap_or(0),
            Counter::Rdpmc(s) => s.read().unwrap_or(0),
            #[cfg(target_arch = "x86_64")]
            Counter::Msr => tma_sys::cpu::rdpmc(0),
            // Never built off x86-64: the MSR clock is refused before (clock::available).
            #[cfg(not(target_arch = "x86_64"))]
            Counter::Msr => 0,
        }
    }

    /// Counts between two reads (the MSR counter is 48 bits wide and may wrap).
    fn delta(&self, c0: u64, c1: u64) -> u64 {
        match self {
            Counter::Msr => c1.wrapping_sub(c0) & tma_perf::msr::COUNTER_MASK,
            _ => c1.wrapping_sub(c0),
        }
    }
}

/// Copies of the code buffer, used in turn by the rounds of a figure ([`Child::figures`]):
/// independent repetitions then also run from different pages. On a Zen 3 VM, `popcnt rax,
/// rbx` throughput sometimes read 0.284 instead of 0.250 for a whole run, for a cause not known
/// (the op cache is the suspect; the runs are in `docs/measurements.md`). The copies make the
/// rounds differ in one more way; [`still_needed`]'s spaced retries and `Repeated::message`
/// deal with what remains.
const CODE_COPIES: usize = 3;

/// The pause before a round that only measures an accepted but implausible throughput again
/// ([`still_needed`]): host noise of that kind changes on a scale of a second, so the retries
/// are spread over the time budget (at most `max_rounds` rounds, about 1 s) rather than run
/// back to back.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

struct Child<'a> {
    /// [`CODE_COPIES`] mappings of the same images; `cur` is the one in use.
    code: Vec<ExecCode>,
    cur: usize,
    /// The pool page and the memory buffer; `buffer` points at the latter (r14).
    _scratch: memmap2::MmapMut,
    buffer: *mut u8,
    layout: &'a Layout,
    jobs: &'a [Job],
    method: &'a Method,
    iters: Vec<u64>,
    /// The imul/add self-check on the TSC clock, fed by the calibrations themselves (see
    /// [`CheckAcc`]); `None` when not collecting.
    check: Option<CheckAcc>,
    /// The add and imul chain ticks of the latest calibration (for the self-check).
    last_chains: Option<(f64, f64)>,
    /// The latest calibration, taken right after the last timed repetition: the next figure's
    /// first repetition uses it as its pre-calibration instead of calibrating again. Cleared
    /// whenever the sequence is interrupted (a pause) or the calibration estimator changes.
    last_cal: Option<f64>,
    /// The contention sentinel: (job, expected cycles per copy) ([`stats::sentinel_expect`]).
    sentinel: Option<(usize, f64)>,
}

#[derive(Clone, Copy)]
struct Sample {
    ticks: f64,
    cycles: f64,
}

impl Child<'_> {
    /// Run from code copy `k` (mod the number of copies) from now on.
    fn use_code_copy(&mut self, k: usize) {
        self.cur = k % self.code.len().max(1);
        sys::set_fault_context_base(self.code[self.cur].addr());
    }

    fn call(&self, img: usize, iters: u64, ctr: &mut Counter) -> (u64, u64) {
        let c0 = ctr.read();
        let t = sys::call_harness(
            &self.code[self.cur],
            self.layout.offsets[img],
            iters,
            self.buffer,
        );
        let c1 = ctr.read();
        (t, ctr.delta(c0, c1))
    }

    /// Per-copy cost of a job: min over trials of each unroll, then the difference.
    fn time(&self, job: usize, ctr: &mut Counter) -> Sample {
        sys::set_current_job(job as u64);
        let j = &self.jobs[job];
        let iters = self.iters[job];
        let (mut t1, mut t2, mut c1, mut c2) = (u64::MAX, u64::MAX, u64::MAX, u64::MAX);
        for _ in 0..self.method.trials {
            let (t, c) = self.call(j.small, iters, ctr);
            t1 = t1.min(t);
            c1 = c1.min(c);
            let (t, c) = self.call(j.large, iters, ctr);
            t2 = t2.min(t);
            c2 = c2.min(c);
        }
        let (u1, u2) = j.unroll;
        let denom = (iters * (u2 - u1) as u64) as f64;
        Sample {
            ticks: (t2 as f64 - t1 as f64) / denom,
            cycles: (c2 as f64 - c1 as f64) / denom,
        }
    }

    /// TSC ticks per core cycle now: the add chain (1 cycle per add) and the imul chain (3
    /// cycles per imul); the smaller estimate wins, because a chain can be slowed (e.g. by a
    /// busy SMT sibling contending for ALUs) but never sped up.
    ///
    /// The two chains timed here are also the self-check's data: the imul chain of calibration
    /// k sits between the add chains of calibrations k and k+1, exactly the bracket the
    /// self-check needs (imul ticks / add ticks, rejected when the two add chains differ by
    /// more than `reject`), so the check costs no timing of its own.
    fn calibrate(&mut self, ctr: &mut Counter) -> f64 {
        let add = self.time(CALIB_JOB, ctr).ticks;
        if let (Some(acc), Some((add_p, imul_p))) = (self.check.as_mut(), self.last_chains) {
            acc.push(add_p, imul_p, add, self.method);
        }
        let imul = self.time(CHECK_JOB, ctr).ticks;
        self.last_chains = Some((add, imul));
        add.min(imul / 3.0)
    }

    fn autosize(&mut self, job: usize) {
        let mut ctr = Counter::Tsc;
        sys::set_current_job(job as u64);
        let large = self.jobs[job].large;
        let mut iters: u64 = 4;
        // Warm-up (never timed) then grow until the large run is long enough.
        self.call(large, iters, &mut ctr);
        loop {
            let t = (0..2)
                .map(|_| self.call(large, iters, &mut ctr).0)
                .min()
                .unwrap_or(0);
            if t >= self.method.min_ticks || iters >= 1 << 26 {
                break;
            }
            // Scale to just above the target (5% margin) rather than doubling, so regions are
            // not up to twice as long as the method needs; grow at most 64x per step.
            let factor = (self.method.min_ticks as f64 * 1.05 / t.max(1) as f64).clamp(1.1, 64.0);
            iters = ((iters as f64 * factor).ceil() as u64).clamp(iters + 1, 1 << 26);
        }
        self.iters[job] = iters;
    }

    /// The sentinel job's cost per copy in core cycles now; on the tsc clock over the
    /// calibrations right before and after it, and None when those differed by more than
    /// `reject` (the clock moved: no verdict) three times in a row.
    fn sentinel_cycles(&mut self, job: usize, clock: ClockKind, ctr: &mut Counter) -> Option<f64> {
        if clock != ClockKind::Tsc {
            return Some(self.time(job, ctr).cycles);
        }
        // A reading whose bracketing calibrations disagree is taken again (at most 3 tries):
        // a sentinel without a verdict would let a contended repetition through.
        let mut calib = Counter::Tsc;
        for _ in 0..3 {
            let c0 = match self.last_cal {
                Some(c) => c,
                None => self.calibrate(&mut calib),
            };
            let s = self.time(job, ctr);
            let c1 = self.calibrate(&mut calib);
            self.last_cal = Some(c1);
            let lo = c0.min(c1);
            if lo > 0.0 && (c1 - c0).abs() / lo <= self.method.reject {
                return Some(s.ticks / lo);
            }
        }
        None
    }

    /// One independent repetition of a figure: `reps` accepted timings (at most
    /// `reps * max_rep_factor` attempts); on the tsc clock each timing is divided by the
    /// calibration before and after it and rejected when those differ by more than `reject`.
    /// None when fewer than half of `reps` (at least 3) were accepted.
    fn estimate(
        &mut self,
        job: usize,
        clock: ClockKind,
        ctr: &mut Counter,
    ) -> Result<Estimate, Estimate> {
        let m = self.method;
        let mut e = Estimate::default();
        let mut calib = Counter::Tsc;
        let mut c_prev = if clock == ClockKind::Tsc {
            match self.last_cal.take() {
                Some(c) => c,
                None => self.calibrate(&mut calib),
            }
        } else {
            0.0
        };
        while e.values.len() < m.reps && e.attempts < m.reps * m.max_rep_factor {
            e.attempts += 1;
            let s = self.time(job, ctr);
            if clock == ClockKind::Tsc {
                let c = self.calibrate(&mut calib);
                let lo = c.min(c_prev);
                let moved = (c - c_prev).abs() / lo;
                c_prev = c;
                self.last_cal = Some(c);
                if lo.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || moved > m.reject {
                    e.rejected += 1;
                    continue;
                }
                e.values.push(s.ticks / lo);
            } else {
                e.values.push(s.cycles);
            }
            e.raw.push(s.ticks);
        }
        if e.values.len() >= (m.reps / 2).max(3) {
            Ok(e)
        } else {
            Err(e)
        }
    }

    /// Every job of `jobs` in independent repetitions, round-robin (one repetition of each
    /// job per round, so repetitions of one figure are apart in time and a burst of host
    /// noise rarely covers two of them), until each is accepted, dropped (`tp`, see
    /// [`still_needed`]) or `max_rounds` is spent. `abort` is asked after every repetition
    /// (the tsc self-check's verdict); None when it said stop.
    fn figures(
        &mut self,
        jobs: &[usize],
        tp: &[usize],
        clock: ClockKind,
        ctr: &mut Counter,
        abort: &dyn Fn(&Child<'_>) -> bool,
    ) -> Option<Vec<Msg>> {
        let sentinel = self.sentinel;
        let m = self.method;
        let mut reps: Vec<(usize, Repeated)> =
            jobs.iter().map(|&j| (j, Repeated::default())).collect();
        let mut active: Vec<usize> = jobs.to_vec();
        let mut last_sentinel: Option<f64> = None;
        let max_n = crate::stats::pipes();
        for round in 0..m.max_rounds.max(1) {
            if active.is_empty() {
                break;
            }
            self.use_code_copy(round);
            let only_retries = active
                .iter()
                .all(|j| reps.iter().any(|(k, r)| k == j && r.agreed(m).is_some()));
            if only_retries {
                std::thread::sleep(RETRY_PAUSE);
                // The calibration sequence is interrupted: calibrate afresh.
                self.last_cal = None;
                last_sentinel = None;
            }
            for &j in &active {
                // Throughput repetitions are bracketed by the contention sentinel.
                // The reading after one throughput repetition is the reading before the next.
                let guard = sentinel.filter(|_| tp.contains(&j));
                let before = match guard {
                    Some((sj, _)) => last_sentinel
                        .take()
                        .or_else(|| self.sentinel_cycles(sj, clock, ctr)),
                    None => None,
                };
                let e = self.estimate(j, clock, ctr);
                let after = guard.and_then(|(sj, _)| self.sentinel_cycles(sj, clock, ctr));
                last_sentinel = after;
                let off = guard.and_then(|(_, expect)| {
                    [before, after]
                        .into_iter()
                        .flatten()
                        .find(|v| !stats::sentinel_ok(*v, expect))
                });
                if let Some((_, r)) = reps.iter_mut().find(|(k, _)| *k == j) {
                    match (e, off) {
                        (Ok(e), None) => r.estimates.push(e),
                        (Ok(e), Some(v)) => {
                            r.contended.push(v);
                            r.discarded.push(e);
                        }
                        (Err(e), off) => {
                            r.lost_rejected += e.rejected;
                            r.lost_attempts += e.attempts;
                            r.contended.extend(off);
                        }
                    }
                }
                if abort(self) {
                    return None;
                }
            }
            active = still_needed(&mut reps, tp, m, max_n);
        }
        Some(
            reps.iter()
                .map(|(j, r)| {
                    let n = tp.contains(j).then_some(max_n);
                    r.message(*j, clock, m, n)
                })
                .collect(),
        )
    }
}

/// Self-check attempts before giving up (bounded patience: a burst of host noise can bias the
/// add chain for a while); attempts are 30 ms apart.
const CHECK_ATTEMPTS: usize = 5;

/// The imul/add self-check collected from consecutive calibrations: value k is the imul chain
/// of calibration k over the smaller of the add chains of calibrations k and k+1, rejected
/// when those two add chains differ by more than `reject` (the same rule and statistics as a
/// figure: median over `reps` accepted values).
#[derive(Debug, Default)]
struct CheckAcc {
    ratios: Vec<f64>,
    adds: Vec<f64>,
    attempts: usize,
}

impl CheckAcc {
    fn push(&mut self, add_p: f64, imul_p: f64, add: f64, m: &Method) {
        if self.done(m) {
            return;
        }
        self.attempts += 1;
        let lo = add.min(add_p);
        if lo.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
            || (add - add_p).abs() / lo > m.reject
        {
            return;
        }
        self.ratios.push(imul_p / lo);
        self.adds.push(lo);
    }

    /// Enough accepted values, or the attempt budget is spent.
    fn done(&self, m: &Method) -> bool {
        self.ratios.len() >= m.reps || self.attempts >= m.reps * m.max_rep_factor
    }

    /// (ratio, add ticks per cycle, ok) once [`CheckAcc::done`].
    fn verdict(&self, m: &Method) -> (f64, f64, bool) {
        if self.ratios.len() < m.reps {
            return (f64::NAN, f64::NAN, false);
        }
        let ratio = stats::median(&self.ratios);
        let ok = ((ratio - 3.0) / 3.0).abs() <= m.self_check_tol;
        (ratio, stats::median(&self.adds), ok)
    }
}

/// Every wanted figure on the TSC clock, with the self-check taken from the calibrations
/// around them. Figures are held back until the check has its verdict and are only sent when
/// it passed; a failed check discards the figures measured so far and starts over after a
/// pause, at most [`CHECK_ATTEMPTS`] times.
fn tsc_figures(
    ch: &mut Child<'_>,
    wanted: &[usize],
    tp: &[usize],
    ctr: &mut Counter,
    wr: &OwnedFd,
) {
    let m = ch.method;
    let mut verdict = (f64::NAN, f64::NAN, false);
    for attempt in 0..CHECK_ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
        ch.last_cal = None;
        ch.last_chains = None;
        ch.check = Some(CheckAcc::default());
        let check_failed = |c: &Child<'_>| {
            c.check
                .as_ref()
                .is_some_and(|a| a.done(m) && !a.verdict(m).2)
        };
        let figures = ch
            .figures(wanted, tp, ClockKind::Tsc, ctr, &check_failed)
            .unwrap_or_default();
        let failed = check_failed(ch);
        // Fewer calibrations than the check needs (few figures): calibrate on until it has
        // its values or its budget is spent.
        let mut calib = Counter::Tsc;
        while !failed && ch.check.as_ref().is_some_and(|a| !a.done(m)) {
            ch.calibrate(&mut calib);
        }
        verdict = ch.check.take().map(|a| a.verdict(m)).unwrap_or(verdict);
        if verdict.2 {
            send(
                wr,
                &Msg::SelfCheck {
                    clock: ClockKind::Tsc,
                    ratio: verdict.0,
                    add_ticks: verdict.1,
                    ok: true,
                },
            );
            for f in &figures {
                send(wr, f);
            }
            return;
        }
    }
    send(
        wr,
        &Msg::SelfCheck {
            clock: ClockKind::Tsc,
            ratio: verdict.0,
            add_ticks: verdict.1,
            ok: false,
        },
    );
}

/// What the child measures besides the images: the wanted jobs, the throughput jobs among
/// them, the clocks, the CPU, and why the MSR clock could not be programmed (if it could not).
struct ChildCtx<'a> {
    wanted: &'a [usize],
    tp: &'a [usize],
    clocks: &'a [ClockKind],
    cpu: usize,
    msr_error: Option<String>,
    sentinel: Option<(usize, f64)>,
}

fn child_main(
    layout: &Layout,
    jobs: &[Job],
    ctx: &ChildCtx<'_>,
    method: &Method,
    wr: OwnedFd,
) -> ! {
    let (wanted, tp, clocks, cpu) = (ctx.wanted, ctx.tp, ctx.clocks, ctx.cpu);
    let fail = |wr: &OwnedFd, msg: String| -> ! {
        send(wr, &Msg::Note(format!("fatal: {msg}")));
        sys::exit_now(4)
    };
    if let Err(e) = sys::pin_to_cpu(cpu) {
        fail(&wr, format!("cannot pin to CPU {cpu}: {e}"));
    }
    if let Err(e) = sys::mlockall() {
        send(
            &wr,
            &Msg::Note(format!(
                "mlockall failed ({e}); pages may fault during timing"
            )),
        );
    }
    let mut code = Vec::with_capacity(CODE_COPIES);
    for _ in 0..CODE_COPIES {
        match ExecCode::new(&layout.bytes) {
            Ok(c) => code.push(c),
            Err(e) => fail(&wr, format!("prepare W^X code buffer: {e}")),
        }
    }
    let mut scratch = match memmap2::MmapMut::map_anon(harness::POOL_PAGE + layout.mem) {
        Ok(m) => m,
        Err(e) => fail(
            &wr,
            format!("mmap the {} byte memory buffer: {e}", layout.mem),
        ),
    };
    // Touch the memory buffer so no page faults happen while timing (it is cache-warm after
    // the untimed runs of the autosizing).
    scratch[harness::POOL_PAGE..].fill(0);
    let buffer = harness::fill_scratch(&mut scratch, &layout.pool, layout.chase);
    sys::set_fault_context(wr.as_raw_fd(), code[0].addr());
    if let Err(e) = sys::install_fault_handlers() {
        fail(&wr, format!("sigaction: {e}"));
    }
    sys::alarm(method.timeout.as_secs().max(1) as u32);
    let mut ch = Child {
        code,
        cur: 0,
        _scratch: scratch,
        buffer,
        layout,
        jobs,
        method,
        iters: vec![0; jobs.len()],
        check: None,
        last_chains: None,
        last_cal: None,
        sentinel: ctx.sentinel,
    };
    ch.autosize(CALIB_JOB);
    ch.autosize(CHECK_JOB);
    for &j in wanted.iter().chain(ctx.sentinel.as_ref().map(|s| &s.0)) {
        ch.autosize(j);
    }
    for &clock in clocks {
        let opened = match (clock, &ctx.msr_error) {
            (ClockKind::Msr, Some(e)) => Err(e.clone()),
            _ => Counter::open(clock),
        };
        let mut ctr = match opened {
            Ok(c) => c,
            Err(e) => {
                send(
                    &wr,
                    &Msg::Clock {
                        clock,
                        error: Some(e),
                    },
                );
                continue;
            }
        };
        send(&wr, &Msg::Clock { clock, error: None });
        if clock == ClockKind::Tsc {
            tsc_figures(&mut ch, wanted, tp, &mut ctr, &wr);
            continue;
        }
        // Self-check: imul chain / add chain = 3 (on a cycle counter: the counter counts core
        // cycles).
        let mut check = None;
        let never = |_: &Child<'_>| false;
        // Bounded patience: a burst of host noise can bias the add chain for a while.
        for attempt in 0..CHECK_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(30));
                ch.last_cal = None;
            }
            let Some(f) = ch.figures(&[CALIB_JOB, CHECK_JOB], &[], clock, &mut ctr, &never) else {
                continue;
            };
            let median_of = |m: &Msg| match m {
                Msg::Figure {
                    values, raw_ticks, ..
                } => (stats::median(values), stats::median(raw_ticks)),
                _ => (f64::NAN, f64::NAN),
            };
            let (add, _) = median_of(&f[0]);
            let (imul, imul_ticks) = median_of(&f[1]);
            let ratio = imul / add;
            let ok = ((ratio - 3.0) / 3.0).abs() <= method.self_check_tol;
            check = Some((ratio, imul_ticks / imul, ok));
            if ok {
                break;
            }
        }
        let (ratio, add_ticks, ok) = check.unwrap_or((f64::NAN, f64::NAN, false));
        send(
            &wr,
            &Msg::SelfCheck {
                clock,
                ratio,
                add_ticks,
                ok,
            },
        );
        if !ok {
            continue;
        }
        for m in ch
            .figures(wanted, tp, clock, &mut ctr, &never)
            .unwrap_or_default()
        {
            send(&wr, &m);
        }
    }
    sys::set_current_job(u64::MAX);
    drop(wr);
    sys::exit_now(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unroll_counts_give_every_chain_the_same_number_of_copies() {
        // (method's counts, chains) -> the job's counts.
        let cases = [
            ((256, 512), 1, (256, 512)),
            ((256, 512), 3, (258, 513)),
            ((64, 128), 3, (66, 129)),
            ((256, 512), 12, (264, 516)),
            ((4, 8), 8, (8, 16)),
            // Both round to the same count: the large one gets one more round.
            ((5, 6), 8, (8, 16)),
            ((256, 512), 0, (256, 512)),
        ];
        for (method, chains, want) in cases {
            let got = job_unroll(method, chains);
            assert_eq!(got, want, "{method:?} with {chains} chains");
            let n = chains.max(1);
            assert_eq!((got.0 % n, got.1 % n), (0, 0));
            assert!(got.1 > got.0);
        }
    }

    #[test]
    fn self_check_brackets_imul_between_adds_and_rejects_moved_clocks() {
        let m = Method::default();
        let mut acc = CheckAcc::default();
        // Clock moved by 0.5% between the add chains: rejected.
        acc.push(1.0, 3.0, 1.005, &m);
        assert!(acc.ratios.is_empty());
        // Within 0.2%: accepted, over the smaller add chain.
        acc.push(1.001, 3.0, 1.0, &m);
        assert_eq!(acc.ratios, vec![3.0]);
        assert!(!acc.done(&m));
        assert!(
            !acc.verdict(&m).2,
            "no verdict before `reps` accepted values"
        );
        for _ in 1..m.reps {
            acc.push(1.0, 2.94, 1.0, &m);
        }
        assert!(acc.done(&m));
        // Median 2.94: 2% off, outside the 1% tolerance.
        let (ratio, add, ok) = acc.verdict(&m);
        assert!((ratio - 2.94).abs() < 1e-12 && add == 1.0 && !ok);
        // Values past `reps` are not taken.
        acc.push(1.0, 3.0, 1.0, &m);
        assert_eq!(acc.ratios.len(), m.reps);
        // The attempt budget ends collection without a verdict.
        let mut acc = CheckAcc::default();
        for _ in 0..m.reps * m.max_rep_factor {
            acc.push(1.0, 3.0, 1.01, &m);
        }
        assert!(acc.done(&m) && !acc.verdict(&m).2);
    }
}
