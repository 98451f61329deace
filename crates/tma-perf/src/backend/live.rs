//! The [`Live`] backend: perf_event_open on tasks, CPUs or cgroups (with a software-event
//! plan it is the "Software" backend that works on a machine without a PMU).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::attr::{attr_for, check_group, AttachMode};
use crate::event::EventSpec;
use crate::plan::Plan;
use crate::process::HeldChild;
use crate::sys;
use tma_host::sysfs::Pmus;
use tma_host::Host;
use tma_sys::advice::{self, Op};
use tma_sys::process::Exit;

use super::run::{
    pmu_covers, Backend, Collected, Ending, GroupReading, Measurement, RawInterval, RunError,
    RunOptions, Target,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SoftwareEvent;
    use crate::readings::ReadingStatus;

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
}
