//! `perf stat -G` / `--for-each-cgroup` recordings: the cgroups' rows of each event are
//! summed into the tree of the cgroups together (said in the header), and a recording that
//! counts different events in different cgroups is refused with the command that fixes it.

use tma_testkit::{fixture_str, stdout, Tma};

static TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

#[test]
fn a_for_each_cgroup_recording_gives_the_tree_of_the_summed_counts() {
    let split = TMA.run(&[
        "stat",
        "--import",
        &fixture_str("import/cgroup/zen4-each-cgroup-synthetic.csv"),
        "--cpu",
        "zen4",
        "-l",
        "2",
        "--json",
    ]);
    assert!(
        split.status.success(),
        "{}",
        String::from_utf8_lossy(&split.stderr)
    );
    let whole = TMA.run(&[
        "stat",
        "--import",
        &fixture_str("import/zen4-sha256-synthetic.csv"),
        "--cpu",
        "zen4",
        "-l",
        "2",
        "--json",
    ]);
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&split.stdout).unwrap(),
        serde_json::from_slice(&whole.stdout).unwrap(),
    );
    let nodes = |v: &serde_json::Value| v["intervals"][0]["nodes"].clone();
    assert_eq!(nodes(&a), nodes(&b));
    assert_eq!(
        a["intervals"][0]["bottleneck"],
        b["intervals"][0]["bottleneck"]
    );
    let text = TMA.run(&[
        "stat",
        "--import",
        &fixture_str("import/cgroup/zen4-each-cgroup-synthetic.csv"),
        "--cpu",
        "zen4",
    ]);
    assert!(
        stdout(&text).contains("per-cgroup rows (perf stat -G) summed"),
        "{}",
        stdout(&text)
    );
}

#[test]
fn events_in_different_cgroups_are_a_clear_error() {
    let o = TMA.run(&[
        "stat",
        "--import",
        &fixture_str("import/cgroup/mixed-cgroups.csv"),
        "--cpu",
        "zen4",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("counted in different cgroups"), "{err}");
    assert!(err.contains("--for-each-cgroup"), "{err}");
}
