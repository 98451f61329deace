//! `tma workload` end to end: JSON schema, agreement of the SHA-256 implementations, the
//! DRAM workload's prefetch effect (loosely: a timing ratio, not an absolute time), and
//! bad-input errors.

use tma_testkit::Tma;

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn tma(args: &[&str]) -> (i32, String, String) {
    let o = TMA.bare().args(args).output().expect("run tma");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = tma(args);
    assert_eq!(code, 0, "tma {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}\n{out}"))
}

fn sha_ni() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.contains(" sha_ni"))
        .unwrap_or(false)
}

#[test]
fn sha256_workload_json_and_impls_agree() {
    let mut digests = Vec::new();
    let mut impls = vec!["portable"];
    if sha_ni() {
        impls.push("ni");
    } else {
        eprintln!("skipped the ni case: no SHA-NI on this CPU");
    }
    for imp in impls {
        for streams in ["1", "3"] {
            let j = json(&[
                "workload",
                "sha256",
                "--impl",
                imp,
                "--size",
                "4K",
                "--iters",
                "3",
                "--streams",
                streams,
                "--json",
            ]);
            assert_eq!(j["schema"], "tma.workload");
            assert_eq!(j["schema_version"], 1);
            assert_eq!(j["name"], "sha256");
            assert_eq!(j["impl"], imp);
            let s = &j["sha256"];
            let k: u64 = streams.parse().unwrap();
            assert_eq!(s["bytes"], 4096 * 3 * k);
            assert!(s["ns_per_byte"].as_f64().unwrap() > 0.0);
            assert!(s["gb_per_second"].as_f64().unwrap() > 0.0);
            assert!(j["seconds"].as_f64().unwrap() > 0.0);
            if let Some(c) = s["cycles_per_byte"].as_f64() {
                assert!(c > 0.0);
                assert!(j["clock"]["core_hz"].as_f64().unwrap() > 0.5e9);
            }
            digests.push(s["digest"].as_str().unwrap().to_string());
        }
    }
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "{digests:?}");
}

#[test]
fn sha256_workload_text_and_report_file() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let (code, out, err) = tma(&[
        "workload",
        "sha256",
        "--impl",
        "portable",
        "--size",
        "1K",
        "--iters",
        "2",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("sha256 workload: impl portable"), "{out}");
    assert!(out.contains("GB/s") && out.contains("ns/byte") && out.contains("cycles/byte"));
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(j["schema"], "tma.workload");
    assert_eq!(j["sha256"]["bytes"], 2048);
}

#[test]
fn dram_prefetch_is_faster() {
    // 128 MiB is four times this machine's 32 MiB L3: the chase is DRAM-latency bound. Even in
    // an unoptimised build the prefetch mode is several times faster (about 10x measured);
    // the assertion only asks for 1.5x so a busy machine does not make it flaky.
    let run = |prefetch: bool| {
        let mut args = vec![
            "workload",
            "dram",
            "--size",
            "128M",
            "--accesses",
            "1000000",
            "--seed",
            "3",
            "--no-calibrate",
            "--json",
        ];
        if prefetch {
            args.push("--prefetch");
        }
        json(&args)
    };
    let plain = run(false);
    let pf = run(true);
    assert_eq!(plain["name"], "dram");
    assert_eq!(plain["impl"], "no-prefetch");
    assert_eq!(pf["impl"], "prefetch");
    assert_eq!(plain["dram"]["accesses"], 1_000_000);
    assert_eq!(plain["dram"]["bytes"], 128u64 << 20);
    assert_eq!(
        plain["dram"]["checksum"], pf["dram"]["checksum"],
        "same chain, same visits"
    );
    let a = plain["dram"]["ns_per_access"].as_f64().unwrap();
    let b = pf["dram"]["ns_per_access"].as_f64().unwrap();
    eprintln!(
        "dram 128 MiB: {a:.1} ns/access without prefetch, {b:.1} with ({:.1}x)",
        a / b
    );
    assert!(
        a / b >= 1.5,
        "prefetch speedup only {:.2}x ({a} vs {b} ns)",
        a / b
    );
}

#[test]
fn bad_input_is_a_one_line_error() {
    for args in [
        &["workload", "dram", "--size", "12X"][..],
        &["workload", "sha256", "--impl", "bogus"],
        &["workload", "dram", "--size", "16"],
        &["workload", "dram", "--size", "1K", "--distance", "0"],
        &["workload", "sha256", "--streams", "0"],
    ] {
        let (code, out, err) = tma(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed to stdout: {out}");
        assert!(!err.trim().is_empty());
    }
    let (_, _, err) = tma(&["workload", "sha256", "--impl", "bogus"]);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("portable, ni, auto"), "{err}");
}

/// A workload with nothing to do has no throughput to print: refused, exit 2.
#[test]
fn empty_workloads_are_refused() {
    for args in [
        &["workload", "sha256", "--iters", "0"][..],
        &["workload", "sha256", "--size", "0"][..],
        &["workload", "dram", "--accesses", "0", "--size", "1M"][..],
    ] {
        let o = TMA.bare().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("at least 1"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// `tma workload matmul`: the JSON document, the huge-page backing read back from smaps, the
/// result check; a zero dimension is refused.
#[test]
fn matmul_workload_json_and_refusals() {
    let v = json(&[
        "workload",
        "matmul",
        "--m",
        "2",
        "--k",
        "256",
        "--thp",
        "off",
        "--json",
        "--no-calibrate",
    ]);
    assert_eq!(v["name"], "matmul");
    assert_eq!(v["impl"], "thp-off");
    let m = &v["matmul"];
    assert_eq!(
        (m["m"].as_u64(), m["k"].as_u64(), m["n"].as_u64()),
        (Some(2), Some(256), Some(1000))
    );
    assert_eq!(m["flops"], 2 * 2 * 256 * 1000);
    assert_eq!(m["huge_pages"]["huge_bytes"], 0, "{m}");
    assert!(m["check"]["worst_error_ratio"].as_f64().unwrap() < 1.0);
    let (code, out, _) = tma(&[
        "workload",
        "matmul",
        "--m",
        "1",
        "--k",
        "8",
        "--thp",
        "on",
        "--no-calibrate",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("huge pages") && out.contains("THP mode"),
        "{out}"
    );
    for args in [
        &["workload", "matmul", "--n", "0"][..],
        &["workload", "matmul", "--thp", "maybe"][..],
    ] {
        let (code, out, err) = tma(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed to stdout: {out}");
        assert!(
            err.contains("--n") || err.contains("'maybe'"),
            "{args:?}: {err}"
        );
    }
    let (_, _, err) = tma(&["workload", "matmul", "--n", "0"]);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
