//! `tma stat -m/--metrics`, `-M` and `-B` on imported recordings: hand-computed values of
//! IPC, CPI, ILP and Bottleneck_Branching_Overhead on Ice Lake-SP and Sapphire Rapids
//! (synthetic counts, tests/fixtures/README.md), their JSON and CSV forms, the missing-event
//! text, and unknown names. Goldens: `UPDATE_GOLDEN=1 cargo test -p tma-cli --test stat_metrics`.

use std::process::Output;

use tma_testkit::{check_golden, fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
}

const ICX: &str = "tests/fixtures/import/icx-metrics-synthetic.csv";
const SPR: &str = "tests/fixtures/import/spr-metrics-synthetic.csv";

/// (file, cpu, IPC, CPI, ILP, Bottleneck_Branching_Overhead), computed by hand:
/// icx: 2.4e9 instructions / 1e9 cycles; 2.6e9 ops executed / 0.8e9 cycles with any;
///      100 * (3e8 branches + 2 * 2e7 calls + 1e7 nops) / 5e9 slots.
/// spr: 3e9 / 1e9; 3.6e9 / 0.9e9; 100 * (4e8 + 2 * 3e7 + 2e7) / 6e9.
const CASES: &[(&str, &str, f64, f64, f64, f64)] = &[
    (ICX, "icx", 2.4, 1.0 / 2.4, 3.25, 7.0),
    (SPR, "spr", 3.0, 1.0 / 3.0, 4.0, 8.0),
];

#[test]
fn text_metrics_and_bottleneck_costs() {
    for &(file, cpu, ..) in CASES {
        let out = ok(&TMA.run(&[
            "stat",
            "--import",
            file,
            "--cpu",
            cpu,
            "-m",
            "IPC,CPI,ILP",
            "-B",
        ]));
        assert!(out.contains("\nMetrics:\nThread\n  IPC "), "{out}");
        assert!(out.contains("  1. Branching_Overhead"), "{out}");
        check_golden(fixture(&format!("import/golden/{cpu}-metrics.txt")), &out);
    }
}

#[test]
fn json_and_csv_carry_the_metrics() {
    for &(file, cpu, ipc, cpi, ilp, branching) in CASES {
        let o = TMA.run(&[
            "stat",
            "--import",
            file,
            "--cpu",
            cpu,
            "-m",
            "IPC,CPI,ILP",
            "-B",
            "--json",
        ]);
        let j: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
        let ms = j["intervals"][0]["metrics"].as_array().unwrap();
        let get = |n: &str| ms.iter().find(|m| m["short_name"] == n).unwrap();
        let close = |m: &serde_json::Value, want: f64| {
            let v = m["value"].as_f64().unwrap();
            assert!(
                (v - want).abs() < 1e-9,
                "{cpu} {}: {v} != {want}",
                m["name"]
            );
        };
        close(get("IPC"), ipc);
        close(get("CPI"), cpi);
        close(get("ILP"), ilp);
        let b = get("Branching_Overhead");
        close(b, branching);
        assert_eq!(b["kind"], "bottleneck_cost");
        assert_eq!(b["rank"], 1);
        assert_eq!(get("IPC")["group"], "Thread");
        assert_eq!(get("IPC")["kind"], "metric");
        let mis = get("Mispredictions");
        assert_eq!(mis["status"], "missing_events");
        assert!(mis["missing_events"].as_array().unwrap().len() > 1);

        let out = ok(&TMA.run(&[
            "stat", "--import", file, "--cpu", cpu, "-m", "IPC", "-B", "--csv",
        ]));
        let ipc_row = out
            .lines()
            .find(|l| l.contains(",Info_Thread_IPC,"))
            .unwrap();
        assert!(ipc_row.contains(",Info_Thread_IPC,Thread,,"), "{ipc_row}");
        assert!(ipc_row.ends_with(",metric,"), "{ipc_row}");
        let row = out
            .lines()
            .find(|l| l.contains(",Bottleneck_Branching_Overhead,"))
            .unwrap();
        assert!(row.contains(",Bottleneck,1,"), "{row}");
        assert!(row.contains(",bottleneck_cost,"), "{row}");
    }
}

#[test]
fn without_metric_flags_there_are_no_metrics() {
    let out = ok(&TMA.run(&["stat", "--import", ICX, "--cpu", "icx"]));
    assert!(!out.contains("Metrics:"));
    let j = ok(&TMA.run(&["stat", "--import", ICX, "--cpu", "icx", "--json"]));
    assert!(!j.contains("\"metrics\""));
    let c = ok(&TMA.run(&["stat", "--import", ICX, "--cpu", "icx", "--csv"]));
    // The header and the four level-1 nodes; the rest are the counts (role `event`).
    assert_eq!(c.lines().filter(|l| !l.contains(",event,")).count(), 5);
    assert!(c.lines().any(|l| l.contains(",event,")), "{c}");
}

#[test]
fn default_set_names_missing_events_and_unknown_names_fail() {
    let out = ok(&TMA.run(&["stat", "--import", ICX, "--cpu", "icx", "-m"]));
    assert!(out.contains("  IPC "), "{out}");
    // MLP needs L1D_PEND_MISS events that the recording lacks.
    let mlp = out.lines().find(|l| l.starts_with("  MLP ")).unwrap();
    assert!(mlp.contains("[missing: L1D_PEND_MISS."), "{mlp}");
    assert!(out.contains("Metrics with missing events could not be computed"));

    let o = TMA.run(&["stat", "--import", ICX, "--cpu", "icx", "-m", "IPX"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown metric or metric group 'IPX'") && err.contains("IPC"),
        "{err}"
    );
}

#[test]
fn perf_group_names_select_levels_and_metrics() {
    let out = ok(&TMA.run(&[
        "stat",
        "--import",
        ICX,
        "--cpu",
        "icx",
        "-M",
        "TopdownL2,Summary",
    ]));
    assert!(out.contains("TMA levels 1-2"), "{out}");
    assert!(out.contains("  IPC "), "{out}");
    let o = TMA.run(&["stat", "--import", ICX, "--cpu", "icx", "-M", "NoSuchGroup"]);
    assert_eq!(o.status.code(), Some(2));
}

/// AMD Zen 4 metrics built from the core-event facts, on hand-chosen counts:
/// 1e9 cycles, 2e9 instructions, 2.4e9 ops, 4e8 branches (4e6 mispredicted), 2e9 of 2.5e9
/// dispatched ops from the op cache, 2e7 L1D fills, 6e6 L2 misses, 1e7 / 1e6 DTLB misses,
/// 2e5 ITLB misses, 4e6 instruction-cache misses.
#[test]
fn zen4_metrics_from_core_events() {
    let o = TMA.run(&[
        "stat",
        "--import",
        "tests/fixtures/import/zen4-metrics-synthetic.csv",
        "-m",
        "all",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    let ms = j["intervals"][0]["metrics"].as_array().unwrap();
    for (name, want) in [
        ("IPC", 2.0),
        ("CPI", 0.5),
        ("UopPI", 1.2),
        ("IpBranch", 5.0),
        ("Branch_Misprediction_Ratio", 1.0),
        ("IpMispredict", 500.0),
        ("L1I_MPKI", 2.0),
        ("Op_Cache_Coverage", 80.0),
        ("L1D_MPKI", 10.0),
        ("L2_MPKI", 3.0),
        ("DTLB_MPKI", 5.0),
        ("L2_DTLB_MPKI", 0.5),
        ("L2_ITLB_MPKI", 0.1),
    ] {
        let m = ms
            .iter()
            .find(|m| m["short_name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let v = m["value"].as_f64().unwrap();
        assert!((v - want).abs() < 1e-9, "{name}: {v} != {want}");
    }
    // The default set picks the AMD metrics it names.
    let text = ok(&TMA.run(&[
        "stat",
        "--import",
        "tests/fixtures/import/zen4-metrics-synthetic.csv",
        "-m",
    ]));
    for name in [
        "IPC",
        "Branch_Misprediction_Ratio",
        "Op_Cache_Coverage",
        "L1D_MPKI",
    ] {
        assert!(
            text.contains(&format!("  {name} ")),
            "{name} not in the default set: {text}"
        );
    }
}
