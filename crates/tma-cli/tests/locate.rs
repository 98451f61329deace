//! End-to-end tests of `tma locate`: live cpu-clock sampling of a small C workload, the
//! recorded perf.data fixture against `perf report`, pprof, folded stacks, bad input.
// unsafe allowed: kill(2) sends SIGINT to a spawned tma.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tma_testkit::{can_sample, fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// `tma` with `args` on this host (live sampling needs its PMU or cpu-clock).
fn run(args: &[&str]) -> Output {
    TMA.bare().args(args).output().expect("run tma")
}

/// locate/chase.c built with the system C compiler, or skip.
fn build_chase(dir: &Path) -> Option<PathBuf> {
    tma_testkit::build_c(&fixture("locate/chase.c"), dir, "-O1")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}\nstderr: {}", stdout(o), stderr(o)))
}

#[test]
fn live_cpu_clock_finds_the_hot_function_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_chase(dir.path()) else {
        return;
    };
    let exe = exe.to_str().unwrap();
    // 16 MiB of random cycle, 3M dependent loads, then exit status 3 (forwarded).
    // (-o: the workload prints to stdout too.)
    let out = dir.path().join("report.json");
    let o = run(&[
        "locate",
        "--json",
        "-o",
        out.to_str().unwrap(),
        "--",
        exe,
        "16",
        "3000000",
        "3",
    ]);
    if !can_sample(&o) {
        return;
    }
    assert_eq!(
        o.status.code(),
        Some(3),
        "exit status forwarded; stderr: {}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "tma.locate");
    assert_eq!(v["schema_version"], 1);
    let samples = v["counts"]["samples"].as_u64().unwrap();
    assert!(samples > 100, "too few samples: {samples}");
    let top = &v["functions"][0];
    assert_eq!(top["function"], "chase", "{}", stdout(&o));
    assert_eq!(top["module"], "chase");
    assert!(top["percent"].as_f64().unwrap() > 40.0);
    let ann = &v["annotation"];
    assert_eq!(ann["function"], "chase");
    let insns = ann["instructions"].as_array().unwrap();
    // The hot load: the memory read on source line 27 (`p = next[p]`).
    let load = insns
        .iter()
        .position(|i| i["line"] == 27 && i["text"].as_str().unwrap().contains('['))
        .expect("a load on line 27");
    let hottest = insns.iter().position(|i| i["hottest"] == true).unwrap();
    assert!(
        hottest == load || hottest == load + 1,
        "hottest instruction {} is not the load {} or the one after it (skid)",
        insns[hottest]["text"],
        insns[load]["text"]
    );
    // The no-PMU explanation is part of the report.
    let notes = v["notes"].to_string();
    if !Path::new("/sys/bus/event_source/devices/cpu").exists() {
        assert!(notes.contains("no hardware PMU"), "{notes}");
        assert!(notes.contains("skid"), "{notes}");
    }
}

#[test]
fn record_then_import_and_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_chase(dir.path()) else {
        return;
    };
    let data = dir.path().join("out.perf.data");
    let txt = dir.path().join("out.txt");
    let o = run(&[
        "locate",
        "-g",
        "--record",
        data.to_str().unwrap(),
        "-o",
        txt.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "16",
        "2000000",
    ]);
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let live = std::fs::read_to_string(&txt).unwrap();
    assert!(live.contains("=>"), "hottest instruction marked:\n{live}");
    let o = run(&["locate", "--import", data.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["event"], "cpu-clock");
    assert_eq!(v["functions"][0]["function"], "chase");
    // perf itself reads the file we wrote.
    if let Ok(p) = Command::new("perf")
        .args(["report", "--stdio", "--sort", "symbol", "-i"])
        .arg(&data)
        .output()
    {
        if p.status.success() {
            assert!(String::from_utf8_lossy(&p.stdout).contains("chase"));
        } else {
            panic!(
                "perf report rejected our file: {}",
                String::from_utf8_lossy(&p.stderr)
            );
        }
    }
}

/// The first symbol of `perf report --stdio --sort symbol` output.
fn perf_report_top(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.starts_with('#') && l.contains('%'))
        .expect("a data line");
    let after = line.split("] ").nth(1).expect("[.] marker");
    after.split_whitespace().next().unwrap().to_string()
}

#[test]
fn imported_fixture_matches_perf_report() {
    let f = fixture("locate");
    let expected =
        perf_report_top(&std::fs::read_to_string(f.join("chase.perf-report.txt")).unwrap());
    assert_eq!(expected, "chase");
    let o = run(&[
        "locate",
        "--import",
        f.join("chase.perf.data").to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["functions"][0]["function"], expected.as_str());
    // perf report: 945 samples, 91.53% chase, 5.71% main.
    assert_eq!(v["counts"]["samples"], 945);
    let pct = v["functions"][0]["percent"].as_f64().unwrap();
    assert!((pct - 91.53).abs() < 0.01, "{pct}");
    let main = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function"] == "main")
        .unwrap();
    assert!((main["percent"].as_f64().unwrap() - 5.71).abs() < 0.01);
}

/// Golden text report of the fixture. Source-line rows are left out of the comparison: their
/// text depends on where the checkout lives (DWARF holds the absolute source path).
#[test]
fn text_report_golden() {
    let f = fixture("locate");
    let o = run(&[
        "locate",
        "--import",
        f.join("chase.perf.data").to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let strip = |t: &str| -> String {
        t.lines()
            .filter(|l| !l.contains("chase.c:"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let golden = std::fs::read_to_string(f.join("chase.report.txt")).unwrap();
    assert_eq!(strip(&stdout(&o)), strip(&golden));
}

#[test]
fn folded_stacks_from_call_graph_fixture() {
    let f = fixture("locate");
    let o = run(&[
        "locate",
        "--import",
        f.join("chase.perf.data").to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
        "--folded",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let mut total = 0u64;
    let mut chase_leaf = 0u64;
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("stack count");
        let n: u64 = n.parse().unwrap();
        total += n;
        if stack.ends_with(";chase") || stack == "chase" {
            chase_leaf += n;
            assert!(stack.contains(';'), "call chain kept: {stack}");
        }
    }
    assert_eq!(total, 945);
    assert_eq!(chase_leaf, 865);
}

#[test]
fn pprof_output_decodes_and_go_pprof_reads_it() {
    let f = fixture("locate");
    let dir = tempfile::tempdir().unwrap();
    let pb = dir.path().join("p.pb.gz");
    let o = run(&[
        "locate",
        "--import",
        f.join("chase.perf.data").to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
        "--pprof",
        pb.to_str().unwrap(),
        "-o",
        dir.path().join("r.txt").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&pb).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip");
    let p = tma_profile::pprof::decode(&bytes).unwrap();
    assert_eq!(p.string_table[0], "");
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, 945);
    // Flat count of the leaf function named "chase".
    let chase_fn = p
        .function
        .iter()
        .find(|fun| p.string_table[fun.name as usize] == "chase")
        .unwrap()
        .id;
    let leaf_is_chase = |s: &tma_profile::pprof::Sample| {
        let loc = p
            .location
            .iter()
            .find(|l| l.id == s.location_id[0])
            .unwrap();
        loc.line[0].function_id == chase_fn
    };
    let flat: i64 = p
        .sample
        .iter()
        .filter(|s| leaf_is_chase(s))
        .map(|s| s.value[0])
        .sum();
    assert_eq!(flat, 865);

    let go = Path::new("/usr/local/go/bin/go");
    if !go.exists() {
        eprintln!("skipped go tool pprof: Go not installed");
        return;
    }
    // The first `go tool pprof` builds the tool (minutes on a busy machine): give it a
    // minute, and skip with a reason rather than slow the suite down.
    let out_path = dir.path().join("top.txt");
    let mut child = Command::new(go)
        .args(["tool", "pprof", "-top"])
        .arg(&pb)
        .env("PPROF_TMPDIR", dir.path())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("skipped go tool pprof: still building the tool after 60 s");
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: Vec::new(),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        first.trim_end().ends_with("chase"),
        "go tool pprof -top:\n{text}"
    );
}

#[test]
fn stripped_binary_shows_addresses_and_a_note() {
    let f = fixture("locate");
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("chase");
    std::fs::copy(f.join("chase"), &stripped).unwrap();
    match Command::new("strip").arg(&stripped).status() {
        Ok(s) if s.success() => {}
        _ => {
            eprintln!("skipped: no strip(1)");
            return;
        }
    }
    let o = run(&[
        "locate",
        "--import",
        f.join("chase.perf.data").to_str().unwrap(),
        "--symdir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("no symbol table (stripped)"), "{text}");
    // The hot address of chase (0x119a, the instruction after the load) is shown by address.
    let first_row = text.lines().nth(3).unwrap();
    assert!(first_row.contains("[unknown] 0x119a"), "{text}");
}

#[test]
fn truncated_garbage_and_old_perf_data_are_clear_errors() {
    let f = fixture("locate");
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(f.join("chase.perf.data")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("truncated", full[..full.len() / 2].to_vec(), "truncated"),
        (
            "garbage",
            b"this is not a perf.data file at all".to_vec(),
            "not a perf.data file",
        ),
        (
            "v1",
            b"PERFFILE\x68\0\0\0\0\0\0\0".to_vec(),
            "unsupported perf.data version",
        ),
        ("empty", Vec::new(), "not a perf.data file"),
    ];
    for (name, bytes, msg) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = dir.path().join(format!("{name}.txt"));
        let o = run(&[
            "locate",
            "--import",
            p.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.starts_with("tma: error:") && e.contains(msg),
            "{name}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{name}: one line: {e}");
        assert!(!out.exists(), "{name}: no output file on error");
    }
    // Truncated inside the records (header intact): cut the data section short but keep the
    // header consistent by reading only a prefix is impossible, so flip bytes in the data
    // section instead: the file must still not crash the reader.
    let mut corrupt = full.clone();
    for b in corrupt.iter_mut().skip(2000).take(4000) {
        *b ^= 0x5a;
    }
    let p = dir.path().join("corrupt");
    std::fs::write(&p, corrupt).unwrap();
    let o = run(&["locate", "--import", p.to_str().unwrap()]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(2)),
        "no panic: {}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    // Random byte damage all over the file (50 bytes set to random values, from proptest with
    // a fixed seed; a failure is shrunk to fewer, smaller changes): a result or one error
    // line, never a panic message.
    let damage = prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 50);
    let config = Config {
        cases: 12,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let result = runner.run(&damage, |changes| {
        let mut b = full.clone();
        for (at, byte) in &changes {
            let j = at.index(b.len());
            b[j] = *byte;
        }
        std::fs::write(&p, &b).unwrap();
        let o = run(&["locate", "--import", p.to_str().unwrap()]);
        let e = stderr(&o);
        prop_assert!(matches!(o.status.code(), Some(0) | Some(2)), "{}", e);
        prop_assert!(!e.contains("panicked") && e.lines().count() <= 1, "{}", e);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn vanished_pid_and_bad_rates_are_clear_errors() {
    let o = run(&["locate", "-p", "999999999", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));

    let o = run(&[
        "locate",
        "-e",
        "cpu-clock",
        "--freq",
        "100000000",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("perf_event_max_sample_rate"),
        "{}",
        stderr(&o)
    );

    let o = run(&["locate", "--syntax", "klingon", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));

    let o = run(&["locate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nothing to sample"));
}

#[test]
fn attached_process_that_exits_ends_the_session() {
    let mut child = Command::new("sleep").arg("0.5").spawn().unwrap();
    let pid = child.id().to_string();
    let o = run(&[
        "locate",
        "-e",
        "cpu-clock",
        "-p",
        &pid,
        "--duration",
        "20",
        "--json",
    ]);
    let _ = child.wait();
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert!(v["notes"].to_string().contains("exited"), "{}", stdout(&o));
}

#[test]
fn node_event_from_catalog_falls_back_to_cpu_clock_without_pmu() {
    if Path::new("/sys/bus/event_source/devices/cpu").exists() {
        eprintln!("skipped: this machine has a PMU (the test checks the fallback)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = run(&[
        "locate",
        "--cpu",
        "spr",
        "--node",
        "L1_Bound",
        "--json",
        "-o",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["event"], "cpu-clock");
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("instead of MEM_LOAD_RETIRED.L1_HIT:pp"),
        "{notes}"
    );
    // Unknown nodes and nodes without a locate-with event are errors.
    let o = run(&[
        "locate",
        "--cpu",
        "spr",
        "--node",
        "No_Such_Node",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown node"));
}

#[test]
fn attach_to_running_process_uses_its_existing_mappings() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_chase(dir.path()) else {
        return;
    };
    // Small array (quick set-up), effectively endless chase.
    let mut child = Command::new(&exe)
        .args(["1", "100000000000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = dir.path().join("r.json");
    let pid = child.id().to_string();
    let o = run(&[
        "locate",
        "-e",
        "cpu-clock",
        "-p",
        &pid,
        "--duration",
        "1",
        "--json",
        "-o",
        out.to_str().unwrap(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(v["counts"]["samples"].as_u64().unwrap() > 50, "{v}");
    // The binary was mapped before sampling began: only /proc/PID/maps tells where.
    assert_eq!(v["functions"][0]["function"], "chase", "{v}");
}

#[test]
fn import_picks_one_event_of_a_multi_event_file() {
    let f = fixture("locate");
    let data = f.join("two-events.perf.data");
    let sym = f.to_str().unwrap();
    let o = run(&[
        "locate",
        "--import",
        data.to_str().unwrap(),
        "--symdir",
        sym,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    // perf report: 142 cpu-clock samples (87.32% chase), 142 task-clock samples.
    assert_eq!(v["event"], "cpu-clock");
    assert_eq!(v["counts"]["samples"], 142);
    assert!((v["functions"][0]["percent"].as_f64().unwrap() - 87.32).abs() < 0.01);
    assert!(v["notes"].to_string().contains("2 events"));
    let o = run(&[
        "locate",
        "--import",
        data.to_str().unwrap(),
        "--symdir",
        sym,
        "--json",
        "-e",
        "task-clock",
    ]);
    let v = json(&o);
    assert_eq!(v["event"], "task-clock");
    assert_eq!(v["counts"]["samples"], 142);
    let o = run(&["locate", "--import", data.to_str().unwrap(), "-e", "cycles"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("has no event \"cycles\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn annotate_a_named_function_in_att_syntax() {
    let f = fixture("locate");
    let data = f.join("chase.perf.data");
    let sym = f.to_str().unwrap();
    let o = run(&[
        "locate",
        "--import",
        data.to_str().unwrap(),
        "--symdir",
        sym,
        "--annotate",
        "main",
        "-M",
        "att",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let a = &v["annotation"];
    assert_eq!(a["function"], "main");
    assert_eq!(a["syntax"], "att");
    assert_eq!(a["samples"], 54, "perf report: main 5.71% of 945");
    let texts: Vec<&str> = a["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains('%')),
        "AT&T registers: {texts:?}"
    );
    // A function without samples is still shown (make_cycle is inlined into main at -O1,
    // so use one that exists: chase has samples; `_start` has none).
    let o = run(&[
        "locate",
        "--import",
        data.to_str().unwrap(),
        "--symdir",
        sym,
        "--annotate",
        "_start",
        "--json",
    ]);
    let v = json(&o);
    assert_eq!(v["annotation"]["function"], "_start", "{}", stdout(&o));
    assert_eq!(v["annotation"]["samples"], 0);
}

#[test]
fn kernel_samples_named_from_kallsyms_when_readable() {
    let readable = std::fs::read("/proc/kallsyms")
        .ok()
        .and_then(|b| tma_profile::symbols::Kallsyms::parse(&b))
        .is_some();
    if !readable {
        eprintln!("skipped: /proc/kallsyms hides addresses here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_chase(dir.path()) else {
        return;
    };
    let out = dir.path().join("r.json");
    // 16 MiB of fresh memory: page faults give kernel samples.
    let o = run(&[
        "locate",
        "--kernel",
        "-e",
        "cpu-clock",
        "--top",
        "0",
        "--json",
        "-o",
        out.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "16",
        "100000",
    ]);
    if !can_sample(&o) || stderr(&o).contains("error") {
        eprintln!("skipped: kernel sampling not permitted: {}", stderr(&o));
        return;
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let rows = v["functions"].as_array().unwrap();
    let kernel: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["module"] == "[kernel.kallsyms]")
        .collect();
    if kernel.is_empty() {
        eprintln!("skipped: no kernel samples this time");
        return;
    }
    assert!(
        kernel.iter().all(|r| r["function"] != "[kernel]"),
        "kernel rows named from kallsyms: {kernel:?}"
    );
}

#[test]
fn duration_stops_a_launched_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let start = std::time::Instant::now();
    let o = run(&[
        "locate",
        "-e",
        "cpu-clock",
        "--duration",
        "0.5",
        "--json",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sleep",
        "30",
    ]);
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    // Loose bound: far less than the command's 30 s.
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(v["notes"].to_string().contains("SIGTERM"), "{v}");
}

#[test]
fn children_of_the_command_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_chase(dir.path()) else {
        return;
    };
    let out = dir.path().join("r.json");
    // sh forks, the child execs chase: its samples must be there (inherit + comm/mmap).
    let script = format!("{} 16 2000000 >/dev/null; true", exe.display());
    let o = run(&[
        "locate",
        "-e",
        "cpu-clock",
        "--json",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["functions"][0]["function"], "chase", "{v}");
}

/// `tma locate` with no --node/-e on a PMU machine reads the bottleneck from the JSON of a
/// quick `tma stat` pass (`intervals[-1].bottleneck.node`): pin that contract on real output.
#[test]
fn stat_json_names_the_bottleneck_where_locate_reads_it() {
    let o = TMA
        .bare()
        .args(["stat", "--example", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let last = v["intervals"].as_array().unwrap().last().unwrap();
    assert_eq!(last["bottleneck"]["node"], "backend_bound_cpu");
}

/// `tma locate -p PID` ended by Ctrl-C reports the samples taken so far (as `perf record -p`)
/// and exits 130.
#[test]
fn ctrl_c_on_an_attached_process_still_reports() {
    let mut busy = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let tma = TMA
        .bare()
        .args(["locate", "-p", &busy.id().to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: plain kill(2) on the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(tma.id() as i32, libc::SIGINT) };
    let o = tma.wait_with_output().unwrap();
    let _ = busy.kill();
    let _ = busy.wait();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(130),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("samples of cpu-clock"), "{out}");
    assert!(out.contains("interrupted"), "{out}");
}

/// One row of `perf report -t ';' --children --sort comm,dso,sym`: (children %, self %,
/// comm, dso, symbol without its `[.] `/`[k] ` mark).
fn perf_children_rows(text: &str) -> Vec<(f64, f64, String, String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(';'))
        .map(|l| {
            let f: Vec<&str> = l.split(';').map(str::trim).collect();
            let pct = |s: &str| s.trim_end_matches('%').trim().parse::<f64>().unwrap();
            let sym = f[4].get(4..).unwrap_or("").to_string();
            (
                pct(f[0]),
                pct(f[1]),
                f[2].to_string(),
                f[3].to_string(),
                sym,
            )
        })
        .collect()
}

/// The `perf record -a -g` fixture: every row of our binary and of the kernel (the rows
/// that do not depend on this machine's libraries) has perf report's children and self
/// percentages, under the same command name.
#[test]
fn system_wide_fixture_children_and_self_match_perf_report() {
    let f = fixture("locate");
    let golden = std::fs::read_to_string(f.join("syswide.perf-report.txt")).unwrap();
    let want: Vec<_> = perf_children_rows(&golden)
        .into_iter()
        .filter(|r| r.3 == "chase" || r.3 == "[kernel.kallsyms]")
        .filter(|r| !r.4.starts_with("0x") && !r.4.starts_with("00"))
        .collect();
    assert!(want.len() > 50, "golden rows: {}", want.len());
    let o = run(&[
        "locate",
        "--import",
        f.join("syswide.perf.data").to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
        "--kallsyms",
        f.join("syswide.kallsyms").to_str().unwrap(),
        "--sort",
        "comm,dso,sym",
        "--children",
        "--top",
        "0",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["counts"]["samples"], 718);
    let rows = v["functions"].as_array().unwrap();
    // Ordered by children, as perf report --children.
    let ch: Vec<f64> = rows
        .iter()
        .map(|r| r["children_percent"].as_f64().unwrap())
        .collect();
    assert!(ch.windows(2).all(|w| w[0] >= w[1]));
    for (children, self_pct, comm, dso, sym) in &want {
        // Kernel frames carry perf's module name.
        let module = dso.as_str();
        let ours = rows
            .iter()
            .find(|r| {
                r["comm"] == comm.as_str() && r["module"] == module && r["function"] == sym.as_str()
            })
            .unwrap_or_else(|| panic!("no row {comm} {module} {sym}"));
        let (oc, os) = (
            ours["children_percent"].as_f64().unwrap(),
            ours["percent"].as_f64().unwrap(),
        );
        // perf prints two decimals.
        assert!(
            (oc - children).abs() < 0.006 && (os - self_pct).abs() < 0.006,
            "{comm} {module} {sym}: ours children {oc:.3}% self {os:.3}%, perf {children}% {self_pct}%"
        );
    }
    // The text report: Children and Self columns, then the sort keys.
    let o = run(&[
        "locate",
        "--import",
        f.join("syswide.perf.data").to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
        "--sort",
        "comm,dso,sym",
        "--children",
    ]);
    let t = stdout(&o);
    let header = t
        .lines()
        .find(|l| l.contains("Children"))
        .unwrap_or_default();
    assert!(
        header.split_whitespace().collect::<Vec<_>>()
            == ["Children", "Self", "Samples", "Command", "Module", "Function"],
        "{t}"
    );
    assert!(t.contains("36.63%  36.49%"), "{t}");
}

/// Bad --sort keys and -C without -a are clear errors.
#[test]
fn system_wide_usage_errors() {
    let f = fixture("locate");
    let data = f.join("chase.perf.data");
    let o = run(&[
        "locate",
        "--import",
        data.to_str().unwrap(),
        "--sort",
        "comm,color",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown sort key \"color\""),
        "{}",
        stderr(&o)
    );
    let o = run(&["locate", "-a", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("-a samples the whole system"),
        "{}",
        stderr(&o)
    );
    let o = run(&["locate", "-C", "999", "--duration", "0.1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("CPU 999 is not online"),
        "{}",
        stderr(&o)
    );
}

/// `tma locate -a -C N`: a busy child pinned to CPU N shows up under its own command name
/// with most of that CPU's samples.
#[test]
fn system_wide_live_finds_a_pinned_busy_child() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_chase(dir.path()) else {
        return;
    };
    if Command::new("taskset").arg("-V").output().is_err() {
        eprintln!("SKIP: taskset (util-linux) is not installed to pin the child");
        return;
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let cpu = tma_host::parse_cpu_list(online.as_bytes())
        .ok()
        .and_then(|v| v.last().copied())
        .unwrap_or(0)
        .to_string();
    // 1 MiB cycle (cache-resident, all CPU), practically endless.
    let mut child = Command::new("taskset")
        .args(["-c", &cpu])
        .arg(&exe)
        .args(["1", "1000000000000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // The child's own CPU time over the window: on a loaded machine it cannot have the
    // whole CPU, and the samples can only show the share it had.
    let ticks = |pid: u32| -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    };
    let t0 = (ticks(child.id()), std::time::Instant::now());
    let out = dir.path().join("r.json");
    let o = run(&[
        "locate",
        "-a",
        "-C",
        &cpu,
        "-g",
        "--duration",
        "2",
        "--top",
        "0",
        "--json",
        "-o",
        out.to_str().unwrap(),
    ]);
    let t1 = (ticks(child.id()), t0.1.elapsed());
    let _ = child.kill();
    let _ = child.wait();
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let samples = v["counts"]["samples"].as_u64().unwrap();
    assert!(
        samples > 1000,
        "2 s at 4000 Hz on one CPU: {samples} samples"
    );
    let rows = v["functions"].as_array().unwrap();
    let hot = rows
        .iter()
        .find(|r| r["comm"] == "chase" && r["function"] == "chase")
        .unwrap_or_else(|| panic!("no chase row in {} rows", rows.len()));
    assert_eq!(hot["module"], "chase");
    let self_pct = hot["percent"].as_f64().unwrap();
    // CLK_TCK is 100 on Linux x86-64.
    let share = match t1.0.zip(t0.0) {
        Some((b, a)) => (b - a) as f64 / 100.0 / t1.1.as_secs_f64() * 100.0,
        None => 100.0,
    };
    let want = if share >= 40.0 {
        30.0
    } else {
        eprintln!("note: the machine is busy: chase had only {share:.0}% of CPU {cpu}");
        share * 0.75
    };
    assert!(
        self_pct >= want,
        "chase has {self_pct:.1}% of CPU {cpu}'s samples (it ran {share:.0}% of the time)"
    );
    // -a -g: children beside self; chase is in every stack it leads.
    assert!(hot["children_percent"].as_f64().unwrap() >= self_pct - 1e-9);
    let notes = v["notes"].to_string();
    assert!(
        notes.contains(&format!("system-wide: every process on CPUs {cpu}")),
        "{notes}"
    );
}

/// `-e` takes what `tma stat -e` takes: a software event is sampled as asked (no PMU
/// needed), a generic hardware event is known (sampled, or replaced by cpu-clock with a note
/// where there is no PMU); the CPU list is -C/--cpu-list (--cpus kept), and --cpu is a model.
#[test]
fn locate_takes_stats_events_and_flag_names() {
    let o = run(&["locate", "-e", "page-faults", "--top", "2", "--", "ls", "/"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("samples of page-faults"),
        "{}",
        stdout(&o)
    );
    let o = run(&["locate", "-e", "cycles", "--top", "2", "--", "ls", "/"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("unknown event"), "{}", stderr(&o));
    for flag in ["--cpu-list", "--cpus"] {
        let o = run(&[
            "locate",
            "-a",
            flag,
            "0",
            "--duration",
            "100ms",
            "--top",
            "1",
        ]);
        assert!(o.status.success(), "{flag}: {}", stderr(&o));
    }
    let o = run(&["locate", "--cpu", "0", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-C/--cpu-list"), "{}", stderr(&o));
}
