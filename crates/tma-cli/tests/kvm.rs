//! `tma kvm` end to end. The guest runner is this test binary itself: run with
//! TMA_KVM_RUNNER_CHILD=1, the `runner_child` test runs the tma-testvmm guest and prints its
//! `EXPECT` line, so `tma kvm -- <this test binary> runner_child` measures a real VM.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use tma_testkit::{fixture, is_root, Tma};
use tma_testvmm::RunnerCounts;

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));
static LOCK: Mutex<()> = Mutex::new(());
const N: u16 = 200;

fn tracefs_mounts() -> usize {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("tracefs"))
        .count()
}

#[test]
fn runner_child() {
    if std::env::var_os("TMA_KVM_RUNNER_CHILD").is_none() {
        return; // only meaningful as the measured child
    }
    let n: u16 = std::env::var("TMA_KVM_RUNNER_ITER")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(N);
    // TMA_KVM_RUNNER_THP=on|off: 64 MiB of extra guest memory advised MADV_HUGEPAGE or
    // MADV_NOHUGEPAGE; the VM is held (after a READY line) until stdin closes.
    let thp = std::env::var("TMA_KVM_RUNNER_THP")
        .ok()
        .and_then(|s| tma_testvmm::ThpAdvice::parse(&s));
    let opts = tma_testvmm::GuestOptions {
        extra_memory: thp.map(|a| (64 << 20, a)),
    };
    let got = tma_testvmm::run_guest_with(n, opts, || {
        if thp.is_some() {
            use std::io::{Read, Write};
            println!("\nREADY");
            let _ = std::io::stdout().flush();
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        }
    })
    .expect("guest runs");
    println!("\n{}", RunnerCounts::expected(u32::from(n)).expect_line());
    let stats: Vec<String> = got
        .kvm_stats
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!("KVM_STATS {}", stats.join(" "));
    let mut cmp = got.clone();
    cmp.kvm_stats.clear();
    assert_eq!(cmp, RunnerCounts::expected(u32::from(n)));
}

#[test]
fn counts_the_runner_exactly() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        eprintln!("skipped: not root (tracepoints and tracefs need root)");
        return;
    }
    if !Path::new("/dev/kvm").exists() {
        eprintln!("skipped: no /dev/kvm");
        return;
    }
    let before = tracefs_mounts();
    fails_with(&["kvm", "--", "/nonexistent/tma-cmd"], "cannot run");
    assert_eq!(
        tracefs_mounts(),
        before,
        "tracefs mount left behind after an error"
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("kvm.json");
    let me = std::env::current_exe().unwrap();
    let out = TMA
        .bare()
        .args(["kvm", "--json", "-o"])
        .arg(&json)
        .arg("--")
        .arg(&me)
        .args(["--exact", "runner_child", "--nocapture", "--test-threads=1"])
        .env("TMA_KVM_RUNNER_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tracefs_mounts(), before, "tracefs mount left behind");
    let expect = stdout
        .lines()
        .find_map(|l| {
            l.find("EXPECT ")
                .and_then(|i| RunnerCounts::parse_expect_line(&l[i..]))
        })
        .expect("EXPECT line");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "tma.kvm");
    let r = &v["report"];
    let t = &r["totals"];
    assert_eq!(r["lost_records"], 0);
    let ux = |name: &str| {
        r["userspace_exits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == name)
            .map_or(0, |u| u["count"].as_u64().unwrap())
    };
    assert_eq!(ux("KVM_EXIT_IO"), expect.io);
    assert_eq!(ux("KVM_EXIT_MMIO"), expect.mmio);
    assert_eq!(ux("KVM_EXIT_HLT"), expect.hlt);
    assert_eq!(t["kvm_pio"], expect.io);
    // Writes once; reads once unsatisfied (to userspace) and once completed.
    assert_eq!(t["kvm_mmio"], expect.mmio_write + 2 * expect.mmio_read);
    assert_eq!(t["kvm_msr"], expect.rdmsr + expect.wrmsr);
    assert_eq!(t["kvm_cpuid"], expect.cpuid);
    // KVM's own per-vCPU statistics (KVM_GET_STATS_FD, read by the runner) agree with the
    // tracepoint counts where both exist.
    let kstat = |name: &str| -> Option<u64> {
        stdout
            .lines()
            .find_map(|l| l.find("KVM_STATS ").map(|i| &l[i + 10..]))?
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}="))?.parse().ok())
    };
    if let Some(n) = kstat("halt_exits") {
        assert_eq!(n, expect.hlt);
    }
    if let Some(n) = kstat("mmio_exits") {
        assert_eq!(n, expect.mmio);
    }
    if let Some(n) = kstat("insn_emulation") {
        assert_eq!(
            t["kvm_emulate_insn"], n,
            "kvm_emulate_insn vs KVM's insn_emulation"
        );
    }
    let backend = tma_kvm::detect_backend(Path::new("/"));
    if backend.emits_kvm_exit {
        let by = |names: &[&str]| {
            r["exits"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| names.contains(&x["name"].as_str().unwrap()))
                .map(|x| x["count"].as_u64().unwrap())
                .sum::<u64>()
        };
        assert!(by(&["IO_INSTRUCTION", "io"]) >= expect.io);
        assert!(by(&["HLT", "hlt"]) >= expect.hlt);
        assert!(by(&["CPUID", "cpuid"]) >= expect.cpuid);
        assert!(by(&["MSR_READ", "MSR_WRITE", "msr"]) >= expect.rdmsr + expect.wrmsr);
        assert!(by(&["EPT_MISCONFIG", "EPT_VIOLATION", "npf"]) >= expect.mmio);
    } else {
        assert_eq!(t["kvm_exit"], 0);
        let line = r["kvm_exit_not_emitted"].as_str().unwrap();
        assert!(
            line.starts_with(&format!("{} does not emit kvm_exit", backend.module)),
            "{line}"
        );
    }
}

#[test]
fn text_output_says_backend_does_not_emit_kvm_exit() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() || !Path::new("/dev/kvm").exists() {
        eprintln!("skipped: needs root and /dev/kvm");
        return;
    }
    let backend = tma_kvm::detect_backend(Path::new("/"));
    if backend.emits_kvm_exit {
        eprintln!(
            "skipped: {} emits kvm_exit (checked by counts_the_runner_exactly)",
            backend.module
        );
        return;
    }
    let me = std::env::current_exe().unwrap();
    let out = TMA
        .bare()
        .args(["kvm", "--per-vcpu", "-I", "50", "--"])
        .arg(&me)
        .args(["--exact", "runner_child", "--nocapture", "--test-threads=1"])
        .env("TMA_KVM_RUNNER_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    let line = format!("{} does not emit kvm_exit", backend.module);
    assert!(s.contains(&line), "{s}");
    assert!(s.contains("# interval 1"), "{s}");
    assert!(s.contains("KVM_EXIT_IO"));
    assert!(!s.contains("VM-EXIT"), "no empty exit table:\n{s}");
    assert!(s.contains(&format!("IO {}", 2 * u64::from(N) + 1)));
}

fn fails_with(args: &[&str], needle: &str) {
    let out = TMA.bare().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
}

#[test]
fn bad_targets_are_clear_errors() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let before = tracefs_mounts();
    fails_with(&["kvm"], "exactly one target");
    fails_with(&["kvm", "-a", "-p", "1"], "exactly one target");
    fails_with(&["kvm", "-a", "--duration=0"], "--duration");
    fails_with(&["kvm", "-a", "--mmap-pages", "3"], "power of two");
    // This test process is not a VMM.
    let me = std::process::id().to_string();
    fails_with(&["kvm", "-p", &me], "is not a VMM");
    fails_with(&["kvm", "-p", "4000000000"], "no process with pid");
    assert_eq!(tracefs_mounts(), before);
}

#[test]
fn unprivileged_user_gets_a_clear_error_and_nothing_mounted() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        eprintln!("skipped: needs root to drop to an unprivileged user");
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: no setpriv");
        return;
    }
    let before = tracefs_mounts();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(TMA.bin())
        .args(["kvm", "-a", "--duration", "0.2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(126) || err.contains("setpriv:") {
        eprintln!(
            "skipped: the unprivileged user cannot execute {}: {err}",
            TMA.bin()
        );
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("run as root") || err.contains("no permission"),
        "{err}"
    );
    assert_eq!(tracefs_mounts(), before, "nothing left mounted");
    // With tracefs mounted (mode 700), the error is about permission, and the mount stays.
    if before == 0
        && Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status()
            .is_ok_and(|s| s.success())
    {
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(TMA.bin())
            .args(["kvm", "-a", "--duration", "0.2"])
            .output()
            .unwrap();
        let mounted_after = tracefs_mounts();
        let _ = Command::new("umount").arg("/sys/kernel/tracing").status();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("no permission to read"), "{err}");
        assert_eq!(
            mounted_after, 1,
            "tma must not unmount a mount it did not make"
        );
    }
}

#[test]
fn pid_mode_measures_only_that_vmm() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() || !Path::new("/dev/kvm").exists() {
        eprintln!("skipped: needs root and /dev/kvm");
        return;
    }
    let before = tracefs_mounts();
    let me = std::env::current_exe().unwrap();
    let iters: u16 = 12000;
    let mut child = Command::new(&me)
        .args(["--exact", "runner_child", "--nocapture", "--test-threads=1"])
        .env("TMA_KVM_RUNNER_CHILD", "1")
        .env("TMA_KVM_RUNNER_ITER", iters.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until it holds /dev/kvm.
    let t0 = std::time::Instant::now();
    while !tma_kvm::tracefs::is_vmm(&tma_host::Host::system(), pid).unwrap_or(false) {
        assert!(t0.elapsed().as_secs() < 10, "runner never opened /dev/kvm");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = TMA
        .bare()
        .args(["kvm", "--json", "--per-vcpu", "--duration", "0.5", "-p"])
        .arg(pid.to_string())
        .output()
        .unwrap();
    let finished_early = child.try_wait().unwrap().is_some();
    let st = child.wait().unwrap();
    assert!(st.success());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tracefs_mounts(), before);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["report"];
    let ux = r["totals"]["kvm_userspace_exit"].as_u64().unwrap();
    let max = 5 * u64::from(iters) + 1;
    if !finished_early {
        assert!(ux > 0, "no exits seen from the running VMM");
    }
    assert!(
        ux <= max,
        "{ux} > {max}: events of other processes were counted"
    );
    for t in r["per_vcpu"].as_array().unwrap() {
        assert_eq!(t["pid"].as_u64().unwrap(), u64::from(pid));
    }
}

/// Runs the runner child with its extra guest memory advised `thp` (`on`/`off`) and returns
/// `tma kvm --memory --json -p PID` and the text output for it.
fn memory_of_runner(thp: &str) -> (serde_json::Value, String) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let me = std::env::current_exe().unwrap();
    let mut child = Command::new(&me)
        .args(["--exact", "runner_child", "--nocapture", "--test-threads=1"])
        .env("TMA_KVM_RUNNER_CHILD", "1")
        .env("TMA_KVM_RUNNER_ITER", "1")
        .env("TMA_KVM_RUNNER_THP", thp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.trim() == "READY")),
        "runner child never got ready"
    );
    let pid = child.id().to_string();
    let json = TMA
        .bare()
        .args(["kvm", "--memory", "--json", "-p", &pid])
        .output()
        .unwrap();
    let text = TMA
        .bare()
        .args(["kvm", "--memory", "-p", &pid])
        .output()
        .unwrap();
    drop(child.stdin.take());
    for _ in lines.by_ref() {}
    let st = child.wait().unwrap();
    assert!(st.success());
    assert!(
        json.status.success() && text.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    (
        serde_json::from_slice(&json.stdout).unwrap(),
        String::from_utf8_lossy(&text.stdout).into_owned(),
    )
}

#[test]
fn memory_reports_the_huge_page_share_of_the_runner() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        eprintln!("skipped: cannot open /dev/kvm");
        return;
    }
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let (v, text) = memory_of_runner("off");
    assert_eq!(v["schema"], "tma.kvm.memory");
    let vm = &v["vms"][0];
    let m = &vm["mappings"][0];
    assert_eq!(m["size"], 64 << 20, "{v}");
    assert_eq!(m["backing"], "anonymous");
    assert_eq!(m["advice"], "no_hugepage");
    assert!(m["resident"].as_u64().unwrap() >= 60 << 20, "{v}");
    assert!(vm["huge_share"].as_f64().unwrap() < 0.05, "{v}");
    assert!(text.contains("0% on huge pages"), "{text}");
    assert!(text.contains("fix: "), "{text}");
    if thp.contains("[never]") || thp.is_empty() {
        eprintln!("skipped the MADV_HUGEPAGE half: THP is never or absent here");
        return;
    }
    let (v, text) = memory_of_runner("on");
    let vm = &v["vms"][0];
    assert_eq!(vm["mappings"][0]["advice"], "hugepage");
    let share = vm["huge_share"].as_f64().unwrap();
    assert!(share >= 0.9, "{share}: {v}");
    assert!(text.contains("backed by huge pages"), "{text}");
    assert_eq!(vm["fix"], serde_json::Value::Null);
}

#[test]
fn memory_rejects_a_non_vmm() {
    let me = std::process::id().to_string();
    fails_with(&["kvm", "--memory", "-p", &me], "is not a VMM");
    fails_with(&["kvm", "--memory", "-a", "-p", &me], "at most one target");
    let out = TMA
        .bare()
        .args(["kvm", "--memory", "--json", "-a"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "tma.kvm.memory");
}

#[test]
fn memory_on_fixture_roots() {
    let roots = fixture("roots");
    let out = TMA
        .bare()
        .arg("--root")
        .arg(roots.join("qemu-hugetlbfs"))
        .args(["kvm", "--memory", "-p", "4242"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        s.contains("100% on huge pages: backed by huge pages"),
        "{s}"
    );
    let out = TMA
        .bare()
        .arg("--root")
        .arg(roots.join("guest-memfd"))
        .args(["kvm", "--memory", "--all"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("guest_memfd: 1 file(s) open"), "{s}");
    assert!(s.contains("fix: echo always"), "{s}");
}
