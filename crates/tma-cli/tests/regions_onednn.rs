//! The real oneDNN case: a oneDNN matmul primitive (Debian's `libdnnl-dev`) driven
//! by tests/fixtures/regions/onednn_matmul.cpp, its creation and each execute marked with
//! tma-marker. Under `tma stat --regions` the marked regions are counted; under `--itt`
//! oneDNN's own ITT task for the primitive appears too, nested in the marked execute, with no
//! change to oneDNN. Skips, saying so, where oneDNN or a C++ compiler is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tma_testkit::{fixture, repo_root, stderr, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// `tma`, with the programs it runs finding the marker library by their run path (the copy
/// cargo built in `deps/`), not through cargo's `LD_LIBRARY_PATH`, which can name an older
/// copy in the target directory.
fn bare() -> Command {
    let mut c = TMA.bare();
    c.env_remove("LD_LIBRARY_PATH");
    c
}

fn deps_dir() -> PathBuf {
    Path::new(TMA.bin()).parent().unwrap().join("deps")
}

/// Build the driver, or say why it cannot be built here.
fn build(dir: &Path) -> Result<PathBuf, String> {
    if !Path::new("/usr/include/dnnl.hpp").is_file() {
        return Err("oneDNN is not installed (apt-get install libdnnl-dev)".into());
    }
    let exe = dir.join("onednn_matmul");
    let deps = deps_dir();
    let out = Command::new("c++")
        .arg("-O2")
        .arg("-o")
        .arg(&exe)
        .arg(fixture("regions/onednn_matmul.cpp"))
        .arg("-I")
        .arg(repo_root().join("crates/tma-marker/include"))
        .arg(format!("-L{}", deps.display()))
        .arg(format!("-Wl,-rpath,{}", deps.display()))
        .args(["-ltma_marker", "-ldnnl"])
        .output()
        .map_err(|e| format!("no C++ compiler (c++: {e})"))?;
    if !out.status.success() {
        return Err(format!("c++ failed: {}", stderr(&out)));
    }
    Ok(exe)
}

fn run(exe: &Path, dir: &Path, itt: bool) -> (Value, String) {
    let report = dir.join(if itt { "itt.json" } else { "regions.json" });
    let mut c = bare();
    c.args(["stat", "--json", "-o"]).arg(&report);
    if itt {
        c.arg("--itt")
            .arg("--itt-lib")
            .arg(deps_dir().join("libtma_itt.so"));
    } else {
        c.arg("--regions");
    }
    let out = c
        .arg("--")
        .arg(exe)
        .args(["128", "256", "128", "3", "on"])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let program = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(program.contains("check ok"), "{program}");
    assert!(program.contains("GFLOP/s"), "{program}");
    (
        serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap(),
        program,
    )
}

fn region<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no region {name} in {list}"))
}

#[test]
fn onednn_primitive_regions_marked_and_from_its_own_itt_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let exe = match build(dir.path()) {
        Ok(e) => e,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let (r, _) = run(&exe, dir.path(), false);
    assert_eq!(region(&r["merged"], "create")["calls"], 1);
    let execute = region(&r["merged"], "execute");
    assert_eq!(execute["calls"], 3);
    // With one OpenMP thread the primitive runs on the thread that marked it.
    let tc = execute["counts"][0]["value"].as_f64().unwrap();
    assert_eq!(execute["counts"][0]["event"], "task-clock");
    assert!(tc > 0.0);
    assert!(execute["children"].as_array().unwrap().is_empty());

    let (r, _) = run(&exe, dir.path(), true);
    let execute = region(&r["merged"], "execute");
    assert_eq!(execute["calls"], 3);
    // oneDNN's ITT task for each execution of the primitive, named by its kind, nested in
    // the marked execute.
    let task = region(&execute["children"], "matmul");
    assert_eq!(task["calls"], 3, "{execute}");
    assert!(task["wall_ns"].as_u64() <= execute["wall_ns"].as_u64());
}
