//! A live measurement: open every kvm tracepoint on every CPU with sample_period=1, read the
//! per-CPU rings, decode and aggregate.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crate::decode::Decoder;
use crate::reasons::Isa;
use crate::record::{parse, PerfRecord};
use crate::stats::{Aggregator, KvmReport, Sample};
use crate::sys;
use crate::tracefs::{detect_backend, is_vmm, Tracefs};
use crate::KvmError;
use tma_perf::host::Host;

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every VM on the host (`-a`).
    All,
    /// One VMM process and all its threads (`-p`).
    Pid(u32),
    /// Launch this command and follow it and its children (`-- CMD`).
    Command(Vec<String>),
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

struct Running {
    rings: Vec<sys::Ring>,
    fds: Vec<OwnedFd>,
}

/// Run a measurement. `on_interval` gets a report of each `-I` interval (exits whose
/// `kvm_entry` falls in the next interval have no time in either interval report; the final
/// report pairs across intervals).
///
/// Installs a SIGINT/SIGTERM handler for the rest of the process's life: a Ctrl-C ends the
/// measurement normally (report returned, a tracefs mount made by this call unmounted). With
/// `Target::Pid` the events are opened per CPU for all processes and filtered on the tgid, so
/// vCPU threads created later are included.
pub fn run(
    cfg: &SessionConfig,
    mut on_interval: impl FnMut(&KvmReport),
) -> Result<Outcome, KvmError> {
    let backend = detect_backend(&cfg.root);
    if let Target::Pid(pid) = cfg.target {
        if !is_vmm(&cfg.proc_root, pid)? {
            return Err(KvmError::NotAVmm(pid));
        }
    }
    // From here on a Ctrl-C only sets a flag: the run ends normally and what we mounted is
    // unmounted.
    sys::catch_interrupts();
    let tracefs = Tracefs::find_or_mount(&cfg.root)?;
    let formats = tracefs.kvm_formats()?;
    let mut decoder = Decoder::new(&formats)?;
    let host = cfg.host();
    decoder.isa_fallback = host_isa_fallback(&host);
    let cpus = host
        .online_cpus()
        .map_err(|e| KvmError::Tracefs(format!("cannot read the online CPU list: {e}")))?;

    // Launch the command held before exec, so the events are attached before it runs.
    let mut child: Option<sys::HeldChild> = None;
    if let Target::Command(argv) = &cfg.target {
        if argv.is_empty() {
            return Err(KvmError::Launch("no command given after --".into()));
        }
        child = Some(
            sys::spawn_held(argv)
                .map_err(|e| KvmError::Launch(format!("cannot start `{}`: {e}", argv[0])))?,
        );
    }
    let kill_child = |child: &mut Option<sys::HeldChild>| {
        if let Some(c) = child.as_mut() {
            c.kill();
        }
    };

    let (pid, inherit) = match (&cfg.target, &child) {
        (Target::Command(_), Some(c)) => (c.pid, true),
        _ => (-1, false),
    };
    let mut running = Running {
        rings: Vec::new(),
        fds: Vec::new(),
    };
    for &cpu in &cpus {
        let mut leader: Option<usize> = None;
        for f in &formats {
            let o = sys::TpOpen {
                id: f.id,
                pid,
                cpu: cpu as i32,
                inherit,
                enable_on_exec: inherit,
            };
            let fd = match sys::open_tracepoint(&o) {
                Ok(fd) => fd,
                Err(e) => {
                    kill_child(&mut child);
                    return Err(open_error(&f.name, e, &host));
                }
            };
            match leader {
                None => {
                    let ring = match sys::Ring::map(fd, cfg.mmap_pages) {
                        Ok(r) => r,
                        Err(e) => {
                            kill_child(&mut child);
                            return Err(KvmError::Perf(format!(
                                "cannot map the ring buffer of {}: {e}",
                                f.name
                            )));
                        }
                    };
                    running.rings.push(ring);
                    leader = Some(running.rings.len() - 1);
                }
                Some(l) => {
                    if let Err(e) = sys::set_output(&fd, running.rings[l].fd()) {
                        kill_child(&mut child);
                        return Err(KvmError::Perf(format!(
                            "cannot share the ring buffer for {}: {e}",
                            f.name
                        )));
                    }
                    running.fds.push(fd);
                }
            }
        }
    }
    if child.is_none() {
        for r in &running.rings {
            sys::enable(r.fd()).map_err(|e| KvmError::Perf(format!("enable: {e}")))?;
        }
        for fd in &running.fds {
            sys::enable(fd).map_err(|e| KvmError::Perf(format!("enable: {e}")))?;
        }
    }
    let start = Instant::now();
    // Let the child exec: enable_on_exec turns the events on.
    if let Some(c) = child.as_mut() {
        if let Err(e) = c.release() {
            let name = match &cfg.target {
                Target::Command(a) => a[0].clone(),
                _ => String::new(),
            };
            let _ = c.wait();
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
    let raw_fds: Vec<_> = running.rings.iter().map(|r| r.fd().as_raw_fd()).collect();
    loop {
        let mut stop = sys::interrupted();
        if let Some(c) = child.as_mut() {
            match c.try_wait() {
                Ok(Some(st)) => {
                    child_status = Some(ExitStatus::from_raw(st));
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
            for r in &running.rings {
                let _ = sys::disable(r.fd());
            }
            for fd in &running.fds {
                let _ = sys::disable(fd);
            }
        }
        drain(
            &mut running,
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
        sys::poll_fds(&raw_fds, 100);
    }
    if let (Some(c), None) = (child.as_mut(), child_status) {
        // Interrupted: the child got the same Ctrl-C; collect it.
        child_status = c.wait().ok().map(ExitStatus::from_raw);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mounted = tracefs.mounted_by_us();
    drop(running);
    drop(tracefs);
    Ok(Outcome {
        report: total.report(elapsed, &backend.module),
        child_status,
        mounted_tracefs: mounted,
    })
}

fn open_error(name: &str, e: std::io::Error, host: &Host) -> KvmError {
    let paranoid = host
        .perf_event_paranoid()
        .map_or_else(|_| "?".to_string(), |p| p.to_string());
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => KvmError::Permission(format!(
            "perf_event_open of tracepoint kvm:{name} was refused ({e}); tracepoints need root or CAP_PERFMON (perf_event_paranoid is {paranoid}): run as root, or `sudo setcap cap_perfmon+ep $(which tma)`"
        )),
        _ => KvmError::Perf(format!("perf_event_open of tracepoint kvm:{name} failed: {e}")),
    }
}

fn drain(
    running: &mut Running,
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
    for ring in &mut running.rings {
        ring.drain(|rec| match parse(rec) {
            Some(PerfRecord::Sample {
                pid,
                tid,
                time_ns,
                cpu,
                raw,
            }) => {
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
            Some(PerfRecord::Lost { lost: n }) => lost += n,
            Some(PerfRecord::Throttle(true)) => throttled += 1,
            Some(_) => {}
            None => bad += 1,
        });
    }
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
