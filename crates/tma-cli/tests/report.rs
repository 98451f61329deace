//! `tma report` and `tma stat --plot` end to end: the page and the SVG pictures are written
//! (atomically: nothing is left behind on errors), bad inputs are exit 2 with one line.

use std::path::Path;
use std::process::{Output, Stdio};

use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn tma(args: &[&std::ffi::OsStr]) -> Output {
    TMA.bare()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run tma")
}

macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$(std::ffi::OsStr::new(&$a)),*] };
}
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn report_writes_the_page_and_the_timeline_svg() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let svg = dir.path().join("timeline.svg");
    let rec = fixture("report/zen4-phases-synthetic.csv");
    let o = tma(args![
        "report", rec, "--cpu", "zen4", "-l", "2", "-o", html, "--svg", svg
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("60 intervals"));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("TMA level 1 over time"));
    assert!(svg.contains("backend_bound: its children over time"));
    assert_eq!(entries(dir.path()), ["report.html", "timeline.svg"]);
}

#[test]
fn report_without_output_prints_the_page() {
    let o = tma(args!["report", fixture("report/zen4.diff.json")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<section id=\"s1\" class=\"diff\">"));
}

#[test]
fn stat_plot_draws_the_intervals_or_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let tl = dir.path().join("tl.svg");
    let rec = fixture("report/zen4-phases-synthetic.csv");
    let o = tma(args![
        "stat",
        "--import",
        rec,
        "--cpu",
        "zen4",
        "-l",
        "2",
        "--compact",
        "--plot",
        tl
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The tree output is unchanged: one compact line per interval.
    assert_eq!(
        stdout(&o)
            .lines()
            .filter(|l| l.contains("backend_bound"))
            .count(),
        61
    );
    let svg = std::fs::read_to_string(&tl).unwrap();
    assert!(svg.contains("TMA level 1 over time"), "{svg}");
    assert!(svg.contains("backend_bound_memory"));

    let tree = dir.path().join("tree.svg");
    let rec = fixture("import/zen4-sha256-synthetic.csv");
    let o = tma(args![
        "stat", "--import", rec, "--cpu", "zen4", "-l", "2", "--plot", tree
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&tree).unwrap();
    assert!(svg.contains("TMA tree: AMD Zen 4 (zen4)"), "{svg}");
    assert!(svg.contains("65.9%  bottleneck"));
}

#[test]
fn live_intervals_plot_with_the_synthetic_backend() {
    let dir = tempfile::tempdir().unwrap();
    let tl = dir.path().join("live.svg");
    let o = tma(args![
        "stat",
        "--synthetic-backend",
        fixture("live/synthetic-zen4-sha256.json"),
        "--cpu",
        "zen4",
        "-l",
        "2",
        "-I",
        "100",
        "--compact",
        "--plot",
        tl,
        "--",
        "sleep",
        "0.45"
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&tl).unwrap();
    assert!(svg.contains("TMA level 1 over time"), "{svg}");
    assert!(svg.contains("retiring"));
}

#[test]
fn bad_inputs_are_exit_2_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let kvm = dir.path().join("kvm.json");
    std::fs::write(
        &kvm,
        "{\n  \"schema\": \"tma.kvm\",\n  \"schema_version\": 1\n}\n",
    )
    .unwrap();
    let html = dir.path().join("out.html");
    let o = tma(args!["report", kvm, "-o", html]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("a \"tma.kvm\" document; tma report draws"),
        "{err}"
    );
    assert!(!html.exists());

    let svg = dir.path().join("x.svg");
    let o = tma(args![
        "report",
        fixture("report/zen4.diff.json"),
        "--svg",
        svg
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--svg draws the timeline of intervals or a TMA tree"));
    assert_eq!(entries(dir.path()), ["kvm.json"]);

    let o = tma(args!["report"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn stat_plot_without_a_pmu_says_why_there_is_no_picture() {
    let pmu = ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists());
    if pmu {
        println!("skipped: this machine has a core PMU, so tma stat draws a tree");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("x.svg");
    let o = tma(args![
        "stat", "-I", "100", "--plot", svg, "--", "sleep", "0.25"
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("not written: there is no TMA tree to draw without hardware counters"),
        "{err}"
    );
    assert!(!svg.exists());
}

#[test]
fn a_file_that_is_no_input_is_named_as_such_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("notes.txt");
    std::fs::write(&junk, "hello\nworld\n").unwrap();
    let html = dir.path().join("report.html");
    let o = tma(args!["report", junk, "-o", html]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("notes.txt: not an input tma report reads"),
        "{err}"
    );
    assert!(err.contains("line 1"), "{err}");
    // The perf-stat parser's message is given once, not repeated through the error chain.
    assert_eq!(
        err.matches("truncated or malformed line").count(),
        1,
        "{err}"
    );
    assert_eq!(entries(dir.path()), ["notes.txt"]);
}

/// A group recording (`perf record -e '{cpu-clock,page-faults}:S'`) with --cpu is read with
/// its read groups (as `tma locate --import --tree` reads it) and still draws its profile;
/// the one group's two events are read together (no "pick one with -e" note).
#[test]
fn a_group_recording_with_cpu_draws_its_profile() {
    let with_cpu = tma(args![
        "report",
        fixture("profile-tree/group.perf.data"),
        "--cpu",
        "zen4"
    ]);
    assert_eq!(with_cpu.status.code(), Some(0), "{}", stderr(&with_cpu));
    let page = stdout(&with_cpu);
    assert!(page.contains("compute") && page.contains("touch_pages"));
    assert!(!page.contains("pick one with -e"));
    let plain = tma(args!["report", fixture("profile-tree/group.perf.data")]);
    assert!(stdout(&plain).contains("pick one with -e"));
}
