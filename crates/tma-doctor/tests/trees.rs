//! Doctor checks against the fake /proc + /sys trees in tests/fixtures/doctor, and --fix /
//! --restore against temporary copies of them (never the real system).

use std::path::{Path, PathBuf};

use tma_doctor::{CpuidFacts, Roots, Status};

fn tree(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/doctor")
        .join(name)
}

fn status(r: &tma_doctor::DoctorReport, id: &str) -> Status {
    r.get(id).unwrap_or_else(|| panic!("no check {id}")).status
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

#[test]
fn intel_baremetal_all_ok() {
    let cpuid = CpuidFacts {
        vendor: Some("GenuineIntel".into()),
        perfmon_version: Some(5),
        gp_counters: Some(8),
        fixed_counters: Some(4),
        tsc_mhz: None,
    };
    let r = tma_doctor::run_checks(&Roots::under(&tree("intel-baremetal")), &cpuid);
    for c in &r.checks {
        assert_eq!(c.status, Status::Ok, "{}: {}", c.id, c.summary);
    }
    assert!(r
        .get("counters")
        .unwrap()
        .summary
        .contains("8 general-purpose + 4 fixed"));
    assert!(r.get("tsc").unwrap().summary.contains("nominal 2000 MHz"));
    assert_eq!(r.checks.len(), 17);
}

#[test]
fn this_vm_has_no_pmu_because_of_the_hypervisor() {
    let r = tma_doctor::run_checks(&Roots::under(&tree("this-vm")), &CpuidFacts::default());
    let pmu = r.get("pmu").unwrap();
    assert_eq!(pmu.status, Status::Problem);
    assert!(pmu.summary.contains("no hardware PMU"));
    assert!(pmu.explanation.contains("hypervisor"));
    assert_eq!(status(&r, "counters"), Status::Problem);
    assert_eq!(status(&r, "rdpmc"), Status::Warning);
    assert_eq!(status(&r, "hypervisor"), Status::Warning);
    // Recorded as root: CapEff has CAP_SYS_ADMIN and CAP_PERFMON, so paranoid=2 does not matter.
    let p = r.get("paranoid").unwrap();
    assert_eq!(p.status, Status::Ok, "{}", p.summary);
    assert!(p.summary.contains("perf_event_paranoid=2"));
    assert!(r.get("smt").unwrap().summary.contains("SMT off"));
    assert!(r.get("cstate").unwrap().summary.contains("haltpoll"));
    assert!(r.get("thp").unwrap().summary.contains("madvise"));
    assert!(r.get("tsc").unwrap().summary.contains("constant_tsc=yes"));
    // An AMD Zen 5: the Intel-only caveats do not apply.
    assert_eq!(
        r.get("smt_level1").unwrap().summary,
        "AMD Zen 5 (zen5): level 1 is counted per thread, with or without SMT"
    );
    assert_eq!(status(&r, "topdown_group"), Status::Ok);
    // Nor on an AMD CPU the catalog does not know (a Zen 3: family 25).
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("zen3");
    copy_dir(&tree("this-vm"), &base);
    let p = base.join("proc/cpuinfo");
    let info = std::fs::read_to_string(&p)
        .unwrap()
        .replace("cpu family\t: 26", "cpu family\t: 25")
        .replace("model\t\t: 2\n", "model\t\t: 1\n");
    std::fs::write(&p, info).unwrap();
    let z3 = tma_doctor::run_checks(&Roots::under(&base), &CpuidFacts::default());
    assert_eq!(
        z3.get("smt_level1").unwrap().summary,
        "AMD CPU: dispatch slots are counted per thread, with or without SMT"
    );
    assert!(z3
        .get("topdown_group")
        .unwrap()
        .summary
        .starts_with("AMD CPU: no topdown metric events"));
    assert_eq!(r.worst(), Status::Problem);
}

#[test]
fn tdx_guest_detected_and_thp_is_crucial() {
    let r = tma_doctor::run_checks(&Roots::under(&tree("tdx-guest")), &CpuidFacts::default());
    let h = r.get("hypervisor").unwrap();
    assert!(h.summary.contains("TDX"), "{}", h.summary);
    let thp = r.get("thp").unwrap();
    assert_eq!(thp.status, Status::Problem);
    assert!(thp.explanation.contains("crucial"));
    assert_eq!(
        thp.fix.as_deref(),
        Some("echo always > /sys/kernel/mm/transparent_hugepage/enabled")
    );
    assert_eq!(status(&r, "paranoid"), Status::Warning);
    assert_eq!(status(&r, "pmu"), Status::Ok);
}

#[test]
fn misconfigured_box_reports_each_problem_with_a_fix() {
    let r = tma_doctor::run_checks(
        &Roots::under(&tree("misconfigured")),
        &CpuidFacts::default(),
    );
    assert_eq!(status(&r, "paranoid"), Status::Problem);
    for id in [
        "rdpmc",
        "nmi_watchdog",
        "hybrid",
        "governor",
        "boost",
        "cstate",
        "thp",
    ] {
        let c = r.get(id).unwrap();
        assert_eq!(c.status, Status::Warning, "{id}: {}", c.summary);
        assert!(c.fix.is_some(), "{id} has no fix");
    }
    assert_eq!(
        r.get("hybrid").unwrap().fix.as_deref(),
        Some("taskset -c 0-1 <command>")
    );
    assert!(r
        .get("isolation")
        .unwrap()
        .summary
        .contains("isolated CPUs: 3"));
    assert!(r.get("cstate").unwrap().summary.contains("C10"));
}

#[test]
fn fix_then_restore_roundtrip_on_a_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("tree");
    copy_dir(&tree("misconfigured"), &base);
    let roots = Roots::under(&base);
    let before = tma_doctor::run_checks(&roots, &CpuidFacts::default());
    let actions = tma_doctor::planned_fixes(&roots, &before);
    let paths: Vec<&str> = actions.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "sys/kernel/perf_event_paranoid",
            "sys/kernel/nmi_watchdog",
            "kernel/mm/transparent_hugepage/enabled",
            "devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "devices/system/cpu/cpu1/cpufreq/scaling_governor",
            "devices/system/cpu/cpu2/cpufreq/scaling_governor",
            "devices/system/cpu/cpu3/cpufreq/scaling_governor",
        ]
    );
    let state = tmp.path().join("state.json");
    let mut log = Vec::new();
    let s = tma_doctor::apply_fixes(&roots, &actions, &state, &mut log).unwrap();
    let log = String::from_utf8(log).unwrap();
    assert!(
        log.contains("echo 0 > /proc/sys/kernel/perf_event_paranoid"),
        "{log}"
    );
    assert!(
        log.contains("echo performance > /sys/devices/system/cpu/cpu3/cpufreq/scaling_governor")
    );
    assert_eq!(s.values[2].previous, "never");
    let after = tma_doctor::run_checks(&roots, &CpuidFacts::default());
    for id in ["paranoid", "nmi_watchdog", "governor", "thp"] {
        assert_eq!(status(&after, id), Status::Ok, "{id} after fix");
    }
    let mut log2 = Vec::new();
    tma_doctor::restore(&roots, &state, &mut log2).unwrap();
    let rd = |rel: &str| std::fs::read_to_string(base.join(rel)).unwrap();
    assert_eq!(rd("proc/sys/kernel/perf_event_paranoid"), "3\n");
    assert_eq!(rd("proc/sys/kernel/nmi_watchdog"), "1\n");
    assert_eq!(
        rd("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"),
        "powersave\n"
    );
    assert_eq!(rd("sys/kernel/mm/transparent_hugepage/enabled"), "never\n");
    let restored = tma_doctor::run_checks(&roots, &CpuidFacts::default());
    assert_eq!(status(&restored, "paranoid"), Status::Problem);
    assert_eq!(status(&restored, "governor"), Status::Warning);
}

#[test]
fn fix_failure_rolls_back_and_bad_state_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("tree");
    copy_dir(&tree("misconfigured"), &base);
    let roots = Roots::under(&base);
    let before = tma_doctor::run_checks(&roots, &CpuidFacts::default());
    let actions = tma_doctor::planned_fixes(&roots, &before);
    // Make the last target unwritable by replacing the file with a directory.
    let last = base.join("sys").join(&actions.last().unwrap().path);
    std::fs::remove_file(&last).unwrap();
    std::fs::create_dir(&last).unwrap();
    let state = tmp.path().join("state.json");
    assert!(tma_doctor::apply_fixes(&roots, &actions, &state, &mut Vec::new()).is_err());
    let rd = |rel: &str| std::fs::read_to_string(base.join(rel)).unwrap();
    assert_eq!(
        rd("proc/sys/kernel/perf_event_paranoid"),
        "3\n",
        "rolled back"
    );
    assert_eq!(
        rd("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "powersave\n"
    );
    // State files are validated.
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, r#"{"schema":"tma.doctor.state","schema_version":1,"values":[{"root":"proc","path":"../../etc/passwd","previous":"x","new":"y"}]}"#).unwrap();
    let e = tma_doctor::restore(&roots, &bad, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unexpected entry"), "{e}");
    std::fs::write(&bad, "not json").unwrap();
    assert!(tma_doctor::restore(&roots, &bad, &mut Vec::new()).is_err());
    assert!(tma_doctor::restore(&roots, &tmp.path().join("missing"), &mut Vec::new()).is_err());
}

#[test]
fn sev_guest_detected_from_cpuinfo_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("sev");
    copy_dir(&tree("this-vm"), &base);
    let p = base.join("proc/cpuinfo");
    let info = std::fs::read_to_string(&p)
        .unwrap()
        .replace(" hypervisor ", " hypervisor sev sev_es ");
    std::fs::write(&p, info).unwrap();
    let r = tma_doctor::run_checks(&Roots::under(&base), &CpuidFacts::default());
    let h = r.get("hypervisor").unwrap();
    assert!(
        h.summary
            .contains("AMD SEV confidential guest (sev, sev_es)"),
        "{}",
        h.summary
    );
    // The live TSC measurement, when given, is preferred over the model name.
    let r = tma_doctor::run_checks(
        &Roots::under(&base),
        &CpuidFacts {
            tsc_mhz: Some(2596.4),
            ..Default::default()
        },
    );
    assert!(r
        .get("tsc")
        .unwrap()
        .summary
        .contains("TSC measured 2596 MHz"));
}

fn root(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/roots")
        .join(name)
}

/// The kernel caveats of group sampling, on fake roots where each applies and where it does
/// not: a Skylake-SP on Linux 5.15 with SMT on and the NMI watchdog on (all apply), an Ice
/// Lake-SP on Linux 6.12 with the topdown events exposed (none apply), and a copy of it whose
/// kernel exposes no topdown events.
#[test]
fn group_sampling_caveats_apply_where_they_should() {
    let skx = tma_doctor::run_checks(&Roots::under(&root("skx-smt-5.15")), &CpuidFacts::default());
    let c = skx.get("sample_read").unwrap();
    assert_eq!(c.status, Status::Warning, "{}", c.summary);
    assert!(
        c.summary
            .starts_with("Linux 5.15.0-91-generic is older than 6.12"),
        "{}",
        c.summary
    );
    assert!(c.explanation.contains("first thread"), "{}", c.explanation);
    let c = skx.get("smt_level1").unwrap();
    assert_eq!(c.status, Status::Warning, "{}", c.summary);
    assert_eq!(
        c.summary,
        "Skylake-SP (skx) with SMT on: per-thread level 1 is meaningless"
    );
    assert_eq!(
        c.fix.as_deref(),
        Some("echo off > /sys/devices/system/cpu/smt/control")
    );
    assert_eq!(status(&skx, "nmi_watchdog"), Status::Warning);
    let c = skx.get("topdown_group").unwrap();
    assert_eq!(c.status, Status::Ok, "{}", c.summary);
    assert!(
        c.summary.contains("no topdown metric events"),
        "{}",
        c.summary
    );

    let icx = tma_doctor::run_checks(&Roots::under(&root("icx-6.12")), &CpuidFacts::default());
    for id in ["sample_read", "smt_level1", "nmi_watchdog", "topdown_group"] {
        let c = icx.get(id).unwrap();
        assert_eq!(c.status, Status::Ok, "{id}: {}", c.summary);
    }
    assert!(icx
        .get("topdown_group")
        .unwrap()
        .summary
        .contains("read zero outside a slots-led group"));
    assert!(icx
        .get("smt_level1")
        .unwrap()
        .summary
        .contains("counted per thread"));

    // The same Ice Lake whose kernel (or hypervisor) exposes no topdown metric events.
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("icx");
    copy_dir(&root("icx-6.12"), &base);
    let ev = base.join("sys/bus/event_source/devices/cpu/events");
    std::fs::remove_file(ev.join("topdown-be-bound")).unwrap();
    std::fs::remove_file(ev.join("slots")).unwrap();
    let r = tma_doctor::run_checks(&Roots::under(&base), &CpuidFacts::default());
    let c = r.get("topdown_group").unwrap();
    assert_eq!(c.status, Status::Warning, "{}", c.summary);
    assert!(
        c.summary
            .contains("exposes no slots, topdown-be-bound on `cpu`"),
        "{}",
        c.summary
    );
    // And a kernel release that names no version is said to be unknown.
    std::fs::write(base.join("proc/sys/kernel/osrelease"), "custom\n").unwrap();
    let r = tma_doctor::run_checks(&Roots::under(&base), &CpuidFacts::default());
    assert_eq!(status(&r, "sample_read"), Status::Warning);
    assert!(r.get("sample_read").unwrap().summary.contains("unknown"));
}

/// `tma locate --tree` says the caveats that are not ok for the model it uses.
#[test]
fn tree_caveats_are_the_failing_ones() {
    let skx_root = Roots::under(&root("skx-smt-5.15"));
    let model = tma_doctor::cpu_model(&skx_root);
    assert_eq!(model.map(|m| m.key), Some("skx"));
    let ids: Vec<&str> = tma_doctor::tree_caveats(&skx_root, model)
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["sample_read", "nmi_watchdog", "smt_level1"]);
    let icx_root = Roots::under(&root("icx-6.12"));
    let model = tma_doctor::cpu_model(&icx_root);
    assert_eq!(model.map(|m| m.key), Some("icx"));
    assert!(tma_doctor::tree_caveats(&icx_root, model).is_empty());
    // The model the run uses decides: Skylake tables on the Ice Lake root's SMT.
    let skl = tma_catalog::by_name("skl").ok();
    let ids: Vec<&str> = tma_doctor::tree_caveats(&icx_root, skl)
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["smt_level1"]);
    assert_eq!(
        tma_doctor::kernel_version("6.11.0-1-amd64\n"),
        Some((6, 11))
    );
    assert_eq!(tma_doctor::kernel_version("garbage"), None);
}
