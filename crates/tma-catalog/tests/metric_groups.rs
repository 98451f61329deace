//! Every metric of every model carries a group, and its short name drops exactly that group.

#[test]
fn every_metric_has_a_group_and_a_short_name() {
    for m in tma_catalog::models() {
        for d in m.metrics {
            assert!(!d.group.is_empty(), "{}: {} has no group", m.key, d.name);
            assert!(!d.short_name().is_empty());
            if d.name.starts_with("Info_") {
                assert_eq!(
                    format!("Info_{}_{}", d.group, d.short_name()),
                    d.name,
                    "{}",
                    m.key
                );
            }
        }
    }
    let spr = tma_catalog::by_name("spr").unwrap();
    let ipc = spr.metric("Info_Thread_IPC").unwrap();
    assert_eq!((ipc.group, ipc.short_name()), ("Thread", "IPC"));
    assert!(ipc.in_perf_group("summary"));
    let tlb = spr.metric("Info_Memory_TLB_Load_STLB_MPKI").unwrap();
    assert_eq!(
        (tlb.group, tlb.short_name()),
        ("Memory_TLB", "Load_STLB_MPKI")
    );
    let b = spr.metric("Bottleneck_Mispredictions").unwrap();
    assert_eq!((b.group, b.short_name()), ("Bottleneck", "Mispredictions"));
}
