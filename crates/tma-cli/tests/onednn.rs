//! The real oneDNN case through `tma workload onednn`, which loads oneDNN at run
//! time: its report; oneDNN's primitive executions as ITT regions under `tma stat --itt`,
//! with no rebuild, from Debian's oneDNN 2.6 (`libdnnl2`) and from the PyPI `onednn` wheel
//! (oneDNN 3.x, a SYCL build), which `scripts/test.sh` installs into `onednn-venv` in the
//! target directory; and `tma demo onednn`. Each test skips, saying so, where its oneDNN
//! cannot be had.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tma_testkit::{stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// The target directory of this build (`.../target`, above `debug/tma`).
fn target_dir() -> PathBuf {
    Path::new(TMA.bin())
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf()
}

/// The wheel's oneDNN, when scripts/test.sh (or a user) installed it.
fn wheel() -> Option<PathBuf> {
    let lib = target_dir().join("onednn-venv/lib/libdnnl.so.3");
    lib.is_file().then_some(lib)
}

/// The ITT collector cargo built beside the test binaries (tma-itt is a dev-dependency).
fn itt_lib() -> PathBuf {
    Path::new(TMA.bin())
        .parent()
        .unwrap()
        .join("deps/libtma_itt.so")
}

/// `tma`, without cargo's LD_LIBRARY_PATH (the workload finds oneDNN the ordinary way).
fn tma() -> Command {
    let mut c = TMA.bare();
    c.env_remove("LD_LIBRARY_PATH")
        .env_remove("OCL_ICD_FILENAMES");
    c
}

/// Whether a failed run said that no oneDNN is installed.
fn no_onednn(o: &Output) -> bool {
    stderr(o).contains("no oneDNN library found")
}

fn workload(dnnl: Option<&Path>, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "workload", "onednn", "--m", "64", "--k", "512", "--n", "100",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    if let Some(d) = dnnl {
        v.push("--dnnl".into());
        v.push(d.display().to_string());
    }
    v
}

/// `tma workload onednn --json`: the library, the check, the huge-page share of its own
/// buffers and the page faults of their first touch, with --thp off and on.
fn report_of(dnnl: Option<&Path>) -> Option<(Value, Value)> {
    let run = |thp: &str| {
        let o = tma()
            .args(workload(dnnl, &["--reps", "2", "--thp", thp, "--json"]))
            .output()
            .unwrap();
        if no_onednn(&o) {
            return None;
        }
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["schema"], "tma.workload");
        assert_eq!(v["name"], "onednn");
        assert_eq!(v["impl"], format!("thp-{thp}"));
        let r = &v["onednn"];
        assert_eq!(r["flops"], 2 * 2 * 64 * 512 * 100);
        assert_eq!(r["rep_wall_seconds"].as_array().unwrap().len(), 2);
        assert!(r["check"]["worst_error_ratio"].as_f64().unwrap() < 1.0);
        // Three buffers, each in whole 2 MiB units.
        assert_eq!(r["huge_pages"]["bytes"], 3 * (2 << 20));
        Some(v)
    };
    let off = run("off")?;
    let on = run("on").unwrap();
    Some((off, on))
}

#[test]
fn workload_reports_debian_or_any_installed_onednn() {
    let Some((off, on)) = report_of(None) else {
        println!("skipped: no oneDNN installed (apt-get install libdnnl2)");
        return;
    };
    let lib = &off["onednn"]["library"];
    assert!(
        lib["version"].as_str().unwrap().starts_with(['2', '3']),
        "{lib}"
    );
    // 4 KiB pages: at least one fault per page of the 64x512 and 512x100 matrices.
    let faults_off = off["onednn"]["setup_page_faults"].as_u64().unwrap();
    assert!(
        faults_off >= (64 * 512 + 512 * 100) * 4 / 4096,
        "{faults_off}"
    );
    assert_eq!(off["onednn"]["huge_pages"]["huge_bytes"], 0);
    // With huge pages, where the system gives them, far fewer faults.
    if on["onednn"]["huge_pages"]["share"].as_f64().unwrap() > 0.99 {
        let faults_on = on["onednn"]["setup_page_faults"].as_u64().unwrap();
        assert!(faults_on * 4 < faults_off, "{faults_on} vs {faults_off}");
    }
}

#[test]
fn a_missing_library_is_named_with_a_way_to_get_one() {
    let o = tma()
        .args(workload(
            Some(Path::new("/nonexistent/libdnnl.so.3")),
            &["--reps", "1"],
        ))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("cannot load oneDNN from /nonexistent/libdnnl.so.3"),
        "{e}"
    );
}

/// `tma stat --itt --json` of the workload: the merged regions.
fn itt_regions(dnnl: Option<&Path>, reps: &str, dir: &Path) -> Option<Value> {
    let out = dir.join(format!("itt-{reps}.json"));
    let o = tma()
        .args(["stat", "--itt", "--itt-lib"])
        .arg(itt_lib())
        .arg("--json")
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(TMA.bin())
        .args(workload(dnnl, &["--reps", reps]))
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    if no_onednn(&o) {
        return None;
    }
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    Some(v["merged"].clone())
}

fn calls(regions: &Value, name: &str) -> u64 {
    regions
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no region {name} in {regions}"))["calls"]
        .as_u64()
        .unwrap()
}

/// oneDNN's own ITT task of each primitive execution, named by its kind, becomes a region:
/// three executes, three more `matmul` calls than one (whatever tasks primitive creation
/// adds, it adds to both runs).
fn primitive_regions(dnnl: Option<&Path>) -> Option<Value> {
    let dir = tempfile::tempdir().unwrap();
    let one = itt_regions(dnnl, "1", dir.path())?;
    let three = itt_regions(dnnl, "3", dir.path()).unwrap();
    assert_eq!(
        calls(&three, "matmul") - calls(&one, "matmul"),
        2,
        "{three}"
    );
    let m = three
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "matmul")
        .unwrap();
    assert!(m["wall_ns"].as_u64().unwrap() > 0);
    assert_eq!(m["counts"][0]["event"], "task-clock");
    Some(three)
}

#[test]
fn debian_onednn_primitives_are_itt_regions() {
    // Debian's 2.6 (the first of the usual names the loader finds here).
    match primitive_regions(None) {
        Some(r) => println!("regions: {r}"),
        None => println!("skipped: no oneDNN installed (apt-get install libdnnl2)"),
    }
}

#[test]
fn wheel_onednn_runs_and_its_primitives_are_itt_regions() {
    let Some(lib) = wheel() else {
        println!(
            "skipped: the PyPI onednn wheel is not in {} (scripts/test.sh installs it: python3 -m venv, pip install onednn)",
            target_dir().join("onednn-venv").display()
        );
        return;
    };
    // tma runs itself again with the wheel's directory in LD_LIBRARY_PATH and its CPU OpenCL
    // runtime in OCL_ICD_FILENAMES, without which its SYCL CPU engine cannot be created.
    let (off, _) = report_of(Some(&lib)).expect("the wheel loads");
    let l = &off["onednn"]["library"];
    assert!(l["version"].as_str().unwrap().starts_with("3."), "{l}");
    assert_eq!(l["cpu_runtime"], "SYCL", "{l}");
    assert!(l["api"].as_str().unwrap().starts_with("3.x"), "{l}");
    primitive_regions(Some(&lib)).expect("the wheel loads");
}

/// `tma demo onednn --quick`: both codes with both page sizes, compared; or, without oneDNN,
/// the reference alone and a way to get oneDNN.
#[test]
fn demo_compares_onednn_and_the_reference_with_and_without_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let o = tma()
        .args(["demo", "onednn", "--quick", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for step in [
        "Step 1: oneDNN's primitive with 4 KiB pages",
        "Step 4: tma's reference matmul with huge pages",
        "Step 5: compare",
        "reference --thp on",
    ] {
        assert!(text.contains(step), "{step}\n{text}");
    }
    assert!(
        text.contains("$ tma stat --itt -- tma workload onednn --m 256"),
        "{text}"
    );
    if dir.path().join("onednn-thp-on.json").is_file() {
        assert!(text.contains("huge pages: oneDNN's primitive"), "{text}");
        assert!(text.contains("oneDNN --thp on"), "{text}");
    } else {
        assert!(text.contains("No oneDNN run"), "{text}");
        println!("skipped: the oneDNN half of the demo (no oneDNN installed)");
    }
    if !Path::new("/sys/bus/event_source/devices/cpu").exists() {
        assert!(text.contains("What this machine cannot show"), "{text}");
    }
}
