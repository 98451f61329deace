//! Real `perf stat` runs that other people published (tests/fixtures/import/real/, each with
//! its citation in source.json), imported as perf wrote them, in its three forms: the
//! human-readable text, `-x,` CSV and `-j` JSON. Every value perf printed for a node of the
//! tree must be matched by tma's to perf's printed precision.

use serde_json::Value;
use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// Each recording, the number of node values perf printed in it (counted by hand from
/// perf-output.txt: the `#` lines naming a Top-down node), and the nodes whose value perf
/// computed with a formula tma's tables do not have (each explained in the recording's
/// source.json): those must be flagged, every other value must agree.
const RECORDINGS: &[(&str, usize, &[&str])] = &[
    ("zen4-copyif-blog-l1", 4, &[]),
    ("zen4-benchpicalc-AvxPi-1", 8, &[]),
    ("zen4-kinematics-OmpSimdSim-gcc", 8, &[]),
    ("adl-lkml-2023-hybrid-json", 4, &[]),
    ("adl-lkml-2025-perf6.16", 8, &[]),
    ("tgl-lkml-2023-skippable-b", 4, &[]),
    ("icl-lkml-2025-pickevsel-after", 4, &[]),
    ("skl-lkml-2022-andi-topdownl1", 4, &[]),
    ("spr-lkml-2026-kvm-topdown-host", 4, &[]),
    ("spr-lkml-2026-kvm-topdown-guest", 4, &[]),
    ("spr-lkml-2025-dapeng-topdownl1", 4, &[]),
    ("spr-lkml-2025-dapeng-topdownl2", 8, &[]),
    ("adl-lkml-2023-hybrid-topdownl2-core", 8, &[]),
    // perf's 2023 E-core tree defined Core_Bound and Resource_Bound from other events.
    (
        "adl-lkml-2023-hybrid-topdownl2",
        14,
        &["E-core Core_Bound", "E-core Resource_Bound"],
    ),
    // SMT on, one process: the core clocks estimated, as perf did.
    ("clx-lkml-2023-skippable-kan", 4, &[]),
    ("tgl-perfwiki-memcpy-topdownl1", 4, &[]),
    ("tgl-perfwiki-memcpy-backend-group", 3, &[]),
    ("tgl-perfwiki-memcpy-core-group", 3, &[]),
    // perf 6.1's Ports_Utilized_0 added the scoreboard stalls (TMA 4.x).
    ("tgl-perfwiki-memcpy-ports-group", 4, &["Ports_Utilized_0"]),
    // perf's 2023 N2 formulas have no BR_MIS_PRED term; this run did not count it, which
    // tma's (Arm's telemetry) formulas for these three need (source.json).
    (
        "neoverse-n2-lkml-2023-v7-topdownl1",
        4,
        &["frontend_bound", "backend_bound", "bad_speculation"],
    ),
];

const FORMS: &[&str] = &["perf-output.txt", "perf-stat.csv", "perf-stat.json"];

#[test]
fn the_seeds_command_imports_on_the_zen5_tables() {
    // `perf stat -M PipelineL1,PipelineL2` in perf's layout with Zen 5 events: synthetic
    // counts (tests/fixtures/import/zen5-pipeline-synthetic/make.py), five groups each with
    // its own ls_not_halted_cyc, perf's values computed on each group's own copies.
    for form in FORMS {
        let file = fixture(&format!("import/zen5-pipeline-synthetic/{form}"));
        let file = file.to_str().unwrap();
        let o = TMA.run(&["stat", "--import", file, "--cpu", "zen5", "-l", "2", "-v"]);
        assert!(o.status.success(), "{form}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.contains("perf printed 13 values for these nodes; tma agrees with each"),
            "{form}: {out}"
        );
        assert!(
            !stderr(&o).contains("mixes groups"),
            "{form}: {}",
            stderr(&o)
        );
    }
}

/// The documents of a `--json` output: one per tree (two for a hybrid recording).
fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(|d| d.expect("valid JSON"))
        .collect()
}

fn source(name: &str) -> Value {
    let path = fixture(&format!("import/real/{name}/source.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

#[test]
fn every_value_perf_printed_is_matched_in_each_form() {
    for &(name, printed, differ) in RECORDINGS {
        let src = source(name);
        let cpu = src["cpu"].as_str().unwrap();
        let level = src["level"].to_string();
        let smt = src["smt"].as_str().unwrap_or("off");
        for form in FORMS {
            let file = fixture(&format!("import/real/{name}/{form}"));
            let file = file.to_str().unwrap();
            let args = [
                "stat", "--import", file, "--cpu", cpu, "-l", &level, "--smt", smt, "-v", "--json",
            ];
            let o = TMA.run(&args);
            assert!(o.status.success(), "{name}/{form}: {}", stderr(&o));
            let docs = documents(&stdout(&o));
            let mut checks = Vec::new();
            for d in &docs {
                // A hybrid recording's trees are told apart by their core type.
                let core = d["core_type"].as_str().map(|t| format!("{t} "));
                for iv in d["intervals"].as_array().unwrap() {
                    for n in iv["nodes"].as_array().unwrap() {
                        if let Some(p) = n.get("perf") {
                            let node = format!(
                                "{}{}",
                                core.as_deref().unwrap_or(""),
                                n["name"].as_str().unwrap()
                            );
                            checks.push((node, n["value"].clone(), p.clone()));
                        }
                    }
                }
            }
            assert_eq!(checks.len(), printed, "{name}/{form}: {checks:#?}");
            for (node, value, p) in &checks {
                let expected = !differ.contains(&node.as_str());
                assert_eq!(
                    p["agrees"],
                    Value::Bool(expected),
                    "{name}/{form}: {node} is {value}, perf printed {p}"
                );
            }
        }
    }
}

/// perf computes each metric from the group it prints it beside: runs where another group
/// also holds the metric's events, or holds them under another name (`cycles` for
/// `CPU_CLK_UNHALTED.THREAD`), in tests/fixtures/import/copies/ (each source.json says how
/// it was made). Every value perf printed must agree, in each form.
#[test]
fn each_metric_reads_the_group_perf_printed_it_beside() {
    for (name, printed) in [
        ("zen4-pipelinel2-printed-group", 8),
        ("skl-topdownl1-cycles-in-frontend-group", 3),
    ] {
        let src: Value = serde_json::from_slice(
            &std::fs::read(fixture(&format!("import/copies/{name}/source.json"))).unwrap(),
        )
        .unwrap();
        for form in FORMS {
            let file = fixture(&format!("import/copies/{name}/{form}"));
            let o = TMA.run(&[
                "stat",
                "--import",
                file.to_str().unwrap(),
                "--cpu",
                src["cpu"].as_str().unwrap(),
                "-l",
                &src["level"].to_string(),
                "--smt",
                "off",
            ]);
            assert!(o.status.success(), "{name}/{form}: {}", stderr(&o));
            let out = stdout(&o);
            let want =
                format!("perf printed {printed} values for these nodes; tma agrees with each");
            assert!(out.contains(&want), "{name}/{form}: {out}");
        }
    }
}

#[test]
fn hybrid_recording_gives_a_tree_per_core_type() {
    let file = fixture("import/real/adl-lkml-2025-perf6.16/perf-output.txt");
    let file = file.to_str().unwrap();
    let o = TMA.run(&["stat", "--import", file, "--cpu", "adl", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let docs = documents(&stdout(&o));
    let kinds: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| {
            (
                d["cpu"]["key"].as_str().unwrap(),
                d["core_type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, [("adl", "P-core"), ("adl-e", "E-core")]);
    // --cpu names the machine: the E-core table gives the same two trees.
    let o = TMA.run(&["stat", "--import", file, "--cpu", "adl-e", "--csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    assert!(csv.starts_with("core_type,start_s,"), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("P-core,")), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("E-core,")), "{csv}");
    let o = TMA.run(&["stat", "--import", file, "--cpu", "adl"]);
    let text = stdout(&o);
    assert!(text.contains("P-core tree: the cpu_core events"), "{text}");
    assert!(text.contains("E-core tree: the cpu_atom events"), "{text}");
    // diff and report compare one tree: the core type of the table --cpu names.
    for (cpu, tree) in [("adl", "P-core"), ("adl-e", "E-core")] {
        let o = TMA.run(&["diff", file, file, "--cpu", cpu]);
        assert!(o.status.success(), "{cpu}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("this reads the {tree} tree")),
            "{cpu}: {}",
            stderr(&o)
        );
        assert!(
            stdout(&o).contains(&format!("({cpu}): before")),
            "{}",
            stdout(&o)
        );
    }
}

#[test]
fn user_only_counts_are_said_once_and_kept_in_the_json() {
    let file = fixture("import/real/tgl-lkml-2023-skippable-b/perf-stat.csv");
    let file = file.to_str().unwrap();
    let o = TMA.run(&[
        "stat", "--import", file, "--cpu", "tgl", "--smt", "off", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("user space only").count(), 1, "{err}");
    let d = &documents(&stdout(&o))[0];
    assert_eq!(d["scope"], "u");
    let perf: Vec<&str> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["perf"].as_str().unwrap())
        .collect();
    for spelling in [
        "TOPDOWN.SLOTS:u",
        "topdown-retiring:u",
        "INT_MISC.UOP_DROPPING:u",
        "cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/u",
    ] {
        assert!(perf.contains(&spelling), "{spelling} not in {perf:?}");
    }
}

#[test]
fn perf_stat_m_groups_are_read_from_the_copies_counted_together() {
    // perf -M PipelineL2: four groups, each with its own ls_not_halted_cyc; the text says
    // so, and names the nodes whose events no one group holds.
    let file = fixture("import/real/zen4-kinematics-OmpSimdSim-gcc/perf-output.txt");
    let file = file.to_str().unwrap();
    let o = TMA.run(&["stat", "--import", file, "--cpu", "zen4", "-l", "2", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("ls_not_halted_cyc (4 times)"), "{err}");
    let out = stdout(&o);
    assert!(
        out.contains("perf printed 8 values for these nodes; tma agrees with each"),
        "{out}"
    );
}

#[test]
fn a_value_that_does_not_match_is_flagged() {
    // A Zen 4 recording read with the Zen 5 tables (8 dispatch slots a cycle, not 6):
    // perf's values are not tma's, and the tree says so.
    let file = fixture("import/real/zen4-copyif-blog-l1/perf-stat.csv");
    let file = file.to_str().unwrap();
    let o = TMA.run(&["stat", "--import", file, "--cpu", "zen5", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("3 of them differ from tma's"), "{out}");
    assert!(out.contains("≠"), "{out}");
}

/// The bundled Zen 4 recording with each event spec changed by `spell`.
fn respelled(spell: impl Fn(&str) -> String) -> String {
    let text = std::fs::read_to_string(fixture("import/zen4-sha256-synthetic.csv")).unwrap();
    text.lines()
        .map(|l| {
            // value,unit,EVENT,running,share,metric,metric-unit; the event may hold commas.
            let f: Vec<&str> = l.split(',').collect();
            if l.starts_with('#') || f.len() < 7 {
                return l.to_string();
            }
            let event = f[2..f.len() - 4].join(",");
            let mut out: Vec<String> = f[..2].iter().map(|s| s.to_string()).collect();
            out.push(spell(&event));
            out.extend(f[f.len() - 4..].iter().map(|s| s.to_string()));
            out.join(",")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `tma stat --import` of `text` (zen4, level 2, JSON): (stderr, the document).
fn import_json(text: &str) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.csv");
    std::fs::write(&file, text).unwrap();
    let o = TMA.run(&[
        "stat",
        "--import",
        file.to_str().unwrap(),
        "--cpu",
        "zen4",
        "-l",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    (stderr(&o), documents(&stdout(&o)).remove(0))
}

fn node_values(d: &Value) -> Vec<(String, f64)> {
    d["intervals"][0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| Some((n["name"].to_string(), n["value"].as_f64()?)))
        .collect()
}

#[test]
fn modifiers_in_every_position_read_as_the_bare_events() {
    let (_, bare) = import_json(&respelled(|e| e.to_string()));
    let want = node_values(&bare);
    assert!(want.len() > 5);
    // perf writes a modifier after `:` on a name and after the closing `/` of a PMU form.
    fn with(e: &str, m: &str) -> String {
        if e.ends_with('/') {
            format!("{e}{m}")
        } else {
            format!("{e}:{m}")
        }
    }
    fn pmu(e: &str, m: &str) -> String {
        let raw = e.starts_with('r') && e[1..].chars().all(|c| c.is_ascii_hexdigit());
        if raw {
            // A raw `rNNNN` has no PMU form of its own.
            with(e, m.trim_start_matches(':'))
        } else if e.ends_with('/') {
            format!("{e}{m}")
        } else {
            format!("cpu/{e}/{m}")
        }
    }
    /// What is tried, how each event is spelt, the scope the JSON keeps.
    type Case = (&'static str, fn(&str) -> String, Option<&'static str>);
    let cases: [Case; 5] = [
        ("kernel only", |e| with(e, "k"), Some("k")),
        ("user only, pmu form", |e| pmu(e, "u"), Some("u")),
        ("precise only", |e| with(e, "ppp"), None),
        ("guest", |e| with(e, "G"), Some("G")),
        ("host, pmu form with colon", |e| pmu(e, ":H"), Some("H")),
    ];
    for (what, spell, scope) in cases {
        let (err, d) = import_json(&respelled(spell));
        assert_eq!(node_values(&d), want, "{what}");
        match scope {
            Some(s) => {
                assert_eq!(d["scope"], s, "{what}");
                assert_eq!(
                    err.matches("tma: note: every count").count(),
                    1,
                    "{what}: {err}"
                );
            }
            None => {
                assert!(d.get("scope").is_none(), "{what}");
                assert!(!err.contains("every count"), "{what}: {err}");
            }
        }
    }
    // Mixed scopes: the events are still read, and the mix is said.
    let (err, d) = import_json(&respelled(|e| {
        if e == "ls_not_halted_cyc" {
            e.to_string()
        } else {
            with(e, "k")
        }
    }));
    // Level 1 reads named events only, each found without its `:k`.
    let level1 = |v: Vec<(String, f64)>| -> Vec<(String, f64)> {
        v.into_iter()
            .filter(|(n, _)| {
                [
                    "frontend_bound",
                    "bad_speculation",
                    "backend_bound",
                    "retiring",
                ]
                .iter()
                .any(|l| *n == format!("\"{l}\""))
            })
            .collect()
    };
    assert_eq!(level1(node_values(&d)), level1(want.clone()));
    assert!(d.get("scope").is_none());
    assert!(
        err.contains("counts some events in another scope than the rest"),
        "{err}"
    );
}
