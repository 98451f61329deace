//! `tma stat --regions` and `--itt` on a C program built here (tests/fixtures/regions): the
//! control FIFO by hand, the tma-marker library, and ITT tasks through the real ITT static
//! part give the same region tree; a calibrated busy region reads its task-clock within 2 %,
//! a sleeping region reads near-zero CPU, nested regions add up and threads are kept apart.
//! Without a PMU the regions carry software counts, and the output says the tree needs one.

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

/// Where cargo put the libraries the tests use (`libtma_marker.so`, `libtma_itt.so`).
fn deps_dir() -> PathBuf {
    Path::new(TMA.bin())
        .parent()
        .expect("the binary is in a directory")
        .join("deps")
}

/// The ITT static part's C sources, from the `ittapi-sys` crate cargo fetched (found by
/// build.rs at build time: `!` and the reason when it was not there).
fn itt_c_library() -> Result<PathBuf, String> {
    let found = env!("TMA_ITT_C_LIBRARY");
    if let Some(why) = found.strip_prefix('!') {
        return Err(why.to_string());
    }
    let lib = PathBuf::from(found);
    if lib.join("include/ittnotify.h").is_file() {
        Ok(lib)
    } else {
        Err(format!("{} has no include/ittnotify.h", lib.display()))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Fifo,
    Marker,
    Itt,
}

/// Build the demo program one way into `dir`; `Err` says why it cannot be built here.
fn build(way: Way, dir: &Path) -> Result<PathBuf, String> {
    let exe = dir.join(format!("demo-{way:?}").to_lowercase());
    let mut cc = Command::new("cc");
    cc.arg("-O1")
        .arg("-pthread")
        .arg("-o")
        .arg(&exe)
        .arg(fixture("regions/regions_demo.c"));
    match way {
        Way::Fifo => {
            cc.arg("-DWAY_FIFO");
        }
        Way::Marker => {
            let deps = deps_dir();
            if !deps.join("libtma_marker.so").is_file() {
                return Err(format!("no libtma_marker.so in {}", deps.display()));
            }
            cc.arg("-DWAY_MARKER")
                .arg("-I")
                .arg(repo_root().join("crates/tma-marker/include"))
                .arg(format!("-L{}", deps.display()))
                .arg(format!("-Wl,-rpath,{}", deps.display()))
                .arg("-ltma_marker");
        }
        Way::Itt => {
            let lib = itt_c_library()?;
            cc.arg("-DWAY_ITT")
                .arg("-w")
                .arg("-I")
                .arg(lib.join("include"))
                .arg("-I")
                .arg(lib.join("src/ittnotify"))
                .arg(lib.join("src/ittnotify/ittnotify_static.c"))
                .arg("-ldl");
        }
    }
    let out = cc.output().map_err(|e| format!("cc: {e}"))?;
    if !out.status.success() {
        return Err(format!("cc failed: {}", stderr(&out)));
    }
    Ok(exe)
}

/// Run `tma stat --regions` (or `--itt`) on `exe`: the JSON report and the program's output.
fn regions(way: Way, exe: &Path, dir: &Path, env: &[(&str, &str)]) -> (Value, String, String) {
    regions_with(way, exe, dir, env, &[])
}

/// [`regions`] with more options for `tma stat`.
fn regions_with(
    way: Way,
    exe: &Path,
    dir: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (Value, String, String) {
    let report = dir.join(format!("{way:?}-{}-{}.json", env.len(), args.join("")));
    let mut c = bare();
    c.args(["stat", "--json", "-o"]).arg(&report).args(args);
    if way == Way::Itt {
        c.arg("--itt")
            .arg("--itt-lib")
            .arg(deps_dir().join("libtma_itt.so"));
    } else {
        c.arg("--regions");
    }
    c.arg("--").arg(exe);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run tma");
    let err = stderr(&out);
    assert!(out.status.success(), "{way:?}: {err}");
    let v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (v, String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

fn task_clock_ms(region: &Value) -> f64 {
    region["counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["event"] == "task-clock")
        .and_then(|c| c["value"].as_f64())
        .expect("task-clock counted")
        / 1e6
}

fn find<'a>(regions: &'a Value, name: &str) -> &'a Value {
    regions
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no region {name} in {regions}"))
}

/// The tree's shape: per scope (merged, then threads in tid order), every region's path and
/// call count.
fn shape(report: &Value) -> Vec<Vec<(String, u64)>> {
    fn walk(r: &Value, out: &mut Vec<(String, u64)>) {
        for x in r.as_array().unwrap() {
            let path: Vec<&str> = x["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            out.push((path.join("/"), x["calls"].as_u64().unwrap()));
            walk(&x["children"], out);
        }
    }
    let mut scopes = Vec::new();
    let mut m = Vec::new();
    walk(&report["merged"], &mut m);
    scopes.push(m);
    for t in report["threads"].as_array().unwrap() {
        let mut v = Vec::new();
        walk(&t["regions"], &mut v);
        scopes.push(v);
    }
    scopes
}

/// What the program says each busy region spun (its own CPU clock): (main, thread).
fn spun(program_out: &str) -> (f64, f64) {
    (
        printed(program_out, "main work_ms"),
        printed(program_out, "thread work_ms"),
    )
}

/// A figure the demo program printed (`<what> <ms>`).
fn printed(program_out: &str, what: &str) -> f64 {
    program_out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{what} ")))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no {what} line in {program_out:?}"))
}

/// The figures every way must give for the demo program.
fn check_figures(way: Way, r: &Value, program_out: &str) {
    let (main_ms, thread_ms) = spun(program_out);
    let threads = r["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{way:?}: two threads kept apart: {r}");
    // The main thread starts first, so it has the lower tid.
    let main = &threads[0]["regions"];
    let worker = &threads[1]["regions"];
    // A calibrated busy region reads that task-clock within 2 %.
    for (got, want, who) in [
        (task_clock_ms(find(main, "work")), main_ms, "main"),
        (task_clock_ms(find(worker, "work")), thread_ms, "thread"),
    ] {
        assert!(
            (got - want).abs() <= 0.02 * want,
            "{way:?}: {who} work read {got:.3} ms of task-clock, the thread spun {want:.3} ms"
        );
    }
    // Merged: both threads' work, two calls.
    let work = find(&r["merged"], "work");
    assert_eq!(work["calls"], 2);
    let sum = task_clock_ms(find(main, "work")) + task_clock_ms(find(worker, "work"));
    assert!(
        (task_clock_ms(work) - sum).abs() < 1e-6,
        "{way:?}: merged = sum"
    );
    // A sleeping region reads near-zero CPU.
    let nap = find(main, "nap");
    let share = nap["cpu_share"].as_f64().unwrap();
    assert!(share < 0.02, "{way:?}: nap ran {share} of its time");
    let nap_ms = nap["wall_ns"].as_f64().unwrap() / 1e6;
    assert!(
        (145.0..400.0).contains(&nap_ms),
        "{way:?}: nap took {nap_ms} ms"
    );
    // Nested regions add up: outer = its own 20 ms + its four inner regions.
    let outer = find(main, "outer");
    let inner = find(&outer["children"], "inner");
    assert_eq!(inner["calls"], 4);
    let (o, i) = (task_clock_ms(outer), task_clock_ms(inner));
    // Against what the spins really ran (the program says): four spins of 25 ms ran 103.7 ms
    // once while the workspace's tests and two fuzzers loaded both CPUs (a check of the
    // clock that took a millisecond).
    let (own_ran, inner_ran) = (
        printed(program_out, "main outer_own_ms"),
        printed(program_out, "main inner_ms"),
    );
    assert!(inner_ran >= 100.0 && own_ran >= 20.0, "{program_out}");
    assert!(
        (i - inner_ran).abs() <= 0.02 * inner_ran,
        "{way:?}: inner read {i:.3} ms, the spins ran {inner_ran:.3} ms"
    );
    // Within 2 % of the outer region's whole CPU time (the calibration's bar), and never
    // tighter than 2 ms.
    let tol = (0.02 * o).max(2.0);
    assert!(
        (o - i - own_ran).abs() <= tol,
        "{way:?}: outer {o:.3} ms is not its own {own_ran:.3} ms plus inner {i:.3} ms (within {tol:.2} ms)"
    );
    assert!(outer["wall_ns"].as_u64() >= inner["wall_ns"].as_u64());
    // The worker has nothing but its work.
    assert_eq!(worker.as_array().unwrap().len(), 1);
    // Software counts only here, and said so.
    if r["hardware"] == false {
        assert!(r["no_tree"].as_str().is_some());
    }
}

/// Whether this machine lets a process count its threads' software events at all.
fn can_count() -> Result<(), String> {
    let out = bare()
        .args(["stat", "--json", "--", "true"])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(stderr(&out))
    }
}

#[test]
fn three_ways_in_give_the_same_region_tree_and_calibrated_figures() {
    if let Err(why) = can_count() {
        println!("skipped: cannot count software events here: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut shapes = Vec::new();
    for way in [Way::Fifo, Way::Marker, Way::Itt] {
        let exe = match build(way, dir.path()) {
            Ok(e) => e,
            Err(why) => panic!("{way:?}: the demo must build here (cc, the marker library and ittapi-sys are part of the build): {why}"),
        };
        let (r, out, err) = regions(way, &exe, dir.path(), &[]);
        check_figures(way, &r, &out);
        if r["hardware"] == false {
            assert!(
                err.contains("the TMA tree of a region needs a hardware PMU"),
                "{err}"
            );
        }
        shapes.push((way, shape(&r)));
    }
    // The marker library also speaks the acknowledged protocol when told to.
    let exe = build(Way::Marker, dir.path()).unwrap();
    let (r, out, _) = regions(
        Way::Marker,
        &exe,
        dir.path(),
        &[("TMA_MARKER_MODE", "fifo")],
    );
    check_figures(Way::Marker, &r, &out);
    assert_eq!(shape(&r), shapes[1].1);
    for (way, s) in &shapes[1..] {
        assert_eq!(
            s, &shapes[0].1,
            "{way:?} gives another tree than the FIFO by hand"
        );
    }
}

/// tma's control thread follows the sending thread onto its CPU by default (-v says so, and
/// what made it go back: the demo's two threads both send acknowledged lines); --no-follow
/// keeps it put. Both count the same regions and the same calibrated figures.
#[test]
fn following_the_program_changes_no_figure() {
    if let Err(why) = can_count() {
        println!("skipped: cannot count software events here: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(Way::Fifo, dir.path()).unwrap();
    let (followed, out, err) = regions_with(Way::Fifo, &exe, dir.path(), &[], &["-v"]);
    check_figures(Way::Fifo, &followed, &out);
    // Root may always leave SCHED_IDLE again; another user only when RLIMIT_NICE allows.
    let root = tma_testkit::is_root();
    if root {
        assert!(
            err.contains("the control thread followed the program's sending thread onto its CPU"),
            "{err}"
        );
    } else if !err.contains("the control thread followed") {
        println!("not checked: not root, and this user may not leave SCHED_IDLE once in it");
    }
    let (put, out, err) = regions_with(Way::Fifo, &exe, dir.path(), &[], &["-v", "--no-follow"]);
    check_figures(Way::Fifo, &put, &out);
    assert!(!err.contains("the control thread"), "{err}");
    assert_eq!(shape(&followed), shape(&put));
}

#[test]
fn the_program_runs_alone_when_not_under_tma() {
    let dir = tempfile::tempdir().unwrap();
    for way in [Way::Fifo, Way::Marker, Way::Itt] {
        let exe = build(way, dir.path()).unwrap_or_else(|e| panic!("{way:?}: {e}"));
        let out = Command::new(&exe)
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("TMA_REGIONS_FIFO")
            .env_remove("INTEL_LIBITTNOTIFY64")
            .output()
            .unwrap();
        assert!(out.status.success(), "{way:?}");
        spun(&String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn text_and_csv_show_the_same_regions() {
    if let Err(why) = can_count() {
        println!("skipped: cannot count software events here: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(Way::Fifo, dir.path()).unwrap();
    let run = |fmt: &str| {
        let o = dir.path().join(format!("out.{fmt}"));
        let mut c = bare();
        c.args(["stat", "--regions", "-o"]).arg(&o);
        if fmt != "txt" {
            c.arg(format!("--{fmt}"));
        }
        let out = c.arg("--").arg(&exe).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        std::fs::read_to_string(o).unwrap()
    };
    let text = run("txt");
    assert!(text.starts_with("Regions of "), "{text}");
    for want in ["All threads", "Thread ", "  work ", "    inner ", "  nap "] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
    let csv = run("csv");
    let mut lines = csv.lines();
    let head = lines.next().unwrap();
    assert!(
        head.starts_with("scope,tid,region,depth,calls,wall_ns,cpu_share,counted_share,task-clock")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let merged: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r[0] == "merged")
        .map(|r| (r[2], r[4]))
        .collect();
    assert_eq!(
        merged,
        [
            ("work", "2"),
            ("outer", "1"),
            ("outer > inner", "4"),
            ("nap", "1")
        ]
    );
    assert_eq!(rows.iter().filter(|r| r[0] == "thread").count(), 5);
}

#[test]
fn bad_lines_and_unbalanced_regions_are_noted() {
    if let Err(why) = can_count() {
        println!("skipped: cannot count software events here: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nexec 3>\"$TMA_REGIONS_FIFO\"\n\
         echo \"begin $$ a\" >&3\necho \"end $$ b\" >&3\necho \"hello\" >&3\n\
         echo \"end $$ a\" >&3\necho \"begin $$ left open\" >&3\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = bare()
        .args(["stat", "--regions", "--json", "--"])
        .arg(&script)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("end \"b\" while \"a\" is its innermost open region"),
        "{err}"
    );
    assert!(err.contains("bad control line \"hello\""), "{err}");
    assert!(err.contains("region \"left open\" was still open"), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(find(&r["merged"], "a")["calls"], 1);
}

#[test]
fn regions_refuse_what_they_cannot_do() {
    for (args, want) in [
        (
            &["stat", "--regions", "-I", "100", "--", "true"][..],
            "cannot be combined with -I",
        ),
        (&["stat", "--regions", "-a"], "needs a command"),
        (
            &["stat", "--regions", "--import", "x.csv"],
            "cannot read a recording",
        ),
        (
            &[
                "stat",
                "--itt",
                "--itt-lib",
                "/nonexistent.so",
                "--",
                "true",
            ],
            "does not exist",
        ),
    ] {
        let out = bare().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_forked_child_starts_its_regions_afresh() {
    if let Err(why) = can_count() {
        println!("skipped: cannot count software events here: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("fork_demo");
    let deps = deps_dir();
    let out = Command::new("cc")
        .arg("-o")
        .arg(&exe)
        .arg(fixture("regions/fork_demo.c"))
        .arg("-I")
        .arg(repo_root().join("crates/tma-marker/include"))
        .arg(format!("-L{}", deps.display()))
        .arg(format!("-Wl,-rpath,{}", deps.display()))
        .arg("-ltma_marker")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = bare()
        .args(["stat", "--regions", "--json", "--"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let threads = r["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{r}");
    let names: Vec<&str> = threads
        .iter()
        .map(|t| t["regions"][0]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["parent", "child"]);
    assert!(threads[0]["regions"][0]["children"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(find(&r["merged"], "child")["calls"], 1);
}
