//! The measurement engine. The parent builds every harness image (pure bytes), forks; the
//! child pins itself, locks memory, maps the images W^X, installs the fault handlers, runs the
//! calibration self-check and every job, and streams results back through a pipe. The parent
//! enforces a deadline and turns faults into messages.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::harness::{self, Image};
use crate::stats;
use crate::sys;
use crate::{BenchError, ClockKind};

/// Methodology parameters (see /work/shared/MICROBENCH-METHOD.md and the crate docs).
#[derive(Debug, Clone)]
pub struct Method {
    /// Two unroll counts; the per-copy cost is the difference of the two runs.
    pub unroll: (usize, usize),
    /// Accepted repetitions per figure (median reported).
    pub reps: usize,
    /// Trials per unroll count within a repetition (minimum taken).
    pub trials: usize,
    /// Iterations are doubled until one run of the larger unroll takes this many TSC ticks.
    pub min_ticks: u64,
    /// A repetition is rejected when the calibrations before and after differ by more.
    pub reject: f64,
    /// At most `reps * max_rep_factor` repetitions are attempted per figure.
    pub max_rep_factor: usize,
    /// Extra attempts for a figure whose p10-p90 spread exceeds `retry_spread`.
    pub retries: usize,
    pub retry_spread: f64,
    /// The imul/add self-check tolerance (relative).
    pub self_check_tol: f64,
    pub timeout: Duration,
    pub cpu: Option<usize>,
}

impl Default for Method {
    fn default() -> Self {
        Method {
            unroll: (64, 128),
            reps: 11,
            trials: 3,
            min_ticks: 100_000,
            reject: 0.002,
            max_rep_factor: 4,
            retries: 2,
            retry_spread: 0.02,
            self_check_tol: 0.01,
            timeout: Duration::from_secs(120),
            cpu: None,
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

/// A job: one body at two unroll counts (image indices).
#[derive(Debug, Clone)]
pub struct Job {
    pub small: usize,
    pub large: usize,
}

/// Jobs 0 and 1 are always the calibration (`add rax, rax`) and check (`imul rax, rax`) chains.
pub const CALIB_JOB: usize = 0;
pub const CHECK_JOB: usize = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Msg {
    Clock {
        clock: ClockKind,
        error: Option<String>,
    },
    SelfCheck {
        clock: ClockKind,
        /// NaN when too few calibrations agreed to compute it (JSON has no NaN: sent as null).
        #[serde(with = "nan_as_null")]
        ratio: f64,
        #[serde(with = "nan_as_null")]
        add_ticks: f64,
        ok: bool,
    },
    Figure {
        job: usize,
        clock: ClockKind,
        values: Vec<f64>,
        raw_ticks: Vec<f64>,
        rejected: usize,
        attempts: usize,
    },
    Note(String),
}

const TAG_JSON: u64 = 0x150A;

/// A fault reported by the child's signal handler.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    pub signal: i32,
    pub code: i64,
    /// Offset of the faulting RIP in the code buffer.
    pub offset: u64,
    pub addr: u64,
    pub job: Option<usize>,
}

/// What came back from the child.
#[derive(Debug, Default)]
pub struct Outcome {
    pub msgs: Vec<Msg>,
    pub fault: Option<Fault>,
    pub timed_out: bool,
    pub exit: Option<String>,
}

/// Images laid out in one buffer at 64-byte boundaries.
pub struct Layout {
    pub bytes: Vec<u8>,
    pub offsets: Vec<usize>,
    pub images: Vec<Image>,
    /// The vector constant pool written to the scratch buffer (initial vector register values).
    pub pool: Vec<u8>,
}

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
        }
    }

    /// (image index, offset within image) for a buffer offset.
    pub fn locate(&self, off: usize) -> Option<(usize, usize)> {
        let i = self.offsets.partition_point(|&o| o <= off).checked_sub(1)?;
        let rel = off - self.offsets[i];
        (rel < self.images[i].bytes.len()).then_some((i, rel))
    }
}

/// JSON has no NaN: write a non-finite f64 as null and read null back as NaN.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

fn send(fd: &OwnedFd, m: &Msg) {
    let Ok(json) = serde_json::to_vec(m) else {
        return;
    };
    let mut frame = Vec::with_capacity(json.len() + 16);
    frame.extend_from_slice(&TAG_JSON.to_le_bytes());
    frame.extend_from_slice(&(json.len() as u64).to_le_bytes());
    frame.extend_from_slice(&json);
    let _ = sys::write_all(fd, &frame);
}

fn parse_frames(buf: &[u8], out: &mut Outcome) {
    let mut p = 0;
    let u64_at = |p: usize| -> Option<u64> {
        buf.get(p..p + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    while let Some(tag) = u64_at(p) {
        if tag == TAG_JSON {
            let Some(len) = u64_at(p + 8) else { break };
            let start = p + 16;
            let end = start + len as usize;
            let Some(body) = buf.get(start..end) else {
                break;
            };
            match serde_json::from_slice::<Msg>(body) {
                Ok(m) => out.msgs.push(m),
                // Never drop a message silently: a lost verdict would look like no result.
                Err(e) => {
                    out.exit.get_or_insert_with(|| {
                        format!("internal: a message from the measuring child could not be decoded: {e}")
                    });
                }
            }
            p = end;
        } else if tag == sys::TAG_FAULT {
            let f: Vec<u64> = (0..5).filter_map(|i| u64_at(p + 8 + 8 * i)).collect();
            if f.len() < 5 {
                break;
            }
            out.fault = Some(Fault {
                signal: f[0] as i32,
                code: f[1] as i64,
                offset: f[2],
                addr: f[3],
                job: (f[4] != u64::MAX).then_some(f[4] as usize),
            });
            p += 48;
        } else {
            break;
        }
    }
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run `jobs` (figures wanted for `wanted`, a list of job indices) on `clocks` in a forked child.
pub fn run(
    layout: &Layout,
    jobs: &[Job],
    wanted: &[usize],
    clocks: &[ClockKind],
    method: &Method,
) -> Result<Outcome, BenchError> {
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
    let (rd, wr) = std::io::pipe().map_err(|e| io("pipe", e))?;
    let (rd, wr) = (OwnedFd::from(rd), OwnedFd::from(wr));
    match sys::fork().map_err(|e| io("fork", e))? {
        sys::Forked::Child => {
            drop(rd);
            child_main(layout, jobs, wanted, clocks, method, cpu, wr)
        }
        sys::Forked::Parent(pid) => {
            drop(wr);
            let deadline = Instant::now() + method.timeout + Duration::from_secs(2);
            let mut buf = Vec::new();
            let finished = sys::read_until_eof(&rd, &mut buf, deadline)
                .map_err(|e| io("read from child", e))?;
            let mut out = Outcome::default();
            if !finished {
                sys::kill_child(pid);
                out.timed_out = true;
            }
            let exit = sys::wait_child(pid).map_err(|e| io("waitpid", e))?;
            parse_frames(&buf, &mut out);
            match exit {
                sys::ChildExit::Code(0) => {}
                sys::ChildExit::Code(3) if out.fault.is_some() => {}
                sys::ChildExit::Code(c) => {
                    out.exit = Some(format!("measurement process exited with status {c}"))
                }
                sys::ChildExit::Signal(s) => {
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
        }
    }

    fn read(&mut self) -> u64 {
        match self {
            Counter::Tsc => 0,
            Counter::Perf(c) => c.read().unwrap_or(0),
            Counter::Rdpmc(s) => s.read().unwrap_or(0),
        }
    }
}

/// (spread, values, raw ticks, rejected, attempts) of one attempt at a figure.
type Attempt = (f64, Vec<f64>, Vec<f64>, usize, usize);

struct Child<'a> {
    code: sys::Mapping,
    scratch: sys::Mapping,
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
}

#[derive(Clone, Copy)]
struct Sample {
    ticks: f64,
    cycles: f64,
}

impl Child<'_> {
    fn call(&self, img: usize, iters: u64, ctr: &mut Counter) -> (u64, u64) {
        let c0 = ctr.read();
        let t = self
            .code
            .call(self.layout.offsets[img], iters, self.scratch.as_mut_ptr());
        let c1 = ctr.read();
        (t, c1.wrapping_sub(c0))
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
        let (u1, u2) = self.method.unroll;
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

    fn figure(&mut self, job: usize, clock: ClockKind, ctr: &mut Counter) -> Msg {
        let m = self.method;
        let mut best: Option<Attempt> = None;
        for _attempt in 0..=m.retries {
            let mut values = Vec::new();
            let mut raw = Vec::new();
            let mut rejected = 0;
            let mut attempts = 0;
            let mut calib = Counter::Tsc;
            let mut c_prev = if clock == ClockKind::Tsc {
                match self.last_cal.take() {
                    Some(c) => c,
                    None => self.calibrate(&mut calib),
                }
            } else {
                0.0
            };
            while values.len() < m.reps && attempts < m.reps * m.max_rep_factor {
                attempts += 1;
                let s = self.time(job, ctr);
                if clock == ClockKind::Tsc {
                    let c = self.calibrate(&mut calib);
                    let lo = c.min(c_prev);
                    let moved = (c - c_prev).abs() / lo;
                    c_prev = c;
                    self.last_cal = Some(c);
                    if lo.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || moved > m.reject
                    {
                        rejected += 1;
                        continue;
                    }
                    values.push(s.ticks / lo);
                } else {
                    values.push(s.cycles);
                }
                raw.push(s.ticks);
            }
            let spread = if values.len() >= 3 {
                stats::rel_spread(&values)
            } else {
                f64::INFINITY
            };
            // A figure is clean when every repetition it needed was found within the attempt
            // budget and its p10-p90 spread is small; otherwise measure it again (bounded) and
            // keep the cleanest attempt.
            let complete = values.len() >= m.reps;
            let median = stats::median(&values);
            // Two complete attempts, both wider than `retry_spread`, whose medians agree within
            // half the narrower spread: the spread is the body's own (e.g. an intermediate
            // chain count the scheduler handles unevenly), not a burst of host noise, and a
            // third attempt would only repeat it. The cleaner of the two is kept.
            let reproduced = complete
                && spread > m.retry_spread
                && best.as_ref().is_some_and(|b| {
                    b.1.len() >= m.reps
                        && b.0 > m.retry_spread
                        && (median - stats::median(&b.1)).abs() <= 0.5 * b.0.min(spread) * median
                });
            let score = (!complete as u8, spread);
            let better = best
                .as_ref()
                .is_none_or(|b| score < ((b.1.len() < m.reps) as u8, b.0));
            if better {
                best = Some((spread, values, raw, rejected, attempts));
            }
            if (complete && spread <= m.retry_spread) || reproduced {
                break;
            }
        }
        let (_, values, raw_ticks, rejected, attempts) = best.unwrap_or_default();
        Msg::Figure {
            job,
            clock,
            values,
            raw_ticks,
            rejected,
            attempts,
        }
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
fn tsc_figures(ch: &mut Child<'_>, wanted: &[usize], ctr: &mut Counter, wr: &OwnedFd) {
    let m = ch.method;
    let mut verdict = (f64::NAN, f64::NAN, false);
    for attempt in 0..CHECK_ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
        ch.last_cal = None;
        ch.last_chains = None;
        ch.check = Some(CheckAcc::default());
        let mut figures = Vec::new();
        let mut failed = false;
        for &j in wanted {
            figures.push(ch.figure(j, ClockKind::Tsc, ctr));
            if let Some(acc) = ch.check.as_ref().filter(|a| a.done(m)) {
                if !acc.verdict(m).2 {
                    failed = true;
                    break;
                }
            }
        }
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

fn child_main(
    layout: &Layout,
    jobs: &[Job],
    wanted: &[usize],
    clocks: &[ClockKind],
    method: &Method,
    cpu: usize,
    wr: OwnedFd,
) -> ! {
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
    let mut code = match sys::Mapping::rw(layout.bytes.len()) {
        Ok(m) => m,
        Err(e) => fail(&wr, format!("mmap code buffer: {e}")),
    };
    if let Err(e) = code.write(0, &layout.bytes).and_then(|_| code.seal_exec()) {
        fail(&wr, format!("prepare W^X code buffer: {e}"));
    }
    let mut scratch = match sys::Mapping::rw(harness::SCRATCH_LEN) {
        Ok(m) => m,
        Err(e) => fail(&wr, format!("mmap scratch buffer: {e}")),
    };
    let _ = scratch.write(harness::POOL_OFFSET, &layout.pool);
    // Touch the scratch buffer so no page faults happen while timing.
    let zero = vec![0u8; harness::SCRATCH_USER];
    let _ = scratch.write(0, &zero);
    sys::set_fault_context(wr.as_raw_fd(), code.addr());
    if let Err(e) = sys::install_fault_handlers() {
        fail(&wr, format!("sigaction: {e}"));
    }
    sys::alarm(method.timeout.as_secs().max(1) as u32);
    let mut ch = Child {
        code,
        scratch,
        layout,
        jobs,
        method,
        iters: vec![0; jobs.len()],
        check: None,
        last_chains: None,
        last_cal: None,
    };
    ch.autosize(CALIB_JOB);
    ch.autosize(CHECK_JOB);
    for &j in wanted {
        ch.autosize(j);
    }
    for &clock in clocks {
        let mut ctr = match Counter::open(clock) {
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
            tsc_figures(&mut ch, wanted, &mut ctr, &wr);
            continue;
        }
        // Self-check: imul chain / add chain = 3 (on a cycle counter: the counter counts core
        // cycles).
        let mut check = None;
        // Bounded patience: a burst of host noise can bias the add chain for a while.
        for attempt in 0..CHECK_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(30));
                ch.last_cal = None;
            }
            if let Msg::Figure {
                values, raw_ticks, ..
            } = ch.figure(CHECK_JOB, clock, &mut ctr)
            {
                let add = match ch.figure(CALIB_JOB, clock, &mut ctr) {
                    Msg::Figure { values, .. } => stats::median(&values),
                    _ => f64::NAN,
                };
                let ratio = stats::median(&values) / add;
                let ok = ((ratio - 3.0) / 3.0).abs() <= method.self_check_tol;
                let add_ticks = stats::median(&raw_ticks) / ratio;
                check = Some((ratio, add_ticks, ok));
                if ok {
                    break;
                }
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
        for &j in wanted {
            let m = ch.figure(j, clock, &mut ctr);
            send(&wr, &m);
        }
    }
    sys::set_current_job(u64::MAX);
    drop(wr);
    sys::exit_now(0)
}

#[cfg(test)]
mod nan_tests {
    use super::*;

    /// A self-check verdict without a ratio (too few calibrations agreed) must reach the
    /// parent: before, NaN became JSON null, failed to decode and the verdict was dropped.
    #[test]
    fn self_check_without_ratio_round_trips() {
        let m = Msg::SelfCheck {
            clock: ClockKind::Tsc,
            ratio: f64::NAN,
            add_ticks: f64::NAN,
            ok: false,
        };
        let json = serde_json::to_vec(&m).unwrap();
        match serde_json::from_slice::<Msg>(&json).unwrap() {
            Msg::SelfCheck { ratio, ok, .. } => assert!(ratio.is_nan() && !ok),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn undecodable_frames_are_an_error() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&TAG_JSON.to_le_bytes());
        buf.extend_from_slice(&3u64.to_le_bytes());
        buf.extend_from_slice(b"{x}");
        let mut out = Outcome {
            msgs: Vec::new(),
            fault: None,
            timed_out: false,
            exit: None,
        };
        parse_frames(&buf, &mut out);
        assert!(out
            .exit
            .as_deref()
            .is_some_and(|e| e.contains("could not be decoded")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        let m = Msg::Note("hi".into());
        let json = serde_json::to_vec(&m).unwrap();
        buf.extend_from_slice(&TAG_JSON.to_le_bytes());
        buf.extend_from_slice(&(json.len() as u64).to_le_bytes());
        buf.extend_from_slice(&json);
        for v in [sys::TAG_FAULT, 8, 1, 77, 0, 5] {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        let mut out = Outcome::default();
        parse_frames(&buf, &mut out);
        assert_eq!(out.msgs.len(), 1);
        let f = out.fault.unwrap();
        assert_eq!((f.signal, f.code, f.offset, f.job), (8, 1, 77, Some(5)));
    }
}
