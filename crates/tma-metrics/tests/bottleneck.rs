//! The bottleneck descent rule on a literal tree whose node values are set directly.

use std::collections::HashMap;

use tma_catalog::{CoreKind, Model, NodeDef, Topdown, Unit, Vendor};
use tma_metrics::{evaluate, Constants, Selection, StopReason};

const fn node(
    name: &'static str,
    parent: Option<&'static str>,
    level: u8,
    formula: &'static str,
    threshold: &'static str,
    locate_with: &'static [&'static str],
) -> NodeDef {
    NodeDef {
        name,
        parent,
        level,
        formula,
        threshold,
        locate_with,
        description: "",
        unit: Unit::PercentSlots,
        count_domain: "Slots",
    }
}

// Each node's value is the event of the same name (upper case); thresholds as in perfmon.
static NODES: &[NodeDef] = &[
    node(
        "Frontend_Bound",
        None,
        1,
        "FE",
        "Frontend_Bound > 15",
        &["FRONTEND_RETIRED.LATENCY_GE_4"],
    ),
    node(
        "Bad_Speculation",
        None,
        1,
        "BS",
        "Bad_Speculation > 15",
        &[],
    ),
    node("Retiring", None, 1, "RET", "Retiring > 70", &[]),
    node(
        "Backend_Bound",
        None,
        1,
        "BE",
        "Backend_Bound > 20",
        &["TOPDOWN.BACKEND_BOUND_SLOTS"],
    ),
    node(
        "Fetch_Latency",
        Some("Frontend_Bound"),
        2,
        "FL",
        "Fetch_Latency > 10 & Frontend_Bound > 15",
        &[],
    ),
    node(
        "Fetch_Bandwidth",
        Some("Frontend_Bound"),
        2,
        "FB",
        "Fetch_Bandwidth > 10 & Frontend_Bound > 15",
        &[],
    ),
    node(
        "Memory_Bound",
        Some("Backend_Bound"),
        2,
        "MB",
        "Memory_Bound > 20 & Backend_Bound > 20",
        &[],
    ),
    node(
        "Core_Bound",
        Some("Backend_Bound"),
        2,
        "CB",
        "Core_Bound > 10 & Backend_Bound > 20",
        &[],
    ),
    node(
        "DRAM_Bound",
        Some("Memory_Bound"),
        3,
        "DB",
        "DRAM_Bound > 10 & Memory_Bound > 20",
        &[],
    ),
    node(
        "L1_Bound",
        Some("Memory_Bound"),
        3,
        "L1",
        "L1_Bound > 10 & Memory_Bound > 20",
        &["MEM_LOAD_RETIRED.L1_HIT"],
    ),
];

static MODEL: Model = Model {
    key: "btest",
    name: "Bottleneck test",
    vendor: Vendor::Intel,
    core_kind: CoreKind::Uniform,
    pmu: "cpu",
    source: "test",
    slots_per_cycle: 4,
    gp_counters: 4,
    fixed_counters: 3,
    topdown: Topdown::Generic,
    events: &[],
    nodes: NODES,
    metrics: &[],
    retire_latencies: &[],
};

fn run(sel: Selection, v: &[(&str, f64)]) -> tma_metrics::Bottleneck {
    let m: HashMap<String, f64> = v.iter().map(|(k, x)| (k.to_string(), *x)).collect();
    evaluate(&MODEL, &sel, &m, &Constants::default())
        .unwrap()
        .bottleneck
}

const BASE: &[(&str, f64)] = &[
    ("FE", 10.0),
    ("BS", 5.0),
    ("RET", 25.0),
    ("BE", 60.0),
    ("FL", 6.0),
    ("FB", 4.0),
    ("MB", 45.0),
    ("CB", 15.0),
    ("DB", 30.0),
    ("L1", 12.0),
];

fn with(over: &[(&'static str, f64)]) -> Vec<(&'static str, f64)> {
    let mut v: Vec<(&str, f64)> = BASE.to_vec();
    for (k, x) in over {
        for e in v.iter_mut() {
            if e.0 == *k {
                e.1 = *x;
            }
        }
    }
    v
}

#[test]
fn descends_to_a_leaf() {
    let b = run(Selection::all(), BASE);
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound", "DRAM_Bound"]);
    assert_eq!(b.node.as_deref(), Some("DRAM_Bound"));
    assert_eq!(b.stop, StopReason::Leaf);
    // DRAM_Bound has no locate-with event: the nearest ancestor that has one, named.
    assert_eq!(b.locate_with, ["TOPDOWN.BACKEND_BOUND_SLOTS"]);
    assert_eq!(b.locate_with_node.as_deref(), Some("Backend_Bound"));
}

#[test]
fn only_selected_levels_take_part() {
    let b = run(Selection::level(2), BASE);
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound"]);
    assert_eq!(b.stop, StopReason::Leaf);
    let b = run(Selection::level(1), BASE);
    assert_eq!(b.path, ["Backend_Bound"]);
    assert_eq!(b.stop, StopReason::Leaf);
    assert_eq!(b.locate_with_node.as_deref(), Some("Backend_Bound"));
    // A subtree selection keeps the ancestors, so the descent works inside it.
    let b = run(
        Selection {
            max_level: 3,
            nodes: vec!["Frontend_Bound".into()],
        },
        &with(&[("FE", 50.0), ("FL", 40.0)]),
    );
    assert_eq!(b.path, ["Frontend_Bound", "Fetch_Latency"]);
}

#[test]
fn ambiguous_children_stop_the_descent() {
    // Memory_Bound 45 vs Core_Bound 41: within 5 points.
    let b = run(Selection::all(), &with(&[("CB", 41.0)]));
    assert_eq!(b.path, ["Backend_Bound"]);
    assert_eq!(b.node.as_deref(), Some("Backend_Bound"));
    match b.stop {
        StopReason::Ambiguous { first, second, gap } => {
            assert_eq!(
                (first.as_str(), second.as_str()),
                ("Memory_Bound", "Core_Bound")
            );
            assert!((gap - 4.0).abs() < 1e-12);
        }
        s => panic!("{s:?}"),
    }
    // Exactly 5 points apart is still ambiguous ("within 5"); 5.01 is not.
    let b = run(Selection::all(), &with(&[("CB", 40.0)]));
    assert!(
        matches!(b.stop, StopReason::Ambiguous { .. }),
        "{:?}",
        b.stop
    );
    let b = run(Selection::all(), &with(&[("CB", 39.99)]));
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound", "DRAM_Bound"]);
    // At level 1: no node chosen at all.
    let b = run(Selection::all(), &with(&[("FE", 58.0), ("FL", 30.0)]));
    assert_eq!(b.node, None);
    assert!(b.path.is_empty());
    assert!(
        matches!(&b.stop, StopReason::Ambiguous { first, second, .. } if first == "Backend_Bound" && second == "Frontend_Bound")
    );
    assert!(b.locate_with.is_empty());
    assert_eq!(b.locate_with_node, None);
    // A child below its threshold does not count as a rival.
    let b = run(
        Selection::all(),
        &with(&[("CB", 44.0), ("BE", 19.0), ("RET", 71.0)]),
    );
    assert_eq!(b.path, ["Retiring"]);
}

#[test]
fn no_child_over_threshold() {
    let b = run(Selection::all(), &with(&[("MB", 8.0), ("CB", 9.0)]));
    assert_eq!(b.path, ["Backend_Bound"]);
    assert_eq!(b.stop, StopReason::NoChildOverThreshold);
    // L1_Bound has its own locate-with event.
    let b = run(Selection::all(), &with(&[("DB", 5.0), ("L1", 35.0)]));
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound", "L1_Bound"]);
    assert_eq!(b.locate_with, ["MEM_LOAD_RETIRED.L1_HIT"]);
    assert_eq!(b.locate_with_node.as_deref(), Some("L1_Bound"));
}

#[test]
fn nothing_over_threshold_and_not_measured() {
    let b = run(
        Selection::all(),
        &with(&[("FE", 10.0), ("BS", 10.0), ("RET", 65.0), ("BE", 15.0)]),
    );
    assert_eq!(b.stop, StopReason::NothingOverThreshold);
    assert_eq!(b.node, None);
    let b = run(Selection::all(), &[]);
    assert_eq!(b.stop, StopReason::NotMeasured);
    // Children not measured.
    let v: Vec<(&str, f64)> = BASE
        .iter()
        .copied()
        .filter(|(k, _)| !matches!(*k, "MB" | "CB"))
        .collect();
    let b = run(Selection::all(), &v);
    assert_eq!(b.path, ["Backend_Bound"]);
    assert_eq!(b.stop, StopReason::NotMeasured);
    // One child measured and over threshold, its sibling not computed: the missing one could
    // be the larger, so the descent stops at the parent and says which node is missing.
    let v: Vec<(&str, f64)> = BASE.iter().copied().filter(|(k, _)| *k != "CB").collect();
    let b = run(Selection::all(), &v);
    assert_eq!(b.path, ["Backend_Bound"]);
    match &b.stop {
        StopReason::Undecided { not_computed } => assert_eq!(not_computed.len(), 1),
        other => panic!("expected Undecided, got {other:?}"),
    }
}
