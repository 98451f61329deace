//! `tma demo --quick`: the structure of the walkthrough (each step prints the `tma` command it
//! runs, the before/after table is there) and the SHA-NI speedup. Steps whose sub-command
//! cannot run on this machine (no PMU for `tma stat`, ...) must degrade, not abort.

use tma_testkit::Tma;

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn demo(case: &str) -> String {
    let o = TMA
        .bare()
        .args(["demo", case, "--quick"])
        .output()
        .expect("run tma demo");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "tma demo {case} failed: {}\n{out}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn speedup(out: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with("speedup: "))
        .unwrap_or_else(|| panic!("no speedup line in:\n{out}"));
    line["speedup: ".len()..]
        .split('x')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn sha256_walkthrough() {
    let out = demo("sha256");
    for cmd in [
        "$ tma stat -- tma workload sha256 --impl portable",
        "$ tma locate -- tma workload sha256 --impl portable",
        "$ tma bench --preset sha",
    ] {
        assert!(out.contains(cmd), "missing `{cmd}` in:\n{out}");
    }
    for step in [
        "Step 1: measure",
        "Step 2: locate",
        "Step 3: apply the fix",
        "compare",
    ] {
        assert!(out.contains(step), "missing `{step}` in:\n{out}");
    }
    assert!(out.contains("Before/after"), "{out}");
    assert!(out.contains(" portable "), "{out}");
    let has_ni = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.contains(" sha_ni"))
        .unwrap_or(false);
    if !has_ni {
        eprintln!("skipped the speedup check: no SHA-NI on this CPU");
        return;
    }
    assert!(
        out.contains("$ tma stat -- tma workload sha256 --impl ni"),
        "{out}"
    );
    assert!(out.contains("SHA-NI, 1 stream"), "{out}");
    let s = speedup(&out);
    assert!(s > 1.0, "SHA-NI not faster than portable: {s}x\n{out}");
}

#[test]
fn dram_walkthrough() {
    let out = demo("dram");
    for cmd in [
        "$ tma stat -- tma workload dram --size 128M",
        "$ tma locate -- tma workload dram",
        "--prefetch",
    ] {
        assert!(out.contains(cmd), "missing `{cmd}` in:\n{out}");
    }
    assert!(out.contains("Before/after"), "{out}");
    assert!(
        out.contains("no prefetch") && out.contains("cycles/access"),
        "{out}"
    );
    let s = speedup(&out);
    assert!(s > 1.0, "prefetch not faster: {s}x\n{out}");
}

/// The THP case: each step's command, the huge-page share of both runs, and a real speed-up
/// where THP can be had (the best of up to three quick walkthroughs, against a loaded machine).
#[test]
fn thp_walkthrough() {
    let mut best = 0f64;
    for _ in 0..3 {
        let out = demo("thp");
        for cmd in [
            "$ tma stat -- tma workload matmul --m 16 --thp off",
            "$ tma locate",
            "-- tma workload matmul --m 16 --thp off --no-calibrate",
            "$ tma stat -- tma workload matmul --m 16 --thp on",
        ] {
            assert!(out.contains(cmd), "missing `{cmd}` in:\n{out}");
        }
        assert!(out.contains("on huge pages"), "{out}");
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !(mode.contains("[madvise]") || mode.contains("[always]")) {
            eprintln!("skipped the speed-up check: THP mode is {:?}", mode.trim());
            return;
        }
        let row = |name: &str| {
            out.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no `{name}` row in:\n{out}"))
                .to_string()
        };
        // The "on huge pages" column: 0% with MADV_NOHUGEPAGE, most with MADV_HUGEPAGE.
        let share = |name: &str| -> f64 {
            let r = row(name);
            let cell = r
                .split_whitespace()
                .find(|w| w.ends_with('%'))
                .unwrap_or("");
            cell.trim_end_matches('%')
                .parse()
                .unwrap_or_else(|_| panic!("no share in `{r}`"))
        };
        assert_eq!(share("--thp off"), 0.0, "{out}");
        assert!(share("--thp on") > 50.0, "{out}");
        best = best.max(speedup(&out));
        if best >= 1.15 {
            return;
        }
    }
    panic!("huge pages gave only {best:.2}x");
}
