//! Running a [`Plan`] on a [`Target`]: the [`Backend`] trait, the [`Live`] backend
//! (perf_event_open; with a software-event plan it is the "Software" backend that works on a
//! machine without a PMU), and the [`Replay`] backend (recorded raw readings with chosen
//! enabled/running times).
//!
//! Every backend returns a [`Measurement`] of *raw* group readings per interval; readings,
//! multiplex scaling and aggregation are derived from it by one function
//! ([`Measurement::interval_readings`]) so live runs and replays print the same figures.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::attr::{attr_for, check_group, AttachMode, AttrError};
use crate::event::{EventSpec, SoftwareEvent};
use crate::plan::Plan;
use crate::process::{CommandStdout, HeldChild};
use crate::readings::{Interval, Reading, ReadingStatus};
use crate::sys;
use tma_host::sysfs::Pmus;
use tma_host::Host;
use tma_sys::advice::{self, Op};
use tma_sys::process::Exit;

/// What to count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Launch a command (argv[0] looked up in PATH), counters enabled at exec. The
    /// arguments are the OS strings the user gave (any bytes but NUL); see
    /// [`crate::process::os_args`] for how they are recorded.
    Command(#[serde(with = "crate::process::os_args")] Vec<OsString>),
    /// Existing processes, all their threads.
    Pids(Vec<i32>),
    /// Existing threads.
    Tids(Vec<i32>),
    /// System-wide, on these CPUs (`None` = all online CPUs).
    System(Option<Vec<u32>>),
    /// System-wide on these CPUs (`None` = all online CPUs) while a launched command runs,
    /// as `perf stat -a -- CMD`: every task is counted, the command only bounds the run and
    /// gives the exit status.
    SystemDuring {
        cpus: Option<Vec<u32>>,
        #[serde(with = "crate::process::os_args")]
        command: Vec<OsString>,
    },
    /// The tasks of these cgroups (directories of a cgroup v2 hierarchy, as absolute paths),
    /// on every online CPU: perf_event's cgroup mode (`PERF_FLAG_PID_CGROUP`), one counter
    /// group per cgroup and CPU. Readings carry the cgroup's index in this list.
    Cgroups(Vec<PathBuf>),
}

/// How to run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// `-I MS`: read deltas every this many milliseconds.
    pub interval: Option<Duration>,
    /// Stop after this long (attach and system-wide targets; a command also stops then).
    pub duration: Option<Duration>,
    /// The `/sys` and `/proc` roots.
    pub host: Host,
    /// Where a launched command's stdout goes.
    pub command_stdout: CommandStdout,
    /// The interval callback consumes the intervals: the [`Measurement`] then holds their
    /// sum as one interval instead of every one (memory stays flat over a long `-I` run).
    pub stream_only: bool,
}

impl RunOptions {
    /// Options with the real `/sys` and `/proc`.
    pub fn new() -> Self {
        RunOptions {
            host: Host::system(),
            ..Default::default()
        }
    }
}

/// Errors from counting.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("hardware counters are not available: perf_event_open of {event} failed: {source}")]
    NoHardware {
        event: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Attr(#[from] AttrError),
    /// The kernel refused for want of privilege; `advice` is `tma_sys::advice`'s for what was
    /// opened (a task's user code, a task with its kernel code, or a whole CPU).
    #[error("permission denied opening {event} (perf_event_paranoid is {paranoid}): {advice}")]
    Permission {
        event: String,
        paranoid: String,
        advice: &'static str,
    },
    #[error("no such process: {0} (check the pid with `ps -p {0}`)")]
    NoSuchProcess(i32),
    #[error("command not found: {0} (not an executable file, and not in PATH)")]
    CommandNotFound(String),
    #[error("cannot run {cmd}: {source}")]
    Exec { cmd: String, source: std::io::Error },
    #[error("CPU {0} is not online (see /sys/devices/system/cpu/online)")]
    BadCpu(u32),
    #[error("kernel refused {event} (perf_event_open: {source})")]
    Open {
        event: String,
        source: std::io::Error,
    },
    #[error("reading counters failed: {0}")]
    Read(std::io::Error),
    #[error("nothing to count: empty target list")]
    EmptyTarget,
    #[error(
        "cannot count cgroup {}: {why}; give a directory of the cgroup v2 hierarchy, e.g. \
         /sys/fs/cgroup/system.slice/NAME.service (see `cat /proc/PID/cgroup` for a process's)",
        path.display()
    )]
    BadCgroup { path: PathBuf, why: String },
    #[error("replay: {0}")]
    Replay(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Raw readings of one group at one attach point for one interval (deltas).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupReading {
    /// Index of the group in the plan.
    pub group: usize,
    /// CPU for system-wide counting, else `None`.
    pub cpu: Option<u32>,
    /// Thread for attached-thread counting, else `None`.
    pub tid: Option<u32>,
    /// Index into [`Target::Cgroups`] for cgroup counting, else `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<u32>,
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
    /// One raw value per group member, in plan order.
    pub values: Vec<u64>,
}

/// All group readings of one interval (or of the whole run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawInterval {
    pub start_s: f64,
    pub end_s: f64,
    pub groups: Vec<GroupReading>,
}

impl RawInterval {
    /// Add `next`'s deltas (the stretch that follows this one) per group and attach point.
    pub fn add(&mut self, next: &RawInterval) {
        self.end_s = next.end_s;
        for g in &next.groups {
            match self.groups.iter_mut().find(|o| {
                o.group == g.group && o.cpu == g.cpu && o.tid == g.tid && o.cgroup == g.cgroup
            }) {
                Some(o) => {
                    o.time_enabled_ns += g.time_enabled_ns;
                    o.time_running_ns += g.time_running_ns;
                    for (a, b) in o.values.iter_mut().zip(&g.values) {
                        *a += b;
                    }
                }
                None => self.groups.push(g.clone()),
            }
        }
    }
}

/// A run's intervals as a backend collects them: every one, or with
/// [`RunOptions::stream_only`] their running sum, so that a long `-I` run whose intervals
/// are consumed by the callback keeps constant memory.
struct Collected {
    keep: bool,
    intervals: Vec<RawInterval>,
}

impl Collected {
    fn new(opts: &RunOptions) -> Self {
        Collected {
            keep: !opts.stream_only,
            intervals: Vec::new(),
        }
    }

    fn push(&mut self, iv: RawInterval) {
        match self.intervals.first_mut() {
            Some(sum) if !self.keep => sum.add(&iv),
            _ => self.intervals.push(iv),
        }
    }
}

/// How the counted target ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The launched command exited with this code.
    Exited(i32),
    /// The launched command was killed by this signal.
    Signaled(i32),
    /// Ctrl-C / SIGTERM stopped counting.
    Interrupted,
    /// `--duration` elapsed.
    Duration,
    /// Every attached process exited.
    TargetsExited,
}

/// Everything one run counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Unix time (seconds) counting started.
    pub start_unix_s: f64,
    /// Wall-clock duration of the run, nanoseconds.
    pub wall_ns: u64,
    /// One entry per `-I` interval; a single entry for a run without `-I`.
    pub intervals: Vec<RawInterval>,
    pub ending: Ending,
    /// Groups the kernel refused (index, reason); their events read as not supported.
    #[serde(default)]
    pub failed_groups: Vec<(usize, String)>,
}

impl Measurement {
    /// The whole run as one raw interval (deltas summed per group and attach point).
    pub fn total(&self) -> RawInterval {
        let mut out = RawInterval {
            start_s: self.intervals.first().map_or(0.0, |i| i.start_s),
            end_s: self.intervals.first().map_or(0.0, |i| i.start_s),
            groups: Vec::new(),
        };
        for iv in &self.intervals {
            out.add(iv);
        }
        out
    }

    /// Readings for one raw interval: per attach point scaled by its own enabled/running
    /// time (`Reading::from_raw`), then summed into one aggregated reading per event. With
    /// `breakdown`, the per-CPU / per-thread readings are kept too.
    pub fn interval_readings(plan: &Plan, raw: &RawInterval, breakdown: bool) -> Interval {
        let mut readings: Vec<Reading> = Vec::new();
        let mut parts: Vec<Reading> = Vec::new();
        for (gi, group) in plan.groups.iter().enumerate() {
            let mut agg: Vec<Option<Agg>> = vec![None; group.events.len()];
            for gr in raw.groups.iter().filter(|g| g.group == gi) {
                for (k, ev) in group.events.iter().enumerate() {
                    let v = gr.values.get(k).copied().unwrap_or(0);
                    // Enabled for no time at all in this stretch (a per-task counter while the
                    // task slept): nothing happened and nothing was missed, so the value is the
                    // raw delta (0), fully counted, rather than "not counted".
                    let mut r = if gr.time_enabled_ns == 0 {
                        let mut r = Reading::from_raw(&ev.name, v, 0, 0);
                        r.value = Some(v as f64);
                        r.counted_share = Some(1.0);
                        r.status = ReadingStatus::Counted;
                        r
                    } else {
                        Reading::from_raw(&ev.name, v, gr.time_enabled_ns, gr.time_running_ns)
                    };
                    r.group = Some(gi);
                    let a = agg[k].get_or_insert_with(Agg::default);
                    a.raw += v;
                    a.enabled += gr.time_enabled_ns;
                    a.running += gr.time_running_ns;
                    if let Some(x) = r.value {
                        a.value += x;
                        a.counted = true;
                    }
                    if breakdown && (gr.cpu.is_some() || gr.tid.is_some()) {
                        r.cpu = gr.cpu;
                        r.tid = gr.tid;
                        parts.push(r);
                    }
                }
            }
            for (k, ev) in group.events.iter().enumerate() {
                let r = match &agg[k] {
                    // No reading of this group at all: it could not be opened.
                    None => {
                        let mut r = Reading::missing(&ev.name, ReadingStatus::NotSupported);
                        r.group = Some(gi);
                        r
                    }
                    Some(a) => Reading {
                        event: ev.name.clone(),
                        raw: Some(a.raw),
                        value: a.counted.then_some(a.value),
                        time_enabled_ns: Some(a.enabled),
                        time_running_ns: Some(a.running),
                        counted_share: Some(if a.enabled == 0 {
                            1.0
                        } else {
                            (a.running as f64 / a.enabled as f64).min(1.0)
                        }),
                        status: if a.counted {
                            ReadingStatus::Counted
                        } else {
                            ReadingStatus::NotCounted
                        },
                        group: Some(gi),
                        block: None,
                        cpu: None,
                        tid: None,
                    },
                };
                readings.push(r);
            }
        }
        for (alias, name) in &plan.aliases {
            if let Some(r) = readings.iter().find(|r| &r.event == name).cloned() {
                readings.push(Reading {
                    event: alias.clone(),
                    ..r
                });
            }
        }
        readings.extend(parts);
        Interval {
            start_s: raw.start_s,
            end_s: raw.end_s,
            readings,
            printed: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Agg {
    raw: u64,
    value: f64,
    enabled: u64,
    running: u64,
    counted: bool,
}

/// A way of producing measurements for a plan.
pub trait Backend {
    /// Run `plan` on `target`. In interval mode (`opts.interval`), `on_interval` gets each
    /// interval as soon as it is read, in order (the same ones the measurement then holds),
    /// so a caller can print or export while counting goes on.
    fn run_with(
        &mut self,
        plan: &Plan,
        target: &Target,
        opts: &RunOptions,
        on_interval: &mut dyn FnMut(&RawInterval),
    ) -> Result<Measurement, RunError>;

    /// [`Backend::run_with`] without an interval callback.
    fn run(
        &mut self,
        plan: &Plan,
        target: &Target,
        opts: &RunOptions,
    ) -> Result<Measurement, RunError> {
        self.run_with(plan, target, opts, &mut |_| {})
    }
}

/// The software counts `tma stat` always takes (and the only ones on a machine without PMU).
pub fn software_events() -> Vec<EventSpec> {
    [
        SoftwareEvent::TaskClock,
        SoftwareEvent::ContextSwitches,
        SoftwareEvent::CpuMigrations,
        SoftwareEvent::PageFaults,
    ]
    .into_iter()
    .map(EventSpec::software)
    .collect()
}

/// Real counting through perf_event_open.
#[derive(Debug, Default)]
pub struct Live;

/// Groups the kernel refused: (group index, reason).
pub(crate) type FailedGroups = Vec<(usize, String)>;

/// Where one set of counter groups attaches: the `pid`, `cpu` and `flags` arguments of
/// perf_event_open, and the labels the readings carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachPoint {
    /// A pid or tid, -1 (any task: per-CPU counting), or with [`sys::FLAG_PID_CGROUP`] the
    /// fd of a cgroup directory.
    pub pid: i32,
    /// A CPU, or -1 (any CPU: per-task counting).
    pub cpu: i32,
    /// Extra perf_event_open flags (`PERF_FLAG_FD_CLOEXEC` is always added).
    pub flags: u64,
    pub cpu_label: Option<u32>,
    pub tid_label: Option<u32>,
    /// Index of the cgroup in [`Target::Cgroups`].
    pub cgroup_label: Option<u32>,
}

impl AttachPoint {
    fn task(tid: i32) -> Self {
        AttachPoint {
            pid: tid,
            cpu: -1,
            flags: 0,
            cpu_label: None,
            tid_label: u32::try_from(tid).ok(),
            cgroup_label: None,
        }
    }
    fn cpu(cpu: u32) -> Self {
        AttachPoint {
            pid: -1,
            cpu: cpu as i32,
            flags: 0,
            cpu_label: Some(cpu),
            tid_label: None,
            cgroup_label: None,
        }
    }
}

/// perf_event_open's cgroup mode: for each cgroup directory fd (in [`Target::Cgroups`]
/// order), one attach point per CPU with the fd as `pid` and `PERF_FLAG_PID_CGROUP`. The kernel
/// refuses cgroup events on "any CPU", so every point names a CPU.
pub fn cgroup_points(cgroup_fds: &[i32], cpus: &[u32]) -> Vec<AttachPoint> {
    let mut out = Vec::with_capacity(cgroup_fds.len() * cpus.len());
    for (i, &fd) in cgroup_fds.iter().enumerate() {
        for &c in cpus {
            out.push(AttachPoint {
                pid: fd,
                cpu: c as i32,
                flags: sys::FLAG_PID_CGROUP,
                cpu_label: Some(c),
                tid_label: None,
                cgroup_label: Some(i as u32),
            });
        }
    }
    out
}

/// Open a cgroup directory for [`cgroup_points`]: an error that says what to give instead
/// when it is not a directory of a cgroup v2 hierarchy.
pub fn open_cgroup(path: &Path) -> Result<OwnedFd, RunError> {
    let bad = |why: String| RunError::BadCgroup {
        path: path.to_path_buf(),
        why,
    };
    if !path.is_dir() {
        return Err(bad("not a directory".into()));
    }
    if !path.join("cgroup.procs").exists() {
        return Err(bad("not a cgroup directory (it has no cgroup.procs)".into()));
    }
    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    Ok(OwnedFd::from(f))
}

/// The function that opens one counter: `perf_event_open` ([`sys::perf_open_flags`]) for real
/// counting, a recorder in tests of the calls a plan and a target produce.
pub type Opener<'a> =
    dyn FnMut(&crate::attr::Attr, i32, i32, Option<i32>, u64) -> std::io::Result<OwnedFd> + 'a;

/// One opened group at one attach point.
pub(crate) struct OpenGroup {
    group: usize,
    cpu: Option<u32>,
    tid: Option<u32>,
    cgroup: Option<u32>,
    pub(crate) leader: OwnedFd,
    _members: Vec<OwnedFd>,
    n: usize,
    /// Last cumulative (enabled, running, values).
    last: (u64, u64, Vec<u64>),
}

/// Look `cmd` up like execvp does: a name with a `/` is used as is, otherwise PATH is searched.
pub fn resolve_command(cmd: impl AsRef<OsStr>) -> Option<PathBuf> {
    let cmd = cmd.as_ref();
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.is_empty() {
        return None;
    }
    if cmd.as_bytes().contains(&b'/') {
        let p = PathBuf::from(cmd);
        return is_exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| is_exec(p))
}

/// What kind of `perf_event_open` `attr` at `p` is, for the advice on a refusal: every task
/// on a CPU (`-a`, `-C`, cgroups), or one task's user code, or one task with its kernel code.
fn open_op(p: &AttachPoint, attr: &crate::attr::Attr) -> Op {
    if p.pid == -1 || p.flags & sys::FLAG_PID_CGROUP != 0 {
        Op::PerfOpenCpu
    } else if attr.exclude_kernel {
        Op::PerfOpenUser
    } else {
        Op::PerfOpenProcess
    }
}

fn map_open_error(ev: &EventSpec, e: std::io::Error, host: &Host, pid: i32, op: Op) -> RunError {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) if ev.needs_core_pmu() => {
            RunError::NoHardware {
                event: ev.name.clone(),
                source: e,
            }
        }
        Some(libc::EACCES) | Some(libc::EPERM) => RunError::Permission {
            event: ev.name.clone(),
            paranoid: host.paranoid_text(),
            advice: advice::permission(op),
        },
        Some(libc::ESRCH) => RunError::NoSuchProcess(pid),
        _ => RunError::Open {
            event: ev.name.clone(),
            source: e,
        },
    }
}

/// Open every group at every attach point. A group the kernel refuses for a reason that
/// concerns only that group (EINVAL, EOPNOTSUPP on one event...) is left out and reported in
/// the second list (its events then read as not supported); no PMU at all, no permission or
/// a vanished process stop everything, as does every hardware group failing.
pub(crate) fn open_groups(
    plan: &Plan,
    pmus: &Pmus,
    points: &[AttachPoint],
    mode: AttachMode,
    host: &Host,
    open: &mut Opener<'_>,
) -> Result<(Vec<OpenGroup>, FailedGroups), RunError> {
    let mut out = Vec::new();
    let mut failed: Vec<(usize, String)> = Vec::new();
    let mut first_err: Option<RunError> = None;
    for p in points {
        let (pid, cpu) = (p.pid, p.cpu);
        'group: for (gi, g) in plan.groups.iter().enumerate() {
            if failed.iter().any(|(f, _)| *f == gi) {
                continue;
            }
            // A core type's PMU counts only on its own CPUs (the kernel refuses the others).
            if !pmu_covers(pmus, &g.pmu, cpu) {
                continue;
            }
            let refs: Vec<&EventSpec> = g.events.iter().collect();
            check_group(&refs)?;
            let mut leader: Option<OwnedFd> = None;
            let mut members = Vec::new();
            for (k, ev) in g.events.iter().enumerate() {
                let attr = attr_for(ev, pmus, mode, k == 0)?;
                let fd = open(
                    &attr,
                    pid,
                    cpu,
                    leader.as_ref().map(|l| {
                        use std::os::fd::AsRawFd;
                        l.as_raw_fd()
                    }),
                    p.flags,
                );
                let fd = match fd {
                    Ok(fd) => fd,
                    Err(e) => match map_open_error(ev, e, host, pid, open_op(p, &attr)) {
                        err @ RunError::Open { .. } => {
                            failed.push((gi, err.to_string()));
                            first_err.get_or_insert(err);
                            continue 'group;
                        }
                        fatal => return Err(fatal),
                    },
                };
                if leader.is_none() {
                    leader = Some(fd);
                } else {
                    members.push(fd);
                }
            }
            if let Some(leader) = leader {
                out.push(OpenGroup {
                    group: gi,
                    cpu: p.cpu_label,
                    tid: p.tid_label,
                    cgroup: p.cgroup_label,
                    leader,
                    _members: members,
                    n: g.events.len(),
                    last: (0, 0, vec![0; g.events.len()]),
                });
            }
        }
    }
    // Groups that failed somewhere are dropped everywhere, so every attach point counts the
    // same events.
    out.retain(|o| !failed.iter().any(|(f, _)| *f == o.group));
    if out.is_empty() {
        if let Some(e) = first_err {
            return Err(e);
        }
    }
    Ok((out, failed))
}

/// Whether a group of `pmu` can be opened on `cpu` (-1: any CPU, per-task counting): always,
/// unless the PMU is one core type of a hybrid part whose `cpus` file leaves `cpu` out.
fn pmu_covers(pmus: &Pmus, pmu: &str, cpu: i32) -> bool {
    let Ok(cpu) = u32::try_from(cpu) else {
        return true;
    };
    match pmus.get(pmu) {
        Some(p) if p.is_core_type() => p.cpu_list().contains(&cpu),
        _ => true,
    }
}

/// The readings of a run on every core type of a hybrid part, with each core type's
/// enabled time cut to the time the task spent on that type.
///
/// A per-task counter of one core type (`cpu_atom/…/`) is enabled whenever the task runs,
/// but counts only while it runs on a CPU of that type: running < enabled although nothing
/// was multiplexed. Scaled as perf scales it, every count of the type would be blown up to
/// "as if the task had run there all the time" and the counted share would read as if most
/// of it were missed. Here, at each task attach point, the time on type T is taken as the
/// longest running time of T's groups there (exact when T's events fit its counters at
/// once; a lower bound when T multiplexes), and T's groups get that as their enabled time:
/// counts are then what T counted, and the counted share says what multiplexing missed.
/// Per-CPU readings (`-a`, `-C`, cgroups) are left alone: there each CPU is one type.
pub fn on_core_type_time(plan: &Plan, raw: &RawInterval, core_pmus: &[&str]) -> RawInterval {
    let mut out = raw.clone();
    let pmu_of = |g: &GroupReading| plan.groups.get(g.group).map(|x| x.pmu.as_str());
    let key = |g: &GroupReading| (g.tid, g.cgroup);
    let mut points: Vec<(Option<u32>, Option<u32>)> = Vec::new();
    for g in raw.groups.iter().filter(|g| g.cpu.is_none()) {
        if !points.contains(&key(g)) {
            points.push(key(g));
        }
    }
    for point in points {
        for &pmu in core_pmus {
            let mine = |g: &&mut GroupReading| {
                g.cpu.is_none() && key(g) == point && pmu_of(g) == Some(pmu)
            };
            let on_type = out
                .groups
                .iter_mut()
                .filter(mine)
                .map(|g| g.time_running_ns.min(g.time_enabled_ns))
                .max();
            let Some(on_type) = on_type else { continue };
            for g in out.groups.iter_mut().filter(mine) {
                g.time_enabled_ns = on_type;
            }
        }
    }
    out
}

pub(crate) fn read_deltas(
    groups: &mut [OpenGroup],
    start_s: f64,
    end_s: f64,
) -> Result<RawInterval, RunError> {
    let mut out = RawInterval {
        start_s,
        end_s,
        groups: Vec::new(),
    };
    for g in groups.iter_mut() {
        let r = sys::read_group(&g.leader, g.n).map_err(RunError::Read)?;
        let values: Vec<u64> = r.values.iter().map(|v| v.0).collect();
        let d = GroupReading {
            group: g.group,
            cpu: g.cpu,
            tid: g.tid,
            cgroup: g.cgroup,
            time_enabled_ns: r.time_enabled.saturating_sub(g.last.0),
            time_running_ns: r.time_running.saturating_sub(g.last.1),
            values: values
                .iter()
                .zip(&g.last.2)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        };
        g.last = (r.time_enabled, r.time_running, values);
        out.groups.push(d);
    }
    Ok(out)
}

/// Stop a launched child that is still running: SIGTERM, a grace period, SIGKILL; reap it.
fn stop_child(pid: i32, pidfd: Option<&OwnedFd>) -> Option<Exit> {
    if let Ok(Some(e)) = tma_sys::process::wait(pid, true) {
        return Some(e);
    }
    let _ = tma_sys::process::kill(pid, libc::SIGTERM);
    if let Some(fd) = pidfd {
        let _ = sys::poll_readable(&[fd], 500);
    }
    if let Ok(Some(e)) = tma_sys::process::wait(pid, true) {
        return Some(e);
    }
    let _ = tma_sys::process::kill(pid, libc::SIGKILL);
    loop {
        match tma_sys::process::wait(pid, false) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(e) => return e,
            Err(_) => return None,
        }
    }
}

/// What a live run counts on, and what it holds while counting: the command it started (held
/// stopped until the counters are open) and its pidfd, the pidfds of attached processes, and
/// the open cgroup directories.
struct Attached {
    points: Vec<AttachPoint>,
    mode: AttachMode,
    child: Option<(HeldChild, Option<OwnedFd>)>,
    watch: Vec<OwnedFd>,
    cgroup_fds: Vec<OwnedFd>,
}

/// Resolve `target` into attach points: start the command (held), check pids, tids, CPUs,
/// open cgroups.
fn attach(target: &Target, opts: &RunOptions) -> Result<Attached, RunError> {
    let mut child: Option<(HeldChild, Option<OwnedFd>)> = None;
    let mut watch: Vec<OwnedFd> = Vec::new();
    // Cgroup directory fds, open while the counters are opened.
    let mut cgroup_fds: Vec<OwnedFd> = Vec::new();
    let (points, mode): (Vec<AttachPoint>, AttachMode) = match target {
        Target::Command(argv) => {
            let held = spawn_held(argv, opts)?;
            let pid = held.pid();
            child = Some((held, None));
            let mut p = AttachPoint::task(pid);
            p.tid_label = None;
            (vec![p], AttachMode::LAUNCH)
        }
        Target::Pids(pids) => {
            if pids.is_empty() {
                return Err(RunError::EmptyTarget);
            }
            let mut pts = Vec::new();
            for &pid in pids {
                let tids = opts
                    .host
                    .threads(pid)
                    .map_err(|_| RunError::NoSuchProcess(pid))?;
                for tid in tids {
                    pts.push(AttachPoint::task(tid));
                }
                watch.push(
                    tma_sys::process::pidfd_open(pid).map_err(|_| RunError::NoSuchProcess(pid))?,
                );
            }
            (pts, AttachMode::PROCESS)
        }
        Target::Tids(tids) => {
            if tids.is_empty() {
                return Err(RunError::EmptyTarget);
            }
            for &t in tids {
                if !opts.host.has_process(t) {
                    return Err(RunError::NoSuchProcess(t));
                }
            }
            (
                tids.iter().map(|&t| AttachPoint::task(t)).collect(),
                AttachMode::SINGLE,
            )
        }
        Target::System(cpus) => (system_points(cpus, opts)?, AttachMode::SINGLE),
        Target::SystemDuring { cpus, command } => {
            let points = system_points(cpus, opts)?;
            // Held until the counters are open and enabled: the command's start is counted.
            child = Some((spawn_held(command, opts)?, None));
            (points, AttachMode::SINGLE)
        }
        Target::Cgroups(paths) => {
            if paths.is_empty() {
                return Err(RunError::EmptyTarget);
            }
            for p in paths {
                cgroup_fds.push(open_cgroup(p)?);
            }
            let raw: Vec<i32> = cgroup_fds
                .iter()
                .map(|f| {
                    use std::os::fd::AsRawFd;
                    f.as_raw_fd()
                })
                .collect();
            (
                cgroup_points(&raw, &opts.host.online_cpus_or_cpu0()),
                AttachMode::SINGLE,
            )
        }
    };
    Ok(Attached {
        points,
        mode,
        child,
        watch,
        cgroup_fds,
    })
}

/// Start `argv` (argv[0] looked up in PATH), held before exec.
fn spawn_held(argv: &[OsString], opts: &RunOptions) -> Result<HeldChild, RunError> {
    let cmd = argv.first().ok_or(RunError::EmptyTarget)?;
    let not_found = || RunError::CommandNotFound(cmd.to_string_lossy().into_owned());
    let path = resolve_command(cmd).ok_or_else(not_found)?;
    let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| not_found())?;
    let cargv = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| not_found())?;
    Ok(HeldChild::spawn_program(
        &cpath,
        &cargv,
        opts.command_stdout,
    )?)
}

/// One attach point per CPU of `cpus` (`None`: every online CPU), each checked online.
fn system_points(cpus: &Option<Vec<u32>>, opts: &RunOptions) -> Result<Vec<AttachPoint>, RunError> {
    let online = opts.host.online_cpus_or_cpu0();
    let cpus = cpus.clone().unwrap_or_else(|| online.clone());
    if let Some(bad) = cpus.iter().find(|c| !online.contains(c)) {
        return Err(RunError::BadCpu(*bad));
    }
    Ok(cpus.iter().map(|&c| AttachPoint::cpu(c)).collect())
}

/// Count until the run ends (the command or every attached process exits, --duration,
/// Ctrl-C), reading an interval at every -I tick into `intervals` and `on_interval`. Returns
/// how the run ended and the end of the last interval read (seconds since `t0`); `child` is
/// `None` afterwards when it exited.
fn count_until_end(
    groups: &mut [OpenGroup],
    child: &mut Option<(HeldChild, Option<OwnedFd>)>,
    watch: &[OwnedFd],
    opts: &RunOptions,
    t0: Instant,
    on_interval: &mut dyn FnMut(&RawInterval),
    intervals: &mut Collected,
) -> Result<(Ending, f64), RunError> {
    let mut last_s = 0.0;
    let mut next_tick = opts.interval.map(|i| t0 + i);
    let deadline = opts.duration.map(|d| t0 + d);
    let ending;
    loop {
        if crate::process::interrupted() {
            ending = Ending::Interrupted;
            break;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            ending = Ending::Duration;
            break;
        }
        if let Some(tick) = next_tick {
            if now >= tick {
                let end_s = t0.elapsed().as_secs_f64();
                let iv = read_deltas(groups, last_s, end_s)?;
                on_interval(&iv);
                intervals.push(iv);
                last_s = end_s;
                next_tick = opts.interval.map(|i| tick + i);
                continue;
            }
        }
        let wake = [next_tick, deadline].into_iter().flatten().min();
        let timeout_ms = wake.map_or(-1, |w| {
            w.saturating_duration_since(now)
                .as_millis()
                .clamp(1, i32::MAX as u128) as i32
        });
        let mut fds: Vec<&OwnedFd> = Vec::new();
        if let Some((_, Some(p))) = &child {
            fds.push(p);
        }
        fds.extend(watch.iter());
        if fds.is_empty() {
            if let Some((held, None)) = &child {
                // No pidfd (old kernel): poll the child every 50 ms.
                match tma_sys::process::wait(held.pid(), true) {
                    Ok(Some(e)) => {
                        ending = exit_ending(e);
                        *child = None;
                        break;
                    }
                    _ => std::thread::sleep(Duration::from_millis(timeout_ms.clamp(1, 50) as u64)),
                }
                continue;
            }
            std::thread::sleep(Duration::from_millis(if timeout_ms < 0 {
                100
            } else {
                timeout_ms.min(100) as u64
            }));
            continue;
        }
        let ready = sys::poll_readable(&fds, timeout_ms)?;
        if let Some((held, Some(_))) = &child {
            if ready[0] {
                let e = loop {
                    match tma_sys::process::wait(held.pid(), false) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Ok(Some(e)) => break Some(e),
                        _ => break None,
                    }
                };
                ending = e.map_or(Ending::Exited(0), exit_ending);
                *child = None;
                break;
            }
        } else if !watch.is_empty() && ready.iter().all(|r| *r) {
            ending = Ending::TargetsExited;
            break;
        }
    }
    Ok((ending, last_s))
}

impl Backend for Live {
    fn run_with(
        &mut self,
        plan: &Plan,
        target: &Target,
        opts: &RunOptions,
        on_interval: &mut dyn FnMut(&RawInterval),
    ) -> Result<Measurement, RunError> {
        let pmus = Pmus::discover(&opts.host.sys).unwrap_or_default();
        crate::process::catch_interrupts()?;
        let Attached {
            points,
            mode,
            mut child,
            watch,
            cgroup_fds,
        } = attach(target, opts)?;
        let opened = open_groups(
            plan,
            &pmus,
            &points,
            mode,
            &opts.host,
            &mut sys::perf_open_flags,
        );
        // The kernel holds its own reference to each cgroup once the counters are open.
        drop(cgroup_fds);
        let (mut groups, failed_groups) = match opened {
            Ok(g) => g,
            Err(e) => {
                if let Some((held, _)) = child.take() {
                    held.abort();
                }
                return Err(e);
            }
        };
        let t0 = Instant::now();
        let start_unix_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        // A launched command's own counters start at exec; per-CPU counters (also those
        // bounded by a command) are enabled here, before the command is let go.
        if !matches!(target, Target::Command(_)) {
            for g in &groups {
                sys::enable_group(&g.leader).map_err(RunError::Read)?;
            }
        }
        if let Some((held, pidfd)) = child.as_mut() {
            *pidfd = tma_sys::process::pidfd_open(held.pid()).ok();
            if let Err(source) = held.release() {
                return Err(RunError::Exec {
                    cmd: match target {
                        Target::Command(a) | Target::SystemDuring { command: a, .. } => {
                            a[0].to_string_lossy().into_owned()
                        }
                        _ => String::new(),
                    },
                    source,
                });
            }
        }
        let mut intervals = Collected::new(opts);
        let (ending, last_s) = count_until_end(
            &mut groups,
            &mut child,
            &watch,
            opts,
            t0,
            on_interval,
            &mut intervals,
        )?;
        let end_s = t0.elapsed().as_secs_f64();
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let last = read_deltas(&mut groups, last_s, end_s)?;
        // The last (usually partial) stretch is always kept, so intervals add up to the run.
        if opts.interval.is_some() {
            on_interval(&last);
        }
        intervals.push(last);
        let intervals = intervals.intervals;
        drop(groups);
        if let Some((held, pidfd)) = child.take() {
            // Stopped by Ctrl-C or --duration: that is how the run ended, whatever the
            // (terminated) child's status says.
            let _ = stop_child(held.pid(), pidfd.as_ref());
        }
        Ok(Measurement {
            start_unix_s,
            wall_ns,
            intervals,
            ending,
            failed_groups,
        })
    }
}

fn exit_ending(e: Exit) -> Ending {
    match e {
        Exit::Code(c) => Ending::Exited(c),
        Exit::Signal(s) => Ending::Signaled(s),
    }
}

/// Replays recorded measurements, in order, one per `run` call: what a `tma stat --record`
/// snapshot holds, so a replay goes through the same session code as the live run. Each run
/// was recorded with a plan; the plan asked for must name the same events in each of its
/// non-empty groups (a `--no-multiplex` run asks for a sub-plan with the other groups
/// emptied). In interval mode the recorded intervals go to the interval callback in order.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    pub runs: std::collections::VecDeque<(Plan, Measurement)>,
}

impl Backend for Replay {
    fn run_with(
        &mut self,
        plan: &Plan,
        _target: &Target,
        opts: &RunOptions,
        on_interval: &mut dyn FnMut(&RawInterval),
    ) -> Result<Measurement, RunError> {
        let (recorded, m) = self
            .runs
            .pop_front()
            .ok_or_else(|| RunError::Replay("no more recorded runs".into()))?;
        let same = plan.groups.len() == recorded.groups.len()
            && plan.groups.iter().zip(&recorded.groups).all(|(a, b)| {
                a.events.is_empty()
                    || a.events
                        .iter()
                        .map(|e| &e.name)
                        .eq(b.events.iter().map(|e| &e.name))
            });
        if !same {
            return Err(RunError::Replay(
                "the plan differs from the recorded one (different CPU, level or events)".into(),
            ));
        }
        if opts.interval.is_some() {
            for iv in &m.intervals {
                on_interval(iv);
            }
        }
        Ok(m)
    }
}

/// Restrict a measurement to some groups (a `--no-multiplex` run measures one group).
pub fn only_groups(m: &Measurement, groups: &[usize]) -> Measurement {
    let mut out = m.clone();
    for iv in &mut out.intervals {
        iv.groups.retain(|g| groups.contains(&g.group));
    }
    out
}

/// A plan holding only the given groups of `plan` (group indices are kept by the caller).
pub fn sub_plan(plan: &Plan, groups: &[usize]) -> Plan {
    Plan {
        groups: plan
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                if groups.contains(&i) {
                    g.clone()
                } else {
                    crate::plan::Group {
                        pmu: g.pmu.clone(),
                        events: Vec::new(),
                        slots: Vec::new(),
                    }
                }
            })
            .collect(),
        unschedulable: plan.unschedulable.clone(),
        aliases: plan.aliases.clone(),
    }
}

/// Merge the total readings of several runs that each measured different groups
/// (`--no-multiplex`): one raw interval with every group once.
pub fn combine_runs(runs: &[Measurement]) -> Measurement {
    let mut groups = Vec::new();
    let mut wall = 0;
    for m in runs {
        groups.extend(m.total().groups);
        wall += m.wall_ns;
    }
    let end_s = wall as f64 / 1e9;
    Measurement {
        start_unix_s: runs.first().map_or(0.0, |m| m.start_unix_s),
        wall_ns: wall,
        intervals: vec![RawInterval {
            start_s: 0.0,
            end_s,
            groups,
        }],
        ending: runs.last().map_or(Ending::Exited(0), |m| m.ending),
        failed_groups: runs.iter().flat_map(|m| m.failed_groups.clone()).collect(),
    }
}

/// Mean and relative spread (sample standard deviation as % of the mean) per event over
/// repeated runs, from their aggregated readings.
pub fn repeat_stats(plan: &Plan, runs: &[Measurement]) -> Vec<(String, f64, f64)> {
    let totals: Vec<Interval> = runs
        .iter()
        .map(|m| Measurement::interval_readings(plan, &m.total(), false))
        .collect();
    let mut out = Vec::new();
    for ev in plan.events() {
        let vals: Vec<f64> = totals
            .iter()
            .filter_map(|t| t.get(&ev.name).and_then(|r| r.value))
            .collect();
        if vals.is_empty() {
            continue;
        }
        let n = vals.len() as f64;
        let mean = vals.iter().sum::<f64>() / n;
        let sd = if vals.len() > 1 {
            (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        let pct = if mean != 0.0 {
            100.0 * sd / mean.abs()
        } else {
            0.0
        };
        out.push((ev.name.clone(), mean, pct));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Group, Slot};

    /// One perf_event_open call as the opener saw it: (attr, pid, cpu, has group fd, flags).
    type Call = (crate::attr::Attr, i32, i32, bool, u64);

    /// Open `plan` at `points` with a recording opener (each "fd" is /dev/null).
    fn recorded_opens(plan: &Plan, points: &[AttachPoint]) -> (Vec<Call>, Vec<OpenGroup>) {
        let mut calls: Vec<Call> = Vec::new();
        let host = Host::new("/nonexistent/sys", "/nonexistent/proc");
        let (groups, failed) = open_groups(
            plan,
            &Pmus::default(),
            points,
            AttachMode::SINGLE,
            &host,
            &mut |attr, pid, cpu, group, flags| {
                calls.push((*attr, pid, cpu, group.is_some(), flags));
                std::fs::File::open("/dev/null").map(OwnedFd::from)
            },
        )
        .unwrap();
        assert!(failed.is_empty());
        (calls, groups)
    }

    #[test]
    fn each_core_type_is_opened_on_its_own_cpus_with_its_own_pmu_type() {
        // Three core types: cpu_core (type 4) on CPUs 0-1, cpu_atom (10) on 2-3,
        // cpu_lowpower (12) on 4-5; a software group on every CPU.
        let sys = tma_testkit::fixture("hybrid/three-types/sys");
        let pmus = Pmus::discover(&sys).unwrap();
        let group = |pmu: &str| crate::plan::Group {
            pmu: pmu.into(),
            events: vec![EventSpec {
                counter_mask: 0xff,
                ..EventSpec::raw("CYCLES", pmu, 0x3c)
            }],
            slots: vec![crate::plan::Slot::Gp(0)],
        };
        let plan = Plan {
            groups: vec![
                group("cpu_core"),
                group("cpu_atom"),
                group("cpu_lowpower"),
                Plan::software(&[EventSpec::software(SoftwareEvent::TaskClock)]).groups[0].clone(),
            ],
            unschedulable: vec![],
            aliases: vec![],
        };
        let host = Host::new("/nonexistent/sys", "/nonexistent/proc");
        let open = |points: &[AttachPoint]| {
            let mut calls: Vec<(u32, i32)> = Vec::new();
            let (groups, failed) = open_groups(
                &plan,
                &pmus,
                points,
                AttachMode::SINGLE,
                &host,
                &mut |attr, _, cpu, _, _| {
                    calls.push((attr.type_, cpu));
                    std::fs::File::open("/dev/null").map(OwnedFd::from)
                },
            )
            .unwrap();
            assert!(failed.is_empty());
            (
                calls,
                groups.iter().map(|g| (g.group, g.cpu)).collect::<Vec<_>>(),
            )
        };
        let cpus: Vec<AttachPoint> = (0..6).map(AttachPoint::cpu).collect();
        let (calls, groups) = open(&cpus);
        let sw = crate::attr::TYPE_SOFTWARE;
        let want: Vec<(u32, i32)> = vec![
            (4, 0),
            (sw, 0),
            (4, 1),
            (sw, 1),
            (10, 2),
            (sw, 2),
            (10, 3),
            (sw, 3),
            (12, 4),
            (sw, 4),
            (12, 5),
            (sw, 5),
        ];
        assert_eq!(calls, want);
        assert_eq!(groups.len(), 12);
        // A task is counted on every core type (each counts while it runs there).
        let (calls, _) = open(&[AttachPoint::task(4242)]);
        assert_eq!(calls, [(4, -1), (10, -1), (12, -1), (sw, -1)]);
    }

    #[test]
    fn a_tasks_core_type_counters_are_enabled_for_its_time_on_that_type() {
        let g = |pmu: &str| crate::plan::Group {
            pmu: pmu.into(),
            events: vec![EventSpec::raw("X", pmu, 1)],
            slots: vec![crate::plan::Slot::Gp(0)],
        };
        let plan = Plan {
            groups: vec![g("cpu_core"), g("cpu_core"), g("cpu_atom"), g("software")],
            unschedulable: vec![],
            aliases: vec![],
        };
        let r =
            |group: usize, tid: Option<u32>, cpu: Option<u32>, en: u64, run: u64| GroupReading {
                group,
                cpu,
                tid,
                cgroup: None,
                time_enabled_ns: en,
                time_running_ns: run,
                values: vec![run],
            };
        // Thread 7: 60% of the time on the P-cores (where its two groups multiplex, the
        // better one running 45%), 40% on the E-cores. CPU 3's reading is per-CPU.
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups: vec![
                r(0, Some(7), None, 1000, 450),
                r(1, Some(7), None, 1000, 150),
                r(2, Some(7), None, 1000, 400),
                r(3, Some(7), None, 1000, 1000),
                r(2, None, Some(3), 1000, 500),
            ],
        };
        let out = on_core_type_time(&plan, &raw, &["cpu_core", "cpu_atom"]);
        let enabled: Vec<u64> = out.groups.iter().map(|g| g.time_enabled_ns).collect();
        assert_eq!(enabled, [450, 450, 400, 1000, 1000]);
        let iv = Measurement::interval_readings(&plan, &out, true);
        let atom = iv
            .readings
            .iter()
            .find(|x| x.event == "X" && x.group == Some(2) && x.tid == Some(7))
            .unwrap();
        // The E-core counts are what the E-cores counted, fully counted.
        assert_eq!((atom.value, atom.counted_share), (Some(400.0), Some(1.0)));
        // Never on a type: enabled for no time, a count of 0, not "not counted".
        let never = RawInterval {
            groups: vec![r(2, Some(8), None, 1000, 0)],
            ..raw.clone()
        };
        let out = on_core_type_time(&plan, &never, &["cpu_core", "cpu_atom"]);
        assert_eq!(out.groups[0].time_enabled_ns, 0);
        let iv = Measurement::interval_readings(&plan, &out, false);
        let x = iv.readings.iter().find(|x| x.group == Some(2)).unwrap();
        assert_eq!((x.value, x.status), (Some(0.0), ReadingStatus::Counted));
    }

    #[test]
    fn cgroup_mode_opens_each_group_per_cgroup_and_cpu_with_the_cgroup_flag() {
        let plan = Plan::software(&[
            EventSpec::software(SoftwareEvent::TaskClock),
            EventSpec::software(SoftwareEvent::ContextSwitches),
        ]);
        // Two cgroup directory fds (7 and 9), CPUs 0 and 3.
        let points = cgroup_points(&[7, 9], &[0, 3]);
        let (calls, groups) = recorded_opens(&plan, &points);
        assert_eq!(calls.len(), 2 * 2 * 2);
        let where_: Vec<(i32, i32, bool)> = calls.iter().map(|c| (c.1, c.2, c.3)).collect();
        assert_eq!(
            where_,
            [
                (7, 0, false),
                (7, 0, true),
                (7, 3, false),
                (7, 3, true),
                (9, 0, false),
                (9, 0, true),
                (9, 3, false),
                (9, 3, true)
            ]
        );
        for (attr, _, _, leader_fd, flags) in &calls {
            assert_eq!(*flags, sys::FLAG_PID_CGROUP, "every call is in cgroup mode");
            assert_eq!(attr.type_, crate::attr::TYPE_SOFTWARE);
            // Per-CPU counters: nothing to inherit, no exec to wait for; the leader starts
            // disabled and is enabled by ioctl once everything is open.
            assert!(!attr.inherit && !attr.enable_on_exec);
            assert_eq!(attr.disabled, !leader_fd);
            assert_eq!(attr.read_format, crate::attr::READ_FORMAT);
        }
        let labels: Vec<(Option<u32>, Option<u32>)> =
            groups.iter().map(|g| (g.cgroup, g.cpu)).collect();
        assert_eq!(
            labels,
            [
                (Some(0), Some(0)),
                (Some(0), Some(3)),
                (Some(1), Some(0)),
                (Some(1), Some(3))
            ]
        );
    }

    #[test]
    fn per_cpu_and_per_task_points_carry_no_cgroup_flag() {
        let plan = Plan::software(&[EventSpec::software(SoftwareEvent::TaskClock)]);
        let (calls, _) = recorded_opens(&plan, &[AttachPoint::cpu(1), AttachPoint::task(42)]);
        let got: Vec<(i32, i32, u64)> = calls.iter().map(|c| (c.1, c.2, c.4)).collect();
        assert_eq!(got, [(-1, 1, 0), (42, -1, 0)]);
    }

    #[test]
    fn a_path_that_is_not_a_cgroup_is_refused_with_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_cgroup(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a cgroup directory"), "{e}");
        assert!(e.contains("/sys/fs/cgroup/"), "{e}");
        let e = open_cgroup(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory"), "{e}");
    }

    fn two_group_plan() -> Plan {
        let g = |names: &[&str]| Group {
            pmu: "cpu".into(),
            events: names.iter().map(|n| EventSpec::raw(*n, "cpu", 1)).collect(),
            slots: (0..names.len()).map(|i| Slot::Gp(i as u8)).collect(),
        };
        Plan {
            groups: vec![g(&["A", "B"]), g(&["C"])],
            unschedulable: vec![],
            aliases: vec![("C_ALIAS".into(), "C".into())],
        }
    }

    fn gr(group: usize, cpu: Option<u32>, en: u64, run: u64, values: &[u64]) -> GroupReading {
        GroupReading {
            group,
            cpu,
            tid: None,
            cgroup: None,
            time_enabled_ns: en,
            time_running_ns: run,
            values: values.to_vec(),
        }
    }

    #[test]
    fn multiplex_scaling_per_group() {
        let plan = two_group_plan();
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups: vec![
                gr(0, None, 1000, 500, &[10, 20]),
                gr(1, None, 1000, 250, &[7]),
            ],
        };
        let iv = Measurement::interval_readings(&plan, &raw, false);
        assert_eq!(iv.get("A").unwrap().value, Some(20.0));
        assert_eq!(iv.get("B").unwrap().value, Some(40.0));
        assert_eq!(iv.get("C").unwrap().value, Some(28.0));
        assert_eq!(iv.get("C").unwrap().counted_share, Some(0.25));
        assert_eq!(iv.get("C_ALIAS").unwrap().value, Some(28.0));
    }

    #[test]
    fn idle_stretch_is_zero_not_missing() {
        let plan = two_group_plan();
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups: vec![gr(0, None, 0, 0, &[0, 0]), gr(1, None, 10, 0, &[0])],
        };
        let iv = Measurement::interval_readings(&plan, &raw, false);
        assert_eq!(iv.get("A").unwrap().value, Some(0.0));
        assert_eq!(iv.get("A").unwrap().status, ReadingStatus::Counted);
        // Enabled but never on a counter: not counted, no value.
        assert_eq!(iv.get("C").unwrap().value, None);
    }

    #[test]
    fn per_cpu_scaled_then_summed() {
        let plan = two_group_plan();
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups: vec![
                gr(0, Some(0), 100, 100, &[10, 1]),
                gr(0, Some(1), 100, 50, &[10, 1]),
                gr(1, Some(0), 100, 0, &[0]),
                gr(1, Some(1), 100, 0, &[0]),
            ],
        };
        let iv = Measurement::interval_readings(&plan, &raw, true);
        // CPU0 10 + CPU1 10*2 = 30; share = 150/200.
        let a = iv.get("A").unwrap();
        assert_eq!(a.value, Some(30.0));
        assert_eq!(a.counted_share, Some(0.75));
        // Never scheduled anywhere: not counted, no value (never a silent zero).
        let c = iv.get("C").unwrap();
        assert_eq!(c.status, ReadingStatus::NotCounted);
        assert_eq!(c.value, None);
        let per_cpu: Vec<_> = iv
            .readings
            .iter()
            .filter(|r| r.cpu == Some(1) && r.event == "A")
            .collect();
        assert_eq!(per_cpu[0].value, Some(20.0));
    }

    #[test]
    fn totals_and_no_multiplex_combination_and_repeat() {
        let plan = two_group_plan();
        let m = |a: u64, c: u64| Measurement {
            start_unix_s: 0.0,
            wall_ns: 1_000_000_000,
            intervals: vec![
                RawInterval {
                    start_s: 0.0,
                    end_s: 0.5,
                    groups: vec![gr(0, None, 50, 50, &[a, 1]), gr(1, None, 50, 50, &[c])],
                },
                RawInterval {
                    start_s: 0.5,
                    end_s: 1.0,
                    groups: vec![gr(0, None, 50, 25, &[a, 1]), gr(1, None, 50, 25, &[c])],
                },
            ],
            ending: Ending::Exited(0),
            failed_groups: vec![],
        };
        let t = m(10, 3).total();
        assert_eq!(t.groups[0].values, vec![20, 2]);
        assert_eq!(
            (t.groups[0].time_enabled_ns, t.groups[0].time_running_ns),
            (100, 75)
        );
        // --no-multiplex: run 1 measured group 0, run 2 group 1.
        let r1 = only_groups(&m(10, 0), &[0]);
        let r2 = only_groups(&m(0, 3), &[1]);
        let c = combine_runs(&[r1, r2]);
        let iv = Measurement::interval_readings(&plan, &c.intervals[0], false);
        assert_eq!(iv.get("C").unwrap().raw, Some(6));
        assert_eq!(iv.get("A").unwrap().raw, Some(20));
        let stats = repeat_stats(&plan, &[m(10, 3), m(20, 3)]);
        let a = stats.iter().find(|s| s.0 == "A").unwrap();
        // totals 20 and 40 raw over share 0.75 -> 26.67 and 53.33; mean 40, sd 18.86 -> 47.1%.
        assert!((a.1 - 40.0).abs() < 1e-9);
        assert!((a.2 - 47.14).abs() < 0.01, "{}", a.2);
        let cst = stats.iter().find(|s| s.0 == "C").unwrap();
        assert_eq!(cst.2, 0.0);
    }

    #[test]
    fn open_errors_are_explained() {
        let host = Host::new(
            "/nonexistent",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/live/proc-paranoid-3"),
        );
        let hw = EventSpec::raw("INST_RETIRED.ANY", "cpu", 0xC0);
        let eacces = || std::io::Error::from_raw_os_error(libc::EACCES);
        let e = map_open_error(&hw, eacces(), &host, 1, Op::PerfOpenProcess);
        let msg = e.to_string();
        assert!(matches!(e, RunError::Permission { .. }));
        assert!(msg.contains("perf_event_paranoid is 3"), "{msg}");
        assert!(
            msg.ends_with(advice::permission(Op::PerfOpenProcess)),
            "{msg}"
        );
        assert!(
            msg.contains("sudo sysctl kernel.perf_event_paranoid=1"),
            "{msg}"
        );
        let e = map_open_error(&hw, eacces(), &host, -1, Op::PerfOpenCpu);
        assert!(
            e.to_string()
                .contains("sudo sysctl kernel.perf_event_paranoid=0"),
            "{e}"
        );
        let e = map_open_error(
            &hw,
            std::io::Error::from_raw_os_error(libc::EPERM),
            &Host::under(Path::new("/nonexistent")),
            1,
            Op::PerfOpenProcess,
        );
        assert!(e.to_string().contains("perf_event_paranoid is unknown"));
        for errno in [libc::ENOENT, libc::EOPNOTSUPP, libc::ENODEV] {
            let e = map_open_error(
                &hw,
                std::io::Error::from_raw_os_error(errno),
                &host,
                1,
                Op::PerfOpenProcess,
            );
            assert!(matches!(e, RunError::NoHardware { .. }), "{errno}");
        }
        // A software event that fails with ENOENT is not "no PMU".
        let sw = EventSpec::software(SoftwareEvent::TaskClock);
        let e = map_open_error(
            &sw,
            std::io::Error::from_raw_os_error(libc::ENOENT),
            &host,
            1,
            Op::PerfOpenProcess,
        );
        assert!(matches!(e, RunError::Open { .. }));
        let e = map_open_error(
            &sw,
            std::io::Error::from_raw_os_error(libc::ESRCH),
            &host,
            42,
            Op::PerfOpenProcess,
        );
        assert!(matches!(e, RunError::NoSuchProcess(42)));
    }

    #[test]
    fn refusals_are_advised_by_what_was_opened() {
        let mut attr = crate::selfcount::hardware(0, false);
        assert_eq!(open_op(&AttachPoint::cpu(3), &attr), Op::PerfOpenCpu);
        assert_eq!(
            open_op(&cgroup_points(&[7], &[0])[0], &attr),
            Op::PerfOpenCpu
        );
        assert_eq!(open_op(&AttachPoint::task(42), &attr), Op::PerfOpenProcess);
        attr.exclude_kernel = true;
        assert_eq!(open_op(&AttachPoint::task(42), &attr), Op::PerfOpenUser);
    }

    #[test]
    fn resolve_commands() {
        assert!(resolve_command("sh").is_some());
        assert!(resolve_command("/bin/sh").is_some());
        assert!(resolve_command("definitely-not-a-command-xyz").is_none());
        assert!(resolve_command("").is_none());
    }

    #[test]
    fn replay_checks_the_plan() {
        let plan = two_group_plan();
        let m = Measurement {
            start_unix_s: 0.0,
            wall_ns: 1,
            intervals: vec![],
            ending: Ending::Exited(0),
            failed_groups: vec![],
        };
        let mut r = Replay {
            runs: vec![(plan.clone(), m.clone())].into(),
        };
        assert_eq!(
            r.run(&plan, &Target::Pids(vec![1]), &RunOptions::new())
                .unwrap(),
            m
        );
        assert!(r
            .run(&plan, &Target::Pids(vec![1]), &RunOptions::new())
            .is_err());
        let mut other = plan.clone();
        other.groups.pop();
        let mut r = Replay {
            runs: vec![(plan, m)].into(),
        };
        assert!(r
            .run(&other, &Target::Pids(vec![1]), &RunOptions::new())
            .is_err());
    }
}

/// A backend that answers any plan from chosen true counts and chosen multiplexing shares
/// (tests and demonstrations of scaling on machines without a PMU). Group `g` of the plan is
/// "on a counter" for `running_share[g]` of the enabled time (the last entry repeats; none
/// means 1.0), so each member reads `round(count * share)` raw, and scaling must recover
/// `count`. Events without a chosen count read 0. In interval mode the run is cut into equal
/// intervals of `-I` length, each with an equal part of the counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Synthetic {
    /// True counts over the whole run, by event name (case-insensitive).
    pub events: std::collections::BTreeMap<String, u64>,
    /// Share of the enabled time each plan group (by index) was on a counter, 0..=1; applied
    /// only when the plan has more than one hardware group (otherwise nothing multiplexes).
    #[serde(default)]
    pub running_share: Vec<f64>,
    /// Wall time (and enabled time) of each run.
    pub wall_ns: u64,
    /// How each run ends.
    #[serde(default = "default_ending")]
    pub ending: Ending,
    /// Threads of a `-t`/`-p` target, each with its part of every core type's counts: one
    /// reading per thread instead of one for the whole target (per-thread trees, threads
    /// that move between core types).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<SyntheticThread>,
}

/// One thread of a [`Synthetic`] run: for each PMU (`cpu_core`, `cpu_atom`, `software`...),
/// the share of that PMU's counts this thread takes in each interval (the last entry
/// repeats). A thread that runs on the P-cores, then moves to the E-cores has
/// `cpu_core: [1, 0]`, `cpu_atom: [0, 1]`. A PMU it does not name is split evenly over the
/// threads. Its per-task counters of a core type count only while it is on that type:
/// enabled all the time, running for its share of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticThread {
    pub tid: u32,
    pub share: std::collections::BTreeMap<String, Vec<f64>>,
}

impl SyntheticThread {
    fn share_of(&self, pmu: &str, interval: usize, threads: usize) -> Option<f64> {
        let v = self.share.get(pmu)?;
        v.get(interval)
            .or(v.last())
            .map(|x| x.clamp(0.0, 1.0))
            .or(Some(1.0 / threads.max(1) as f64))
    }
}

fn default_ending() -> Ending {
    Ending::Exited(0)
}

impl Default for Synthetic {
    fn default() -> Self {
        Synthetic {
            events: Default::default(),
            running_share: Vec::new(),
            wall_ns: 0,
            ending: default_ending(),
            threads: Vec::new(),
        }
    }
}

impl Synthetic {
    /// The chosen count of `name` on `pmu`: `pmu/name` first (each core type of a hybrid
    /// part has its own counts of events of the same name), then `name`.
    fn chosen(&self, pmu: &str, name: &str) -> Option<u64> {
        let find = |want: &str| {
            self.events
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(want))
                .map(|(_, v)| *v)
        };
        find(&format!("{pmu}/{name}")).or_else(|| find(name))
    }
    fn share(&self, group: usize) -> f64 {
        self.running_share
            .get(group)
            .or(self.running_share.last())
            .copied()
            .unwrap_or(1.0)
            .clamp(0.0, 1.0)
    }
}

impl Backend for Synthetic {
    fn run_with(
        &mut self,
        plan: &Plan,
        target: &Target,
        opts: &RunOptions,
        on_interval: &mut dyn FnMut(&RawInterval),
    ) -> Result<Measurement, RunError> {
        // System-wide on a CPU list: the counts are split evenly over the CPUs (per-CPU
        // readings, as the live backend gives); otherwise one aggregated reading per group.
        // On a hybrid part (core-type PMUs in the sysfs of `opts.host`), a core type's groups
        // read on its own CPUs only, and `-a` means every online CPU.
        let pmus = Pmus::discover(&opts.host.sys).unwrap_or_default();
        let hybrid = !pmus.core_types().is_empty();
        let cpus: Vec<Option<u32>> = match target {
            Target::System(Some(c))
            | Target::SystemDuring {
                cpus: Some(c),
                command: _,
            } if !c.is_empty() => c.iter().map(|x| Some(*x)).collect(),
            Target::System(None) | Target::SystemDuring { cpus: None, .. } if hybrid => opts
                .host
                .online_cpus_or_cpu0()
                .into_iter()
                .map(Some)
                .collect(),
            _ => vec![None],
        };
        let threads: &[SyntheticThread] = match target {
            Target::Tids(_) | Target::Pids(_) => &self.threads,
            _ => &[],
        };
        let n_iv = match opts.interval {
            Some(i) if i.as_nanos() > 0 => (self.wall_ns as u128 / i.as_nanos()).max(1) as u64,
            _ => 1,
        };
        let wall_s = self.wall_ns as f64 / 1e9;
        // Like the kernel, only multiplex when several hardware groups compete.
        let hw_groups = plan
            .groups
            .iter()
            .filter(|g| {
                g.slots
                    .iter()
                    .any(|s| !matches!(s, crate::plan::Slot::NoCounter))
            })
            .count();
        let mut intervals = Collected::new(opts);
        for k in 0..n_iv {
            // Split a whole-run quantity evenly; the last interval takes the rest.
            let part = |x: u64| {
                let base = x / n_iv;
                if k + 1 == n_iv {
                    x - base * (n_iv - 1)
                } else {
                    base
                }
            };
            let mut groups = Vec::new();
            for (gi, g) in plan.groups.iter().enumerate() {
                if g.events.is_empty() {
                    continue;
                }
                let share = if hw_groups > 1 { self.share(gi) } else { 1.0 };
                let enabled = self.wall_ns;
                let running = (enabled as f64 * share).round() as u64;
                let count = |e: &EventSpec| {
                    self.chosen(&g.pmu, &e.name)
                        .map_or(0, |c| (c as f64 * share).round() as u64)
                };
                if !threads.is_empty() {
                    // Each thread: its part of the time on this PMU, and of its counts.
                    let core_type = pmus.get(&g.pmu).is_some_and(|p| p.is_core_type());
                    for t in threads {
                        let f = t
                            .share_of(&g.pmu, k as usize, threads.len())
                            .unwrap_or(if core_type { 0.0 } else { 1.0 });
                        let of = |x: u64| (part(x) as f64 * f).round() as u64;
                        groups.push(GroupReading {
                            group: gi,
                            cpu: None,
                            tid: Some(t.tid),
                            cgroup: None,
                            time_enabled_ns: part(enabled),
                            time_running_ns: if core_type {
                                of(running)
                            } else {
                                part(running)
                            },
                            values: g.events.iter().map(|e| of(count(e))).collect(),
                        });
                    }
                    continue;
                }
                let on: Vec<Option<u32>> = cpus
                    .iter()
                    .copied()
                    .filter(|c| c.is_none_or(|c| pmu_covers(&pmus, &g.pmu, c as i32)))
                    .collect();
                let n_cpu = on.len() as u64;
                for (ci, cpu) in on.iter().enumerate() {
                    // Split over CPUs; the first CPU takes the rest.
                    let per_cpu = |x: u64| {
                        let base = x / n_cpu;
                        if ci == 0 {
                            x - base * (n_cpu - 1)
                        } else {
                            base
                        }
                    };
                    groups.push(GroupReading {
                        group: gi,
                        cpu: *cpu,
                        tid: None,
                        cgroup: None,
                        time_enabled_ns: part(enabled),
                        time_running_ns: part(running),
                        values: g.events.iter().map(|e| part(per_cpu(count(e)))).collect(),
                    });
                }
            }
            let iv = RawInterval {
                start_s: wall_s * k as f64 / n_iv as f64,
                end_s: wall_s * (k + 1) as f64 / n_iv as f64,
                groups,
            };
            if opts.interval.is_some() {
                on_interval(&iv);
            }
            intervals.push(iv);
        }
        Ok(Measurement {
            start_unix_s: 0.0,
            wall_ns: self.wall_ns,
            intervals: intervals.intervals,
            ending: self.ending,
            failed_groups: Vec::new(),
        })
    }
}

#[cfg(test)]
mod synthetic_tests {
    use super::*;
    use crate::plan::{Group, Slot};

    #[test]
    fn synthetic_counts_scale_like_live_ones() {
        let plan = Plan {
            groups: vec![
                Group {
                    pmu: "cpu".into(),
                    events: vec![EventSpec::raw("A", "cpu", 1), EventSpec::raw("B", "cpu", 2)],
                    slots: vec![Slot::Gp(0), Slot::Gp(1)],
                },
                Group {
                    pmu: "cpu".into(),
                    events: vec![EventSpec::raw("C", "cpu", 3)],
                    slots: vec![Slot::Gp(0)],
                },
            ],
            unschedulable: vec![],
            aliases: vec![],
        };
        let mut s = Synthetic {
            wall_ns: 1_000_000_000,
            running_share: vec![0.25],
            ..Default::default()
        };
        s.events.insert("a".into(), 400);
        let m = s
            .run(&plan, &Target::Pids(vec![]), &RunOptions::new())
            .unwrap();
        let iv = Measurement::interval_readings(&plan, &m.total(), false);
        assert_eq!(iv.get("A").unwrap().value, Some(400.0));
        assert_eq!(iv.get("A").unwrap().raw, Some(100));
        assert_eq!(iv.get("A").unwrap().counted_share, Some(0.25));
        assert_eq!(iv.get("B").unwrap().value, Some(0.0));
        let mut o = RunOptions::new();
        o.interval = Some(Duration::from_millis(300));
        let m = s.run(&plan, &Target::Pids(vec![]), &o).unwrap();
        assert_eq!(m.intervals.len(), 3);
        assert_eq!(m.total().groups[0].values[0], 100);
        // A single hardware group is never multiplexed.
        let one = crate::backend::sub_plan(&plan, &[0]);
        let m = s
            .run(&one, &Target::Pids(vec![]), &RunOptions::new())
            .unwrap();
        let iv = Measurement::interval_readings(&one, &m.total(), false);
        assert_eq!(iv.get("A").unwrap().raw, Some(400));
        assert_eq!(iv.get("A").unwrap().counted_share, Some(1.0));
    }
}
