//! A live measurement: open every kvm tracepoint on every CPU with sample_period=1, read the
//! per-CPU rings, decode and aggregate.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use tma_perf::process::{self, HeldChild};
use tma_perf::tracepoint::{
    TraceRecord, TracepointError, TracepointId, TracepointRings, TracepointTarget,
};

use crate::decode::Decoder;
use crate::reasons::Isa;
use crate::stats::{Aggregator, KvmReport, Sample};
use crate::tracefs::{detect_backend, is_vmm, kvm_formats};
use crate::KvmError;
use tma_host::Host;
use tma_perf::tracefs::Tracefs;

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every VM on the host (`-a`).
    All,
    /// One VMM process and all its threads (`-p`).
    Pid(u32),
    /// Launch this command and follow it and its children (`-- CMD`); the arguments go to
    /// exec as given.
    Command(Vec<std::ffi::OsString>),
}

/// Options of a measurement.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub target: Target,
    /// Stop after this long (default: until the command exits, or Ctrl-C).
    pub duration: Option<Duration>,
    /// Call the interval callback this often.
    pub interval: Option<Duration>,
    /// Data pages per CPU ring (power of two).
    pub mmap_pages: usize,
    /// Filesystem root for /sys (normally `/`).
    pub root: PathBuf,
    /// /proc (normally `/proc`).
    pub proc_root: PathBuf,
}

impl SessionConfig {
    pub fn new(target: Target) -> SessionConfig {
        SessionConfig {
            target,
            duration: None,
            interval: None,
            mmap_pages: 256,
            root: PathBuf::from("/"),
            proc_root: PathBuf::from("/proc"),
        }
    }

    /// The host facts' roots: `<root>/sys` and the procfs root.
    pub fn host(&self) -> Host {
        Host::new(self.root.join("sys"), &self.proc_root)
    }
}

/// Result of a measurement.
#[derive(Debug)]
pub struct Outcome {
    pub report: KvmReport,
    /// Exit status of the launched command.
    pub child_status: Option<ExitStatus>,
    /// Whether tracefs had to be mounted (and was unmounted again).
    pub mounted_tracefs: bool,
}

fn host_isa_fallback(host: &Host) -> Option<Isa> {
    match host.cpuinfo().ok()?.vendor.as_deref()? {
        "GenuineIntel" => Some(Isa::Vmx),
        "AuthenticAMD" | "HygonGenuine" => Some(Isa::Svm),
        _ => None,
    }
}

/// Run a measurement. `on_interval` gets a report of each `-I` interval (exits whose
/// `kvm_entry` falls in the next interval have no time in either interval report; the final
/// report pairs across intervals).
///
/// Installs the SIGINT/SIGTERM handler (`tma_sys::signal`) for the rest of the process's life:
/// a Ctrl-C or SIGTERM ends the measurement normally (report returned, a launched command
/// passed the signal and reaped, a tracefs mount made by this call unmounted). With
/// `Target::Pid` the events are opened per CPU for all processes and filtered on the tgid, so
/// vCPU threads created later are included.
pub fn run(
    cfg: &SessionConfig,
    mut on_interval: impl FnMut(&KvmReport),
) -> Result<Outcome, KvmError> {
    let backend = detect_backend(&cfg.root);
    if let Target::Pid(pid) = cfg.target {
        if !is_vmm(&cfg.host(), pid)? {
            return Err(KvmError::NotAVmm(pid));
        }
    }
    // From here on a Ctrl-C only sets a flag: the run ends normally and what we mounted is
    // unmounted.
    process::catch_interrupts()
        .map_err(|e| KvmError::Perf(format!("cannot install the Ctrl-C handler: {e}")))?;
    let tracefs = Tracefs::find_or_mount(&cfg.root)?;
    let formats = kvm_formats(&tracefs)?;
    let mut decoder = Decoder::new(&formats)?;
    let host = cfg.host();
    decoder.isa_fallback = host_isa_fallback(&host);
    let cpus = host
        .online_cpus()
        .map_err(|e| KvmError::Tracefs(format!("cannot read the online CPU list: {e}")))?;

    // Launch the command held before exec, so the events are attached before it runs.
    let mut child: Option<HeldChild> = None;
    if let Target::Command(argv) = &cfg.target {
        if argv.is_empty() {
            return Err(KvmError::Launch("no command given after --".into()));
        }
        child =
            Some(HeldChild::spawn(argv).map_err(|e| {
                KvmError::Launch(format!("cannot start `{}`: {e}", argv[0].display()))
            })?);
    }
    let target = match &child {
        Some(c) => TracepointTarget::Launched(c.pid()),
        None => TracepointTarget::AllProcesses,
    };
    let ids: Vec<TracepointId> = formats
        .iter()
        .map(|f| TracepointId {
            id: f.id,
            name: f.name.clone(),
        })
        .collect();
    // An error drops (so aborts) a child not yet released: it never runs unmeasured.
    let mut rings = TracepointRings::open(&ids, &cpus, target, cfg.mmap_pages)
        .map_err(|e| setup_error(e, &host))?;
    if child.is_none() {
        rings
            .enable()
            .map_err(|e| KvmError::Perf(format!("enable: {e}")))?;
    }
    let start = Instant::now();
    // Let the child exec: enable_on_exec turns the events on.
    if let Some(c) = child.as_mut() {
        if let Err(e) = c.release() {
            let name = match &cfg.target {
                Target::Command(a) => a[0].display().to_string(),
                _ => String::new(),
            };
            return Err(KvmError::Launch(format!("cannot run `{name}`: {e}")));
        }
    }

    let filter_pid = match cfg.target {
        Target::Pid(p) => Some(p),
        _ => None,
    };
    let mut total = Aggregator::new();
    let mut interval = Aggregator::new();
    let mut last_tick = Instant::now();
    let mut batch: Vec<Sample> = Vec::new();
    let mut child_status = None;
    loop {
        let mut stop = process::interrupted();
        if let Some(c) = child.as_mut() {
            match c.try_wait() {
                Ok(Some(st)) => {
                    child_status = Some(st);
                    stop = true;
                }
                Ok(None) => {}
                Err(_) => stop = true,
            }
        }
        if cfg.duration.is_some_and(|d| start.elapsed() >= d) {
            stop = true;
        }
        if stop {
            rings.disable();
        }
        drain(
            &mut rings,
            &decoder,
            filter_pid,
            &mut batch,
            &mut total,
            &mut interval,
        );
        if let Some(iv) = cfg.interval {
            if last_tick.elapsed() >= iv || stop {
                let el = last_tick.elapsed().as_secs_f64();
                on_interval(&interval.report(el, &backend.module));
                interval = Aggregator::new();
                last_tick = Instant::now();
            }
        }
        if stop {
            break;
        }
        rings.wait(100);
    }
    if let (Some(c), None) = (child.as_mut(), child_status) {
        // Interrupted: a Ctrl-C reached the child too, a SIGTERM may have been sent to tma
        // alone; pass the signal on and collect the child (SIGKILL after a grace period).
        child_status = stop_child(c);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mounted = tracefs.mounted_by_us();
    drop(rings);
    drop(tracefs);
    Ok(Outcome {
        report: total.report(elapsed, &backend.module),
        child_status,
        mounted_tracefs: mounted,
    })
}

/// End a launched command still running after an interruption: the same signal, up to 2 s to
/// end, then SIGKILL; its status once reaped.
fn stop_child(c: &mut HeldChild) -> Option<ExitStatus> {
    if let Some(sig) = tma_sys::signal::interrupted() {
        c.signal(sig.number());
    }
    let t0 = Instant::now();
    loop {
        match c.try_wait() {
            Ok(Some(st)) => return Some(st),
            Ok(None) if t0.elapsed() < Duration::from_secs(2) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                c.signal(libc::SIGKILL);
                return c.wait().ok();
            }
            Err(_) => return None,
        }
    }
}

fn setup_error(e: TracepointError, host: &Host) -> KvmError {
    match e {
        TracepointError::Open { name, err } => open_error(&name, err, host),
        other => KvmError::Perf(other.to_string()),
    }
}

fn open_error(name: &str, e: std::io::Error, host: &Host) -> KvmError {
    let paranoid = host
        .perf_event_paranoid()
        .map_or_else(|_| "?".to_string(), |p| p.to_string());
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => KvmError::Permission(format!(
            "perf_event_open of tracepoint kvm:{name} was refused ({e}; perf_event_paranoid is {paranoid}): {}",
            tma_sys::advice::permission(tma_sys::advice::Op::TracepointOpen)
        )),
        _ => KvmError::Perf(format!("perf_event_open of tracepoint kvm:{name} failed: {e}")),
    }
}

fn drain(
    rings: &mut TracepointRings,
    decoder: &Decoder,
    filter_pid: Option<u32>,
    batch: &mut Vec<Sample>,
    total: &mut Aggregator,
    interval: &mut Aggregator,
) {
    batch.clear();
    let mut lost = 0u64;
    let mut bad = 0u64;
    let mut throttled = 0u64;
    rings.drain(|rec| match rec {
        TraceRecord::Sample {
            pid,
            tid,
            time_ns,
            cpu,
            raw,
        } => {
            if filter_pid.is_some_and(|p| p != pid) {
                return;
            }
            match decoder.decode(raw) {
                Ok(Some(event)) => batch.push(Sample {
                    pid,
                    tid,
                    time_ns,
                    cpu,
                    event,
                }),
                Ok(None) => {}
                Err(_) => bad += 1,
            }
        }
        TraceRecord::Lost { lost: n } => lost += n,
        TraceRecord::Throttle(true) => throttled += 1,
        TraceRecord::Truncated => bad += 1,
        _ => {}
    });
    batch.sort_by_key(|s| s.time_ns);
    for s in batch.iter() {
        total.add(s);
        interval.add(s);
    }
    total.lost += lost;
    interval.lost += lost;
    total.undecodable += bad;
    interval.undecodable += bad;
    total.throttled += throttled;
    interval.throttled += throttled;
}
