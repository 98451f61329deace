//! Real perf_event_open counting with software events (they work on this machine, PMU or not),
//! plus hardware-PMU tests (`pmu_*`) that skip, saying why, where there is no PMU and run by
//! themselves where there is one.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tma_perf::backend::Measurement;
use tma_perf::backend::{
    software_events, Backend, Ending, Live, RawInterval, RunError, RunOptions, Target,
};
use tma_perf::event::{EventSpec, SoftwareEvent, SpecKind};
use tma_perf::plan::{self, Limits, Plan};
use tma_perf::process::CommandStdout;
use tma_perf::readings::ReadingStatus;
use tma_perf::Interval;

fn sw_plan() -> Plan {
    Plan::software(&software_events())
}

fn total(plan: &Plan, m: &Measurement) -> Interval {
    Measurement::interval_readings(plan, &m.total(), false)
}

fn sh(script: &str) -> Target {
    Target::Command(vec!["sh".into(), "-c".into(), script.into()])
}

#[test]
fn group_on_child_process_counts_and_forwards_exit() {
    let plan = sw_plan();
    let m = Live
        .run(
            &plan,
            &sh("i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; exit 3"),
            &RunOptions::new(),
        )
        .unwrap();
    assert_eq!(m.ending, Ending::Exited(3));
    let t = total(&plan, &m);
    let tc = t.get("task-clock").unwrap();
    assert_eq!(tc.status, ReadingStatus::Counted);
    // A 30k-iteration shell loop takes well over a millisecond of CPU.
    assert!(tc.value.unwrap() > 1e6, "task-clock {:?}", tc.value);
    let (en, run) = (tc.time_enabled_ns.unwrap(), tc.time_running_ns.unwrap());
    assert!(en > 0 && run > 0 && run <= en);
    // Software events are never multiplexed.
    assert_eq!(tc.counted_share, Some(1.0));
    assert!(t.get("page-faults").unwrap().value.unwrap() > 0.0);
    // task-clock cannot exceed wall time by more than the CPUs available.
    assert!(tc.value.unwrap() <= m.wall_ns as f64 * 2.0 + 1e7);
}

/// Set in the re-executed test binary: launch one command with this stdout choice.
const STDOUT_MODE: &str = "TMA_PERF_TEST_COMMAND_STDOUT";
const MARKER: &str = "tma-command-stdout-marker";

/// `RunOptions::command_stdout` reaches the launched command: with `Null` its stdout goes
/// nowhere while its stderr (and ours) stays. The test re-runs itself in a child test process
/// whose stdout is a pipe we read, so the command writes where we can see it.
#[test]
fn null_command_stdout_silences_the_command() {
    let name = "null_command_stdout_silences_the_command";
    if let Ok(mode) = std::env::var(STDOUT_MODE) {
        let opts = RunOptions {
            command_stdout: match mode.as_str() {
                "null" => CommandStdout::Null,
                _ => CommandStdout::Inherit,
            },
            ..RunOptions::new()
        };
        let script = format!("echo {MARKER}; echo err-{MARKER} >&2");
        let m = Live.run(&sw_plan(), &sh(&script), &opts).unwrap();
        assert_eq!(m.ending, Ending::Exited(0));
        return;
    }
    let run = |mode: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads=1", "--nocapture"])
            .env(STDOUT_MODE, mode)
            .output()
            .unwrap();
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success() && o.contains("1 passed"), "{o}{e}");
        let err_line = format!("err-{MARKER}");
        assert!(e.lines().any(|l| l == err_line), "stderr: {e}");
        // (libtest's "test NAME ... " may precede it on the line.)
        o.lines().any(|l| l.ends_with(MARKER))
    };
    assert!(run("inherit"), "the command's stdout is ours by default");
    assert!(
        !run("null"),
        "CommandStdout::Null let the command write to our stdout"
    );
}

#[test]
fn signal_death_is_reported() {
    let plan = sw_plan();
    let m = Live
        .run(&plan, &sh("kill -9 $$"), &RunOptions::new())
        .unwrap();
    assert_eq!(m.ending, Ending::Signaled(9));
}

#[test]
fn counters_follow_forked_children() {
    // inherit: work done in a grandchild is counted.
    let plan = Plan::software(&[EventSpec::software(SoftwareEvent::TaskClock)]);
    let busy = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done";
    let m = Live
        .run(&plan, &sh(&format!("sh -c '{busy}'")), &RunOptions::new())
        .unwrap();
    let tc = total(&plan, &m).get("task-clock").unwrap().value.unwrap();
    assert!(tc > 1e6, "{tc}");
}

#[test]
fn group_on_this_test_process() {
    // Attach to our own process while a thread burns CPU.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || {
        let mut x = 0u64;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        x
    });
    let plan = sw_plan();
    let mut opts = RunOptions::new();
    opts.duration = Some(Duration::from_millis(300));
    let m = Live
        .run(&plan, &Target::Pids(vec![std::process::id() as i32]), &opts)
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    assert_eq!(m.ending, Ending::Duration);
    let tc = total(&plan, &m).get("task-clock").unwrap().value.unwrap();
    // The busy thread ran for most of the 300 ms (loose: the machine is shared).
    assert!(tc > 30e6, "task-clock {tc}");
    // Per-thread breakdown carries thread ids.
    let iv = Measurement::interval_readings(&plan, &m.total(), true);
    assert!(iv.readings.iter().any(|r| r.tid.is_some()));
}

#[test]
fn interval_deltas_add_up_to_the_total() {
    let plan = sw_plan();
    let mut seen = Vec::new();
    let mut opts = RunOptions::new();
    opts.interval = Some(Duration::from_millis(100));
    let m = Live
        .run_with(
            &plan,
            // 0.9 s for at least 3 intervals of 100 ms: 0.45 s gave fewer once, while the
            // whole workspace's tests loaded both CPUs and the ticks came late.
            &sh("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.9"),
            &opts,
            &mut |iv| seen.push(iv.clone()),
        )
        .unwrap();
    assert!(m.intervals.len() >= 3, "{} intervals", m.intervals.len());
    assert_eq!(seen, m.intervals);
    for w in m.intervals.windows(2) {
        assert!((w[0].end_s - w[1].start_s).abs() < 1e-12);
    }
    let sum: f64 = m
        .intervals
        .iter()
        .map(|iv| {
            Measurement::interval_readings(&plan, iv, false)
                .get("task-clock")
                .unwrap()
                .value
                .unwrap_or(0.0)
        })
        .sum();
    let t = total(&plan, &m).get("task-clock").unwrap().value.unwrap();
    assert!((sum - t).abs() < 1.0, "{sum} vs {t}");
}

#[test]
fn stream_only_keeps_the_sum_not_every_interval() {
    let plan = sw_plan();
    let mut seen: Vec<RawInterval> = Vec::new();
    let mut opts = RunOptions::new();
    opts.interval = Some(Duration::from_millis(50));
    opts.stream_only = true;
    let m = Live
        .run_with(
            &plan,
            // Room for late ticks on a loaded machine (4 intervals of 50 ms are wanted).
            &sh("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.5"),
            &opts,
            &mut |iv| seen.push(iv.clone()),
        )
        .unwrap();
    assert!(seen.len() >= 4, "{} intervals", seen.len());
    assert_eq!(m.intervals.len(), 1, "the run keeps one summed interval");
    let mut sum = seen[0].clone();
    for iv in &seen[1..] {
        sum.add(iv);
    }
    assert_eq!(m.intervals[0], sum);
    assert_eq!(m.total(), sum);
    assert!((m.intervals[0].end_s - seen.last().unwrap().end_s).abs() < 1e-12);
}

#[test]
fn system_wide_per_cpu() {
    let plan = Plan::software(&[EventSpec::software(SoftwareEvent::CpuClock)]);
    let mut opts = RunOptions::new();
    opts.duration = Some(Duration::from_millis(100));
    let m = Live
        .run(&plan, &Target::System(Some(vec![0])), &opts)
        .unwrap();
    let iv = Measurement::interval_readings(&plan, &m.total(), true);
    let c = iv.get("cpu-clock").unwrap().value.unwrap();
    // cpu-clock on one CPU over ~100 ms of wall time.
    assert!(c > 50e6 && c < 1e9, "{c}");
    assert!(iv.readings.iter().any(|r| r.cpu == Some(0)));
}

#[test]
fn bad_targets_are_errors_without_leftovers() {
    let plan = sw_plan();
    let e = Live.run(
        &plan,
        &Target::Command(vec!["no-such-command-xyz".into()]),
        &RunOptions::new(),
    );
    assert!(matches!(e, Err(RunError::CommandNotFound(_))));
    let e = Live.run(&plan, &Target::Pids(vec![999_999_999]), &RunOptions::new());
    assert!(matches!(e, Err(RunError::NoSuchProcess(_))));
    let e = Live.run(&plan, &Target::System(Some(vec![4096])), &RunOptions::new());
    assert!(matches!(e, Err(RunError::BadCpu(4096))));
}

#[test]
fn attached_process_exiting_mid_run_ends_counting() {
    let mut child = std::process::Command::new("sleep")
        .arg("0.3")
        .spawn()
        .unwrap();
    let plan = sw_plan();
    let mut opts = RunOptions::new();
    opts.duration = Some(Duration::from_secs(20));
    // Reap in a thread so the pidfd sees the exit.
    let pid = child.id() as i32;
    let h = std::thread::spawn(move || child.wait());
    let m = Live.run(&plan, &Target::Pids(vec![pid]), &opts).unwrap();
    h.join().unwrap().unwrap();
    assert_eq!(m.ending, Ending::TargetsExited);
    assert!(m.wall_ns < 10_000_000_000);
}

fn has_core_pmu() -> bool {
    tma_host::sysfs::Pmus::discover(Path::new("/sys")).is_ok_and(|p| p.has_core_pmu())
}

#[test]
fn no_hardware_pmu_is_detected() {
    if has_core_pmu() {
        eprintln!("skipped: this machine has a hardware PMU");
        return;
    }
    let plan = Plan::software(&[EventSpec {
        kind: SpecKind::Hardware(0),
        ..EventSpec::raw("cycles", "", 0)
    }]);
    let e = Live.run(&plan, &sh("true"), &RunOptions::new());
    assert!(matches!(e, Err(RunError::NoHardware { .. })), "{e:?}");
}

#[test]
fn pmu_cycles_and_instructions_on_a_child() {
    if let Some(why) = no_pmu() {
        println!("skipped: needs a hardware PMU ({why})");
        return;
    }
    let ev = |name: &str, id: u64| EventSpec {
        kind: SpecKind::Hardware(id),
        counter_mask: 0xf,
        ..EventSpec::raw(name, "", id)
    };
    let plan = plan::plan(&[vec![ev("cycles", 0), ev("instructions", 1)]], &|_| {
        Limits {
            gp: 4,
            fixed: 0,
            nmi_watchdog: false,
        }
    })
    .unwrap();
    let m = Live
        .run(
            &plan,
            &sh("i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"),
            &RunOptions::new(),
        )
        .unwrap();
    let t = total(&plan, &m);
    assert!(t.get("cycles").unwrap().value.unwrap() > 1e6);
    assert!(t.get("instructions").unwrap().value.unwrap() > 1e6);
}

#[test]
fn pmu_raw_core_event_from_sysfs_alias() {
    if let Some(why) = no_pmu() {
        println!("skipped: needs a hardware PMU ({why})");
        return;
    }
    let pmus = tma_host::sysfs::Pmus::discover(Path::new("/sys")).unwrap();
    let core = pmus.core_pmus()[0].clone();
    let cfg = core
        .encode_alias("cpu-cycles")
        .or_else(|_| core.encode_alias("cycles"))
        .unwrap();
    let plan = Plan::software(&[EventSpec::raw("cycles-raw", core.name.clone(), cfg.config)]);
    let m = Live.run(&plan, &sh("true"), &RunOptions::new()).unwrap();
    assert!(total(&plan, &m).get("cycles-raw").unwrap().value.unwrap() > 0.0);
}

#[test]
fn a_refused_group_is_left_out_and_reads_not_supported() {
    // Group 1 is a tracepoint with an id that does not exist: the kernel refuses it, the
    // software group still counts.
    let good = software_events();
    let bad = EventSpec::raw("bogus-tracepoint", "tracepoint", u64::MAX >> 1);
    let plan = Plan {
        groups: vec![
            tma_perf::plan::Group {
                pmu: "software".into(),
                slots: vec![tma_perf::plan::Slot::NoCounter; good.len()],
                events: good,
            },
            tma_perf::plan::Group {
                pmu: "tracepoint".into(),
                events: vec![bad],
                slots: vec![tma_perf::plan::Slot::NoCounter],
            },
        ],
        unschedulable: vec![],
        aliases: vec![],
    };
    let m = Live.run(&plan, &sh("true"), &RunOptions::new()).unwrap();
    assert_eq!(m.failed_groups.len(), 1, "{:?}", m.failed_groups);
    assert_eq!(m.failed_groups[0].0, 1);
    let t = total(&plan, &m);
    assert_eq!(
        t.get("bogus-tracepoint").unwrap().status,
        ReadingStatus::NotSupported
    );
    assert_eq!(t.get("task-clock").unwrap().status, ReadingStatus::Counted);
    // Only refused groups: the run fails with the kernel's reason.
    let only_bad = Plan {
        groups: vec![plan.groups[1].clone()],
        unschedulable: vec![],
        aliases: vec![],
    };
    let e = Live.run(&only_bad, &sh("true"), &RunOptions::new());
    assert!(matches!(e, Err(RunError::Open { .. })), "{e:?}");
}

/// perf_event's cgroup mode, live: a cgroup v2 directory made here with a busy shell loop in
/// it; its task-clock over 300 ms shows the loop's CPU time, and only under that cgroup's
/// index. Skips (with the reason) where no cgroup v2 hierarchy is writable.
#[test]
fn cgroup_mode_counts_the_tasks_of_a_cgroup() {
    let host = tma_host::Host::system();
    let mount = match host.cgroup2_mount() {
        Ok(Some(m)) => m,
        other => {
            println!("skipped: no cgroup v2 hierarchy mounted ({other:?})");
            return;
        }
    };
    let dir = mount.join(format!("tma-perf-test-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        println!(
            "skipped: cannot create a cgroup under {}: {e}",
            mount.display()
        );
        return;
    }
    let mut busy = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let moved = std::fs::write(dir.join("cgroup.procs"), busy.id().to_string());
    let result = moved
        .map_err(|e| format!("cannot move pid {} into {}: {e}", busy.id(), dir.display()))
        .and_then(|()| {
            let plan = Plan::software(&[
                EventSpec::software(SoftwareEvent::TaskClock),
                EventSpec::software(SoftwareEvent::ContextSwitches),
            ]);
            let mut opts = RunOptions::new();
            opts.duration = Some(Duration::from_millis(300));
            // The cgroup twice: two indices, the same tasks.
            Live.run(
                &plan,
                &Target::Cgroups(vec![dir.clone(), dir.clone()]),
                &opts,
            )
            .map(|m| (plan, m))
            .map_err(|e| e.to_string())
        });
    let _ = busy.kill();
    let _ = busy.wait();
    for _ in 0..50 {
        if std::fs::remove_dir(&dir).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (plan, m) = match result {
        Ok(x) => x,
        Err(e) if e.contains("cannot move") => {
            println!("skipped: {e}");
            return;
        }
        Err(e) => panic!("cgroup counting failed: {e}"),
    };
    let total = m.total();
    assert!(total
        .groups
        .iter()
        .all(|g| g.cgroup.is_some() && g.cpu.is_some()));
    for idx in [0, 1] {
        let mine = RawInterval {
            groups: total
                .groups
                .iter()
                .filter(|g| g.cgroup == Some(idx))
                .cloned()
                .collect(),
            ..total.clone()
        };
        let iv = Measurement::interval_readings(&plan, &mine, false);
        let ns = iv.get("task-clock").unwrap().value.unwrap();
        // The loop is busy all the time; on a shared 2-CPU machine it gets at least a part.
        assert!(
            ns > 30e6 && ns < 0.7e9,
            "cgroup {idx}: task-clock {ns} ns over 300 ms"
        );
    }
}

#[test]
fn a_directory_that_is_not_a_cgroup_is_refused() {
    let plan = sw_plan();
    let d = tempfile::tempdir().unwrap();
    let e = Live.run(
        &plan,
        &Target::Cgroups(vec![d.path().into()]),
        &RunOptions::new(),
    );
    assert!(matches!(e, Err(RunError::BadCgroup { .. })), "{e:?}");
}

/// Why hardware counting cannot be tried here, or None where it can.
fn no_pmu() -> Option<String> {
    tma_host::sysfs::Pmus::why_no_hardware_counting(&tma_host::Host::system())
}
