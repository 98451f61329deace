//! Work on other threads: a region whose work is done by threads it starts
//! (tests/fixtures/regions/spawn_demo.c, two threads spinning 100 ms of task-clock each)
//! counts their work, by the FIFO (tma reads the thread's inherited counters) and in process
//! (the marker library's inherited counters); `TMA_MARKER_OWN_THREAD=1` counts the calling
//! thread alone. A region the thread spins in itself reads its own 50 ms every way.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tma_testkit::{fixture, repo_root, stderr, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// `tma`, with the program finding the marker library by its run path (see regions.rs).
fn bare() -> Command {
    let mut c = TMA.bare();
    c.env_remove("LD_LIBRARY_PATH");
    c
}

fn build(dir: &Path) -> PathBuf {
    let deps = Path::new(TMA.bin()).parent().unwrap().join("deps");
    assert!(
        deps.join("libtma_marker.so").is_file(),
        "no libtma_marker.so in {} (built with the tests)",
        deps.display()
    );
    let exe = dir.join("spawn_demo");
    let out = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(fixture("regions/spawn_demo.c"))
        .arg("-I")
        .arg(repo_root().join("crates/tma-marker/include"))
        .arg(format!("-L{}", deps.display()))
        .arg(format!("-Wl,-rpath,{}", deps.display()))
        .arg("-ltma_marker")
        .output()
        .expect("cc");
    assert!(out.status.success(), "cc: {}", stderr(&out));
    exe
}

/// The merged task-clock (ms) of regions `spawn` and `alone`, and what the threads spun.
fn run(exe: &Path, env: &[(&str, &str)]) -> Option<(f64, f64, f64)> {
    run_doc(exe, env).map(|(a, b, c, _)| (a, b, c))
}

/// [`run`], with the document.
fn run_doc(exe: &Path, env: &[(&str, &str)]) -> Option<(f64, f64, f64, Value)> {
    let mut c = bare();
    c.args(["stat", "--regions", "--json", "--"]).arg(exe);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run tma");
    if !out.status.success() {
        let e = stderr(&out);
        if e.contains("perf_event") {
            println!("skipped: cannot count software events here: {e}");
            return None;
        }
        panic!("{env:?}: {e}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // The program's line, then the document.
    let (line, json) = text.split_once('\n').expect("the program's line");
    let spun = line.strip_prefix("spun_ms ").expect("the program's line");
    let r: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"));
    let ms = |name: &str| -> f64 {
        let reg = r["merged"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {r}"));
        reg["counts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["event"] == "task-clock")
            .and_then(|c| c["value"].as_f64())
            .unwrap_or_else(|| panic!("{name} has no task-clock: {r}"))
            / 1e6
    };
    Some((
        ms("spawn"),
        ms("alone"),
        spun.trim().parse().unwrap(),
        r.clone(),
    ))
}

/// Regions counted in process carry their times too (`span` lines): the timeline holds the
/// main thread's two regions, in order, each as long as its wall time.
#[test]
fn regions_counted_in_process_are_on_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let Some((_, _, _, r)) = run_doc(&exe, &[]) else {
        return;
    };
    let tl = r["timeline"].as_array().expect("a timeline");
    assert_eq!(tl.len(), 1, "{r}");
    let spans = tl[0]["spans"].as_array().unwrap();
    let names: Vec<&str> = spans
        .iter()
        .map(|s| s["path"][0].as_str().unwrap())
        .collect();
    assert_eq!(names, ["spawn", "alone"], "{r}");
    let t = |s: &Value, k: &str| s[k].as_u64().unwrap();
    let wall = |name: &str| {
        r["merged"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .unwrap()["wall_ns"]
            .as_u64()
            .unwrap()
    };
    for (s, name) in spans.iter().zip(["spawn", "alone"]) {
        let len = t(s, "end_ns") - t(s, "begin_ns");
        assert!(
            len.abs_diff(wall(name)) < 1_000_000,
            "{name}: span {len} ns, wall {}",
            wall(name)
        );
        assert!(t(s, "end_ns") <= r["wall_ns"].as_u64().unwrap(), "{r}");
    }
    assert!(t(&spans[1], "begin_ns") >= t(&spans[0], "end_ns"));
}

#[test]
fn threads_started_in_a_region_are_counted_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    for env in [&[][..], &[("TMA_MARKER_MODE", "fifo")][..]] {
        let Some((spawn, alone, spun)) = run(&exe, env) else {
            return;
        };
        println!("{env:?}: spawn {spawn:.1} ms (threads spun {spun:.1}), alone {alone:.1} ms");
        // The threads' 200 ms, plus what the main thread did to start and join them.
        assert!(spun >= 200.0, "{spun}");
        assert!(
            spawn >= spun * 0.98 && spawn <= spun * 1.02 + 10.0,
            "{env:?}: spawn read {spawn:.1} ms of task-clock; the threads spun {spun:.1}"
        );
        // The threads, gone, add nothing to the next region (a loaded machine adds a little
        // scheduling noise to an acknowledged round trip).
        assert!((49.0..60.0).contains(&alone), "{env:?}: alone {alone:.1}");
    }
    // Each thread alone: the region holds the main thread's start and join only.
    let Some((spawn, alone, _)) = run(&exe, &[("TMA_MARKER_OWN_THREAD", "1")]) else {
        return;
    };
    assert!(spawn < 20.0, "own thread: spawn read {spawn:.1} ms");
    assert!(
        (49.0..60.0).contains(&alone),
        "own thread: alone {alone:.1}"
    );
}
