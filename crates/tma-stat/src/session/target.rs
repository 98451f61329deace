//! What a live session counts: the target (command, pids, threads, CPUs, cgroups), the
//! flags that go with it, and the `-e` events.

use tma_host as host;
use tma_host::sysfs::Pmus;
use tma_perf::backend::{self, RunError, Target};
use tma_perf::event::EventSpec;

use crate::error::usage;
use crate::{LiveOptions, LiveTarget, StatConfig, StatError};

pub(super) fn target_of(cfg: &StatConfig, a: &LiveOptions) -> Result<Target, StatError> {
    match &a.target {
        LiveTarget::Command(argv) if argv.is_empty() => Err(usage(
            "nothing to measure: give a command (after `--`), -p PID, -t TID, -a, -C CPUS or -G CGROUP (or --import FILE)",
        )),
        LiveTarget::Command(argv) => Ok(Target::Command(checked_command(argv)?)),
        LiveTarget::Pids(v) => {
            let pids = ids(v, "pid")?;
            if let Some(p) = pids.iter().find(|p| !tma_sys::process::pid_alive(**p)) {
                return Err(RunError::NoSuchProcess(*p).into());
            }
            Ok(Target::Pids(pids))
        }
        LiveTarget::Tids(v) => {
            let tids = ids(v, "tid")?;
            if let Some(t) = tids
                .iter()
                .find(|t| !cfg.host.proc.join(t.to_string()).exists())
            {
                return Err(RunError::NoSuchProcess(*t).into());
            }
            Ok(Target::Tids(tids))
        }
        LiveTarget::System { cpus, command } => {
            let cpus = match cpus {
                None => None,
                Some(s) => Some(cpu_list(cfg, s)?),
            };
            Ok(match command {
                Some(argv) if !argv.is_empty() => Target::SystemDuring {
                    cpus,
                    command: checked_command(argv)?,
                },
                _ => Target::System(cpus),
            })
        }
        LiveTarget::Cgroups(names) => {
            let mut dirs = Vec::new();
            for name in names {
                let dir = cfg.host.cgroup_dir(name).map_err(usage)?;
                if !dir.join("cgroup.procs").exists() {
                    return Err(RunError::BadCgroup {
                        path: dir,
                        why: "no such cgroup (no cgroup.procs there)".into(),
                    }
                    .into());
                }
                dirs.push(dir);
            }
            if dirs.is_empty() {
                return Err(usage("-G needs a cgroup"));
            }
            Ok(Target::Cgroups(dirs))
        }
    }
}

/// The command, checked before anything is printed (the backend looks it up again to exec it).
fn checked_command(argv: &[std::ffi::OsString]) -> Result<Vec<std::ffi::OsString>, StatError> {
    if backend::resolve_command(&argv[0]).is_none() {
        return Err(RunError::CommandNotFound(argv[0].to_string_lossy().into_owned()).into());
    }
    Ok(argv.to_vec())
}

fn ids(v: &[u32], what: &str) -> Result<Vec<i32>, StatError> {
    v.iter()
        .map(|&x| {
            i32::try_from(x)
                .ok()
                .filter(|x| *x > 0)
                .ok_or_else(|| usage(format!("bad {what} {x}")))
        })
        .collect()
}

/// `-C 0-3,8`: parsed, and every CPU online.
fn cpu_list(cfg: &StatConfig, s: &str) -> Result<Vec<u32>, StatError> {
    let list = host::parse_cpu_list(s.as_bytes()).map_err(|_| {
        usage(format!(
            "bad CPU list {s:?}: expected numbers and ranges like 0-3,8"
        ))
    })?;
    let online = cfg.host.online_cpus_or_cpu0();
    if let Some(bad) = list.iter().find(|c| !online.contains(c)) {
        return Err(RunError::BadCpu(*bad).into());
    }
    Ok(list)
}

pub(super) fn check_flags(
    cfg: &StatConfig,
    a: &LiveOptions,
    target: &Target,
) -> Result<(), StatError> {
    if a.interval_ms == Some(0) {
        return Err(usage(
            "-I 0: the interval must be at least 1 ms (e.g. -I 1000)",
        ));
    }
    if let Some(d) = a.duration_s {
        if !(d.is_finite() && d > 0.0) {
            return Err(usage(format!(
                "--duration {d}: give a positive number of seconds"
            )));
        }
    }
    if a.repeat == Some(0) {
        return Err(usage("--repeat 0: give at least 1 run"));
    }
    let is_cmd = matches!(target, Target::Command(_) | Target::SystemDuring { .. });
    let repeat = a.repeat.unwrap_or(1);
    if (repeat > 1 || a.no_multiplex || a.drilldown) && !is_cmd && a.duration_s.is_none() {
        return Err(usage("--repeat, --no-multiplex and --drilldown rerun the target: use them with a command, or give --duration S"));
    }
    if a.no_multiplex && a.interval_ms.is_some() {
        return Err(usage(
            "--no-multiplex runs once per group and cannot print -I intervals; drop one of them",
        ));
    }
    if a.drilldown && a.interval_ms.is_some() {
        return Err(usage("--drilldown needs whole-run totals; drop -I"));
    }
    if cfg.render.compact && a.interval_ms.is_none() {
        return Err(usage(
            "--compact prints one line per interval: use it with -I MS",
        ));
    }
    if a.per_core && !matches!(target, Target::System(_) | Target::SystemDuring { .. }) {
        return Err(usage("--per-core needs system-wide counting (-a or -C)"));
    }
    if a.per_thread && !matches!(target, Target::Pids(_) | Target::Tids(_)) {
        return Err(usage("--per-thread needs -p PID or -t TID"));
    }
    if (a.per_core || a.per_thread) && (a.drilldown || a.no_multiplex || repeat > 1) {
        return Err(usage("--per-core / --per-thread cannot be combined with --drilldown, --no-multiplex or --repeat"));
    }
    Ok(())
}

/// `-e` events, comma-separated lists too, through the one parser of every command
/// ([`crate::event::parse_event`]).
pub(super) fn parse_extra_events(
    cfg: &StatConfig,
    events: &[String],
    pmus: &Pmus,
) -> Result<Vec<EventSpec>, StatError> {
    let model = crate::model::select_model(cfg.cpu.as_deref(), None, &cfg.host)
        .ok()
        .map(|(m, _)| m);
    events
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|e| crate::event::parse_event(e, model, pmus, &cfg.host))
        .collect()
}
