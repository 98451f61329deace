//! What a live session counts: the target (command, pids, threads, CPUs, cgroups), the
//! flags that go with it, and the `-e` events.

use super::*;

pub(super) fn target_of(cfg: &StatConfig, a: &LiveOptions) -> Result<Target, StatError> {
    let mut kinds = 0;
    kinds += usize::from(!a.command.is_empty());
    kinds += usize::from(!a.pids.is_empty());
    kinds += usize::from(!a.tids.is_empty());
    // -G counts the cgroups on every CPU: -a may be given with it, as for perf stat.
    kinds += usize::from((a.all_cpus && a.cgroups.is_empty()) || a.cpu_list.is_some());
    kinds += usize::from(!a.cgroups.is_empty());
    if kinds == 0 {
        return Err(usage("nothing to measure: give a command after `--`, -p PID, -t TID, -a or -G CGROUP (or --import FILE)"));
    }
    if kinds > 1 {
        return Err(usage(
            "give only one of: a command after `--`, -p, -t, -a/-C, -G",
        ));
    }
    if !a.cgroups.is_empty() {
        let mut dirs = Vec::new();
        for name in &a.cgroups {
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
        return Ok(Target::Cgroups(dirs));
    }
    if !a.command.is_empty() {
        // Checked before anything is printed; the backend looks it up again to exec it.
        if backend::resolve_command(&a.command[0]).is_none() {
            return Err(RunError::CommandNotFound(a.command[0].clone()).into());
        }
        return Ok(Target::Command(a.command.clone()));
    }
    let ids = |v: &[u32], what: &str| -> Result<Vec<i32>, StatError> {
        v.iter()
            .map(|&x| {
                i32::try_from(x)
                    .ok()
                    .filter(|x| *x > 0)
                    .ok_or_else(|| usage(format!("bad {what} {x}")))
            })
            .collect()
    };
    if !a.pids.is_empty() {
        let pids = ids(&a.pids, "pid")?;
        if let Some(p) = pids.iter().find(|p| !tma_sys::process::pid_alive(**p)) {
            return Err(RunError::NoSuchProcess(*p).into());
        }
        return Ok(Target::Pids(pids));
    }
    if !a.tids.is_empty() {
        let tids = ids(&a.tids, "tid")?;
        if let Some(t) = tids
            .iter()
            .find(|t| !cfg.host.proc.join(t.to_string()).exists())
        {
            return Err(RunError::NoSuchProcess(*t).into());
        }
        return Ok(Target::Tids(tids));
    }
    let cpus = match &a.cpu_list {
        None => None,
        Some(s) => Some(host::parse_cpu_list(s.as_bytes()).map_err(|_| {
            usage(format!(
                "bad CPU list {s:?}: expected numbers and ranges like 0-3,8"
            ))
        })?),
    };
    if let Some(list) = &cpus {
        let online = cfg.host.online_cpus_or_cpu0();
        if let Some(bad) = list.iter().find(|c| !online.contains(c)) {
            return Err(RunError::BadCpu(*bad).into());
        }
    }
    Ok(Target::System(cpus))
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
    let is_cmd = matches!(target, Target::Command(_));
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
    if a.per_core && !matches!(target, Target::System(_)) {
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

/// `-e` events: software names, catalog event ids, `pmu/terms/` or `rNNNN`.
pub(super) fn parse_extra_events(
    cfg: &StatConfig,
    events: &[String],
    pmus: &Pmus,
) -> Result<Vec<EventSpec>, StatError> {
    let model = crate::model::select_model(cfg.cpu.as_deref(), None, &cfg.host)
        .ok()
        .map(|(m, _)| m);
    let mut out = Vec::new();
    for e in events
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        if let Some(sw) = SoftwareEvent::parse(e) {
            out.push(EventSpec::software(sw));
            continue;
        }
        if let Some(s) = model
            .and_then(|m| m.encode(e).ok())
            .and_then(|enc| EventSpec::from_encoding(&enc))
        {
            out.push(s);
            continue;
        }
        if let Some((pmu, terms)) = e.strip_suffix('/').and_then(|s| s.split_once('/')) {
            let p = pmus.get(pmu).ok_or_else(|| {
                StatError::UnknownEvent(format!(
                    "unknown event {e:?}: this machine has no PMU named {pmu:?}"
                ))
            })?;
            let cfg = p
                .encode_terms(terms)
                .or_else(|_| p.encode_alias(terms))
                .map_err(|why| StatError::UnknownEvent(format!("unknown event {e:?}: {why}")))?;
            let mut s = EventSpec::raw(e, pmu, cfg.config);
            s.config1 = cfg.config1;
            out.push(s);
            continue;
        }
        if let Some(hex) = e
            .strip_prefix('r')
            .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
        {
            let cfg = u64::from_str_radix(hex, 16)
                .map_err(|_| StatError::UnknownEvent(format!("bad raw event {e:?}")))?;
            out.push(EventSpec::raw(e, "cpu", cfg));
            continue;
        }
        const GENERIC: [&str; 6] = [
            "cycles",
            "instructions",
            "cache-references",
            "cache-misses",
            "branches",
            "branch-misses",
        ];
        if let Some(id) = GENERIC.iter().position(|h| h.eq_ignore_ascii_case(e)) {
            // PERF_COUNT_HW_* ids are the positions in this list.
            out.push(EventSpec {
                kind: SpecKind::Hardware(id as u64),
                ..EventSpec::raw(e, "", id as u64)
            });
            continue;
        }
        return Err(StatError::UnknownEvent(format!(
            "unknown event {e:?}: give a software event (task-clock, context-switches, ...), an \
             event of the --cpu model (`tma list --events --cpu NAME`), PMU/terms/ or rHEX"
        )));
    }
    Ok(out)
}
