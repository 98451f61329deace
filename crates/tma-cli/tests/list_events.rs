//! End-to-end tests of `tma list` and `tma events`, including the round trip
//! `tma events --perf-cmd` -> (perf output built from the printed event list) ->
//! `tma stat --import`, for every CPU model of the catalog.

use std::process::Output;

use tma_testkit::{stderr, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// `tma` with `args`, with this machine's CPU for commands without --cpu: an AMD EPYC Zen 5
/// (fixture root).
fn run(args: &[&str]) -> Output {
    TMA.with_root("zen5").args(args).output().expect("run tma")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        stderr(o)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn list_zen4_shows_tree_with_formulas_and_thresholds() {
    let out = ok(&run(&["list", "--cpu", "zen4"]));
    assert!(
        out.starts_with("AMD Zen 4 (zen4, from --cpu): 13 nodes"),
        "{out}"
    );
    // Level-2 nodes are indented under their parent.
    let i_parent = out.find("\nbackend_bound  [level 1]").unwrap();
    let i_child = out.find("\n  backend_bound_cpu  [level 2]").unwrap();
    assert!(i_child > i_parent);
    assert!(out.contains("threshold: backend_bound_cpu > 10 & backend_bound > 20"));
    assert!(out.contains("total_dispatch_slots = 6 * ls_not_halted_cyc"));
    // Long formulas are wrapped, never over 100 columns.
    assert!(
        out.lines().all(|l| l.len() <= 100 || !l.contains(' ')),
        "{out}"
    );

    let l1 = ok(&run(&["list", "--cpu", "ZEN4", "-l", "1"]));
    assert_eq!(l1.matches("[level 1]").count(), 5);
    assert_eq!(l1.matches("[level 2]").count(), 0);
}

#[test]
fn list_default_cpu_is_identified_from_cpuinfo() {
    let out = ok(&run(&["list", "-l", "1"]));
    assert!(
        out.starts_with("AMD Zen 5 (zen5, identified from this machine)"),
        "{out}"
    );
}

#[test]
fn list_json() {
    let out = ok(&run(&["list", "--cpu", "zen4", "--json"]));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["schema"], "tma.list");
    assert_eq!(j["cpu"]["key"], "zen4");
    let nodes = j["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 13);
    assert_eq!(nodes[0]["name"], "frontend_bound");
    assert_eq!(nodes[1]["parent"], "frontend_bound");
}

#[test]
fn unknown_cpu_is_one_line_exit_2() {
    let o = run(&["list", "--cpu", "pentium4"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("zen4"), "{e}");
}

#[test]
fn events_zen4_level2() {
    let out = ok(&run(&["events", "--cpu", "zen4", "-l", "2", "--json"]));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["schema"], "tma.events");
    let evs = j["events"].as_array().unwrap();
    assert_eq!(evs.len(), 12);
    let c6 = evs
        .iter()
        .find(|e| e["id"] == "de_no_dispatch_per_slot.no_ops_from_frontend:c6")
        .unwrap();
    // README 5.1: raw config 0x1060001A0.
    assert_eq!(c6["config"], "0x1060001a0");
    for g in j["groups"].as_array().unwrap() {
        assert!(g.as_array().unwrap().len() <= 6, "{g}");
    }
    let l1 = ok(&run(&["events", "--cpu", "zen4"]));
    assert!(l1.contains("6 events for level 1"), "{l1}");
    assert!(l1.contains("cpu/event=0x76,umask=0x0,name=ls_not_halted_cyc/"));
}

#[test]
fn events_perf_cmd_shape() {
    let out = ok(&run(&[
        "events",
        "--cpu",
        "zen4",
        "-l",
        "1",
        "--perf-cmd",
        "--",
        "./app",
        "a b",
    ]));
    let cmd = out.lines().find(|l| l.starts_with("perf stat")).unwrap();
    assert!(cmd.starts_with("perf stat -x, -e '{"), "{cmd}");
    assert!(cmd.ends_with("-o perf-stat.csv -- ./app 'a b'"), "{cmd}");
    assert!(out.contains("# then: tma stat --import perf-stat.csv --cpu zen4 -l 1"));
}

/// Split the printed perf command into its event specs, group by group.
fn groups_of(cmd: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for part in cmd.split(" -e '").skip(1) {
        let arg = &part[..part.find('\'').unwrap()];
        let inner = arg.trim_start_matches('{').trim_end_matches('}');
        // Re-join `pmu/a=1,b=2/` specs split at their commas.
        let mut specs: Vec<String> = Vec::new();
        let mut open = false;
        for tok in inner.split(',') {
            if open {
                let last = specs.last_mut().unwrap();
                last.push(',');
                last.push_str(tok);
            } else {
                specs.push(tok.to_string());
            }
            if tok.matches('/').count() % 2 == 1 {
                open = !open;
            }
        }
        out.push(specs);
    }
    out
}

/// What perf prints for a spec in `-x,` output: its `name=` term, else the spec.
fn printed_name(spec: &str) -> String {
    match spec.find("name=") {
        Some(i) => {
            let rest = &spec[i + 5..];
            rest[..rest.find([',', '/']).unwrap()].to_string()
        }
        None => spec.to_string(),
    }
}

#[test]
fn perf_cmd_round_trip_for_every_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for m in tma_catalog::models() {
        for level in 1..=3u8 {
            if m.nodes.iter().all(|n| n.level < level) {
                continue;
            }
            let lv = level.to_string();
            let out = ok(&run(&["events", "--cpu", m.key, "-l", &lv, "--perf-cmd"]));
            let cmd = out
                .lines()
                .find(|l| l.starts_with("perf stat -x, "))
                .unwrap();
            let groups = groups_of(cmd);
            assert!(!groups.is_empty(), "{}: {cmd}", m.key);
            // Build what perf would write: every event counted, 50% of the time in groups.
            let mut csv = String::from("# started on Sun Nov 22 17:00:00 2026\n\n");
            for (gi, g) in groups.iter().enumerate() {
                for (i, spec) in g.iter().enumerate() {
                    if spec.contains("/slots/") || spec == "slots" {
                        assert_eq!(i, 0, "{}: slots must lead its group: {g:?}", m.key);
                    }
                    if spec.contains("topdown-") {
                        assert!(
                            g[0] == "slots" || g[0].ends_with("/slots/"),
                            "{}: topdown event without slots leader: {g:?}",
                            m.key
                        );
                    }
                    let value = 1_000_000 * (gi + 2) as u64 + 1000 * i as u64;
                    csv.push_str(&format!(
                        "{value},,{},500000000,50.00,,\n",
                        printed_name(spec)
                    ));
                }
            }
            let f = dir.path().join(format!("{}-{level}.csv", m.key));
            std::fs::write(&f, &csv).unwrap();
            let o = run(&[
                "stat",
                "--import",
                f.to_str().unwrap(),
                "--cpu",
                m.key,
                "-l",
                &lv,
                "--json",
            ]);
            let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&ok(&o))
                .into_iter()
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| panic!("{} level {level}: {e}", m.key));
            // A hybrid part's recording holds every core type: a tree each and the merged
            // view, each type's counts told apart by their PMU prefix (`name=` would hide it).
            let types: Vec<&str> = docs
                .iter()
                .filter_map(|d| d["core_type"].as_str())
                .collect();
            if tma_stat::core_family(m).len() > 1 {
                assert_eq!(
                    types,
                    ["P-core", "E-core", "merged"],
                    "{} level {level}",
                    m.key
                );
            } else {
                assert_eq!(docs.len(), 1, "{} level {level}", m.key);
            }
            for n in docs
                .iter()
                .flat_map(|j| j["intervals"][0]["nodes"].as_array().unwrap())
            {
                // Retire latencies without a table default come from TPEBS sampling, not
                // from counting: `tma events` says so, and they stay missing here.
                let only_retire_latency = n["missing_events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|e| e.as_str().unwrap().ends_with(":retire_latency"));
                assert!(
                    n["status"] != "missing_events" || only_retire_latency,
                    "{} level {level}: {n}\n{csv}",
                    m.key
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} model/level pairs");
}

#[test]
fn list_shows_the_tma_version_and_the_hierarchy_shape() {
    // Cascade Lake: perfmon's ParentCategory puts Serializing_Operation under
    // Ports_Utilized_0; its Level, threshold and legacy name put it under Core_Bound.
    let out = ok(&run(&["list", "--cpu", "clx", "-l", "4"]));
    assert!(
        out.starts_with("Cascade Lake-SP (clx, from --cpu): TMA 5.01, "),
        "{out}"
    );
    assert!(
        out.contains("\n    Serializing_Operation  [level 3]"),
        "{out}"
    );
    assert!(out.contains("\n      Slow_Pause  [level 4]"), "{out}");
    assert!(out.contains("\n      Nop_Instructions  [level 4]"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&ok(&run(&["list", "--cpu", "spr", "--json"]))).unwrap();
    assert_eq!(j["cpu"]["tma_version"], "5.2");
    let j: serde_json::Value =
        serde_json::from_str(&ok(&run(&["list", "--cpu", "zen4", "--json"]))).unwrap();
    assert!(j["cpu"]["tma_version"].is_null());
}

/// `tma list --events`: every documented core event with its encoding, not only the events
/// the formulas use.
#[test]
fn list_events_spr_includes_events_no_formula_uses() {
    let out = ok(&run(&["list", "--events", "--cpu", "spr"]));
    assert!(
        out.starts_with("Sapphire Rapids (spr, from --cpu): "),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.contains("MEM_LOAD_RETIRED.LOCAL_PMM"))
        .expect("MEM_LOAD_RETIRED.LOCAL_PMM listed");
    assert!(line.contains("cpu/event=0xd1,umask=0x80/"), "{line}");
    assert!(!line.trim_start().starts_with('*'), "{line}");
    let slots = out.lines().find(|l| l.contains(" TOPDOWN.SLOTS ")).unwrap();
    assert!(
        slots.trim_start().starts_with('*') && slots.contains("slots"),
        "{slots}"
    );

    let o = run(&[
        "list",
        "--events",
        "l3_miss_retired.remote_pmm",
        "--cpu",
        "spr",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(v["schema"], "tma.list.events");
    let evs = v["events"].as_array().unwrap();
    assert_eq!(evs.len(), 1, "{v}");
    assert_eq!(evs[0]["name"], "MEM_LOAD_L3_MISS_RETIRED.REMOTE_PMM");
    assert_eq!(evs[0]["perf"], "cpu/event=0xd3,umask=0x10/");
    assert_eq!(evs[0]["used"], false);

    // AMD: the kernel files' core events too.
    let out = ok(&run(&["list", "--events", "ls_dispatch", "--cpu", "zen4"]));
    assert!(out.contains("ls_dispatch.ld_dispatch"), "{out}");
    assert!(out.contains("cpu/event=0x29,umask=0x1/"), "{out}");
}

#[test]
fn events_include_the_events_of_requested_metrics() {
    let json =
        |args: &[&str]| -> serde_json::Value { serde_json::from_str(&ok(&run(args))).unwrap() };
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    let base = names(&json(&["events", "--cpu", "icx", "-l", "1", "--json"]));
    let with = names(&json(&[
        "events", "--cpu", "icx", "-l", "1", "-m", "IPC,ILP", "-B", "--json",
    ]));
    assert!(with.len() > base.len(), "{} vs {}", with.len(), base.len());
    for e in &base {
        assert!(with.contains(e), "{e} dropped");
    }
    // IPC = INST_RETIRED.ANY / CPU_CLK_UNHALTED.THREAD; ILP needs UOPS_EXECUTED.THREAD.
    for e in ["INST_RETIRED.ANY", "UOPS_EXECUTED.THREAD"] {
        assert!(with.iter().any(|w| w == e), "{e} missing: {with:?}");
    }
    // The printed follow-up repeats the metric flags.
    let cmd = ok(&run(&[
        "events",
        "--cpu",
        "icx",
        "-l",
        "1",
        "-m",
        "IPC,ILP",
        "-B",
        "--perf-cmd",
    ]));
    let then = cmd.lines().last().unwrap();
    assert!(
        then.ends_with("--cpu icx -l 1 --metrics=IPC,ILP -B"),
        "{then}"
    );
    // -M TopdownL2 raises the level.
    let l2 = json(&["events", "--cpu", "icx", "-M", "TopdownL2", "--json"]);
    assert_eq!(l2["level"], 2);
}

#[test]
fn list_metrics_by_group_text_and_json() {
    let out = ok(&run(&["list", "--cpu", "spr", "--metrics", "Thread"]));
    assert!(
        out.starts_with("Sapphire Rapids (spr, from --cpu): "),
        "{out}"
    );
    assert!(out.contains("\nThread\n"), "{out}");
    for m in ["  IPC ", "  CPI "] {
        assert!(out.contains(m), "{m} missing: {out}");
    }
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&[
        "list",
        "--cpu",
        "spr",
        "--metrics",
        "ipc",
        "--json",
    ])))
    .unwrap();
    assert_eq!(v["schema"], "tma.list.metrics");
    let ipc = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "Info_Thread_IPC")
        .expect("IPC listed");
    assert_eq!(
        ipc["formula"],
        "INST_RETIRED.ANY / ( CPU_CLK_UNHALTED.THREAD )"
    );
    let none = ok(&run(&[
        "list",
        "--cpu",
        "spr",
        "--metrics",
        "no-such-metric",
    ]));
    assert!(none.contains(": 0 helper metrics matching"), "{none}");
    // Bad combination: one listing at a time.
    let o = run(&["list", "--cpu", "spr", "--metrics", "--events"]);
    assert_eq!(o.status.code(), Some(2));
}
