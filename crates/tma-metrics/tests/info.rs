//! Helper-metric selection (`--metrics`, `-B`, `-M`) and evaluation beside the tree.

use std::collections::HashMap;

use tma_metrics::{
    bottleneck_metrics, evaluate, required_events, select_metrics, select_perf_groups, Constants,
    MetricsError, Selection, Status,
};

fn words(s: &[&str]) -> Vec<String> {
    s.iter().map(|w| w.to_string()).collect()
}

#[test]
fn default_set_all_names_and_groups() {
    let spr = tma_catalog::by_name("spr").unwrap();
    let d = select_metrics(spr, &[]).unwrap();
    for want in [
        "Info_Thread_IPC",
        "Info_Thread_CPI",
        "Info_Core_CoreIPC",
        "Info_Core_ILP",
        "Info_Memory_MLP",
        "Info_Memory_Load_Miss_Real_Latency",
        "Info_Frontend_DSB_Coverage",
        "Info_Inst_Mix_IpBranch",
        "Info_Bad_Spec_IpMispredict",
        "Info_Bad_Spec_Branch_Misprediction_Cost",
        "Info_Thread_UopPI",
        "Info_System_Turbo_Utilization",
        "Info_System_CPU_Utilization",
    ] {
        assert!(d.contains(&want), "default set lacks {want}: {d:?}");
    }
    let all = select_metrics(spr, &words(&["all"])).unwrap();
    assert!(all.len() > 100);
    assert!(all.iter().all(|m| !m.starts_with("Bottleneck_")));
    // Names (short or whole, any case) and groups; a group takes its sub-groups.
    let some = select_metrics(spr, &words(&["ipc", "Info_Thread_CPI", "Memory"])).unwrap();
    assert_eq!(&some[..2], &["Info_Thread_IPC", "Info_Thread_CPI"]);
    assert!(some.contains(&"Info_Memory_MLP"));
    assert!(some.contains(&"Info_Memory_TLB_Load_STLB_MPKI"));
    match select_metrics(spr, &words(&["IPX"])) {
        Err(e @ MetricsError::UnknownMetric { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("'IPX'") && msg.contains("IPC"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    let b = bottleneck_metrics(spr);
    assert_eq!(b.len(), 12);
    assert!(b.contains(&"Bottleneck_Mispredictions"));
}

#[test]
fn perf_group_names() {
    let spr = tma_catalog::by_name("spr").unwrap();
    let g = select_perf_groups(spr, &words(&["TopdownL2", "Summary"])).unwrap();
    assert_eq!(g.level, 2);
    assert!(g.metrics.contains(&"Info_Thread_IPC"));
    let zen4 = tma_catalog::by_name("zen4").unwrap();
    let g = select_perf_groups(zen4, &words(&["PipelineL1", "PipelineL2"])).unwrap();
    assert_eq!((g.level, g.metrics.len()), (2, 0));
    assert!(matches!(
        select_perf_groups(spr, &words(&["NoSuchGroup"])),
        Err(MetricsError::UnknownMetricGroup { .. })
    ));
}

#[test]
fn metrics_are_evaluated_with_the_tree_and_name_missing_events() {
    let icx = tma_catalog::by_name("icx").unwrap();
    let sel = Selection {
        metrics: words(&["IPC", "CPI", "Info_Core_ILP"]),
        ..Selection::level(1)
    };
    let need = required_events(icx, &sel).unwrap();
    assert!(need.contains("INST_RETIRED.ANY"));
    assert!(need.contains("UOPS_EXECUTED.THREAD"));
    let counts: HashMap<String, f64> = [
        ("INST_RETIRED.ANY", 3000.0),
        ("CPU_CLK_UNHALTED.THREAD", 2000.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let r = evaluate(icx, &sel, &counts, &Constants::default()).unwrap();
    assert_eq!(r.metrics.len(), 3);
    assert_eq!(r.metric("IPC").unwrap().value, Some(1.5));
    let cpi = r.metric("Info_Thread_CPI").unwrap();
    assert!((cpi.value.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(cpi.group, "Thread");
    let ilp = r.metric("ILP").unwrap();
    assert_eq!(ilp.status, Status::MissingEvents);
    assert_eq!(ilp.value, None);
    assert!(ilp
        .missing_events
        .contains(&"UOPS_EXECUTED.THREAD".to_string()));
    let bad = Selection {
        metrics: words(&["nope"]),
        ..Selection::level(1)
    };
    assert!(evaluate(icx, &bad, &counts, &Constants::default()).is_err());
}
