//! E-core (`cpu_atom`) tables: Gracemont (`adl-e`) and Crestmont (`mtl-e`).
//! Encodings are checked against values copied by hand from the perfmon E-core event files
//! and, when `shared/pmu-data` is present, against every field of those files.

use std::path::PathBuf;

use serde_json::Value;
use tma_catalog::{by_name, identify, models, CoreKind, EventKind, Model, Topdown, Unit};

fn adl_e() -> &'static Model {
    by_name("adl-e").unwrap()
}
fn mtl_e() -> &'static Model {
    by_name("mtl-e").unwrap()
}

#[test]
fn model_facts() {
    for (m, width, gp) in [(adl_e(), 5, 6), (mtl_e(), 6, 8)] {
        assert_eq!(m.core_kind, CoreKind::Efficiency, "{}", m.key);
        assert_eq!(m.pmu, "cpu_atom");
        assert_eq!(m.topdown, Topdown::Generic);
        // Gracemont "Counter": "0,1,2,3,4,5", Crestmont "0,...,7"; three fixed counters.
        assert_eq!(
            (m.slots_per_cycle, m.gp_counters, m.fixed_counters),
            (width, gp, 3),
            "{}",
            m.key
        );
        // No PERF_METRICS, no slots event on the E-cores.
        assert!(m.events.iter().all(|e| e.kind == EventKind::Core));
        assert!(m.retire_latencies.is_empty());
    }
}

#[test]
fn tree_shape_levels_1_to_3() {
    for m in [adl_e(), mtl_e()] {
        assert_eq!(m.nodes.len(), 26, "{}", m.key);
        let kids = |p: Option<&str>| m.children(p).map(|n| n.name).collect::<Vec<_>>();
        assert_eq!(
            kids(None),
            [
                "Frontend_Bound",
                "Bad_Speculation",
                "Backend_Bound",
                "Retiring"
            ]
        );
        assert_eq!(
            kids(Some("Frontend_Bound")),
            ["Ifetch_Latency", "Ifetch_Bandwidth"]
        );
        assert_eq!(
            kids(Some("Ifetch_Latency")),
            [
                "ICache_Misses",
                "ITLB_Misses",
                "Branch_Detect",
                "Branch_Resteer"
            ]
        );
        assert_eq!(
            kids(Some("Ifetch_Bandwidth")),
            ["CISC", "Decode", "Predecode", "Other_FB"]
        );
        assert_eq!(
            kids(Some("Bad_Speculation")),
            ["Branch_Mispredicts", "Machine_Clears"]
        );
        assert_eq!(kids(Some("Machine_Clears")), ["Nuke", "Fast_Nuke"]);
        assert_eq!(
            kids(Some("Backend_Bound")),
            ["Core_Bound", "Resource_Bound"]
        );
        assert_eq!(kids(Some("Core_Bound")), ["Allocation_Restriction"]);
        assert_eq!(
            kids(Some("Resource_Bound")),
            [
                "Mem_Scheduler",
                "Non_Mem_Scheduler",
                "Register",
                "Reorder_Buffer",
                "Serialization"
            ]
        );
        assert_eq!(kids(Some("Retiring")), Vec::<&str>::new());
        for n in m.nodes {
            assert!(n.level <= 3);
            assert_eq!((n.unit, n.count_domain), (Unit::PercentSlots, "Slots"));
            assert!(!n.threshold.is_empty() && !n.formula.is_empty());
            // Our E-core wording, not the P-core line of a same-named node.
            assert_eq!(
                Some(n.description),
                tma_catalog::descriptions::describe_ecore(n.name),
                "{}",
                n.name
            );
        }
    }
    // The P-core Core_Bound line does not describe the E-core node of that name.
    assert_ne!(
        adl_e().node("Core_Bound").unwrap().description,
        by_name("adl")
            .unwrap()
            .node("Core_Bound")
            .unwrap()
            .description
    );
}

#[test]
fn formulas_and_thresholds_follow_the_kernel_facts() {
    let a = adl_e();
    let f = |m: &Model, n: &str| m.node(n).unwrap().formula;
    let t = |m: &Model, n: &str| m.node(n).unwrap().threshold;
    assert_eq!(
        f(a, "Frontend_Bound"),
        "100 * TOPDOWN_FE_BOUND.ALL / ( 5 * CPU_CLK_UNHALTED.CORE )"
    );
    // Gracemont: bad speculation is what the three counted level-1 events leave.
    assert_eq!(
        f(a, "Bad_Speculation"),
        "100 * ( ( 5 * CPU_CLK_UNHALTED.CORE ) - ( TOPDOWN_FE_BOUND.ALL + TOPDOWN_BE_BOUND.ALL + TOPDOWN_RETIRING.ALL ) ) / ( 5 * CPU_CLK_UNHALTED.CORE )"
    );
    assert_eq!(
        f(a, "ITLB_Misses"),
        "100 * TOPDOWN_FE_BOUND.ITLB / ( 5 * CPU_CLK_UNHALTED.CORE )"
    );
    assert_eq!(f(a, "Resource_Bound"), "Backend_Bound - Core_Bound");
    assert_eq!(f(a, "Allocation_Restriction"), "Core_Bound");
    let m = mtl_e();
    // Crestmont: counted bad speculation, `_P` level-1 names, width 6, ITLB_MISS.
    assert_eq!(
        f(m, "Bad_Speculation"),
        "100 * TOPDOWN_BAD_SPECULATION.ALL_P / ( 6 * CPU_CLK_UNHALTED.CORE )"
    );
    assert_eq!(
        f(m, "Retiring"),
        "100 * TOPDOWN_RETIRING.ALL_P / ( 6 * CPU_CLK_UNHALTED.CORE )"
    );
    assert_eq!(
        f(m, "ITLB_Misses"),
        "100 * TOPDOWN_FE_BOUND.ITLB_MISS / ( 6 * CPU_CLK_UNHALTED.CORE )"
    );
    for x in [a, m] {
        assert_eq!(t(x, "Frontend_Bound"), "Frontend_Bound > 20");
        assert_eq!(t(x, "Bad_Speculation"), "Bad_Speculation > 15");
        assert_eq!(t(x, "Backend_Bound"), "Backend_Bound > 10");
        assert_eq!(t(x, "Retiring"), "Retiring > 75");
        assert_eq!(
            t(x, "Ifetch_Latency"),
            "Ifetch_Latency > 15 & Frontend_Bound > 20"
        );
        assert_eq!(
            t(x, "Predecode"),
            "Predecode > 5 & Ifetch_Bandwidth > 10 & Frontend_Bound > 20"
        );
        assert_eq!(
            t(x, "Fast_Nuke"),
            "Fast_Nuke > 5 & Machine_Clears > 5 & Bad_Speculation > 15"
        );
        assert_eq!(
            t(x, "Register"),
            "Register > 10 & Resource_Bound > 20 & Backend_Bound > 10"
        );
        assert_eq!(
            t(x, "Allocation_Restriction"),
            "Allocation_Restriction > 10 & Core_Bound > 10 & Backend_Bound > 10"
        );
    }
}

/// Values copied from intel/ADL/events/alderlake_gracemont_core.json and
/// intel/MTL/events/meteorlake_crestmont_core.json.
#[test]
fn encodings_match_the_perfmon_e_core_files() {
    let a = adl_e();
    let e = a.encode("TOPDOWN_RETIRING.ALL").unwrap();
    assert_eq!((e.pmu, e.config, e.counter_mask), ("cpu_atom", 0xc2, 0x3f));
    assert!(e.precise && e.fixed.is_none());
    let e = a.encode("TOPDOWN_FE_BOUND.FRONTEND_LATENCY").unwrap();
    assert_eq!(e.config, 0x7271);
    let e = a.encode("TOPDOWN_FE_BOUND.FRONTEND_BANDWIDTH").unwrap();
    assert_eq!(e.config, 0x8d71);
    let e = a.encode("TOPDOWN_BE_BOUND.REORDER_BUFFER").unwrap();
    assert_eq!(e.config, 0x4074);
    let e = a.encode("TOPDOWN_BAD_SPECULATION.MACHINE_CLEARS").unwrap();
    assert_eq!(e.config, 0x0373);
    // Fixed counters: perf's real encodings (instructions 0xC0, cycles 0x3C, ref 0x0300).
    let e = a.encode("INST_RETIRED.ANY").unwrap();
    assert_eq!((e.config, e.fixed, e.counter_mask), (0xc0, Some(0), 0));
    let e = a.encode("CPU_CLK_UNHALTED.CORE").unwrap();
    assert_eq!((e.config, e.fixed), (0x3c, Some(1)));
    let e = a.encode("CPU_CLK_UNHALTED.REF_TSC").unwrap();
    assert_eq!((e.config, e.fixed), (0x0300, Some(2)));
    // Modified fixed event: needs one of the six general counters.
    let e = a.encode("CPU_CLK_UNHALTED.CORE:c1").unwrap();
    assert_eq!((e.fixed, e.counter_mask), (None, 0x3f));
    let e = a.encode("CPU_CLK_UNHALTED.CORE_P:SUP").unwrap();
    assert_eq!((e.config, e.exclude_user), (0x3c, true));

    let m = mtl_e();
    let e = m.encode("TOPDOWN_RETIRING.ALL_P").unwrap();
    assert_eq!((e.config, e.counter_mask), (0x72, 0xff));
    assert!(e.precise);
    let e = m.encode("TOPDOWN_BAD_SPECULATION.ALL_P").unwrap();
    assert_eq!(e.config, 0x73);
    let e = m.encode("TOPDOWN_FE_BOUND.ITLB_MISS").unwrap();
    assert_eq!(e.config, 0x1071);
    let e = m.encode("TOPDOWN_BE_BOUND.ALLOC_RESTRICTIONS").unwrap();
    assert_eq!(e.config, 0x0174);
    // Every event of the E-core file is known, also those no formula uses: Crestmont's
    // deprecated alias TOPDOWN_FE_BOUND.ITLB has the encoding of TOPDOWN_FE_BOUND.ITLB_MISS.
    assert_eq!(m.encode("TOPDOWN_FE_BOUND.ITLB").unwrap().config, 0x1071);
    // Events of the P-core tables are not here.
    assert!(m.encode("TOPDOWN.SLOTS").is_err());
    assert!(a.encode("TOPDOWN.SLOTS").is_err());
}

fn perfmon_file(rel: &str) -> Option<Value> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/pmu-data/intel")
        .join(rel);
    let bytes = std::fs::read(&p).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn num(v: &Value, k: &str) -> u64 {
    let s = v[k].as_str().unwrap_or("0");
    let s = s.split(',').next().unwrap_or("0").trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap_or(0),
    }
}

/// Every event of both E-core tables against every field of the perfmon file it came from.
#[test]
fn every_e_core_event_matches_its_perfmon_row() {
    for (m, rel) in [
        (adl_e(), "ADL/events/alderlake_gracemont_core.json"),
        (mtl_e(), "MTL/events/meteorlake_crestmont_core.json"),
    ] {
        let Some(json) = perfmon_file(rel) else {
            eprintln!("skipped: no shared/pmu-data/intel/{rel}");
            return;
        };
        let rows = json["Events"].as_array().unwrap();
        for e in m.events {
            let row = rows
                .iter()
                .find(|r| r["EventName"].as_str() == Some(e.name))
                .unwrap_or_else(|| panic!("{}: {} not in {rel}", m.key, e.name));
            let counter = row["Counter"].as_str().unwrap();
            let (code, umask) = (num(row, "EventCode"), num(row, "UMask"));
            match counter.strip_prefix("Fixed counter ") {
                Some(i) => {
                    let i: u8 = i.parse().unwrap();
                    assert_eq!(e.fixed, Some(i), "{}", e.name);
                    assert_eq!(e.counter_mask, 0, "{}", e.name);
                    // perfmon's pseudo encoding 0x00 / index+1, kept unless a conversion
                    // to perf's real encoding is named in tma_catalog::conversions.
                    assert_eq!((code, umask), (0, i as u64 + 1), "{}", e.name);
                    let ours = tma_catalog::conversion_for(e.name)
                        .map_or((code, umask), |c| (c.ours.0.into(), c.ours.1.into()));
                    assert_eq!((e.code as u64, e.umask as u64), ours, "{}", e.name);
                }
                None => {
                    let mask: u32 = counter
                        .split(',')
                        .map(|c| 1u32 << c.trim().parse::<u32>().unwrap())
                        .sum();
                    assert_eq!(e.counter_mask, mask, "{}", e.name);
                    assert_eq!(e.fixed, None);
                    assert_eq!((e.code as u64, e.umask as u64), (code, umask), "{}", e.name);
                }
            }
            assert_eq!(e.cmask as u64, num(row, "CounterMask"), "{}", e.name);
            assert_eq!(e.inv, num(row, "Invert") == 1, "{}", e.name);
            assert_eq!(e.edge, num(row, "EdgeDetect") == 1, "{}", e.name);
            assert_eq!(e.precise, num(row, "Precise") == 1, "{}", e.name);
            assert_eq!(e.msr_index as u64, num(row, "MSRIndex"), "{}", e.name);
            assert_eq!(e.sample_after, num(row, "SampleAfterValue"), "{}", e.name);
            assert_eq!(e.taken_alone, num(row, "TakenAlone") == 1, "{}", e.name);
            assert!(!e.any_thread);
            // The tables hold every documented event, deprecated ones too; the formulas
            // use none of those.
            let used = m.event_ids().iter().any(|id| {
                tma_catalog::EventId::parse(id)
                    .base
                    .eq_ignore_ascii_case(e.name)
            });
            if used {
                assert_eq!(num(row, "Deprecated"), 0, "{}: deprecated", e.name);
            }
        }
    }
}

#[test]
fn names_and_aliases() {
    for (alias, key) in [
        ("adl-e", "adl-e"),
        ("ADL_E", "adl-e"),
        ("gracemont", "adl-e"),
        ("alderlake-e", "adl-e"),
        ("raptorlake-e", "adl-e"),
        ("alderlake-n", "adl-e"),
        ("mtl-e", "mtl-e"),
        ("Crestmont", "mtl-e"),
        ("meteorlake-e", "mtl-e"),
    ] {
        assert_eq!(by_name(alias).unwrap().key, key, "{alias}");
    }
    // The P-core names still give the P-core tables.
    assert_eq!(by_name("alderlake").unwrap().key, "adl");
    assert_eq!(by_name("mtl").unwrap().key, "mtl");
    let e = by_name("tremont").unwrap_err().to_string();
    assert!(e.contains("adl-e") && e.contains("gracemont"), "{e}");
}

#[test]
fn hybrid_identify_gives_p_then_e() {
    let keys = |m: u32| -> Vec<&str> {
        identify("GenuineIntel", 6, m, 2)
            .unwrap()
            .iter()
            .map(|m| m.key)
            .collect()
    };
    for m in [0x97, 0x9A, 0xB7, 0xBA, 0xBF] {
        assert_eq!(keys(m), ["adl", "adl-e"], "{m:#x}");
    }
    for m in [0xAA, 0xAC, 0xB5] {
        assert_eq!(keys(m), ["mtl", "mtl-e"], "{m:#x}");
    }
    assert_eq!(keys(0xBE), ["adl-e"]);
    let v = identify("GenuineIntel", 6, 0x97, 2).unwrap();
    assert_eq!(
        v.iter().map(|m| (m.pmu, m.core_kind)).collect::<Vec<_>>(),
        [
            ("cpu_core", CoreKind::Performance),
            ("cpu_atom", CoreKind::Efficiency)
        ]
    );
    // Every E-core model is reachable from some CPUID.
    for m in models()
        .iter()
        .filter(|m| m.core_kind == CoreKind::Efficiency)
    {
        assert!(["adl-e", "mtl-e"].contains(&m.key), "{}", m.key);
    }
}

#[test]
fn perf_forms_on_cpu_atom() {
    let a = adl_e();
    assert_eq!(
        a.perf_event_spec("TOPDOWN_FE_BOUND.ALL").unwrap(),
        "cpu_atom/event=0x71,umask=0x0,name=TOPDOWN_FE_BOUND.ALL/"
    );
    assert_eq!(
        a.resolve_perf_event("cpu_atom/event=0x71,umask=0x72/")
            .unwrap(),
        "TOPDOWN_FE_BOUND.FRONTEND_LATENCY"
    );
    assert_eq!(
        a.resolve_perf_event("cpu_atom/cycles/").unwrap(),
        "CPU_CLK_UNHALTED.CORE"
    );
    assert_eq!(
        a.resolve_perf_event("cpu_atom/instructions/").unwrap(),
        "INST_RETIRED.ANY"
    );
    // cpu_atom's topdown-* sysfs events are generic events, not PERF_METRICS.
    assert_eq!(
        a.resolve_perf_event("cpu_atom/topdown-fe-bound/").unwrap(),
        "TOPDOWN_FE_BOUND.ALL"
    );
    assert_eq!(
        a.resolve_perf_event("cpu_atom/topdown-retiring/").unwrap(),
        "TOPDOWN_RETIRING.ALL"
    );
    assert_eq!(
        a.resolve_perf_event("cpu_atom/topdown-be-bound/").unwrap(),
        "TOPDOWN_BE_BOUND.ALL"
    );
    // Gracemont bad speculation is derived, so that alias feeds no formula.
    assert!(a.resolve_perf_event("cpu_atom/topdown-bad-spec/").is_err());
    assert!(a.resolve_perf_event("cpu_atom/slots/").is_err());
    let m = mtl_e();
    assert_eq!(
        m.resolve_perf_event("cpu_atom/topdown-retiring/").unwrap(),
        "TOPDOWN_RETIRING.ALL_P"
    );
    assert_eq!(
        m.resolve_perf_event("cpu_atom/topdown-bad-spec/").unwrap(),
        "TOPDOWN_BAD_SPECULATION.ALL_P"
    );
    // An event counted on the other core type's PMU is refused, both ways.
    let adl = by_name("adl").unwrap();
    let e = adl
        .resolve_perf_event("cpu_atom/cycles/")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cpu_atom") && e.contains("cpu_core"), "{e}");
    assert!(a.resolve_perf_event("cpu_core/cycles/").is_err());
    assert!(a
        .resolve_perf_event("cpu_core/event=0x71,umask=0x0/")
        .is_err());
    assert_eq!(
        adl.resolve_perf_event("cpu_core/cycles/").unwrap(),
        "CPU_CLK_UNHALTED.THREAD"
    );
}
