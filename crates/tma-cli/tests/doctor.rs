//! `tma doctor` end to end: for real on this machine, and against copies of the fake trees in
//! tests/fixtures/doctor for --fix / --restore (never the real system).

use std::path::{Path, PathBuf};
use tma_testkit::{fixture, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn tree(name: &str) -> PathBuf {
    fixture("doctor").join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

fn has_cpu_pmu() -> bool {
    std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|rd| {
            rd.filter_map(|e| e.ok()).any(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n == "cpu" || n.starts_with("cpu_")
            })
        })
        .unwrap_or(false)
}

/// `tma doctor` exits 1 exactly when a check reports a problem (text `[problem]`, JSON
/// `"status": "problem"`), else 0: CI gates on it.
fn assert_gate(out: &std::process::Output) {
    let s = String::from_utf8_lossy(&out.stdout);
    let problem = s.contains("[problem]") || s.contains("\"problem\"");
    assert_eq!(
        out.status.code(),
        Some(if problem { 1 } else { 0 }),
        "{s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn real_run_states_the_pmu_situation() {
    let out = TMA.bare().arg("doctor").output().unwrap();
    assert_gate(&out);
    let s = String::from_utf8_lossy(&out.stdout);
    if has_cpu_pmu() {
        assert!(s.contains("hardware PMU present"), "{s}");
    } else {
        // This project's CI VM: no vPMU.
        assert!(s.contains("no hardware PMU"), "{s}");
        assert!(s.contains("[problem] pmu"), "{s}");
    }
    for id in [
        "paranoid",
        "nmi_watchdog",
        "thp",
        "tsc",
        "hypervisor",
        "smt",
        "sample_read",
        "topdown_group",
        "smt_level1",
    ] {
        assert!(s.contains(&format!(" {id} ")), "{id} missing:\n{s}");
    }
    assert!(s.contains("TSC measured"), "{s}");
}

#[test]
fn json_has_the_schema_and_every_check() {
    let out = TMA
        .bare()
        .args(["doctor", "--json", "--root"])
        .arg(tree("this-vm"))
        .output()
        .unwrap();
    assert_gate(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "tma.doctor");
    assert_eq!(v["schema_version"], 1);
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 17);
    let pmu = checks.iter().find(|c| c["id"] == "pmu").unwrap();
    assert_eq!(pmu["status"], "problem");
    assert!(pmu["summary"].as_str().unwrap().contains("no hardware PMU"));
}

#[test]
fn fix_and_restore_on_a_fake_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    copy_dir(&tree("misconfigured"), &base);
    let state = tmp.path().join("state.json");
    let out = TMA
        .bare()
        .args(["doctor", "--fix", "--root"])
        .arg(&base)
        .arg("--state")
        .arg(&state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("echo 0 > /proc/sys/kernel/perf_event_paranoid"),
        "{err}"
    );
    assert!(err.contains("--restore"), "{err}");
    let rd = |rel: &str| std::fs::read_to_string(base.join(rel)).unwrap();
    assert_eq!(rd("proc/sys/kernel/nmi_watchdog"), "0\n");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("[ok     ] nmi_watchdog"), "{s}");
    let out = TMA
        .bare()
        .args(["doctor", "--root"])
        .arg(&base)
        .arg("--restore")
        .arg(&state)
        .output()
        .unwrap();
    assert_gate(&out);
    assert_eq!(rd("proc/sys/kernel/nmi_watchdog"), "1\n");
    assert_eq!(rd("proc/sys/kernel/perf_event_paranoid"), "3\n");
    // A restore from a missing file is a clear one-line error, exit code 2.
    let out = TMA
        .bare()
        .args(["doctor", "--root"])
        .arg(&base)
        .arg("--restore")
        .arg(tmp.path().join("nope.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read state file"), "{err}");
    // --fix where nothing is fixable changes nothing.
    let ok = tmp.path().join("ok");
    copy_dir(&tree("intel-baremetal"), &ok);
    let out = TMA
        .bare()
        .args(["doctor", "--fix", "--root"])
        .arg(&ok)
        .arg("--state")
        .arg(tmp.path().join("s2.json"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to fix"));
    assert!(!tmp.path().join("s2.json").exists());
}

#[test]
fn bad_root_is_a_clear_error() {
    let out = TMA
        .bare()
        .args(["doctor", "--root", "/nonexistent-tma"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must contain proc/ and sys/"));
}

#[test]
fn vm_memory_check_for_each_vm_found() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    copy_dir(&tree("this-vm"), &base);
    // The QEMU of tests/fixtures/roots/guest-memfd (found by its name; its fd links are not copied).
    let vmm = tree("../roots/guest-memfd/proc/5151");
    std::fs::create_dir_all(base.join("proc/5151")).unwrap();
    for f in ["comm", "status", "smaps"] {
        std::fs::copy(vmm.join(f), base.join("proc/5151").join(f)).unwrap();
    }
    let out = TMA
        .bare()
        .args(["doctor", "--json", "--root"])
        .arg(&base)
        .output()
        .unwrap();
    assert_gate(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "vm_memory")
        .expect("a vm_memory check");
    assert_eq!(c["status"], "warning");
    let s = c["summary"].as_str().unwrap();
    assert!(
        s.starts_with("VMM pid 5151 (qemu-system-x86): guest memory 16 GiB"),
        "{s}"
    );
    assert!(c["fix"].as_str().unwrap().contains("MADV_HUGEPAGE"));
}

fn verify_fixture() -> PathBuf {
    tree("verify/synthetic-good.json")
}

/// `tma doctor --verify` here: the software path passes (and, without a PMU, says that only it
/// was verified); exit 0.
#[test]
fn verify_runs_here_and_passes_the_software_path() {
    let o = TMA.bare().args(["doctor", "--verify"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("cannot count this thread") {
        eprintln!("SKIP: perf_event_open refused here: {err}");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    for id in [
        "software.task_clock",
        "software.context_switches",
        "software.page_faults",
    ] {
        let line = out.lines().find(|l| l.contains(id)).unwrap_or_default();
        assert!(line.contains("pass"), "{id}: {out}");
    }
    if !has_cpu_pmu() {
        assert!(out.contains("software counting only"), "{out}");
        assert!(out.contains("no hardware PMU here"), "{out}");
    }
}

/// Recorded counts: the good set passes (exit 0); a corrupted copy fails (exit 1) and says
/// which check and why.
#[test]
fn verify_replay_good_and_corrupted() {
    let o = TMA
        .bare()
        .args(["doctor", "--verify", "--replay"])
        .arg(verify_fixture())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("hardware and software counting"), "{out}");
    assert!(out.contains("0 failed"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(verify_fixture()).unwrap()).unwrap();
    // One branch too many per iteration in the add+jmp loop.
    let b = v["loops"][1]["branches"][1].as_u64().unwrap();
    v["loops"][1]["branches"][1] = serde_json::json!(b + 100_000);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let o = TMA
        .bare()
        .args(["doctor", "--verify", "--json", "--replay"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "exact.add_jmp_loop.branches")
        .unwrap();
    assert_eq!(row["verdict"], "fail");
    assert_eq!(
        row["reason"],
        "100000 more iterations gave 10200000, not 10100000 = 100000 x 101"
    );
    // Not a recording at all.
    let o = TMA
        .bare()
        .args(["doctor", "--verify", "--replay", "/nonexistent/verify.json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read it"));
}

/// The caveats of group sampling (`tma locate --tree`) on the fake roots of
/// tests/fixtures/roots: a Skylake-SP on Linux 5.15 with SMT on (they apply) and an Ice
/// Lake-SP on Linux 6.12 (they do not).
#[test]
fn group_sampling_caveats_on_fake_roots() {
    let out = TMA
        .bare()
        .args(["doctor", "--root"])
        .arg(fixture("roots/skx-smt-5.15"))
        .output()
        .unwrap();
    assert_gate(&out);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("[warning] sample_read  Linux 5.15.0-91-generic is older than 6.12"),
        "{s}"
    );
    assert!(
        s.contains("[warning] smt_level1   Skylake-SP (skx) with SMT on: per-thread level 1 is meaningless"),
        "{s}"
    );
    assert!(s.contains("[warning] nmi_watchdog"), "{s}");
    let out = TMA
        .bare()
        .args(["doctor", "--json", "--root"])
        .arg(fixture("roots/icx-6.12"))
        .output()
        .unwrap();
    assert_gate(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 17);
    for id in ["sample_read", "topdown_group", "smt_level1", "nmi_watchdog"] {
        let c = checks.iter().find(|c| c["id"] == id).unwrap();
        assert_eq!(c["status"], "ok", "{c}");
    }
}
