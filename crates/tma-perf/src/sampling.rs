//! Sampling with `perf_event_open` and the mmap ring buffer.
//!
//! This module opens the sampling events, runs or attaches to the target and hands every
//! kernel record, as raw bytes, to a callback. It does **not** parse sample records: the
//! bytes go to the same parser that reads `perf.data` files (`tma-profile`), so everything
//! downstream of the ring buffer is tested with recorded files. A record that wraps around
//! the end of the ring is passed as two slices ([`RawRecord::data`]), which
//! `linux_perf_event_reader::RawData::Split` accepts directly.
//!
//! What is requested from the kernel:
//! * `sample_type = IP | TID | TIME | CPU | PERIOD` (`| CALLCHAIN` with call graphs);
//! * `mmap`, `mmap2`, `comm`, `task` (fork/exit) and `sample_id_all`, so that addresses can
//!   be mapped to files and threads to commands;
//! * a period (`--period`) or a frequency (`--freq`, checked against
//!   `/proc/sys/kernel/perf_event_max_sample_rate`);
//! * `precise_ip` for the `:p`/`:pp`/`:ppp` forms.
//!
//! Targets: a launched command (one event per CPU with `inherit`, enabled on exec, so every
//! fork and thread of it is followed) or an existing process (one event per thread that
//! exists when sampling starts; the kernel cannot mmap inherited any-CPU events), or the
//! whole system (one every-task event per CPU, like `perf record -a`/`-C`; kernel samples
//! when perf_event_paranoid allows them, otherwise user code only and
//! [`SessionSummary::kernel_refused`] says so).
//! The launched command is held back between fork and exec until the events exist; see
//! `spawn_held`.

pub mod group;

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use perf_event::events::{Raw, Software};
use perf_event::{Builder, Counter, SampleFlag, SampleSkid, Sampler};

use tma_sys::advice::{self, Op};

use crate::process::HeldChild;
use tma_host::Host;

/// How long a launched command has to end after tma passed it SIGINT/SIGTERM, before SIGKILL.
const INTERRUPT_GRACE: Duration = Duration::from_secs(2);

/// Default sampling frequency, as `perf record` uses.
pub const DEFAULT_FREQ_HZ: u64 = 4000;

/// Errors from setting up or running a sampling session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SamplingError {
    #[error(
        "sampling frequency {requested} Hz is above the kernel limit of {max} Hz \
         (/proc/sys/kernel/perf_event_max_sample_rate); use --freq {max} or lower, \
         or --period N"
    )]
    FreqTooHigh { requested: u64, max: u64 },
    #[error("sampling frequency and period must be positive")]
    ZeroRate,
    #[error("cannot read {path}: {err}")]
    Proc { path: String, err: io::Error },
    #[error("process {pid} does not exist (or has exited); check the pid with `ps -p {pid}`")]
    NoSuchProcess { pid: i32 },
    #[error("cannot open the sampling event {event}: {err}{hint}")]
    Open {
        event: String,
        err: io::Error,
        hint: String,
    },
    #[error("cannot map the ring buffer of {event}: {}", advice::explain(Op::RingMmap, .err))]
    Mmap { event: String, err: io::Error },
    #[error("cannot start {program}: {err}")]
    Spawn { program: String, err: io::Error },
    #[error("no command given: pass one after `--`, or -p PID")]
    NoCommand,
    #[error("waiting for the sampled processes failed: {0}")]
    Wait(io::Error),
    #[error("cannot install the Ctrl-C handler: {0}")]
    Signal(io::Error),
    #[error("CPU {cpu} is not online here (online: {online}); pick CPUs from that list with -C")]
    CpuNotOnline { cpu: u32, online: String },
}

/// What to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SampleEvent {
    /// The software `cpu-clock` timer (works without a hardware PMU).
    CpuClock,
    /// The software `task-clock` timer.
    TaskClock,
    /// A hardware event given by its `perf_event_attr` encoding.
    Raw {
        /// Human name, for messages (`MEM_LOAD_RETIRED.L3_MISS:pp`).
        name: String,
        /// PMU type from sysfs (`/sys/bus/event_source/devices/cpu/type`, 4 for `cpu`).
        pmu_type: u32,
        config: u64,
        config1: u64,
        config2: u64,
    },
}

impl SampleEvent {
    /// Name used in messages and reports.
    pub fn name(&self) -> &str {
        match self {
            SampleEvent::CpuClock => "cpu-clock",
            SampleEvent::TaskClock => "task-clock",
            SampleEvent::Raw { name, .. } => name,
        }
    }
}

/// How often to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// One sample every N events (`--period`).
    Period(u64),
    /// Target samples per second (`--freq`); the kernel adjusts the period.
    Freq(u64),
}

/// Who to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Run this command (program and arguments, as the OS strings given) and follow it, its
    /// threads and children.
    Launch(Vec<OsString>),
    /// Attach to an existing process and all its threads.
    Pid(i32),
    /// Every process on these CPUs (`None`: all online CPUs), one event per CPU, as
    /// `perf record -a` / `-C CPUS`: sampling lasts for the duration or until Ctrl-C.
    System { cpus: Option<Vec<u32>> },
}

/// A sampling session's settings.
#[derive(Debug, Clone)]
pub struct SamplingConfig {
    pub event: SampleEvent,
    pub rate: Rate,
    /// `precise_ip`: 0 (arbitrary skid) ..= 3 (zero skid required).
    pub precise: u8,
    /// Record call chains (frame pointers; kernel-walked).
    pub callchain: bool,
    /// Stop after this long: an attached process is left alone; a launched command gets
    /// SIGTERM (as `perf stat --timeout` does) and is waited for.
    pub duration: Option<Duration>,
    /// Also sample kernel code (needs perf_event_paranoid <= 1 or root).
    pub include_kernel: bool,
    /// Ring buffer data pages per event (power of two).
    pub mmap_pages: usize,
    /// The `/sys` and `/proc` roots, injectable for tests.
    pub host: Host,
    /// Read these events with every sample (`PERF_SAMPLE_READ` with `PERF_FORMAT_GROUP`;
    /// see [`group`]). A launched command's children are followed only where the kernel
    /// takes `inherit` with sample-read (Linux 6.12); elsewhere the command's first thread
    /// alone is sampled and [`SessionSummary::inherit_refused`] says so.
    pub group: Option<group::GroupSpec>,
    /// A launched command's stdout: inherited, or `/dev/null` for a second pass whose
    /// output was already shown (`tma locate --tree`'s direct pass).
    pub command_stdout: crate::process::CommandStdout,
}

impl SamplingConfig {
    /// cpu-clock at [`DEFAULT_FREQ_HZ`], no call chains, user space only.
    pub fn new(event: SampleEvent) -> Self {
        SamplingConfig {
            event,
            rate: Rate::Freq(DEFAULT_FREQ_HZ),
            precise: 0,
            callchain: false,
            duration: None,
            include_kernel: false,
            mmap_pages: 128,
            host: Host::system(),
            group: None,
            command_stdout: crate::process::CommandStdout::Inherit,
        }
    }
}

/// `PERF_RECORD_FINISHED_ROUND` (a perf.data "user" record type): [`Session::run`] passes
/// one, with an empty body, after each pass that drained records from all ring buffers.
/// Every ring is in time order but the rings are read one after the other, so records
/// reach the callback out of time order across rings; a record not yet read when a pass
/// ends was written after all records of the pass before it were read, which is what
/// lets a consumer sort with a bounded buffer (perf's "ordered events"; see
/// `tma_profile::order`).
pub const PERF_RECORD_FINISHED_ROUND: u32 = 68;

/// One kernel record from the ring buffer, without its 8-byte header (or a
/// [`PERF_RECORD_FINISHED_ROUND`] marker).
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// `perf_event_header.type` (PERF_RECORD_*).
    pub ty: u32,
    /// `perf_event_header.misc`.
    pub misc: u16,
    /// The record body: one slice, or two when it wraps around the end of the ring.
    pub data: &'a [&'a [u8]],
}

/// What happened during a session, besides the records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSummary {
    /// Exit status of the launched command (`None` for -p, or when killed by a signal).
    pub exit_code: Option<i32>,
    /// Signal that ended the launched command, if any.
    pub signal: Option<i32>,
    /// The attached process had gone before the session ended.
    pub target_vanished: bool,
    /// Threads whose events could not be opened because they exited in the meantime.
    pub threads_vanished: usize,
    /// Wall time sampled.
    pub elapsed: Duration,
    /// The duration ran out while the launched command was still running (it was sent
    /// SIGTERM).
    pub stopped_at_duration: bool,
    /// Sampling was ended by Ctrl-C (SIGINT) or SIGTERM (an attached process: at once; a
    /// launched command: when it ended, having been passed the signal); the records taken so
    /// far were all delivered.
    pub interrupted: bool,
    /// System-wide sampling was asked to include the kernel, but perf_event_paranoid (this
    /// text) refused it: only user code was sampled.
    pub kernel_refused: Option<String>,
    /// Group sampling of a launched command: the kernel refused `inherit` with
    /// `PERF_SAMPLE_READ` (before Linux 6.12), so only the command's first thread was
    /// sampled, not the threads and processes it started.
    pub inherit_refused: bool,
}

/// Check a sampling frequency against the kernel's limit (`max_rate_text` is the content of
/// `/proc/sys/kernel/perf_event_max_sample_rate`; `None` when unreadable, then not checked).
pub fn validate_rate(rate: Rate, max_rate_text: Option<&str>) -> Result<(), SamplingError> {
    match rate {
        Rate::Period(0) | Rate::Freq(0) => Err(SamplingError::ZeroRate),
        Rate::Period(_) => Ok(()),
        Rate::Freq(f) => {
            let max = max_rate_text.and_then(|t| t.trim().parse::<u64>().ok());
            match max {
                Some(max) if f > max => Err(SamplingError::FreqTooHigh { requested: f, max }),
                _ => Ok(()),
            }
        }
    }
}

/// `perf_event_attr` as the bytes a perf.data file stores (little-endian, 136-byte v8 layout),
/// so that the record parser can be set up from the very attr the kernel was given.
pub fn attr_bytes(b: &Builder<'_>, cfg: &SamplingConfig) -> Vec<u8> {
    let a = b.attrs();
    let (period_or_freq, config1, config2) = match (&cfg.rate, &cfg.event) {
        (
            Rate::Period(p),
            SampleEvent::Raw {
                config1, config2, ..
            },
        ) => (*p, *config1, *config2),
        (
            Rate::Freq(f),
            SampleEvent::Raw {
                config1, config2, ..
            },
        ) => (*f, *config1, *config2),
        (Rate::Period(p), _) => (*p, 0, 0),
        (Rate::Freq(f), _) => (*f, 0, 0),
    };
    let flags = a._bitfield_1.get(0, 64);
    let mut v = Vec::with_capacity(136);
    v.extend_from_slice(&a.type_.to_le_bytes());
    v.extend_from_slice(&136u32.to_le_bytes());
    v.extend_from_slice(&a.config.to_le_bytes());
    v.extend_from_slice(&period_or_freq.to_le_bytes());
    v.extend_from_slice(&a.sample_type.to_le_bytes());
    v.extend_from_slice(&a.read_format.to_le_bytes());
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes()); // wakeup_events
    v.extend_from_slice(&a.bp_type.to_le_bytes());
    v.extend_from_slice(&config1.to_le_bytes());
    v.extend_from_slice(&config2.to_le_bytes());
    v.extend_from_slice(&a.branch_sample_type.to_le_bytes());
    v.extend_from_slice(&a.sample_regs_user.to_le_bytes());
    v.extend_from_slice(&a.sample_stack_user.to_le_bytes());
    v.extend_from_slice(&a.clockid.to_le_bytes());
    v.extend_from_slice(&a.sample_regs_intr.to_le_bytes());
    v.extend_from_slice(&a.aux_watermark.to_le_bytes());
    v.extend_from_slice(&a.sample_max_stack.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&a.aux_sample_size.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&a.sig_data.to_le_bytes());
    v.extend_from_slice(&a.config3.to_le_bytes());
    v
}

fn builder_for(cfg: &SamplingConfig) -> Builder<'static> {
    let mut b = match &cfg.event {
        SampleEvent::CpuClock => Builder::new(Software::CPU_CLOCK),
        SampleEvent::TaskClock => Builder::new(Software::TASK_CLOCK),
        SampleEvent::Raw {
            pmu_type,
            config,
            config1,
            config2,
            ..
        } => {
            let mut b = Builder::new(Raw::new(*config).config1(*config1).config2(*config2));
            b.attrs_mut().type_ = *pmu_type;
            b
        }
    };
    let mut flags =
        SampleFlag::IP | SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::PERIOD;
    if cfg.callchain {
        flags |= SampleFlag::CALLCHAIN;
    }
    b.sample(flags)
        .mmap(true)
        .mmap2(true)
        .comm(true)
        .comm_exec(true)
        .task(true)
        .sample_id_all(true)
        .exclude_kernel(!cfg.include_kernel)
        .exclude_hv(true)
        .wakeup_events(1)
        .any_cpu();
    match cfg.rate {
        Rate::Period(p) => b.sample_period(p),
        Rate::Freq(f) => b.sample_frequency(f),
    };
    b.precise_ip(match cfg.precise {
        0 => SampleSkid::Arbitrary,
        1 => SampleSkid::Constant,
        2 => SampleSkid::RequestZero,
        _ => SampleSkid::RequireZero,
    });
    if cfg.callchain {
        b.exclude_callchain_kernel(!cfg.include_kernel);
    }
    b
}

/// What to add to the error of opening a sampling event for `tid` (-1: every task on a CPU).
fn open_hint(err: &io::Error, cfg: &SamplingConfig, tid: i32) -> String {
    let event = &cfg.event;
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let op = if tid < 0 {
                Op::PerfOpenCpu
            } else if cfg.include_kernel {
                Op::PerfOpenProcess
            } else {
                Op::PerfOpenUser
            };
            format!(
                "; perf_event_paranoid is {}: {}",
                cfg.host.paranoid_text(),
                advice::permission(op)
            )
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV)
            if matches!(event, SampleEvent::Raw { .. }) =>
        {
            " (no hardware PMU for this event here: sample cpu-clock instead)".into()
        }
        Some(libc::EINVAL) if matches!(event, SampleEvent::Raw { .. }) => {
            " (the PMU rejected the encoding or the precise level; try a lower :p level)".into()
        }
        _ => String::new(),
    }
}

/// An open sampling session: events are open, the launched command (if any) is held before
/// exec until [`Session::run`].
pub struct Session {
    cfg: SamplingConfig,
    samplers: Vec<Sampler>,
    /// The counting leaders and members of sampled groups: open as long as the samplers.
    group_counters: Vec<Counter>,
    attr: Vec<u8>,
    child: Option<HeldChild>,
    /// The launched command's name, for messages.
    program: String,
    pid: i32,
    summary: SessionSummary,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("event", &self.cfg.event)
            .field("events_open", &self.samplers.len())
            .field("pid", &self.pid)
            .finish()
    }
}

impl Session {
    /// Validate the settings, start (held) or find the target and open the events.
    pub fn open(cfg: SamplingConfig, target: &Target) -> Result<Session, SamplingError> {
        let max =
            std::fs::read_to_string(cfg.host.proc.join("sys/kernel/perf_event_max_sample_rate"))
                .ok();
        validate_rate(cfg.rate, max.as_deref())?;
        let mut summary = SessionSummary::default();
        let open_one = |tid: i32, cpu: Option<usize>, inherit: bool, enable_on_exec: bool| {
            open_sampler(&cfg, tid, cpu, inherit, enable_on_exec)
        };
        let mut group_counters = Vec::new();
        match target {
            Target::Launch(argv) => {
                // The kernel refuses to mmap an inherited per-task event on "any CPU", so
                // (as perf record does) open one inherited event per CPU for the task.
                let cpus = cfg.host.online_cpus_or_cpu0();
                let child = spawn_held(argv, cfg.command_stdout)?;
                let pid = child.pid();
                let mut samplers = Vec::new();
                let mut attr = Vec::new();
                let mut inherit = true;
                let mut i = 0;
                while i < cpus.len() {
                    match open_one(pid, Some(cpus[i] as usize), inherit, true) {
                        Ok((s, a, c)) => {
                            samplers.push(s);
                            group_counters.extend(c);
                            attr = a;
                            i += 1;
                        }
                        // Sample-read with inherit needs Linux 6.12: follow the command's
                        // first thread alone, and say so.
                        Err(SamplingError::Open { err, .. })
                            if inherit
                                && cfg.group.is_some()
                                && err.raw_os_error() == Some(libc::EINVAL) =>
                        {
                            inherit = false;
                            summary.inherit_refused = true;
                            samplers.clear();
                            group_counters.clear();
                            i = 0;
                        }
                        Err(e) => {
                            child.abort();
                            return Err(e);
                        }
                    }
                }
                Ok(Session {
                    cfg,
                    samplers,
                    group_counters,
                    attr,
                    child: Some(child),
                    program: argv[0].to_string_lossy().into_owned(),
                    pid,
                    summary,
                })
            }
            Target::Pid(pid) => {
                let pid = *pid;
                let tids = list_threads(&cfg.host, pid)?;
                let mut samplers = Vec::new();
                let mut attr = Vec::new();
                for tid in tids {
                    match open_one(tid, None, false, false) {
                        Ok((s, a, c)) => {
                            samplers.push(s);
                            group_counters.extend(c);
                            attr = a;
                        }
                        Err(SamplingError::Open { err, .. })
                            if err.raw_os_error() == Some(libc::ESRCH) =>
                        {
                            summary.threads_vanished += 1;
                        }
                        Err(e) => return Err(e),
                    }
                }
                if samplers.is_empty() {
                    return Err(SamplingError::NoSuchProcess { pid });
                }
                Ok(Session {
                    cfg,
                    samplers,
                    group_counters,
                    attr,
                    child: None,
                    program: String::new(),
                    pid,
                    summary,
                })
            }
            Target::System { cpus } => {
                let cpus = system_cpus(&cfg.host, cpus.as_deref())?;
                let mut cfg = cfg;
                let (samplers, attr, group_counters) = match open_per_cpu(&cfg, &cpus) {
                    Err(SamplingError::Open { err, .. })
                        if cfg.include_kernel && is_permission(&err) =>
                    {
                        // Kernel samples refused: user code only, and say so.
                        cfg.include_kernel = false;
                        let r = open_per_cpu(&cfg, &cpus)?;
                        summary.kernel_refused = Some(cfg.host.paranoid_text());
                        r
                    }
                    r => r?,
                };
                Ok(Session {
                    cfg,
                    samplers,
                    group_counters,
                    attr,
                    child: None,
                    program: String::new(),
                    pid: -1,
                    summary,
                })
            }
        }
    }

    /// The `perf_event_attr` given to the kernel, in perf.data's on-disk layout.
    pub fn attr_bytes(&self) -> &[u8] {
        &self.attr
    }

    /// Pid of the launched or attached process.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Release the launched command, then hand every record to `on_record` until the target
    /// exits or the duration is over. Records come ring by ring, so NOT in time order
    /// across rings; a [`PERF_RECORD_FINISHED_ROUND`] marker ends each pass over the rings.
    pub fn run(
        mut self,
        on_record: &mut dyn FnMut(RawRecord<'_>),
    ) -> Result<SessionSummary, SamplingError> {
        let start = Instant::now();
        let deadline = self.cfg.duration.map(|d| start + d);
        // SIGINT/SIGTERM are caught (tma_sys::signal): attached to a process, sampling stops
        // and what was taken is reported, as `perf record -p` does. A launched command got the
        // same Ctrl-C (the whole foreground group does) and is sent the signal again (a
        // SIGTERM may have been sent to tma alone); sampling goes on until it ends, SIGKILL
        // after a grace period, so its last samples are still reported.
        tma_sys::signal::catch().map_err(SamplingError::Signal)?;
        let mut forwarded: Option<Instant> = None;
        if let Some(child) = self.child.as_mut() {
            child.release().map_err(|err| SamplingError::Spawn {
                program: self.program.clone(),
                err,
            })?;
        }
        loop {
            let mut got = 0usize;
            for s in self.samplers.iter_mut() {
                while let Some(rec) = s.next_record() {
                    got += 1;
                    on_record(RawRecord {
                        ty: rec.ty(),
                        misc: rec.misc(),
                        data: rec.data(),
                    });
                }
            }
            let finished = match self.child.as_mut() {
                Some(c) => c.try_wait().map_err(SamplingError::Wait)?.is_some(),
                None if self.pid < 0 => false,
                None => !process_alive(
                    std::fs::read(self.cfg.host.proc.join(format!("{}/stat", self.pid)))
                        .ok()
                        .as_deref(),
                ),
            };
            if got > 0 {
                on_record(RawRecord {
                    ty: PERF_RECORD_FINISHED_ROUND,
                    misc: 0,
                    data: &[],
                });
            }
            let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            let stop = tma_sys::signal::interrupted();
            if let Some(sig) = stop {
                self.summary.interrupted = true;
                if let (Some(c), false) = (self.child.as_ref(), finished) {
                    match forwarded {
                        None => {
                            c.signal(sig.number());
                            forwarded = Some(Instant::now());
                        }
                        Some(t) if t.elapsed() > INTERRUPT_GRACE => c.signal(libc::SIGKILL),
                        Some(_) => {}
                    }
                }
            }
            let interrupted = stop.is_some() && self.child.is_none();
            if finished || timed_out || interrupted {
                if finished && self.child.is_none() {
                    self.summary.target_vanished = true;
                }
                if timed_out && !finished {
                    if let Some(c) = self.child.as_ref() {
                        c.signal(libc::SIGTERM);
                        self.summary.stopped_at_duration = true;
                    }
                }
                // Stop the events, then drain what is left.
                for c in self.group_counters.iter_mut() {
                    let _ = c.disable();
                }
                for s in self.samplers.iter_mut() {
                    let _ = s.as_counter_mut().disable();
                    while let Some(rec) = s.next_record() {
                        on_record(RawRecord {
                            ty: rec.ty(),
                            misc: rec.misc(),
                            data: rec.data(),
                        });
                    }
                }
                on_record(RawRecord {
                    ty: PERF_RECORD_FINISHED_ROUND,
                    misc: 0,
                    data: &[],
                });
                break;
            }
            if got == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.summary.elapsed = start.elapsed();
        if let Some(mut child) = self.child.take() {
            let status = child.wait().map_err(SamplingError::Wait)?;
            use std::os::unix::process::ExitStatusExt;
            self.summary.exit_code = status.code();
            self.summary.signal = status.signal();
        }
        Ok(self.summary)
    }
}

fn page_size() -> usize {
    4096
}

/// Open one sampling event with its ring buffer: task `tid` (-1: every task, with a CPU).
/// With [`SamplingConfig::group`], the group's counting leader and members are opened
/// around it and returned (they must stay open as long as the sampler).
fn open_sampler(
    cfg: &SamplingConfig,
    tid: i32,
    cpu: Option<usize>,
    inherit: bool,
    enable_on_exec: bool,
) -> Result<(Sampler, Vec<u8>, Vec<Counter>), SamplingError> {
    let target = |b: &mut Builder<'_>| {
        match cpu {
            Some(c) => b.one_cpu(c),
            None => b.any_cpu(),
        };
        if tid < 0 {
            b.any_pid();
        } else {
            b.observe_pid(tid);
        }
        b.inherit(inherit);
    };
    let open_err = |name: &str, source: io::Error| SamplingError::Open {
        event: name.to_string(),
        hint: open_hint(&source, cfg, tid),
        err: source,
    };
    let mut b = builder_for(cfg);
    target(&mut b);
    let mut extra = Vec::new();
    let counter = match &cfg.group {
        None => {
            b.enable_on_exec(enable_on_exec).enabled(!enable_on_exec);
            b.build().map_err(|e| open_err(cfg.event.name(), e))?
        }
        Some(g) => {
            b.attrs_mut().sample_type |= group::SAMPLE_READ;
            b.attrs_mut().read_format = group::GROUP_READ_FORMAT;
            let member = |ev: &group::GroupEvent, lead: bool| {
                let mut m = Builder::new(Raw::new(ev.config).config1(ev.config1));
                m.attrs_mut().type_ = ev.type_;
                m.attrs_mut().read_format = group::GROUP_READ_FORMAT;
                target(&mut m);
                m.exclude_kernel(!cfg.include_kernel).exclude_hv(true);
                if lead {
                    m.enable_on_exec(enable_on_exec).enabled(!enable_on_exec);
                } else {
                    // Members count whenever their leader does.
                    m.enabled(true);
                }
                m
            };
            let mut leader = match &g.leader {
                Some(l) => Some(member(l, true).build().map_err(|e| open_err(&l.name, e))?),
                None => None,
            };
            let mut sampler = match leader.as_mut() {
                Some(l) => {
                    b.enabled(true);
                    b.build_with_group(l)
                        .map_err(|e| open_err(cfg.event.name(), e))?
                }
                None => {
                    b.enable_on_exec(enable_on_exec).enabled(!enable_on_exec);
                    b.build().map_err(|e| open_err(cfg.event.name(), e))?
                }
            };
            for ev in &g.members {
                let c = match leader.as_mut() {
                    Some(l) => member(ev, false).build_with_group(l),
                    None => member(ev, false).build_with_group(&mut sampler),
                }
                .map_err(|e| open_err(&ev.name, e))?;
                extra.push(c);
            }
            extra.extend(leader);
            sampler
        }
    };
    let attr = attr_bytes(&b, cfg);
    let sampler = counter
        .sampled(cfg.mmap_pages.max(1) * page_size())
        .map_err(|source| SamplingError::Mmap {
            event: cfg.event.name().to_string(),
            err: source,
        })?;
    Ok((sampler, attr, extra))
}

/// Samplers, the attr they were opened with, and the group counters kept open with them.
type Opened = (Vec<Sampler>, Vec<u8>, Vec<Counter>);

/// One every-task event per CPU.
fn open_per_cpu(cfg: &SamplingConfig, cpus: &[u32]) -> Result<Opened, SamplingError> {
    let mut samplers = Vec::with_capacity(cpus.len());
    let mut attr = Vec::new();
    let mut counters = Vec::new();
    for &cpu in cpus {
        let (s, a, c) = open_sampler(cfg, -1, Some(cpu as usize), false, false)?;
        samplers.push(s);
        counters.extend(c);
        attr = a;
    }
    Ok((samplers, attr, counters))
}

fn is_permission(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// The CPUs of a system-wide session: the ones asked for (each must be online), or all
/// online CPUs.
pub fn system_cpus(host: &Host, asked: Option<&[u32]>) -> Result<Vec<u32>, SamplingError> {
    let online = host.online_cpus_or_cpu0();
    match asked {
        None => Ok(online),
        Some(list) => {
            for &cpu in list {
                if !online.contains(&cpu) {
                    let shown: Vec<String> = online.iter().map(u32::to_string).collect();
                    return Err(SamplingError::CpuNotOnline {
                        cpu,
                        online: shown.join(","),
                    });
                }
            }
            let mut v = list.to_vec();
            v.sort_unstable();
            v.dedup();
            Ok(v)
        }
    }
}

/// Whether `/proc/PID/stat` content describes a live process (`None`: the file is gone).
/// Zombies (`Z`) and dead tasks (`X`) count as exited.
pub fn process_alive(stat: Option<&[u8]>) -> bool {
    // The state, field 3: a zombie or a dead process is not alive.
    match stat
        .and_then(tma_host::stat_fields)
        .and_then(|mut f| f.next())
    {
        Some(state) => !matches!(state.first(), Some(b'Z' | b'X' | b'x') | None),
        None => false,
    }
}

/// Thread ids of a process ([`Host::threads`]); no process or no thread is
/// [`SamplingError::NoSuchProcess`].
fn list_threads(host: &Host, pid: i32) -> Result<Vec<i32>, SamplingError> {
    let tids = host.threads(pid).map_err(|e| {
        if e.is_missing() {
            SamplingError::NoSuchProcess { pid }
        } else {
            SamplingError::Proc {
                path: e.path().display().to_string(),
                err: e.into_io(),
            }
        }
    })?;
    if tids.is_empty() {
        return Err(SamplingError::NoSuchProcess { pid });
    }
    Ok(tids)
}

/// Start `argv` held between fork and exec until the events are attached.
fn spawn_held(
    argv: &[OsString],
    stdout: crate::process::CommandStdout,
) -> Result<HeldChild, SamplingError> {
    let program = argv.first().ok_or(SamplingError::NoCommand)?;
    let spawn = || -> io::Result<HeldChild> {
        let cargs = argv
            .iter()
            .map(|a| std::ffi::CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"))?;
        HeldChild::spawn_program(&cargs[0], &cargs, stdout)
    };
    spawn().map_err(|err| SamplingError::Spawn {
        program: program.to_string_lossy().into_owned(),
        err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_get_the_advice_for_what_was_sampled() {
        let mut cfg = SamplingConfig::new(SampleEvent::CpuClock);
        cfg.host = Host::new(
            "/nonexistent",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/live/proc-paranoid-3"),
        );
        let eacces = io::Error::from_raw_os_error(libc::EACCES);
        let hint = |cfg: &SamplingConfig, tid| open_hint(&eacces, cfg, tid);
        assert!(hint(&cfg, 7).starts_with("; perf_event_paranoid is 3: "));
        assert!(hint(&cfg, 7).ends_with(advice::permission(Op::PerfOpenUser)));
        assert!(hint(&cfg, -1).ends_with(advice::permission(Op::PerfOpenCpu)));
        cfg.include_kernel = true;
        assert!(hint(&cfg, 7).ends_with(advice::permission(Op::PerfOpenProcess)));
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        assert_eq!(open_hint(&einval, &cfg, 7), "");
        let e = SamplingError::Mmap {
            event: "cpu-clock".into(),
            err: io::Error::from_raw_os_error(libc::EPERM),
        };
        assert!(e.to_string().contains("perf_event_mlock_kb"), "{e}");
    }

    #[test]
    fn freq_checked_against_kernel_limit() {
        assert!(validate_rate(Rate::Freq(4000), Some("100000\n")).is_ok());
        let e = validate_rate(Rate::Freq(200_000), Some("100000\n")).unwrap_err();
        assert!(e.to_string().contains("100000"), "{e}");
        assert!(validate_rate(Rate::Freq(200_000), None).is_ok());
        assert!(matches!(
            validate_rate(Rate::Period(0), None),
            Err(SamplingError::ZeroRate)
        ));
    }

    #[test]
    fn attr_bytes_have_perf_data_layout() {
        let mut cfg = SamplingConfig::new(SampleEvent::CpuClock);
        cfg.callchain = true;
        let b = builder_for(&cfg);
        let v = attr_bytes(&b, &cfg);
        assert_eq!(v.len(), 136);
        assert_eq!(u32::from_le_bytes(v[0..4].try_into().unwrap()), 1); // PERF_TYPE_SOFTWARE
        assert_eq!(u64::from_le_bytes(v[16..24].try_into().unwrap()), 4000);
        let st = u64::from_le_bytes(v[24..32].try_into().unwrap());
        // IP | TID | TIME | CALLCHAIN | CPU | PERIOD
        assert_eq!(st, 0x1 | 0x2 | 0x4 | 0x20 | 0x80 | 0x100);
        let flags = u64::from_le_bytes(v[40..48].try_into().unwrap());
        assert_ne!(flags & (1 << 10), 0, "freq bit");
        assert_ne!(flags & (1 << 18), 0, "sample_id_all bit");
        assert_ne!(flags & (1 << 23), 0, "mmap2 bit");
    }

    #[test]
    fn zombies_count_as_exited() {
        assert!(process_alive(Some(b"42 (a) b) R 1 2 3")));
        assert!(!process_alive(Some(b"42 (sleep) Z 1 2 3")));
        assert!(!process_alive(Some(b"garbage")));
        assert!(!process_alive(None));
    }

    #[test]
    fn system_cpus_must_be_online() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        std::fs::write(dir.path().join("sys/devices/system/cpu/online"), "0-1,3\n").unwrap();
        let host = Host::under(dir.path());
        assert_eq!(system_cpus(&host, None).unwrap(), [0, 1, 3]);
        assert_eq!(system_cpus(&host, Some(&[3, 1, 3])).unwrap(), [1, 3]);
        let e = system_cpus(&host, Some(&[2])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "CPU 2 is not online here (online: 0,1,3); pick CPUs from that list with -C"
        );
    }

    #[test]
    fn missing_pid_is_a_clear_error() {
        let dir = std::env::temp_dir().join("tma-no-such-proc-root");
        let e = list_threads(&Host::new("/nonexistent", dir), 4242).unwrap_err();
        assert!(matches!(e, SamplingError::NoSuchProcess { pid: 4242 }));
    }
}
