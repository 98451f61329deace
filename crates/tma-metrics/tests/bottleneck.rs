//! The bottleneck descent rule on a literal tree whose node values are set directly.

use std::collections::HashMap;

use tma_catalog::{CoreKind, Model, NodeDef, Topdown, Unit, Vendor};
use tma_metrics::{evaluate, CloseSecond, Constants, Report, Selection, Status, StopReason};

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
    // An overlap view (see `OVERLAP_VIEWS`): shown, never a candidate.
    node(
        "L3_Hit_Latency",
        Some("Memory_Bound"),
        3,
        "L3H",
        "L3_Hit_Latency > 5 & Memory_Bound > 20",
        &["MEM_LOAD_RETIRED.L3_HIT"],
    ),
];

static MODEL: Model = Model {
    key: "btest",
    name: "Bottleneck test",
    vendor: Vendor::Intel,
    core_kind: CoreKind::Uniform,
    pmu: "cpu",
    source: "test",
    tma_version: None,
    slots_per_cycle: 4,
    gp_counters: 4,
    fixed_counters: 3,
    topdown: Topdown::Generic,
    events: &[],
    nodes: NODES,
    metrics: &[],
    retire_latencies: &[],
};

fn report(sel: Selection, v: &[(&str, f64)]) -> Report {
    let m: HashMap<String, f64> = v.iter().map(|(k, x)| (k.to_string(), *x)).collect();
    evaluate(&MODEL, &sel, &m, &Constants::default()).unwrap()
}

fn run(sel: Selection, v: &[(&str, f64)]) -> tma_metrics::Bottleneck {
    report(sel, v).bottleneck
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
    ("L3H", 3.0),
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
    assert_eq!(b.close_second, None);
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
            metrics: Vec::new(),
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

#[test]
fn level_1_has_no_ambiguity_stop_but_names_a_close_second() {
    // Backend_Bound 60 vs Frontend_Bound 58: the highest is chosen and the descent goes on.
    let b = run(Selection::all(), &with(&[("FE", 58.0), ("FL", 30.0)]));
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound", "DRAM_Bound"]);
    assert_eq!(b.stop, StopReason::Leaf);
    let c = b.close_second.expect("a close second");
    assert_eq!(c.node, "Frontend_Bound");
    assert_eq!(c.value, 58.0);
    assert!((c.gap - 2.0).abs() < 1e-12);
    assert_eq!(b.locate_with, ["TOPDOWN.BACKEND_BOUND_SLOTS"]);
    // Exactly 5 points is still close; a little more is not.
    let b = run(Selection::all(), &with(&[("FE", 55.0)]));
    assert_eq!(
        b.close_second.map(|c| c.node).as_deref(),
        Some("Frontend_Bound")
    );
    let b = run(Selection::all(), &with(&[("FE", 54.99)]));
    assert_eq!(b.close_second, None);
    // A tie: table order decides (Frontend_Bound comes first), the other is the close second.
    let b = run(Selection::all(), &with(&[("FE", 60.0)]));
    assert_eq!(b.path.first().map(String::as_str), Some("Frontend_Bound"));
    assert_eq!(
        b.close_second,
        Some(CloseSecond {
            node: "Backend_Bound".into(),
            value: 60.0,
            gap: 0.0
        })
    );
    // Only nodes over their threshold count: Retiring 59 is under its 70 threshold.
    let b = run(Selection::all(), &with(&[("RET", 59.0)]));
    assert_eq!(b.close_second, None);
    // Level 1 alone.
    let b = run(Selection::level(1), &with(&[("FE", 58.0)]));
    assert_eq!(b.path, ["Backend_Bound"]);
    assert_eq!(b.stop, StopReason::Leaf);
    assert!(b.close_second.is_some());
}

#[test]
fn close_children_make_the_parent_the_bottleneck() {
    // Below level 1 the close pair stops the descent at their parent, named in the stop.
    let b = run(Selection::all(), &with(&[("DB", 20.0), ("L1", 24.0)]));
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound"]);
    assert_eq!(b.node.as_deref(), Some("Memory_Bound"));
    assert_eq!(
        b.stop,
        StopReason::Ambiguous {
            first: "L1_Bound".into(),
            second: "DRAM_Bound".into(),
            gap: 4.0
        }
    );
    // The level-1 close second and a deeper ambiguity are independent.
    let b = run(
        Selection::all(),
        &with(&[("FE", 57.0), ("DB", 20.0), ("L1", 24.0)]),
    );
    assert_eq!(b.node.as_deref(), Some("Memory_Bound"));
    assert!(matches!(b.stop, StopReason::Ambiguous { .. }));
    assert_eq!(
        b.close_second.map(|c| c.node).as_deref(),
        Some("Frontend_Bound")
    );
}

#[test]
fn overlap_views_are_not_candidates() {
    // L3_Hit_Latency is far ahead of its siblings but only overlaps them.
    let r = report(Selection::all(), &with(&[("L3H", 80.0)]));
    assert_eq!(
        r.node("L3_Hit_Latency").unwrap().above_threshold,
        Some(true)
    );
    assert_eq!(
        r.bottleneck.path,
        ["Backend_Bound", "Memory_Bound", "DRAM_Bound"]
    );
    // Nor is it a rival: DRAM_Bound 30 and L3_Hit_Latency 28 are not "ambiguous".
    let b = run(Selection::all(), &with(&[("L3H", 28.0)]));
    assert_eq!(b.node.as_deref(), Some("DRAM_Bound"));
    // Its missing value leaves the descent decided.
    let v: Vec<(&str, f64)> = BASE.iter().copied().filter(|(k, _)| *k != "L3H").collect();
    let b = run(Selection::all(), &v);
    assert_eq!(b.node.as_deref(), Some("DRAM_Bound"));
    assert_eq!(b.stop, StopReason::Leaf);
    // With the real siblings under threshold, the overlap view does not become the pick.
    let b = run(
        Selection::all(),
        &with(&[("DB", 2.0), ("L1", 3.0), ("L3H", 50.0)]),
    );
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound"]);
    assert_eq!(b.stop, StopReason::NoChildOverThreshold);
    assert!(tma_metrics::is_overlap_view("l3_hit_latency"));
    assert!(tma_metrics::is_overlap_view("Store_Latency"));
    assert!(!tma_metrics::is_overlap_view("Branch_Resteers"));
    assert!(!tma_metrics::is_overlap_view("L3_Bound"));
}

#[test]
fn a_sibling_without_a_value_leaves_the_descent_undecided() {
    // Level 1: Bad_Speculation not computed, even though Backend_Bound is far ahead.
    let v: Vec<(&str, f64)> = BASE.iter().copied().filter(|(k, _)| *k != "BS").collect();
    let b = run(Selection::all(), &v);
    assert!(b.path.is_empty());
    assert_eq!(
        b.stop,
        StopReason::Undecided {
            not_computed: vec!["Bad_Speculation".into()]
        }
    );
    // Deeper: DRAM_Bound not computed, L1_Bound measured.
    let v: Vec<(&str, f64)> = BASE.iter().copied().filter(|(k, _)| *k != "DB").collect();
    let b = run(Selection::all(), &v);
    assert_eq!(b.path, ["Backend_Bound", "Memory_Bound"]);
    assert_eq!(
        b.stop,
        StopReason::Undecided {
            not_computed: vec!["DRAM_Bound".into()]
        }
    );
}

#[test]
fn out_of_range_values_are_kept_but_count_as_100_in_the_descent() {
    // DRAM_Bound 140 and L1_Bound 120 both count as 100: a tie below level 1, so ambiguous.
    let r = report(Selection::all(), &with(&[("DB", 140.0), ("L1", 120.0)]));
    let db = r.node("DRAM_Bound").unwrap();
    assert_eq!(db.value, Some(140.0));
    assert_eq!(db.status, Status::OutOfRange);
    assert_eq!(r.bottleneck.node.as_deref(), Some("Memory_Bound"));
    assert_eq!(
        r.bottleneck.stop,
        StopReason::Ambiguous {
            first: "DRAM_Bound".into(),
            second: "L1_Bound".into(),
            gap: 0.0
        }
    );
    // 120 against 94: 100 against 94, 6 points apart, so the descent goes on.
    let b = run(Selection::all(), &with(&[("DB", 120.0), ("L1", 94.0)]));
    assert_eq!(b.node.as_deref(), Some("DRAM_Bound"));
    // 120 against 96: within 5 points once capped (it would be 24 points apart raw).
    let b = run(Selection::all(), &with(&[("DB", 120.0), ("L1", 96.0)]));
    assert_eq!(b.node.as_deref(), Some("Memory_Bound"));
    // Level 1: Backend_Bound 130 counts as 100, so Frontend_Bound 97 is a close second
    // with a 3-point gap, and its reported value stays 97.
    let b = run(Selection::all(), &with(&[("BE", 130.0), ("FE", 97.0)]));
    assert_eq!(b.path.first().map(String::as_str), Some("Backend_Bound"));
    let c = b.close_second.unwrap();
    assert_eq!((c.node.as_str(), c.value), ("Frontend_Bound", 97.0));
    assert!((c.gap - 3.0).abs() < 1e-12);
    // And the JSON keeps the reported value, not the capped one.
    let r = report(Selection::all(), &with(&[("BE", 130.0), ("FE", 97.0)]));
    let j = serde_json::to_value(&r).unwrap();
    let be = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "Backend_Bound")
        .unwrap()
        .clone();
    assert_eq!(be["value"], 130.0);
    assert_eq!(j["bottleneck"]["close_second"]["node"], "Frontend_Bound");
}

// ---------------------------------------------------------------- one verdict, one wording

use tma_metrics::{decide, decide_summary, phases, phases_text, SummaryNode, TreeNode};

fn tn(
    name: &'static str,
    parent: Option<&'static str>,
    value: Option<f64>,
    above: Option<bool>,
) -> TreeNode<'static> {
    TreeNode {
        name,
        parent,
        level: if parent.is_some() { 2 } else { 1 },
        value,
        percent: true,
        above_threshold: above,
        locate_with: &[],
    }
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

#[test]
fn decide_on_an_evaluated_tree_is_the_report_s_verdict() {
    let r = report(Selection::all(), BASE);
    let nodes: Vec<TreeNode> = r.nodes.iter().map(TreeNode::of).collect();
    assert_eq!(decide(&nodes), r.bottleneck);
}

#[test]
fn a_node_without_a_threshold_verdict_is_passed_over_and_said_so() {
    // Retiring 40% has a value but its threshold could not be evaluated; Backend 30% is over.
    let nodes = [
        tn("Frontend_Bound", None, Some(19.0), Some(true)),
        tn("Bad_Speculation", None, Some(10.9), Some(false)),
        tn("Backend_Bound", None, Some(30.1), Some(true)),
        tn("Retiring", None, Some(40.0), None),
    ];
    let b = decide(&nodes);
    assert_eq!(b.node.as_deref(), Some("Backend_Bound"));
    assert_eq!(b.passed_over.len(), 1);
    assert_eq!(b.passed_over[0].node, "Retiring");
    let val = |n: &str| {
        nodes
            .iter()
            .find(|x| x.name == n)
            .and_then(|x| x.value)
            .map_or("-".into(), pct)
    };
    let w = b.wording(&val);
    assert_eq!(w.headline, "Bottleneck: Backend_Bound (30.1%)");
    assert_eq!(
        w.notes,
        ["Passed over: Retiring (40.0%), whose threshold could not be evaluated, so it is not known to be over it."]
    );
    assert_eq!(b.label(), "Backend_Bound (Retiring threshold ?)");
    // Lower than the node chosen: not worth a word.
    let nodes = [
        tn("Backend_Bound", None, Some(60.0), Some(true)),
        tn("Retiring", None, Some(20.0), None),
    ];
    assert!(decide(&nodes).passed_over.is_empty());
    // Nothing over threshold but one unknown: "no bottleneck" would be a guess.
    let nodes = [
        tn("Backend_Bound", None, Some(10.0), Some(false)),
        tn("Retiring", None, Some(80.0), None),
    ];
    let b = decide(&nodes);
    assert_eq!(b.stop, StopReason::NothingOverThreshold);
    let w = b.wording(&|n| {
        if n == "Retiring" {
            "80.0%".into()
        } else {
            "10.0%".into()
        }
    });
    assert_eq!(
        w.headline,
        "No bottleneck known: no level-1 node with a threshold verdict is over its threshold, and the threshold of Retiring could not be evaluated."
    );
    assert!(w.notes.is_empty());
    assert_eq!(
        b.label(),
        "none known over threshold (Retiring threshold ?)"
    );
}

#[test]
fn each_stop_reads_as_itself() {
    let v = |_: &str| "64.0%".to_string();
    // One level-1 node computed, three not: undecided, never "no bottleneck".
    let nodes = [
        tn("Frontend_Bound", None, None, None),
        tn("Bad_Speculation", None, None, None),
        tn("Backend_Bound", None, Some(64.0), Some(true)),
        tn("Retiring", None, None, None),
    ];
    let b = decide(&nodes);
    assert_eq!(
        b.wording(&v).headline,
        "Bottleneck: undecided at level 1: Frontend_Bound, Bad_Speculation and Retiring could not be computed, and any of them could be the largest."
    );
    assert_eq!(b.label(), "undecided (nodes not computed)");
    // Children that could not be computed: the parent, and why the descent stopped there.
    let nodes = [
        tn("Backend_Bound", None, Some(64.0), Some(true)),
        tn("Memory_Bound", Some("Backend_Bound"), None, None),
        tn("Core_Bound", Some("Backend_Bound"), None, None),
    ];
    let b = decide(&nodes);
    let w = b.wording(&v);
    assert_eq!(w.headline, "Bottleneck: Backend_Bound (64.0%)");
    assert_eq!(
        w.notes,
        ["Its children could not be computed, so the descent stopped there."]
    );
    assert_eq!(b.label(), "Backend_Bound (children not computed)");
    // Nothing computed at all.
    let b = decide(&[tn("Backend_Bound", None, None, None)]);
    assert_eq!(
        b.wording(&v).headline,
        "No bottleneck: the level-1 nodes could not be computed."
    );
}

#[test]
fn the_means_get_their_thresholds_from_the_rule_then_from_unanimous_samples() {
    let means = |n: &str| match n {
        "backend_bound" => Some(50.0),
        "backend_bound_memory" => Some(23.9),
        _ => None,
    };
    // Over on the means although only half the samples were over.
    let t = "backend_bound_memory > 10 & backend_bound > 20";
    assert_eq!(
        tma_metrics::summary_threshold(t, &means, 30, 30, 60),
        Some(true)
    );
    // The rule names a value the summary lacks: the samples decide when they agree...
    let t = "backend_bound_memory > 10 & Heavy_Operations > 10";
    assert_eq!(
        tma_metrics::summary_threshold(t, &means, 60, 0, 60),
        Some(true)
    );
    assert_eq!(
        tma_metrics::summary_threshold(t, &means, 0, 60, 60),
        Some(false)
    );
    // ...and the node's threshold is unknown when they do not.
    assert_eq!(tma_metrics::summary_threshold(t, &means, 30, 30, 60), None);
    assert_eq!(tma_metrics::summary_threshold(t, &means, 59, 0, 60), None);
}

#[test]
fn the_means_of_two_phases_are_ambiguous_and_the_phases_are_listed() {
    let sn = |name, parent, level, mean, above, below| SummaryNode {
        name,
        parent,
        level,
        mean: Some(mean),
        percent: true,
        threshold: match name {
            "backend_bound" => "backend_bound > 20",
            "backend_bound_memory" => "backend_bound_memory > 10 & backend_bound > 20",
            _ => "backend_bound_cpu > 10 & backend_bound > 20",
        },
        above,
        below,
        locate_with: &[],
    };
    let nodes = [
        sn("backend_bound", None, 1, 50.0, 60, 0),
        sn(
            "backend_bound_memory",
            Some("backend_bound"),
            2,
            23.9,
            30,
            30,
        ),
        sn("backend_bound_cpu", Some("backend_bound"), 2, 26.0, 60, 0),
    ];
    let (verdicts, b) = decide_summary(&nodes, 60);
    assert_eq!(verdicts, [Some(true), Some(true), Some(true)]);
    assert_eq!(b.node.as_deref(), Some("backend_bound"));
    assert!(
        matches!(b.stop, StopReason::Ambiguous { ref first, .. } if first == "backend_bound_cpu")
    );
    // Phases: 30 samples of one bottleneck, then 30 of another.
    let one = |node: &str| tma_metrics::Bottleneck {
        path: vec!["backend_bound".into(), node.into()],
        node: Some(node.into()),
        stop: StopReason::Leaf,
        close_second: None,
        locate_with: vec![],
        locate_with_node: None,
        passed_over: vec![],
    };
    let per: Vec<_> = (0..60)
        .map(|i| {
            one(if i < 30 {
                "backend_bound_memory"
            } else {
                "backend_bound_cpu"
            })
        })
        .collect();
    let p = phases(&per);
    assert_eq!(p.len(), 2);
    assert_eq!(
        phases_text(&p, "intervals").unwrap(),
        "The bottleneck changes over time, which the means hide: intervals 1-30: backend_bound_memory; 31-60: backend_bound_cpu."
    );
    assert_eq!(phases_text(&p[..1], "intervals"), None);
    // Many changes: the first few, then a count.
    let per: Vec<_> = (0..20)
        .map(|i| one(if i % 2 == 0 { "a" } else { "b" }))
        .collect();
    let t = phases_text(&phases(&per), "intervals").unwrap();
    assert!(t.ends_with("6: b; … (19 changes in all)."), "{t}");
}
