//! SIGINT and SIGTERM: each command that runs long, signalled once it has
//! started, stops, prints what it has marked as interrupted, and exits 130 (SIGINT) or 143
//! (SIGTERM). The signal goes to the spawned `tma` alone, with kill(1) (no `unsafe` here);
//! a Ctrl-C at a terminal would also reach the commands tma launched.
//!
//! Each test runs the command the way it runs on this machine (no PMU: software events,
//! cpu-clock sampling); `tma kvm` needs root and tracefs, and skips with a reason without.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tma_testkit::Tma;

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn spawn(mut c: Command) -> Child {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tma")
}

fn kill(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill {sig} failed");
}

/// Wait for the end (at most `limit`; then SIGKILL and fail), collecting the output.
fn finish(mut child: Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "tma did not stop within {limit:?} of the signal:\n{}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Signal after `delay`, then wait; stdout and stderr as text.
fn signal_after(c: Command, delay: Duration, sig: &str) -> (Option<i32>, String, String) {
    let child = spawn(c);
    std::thread::sleep(delay);
    kill(&child, sig);
    let o = finish(child, Duration::from_secs(10));
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Signal once standard output (`on_stdout`) or standard error has shown a line containing
/// `ready` (the other stream and the rest read on threads).
fn signal_when(
    c: Command,
    ready: &str,
    on_stdout: bool,
    sig: &str,
) -> (Option<i32>, String, String) {
    let mut child = spawn(c);
    let (watched, other): (Box<dyn Read + Send>, Box<dyn Read + Send>) = if on_stdout {
        (
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        )
    } else {
        (
            Box::new(child.stderr.take().unwrap()),
            Box::new(child.stdout.take().unwrap()),
        )
    };
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let other = read_all(other);
    let mut watched = BufReader::new(watched);
    let mut seen = String::new();
    let t0 = Instant::now();
    loop {
        let mut line = String::new();
        if watched.read_line(&mut line).unwrap() == 0 {
            panic!("ended before `{ready}`: {seen}");
        }
        seen.push_str(&line);
        if line.contains(ready) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no `{ready}`: {seen}"
        );
    }
    let rest = read_all(Box::new(watched));
    kill(&child, sig);
    let o = finish(child, Duration::from_secs(10));
    seen.push_str(&rest.join().unwrap());
    let other = other.join().unwrap();
    let (out, err) = if on_stdout {
        (seen, other)
    } else {
        (other, seen)
    };
    (o.status.code(), out, err)
}

#[test]
fn stat_prints_the_counts_so_far() {
    for (sig, code) in [("-INT", 130), ("-TERM", 143)] {
        let mut c = TMA.bare();
        c.args(["stat", "-a", "-I", "200"]);
        let (st, out, err) = signal_after(c, Duration::from_millis(800), sig);
        assert_eq!(st, Some(code), "{sig}\n{out}\n{err}");
        assert!(err.contains("interrupted"), "{sig}: {err}");
    }
}

#[test]
fn bench_preset_sha_stops_with_the_forms_measured() {
    let mut c = TMA.bare();
    c.args(["bench", "--preset", "sha", "--json"]);
    let t0 = Instant::now();
    let (st, out, err) = signal_after(c, Duration::from_millis(1000), "-INT");
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert_eq!(st, Some(130), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect(&err);
    assert_eq!(v["interrupted"], "SIGINT", "{out}");
    assert!(v["sha"].is_null(), "no bounds from a cut-short preset");
    // Text: the interruption is said in the report itself.
    let mut c = TMA.bare();
    c.args(["bench", "--preset", "sha"]);
    let (st, out, err) = signal_after(c, Duration::from_millis(1000), "-TERM");
    assert_eq!(st, Some(143), "{out}\n{err}");
    assert!(out.contains("interrupted by SIGTERM"), "{out}");
}

#[test]
fn demo_stops_in_the_step_it_is_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = TMA.bare();
    c.args(["demo", "dram", "--quick", "--dir"]).arg(dir.path());
    let (st, out, err) = signal_when(c, "$ tma stat", true, "-INT");
    assert_eq!(st, Some(130), "{out}\n{err}");
    assert!(out.contains("Interrupted by SIGINT in step 1"), "{out}");
    assert!(
        !out.contains("Step 2:"),
        "step 2 ran after the interruption: {out}"
    );
    assert!(!out.contains("All steps ran"), "{out}");
}

#[test]
fn locate_reports_the_samples_taken() {
    // A launched command: it is passed the SIGTERM sent to tma alone.
    let mut c = TMA.bare();
    c.args([
        "locate",
        "-e",
        "cpu-clock",
        "--",
        "sh",
        "-c",
        "while :; do :; done",
    ]);
    let (st, out, err) = signal_after(c, Duration::from_millis(1500), "-TERM");
    assert_eq!(st, Some(143), "{out}\n{err}");
    assert!(out.contains("samples of cpu-clock"), "{out}\n{err}");
    assert!(out.contains("interrupted"), "{out}");
}

#[test]
fn kvm_reports_the_exits_counted() {
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    if !root || !Path::new("/dev/kvm").exists() {
        eprintln!("skipped: tma kvm needs root (tracefs, kvm tracepoints) and /dev/kvm");
        return;
    }
    for (sig, code) in [("-INT", 130), ("-TERM", 143)] {
        let mut c = TMA.bare();
        c.args(["kvm", "-a"]);
        let (st, out, err) = signal_after(c, Duration::from_millis(800), sig);
        if err.contains("tracefs") || err.contains("kvm:") && st == Some(2) {
            eprintln!("skipped: the kvm tracepoints cannot be read here: {err}");
            return;
        }
        assert_eq!(st, Some(code), "{sig}\n{out}\n{err}");
        assert!(err.contains("interrupted by"), "{sig}: {err}");
    }
}

#[test]
fn workload_says_there_are_no_figures() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let mut c = TMA.bare();
    c.args([
        "workload", "sha256", "--size", "64M", "--iters", "1000", "--report",
    ])
    .arg(&report);
    let (st, out, err) = signal_after(c, Duration::from_millis(800), "-TERM");
    assert_eq!(st, Some(143), "{out}\n{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(!report.exists(), "no report from an interrupted run");
}

#[test]
fn sha256sum_keeps_the_lines_of_the_inputs_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::write(&small, b"abc").unwrap();
    // /dev/zero never ends: the signal stops it.
    let mut c = TMA.bare();
    c.arg("sha256sum").arg(&small).arg("/dev/zero");
    let (st, out, err) = signal_after(c, Duration::from_millis(800), "-INT");
    assert_eq!(st, Some(130), "{out}\n{err}");
    assert!(
        out.starts_with("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        "{out}"
    );
    assert!(err.contains("interrupted by SIGINT"), "{err}");
}

#[test]
fn serve_stops_and_logs_it() {
    let mut c = TMA.bare();
    c.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--cpu",
        "spr",
        "--interval",
        "200ms",
    ])
    .arg("--replay")
    .arg(tma_testkit::fixture("serve/spr-intervals-synthetic.csv"));
    let (st, out, err) = signal_when(c, "event=listening", false, "-INT");
    assert_eq!(st, Some(130), "{out}\n{err}");
    assert!(
        err.contains("event=stopped") && err.contains("reason=signal"),
        "{err}"
    );
}

/// `tma doctor` exits 1 when a check reports a problem (the fixture root has several), and
/// `--fix --dry-run` says what it would write, writing nothing (no value, no state file).
#[test]
fn doctor_gates_on_problems_and_dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_tree(&tma_testkit::fixture("doctor/misconfigured"), &root);
    let state = dir.path().join("state.json");
    let o = TMA
        .bare()
        .args(["doctor", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("problem"), "{text}");
    let before = snapshot(&root);
    let o = TMA
        .bare()
        .args(["doctor", "--fix", "--dry-run", "--state"])
        .arg(&state)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("dry run: would run `echo "), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(
        o.status.code(),
        Some(1),
        "the problems are still there: {err}"
    );
    assert_eq!(snapshot(&root), before, "--dry-run changed a file");
    assert!(!state.exists(), "--dry-run wrote a state file");
    // The help says what the codes mean.
    let o = TMA.bare().args(["doctor", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("Exit status: 0") && help.contains("143"),
        "{help}"
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), &p).unwrap();
        }
    }
}

/// Every file under `dir` with its content, sorted.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            v.extend(snapshot(&e.path()));
        } else {
            v.push((e.path(), std::fs::read(e.path()).unwrap()));
        }
    }
    v.sort();
    v
}
