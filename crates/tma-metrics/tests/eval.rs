//! Evaluation edge cases on small literal models.

use std::collections::{BTreeMap, HashMap};

use tma_catalog::{CoreKind, MetricDef, Model, NodeDef, Topdown, Unit, Vendor};
use tma_metrics::{
    evaluate, evaluate_metric, node_order, required_events, required_events_for,
    required_retire_latencies, Constants, MetricsError, Selection, Status, StopReason, Values,
};

fn node(
    name: &'static str,
    parent: Option<&'static str>,
    level: u8,
    formula: &'static str,
    threshold: &'static str,
) -> NodeDef {
    NodeDef {
        name,
        parent,
        level,
        formula,
        threshold,
        locate_with: &[],
        description: "test node",
        unit: Unit::PercentSlots,
        count_domain: "Slots",
    }
}

fn metric(name: &'static str, formula: &'static str) -> MetricDef {
    MetricDef {
        name,
        formula,
        description: "test metric",
        unit: Unit::Number,
        group: "Thread",
        perf_groups: "",
    }
}

fn model(
    key: &'static str,
    nodes: Vec<NodeDef>,
    metrics: Vec<MetricDef>,
    retire: Vec<(&'static str, f64)>,
) -> &'static Model {
    Box::leak(Box::new(Model {
        key,
        name: "Test",
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
        nodes: Box::leak(nodes.into_boxed_slice()),
        metrics: Box::leak(metrics.into_boxed_slice()),
        retire_latencies: Box::leak(retire.into_boxed_slice()),
    }))
}

fn vals(pairs: &[(&str, f64)]) -> HashMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// A small SKL-like tree: slots = 4 * cycles, level 1 from generic events.
fn skl_like() -> &'static Model {
    model(
        "sklish",
        vec![
            node(
                "Frontend_Bound",
                None,
                1,
                "100 * IDQ_UOPS_NOT_DELIVERED.CORE / SLOTS",
                "Frontend_Bound > 15",
            ),
            node(
                "Bad_Speculation",
                None,
                1,
                "100 * (UOPS_ISSUED.ANY - UOPS_RETIRED.RETIRE_SLOTS + 4 * INT_MISC.RECOVERY_CYCLES) / SLOTS",
                "Bad_Speculation > 15",
            ),
            node(
                "Retiring",
                None,
                1,
                "100 * UOPS_RETIRED.RETIRE_SLOTS / SLOTS",
                "Retiring > 70",
            ),
            node(
                "Backend_Bound",
                None,
                1,
                "100 - (Frontend_Bound + Bad_Speculation + Retiring)",
                "Backend_Bound > 20",
            ),
            node(
                "Memory_Bound",
                Some("Backend_Bound"),
                2,
                "Backend_Bound * MEM_SHARE",
                "Memory_Bound > 20 & Backend_Bound > 20",
            ),
            node(
                "Core_Bound",
                Some("Backend_Bound"),
                2,
                "max(0, Backend_Bound - Memory_Bound)",
                "Core_Bound > 10 & Backend_Bound > 20",
            ),
            node(
                "Ports_Utilization",
                Some("Core_Bound"),
                3,
                "Core_Bound * 0.5",
                "Ports_Utilization > 5",
            ),
        ],
        vec![
            metric("SLOTS", "4 * CLKS"),
            metric("CLKS", "CPU_CLK_UNHALTED.THREAD"),
            metric(
                "MEM_SHARE",
                "CYCLE_ACTIVITY.STALLS_MEM_ANY / CYCLE_ACTIVITY.STALLS_TOTAL",
            ),
        ],
        vec![],
    )
}

fn skl_counts() -> HashMap<String, f64> {
    vals(&[
        ("CPU_CLK_UNHALTED.THREAD", 1000.0),
        ("IDQ_UOPS_NOT_DELIVERED.CORE", 400.0),   // 10 %
        ("UOPS_ISSUED.ANY", 1300.0),              //
        ("UOPS_RETIRED.RETIRE_SLOTS", 1200.0),    // 30 %
        ("INT_MISC.RECOVERY_CYCLES", 25.0),       // bad spec (100 + 100)/4000 = 5 %
        ("CYCLE_ACTIVITY.STALLS_MEM_ANY", 600.0), // memory share 0.6
        ("CYCLE_ACTIVITY.STALLS_TOTAL", 1000.0),
    ])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn whole_tree_ok() {
    let m = skl_like();
    let r = evaluate(m, &Selection::all(), &skl_counts(), &Constants::default()).unwrap();
    let v = |n: &str| r.node(n).unwrap().value.unwrap();
    assert!(close(v("Frontend_Bound"), 10.0));
    assert!(close(v("Bad_Speculation"), 5.0));
    assert!(close(v("Retiring"), 30.0));
    assert!(close(v("Backend_Bound"), 55.0));
    assert!(close(v("Memory_Bound"), 33.0));
    assert!(close(v("Core_Bound"), 22.0));
    assert!(close(v("Ports_Utilization"), 11.0));
    assert!(r.nodes.iter().all(|n| n.status == Status::Ok));
    assert_eq!(r.node("Backend_Bound").unwrap().above_threshold, Some(true));
    assert_eq!(
        r.node("Frontend_Bound").unwrap().above_threshold,
        Some(false)
    );
    // Depth-first order: children after their parent.
    let names: Vec<&str> = r.nodes.iter().map(|n| n.name).collect();
    assert_eq!(
        names,
        [
            "Frontend_Bound",
            "Bad_Speculation",
            "Retiring",
            "Backend_Bound",
            "Memory_Bound",
            "Core_Bound",
            "Ports_Utilization"
        ]
    );
    assert_eq!(r.cpu, "sklish");
}

#[test]
fn zero_cycles_is_division_by_zero() {
    let m = skl_like();
    let mut c = skl_counts();
    c.insert("CPU_CLK_UNHALTED.THREAD".into(), 0.0);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    for n in &r.nodes {
        assert_eq!(n.status, Status::DivisionByZero, "{}", n.name);
        assert_eq!(n.value, None);
        // The threshold cannot be decided either.
        assert_eq!(n.above_threshold, None, "{}", n.name);
    }
    assert_eq!(r.bottleneck.stop, StopReason::NotMeasured);
    assert_eq!(r.bottleneck.node, None);
}

#[test]
fn d_ratio_guards_and_max_does_not_hide_nan() {
    let m = model(
        "guards",
        vec![
            node("A", None, 1, "100 * d_ratio(X, Y)", ""),
            node("B", None, 1, "max(0, X / Y)", ""),
            node("C", None, 1, "min(X / Y, 5)", ""),
            node("D", None, 1, "(X / Y > 1) | 1", ""),
            node("E", None, 1, "5 if X / Y else 6", ""),
            node("F", None, 1, "X % Y", ""),
            node("G", None, 1, "d_ratio(X / Y, Y)", ""),
        ],
        vec![],
        vec![],
    );
    let c = vals(&[("X", 3.0), ("Y", 0.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert_eq!(r.node("A").unwrap().value, Some(0.0));
    assert_eq!(r.node("A").unwrap().status, Status::Ok);
    for n in ["B", "C", "D", "E", "F", "G"] {
        assert_eq!(r.node(n).unwrap().status, Status::DivisionByZero, "{n}");
        assert_eq!(r.node(n).unwrap().value, None, "{n}");
    }
    let c = vals(&[("X", 7.0), ("Y", 2.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert_eq!(r.node("A").unwrap().value, Some(350.0));
    assert_eq!(r.node("A").unwrap().status, Status::OutOfRange);
    assert_eq!(r.node("F").unwrap().value, Some(1.0)); // integer remainder as perf
    assert_eq!(r.node("E").unwrap().value, Some(5.0));
}

#[test]
fn missing_events_listed_exactly_and_rest_still_computed() {
    let m = skl_like();
    let mut c = skl_counts();
    c.remove("CYCLE_ACTIVITY.STALLS_MEM_ANY");
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    let mb = r.node("Memory_Bound").unwrap();
    assert_eq!(mb.status, Status::MissingEvents);
    assert_eq!(mb.value, None);
    assert_eq!(mb.missing_events, vec!["CYCLE_ACTIVITY.STALLS_MEM_ANY"]);
    // Transitively through the reference.
    let cb = r.node("Core_Bound").unwrap();
    assert_eq!(cb.status, Status::MissingEvents);
    assert_eq!(cb.missing_events, vec!["CYCLE_ACTIVITY.STALLS_MEM_ANY"]);
    assert_eq!(r.node("Backend_Bound").unwrap().status, Status::Ok);
    assert!(close(r.node("Backend_Bound").unwrap().value.unwrap(), 55.0));

    // Several missing, sorted, deduplicated.
    let c = vals(&[("CPU_CLK_UNHALTED.THREAD", 10.0)]);
    let r = evaluate(m, &Selection::level(1), &c, &Constants::default()).unwrap();
    assert_eq!(
        r.node("Backend_Bound").unwrap().missing_events,
        vec![
            "IDQ_UOPS_NOT_DELIVERED.CORE",
            "INT_MISC.RECOVERY_CYCLES",
            "UOPS_ISSUED.ANY",
            "UOPS_RETIRED.RETIRE_SLOTS"
        ]
    );
}

#[test]
fn only_the_taken_branch_needs_its_events() {
    let m = model(
        "branches",
        vec![node(
            "Clks",
            None,
            1,
            "(THREAD / 2 * (1 + ONE_THREAD / REF_XCLK) if #core_wide < 1 else (THREAD_ANY / 2 if #SMT_on else THREAD))",
            "",
        )],
        vec![],
        vec![],
    );
    let c = vals(&[("THREAD", 100.0)]);
    let off = Constants::default();
    let r = evaluate(m, &Selection::all(), &c, &off).unwrap();
    assert_eq!(r.nodes[0].value, Some(100.0));
    let on = Constants {
        smt_on: true,
        threads_per_core: 2,
        core_wide: true,
        ..Constants::default()
    };
    let r = evaluate(m, &Selection::all(), &c, &on).unwrap();
    assert_eq!(r.nodes[0].status, Status::MissingEvents);
    assert_eq!(r.nodes[0].missing_events, vec!["THREAD_ANY"]);
    let est = Constants {
        core_wide: false,
        ..on.clone()
    };
    let r = evaluate(m, &Selection::all(), &c, &est).unwrap();
    assert_eq!(r.nodes[0].missing_events, vec!["ONE_THREAD", "REF_XCLK"]);

    // required_events has every branch; required_events_for only the one the constants pick.
    let all = required_events(m, &Selection::all()).unwrap();
    assert_eq!(
        all.into_iter().collect::<Vec<_>>(),
        ["ONE_THREAD", "REF_XCLK", "THREAD", "THREAD_ANY"]
    );
    let pruned = required_events_for(m, &Selection::all(), &off).unwrap();
    assert_eq!(pruned.into_iter().collect::<Vec<_>>(), ["THREAD"]);
    let pruned = required_events_for(m, &Selection::all(), &on).unwrap();
    assert_eq!(pruned.into_iter().collect::<Vec<_>>(), ["THREAD_ANY"]);
    let pruned = required_events_for(m, &Selection::all(), &est).unwrap();
    assert_eq!(
        pruned.into_iter().collect::<Vec<_>>(),
        ["ONE_THREAD", "REF_XCLK", "THREAD"]
    );
}

#[test]
fn undecidable_condition_reports_both_branches() {
    let m = model(
        "undecided",
        vec![node("N", None, 1, "A if C > 0 else B", "")],
        vec![],
        vec![],
    );
    let r = evaluate(m, &Selection::all(), &vals(&[]), &Constants::default()).unwrap();
    assert_eq!(r.nodes[0].missing_events, vec!["A", "B", "C"]);
}

#[test]
fn missing_constants_say_how_to_supply() {
    let m = model(
        "consts",
        vec![
            node("Freq", None, 1, "CLKS / #tsc_freq / #Duration_Time", ""),
            node("Cha", None, 1, "X / #chas_per_socket", ""),
            node(
                "Smt",
                None,
                1,
                "#smt_on + #threads + #core_wide + #num_cpus_online + #num_cores + #num_sockets",
                "",
            ),
            node("Bogus", None, 1, "#no_such_thing + 1", ""),
        ],
        vec![],
        vec![],
    );
    let c = vals(&[("CLKS", 3e9), ("X", 8.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    match &r.node("Freq").unwrap().status {
        Status::MissingConstant(s) => {
            assert!(s.contains("#tsc_freq") && s.contains("tsc_freq_hz"), "{s}")
        }
        s => panic!("{s:?}"),
    }
    match &r.node("Cha").unwrap().status {
        Status::MissingConstant(s) => assert!(s.contains("#chas_per_socket"), "{s}"),
        s => panic!("{s:?}"),
    }
    assert_eq!(
        r.node("Smt").unwrap().value,
        Some(0.0 + 1.0 + 1.0 + 1.0 + 1.0 + 1.0)
    );
    match &r.node("Bogus").unwrap().status {
        Status::Error(s) => assert!(s.contains("unknown constant #no_such_thing"), "{s}"),
        s => panic!("{s:?}"),
    }
    let k = Constants {
        smt_on: true,
        threads_per_core: 2,
        core_wide: false,
        num_cpus_online: 16,
        num_cores: 8,
        num_sockets: 1,
        tsc_freq_hz: Some(1.5e9),
        duration_s: Some(2.0),
        chas_per_socket: Some(4),
    };
    let r = evaluate(m, &Selection::all(), &c, &k).unwrap();
    assert_eq!(r.node("Freq").unwrap().value, Some(1.0));
    assert_eq!(r.node("Cha").unwrap().value, Some(2.0));
    assert_eq!(
        r.node("Smt").unwrap().value,
        Some(1.0 + 2.0 + 0.0 + 16.0 + 8.0 + 1.0)
    );
    // duration_time as an event falls back to the constant.
    let m2 = model(
        "dt",
        vec![node("T", None, 1, "duration_time * 2", "")],
        vec![],
        vec![],
    );
    let r = evaluate(m2, &Selection::all(), &vals(&[]), &k).unwrap();
    assert_eq!(r.nodes[0].value, Some(4.0));
    let r = evaluate(m2, &Selection::all(), &vals(&[]), &Constants::default()).unwrap();
    assert_eq!(r.nodes[0].missing_events, vec!["duration_time"]);
}

#[test]
fn negative_intermediates_follow_the_formula() {
    let m = model(
        "neg",
        vec![
            node("Clipped", None, 1, "100 * max(0, A - B) / C", ""),
            node("Raw", None, 1, "100 * (A - B) / C", ""),
            node("Slight", None, 1, "100 * (A - B) / C + 10.3", ""),
            node("Ratio", None, 1, "A - B", ""),
        ],
        vec![],
        vec![],
    );
    let c = vals(&[("A", 10.0), ("B", 13.0), ("C", 100.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert_eq!(r.node("Clipped").unwrap().value, Some(0.0));
    assert_eq!(r.node("Clipped").unwrap().status, Status::Ok);
    // Not clamped: value kept, flagged.
    assert_eq!(r.node("Raw").unwrap().value, Some(-3.0));
    assert_eq!(r.node("Raw").unwrap().status, Status::OutOfRange);
    // Within the 0.5 point tolerance: ok, and still not clamped.
    let s = r.node("Slight").unwrap();
    assert!(close(s.value.unwrap(), 7.3));
    let c = vals(&[("A", 10.0), ("B", 10.4), ("C", 100.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    let raw = r.node("Raw").unwrap();
    assert_eq!(raw.status, Status::Ok);
    assert!(close(raw.value.unwrap(), -0.4));
    // A non-percent unit is never out of range.
    let m = model("negnum", vec![], vec![metric("M", "A - B")], vec![]);
    let (v, s) = evaluate_metric(m, "m", &c, &Constants::default())
        .unwrap()
        .unwrap();
    assert!(close(v.unwrap(), -0.4));
    assert_eq!(s, Status::Ok);
    assert!(evaluate_metric(m, "nope", &c, &Constants::default())
        .unwrap()
        .is_none());
}

#[test]
fn reference_cycles_are_errors_not_stack_overflows() {
    let m = model(
        "cycle",
        vec![
            node("A", None, 1, "B + 1", "A > 1"),
            node("B", None, 1, "C * 2", ""),
            node("Self", None, 1, "Self + 1", ""),
            node("Ok", None, 1, "X", ""),
        ],
        vec![metric("C", "A / 2")],
        vec![],
    );
    let c = vals(&[("X", 1.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    for n in ["A", "B", "Self"] {
        match &r.node(n).unwrap().status {
            Status::Error(e) => assert!(e.starts_with("reference cycle: "), "{n}: {e}"),
            s => panic!("{n}: {s:?}"),
        }
        assert_eq!(r.node(n).unwrap().value, None);
    }
    match &r.node("A").unwrap().status {
        Status::Error(e) => assert_eq!(e, "reference cycle: A -> B -> C -> A"),
        s => panic!("{s:?}"),
    }
    assert_eq!(r.node("A").unwrap().above_threshold, None);
    assert_eq!(r.node("Ok").unwrap().value, Some(1.0));
    // required_events terminates too.
    let ev = required_events(m, &Selection::all()).unwrap();
    assert_eq!(ev.into_iter().collect::<Vec<_>>(), ["X"]);
    // A long non-cyclic reference chain is fine.
    let mut metrics = vec![metric("M0", "X")];
    let names: Vec<&'static str> = (1..300)
        .map(|i| &*Box::leak(format!("M{i}").into_boxed_str()))
        .collect();
    let formulas: Vec<&'static str> = (1..300)
        .map(|i| &*Box::leak(format!("M{} + 1", i - 1).into_boxed_str()))
        .collect();
    for (n, f) in names.iter().zip(&formulas) {
        metrics.push(metric(n, f));
    }
    let m = model(
        "chain",
        vec![node("Top", None, 1, "M299", "")],
        metrics,
        vec![],
    );
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert_eq!(r.nodes[0].value, Some(300.0));
}

#[test]
fn thresholds() {
    let m = model(
        "thr",
        vec![
            node("P", None, 1, "P_EV", "P > 20"),
            node("K", Some("P"), 2, "K_EV", "K > 10 & P > 20"),
            node("NoThr", Some("P"), 2, "K_EV", ""),
            node("BadThr", Some("P"), 2, "K_EV", "MISSING_EV > 1"),
        ],
        vec![],
        vec![],
    );
    let r = evaluate(
        m,
        &Selection::all(),
        &vals(&[("P_EV", 30.0), ("K_EV", 12.0)]),
        &Constants::default(),
    )
    .unwrap();
    assert_eq!(r.node("P").unwrap().above_threshold, Some(true));
    assert_eq!(r.node("K").unwrap().above_threshold, Some(true));
    assert_eq!(r.node("NoThr").unwrap().above_threshold, None);
    assert_eq!(r.node("BadThr").unwrap().above_threshold, None);
    // The threshold's missing event does not change the node's own status.
    assert_eq!(r.node("BadThr").unwrap().status, Status::Ok);
    let r = evaluate(
        m,
        &Selection::all(),
        &vals(&[("P_EV", 15.0), ("K_EV", 12.0)]),
        &Constants::default(),
    )
    .unwrap();
    assert_eq!(r.node("K").unwrap().above_threshold, Some(false));
    // The threshold's events are required.
    let ev = required_events(m, &Selection::all()).unwrap();
    assert!(ev.contains("MISSING_EV"));
}

struct Shares(HashMap<String, f64>, HashMap<String, f64>);
impl Values for Shares {
    fn event(&self, id: &str) -> Option<f64> {
        self.0.event(id)
    }
    fn counted_share(&self, id: &str) -> Option<f64> {
        self.1.get(id).copied()
    }
}

#[test]
fn counted_share_is_the_minimum_over_used_events() {
    let m = skl_like();
    let shares = vals(&[
        ("CPU_CLK_UNHALTED.THREAD", 1.0),
        ("IDQ_UOPS_NOT_DELIVERED.CORE", 0.5),
        ("UOPS_RETIRED.RETIRE_SLOTS", 0.8),
        ("CYCLE_ACTIVITY.STALLS_MEM_ANY", 0.25),
    ]);
    let v = Shares(skl_counts(), shares);
    let r = evaluate(m, &Selection::all(), &v, &Constants::default()).unwrap();
    assert_eq!(r.node("Retiring").unwrap().counted_share, Some(0.8));
    assert_eq!(r.node("Frontend_Bound").unwrap().counted_share, Some(0.5));
    // Backend_Bound refers to the three others.
    assert_eq!(r.node("Backend_Bound").unwrap().counted_share, Some(0.5));
    assert_eq!(r.node("Memory_Bound").unwrap().counted_share, Some(0.25));
    let r = evaluate(m, &Selection::all(), &skl_counts(), &Constants::default()).unwrap();
    assert_eq!(r.node("Retiring").unwrap().counted_share, None);
}

#[test]
fn values_lookup_exact_then_case_insensitive_and_escapes() {
    let m = model(
        "lookup",
        vec![
            node("A", None, 1, "uops_retired.ms:c1:e1 + 0", ""),
            node("B", None, 1, r"topdown\-fe\-bound", ""),
            node("C", None, 1, r"cpu@EV\,cmask\=0x6@", ""),
            node("D", None, 1, "Ev", ""),
        ],
        vec![],
        vec![],
    );
    let mut c: BTreeMap<String, f64> = BTreeMap::new();
    c.insert("UOPS_RETIRED.MS:c1:e1".into(), 5.0);
    c.insert("topdown-fe-bound".into(), 6.0);
    c.insert("cpu@EV,cmask=0x6@".into(), 7.0);
    c.insert("EV".into(), 8.0);
    c.insert("Ev".into(), 9.0);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert_eq!(r.node("A").unwrap().value, Some(5.0));
    assert_eq!(r.node("B").unwrap().value, Some(6.0));
    assert_eq!(r.node("C").unwrap().value, Some(7.0));
    assert_eq!(r.node("D").unwrap().value, Some(9.0)); // exact match wins
                                                       // Escapes removed in required ids, modifiers kept.
    let ev = required_events(m, &Selection::all()).unwrap();
    assert_eq!(
        ev.into_iter().collect::<Vec<_>>(),
        [
            "Ev",
            "cpu@EV,cmask=0x6@",
            "topdown-fe-bound",
            "uops_retired.ms:c1:e1"
        ]
    );
    // The escaped spelling is accepted as a key too.
    let c = vals(&[(r"topdown\-fe\-bound", 3.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert_eq!(r.node("B").unwrap().value, Some(3.0));
}

#[test]
fn non_finite_input_is_an_error() {
    let m = model("nan", vec![node("A", None, 1, "X + 1", "")], vec![], vec![]);
    for bad in [f64::NAN, f64::INFINITY] {
        let r = evaluate(
            m,
            &Selection::all(),
            &vals(&[("X", bad)]),
            &Constants::default(),
        )
        .unwrap();
        assert!(matches!(&r.nodes[0].status, Status::Error(e) if e.contains("non-finite")));
        assert_eq!(r.nodes[0].value, None);
    }
    let m = model(
        "inf",
        vec![node("A", None, 1, "X * 1e308 * 10", "")],
        vec![],
        vec![],
    );
    let r = evaluate(
        m,
        &Selection::all(),
        &vals(&[("X", 1.0)]),
        &Constants::default(),
    )
    .unwrap();
    assert!(matches!(&r.nodes[0].status, Status::Error(e) if e.contains("infinity")));
}

#[test]
fn retire_latency_operands() {
    let m = model(
        "gnrish",
        vec![
            node(
                "Local_MEM",
                None,
                1,
                "100 * LOCAL_DRAM * LOCAL_DRAM:retire_latency / CLKS",
                "",
            ),
            node("Other", None, 1, "100 * X * X:R / CLKS", ""),
        ],
        vec![],
        vec![("LOCAL_DRAM", 115.83)],
    );
    let c = vals(&[("LOCAL_DRAM", 10.0), ("CLKS", 11583.0), ("X", 1.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert!(close(r.node("Local_MEM").unwrap().value.unwrap(), 10.0));
    // No default and no value: reported as missing, by its full id.
    let o = r.node("Other").unwrap();
    assert_eq!(o.status, Status::MissingEvents);
    assert_eq!(o.missing_events, vec!["X:R"]);
    // A measured value overrides the default.
    let mut c2 = c.clone();
    c2.insert("LOCAL_DRAM:retire_latency".into(), 231.66);
    c2.insert("X:retire_latency".into(), 5.0); // the other spelling of X:R
    let r = evaluate(m, &Selection::all(), &c2, &Constants::default()).unwrap();
    assert!(close(r.node("Local_MEM").unwrap().value.unwrap(), 20.0));
    assert_eq!(r.node("Other").unwrap().status, Status::Ok);
    // Not counter events.
    let ev = required_events(m, &Selection::all()).unwrap();
    assert_eq!(
        ev.into_iter().collect::<Vec<_>>(),
        ["CLKS", "LOCAL_DRAM", "X"]
    );
    let rl = required_retire_latencies(m, &Selection::all()).unwrap();
    assert_eq!(
        rl.into_iter().collect::<Vec<_>>(),
        [
            ("LOCAL_DRAM:retire_latency".to_string(), Some(115.83)),
            ("X:R".to_string(), None)
        ]
    );
}

#[test]
fn selection_subtrees_levels_and_unknown_names() {
    let m = skl_like();
    let names =
        |sel: &Selection| -> Vec<&str> { node_order(m, sel).iter().map(|n| n.name).collect() };
    assert_eq!(
        names(&Selection::level(1)),
        [
            "Frontend_Bound",
            "Bad_Speculation",
            "Retiring",
            "Backend_Bound"
        ]
    );
    assert_eq!(names(&Selection::level(0)), Vec::<&str>::new());
    // A subtree: its ancestors for context, its descendants down to max_level.
    let sel = Selection {
        max_level: 3,
        nodes: vec!["core_bound".into()],
        metrics: Vec::new(),
    };
    assert_eq!(
        names(&sel),
        ["Backend_Bound", "Core_Bound", "Ports_Utilization"]
    );
    let sel = Selection {
        max_level: 2,
        nodes: vec!["Core_Bound".into()],
        metrics: Vec::new(),
    };
    assert_eq!(names(&sel), ["Backend_Bound", "Core_Bound"]);
    // A node deeper than max_level is shown when named.
    let sel = Selection {
        max_level: 1,
        nodes: vec!["Ports_Utilization".into()],
        metrics: Vec::new(),
    };
    assert_eq!(
        names(&sel),
        ["Backend_Bound", "Core_Bound", "Ports_Utilization"]
    );
    let r = evaluate(m, &sel, &skl_counts(), &Constants::default()).unwrap();
    assert_eq!(r.nodes.len(), 3);
    // Required events follow the selection (plus references).
    let ev = required_events(m, &Selection::level(1)).unwrap();
    assert!(!ev.contains("CYCLE_ACTIVITY.STALLS_MEM_ANY"));
    let ev = required_events(m, &Selection::level(2)).unwrap();
    assert!(ev.contains("CYCLE_ACTIVITY.STALLS_MEM_ANY"));
    assert_eq!(ev.len(), 7);

    let sel = Selection {
        max_level: 2,
        nodes: vec!["Memry_Bound".into()],
        metrics: Vec::new(),
    };
    let e = evaluate(m, &sel, &skl_counts(), &Constants::default()).unwrap_err();
    match &e {
        MetricsError::UnknownNode {
            name, suggestions, ..
        } => {
            assert_eq!(name, "Memry_Bound");
            assert_eq!(suggestions[0], "Memory_Bound");
        }
        e => panic!("{e:?}"),
    }
    assert!(e.to_string().contains("did you mean Memory_Bound"), "{e}");
    let sel = Selection {
        max_level: 2,
        nodes: vec!["zzzzzzzzzzzz".into()],
        metrics: Vec::new(),
    };
    let e = required_events(m, &sel).unwrap_err();
    assert!(e.to_string().contains("no close match"), "{e}");
}

#[test]
fn parse_errors_name_model_and_node() {
    let m = model(
        "broken",
        vec![
            node("Good", None, 1, "X", ""),
            node("Bad", None, 1, "X +", ""),
        ],
        vec![],
        vec![],
    );
    let e = evaluate(m, &Selection::all(), &vals(&[]), &Constants::default()).unwrap_err();
    let s = e.to_string();
    assert!(
        s.starts_with("cannot parse the formula of Bad in the broken table"),
        "{s}"
    );
    assert!(s.contains("\n  X +\n     ^"), "{s}");
    let m = model(
        "broken2",
        vec![node("T", None, 1, "X", "T >= 1")],
        vec![],
        vec![],
    );
    let e = required_events(m, &Selection::all()).unwrap_err();
    assert!(e.to_string().contains("threshold of T"), "{e}");
}

#[test]
fn report_serializes_with_snake_case_statuses() {
    let m = skl_like();
    let mut c = skl_counts();
    c.remove("CYCLE_ACTIVITY.STALLS_MEM_ANY");
    let r = evaluate(m, &Selection::level(2), &c, &Constants::default()).unwrap();
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["cpu"], "sklish");
    assert_eq!(j["nodes"][0]["status"], "ok");
    let mb = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "Memory_Bound")
        .unwrap();
    assert_eq!(mb["status"], "missing_events");
    assert_eq!(mb["value"], serde_json::Value::Null);
    assert_eq!(mb["missing_events"][0], "CYCLE_ACTIVITY.STALLS_MEM_ANY");
    assert_eq!(j["bottleneck"]["stop"]["reason"], "not_measured");
    let s = serde_json::to_value(Status::MissingConstant("x".into())).unwrap();
    assert_eq!(s, serde_json::json!({"missing_constant": "x"}));
}

#[test]
fn event_names_are_deduplicated_case_insensitively() {
    let m = model(
        "dedupe",
        vec![node(
            "A",
            None,
            1,
            "INST_RETIRED.ANY / inst_retired.any + Inst_Retired.Any:c1",
            "",
        )],
        vec![],
        vec![],
    );
    let ev = required_events(m, &Selection::all()).unwrap();
    assert_eq!(
        ev.into_iter().collect::<Vec<_>>(),
        ["INST_RETIRED.ANY", "Inst_Retired.Any:c1"]
    );
    let c = vals(&[("inst_retired.any", 4.0), ("INST_RETIRED.ANY:c1", 2.0)]);
    let r = evaluate(m, &Selection::all(), &c, &Constants::default()).unwrap();
    assert_eq!(r.nodes[0].value, Some(3.0));
}

#[test]
fn malformed_trees_do_not_hang_or_lose_nodes() {
    let m = model(
        "malformed",
        vec![
            node("Root", None, 1, "1", ""),
            node("Orphan", Some("Nowhere"), 2, "2", ""),
            node("CycA", Some("CycB"), 2, "3", ""),
            node("CycB", Some("CycA"), 2, "4", ""),
            node("Kid", Some("Root"), 2, "5", ""),
            node("SelfParent", Some("SelfParent"), 1, "6", ""),
        ],
        vec![],
        vec![],
    );
    let names: Vec<&str> = node_order(m, &Selection::all())
        .iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(
        names,
        ["Root", "Kid", "Orphan", "SelfParent", "CycA", "CycB"]
    );
    let r = evaluate(
        m,
        &Selection {
            max_level: 2,
            nodes: vec!["CycA".into()],
            metrics: Vec::new(),
        },
        &vals(&[]),
        &Constants::default(),
    )
    .unwrap();
    let got: Vec<&str> = r.nodes.iter().map(|n| n.name).collect();
    assert_eq!(got, ["CycA", "CycB"]);
    let r = evaluate(m, &Selection::all(), &vals(&[]), &Constants::default()).unwrap();
    assert_eq!(r.nodes.len(), 6);
}

/// Counts of an event per group, as `perf stat -M` records shared events once per group.
struct Grouped(Vec<(&'static str, usize, f64)>);

impl Values for Grouped {
    fn event(&self, id: &str) -> Option<f64> {
        // The default copy: the first.
        self.0.iter().find(|(e, _, _)| *e == id).map(|&(_, _, v)| v)
    }
    fn grouped(&self) -> bool {
        true
    }
    fn group_for(&self, _item: &str, events: &[&str]) -> Option<usize> {
        let groups: Vec<usize> = self.0.iter().map(|&(_, g, _)| g).collect();
        groups.into_iter().find(|&g| {
            events
                .iter()
                .all(|e| self.0.iter().any(|&(x, xg, _)| x == *e && xg == g))
        })
    }
    fn event_in(&self, id: &str, group: usize) -> Option<f64> {
        self.0
            .iter()
            .find(|&&(e, g, _)| e == id && g == group)
            .map(|&(_, _, v)| v)
            .or_else(|| self.event(id))
    }
}

#[test]
fn each_formula_reads_the_group_that_counted_its_events_with_references_expanded() {
    // SLOTS is a helper metric: a node that refers to it must read the cycles counted in its
    // own group, as perf expands the reference into the node's expression.
    let m = model(
        "grouped",
        vec![
            node("A", None, 1, "100 * EV_A / SLOTS", ""),
            node("B", None, 1, "100 * EV_B / SLOTS", ""),
        ],
        vec![metric("SLOTS", "4 * CYCLES")],
        vec![],
    );
    let v = Grouped(vec![
        ("EV_A", 0, 100.0),
        ("CYCLES", 0, 100.0),
        ("EV_B", 1, 100.0),
        ("CYCLES", 1, 50.0),
    ]);
    let r = evaluate(m, &Selection::level(1), &v, &Constants::default()).unwrap();
    let value = |n: &str| r.node(n).and_then(|n| n.value).unwrap();
    assert!((value("A") - 25.0).abs() < 1e-9, "{}", value("A"));
    // With the default copy (group 0's cycles) B would be 25%.
    assert!((value("B") - 50.0).abs() < 1e-9, "{}", value("B"));
}
