//! End-to-end tests of live `tma stat`: real perf_event_open with software events (they work
//! on this machine), and the synthetic backend (`--synthetic-backend`, a hidden test-only flag) for the
//! hardware paths: multiplex scaling, counted shares, --no-multiplex, --repeat, --drilldown,
//! --record / --import byte for byte.
// unsafe allowed: kill(2) sends SIGINT to a spawned tma.
#![allow(unsafe_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// `tma stat` with the synthetic backend (hidden flag `--synthetic-backend`, test-only)
/// instead of perf_event_open; the caller adds the other arguments of `tma stat`.
fn synthetic() -> Command {
    let mut c = TMA.bare();
    c.arg("stat")
        .arg("--synthetic-backend")
        .arg(fixture("live/synthetic-zen4-sha256.json"));
    c
}

fn run(c: &mut Command) -> Output {
    c.stdin(Stdio::null()).output().expect("run tma")
}

fn has_core_pmu() -> bool {
    ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}

/// Processes whose command line is exactly `argv` (to find leftovers).
fn processes_with_cmdline(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want) {
            // Zombies have an empty cmdline, so a match is a live process.
            out.push(pid);
        }
    }
    out
}

fn assert_one_line_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("tma: error: "), "{err}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    assert!(o.stdout.is_empty());
}

// ------------------------------------------------------------------ real counting

#[test]
fn exit_status_is_forwarded_and_software_counts_printed() {
    let o = run(TMA
        .bare()
        .args(["stat", "--", "sh", "-c", "echo child-says-hi; exit 3"]));
    assert_eq!(o.status.code(), Some(3));
    let out = stdout(&o);
    assert!(out.starts_with("child-says-hi\n"), "{out}");
    if has_core_pmu() {
        eprintln!("skipped the no-PMU checks: this machine has a hardware PMU");
        return;
    }
    let err = stderr(&o);
    assert!(err.contains("hardware counters are not available"), "{err}");
    assert!(err.contains("tma stat --import"), "{err}");
    assert_eq!(err.lines().count(), 1, "one paragraph: {err}");
    for ev in [
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "seconds wall time",
        "CPUs utilized",
    ] {
        assert!(out.contains(ev), "{ev} missing: {out}");
    }
    // Never a tree from missing counters.
    assert!(!out.contains("Bottleneck"), "{out}");
}

#[test]
fn repeat_prints_mean_and_spread() {
    let o = run(TMA
        .bare()
        .args(["stat", "--repeat", "3", "--", "sh", "-c", "exit 0"]));
    assert_eq!(o.status.code(), Some(0));
    if !has_core_pmu() {
        let out = stdout(&o);
        assert!(out.contains("mean of 3 runs"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.contains("task-clock") && l.contains("( +- ")),
            "{out}"
        );
    }
}

#[test]
fn killed_command_gives_128_plus_signal() {
    let o = run(TMA.bare().args(["stat", "--", "sh", "-c", "kill -TERM $$"]));
    assert_eq!(o.status.code(), Some(128 + 15));
}

#[test]
fn ctrl_c_prints_partial_counts_and_leaves_no_child() {
    let argv = ["sleep", "5.4321"];
    let child = TMA
        .bare()
        .args(["stat", "--"])
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the measured command runs.
    let t0 = Instant::now();
    while processes_with_cmdline(&argv).is_empty() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !processes_with_cmdline(&argv).is_empty(),
        "the command never started"
    );
    // SAFETY: sending SIGINT to the child we spawned, identified by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(5), "did not stop early");
    let out = stdout(&o);
    if !has_core_pmu() {
        assert!(out.contains("task-clock"), "{out}");
    }
    assert!(processes_with_cmdline(&argv).is_empty(), "leftover sleep");
}

#[test]
fn interval_output() {
    let o = run(TMA.bare().args(["stat", "-I", "200", "--", "sleep", "0.7"]));
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let n = out.matches("--- interval").count();
    assert!((3..=6).contains(&n), "{n} intervals: {out}");
    let o = run(TMA
        .bare()
        .args(["stat", "-I", "200", "--compact", "--", "sleep", "0.5"]));
    let out = stdout(&o);
    if !has_core_pmu() {
        assert!(out.starts_with("time_s,task-clock (msec),"), "{out}");
        assert!(out.lines().count() >= 3, "{out}");
    }
}

#[test]
fn attach_to_pid_that_exits_mid_run() {
    let mut sleeper = Command::new("sleep").arg("0.4").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let t0 = Instant::now();
    let h = std::thread::spawn(move || sleeper.wait());
    let o = run(TMA.bare().args(["stat", "-p", &pid, "--duration", "20"]));
    h.join().unwrap().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(stderr(&o).contains("exited"), "{}", stderr(&o));
}

#[test]
fn system_wide_on_one_cpu() {
    let o = run(TMA
        .bare()
        .args(["stat", "-a", "-C", "0", "--duration", "0.2"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    if !has_core_pmu() {
        assert!(stdout(&o).contains("CPUs 0"), "{}", stdout(&o));
    }
}

/// perf's habits: `-a -- CMD` and `-C CPUS CMD` (no `--` needed) count those CPUs while the
/// command runs, and end with its exit status; `--cpu` is checked in live runs too.
#[test]
fn system_wide_while_a_command_runs() {
    let o = run(TMA
        .bare()
        .args(["stat", "-a", "--", "sh", "-c", "sleep 0.2; exit 3"]));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    if !has_core_pmu() {
        assert!(
            stdout(&o).contains("all CPUs while `sh -c 'sleep 0.2; exit 3'` ran"),
            "{}",
            stdout(&o)
        );
    }
    let t0 = Instant::now();
    let o = run(TMA
        .bare()
        .args(["stat", "-C", "0", "-x,", "sh", "-c", "exit 4"]));
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(10));
    if !has_core_pmu() {
        assert!(stdout(&o).starts_with("event,value,unit"), "{}", stdout(&o));
    }
    assert_one_line_error(
        &run(TMA
            .bare()
            .args(["stat", "-a", "--cpu", "bogus", "--", "true"])),
        "unknown CPU name `bogus`",
    );
}

#[test]
fn bad_input_one_line_errors() {
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "-I", "0", "--", "true"])),
        "-I 0",
    );
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "-a", "-C", "0-x"])),
        "bad CPU list",
    );
    assert_one_line_error(
        &run(TMA
            .bare()
            .args(["stat", "-a", "-C", "4000", "--duration", "0.1"])),
        "CPU 4000",
    );
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "-p", "999999999"])),
        "no such process",
    );
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "--", "no-such-command-for-tma"])),
        "command not found",
    );
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "-e", "bogus_event", "--", "true"])),
        "unknown event",
    );
    assert_one_line_error(&run(TMA.bare().args(["stat"])), "nothing to measure");
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "--repeat", "0", "--", "true"])),
        "--repeat 0",
    );
}

#[test]
fn record_software_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("s.json");
    let o = run(TMA
        .bare()
        .args(["stat", "--record"])
        .arg(&snap)
        .args(["--", "true"]));
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&snap).unwrap()).unwrap();
    assert_eq!(v["schema"], "tma.snapshot");
    assert_eq!(v["schema_version"], 1);
    assert!(v["topology"]["cpus"].as_u64().unwrap() >= 1);
    assert!(
        v["runs"][0]["measurement"]["intervals"][0]["groups"][0]["time_enabled_ns"]
            .as_u64()
            .unwrap()
            > 0
    );
    if !has_core_pmu() {
        assert_eq!(v["hardware"], false);
    }
}

// ------------------------------------------------------------------ synthetic backend

#[test]
fn multiplex_scaling_and_counted_share() {
    let o = run(synthetic().args(["--cpu", "zen4", "-l", "2", "--", "true"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // The chosen true counts are those of the pmu-data methodology case (backend_bound_cpu
    // 65.9%); raw readings are 1/2, 1/4 of them, so only correct scaling gives these values.
    let line = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing: {out}"))
            .to_string()
    };
    assert!(line("backend_bound").contains("67.6%"), "{out}");
    assert!(line("backend_bound_cpu").contains("65.9%"), "{out}");
    assert!(line("backend_bound_cpu").contains("<=="), "{out}");
    assert!(line("frontend_bound").contains("6.2%"), "{out}");
    // Per-node counted share: group 1 (level 1 events) ran 50% of the time, group 2 (the
    // level-2 splits) 25%; a node shows the least of its events.
    assert!(line("backend_bound").contains("50.0% counted"), "{out}");
    assert!(line("backend_bound_cpu").contains("25.0% counted"), "{out}");
    assert!(line("frontend_bound").contains("50.0% counted"), "{out}");
    assert!(out.contains("2 counter groups multiplexed"), "{out}");
}

#[test]
fn no_multiplex_runs_once_per_group_and_combines() {
    let o = run(synthetic().args([
        "--cpu",
        "zen4",
        "-l",
        "2",
        "--no-multiplex",
        "-v",
        "--",
        "true",
    ]));
    assert_eq!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(err.contains("runs 2 times"), "{err}");
    assert!(err.contains("plan: 3 groups"), "{err}");
    let out = stdout(&o);
    assert!(out.contains("2 runs, one per counter group"), "{out}");
    // Same values, and every event counted all the time.
    assert!(out.contains("65.9%"), "{out}");
    assert!(!out.contains("% counted"), "{out}");
}

#[test]
fn drilldown_descends_into_the_bottleneck() {
    let o = run(synthetic().args(["--cpu", "zen4", "--drilldown", "-v", "--", "true"]));
    assert_eq!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("drill-down: 2 runs: backend_bound -> backend_bound_cpu"),
        "{err}"
    );
    // Second plan: only the backend subtree's events (and cycles), no frontend events.
    let plans: Vec<&str> = err.split("plan: ").skip(1).collect();
    assert_eq!(plans.len(), 2, "{err}");
    assert!(plans[0].contains("no_ops_from_frontend"));
    assert!(!plans[1].contains("no_ops_from_frontend"), "{}", plans[1]);
    assert!(
        plans[1].contains("ex_no_retire.load_not_complete"),
        "{}",
        plans[1]
    );
    let out = stdout(&o);
    assert_eq!(out.matches("AMD Zen 4 (zen4").count(), 2, "{out}");
    assert!(out.contains("under backend_bound"), "{out}");
}

#[test]
fn record_then_import_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    for extra in [
        &[][..],
        &["-I", "1000"],
        &["-I", "1000", "--compact"],
        &["--json"],
        &["--csv"],
        &["--no-multiplex"],
        &["--repeat", "2"],
        &["-v"],
    ] {
        let snap = dir.path().join("snap.json");
        let live = run(synthetic()
            .args(["--cpu", "zen4", "-l", "2", "--record"])
            .arg(&snap)
            .args(extra)
            .args(["--", "true"]));
        assert_eq!(live.status.code(), Some(0), "{extra:?}: {}", stderr(&live));
        let render_flags: Vec<&str> = extra
            .iter()
            .copied()
            .filter(|f| ["--json", "--csv", "--compact", "-v"].contains(f))
            .collect();
        let imp = run(TMA
            .bare()
            .args(["stat", "-l", "2", "--import"])
            .arg(&snap)
            .args(&render_flags));
        assert_eq!(imp.status.code(), Some(0), "{extra:?}: {}", stderr(&imp));
        assert_eq!(stdout(&live), stdout(&imp), "{extra:?}");
        assert!(!live.stdout.is_empty());
    }
}

#[test]
fn record_is_atomic_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("never.json");
    let o = run(synthetic()
        .args(["--cpu", "zen4", "--record"])
        .arg(&snap)
        .args(["--", "no-such-command-for-tma"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(!snap.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

// ------------------------------------------------------------------ hardware PMU

/// Runs wherever a hardware PMU can be used; skipped with the reason elsewhere.
#[test]
fn pmu_live_tree_for_a_command() {
    if let Some(why) = no_pmu() {
        println!("skipped: needs a hardware PMU ({why})");
        return;
    }
    let o = run(TMA.bare().args([
        "stat",
        "-l",
        "1",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("Bottleneck") || out.contains("No bottleneck"),
        "{out}"
    );
    assert!(!stderr(&o).contains("not available"));
}

#[test]
fn per_core_trees_from_per_cpu_readings() {
    let o = run(synthetic().args([
        "--cpu",
        "zen4",
        "-a",
        "-C",
        "0,1",
        "--per-core",
        "--duration",
        "1",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // One aggregated tree plus one per core; the counts were split over the CPUs, so each
    // core's tree gives the same fractions.
    assert_eq!(out.matches("AMD Zen 4 (zen4").count(), 3, "{out}");
    assert!(out.contains(", core S"), "{out}");
    assert_eq!(out.matches("backend_bound       67.6%").count(), 3, "{out}");
}

#[test]
fn per_thread_software_counts() {
    let mut sleeper = Command::new("sleep").arg("0.3").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let o = run(TMA
        .bare()
        .args(["stat", "-p", &pid, "--per-thread", "--duration", "5"]));
    sleeper.wait().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    if !has_core_pmu() {
        assert!(
            stdout(&o).contains(&format!("--- thread {pid} ---")),
            "{}",
            stdout(&o)
        );
    }
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "--per-thread", "--", "true"])),
        "--per-thread needs",
    );
    assert_one_line_error(
        &run(TMA.bare().args(["stat", "--per-core", "--", "true"])),
        "--per-core needs",
    );
}

#[test]
fn pmu_in_sysfs_but_open_fails_falls_back_to_software() {
    if has_core_pmu() {
        eprintln!("skipped: this machine has a hardware PMU, opening would succeed");
        return;
    }
    // A fake sysfs that claims a Sapphire Rapids PMU: perf_event_open itself then says no.
    let o = run(TMA.bare().args([
        "stat",
        "--root",
        fixture("roots/spr").to_str().unwrap(),
        "--cpu",
        "spr",
        "--",
        "sh",
        "-c",
        "echo ran-once; exit 5",
    ]));
    assert_eq!(o.status.code(), Some(5));
    let err = stderr(&o);
    assert!(err.contains("perf_event_open of TOPDOWN.SLOTS"), "{err}");
    assert!(err.contains("hardware counters are not available"), "{err}");
    let out = stdout(&o);
    // The command ran exactly once (the held child was discarded before exec).
    assert_eq!(out.lines().filter(|l| *l == "ran-once").count(), 1, "{out}");
    assert!(
        out.contains("task-clock") && !out.contains("Bottleneck"),
        "{out}"
    );
}

#[test]
fn permission_denied_names_paranoid_and_fix() {
    // As an unprivileged user, system-wide counting needs perf_event_paranoid <= 0.
    let paranoid =
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    let is_root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if !is_root
        || paranoid.trim().parse::<i32>().unwrap_or(-1) < 1
        || !Path::new("/usr/bin/setpriv").exists()
    {
        eprintln!("skipped: needs root (to drop to nobody), setpriv, and perf_event_paranoid >= 1");
        return;
    }
    let o = run(Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(TMA.bin())
        .args(["stat", "-a", "-C", "0", "--duration", "0.1"]));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("perf_event_paranoid is {}", paranoid.trim())),
        "{err}"
    );
    // Whole CPUs: the table's advice is level 0.
    assert!(
        err.contains("sudo sysctl kernel.perf_event_paranoid=0"),
        "{err}"
    );
    assert!(err.contains("until reboot"), "{err}");
    assert!(o.stdout.is_empty());
}

fn wait_for(argv: &[&str], present: bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if processes_with_cmdline(argv).is_empty() != present {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn duration_stops_a_command_without_leftovers() {
    let t0 = Instant::now();
    let o = run(TMA
        .bare()
        .args(["stat", "--duration", "0.3", "--", "sleep", "6.1234"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(wait_for(&["sleep", "6.1234"], false), "leftover sleep");
}

#[test]
fn killing_tma_does_not_orphan_the_command() {
    let argv = ["sleep", "7.2345"];
    let mut child = TMA
        .bare()
        .args(["stat", "--"])
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(&argv, true), "the command never started");
    child.kill().unwrap(); // SIGKILL: tma cannot clean up itself
    child.wait().unwrap();
    assert!(wait_for(&argv, false), "the command outlived tma");
}

#[test]
fn spr_plan_puts_topdown_events_under_slots() {
    let o = run(synthetic().args(["--cpu", "spr", "-l", "2", "-v", "--", "true"]));
    let err = stderr(&o);
    let plan = err
        .split("plan: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{err}"));
    let lines: Vec<&str> = plan.lines().collect();
    // The first hardware group is led by slots on fixed counter 3; the PERF_METRICS slices
    // follow it without counters.
    let lead = lines
        .iter()
        .position(|l| l.contains("fixed3") && l.contains("TOPDOWN.SLOTS"))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(lines[lead - 1].contains("group"), "{plan}");
    let metrics = lines[lead + 1..]
        .iter()
        .take_while(|l| l.trim_start().starts_with("metric"))
        .count();
    assert_eq!(metrics, 8, "{plan}");
    assert!(plan.contains("PERF_METRICS.MEMORY_BOUND"), "{plan}");
}

#[test]
fn header_and_json_head_name_the_tma_version() {
    let o = run(synthetic().args(["--cpu", "spr", "-l", "2", "--", "true"]));
    let out = stdout(&o);
    assert!(
        out.starts_with("Sapphire Rapids (spr, from --cpu), TMA 5.2, counted live"),
        "{out}"
    );
    let o = run(synthetic().args(["--cpu", "skx", "--json", "--", "true"]));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["cpu"]["tma_version"], "5.01");
}

/// Why hardware counting cannot be tried here, or None where it can.
fn no_pmu() -> Option<String> {
    tma_host::sysfs::Pmus::why_no_hardware_counting(&tma_host::Host::system())
}

#[test]
fn interval_counts_without_a_pmu_are_json_and_csv_in_one_unit() {
    if has_core_pmu() {
        eprintln!("skipped the no-PMU checks: this machine has a hardware PMU");
        return;
    }
    let o = run(TMA
        .bare()
        .args(["stat", "-I", "100", "--json", "--", "sleep", "0.25"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bytes = o.stdout.clone();
    // One `tma.stat.software` document with the intervals as an array, typed on both sides.
    let head = tma_render::recognize(&bytes);
    assert_eq!(
        head.schema(),
        Some(tma_stat::render::counts::SOFTWARE_SCHEMA)
    );
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("one JSON document");
    let ivs = v["intervals"].as_array().expect("intervals");
    assert!(ivs.len() >= 2, "{v}");
    let first: tma_stat::render::doc::SoftwareInterval =
        serde_json::from_value(ivs[0].clone()).unwrap();
    let clock = first
        .events
        .iter()
        .find(|e| e.event == "task-clock")
        .unwrap();
    assert_eq!(clock.unit, "msec");
    // The whole run's document reads into its type too.
    let o = run(TMA.bare().args(["stat", "--json", "--", "true"]));
    let doc: tma_stat::render::doc::SoftwareDoc = tma_testkit::round_trip(
        &o.stdout,
        tma_stat::render::counts::SOFTWARE_SCHEMA,
        tma_stat::render::counts::SOFTWARE_SCHEMA_VERSION,
    );
    assert_eq!(doc.events[0].unit, "msec");
    // CSV per interval: task-clock in msec, as in the whole run's CSV.
    let o = run(TMA
        .bare()
        .args(["stat", "-I", "100", "--csv", "--", "sleep", "0.25"]));
    let out = stdout(&o);
    assert!(out.starts_with("time_s,task-clock (msec),"), "{out}");
}
