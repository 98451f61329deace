//! Recordings that count part of what a tree reads: a hybrid run where one core
//! type counted nothing (`perf stat --cputype core`), and an Arm run of the cache and TLB
//! events alone, with no level-1 event. Each is imported in perf's three forms (text, `-x,`
//! CSV, `-j` JSON). How each fixture was made is in its folder (make.py, README.md).

use serde_json::Value;
use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

const FORMS: &[&str] = &["perf-output.txt", "perf-stat.csv", "perf-stat.json"];

/// The documents of a `--json` output: one per tree.
fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(|d| d.expect("valid JSON"))
        .collect()
}

/// The variants of the real Alder Lake perf 6.16 run (real/adl-lkml-2025-perf6.16) with the
/// E-core rows `<not counted>`: every row the adl-e tree reads, or only the cycles and
/// instructions rows the `--cputype core` run of the issue printed.
const NOT_COUNTED: &[&str] = &["rows-not-counted", "cycles-not-counted"];

#[test]
fn a_core_type_that_counted_nothing_is_a_note_and_the_other_tree_prints() {
    for variant in NOT_COUNTED {
        for form in FORMS {
            let file = fixture(&format!("import/adl-atom-not-counted/{variant}/{form}"));
            let file = file.to_str().unwrap();
            let what = format!("{variant}/{form}");
            let o = TMA.run(&["stat", "--import", file, "--cpu", "adl"]);
            assert!(o.status.success(), "{what}: {}", stderr(&o));
            let (out, err) = (stdout(&o), stderr(&o));
            assert!(
                err.contains(&format!(
                    "tma: note: {file} has no E-core tree: every cpu_atom row is \
                     `<not counted>`"
                )),
                "{what}: {err}"
            );
            assert!(!err.contains("error"), "{what}: {err}");
            // The P-core tree, as the real run gives it: perf's four values matched.
            assert!(
                out.contains("(adl, from --cpu)") && out.contains("P-core tree"),
                "{what}: {out}"
            );
            assert!(
                out.contains("perf printed 4 values for these nodes; tma agrees with each"),
                "{what}: {out}"
            );
            assert!(
                out.contains("Bottleneck: Frontend_Bound (36.5%)"),
                "{what}: {out}"
            );
            assert!(!out.contains("adl-e"), "{what}: no E-core tree\n{out}");

            let o = TMA.run(&["stat", "--import", file, "--cpu", "adl", "--json"]);
            assert!(o.status.success(), "{what}: {}", stderr(&o));
            let docs = documents(&stdout(&o));
            assert_eq!(docs.len(), 1, "{what}: one tree");
            let d = &docs[0];
            assert_eq!(d["cpu"]["key"], "adl", "{what}");
            assert_eq!(d["core_type"], "P-core", "{what}");
            let iv = &d["intervals"][0];
            assert_eq!(iv["bottleneck"]["node"], "Frontend_Bound", "{what}");
            let level1: Vec<f64> = iv["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["level"] == 1)
                .map(|n| n["value"].as_f64().unwrap())
                .collect();
            assert_eq!(level1.len(), 4, "{what}");
        }
    }
}

#[test]
fn a_recording_where_both_core_types_counted_keeps_both_trees() {
    // The run the variants were made from: both trees, no note about a type.
    let file = fixture("import/real/adl-lkml-2025-perf6.16/perf-stat.csv");
    let o = TMA.run(&[
        "stat",
        "--import",
        file.to_str().unwrap(),
        "--cpu",
        "adl",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("has no"), "{}", stderr(&o));
    let types: Vec<Value> = documents(&stdout(&o))
        .iter()
        .map(|d| d["core_type"].clone())
        .collect();
    assert_eq!(types, ["P-core", "E-core"]);
}

/// The synthetic N2 recording of Arm's TLB and cache events alone, and each figure's value
/// from its counts (the events' ratio; per thousand instructions for `mpki`).
const N2_STAGE2: &str = "import/neoverse-n2-tlb-cache-synthetic";

fn n2_counts() -> Vec<(String, f64)> {
    let csv = std::fs::read_to_string(fixture(&format!("{N2_STAGE2}/perf-stat.csv"))).unwrap();
    csv.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[2].to_ascii_uppercase(), f[0].parse().unwrap())
        })
        .collect()
}

/// The figures the recording's events give, with their events: (name without the parent,
/// numerator, denominator). `mpki` figures are per thousand INST_RETIRED.
const N2_FIGURES: &[(&str, &str, &str)] = &[
    ("itlb_mpki", "ITLB_WALK", "INST_RETIRED"),
    ("itlb_walk_ratio", "ITLB_WALK", "L1I_TLB"),
    ("l1i_tlb_mpki", "L1I_TLB_REFILL", "INST_RETIRED"),
    ("l1i_tlb_miss_ratio", "L1I_TLB_REFILL", "L1I_TLB"),
    ("dtlb_mpki", "DTLB_WALK", "INST_RETIRED"),
    ("dtlb_walk_ratio", "DTLB_WALK", "L1D_TLB"),
    ("l1d_tlb_mpki", "L1D_TLB_REFILL", "INST_RETIRED"),
    ("l1d_tlb_miss_ratio", "L1D_TLB_REFILL", "L1D_TLB"),
    ("l2_tlb_mpki", "L2D_TLB_REFILL", "INST_RETIRED"),
    ("l2_tlb_miss_ratio", "L2D_TLB_REFILL", "L2D_TLB"),
    ("l1i_cache_mpki", "L1I_CACHE_REFILL", "INST_RETIRED"),
    ("l1i_cache_miss_ratio", "L1I_CACHE_REFILL", "L1I_CACHE"),
    ("l1d_cache_mpki", "L1D_CACHE_REFILL", "INST_RETIRED"),
    ("l1d_cache_miss_ratio", "L1D_CACHE_REFILL", "L1D_CACHE"),
    ("l2_cache_mpki", "L2D_CACHE_REFILL", "INST_RETIRED"),
    ("l2_cache_miss_ratio", "L2D_CACHE_REFILL", "L2D_CACHE"),
    ("ll_cache_read_mpki", "LL_CACHE_MISS_RD", "INST_RETIRED"),
    (
        "ll_cache_read_miss_ratio",
        "LL_CACHE_MISS_RD",
        "LL_CACHE_RD",
    ),
];

#[test]
fn arm_stage2_groups_alone_show_every_figure_they_compute() {
    let counts = n2_counts();
    let count = |e: &str| {
        counts
            .iter()
            .find(|(n, _)| n == e)
            .unwrap_or_else(|| panic!("{e} in the recording"))
            .1
    };
    // Each figure's value from the counts; the LL hit ratio is 1 - the miss ratio.
    let expected = |name: &str| -> f64 {
        let fig = name.split_once("__").unwrap().1;
        if fig == "ll_cache_read_hit_ratio" {
            return 1.0 - count("LL_CACHE_MISS_RD") / count("LL_CACHE_RD");
        }
        let &(_, num, den) = N2_FIGURES
            .iter()
            .find(|(f, _, _)| *f == fig)
            .unwrap_or_else(|| panic!("{name} is not a figure of these events"));
        let scale = if fig.ends_with("mpki") { 1000.0 } else { 1.0 };
        count(num) / count(den) * scale
    };
    for form in FORMS {
        let file = fixture(&format!("{N2_STAGE2}/{form}"));
        let file = file.to_str().unwrap();
        let args = ["stat", "--import", file, "--cpu", "neoverse-n2", "-l", "2"];

        // --json: every figure these events give has its value, and there is no path.
        let o = TMA.run(&[&args[..], &["--json"]].concat());
        assert!(o.status.success(), "{form}: {}", stderr(&o));
        let d = &documents(&stdout(&o))[0];
        let iv = &d["intervals"][0];
        assert_eq!(iv["bottleneck"]["path"], Value::Array(Vec::new()), "{form}");
        let nodes = iv["nodes"].as_array().unwrap();
        assert!(
            nodes
                .iter()
                .filter(|n| n["level"] == 1)
                .all(|n| n["value"].is_null()),
            "{form}: no level-1 node has a value"
        );
        let computed: Vec<(&str, f64)> = nodes
            .iter()
            .filter_map(|n| Some((n["name"].as_str().unwrap(), n["value"].as_f64()?)))
            .collect();
        // 13 TLB and cache figures under frontend_bound (instruction side) and 13 under
        // backend_bound (data side), the L2 TLB and L2/LL cache ones under both.
        assert_eq!(computed.len(), 26, "{form}: {computed:?}");
        for &(name, v) in &computed {
            let want = expected(name);
            assert!(
                (v - want).abs() <= 1e-9 * want.abs(),
                "{form}: {name} = {v}, not {want}"
            );
        }
        for name in [
            "frontend_bound__l2_cache_miss_ratio",
            "backend_bound__dtlb_mpki",
        ] {
            assert!(computed.iter().any(|(n, _)| *n == name), "{form}: {name}");
        }

        // The text tree shows each of them with its value, and calls none off-path: there
        // is no path, so nothing is off it.
        let o = TMA.run(&args);
        assert!(o.status.success(), "{form}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.contains("No bottleneck: the level-1 nodes could not be computed."),
            "{form}: {out}"
        );
        assert!(!out.contains("off the bottleneck"), "{form}: {out}");
        assert!(!out.contains("hidden"), "{form}: {out}");
        for &(name, v) in &computed {
            let line = out
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{form}: {name} not shown\n{out}"));
            let value = format!("{v:.3}");
            assert!(line.contains(&value), "{form}: {name} = {value}\n{line}");
            assert!(!line.contains("missing"), "{form}: {line}");
        }
    }
}

#[test]
fn with_a_path_the_figures_off_it_stay_hidden() {
    // The synthetic full N2 recording (import/arm/): level 1 is computed, so the figures
    // of the nodes off the bottleneck's path are hidden without -v, as before.
    let file = fixture("import/arm/neoverse-n2.csv");
    let o = TMA.run(&[
        "stat",
        "--import",
        file.to_str().unwrap(),
        "--cpu",
        "neoverse-n2",
        "-l",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("Bottleneck: "), "{out}");
    assert!(
        out.contains("drill-down figures of nodes off the bottleneck's path hidden"),
        "{out}"
    );
}
