//! `tma diff` and `tma report` of `tma stat --regions` documents: the Zen 4 region fixtures
//! (tests/fixtures/regions/zen4-regions-*.json, chosen counts) compared region by region and
//! drawn, and real runs of a shell script that names its regions on the FIFO, repeated, so
//! that each side holds several runs and the diff tests each region's change.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn fx(name: &str) -> String {
    fixture(&format!("regions/zen4-regions-{name}.json"))
        .display()
        .to_string()
}

#[test]
fn the_fixtures_compare_region_by_region_in_text_json_and_csv() {
    let o = TMA.run(&["diff", &fx("before"), &fx("after")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("Regions of ./solver: before "), "{text}");
    for want in [
        "load [before only]",
        "save [after only]",
        "Thread 2 (by rank)",
        "-15.0 pts (-37.5%)",
        "-45.00 (-33.3%)",
        "Significance unknown: one run per side",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }

    let o = TMA.run(&["diff", "--json", &fx("before"), &fx("after")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "tma.diff.regions");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["before"]["cpu"], "zen4");
    assert_eq!(v["before"]["threads"][0], serde_json::json!([4101, 4102]));
    let solve = &v["regions"][0];
    assert_eq!(solve["scope"], "merged");
    assert_eq!(solve["path"], serde_json::json!(["solve"]));
    assert_eq!(solve["presence"], "both");
    let node = |r: &Value, n: &str| -> Value {
        r["figures"]
            .as_array()
            .unwrap()
            .iter()
            .chain(r["nodes"].as_array().unwrap())
            .find(|x| x["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} in {r}"))
    };
    assert_eq!(node(solve, "backend_bound")["delta"], -15.0);
    assert_eq!(node(solve, "retiring")["after"]["mean"], 45.0);
    assert_eq!(node(solve, "time_ms")["delta"], -45.0);
    let presence: Vec<(String, String)> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["scope"] == "merged")
        .map(|r| {
            (
                r["path"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join("/"),
                r["presence"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        presence,
        [
            ("solve".into(), "both".into()),
            ("solve/inner".into(), "both".into()),
            ("load".into(), "before_only".into()),
            ("save".into(), "after_only".into()),
        ]
    );

    let o = TMA.run(&["diff", "--csv", &fx("before"), &fx("after")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    assert!(
        csv.starts_with("scope,thread,region,presence,kind,name,"),
        "{csv}"
    );
    assert!(
        csv.lines().any(|l| l.starts_with(
            "merged,,solve > inner,both,node,backend_bound,,1,percent_slots,1,40,,1,25,,-15,"
        )),
        "{csv}"
    );
    assert!(csv
        .lines()
        .any(|l| l.starts_with("thread,2,solve,both,figure,calls,")));
}

#[test]
fn gates_name_a_region_and_mixed_inputs_are_refused() {
    let o = TMA.run(&[
        "diff",
        &fx("before"),
        &fx("after"),
        "--fail-if",
        "solve.time_ms < -20%",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("tma: gate tripped: solve.time_ms < -20%"),
        "{}",
        stderr(&o)
    );
    let o = TMA.run(&[
        "diff",
        &fx("before"),
        &fx("after"),
        "--fail-if",
        "solve.inner.backend_bound > +1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("Gate ok: solve.inner.backend_bound > +1"));
    let o = TMA.run(&[
        "diff",
        &fx("before"),
        &fx("after"),
        "--fail-if",
        "nowhere.calls > 1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no region starts \"nowhere.calls\""),
        "{}",
        stderr(&o)
    );
    let other = fixture("diff/zen4-before-synthetic.json");
    let o = TMA.run(&["diff", &fx("before"), &other.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("holds regions (tma stat --regions --json) but"),
        "{}",
        stderr(&o)
    );
    let o = TMA.run(&["diff", &fx("before"), &fx("after"), "--cpu", "zen4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("region documents are compared as they were counted"));
}

/// A shell script naming its regions with acknowledged lines: `a` sleeps `$1` s, then
/// `$2` names a region that sleeps 10 ms.
const SCRIPT: &str = r#"exec 3>"$TMA_REGIONS_FIFO" 4<"$TMA_REGIONS_ACK"
r() { echo "!$1 $BASHPID $2" >&3; read -u 4 ok; }
r begin a; sleep "$1"; r end a
r begin "$2"; sleep 0.01; r end "$2"
"#;

/// `runs` runs of the script, their documents written one after the other into `to`.
fn record(to: &Path, a: &str, other: &str, runs: usize) -> bool {
    let mut all = Vec::new();
    for _ in 0..runs {
        let o = TMA
            .bare()
            .args([
                "stat",
                "--regions",
                "--json",
                "--",
                "bash",
                "-c",
                SCRIPT,
                "script",
                a,
                other,
            ])
            .output()
            .unwrap();
        if !o.status.success() {
            let e = stderr(&o);
            if e.contains("perf_event") || e.contains("not permitted") {
                println!("skipped: tma stat --regions cannot count here: {e}");
                return false;
            }
            panic!("tma stat --regions failed: {e}");
        }
        all.extend_from_slice(&o.stdout);
    }
    std::fs::write(to, all).unwrap();
    true
}

#[test]
fn repeated_real_runs_give_each_regions_test_and_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after): (PathBuf, PathBuf) =
        (dir.path().join("b.json"), dir.path().join("a.json"));
    if !record(&before, "0.02", "old", 3) || !record(&after, "0.3", "new", 3) {
        return;
    }
    let o = TMA.run(&[
        "diff",
        "--json",
        &before.display().to_string(),
        &after.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["before"]["runs"], 3);
    assert_eq!(v["before"]["hardware"], false);
    let a = &v["regions"][0];
    assert_eq!(a["path"], serde_json::json!(["a"]));
    let t = a["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "time_ms")
        .unwrap();
    assert_eq!(t["before"]["n"], 3);
    let delta = t["delta"].as_f64().unwrap();
    // 20 ms -> 300 ms of sleep: about 280 ms longer, far outside the runs' spread (starting
    // `sleep` takes some milliseconds more on a loaded machine, on both sides).
    assert!((200.0..400.0).contains(&delta), "{t}");
    assert_eq!(t["significance"]["verdict"], "significant", "{t}");
    // The sleeping region used little CPU on either side.
    let cpu = a["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "cpu_share")
        .unwrap();
    assert!(cpu["after"]["mean"].as_f64().unwrap() < 20.0, "{cpu}");
    let merged: Vec<(&str, &str)> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["scope"] == "merged")
        .map(|r| {
            (
                r["path"][0].as_str().unwrap(),
                r["presence"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        merged,
        [("a", "both"), ("old", "before_only"), ("new", "after_only")]
    );

    // A real run's document carries its timeline, which the report draws.
    let one = dir.path().join("one.json");
    assert!(record(&one, "0.02", "x", 1));
    let doc: Value = serde_json::from_slice(&std::fs::read(&one).unwrap()).unwrap();
    let spans = doc["timeline"][0]["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 2, "{doc}");
    let (b, e) = (
        spans[0]["begin_ns"].as_u64().unwrap(),
        spans[0]["end_ns"].as_u64().unwrap(),
    );
    assert!(
        e - b >= 20_000_000 && e <= doc["wall_ns"].as_u64().unwrap(),
        "{doc}"
    );
    assert!(spans[1]["begin_ns"].as_u64().unwrap() >= e);
    let html = dir.path().join("r.html");
    let o = TMA.run(&[
        "report",
        &one.display().to_string(),
        "-o",
        &html.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<g class=\"span\">").count(), 2);
    assert!(page.contains("Software counts only: the TMA tree of a region needs a hardware PMU"));
    assert!(page.contains("<th class=\"num\">task-clock</th>"));
}
