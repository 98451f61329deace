//! Replayed hardware sample streams: PERF_RECORD_SAMPLE bodies with read groups, built
//! as the kernel lays them out, fed through the live path (ring-buffer records) into
//! per-function trees whose expected values were worked out by hand from the formulas
//! (shown next to each figure).

use std::collections::BTreeMap;

use tma_metrics::Constants;
use tma_perf::event::SpecKind;

use super::build::build;
use super::doc::{FunctionTree, TreeProfile};
use super::layout::{LayoutKind, TreeLayout};
use super::replay::{replay, ReplaySample};

const A: u64 = 0x1000;
const B: u64 = 0x2000;

fn values(f: &FunctionTree) -> BTreeMap<String, f64> {
    f.nodes
        .iter()
        .filter_map(|n| Some((n.name.clone(), n.value?)))
        .collect()
}

fn assert_tree(f: &FunctionTree, want: &[(&str, f64)], bottleneck: &str) {
    let got = values(f);
    for (n, v) in want {
        let g = got
            .get(*n)
            .unwrap_or_else(|| panic!("{}: no value for {n}: {got:?}", f.function));
        assert!((g - v).abs() < 1e-9, "{} {n}: {g} != {v}", f.function);
    }
    assert_eq!(
        f.bottleneck.as_ref().and_then(|b| b.node.as_deref()),
        Some(bottleneck),
        "{}",
        f.function
    );
}

fn by_name(t: &TreeProfile, addr: u64) -> &FunctionTree {
    let name = format!("[unknown] {addr:#x}");
    t.functions.iter().find(|f| f.function == name).unwrap()
}

/// Zen 4: ls_not_halted_cyc samples and leads; the PipelineL1 events are members.
/// Thread 101 samples A, A, then B; thread 102 (another CPU's group) samples B once.
#[test]
fn zen4_sampler_leads_pipeline_l1_members() {
    let zen4 = tma_catalog::by_name("zen4").unwrap();
    let layout = TreeLayout::hardware(zen4, 1, false, false).unwrap();
    assert_eq!(layout.kind, LayoutKind::SamplerLeads);
    assert_eq!(layout.leader, None);
    assert_eq!(layout.sampler.name, "ls_not_halted_cyc");
    assert_eq!(layout.members.len(), 5);
    assert!(layout.dropped.is_empty());
    const CYC: &str = "ls_not_halted_cyc";
    const FE: &str = "de_no_dispatch_per_slot.no_ops_from_frontend";
    const DISP: &str = "de_src_op_disp.all";
    const RET: &str = "ex_ret_ops";
    const BE: &str = "de_no_dispatch_per_slot.backend_stalls";
    let reads = [
        ReplaySample {
            tid: 101,
            ip: A,
            group_id: 10,
            values: &[(CYC, 400), (FE, 240), (DISP, 600), (RET, 480), (BE, 1560)],
        },
        ReplaySample {
            tid: 101,
            ip: A,
            group_id: 10,
            values: &[
                (CYC, 1000),
                (FE, 600),
                (DISP, 1500),
                (RET, 1200),
                (BE, 3900),
            ],
        },
        ReplaySample {
            tid: 101,
            ip: B,
            group_id: 10,
            values: &[
                (CYC, 2000),
                (FE, 5600),
                (DISP, 3000),
                (RET, 2400),
                (BE, 5400),
            ],
        },
        ReplaySample {
            tid: 102,
            ip: B,
            group_id: 20,
            values: &[
                (CYC, 1000),
                (FE, 1000),
                (DISP, 1500),
                (RET, 1200),
                (BE, 1500),
            ],
        },
    ];
    let (p, first) = replay(&layout, &reads);
    let t = build(&p, &layout, Some(zen4), 1, &Constants::default(), 10, first).unwrap();
    assert_eq!(t.first_reads, 2);
    // A: 1000 cycles = 6000 slots; FE 600/6000, BS (1500-1200)/6000, RET 1200/6000,
    // BE 3900/6000.
    let a = by_name(&t, A);
    assert_eq!((a.samples, a.mixed), (2, 0));
    assert_eq!(a.count(CYC), Some(1000));
    assert_tree(
        a,
        &[
            ("frontend_bound", 10.0),
            ("bad_speculation", 5.0),
            ("retiring", 20.0),
            ("backend_bound", 65.0),
            ("smt_contention", 0.0),
        ],
        "backend_bound",
    );
    // B: thread 101's increase (1000, 5000, 1500, 1200, 1500) plus thread 102's first
    // read = 2000 cycles = 12000 slots; FE 6000, BS 600, RET 2400, BE 3000.
    let b = by_name(&t, B);
    assert_eq!((b.samples, b.mixed), (2, 1));
    assert!((b.mixed_percent - 50.0).abs() < 1e-9);
    // Thread 101's increase at B began at A: 5000 of B's 6000 frontend slots.
    let fe = b.counts.iter().find(|c| c.event == FE).unwrap();
    assert!((fe.mixed_percent - 500.0 / 6.0).abs() < 1e-9, "{fe:?}");
    assert!(t.notes.iter().any(|n| n.starts_with("[unknown] 0x2000: 83% of its de_no_dispatch_per_slot.no_ops_from_frontend came with mixed samples")), "{:?}", t.notes);
    assert_tree(
        b,
        &[
            ("frontend_bound", 50.0),
            ("bad_speculation", 5.0),
            ("retiring", 20.0),
            ("backend_bound", 25.0),
        ],
        "frontend_bound",
    );
    // Ranked by cycles: B first.
    assert_eq!(t.functions[0].function, format!("[unknown] {B:#x}"));
    // The whole run: 3000 cycles = 18000 slots; FE 6600, RET 3600, BE 6900, BS 900.
    assert_tree(
        &t.total,
        &[
            ("frontend_bound", 100.0 * 6600.0 / 18000.0),
            ("retiring", 20.0),
            ("backend_bound", 100.0 * 6900.0 / 18000.0),
            ("bad_speculation", 5.0),
        ],
        "backend_bound",
    );
}

/// Ice Lake: slots leads and cannot sample; cycles (the second event) samples; the
/// PERF_METRICS slices (slot counts, as the kernel reports them) are members.
#[test]
fn icelake_slots_leader_second_event_samples() {
    let icl = tma_catalog::by_name("icl").unwrap();
    let layout = TreeLayout::hardware(icl, 1, false, false).unwrap();
    assert_eq!(layout.kind, LayoutKind::SlotsLeader);
    assert_eq!(layout.leader.as_ref().unwrap().kind, SpecKind::Slots);
    assert_eq!(layout.sampler.name, "CPU_CLK_UNHALTED.THREAD");
    assert_eq!(
        layout.read_order()[..2],
        ["TOPDOWN.SLOTS:perf_metrics", "CPU_CLK_UNHALTED.THREAD"]
    );
    // 8 general-purpose counters hold the six other events and the two UOPS_DECODED
    // ones (Retiring's threshold, through Heavy_Operations), which may only use
    // counters 0-3; with the NMI watchdog holding one, the last does not fit.
    assert!(layout.dropped.is_empty(), "{:?}", layout.dropped);
    assert_eq!(layout.members.len(), 4 + 8);
    let with_nmi = TreeLayout::hardware(icl, 1, true, false).unwrap();
    assert_eq!(with_nmi.dropped.len(), 1, "{:?}", with_nmi.dropped);
    // What is left out is read by a threshold only; the values' events are kept.
    let threshold_only = [
        "IDQ.MITE_UOPS",
        "IDQ.MS_UOPS",
        "UOPS_ISSUED.ANY",
        "UOPS_RETIRED.SLOTS",
        "UOPS_DECODED.DEC0",
        "UOPS_DECODED.DEC0:c1",
    ];
    assert!(
        threshold_only.contains(&with_nmi.dropped[0].0.as_str()),
        "{:?}",
        with_nmi.dropped
    );
    for kept in ["INT_MISC.UOP_DROPPING", "INT_MISC.CLEARS_COUNT"] {
        assert!(with_nmi.members.iter().any(|m| m.name == kept), "{kept}");
    }
    assert!(
        with_nmi.dropped[0]
            .1
            .contains("7 usable (one more is held by the NMI watchdog)"),
        "{:?}",
        with_nmi.dropped
    );
    const SLOTS: &str = "TOPDOWN.SLOTS:perf_metrics";
    const FE: &str = "PERF_METRICS.FRONTEND_BOUND";
    const BS: &str = "PERF_METRICS.BAD_SPECULATION";
    const RET: &str = "PERF_METRICS.RETIRING";
    const BE: &str = "PERF_METRICS.BACKEND_BOUND";
    const DROP: &str = "INT_MISC.UOP_DROPPING";
    const CLEARS: &str = "INT_MISC.CLEARS_COUNT";
    let reads = [
        ReplaySample {
            tid: 7,
            ip: A,
            group_id: 1,
            values: &[
                (SLOTS, 10000),
                ("CPU_CLK_UNHALTED.THREAD", 2000),
                (FE, 2000),
                (BS, 1000),
                (RET, 3000),
                (BE, 4000),
                (DROP, 400),
                (CLEARS, 100),
            ],
        },
        ReplaySample {
            tid: 7,
            ip: B,
            group_id: 1,
            values: &[
                (SLOTS, 30000),
                ("CPU_CLK_UNHALTED.THREAD", 6000),
                (FE, 12000),
                (BS, 3000),
                (RET, 9000),
                (BE, 6000),
                (DROP, 400),
                (CLEARS, 100),
            ],
        },
    ];
    let (p, first) = replay(&layout, &reads);
    let t = build(&p, &layout, Some(icl), 1, &Constants::default(), 10, first).unwrap();
    // A: slots 10000; FE 2000/10000 - 400/10000 = 16%; BE 4000/10000 + 5*100/10000 =
    // 45%; RET 30%; BS 1 - (0.16 + 0.45 + 0.30) = 9%.
    let a = by_name(&t, A);
    assert_tree(
        a,
        &[
            ("Frontend_Bound", 16.0),
            ("Bad_Speculation", 9.0),
            ("Backend_Bound", 45.0),
            ("Retiring", 30.0),
        ],
        "Backend_Bound",
    );
    // B: increases slots 20000, FE 10000, BS 2000, RET 6000, BE 2000, no drops or
    // clears: FE 50%, BS 10%, RET 30%, BE 10%.
    let b = by_name(&t, B);
    assert_tree(
        b,
        &[
            ("Frontend_Bound", 50.0),
            ("Bad_Speculation", 10.0),
            ("Backend_Bound", 10.0),
            ("Retiring", 30.0),
        ],
        "Frontend_Bound",
    );
    assert_eq!((b.mixed, a.mixed), (1, 0));
    assert_eq!(t.functions[0].count(SLOTS), Some(20000), "ranked by slots");
    // Thresholds as tma stat applies them: Backend_Bound > 20, Frontend_Bound > 15.
    assert_eq!(a.node("Backend_Bound").unwrap().above_threshold, Some(true));
    assert_eq!(
        b.node("Backend_Bound").unwrap().above_threshold,
        Some(false)
    );
    assert_eq!(
        b.node("Frontend_Bound").unwrap().above_threshold,
        Some(true)
    );
}

/// Skylake, SMT off: cycles samples and leads; the AnyThread and SMT-estimate events
/// are left out, and the four general-purpose counters hold the level's events.
#[test]
fn skylake_sampler_leads_within_four_counters() {
    let skl = tma_catalog::by_name("skl").unwrap();
    let layout = TreeLayout::hardware(skl, 1, false, false).unwrap();
    assert_eq!(layout.kind, LayoutKind::SamplerLeads);
    assert_eq!(layout.sampler.name, "CPU_CLK_UNHALTED.THREAD");
    let mut members: Vec<&str> = layout.members.iter().map(|m| m.name.as_str()).collect();
    members.sort();
    assert_eq!(
        members,
        [
            "IDQ_UOPS_NOT_DELIVERED.CORE",
            "INST_RETIRED.ANY",
            "INT_MISC.RECOVERY_CYCLES",
            "UOPS_ISSUED.ANY",
            "UOPS_RETIRED.RETIRE_SLOTS"
        ]
    );
    let reads = [ReplaySample {
        tid: 3,
        ip: A,
        group_id: 1,
        values: &[
            ("CPU_CLK_UNHALTED.THREAD", 1000),
            ("IDQ_UOPS_NOT_DELIVERED.CORE", 800),
            ("UOPS_ISSUED.ANY", 1400),
            ("UOPS_RETIRED.RETIRE_SLOTS", 1200),
            ("INT_MISC.RECOVERY_CYCLES", 50),
            ("INST_RETIRED.ANY", 900),
        ],
    }];
    let (p, first) = replay(&layout, &reads);
    let t = build(&p, &layout, Some(skl), 1, &Constants::default(), 10, first).unwrap();
    // 4 x 1000 = 4000 slots: FE 800/4000 = 20%; BS (1400 - 1200 + 4*50)/4000 = 10%;
    // RET 1200/4000 = 30%; BE 1 - 0.2 - (1400 + 200)/4000 = 40%.
    assert_tree(
        by_name(&t, A),
        &[
            ("Frontend_Bound", 20.0),
            ("Bad_Speculation", 10.0),
            ("Retiring", 30.0),
            ("Backend_Bound", 40.0),
        ],
        "Backend_Bound",
    );
    // With SMT on the estimate's events are kept; the caveat is tma doctor's, said for a
    // host with SMT on (tests/fixtures/roots/skx-smt-5.15) and not for one with it off.
    let smt = TreeLayout::hardware(skl, 1, false, true).unwrap();
    assert!(smt
        .members
        .iter()
        .any(|m| m.name == "CPU_CLK_UNHALTED.REF_XCLK"));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/roots/skx-smt-5.15");
    let caveats = tma_checks::tree_caveats(&tma_host::Host::under(&root), Some(skl));
    assert!(caveats
        .iter()
        .any(|c| c.id == "smt_level1" && c.summary.contains("per-thread level 1 is meaningless")));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/doctor/this-vm");
    let caveats = tma_checks::tree_caveats(&tma_host::Host::under(&root), Some(skl));
    assert!(
        !caveats.iter().any(|c| c.id == "smt_level1"),
        "SMT off: {caveats:?}"
    );
}
