//! Engine-level check of the methodology's AMD case from the synthetic
//! fixture `tests/fixtures/metrics/zen4-sha256-counts.json` (see tests/fixtures/README.md).

use std::collections::HashMap;

use tma_metrics::{evaluate, required_events, Constants, Selection, Status, StopReason};

fn read_fixture(name: &str) -> Vec<u8> {
    let p = tma_testkit::fixture("metrics").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn zen4_sha256_case_gives_the_published_level2_tree() {
    let counts: HashMap<String, f64> =
        serde_json::from_slice(&read_fixture("zen4-sha256-counts.json")).unwrap();
    let zen4 = tma_catalog::by_name("zen4").unwrap();
    let sel = Selection::level(2);
    // The fixture holds exactly the events level 2 needs.
    let need = required_events(zen4, &sel).unwrap();
    let mut have: Vec<&String> = counts.keys().collect();
    have.sort();
    assert_eq!(have, need.iter().collect::<Vec<_>>());

    let r = evaluate(zen4, &sel, &counts, &Constants::default()).unwrap();
    let one_decimal = |n: &str| {
        let node = r.node(n).unwrap_or_else(|| panic!("no node {n}"));
        assert_eq!(node.status, Status::Ok, "{n}");
        (node.value.unwrap() * 10.0).round() / 10.0
    };
    for (node, want) in [
        ("frontend_bound_bandwidth", 6.1),
        ("frontend_bound_latency", 0.1),
        ("bad_speculation", 0.0),
        ("backend_bound_cpu", 65.9),
        ("backend_bound_memory", 1.7),
        ("retiring_fastpath", 20.2),
        ("retiring_microcode", 6.1),
        ("smt_contention", 0.0),
    ] {
        assert_eq!(one_decimal(node), want, "{node}");
    }
    let total: f64 = r
        .nodes
        .iter()
        .filter(|n| n.level == 1)
        .map(|n| n.value.unwrap())
        .sum();
    assert!((total - 100.0).abs() < 1e-9, "{total}");
    assert_eq!(r.bottleneck.path, ["backend_bound", "backend_bound_cpu"]);
    assert_eq!(r.bottleneck.node.as_deref(), Some("backend_bound_cpu"));
    assert_eq!(r.bottleneck.stop, StopReason::Leaf);
}
