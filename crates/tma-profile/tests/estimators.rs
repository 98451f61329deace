//! The bottleneck's two estimators (`tma locate --tree`'s group reads and direct samples of
//! the node's locate-with event) on replayed Ice Lake sample streams: PERF_RECORD_SAMPLE
//! bodies built as the kernel lays them out, fed through the live path. The group-read
//! shares were worked out by hand from the formulas (shown next to each figure); the text,
//! CSV and JSON renderings are golden files in tests/fixtures/profile-tree/estimators/.

use std::collections::HashMap;

use tma_metrics::Constants;
use tma_profile::estimate::{self, Compared, Estimators, FuncKey};
use tma_profile::tree::{self, ReplaySample, TreeLayout, TreeProfile};
use tma_testkit::{check_golden, fixture};

const A: u64 = 0x1000;
const B: u64 = 0x2000;
const C: u64 = 0x3000;

const SLOTS: &str = "TOPDOWN.SLOTS:perf_metrics";
const CYC: &str = "CPU_CLK_UNHALTED.THREAD";
const FE: &str = "PERF_METRICS.FRONTEND_BOUND";
const BS: &str = "PERF_METRICS.BAD_SPECULATION";
const RET: &str = "PERF_METRICS.RETIRING";
const BE: &str = "PERF_METRICS.BACKEND_BOUND";
const EVENT: &str = "TOPDOWN.BACKEND_BOUND_SLOTS";

fn name(addr: u64) -> String {
    format!("[unknown] {addr:#x}")
}

/// Thread 7 samples A twice, then B, then C (cumulative reads; no uop drops or clears).
/// Increases: A 20000 slots (FE 2000, BS 1000, RET 5000, BE 12000: Backend_Bound 60%),
/// B 10000 (FE 2000, BS 1000, RET 5000, BE 2000: 20%), C 10000 (FE 3000, BS 500, RET 4000,
/// BE 2500: 25%). The run: 40000 slots, BE 16500 (41.25%), FE 7000 (17.5%): Backend_Bound
/// is the bottleneck, and its 16500 slots are A 12000 (72.73%), B 2000 (12.12%), C 2500
/// (15.15%).
fn icl_tree() -> (TreeProfile, tma_profile::hotspots::Profile) {
    let icl = tma_catalog::by_name("icl").unwrap();
    let layout = TreeLayout::hardware(icl, 1, false, false).unwrap();
    let values = |v: [u64; 6]| {
        [
            (SLOTS, v[0]),
            (CYC, v[1]),
            (FE, v[2]),
            (BS, v[3]),
            (RET, v[4]),
            (BE, v[5]),
        ]
    };
    let cumulative = [
        (A, values([10000, 2000, 1000, 500, 2500, 6000])),
        (A, values([20000, 4000, 2000, 1000, 5000, 12000])),
        (B, values([30000, 6000, 4000, 2000, 10000, 14000])),
        (C, values([40000, 8000, 7000, 2500, 14000, 16500])),
    ];
    let reads: Vec<ReplaySample> = cumulative
        .iter()
        .map(|(ip, v)| ReplaySample {
            tid: 7,
            ip: *ip,
            group_id: 1,
            values: v,
        })
        .collect();
    let (p, first) = tree::replay(&layout, &reads);
    let t = tree::build(&p, &layout, Some(icl), 1, &Constants::default(), 10, first).unwrap();
    (t, p)
}

/// The direct samples of TOPDOWN.BACKEND_BOUND_SLOTS, `n` in each function, thread 7.
fn direct(counts: &[(u64, usize)]) -> tma_profile::hotspots::Profile {
    let mut s = Vec::new();
    for &(ip, n) in counts {
        s.extend(std::iter::repeat_n((7, ip), n));
    }
    estimate::replay_direct(EVENT, &s)
}

fn estimators(
    t: &TreeProfile,
    p: &tma_profile::hotspots::Profile,
    counts: &[(u64, usize)],
) -> Estimators {
    let icl = tma_catalog::by_name("icl").unwrap();
    let node = t.total.bottleneck.as_ref().and_then(|b| b.node.clone());
    assert_eq!(node.as_deref(), Some("Backend_Bound"));
    let (with, event) = estimate::locate_with(icl, "Backend_Bound").unwrap();
    assert_eq!((with, event), ("Backend_Bound", EVENT));
    let group =
        estimate::group_amounts(p, Some(icl), node.as_deref(), &Constants::default()).unwrap();
    let key = |a: u64| -> FuncKey { (name(a), "[unknown]".into()) };
    // The node's slots per function, by hand (above).
    for (a, want) in [(A, 12000.0), (B, 2000.0), (C, 2500.0)] {
        let got = group[&key(a)];
        assert!((got - want).abs() < 1e-6, "{a:#x}: {got} != {want}");
    }
    let shown: Vec<FuncKey> = t
        .functions
        .iter()
        .map(|f| (f.function.clone(), f.module.clone()))
        .collect();
    let direct: HashMap<FuncKey, f64> = estimate::direct_amounts(&direct(counts));
    estimate::compare(
        Compared {
            group_basis: estimate::group_basis(p, node.as_deref()),
            node,
            direct_event: event.into(),
            direct_node: Some(with.into()),
            direct_source: "a second pass".into(),
        },
        &group,
        &direct,
        &shown,
    )
}

fn renderings(t: &TreeProfile, case: &str) {
    let dir = fixture("profile-tree/estimators");
    let mut text = Vec::new();
    tree::text(&mut text, t).unwrap();
    check_golden(
        dir.join(format!("{case}.txt")),
        &String::from_utf8(text).unwrap(),
    );
    let mut csv = Vec::new();
    tree::csv(&mut csv, t).unwrap();
    check_golden(
        dir.join(format!("{case}.csv")),
        &String::from_utf8(csv).unwrap(),
    );
    let mut json = Vec::new();
    tree::json(&mut json, t).unwrap();
    check_golden(
        dir.join(format!("{case}.json")),
        &String::from_utf8(json).unwrap(),
    );
}

fn row(e: &Estimators, a: u64) -> &estimate::EstimateRow {
    e.row(&name(a), "[unknown]").unwrap()
}

/// Direct samples in proportion to the node's slots (14, 3, 3 of 20: 70%, 15%, 15%): the
/// estimators agree.
#[test]
fn replayed_icelake_estimators_agree() {
    let (mut t, p) = icl_tree();
    let e = estimators(&t, &p, &[(A, 14), (B, 3), (C, 3)]);
    assert!(e.agree, "{e:?}");
    assert_eq!(e.direct_samples, 20);
    assert!((row(&e, A).group_percent - 1200.0 / 16.5).abs() < 1e-9);
    assert!((row(&e, A).direct_percent - 70.0).abs() < 1e-9);
    assert!((row(&e, B).group_percent - 200.0 / 16.5).abs() < 1e-9);
    assert!((row(&e, C).direct_percent - 15.0).abs() < 1e-9);
    assert!(e.functions.iter().all(|r| !r.disagree));
    assert_eq!(e.top_group.as_deref(), Some(name(A).as_str()));
    assert_eq!(e.top_direct, e.top_group);
    assert_eq!(
        e.verdict(),
        "the estimators of Backend_Bound agree (within 10 points, same first function)"
    );
    t.estimators = Some(e);
    renderings(&t, "agree");
}

/// Skid: TOPDOWN.BACKEND_BOUND_SLOTS is not precise, and most of its samples land after the
/// stalling code of A, in B, which runs next (6, 11, 3 of 20: 30%, 55%, 15%). The group
/// reads charge A 72.7%: A and B disagree by more than 10 points, and the first functions
/// differ.
#[test]
fn replayed_icelake_estimators_disagree_with_skid() {
    let (mut t, p) = icl_tree();
    let e = estimators(&t, &p, &[(A, 6), (B, 11), (C, 3)]);
    assert!(!e.agree);
    assert!(row(&e, A).disagree && row(&e, B).disagree && !row(&e, C).disagree);
    assert!((row(&e, B).direct_percent - 55.0).abs() < 1e-9);
    assert_eq!(e.top_direct.as_deref(), Some(name(B).as_str()));
    assert_eq!(
        e.disagreements,
        [
            "[unknown] 0x1000: 72.7% by the group reads, 30.0% by the direct samples",
            "[unknown] 0x2000: 12.1% by the group reads, 55.0% by the direct samples",
            "the group reads put [unknown] 0x1000 first, the direct samples [unknown] 0x2000",
        ]
    );
    t.estimators = Some(e);
    renderings(&t, "skid");
}

/// The node whose locate-with event samples a node: itself, else the nearest parent with one;
/// none in the AMD tables.
#[test]
fn locate_with_walks_up_to_a_parent_with_an_event() {
    let icl = tma_catalog::by_name("icl").unwrap();
    assert_eq!(
        estimate::locate_with(icl, "Memory_Bound"),
        Some(("Backend_Bound", EVENT))
    );
    assert_eq!(
        estimate::locate_with(icl, "Frontend_Bound"),
        Some(("Frontend_Bound", "FRONTEND_RETIRED.LATENCY_GE_4"))
    );
    let zen4 = tma_catalog::by_name("zen4").unwrap();
    assert_eq!(estimate::locate_with(zen4, "backend_bound"), None);
    assert_eq!(estimate::locate_with(icl, "No_Such_Node"), None);
}

/// No samples on one side is a disagreement that says so, not a division by zero.
#[test]
fn an_empty_side_is_said() {
    let (t, p) = icl_tree();
    let e = estimators(&t, &p, &[]);
    assert!(!e.agree);
    assert_eq!(
        e.disagreements,
        ["the direct pass took no samples of TOPDOWN.BACKEND_BOUND_SLOTS: nothing to compare"]
    );
    assert!(e.functions.iter().all(|r| r.direct_percent == 0.0));
}
