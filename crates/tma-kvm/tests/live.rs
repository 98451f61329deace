//! Live tests on this machine: tracefs mounting, and the test VMM measured through the
//! library's sampling session. They need root and /dev/kvm and skip with a printed reason
//! otherwise. The measured VMM is this test binary itself: run with TMA_KVM_RUNNER_CHILD=1, the
//! `runner_child` test runs the `tma-testvmm` guest.

use std::path::Path;
use std::sync::Mutex;

use tma_kvm::{SessionConfig, Target, Tracefs};
use tma_testkit::is_root;
use tma_testvmm::RunnerCounts;

/// tracefs mounting is process-global state: one live test at a time.
static LOCK: Mutex<()> = Mutex::new(());

/// tracefs mounts at or below `dir` (what a test given `dir` as its root could have mounted;
/// other processes' mounts elsewhere do not disturb the count).
fn tracefs_mounts_under(dir: &Path) -> usize {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            let mut f = l.split_whitespace();
            let point = f.nth(1).unwrap_or("");
            f.next() == Some("tracefs") && Path::new(point).starts_with(dir)
        })
        .count()
}

fn tracefs_mounts() -> usize {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("tracefs"))
        .count()
}

fn skip_reason() -> Option<&'static str> {
    if !is_root() {
        return Some("not root");
    }
    if !Path::new("/dev/kvm").exists() {
        return Some("no /dev/kvm");
    }
    None
}

/// The measured guest: only does something when launched by `runner_exact_vmm_level_counts`.
#[test]
fn runner_child() {
    let Some(n) = std::env::var_os("TMA_KVM_RUNNER_CHILD") else {
        return;
    };
    let n: u16 = n.to_str().and_then(|s| s.parse().ok()).expect("iterations");
    let mut got = tma_testvmm::run_guest(n).expect("guest runs");
    got.kvm_stats.clear();
    assert_eq!(got, RunnerCounts::expected(u32::from(n)));
}

#[test]
fn mount_point_missing_is_a_clear_error_and_mounts_nothing() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let err = Tracefs::find_or_mount(dir.path()).unwrap_err().to_string();
    assert!(err.contains("does not exist"), "{err}");
    assert!(err.contains("CONFIG_TRACING"), "{err}");
    assert_eq!(tracefs_mounts_under(dir.path()), 0);
}

#[test]
fn finds_debug_tracing_fallback_in_fake_tree() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir
        .path()
        .join("sys/kernel/debug/tracing/events/kvm/kvm_exit");
    std::fs::create_dir_all(&ev).unwrap();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kvm/format-6.18");
    std::fs::copy(fx.join("kvm_exit"), ev.join("format")).unwrap();
    let t = Tracefs::find(dir.path()).unwrap();
    assert!(t.path().ends_with("sys/kernel/debug/tracing"));
    assert!(!t.mounted_by_us());
    let f = tma_kvm::kvm_formats(&t).unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].id, 103);
    // /sys/kernel/tracing wins when both exist.
    std::fs::create_dir_all(dir.path().join("sys/kernel/tracing/events")).unwrap();
    assert!(Tracefs::find(dir.path())
        .unwrap()
        .path()
        .ends_with("sys/kernel/tracing"));
    // No kvm events there: a clear error.
    let e = tma_kvm::kvm_formats(&Tracefs::find(dir.path()).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("kvm module is not loaded"), "{e}");
}

#[test]
fn backend_detection_from_fake_sys() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("sys/module");
    std::fs::create_dir_all(m.join("kvm")).unwrap();
    assert_eq!(tma_kvm::detect_backend(dir.path()).module, "kvm");
    std::fs::create_dir_all(m.join("kvm_pvm")).unwrap();
    let b = tma_kvm::detect_backend(dir.path());
    assert_eq!((b.module.as_str(), b.emits_kvm_exit), ("kvm_pvm", false));
    std::fs::create_dir_all(m.join("kvm_intel")).unwrap();
    let b = tma_kvm::detect_backend(dir.path());
    assert_eq!((b.module.as_str(), b.emits_kvm_exit), ("kvm_intel", true));
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(tma_kvm::detect_backend(empty.path()).module, "none");
}

#[test]
fn mounts_and_unmounts_only_what_it_mounted() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        eprintln!("skipped: not root (mounting tracefs needs CAP_SYS_ADMIN)");
        return;
    }
    let before = tracefs_mounts();
    {
        let t = Tracefs::find_or_mount(Path::new("/")).unwrap();
        let was_mounted = Tracefs::find(Path::new("/")).is_some();
        assert!(was_mounted);
        if t.mounted_by_us() {
            assert_eq!(tracefs_mounts(), before + 1);
        } else {
            assert_eq!(tracefs_mounts(), before);
        }
        // A second user finds the mount and does not own it.
        let t2 = Tracefs::find_or_mount(Path::new("/")).unwrap();
        assert!(!t2.mounted_by_us());
    }
    assert_eq!(
        tracefs_mounts(),
        before,
        "a mount was left behind or removed"
    );
}

#[test]
fn runner_exact_vmm_level_counts() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        eprintln!("skipped: {r}");
        return;
    }
    let before = tracefs_mounts();
    let n = 300u16;
    let me = std::env::current_exe().unwrap();
    let cfg = SessionConfig::new(Target::Command(vec![
        "env".into(),
        format!("TMA_KVM_RUNNER_CHILD={n}").into(),
        me.into_os_string(),
        "--exact".into(),
        "runner_child".into(),
        "--test-threads=1".into(),
    ]));
    let out = tma_kvm::run(&cfg, |_| {}).unwrap();
    assert_eq!(tracefs_mounts(), before);
    assert!(out.child_status.unwrap().success());
    let e = RunnerCounts::expected(u32::from(n));
    let r = &out.report;
    assert_eq!(r.lost_records, 0);
    let ux = |name: &str| {
        r.userspace_exits
            .iter()
            .find(|u| u.name == name)
            .map_or(0, |u| u.count)
    };
    assert_eq!(ux("KVM_EXIT_IO"), e.io);
    assert_eq!(ux("KVM_EXIT_MMIO"), e.mmio);
    assert_eq!(ux("KVM_EXIT_HLT"), e.hlt);
    assert_eq!(r.totals.kvm_userspace_exit, e.io + e.mmio + e.hlt);
    assert_eq!(r.totals.kvm_pio, e.io);
    let pio = |port: u32, dir: &str| {
        r.pio
            .iter()
            .find(|p| p.port == port && p.direction == dir)
            .map_or(0, |p| p.count)
    };
    assert_eq!(pio(0x10, "out") + pio(0x12, "out"), e.io_out);
    assert_eq!(pio(0x11, "in"), e.io_in);
    let mmio = |kind: &str| {
        r.mmio
            .iter()
            .filter(|m| m.kind == kind && m.gpa == 0x20000)
            .map(|m| m.count)
            .sum::<u64>()
    };
    assert_eq!(mmio("write"), e.mmio_write);
    assert_eq!(mmio("read"), e.mmio_read);
    let msr = |acc: &str| {
        r.msr
            .iter()
            .filter(|m| m.msr == 0x174 && m.access == acc)
            .map(|m| m.count)
            .sum::<u64>()
    };
    assert_eq!(msr("read"), e.rdmsr);
    assert_eq!(msr("write"), e.wrmsr);
    assert_eq!(
        r.cpuid
            .iter()
            .find(|c| c.function == 0)
            .map_or(0, |c| c.count),
        e.cpuid
    );
    let backend = tma_kvm::detect_backend(Path::new("/"));
    if backend.emits_kvm_exit {
        // VMX/SVM host: every operation is an exit of its reason (at least; background exits
        // such as EXTERNAL_INTERRUPT or first-touch EPT/NPF come on top).
        let by = |names: &[&str]| {
            r.exits
                .iter()
                .filter(|x| names.contains(&x.name.as_str()))
                .map(|x| x.count)
                .sum::<u64>()
        };
        assert!(by(&["IO_INSTRUCTION", "io"]) >= e.io);
        assert!(by(&["HLT", "hlt"]) >= e.hlt);
        assert!(by(&["CPUID", "cpuid"]) >= e.cpuid);
        assert!(by(&["MSR_READ", "MSR_WRITE", "msr"]) >= e.rdmsr + e.wrmsr);
        assert!(by(&["EPT_MISCONFIG", "EPT_VIOLATION", "npf"]) >= e.mmio);
        assert!(r.kvm_exit_not_emitted.is_none());
    } else {
        assert_eq!(r.totals.kvm_exit, 0);
        let line = r.kvm_exit_not_emitted.as_deref().unwrap();
        assert!(
            line.starts_with(&format!("{} does not emit kvm_exit", backend.module)),
            "{line}"
        );
    }
}
