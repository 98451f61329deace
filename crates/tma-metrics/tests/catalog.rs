//! The engine against every table of `tma_catalog::models()`: every formula and threshold
//! parses and resolves, and a property test with random but consistent counts checks that
//! level 1 sums to 100 % and that each level-1 node equals the sum of its level-2 children.
//! The random draws come from proptest with a fixed seed: a run replays exactly, and a failure
//! is shrunk (every draw towards the low end of its range).

use std::cell::Cell;
use std::collections::HashMap;

use proptest::prelude::*;

use tma_catalog::{EventId, Model, Vendor};
use tma_metrics::{
    evaluate, parse, required_events, required_retire_latencies, CompiledModel, Constants,
    Selection, Status,
};

#[test]
fn every_formula_and_threshold_of_every_model_parses_and_resolves() {
    let models = tma_catalog::models();
    assert!(!models.is_empty());
    let mut problems = Vec::new();
    for m in models {
        if let Err(e) = CompiledModel::new(m) {
            problems.push(format!("{}: {e}", m.key));
            continue;
        }
        let texts = m
            .nodes
            .iter()
            .flat_map(|n| [(n.name, n.formula), (n.name, n.threshold)])
            .chain(m.metrics.iter().map(|x| (x.name, x.formula)));
        for (owner, src) in texts {
            if src.trim().is_empty() {
                continue;
            }
            let e = parse(src).expect("parsed above");
            for id in e.identifiers() {
                let is_ref = m.node(id).is_some() || m.metric(id).is_some();
                let base = EventId::parse(id).base;
                let is_event = m.event(base).is_some();
                if !is_ref && !is_event {
                    problems.push(format!(
                        "{} {owner}: '{id}' is neither a node, a metric nor an event of the table",
                        m.key
                    ));
                }
            }
            for c in e.constants() {
                if tma_metrics::ConstKind::from_name(c).is_none() {
                    problems.push(format!("{} {owner}: unknown constant #{c}", m.key));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The random draws of one synthetic run, each uniform in [0, 1), handed out in order. They
/// come from proptest, which shrinks them towards 0 (each `range` towards its low end).
struct Draws {
    u: Vec<f64>,
    next: usize,
}

impl Draws {
    fn new(u: Vec<f64>) -> Draws {
        Draws { u, next: 0 }
    }
    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        let u = self.u[self.next];
        self.next += 1;
        lo + (hi - lo) * u
    }
}

/// Draws enough for `Run::new` (at most 25) plus one per event and retire latency.
fn draws(events: usize, retire: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(0.0..1.0f64, 25 + events + retire)
}

/// Latent state of one synthetic run; every count is derived from it so the counts are
/// mutually consistent (PERF_METRICS slices sum to the slots, issued >= retired, a
/// sub-event never exceeds its total, cycles > 0...).
struct Run {
    smt: bool,
    c: f64,
    w: f64,
    s: f64,
    fe: f64,
    bs: f64,
    be: f64,
    ret: f64,
    smt_share: f64,
    u_fl: f64,
    u_brm: f64,
    u_mb: f64,
    u_heavy: f64,
    drop: f64,
    rec: f64,
    clears: f64,
    inst: f64,
    macro_fused: f64,
    ms_uops: f64,
    mite: f64,
    dec0: f64,
    dec0_c1: f64,
    stalls_total: f64,
    stalls_mem: f64,
    other: f64,
}

impl Run {
    fn new(model: &Model, rng: &mut Draws, smt: bool) -> Run {
        let c = rng.range(1e8, 1e10).round();
        let w = model.slots_per_cycle as f64;
        let s = w * c;
        // Level-1 shares: random weights, each at least 2 % so no slice is degenerate.
        let amd = model.vendor == Vendor::Amd;
        let mut wts: Vec<f64> = (0..if amd { 5 } else { 4 })
            .map(|_| rng.range(0.02, 1.0))
            .collect();
        let sum: f64 = wts.iter().sum();
        wts.iter_mut().for_each(|x| *x /= sum);
        let (fe, bs, be, ret) = (wts[0], wts[1], wts[2], wts[3]);
        let smt_share = if amd { wts[4] } else { 0.0 };
        let u_fl = rng.range(0.05, 0.95);
        let ret_slots = ret * s;
        let inst = (rng.range(0.5, 1.0) * ret_slots).round();
        let mite = rng.range(0.1, 0.9) * ret_slots;
        let dec0 = rng.range(0.05, 0.5) * mite;
        let stalls_total = rng.range(0.1, 0.8) * c;
        Run {
            smt,
            c,
            w,
            s,
            fe,
            bs,
            be,
            ret,
            smt_share,
            u_fl,
            u_brm: rng.range(0.05, 0.95),
            u_mb: rng.range(0.05, 0.95),
            u_heavy: rng.range(0.05, 0.95),
            // INT_MISC.UOP_DROPPING: a small part of the fetch-latency slots.
            drop: rng.range(0.0, 0.1) * u_fl * fe * s,
            // Recovery cycles: W * rec stays within half the bad-speculation slots.
            rec: rng.range(0.0, 0.5) * bs * s / w,
            clears: rng.range(0.0, 0.5) * bs * s / w,
            inst,
            macro_fused: rng.range(0.0, 0.3) * inst,
            ms_uops: rng.range(0.0, 0.3) * ret_slots,
            mite,
            dec0,
            dec0_c1: rng.range(0.2, 1.0) * dec0,
            stalls_total,
            stalls_mem: rng.range(0.05, 1.0) * stalls_total,
            other: rng.range(0.001, 0.05),
        }
    }

    /// Count for one event id (base name plus modifiers).
    fn count(&self, id: &str, rng: &mut Draws) -> f64 {
        let ev = EventId::parse(id);
        let base = ev.base.to_ascii_uppercase();
        let cmask = ev
            .modifiers
            .iter()
            .any(|m| m.starts_with('c') && m[1..].chars().all(|d| d.is_ascii_digit()));
        let (c, s) = (self.c, self.s);
        let threads = if self.smt { 2.0 } else { 1.0 };
        let issued = self.ret * s + self.bs * s - self.w * self.rec;
        let v = match base.as_str() {
            // Cycles.
            "CPU_CLK_UNHALTED.THREAD"
            | "CPU_CLK_UNHALTED.THREAD_P"
            | "CPU_CLK_UNHALTED.CORE"
            | "CPU_CLK_UNHALTED.CORE_P"
            | "CPU_CLK_UNHALTED.DISTRIBUTED"
            | "LS_NOT_HALTED_CYC"
            | "CYCLES" => c,
            "CPU_CLK_UNHALTED.THREAD_ANY" => threads * c,
            "CPU_CLK_UNHALTED.REF_TSC" => 0.9 * c,
            "CPU_CLK_UNHALTED.REF_XCLK" | "CPU_CLK_UNHALTED.REF_XCLK_ANY" => c / 25.0,
            "CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE" => c / 50.0,
            "TOPDOWN.SLOTS" | "TOPDOWN.SLOTS_P" | "SLOTS" => s,
            // PERF_METRICS slices (they sum to the slots); level-2 ones within their parent.
            "PERF_METRICS.FRONTEND_BOUND" => self.fe * s,
            "PERF_METRICS.BAD_SPECULATION" => self.bs * s,
            "PERF_METRICS.BACKEND_BOUND" => self.be * s,
            "PERF_METRICS.RETIRING" => self.ret * s,
            "PERF_METRICS.FETCH_LATENCY" => self.u_fl * self.fe * s,
            "PERF_METRICS.BRANCH_MISPREDICTS" => self.u_brm * self.bs * s,
            "PERF_METRICS.MEMORY_BOUND" => self.u_mb * self.be * s,
            "PERF_METRICS.HEAVY_OPERATIONS" => self.u_heavy * self.ret * s,
            "INT_MISC.UOP_DROPPING" => self.drop,
            "INT_MISC.CLEARS_COUNT" => self.clears,
            "INT_MISC.RECOVERY_CYCLES" => self.rec,
            "INT_MISC.RECOVERY_CYCLES_ANY" => threads * self.rec,
            // Generic-counter level 1 (Skylake family).
            "IDQ_UOPS_NOT_DELIVERED.CORE" => self.fe * s,
            "IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE" => self.u_fl * self.fe * s / self.w,
            "UOPS_RETIRED.RETIRE_SLOTS" | "UOPS_RETIRED.SLOTS" => self.ret * s,
            "UOPS_ISSUED.ANY" => issued,
            "INST_RETIRED.ANY" | "INST_RETIRED.ANY_P" | "INSTRUCTIONS" => self.inst,
            "UOPS_RETIRED.MACRO_FUSED" => self.macro_fused,
            "IDQ.MS_UOPS" => self.ms_uops,
            "IDQ.MITE_UOPS" => self.mite,
            "UOPS_DECODED.DEC0" if cmask => self.dec0_c1,
            "UOPS_DECODED.DEC0" => self.dec0,
            "CYCLE_ACTIVITY.STALLS_TOTAL" => self.stalls_total,
            "CYCLE_ACTIVITY.STALLS_MEM_ANY" => self.stalls_mem,
            // Intel E-cores (Gracemont, Crestmont): TOPDOWN_* events, each level-1 total
            // partitioned exactly by its level-2 sub-events, as the hardware counts them.
            "TOPDOWN_FE_BOUND.ALL" | "TOPDOWN_FE_BOUND.ALL_P" => self.fe * s,
            "TOPDOWN_FE_BOUND.FRONTEND_LATENCY" => self.u_fl * self.fe * s,
            "TOPDOWN_FE_BOUND.FRONTEND_BANDWIDTH" => (1.0 - self.u_fl) * self.fe * s,
            "TOPDOWN_BAD_SPECULATION.ALL" | "TOPDOWN_BAD_SPECULATION.ALL_P" => self.bs * s,
            "TOPDOWN_BAD_SPECULATION.MISPREDICT" => self.u_brm * self.bs * s,
            "TOPDOWN_BAD_SPECULATION.MACHINE_CLEARS" => (1.0 - self.u_brm) * self.bs * s,
            "TOPDOWN_BE_BOUND.ALL" | "TOPDOWN_BE_BOUND.ALL_P" => self.be * s,
            "TOPDOWN_BE_BOUND.ALLOC_RESTRICTIONS" => self.u_mb * self.be * s,
            "TOPDOWN_RETIRING.ALL" | "TOPDOWN_RETIRING.ALL_P" => self.ret * s,
            // AMD pipeline utilization.
            "DE_NO_DISPATCH_PER_SLOT.NO_OPS_FROM_FRONTEND" if cmask => {
                self.u_fl * self.fe * s / self.w
            }
            "DE_NO_DISPATCH_PER_SLOT.NO_OPS_FROM_FRONTEND" => self.fe * s,
            "DE_NO_DISPATCH_PER_SLOT.BACKEND_STALLS" => self.be * s,
            "DE_NO_DISPATCH_PER_SLOT.SMT_CONTENTION" => self.smt_share * s,
            "DE_SRC_OP_DISP.ALL" => (self.ret + self.bs) * s,
            "EX_RET_OPS" => self.ret * s,
            "EX_RET_UCODE_OPS" => self.u_heavy * self.ret * s,
            "EX_NO_RETIRE.NOT_COMPLETE" => 0.5 * c,
            "EX_NO_RETIRE.LOAD_NOT_COMPLETE" => self.u_mb * 0.5 * c,
            // Anything else (level-3 detail events, branch and clear counts): a small,
            // positive count well below the cycles.
            _ => rng.range(0.2, 1.0) * self.other * c,
        };
        v.round().max(1.0)
    }
}

fn constants(smt: bool) -> Constants {
    Constants {
        smt_on: smt,
        threads_per_core: if smt { 2 } else { 1 },
        core_wide: true,
        num_cpus_online: if smt { 16 } else { 8 },
        num_cores: 8,
        num_sockets: 1,
        tsc_freq_hz: Some(2.0e9),
        duration_s: Some(1.5),
        chas_per_socket: Some(8),
    }
}

/// Random, consistent counts for every level 1-3 event; level 1 must sum to 100 % and each
/// level-1 node must equal the sum of its level-2 children (TMA: Frontend = Fetch_Latency +
/// Fetch_Bandwidth, Bad_Speculation = Branch_Mispredicts + Machine_Clears, Backend =
/// Memory_Bound + Core_Bound, Retiring = Light + Heavy; E-cores: Frontend = Ifetch_Latency +
/// Ifetch_Bandwidth, Bad_Speculation = Branch_Mispredicts + Machine_Clears, Backend =
/// Core_Bound + Resource_Bound; AMD: each L1 = sum of its L2).
/// Every level 1-3 node must get a value (so `required_events` lists all it needs).
#[test]
fn property_level1_sums_to_100_and_children_sum_to_parent_for_every_model() {
    const CASES: u32 = 256;
    const TOL: f64 = 0.01; // percentage points
    let sel = Selection::level(3);
    // The Arm Neoverse trees are not partitions (N1's level 1 is cycle accounting; the
    // drill-down children are MPKI, ratios and mixes): crates/tma-cli/tests/arm_values.rs
    // checks them against Arm's formulas instead.
    for m in tma_catalog::models()
        .iter()
        .filter(|m| m.vendor != tma_catalog::Vendor::Arm)
    {
        let events =
            required_events(m, &sel).unwrap_or_else(|e| panic!("{}: required_events: {e}", m.key));
        let retire = required_retire_latencies(m, &sel).unwrap();
        let first = Cell::new(true);
        let input = (draws(events.len(), retire.len()), any::<bool>());
        let result = tma_testkit::proptest_runner(CASES).run(&input, |(u, smt)| {
            let mut rng = Draws::new(u);
            let run = Run::new(m, &mut rng, smt);
            let mut vals: HashMap<String, f64> = events
                .iter()
                .map(|id| (id.clone(), run.count(id, &mut rng)))
                .collect();
            for (id, default) in &retire {
                if default.is_none() {
                    vals.insert(id.clone(), rng.range(5.0, 300.0));
                }
            }
            let r = evaluate(m, &sel, &vals, &constants(smt))
                .unwrap_or_else(|e| panic!("{}: evaluate: {e}", m.key));
            let ctx = |name: &str| format!("model {} smt {smt} node {name}", m.key);
            if first.replace(false) {
                let l12: Vec<String> = r
                    .nodes
                    .iter()
                    .filter(|n| n.level <= 2)
                    .map(|n| format!("{}={:.2}", n.name, n.value.unwrap_or(f64::NAN)))
                    .collect();
                eprintln!(
                    "{}: {} events, {} nodes to level 3; first case: {}",
                    m.key,
                    events.len(),
                    r.nodes.len(),
                    l12.join(" ")
                );
            }
            for n in &r.nodes {
                prop_assert!(
                    matches!(n.status, Status::Ok | Status::OutOfRange),
                    "{}: status {:?}, missing {:?}",
                    ctx(n.name),
                    n.status,
                    n.missing_events
                );
            }
            let level1: Vec<_> = r.nodes.iter().filter(|n| n.level == 1).collect();
            prop_assert!(!level1.is_empty(), "{}", m.key);
            let total: f64 = level1.iter().map(|n| n.value.unwrap()).sum();
            prop_assert!(
                (total - 100.0).abs() <= TOL,
                "{}: level 1 sums to {total}: {:?}",
                ctx("level 1"),
                level1
                    .iter()
                    .map(|n| (&n.name, n.value))
                    .collect::<Vec<_>>()
            );
            for p in &level1 {
                let pv = p.value.unwrap();
                prop_assert!((-TOL..=100.0 + TOL).contains(&pv), "{}: {pv}", ctx(p.name));
                let kids: Vec<_> = r
                    .nodes
                    .iter()
                    .filter(|n| n.parent == Some(p.name))
                    .collect();
                if kids.is_empty() {
                    continue;
                }
                let sum: f64 = kids.iter().map(|k| k.value.unwrap()).sum();
                prop_assert!(
                    (sum - pv).abs() <= TOL,
                    "{}: children sum {sum} != {pv}: {:?}",
                    ctx(p.name),
                    kids.iter().map(|k| (&k.name, k.value)).collect::<Vec<_>>()
                );
                for k in &kids {
                    let kv = k.value.unwrap();
                    prop_assert!(
                        kv >= -TOL && kv <= pv + TOL,
                        "{}: {kv} outside [0, {pv}]",
                        ctx(k.name)
                    );
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("{}: {e}", m.key);
        }
    }
}

#[test]
fn every_model_evaluates_with_no_counts_without_panicking() {
    let empty: HashMap<String, f64> = HashMap::new();
    for m in tma_catalog::models() {
        let r = evaluate(m, &Selection::all(), &empty, &Constants::default()).unwrap();
        for n in &r.nodes {
            assert_eq!(n.value, None, "{} {}", m.key, n.name);
            assert!(
                !matches!(n.status, Status::Ok | Status::OutOfRange),
                "{} {}",
                m.key,
                n.name
            );
        }
        // All zero counts: every node has a status, none panics, no NaN anywhere.
        let ev = required_events(m, &Selection::all()).unwrap();
        let zeros: HashMap<String, f64> = ev.into_iter().map(|e| (e, 0.0)).collect();
        let r = evaluate(m, &Selection::all(), &zeros, &constants(false)).unwrap();
        for n in &r.nodes {
            assert!(n.value.is_none_or(f64::is_finite), "{} {}", m.key, n.name);
        }
    }
}

/// With every event the whole tree needs (all levels) and every constant, each node of every
/// model gets a value: `required_events` is complete and no formula hits x/0 on sane counts.
#[test]
fn whole_tree_of_every_model_gets_values_when_everything_is_supplied() {
    let sel = Selection::all();
    for m in tma_catalog::models() {
        let events = required_events(m, &sel).unwrap();
        let retire = required_retire_latencies(m, &sel).unwrap();
        let input = (draws(events.len(), retire.len()), any::<bool>());
        let result = tma_testkit::proptest_runner(16).run(&input, |(u, smt)| {
            let mut rng = Draws::new(u);
            let run = Run::new(m, &mut rng, smt);
            let mut vals: HashMap<String, f64> = events
                .iter()
                .map(|id| (id.clone(), run.count(id, &mut rng)))
                .collect();
            for (id, default) in &retire {
                if default.is_none() {
                    vals.insert(id.clone(), 50.0);
                }
            }
            let r = evaluate(m, &sel, &vals, &constants(smt)).unwrap();
            prop_assert_eq!(r.nodes.len(), m.nodes.len());
            for n in &r.nodes {
                prop_assert!(
                    matches!(n.status, Status::Ok | Status::OutOfRange),
                    "{} {} smt {smt}: {:?} {:?}",
                    m.key,
                    n.name,
                    n.status,
                    n.missing_events
                );
                prop_assert!(
                    n.above_threshold.is_some() || n.threshold.is_empty(),
                    "{} {}",
                    m.key,
                    n.name
                );
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("{}: {e}", m.key);
        }
    }
}

#[test]
fn constants_prune_smt_branches_of_real_tables() {
    let skx = tma_catalog::by_name("skx").unwrap();
    let sel = Selection::level(1);
    let all = required_events(skx, &sel).unwrap();
    assert!(all.contains("CPU_CLK_UNHALTED.THREAD_ANY"), "{all:?}");
    assert!(all.contains("CPU_CLK_UNHALTED.THREAD"), "{all:?}");
    let off = tma_metrics::required_events_for(skx, &sel, &Constants::default()).unwrap();
    assert!(!off.contains("CPU_CLK_UNHALTED.THREAD_ANY"), "{off:?}");
    assert!(!off.contains("INT_MISC.RECOVERY_CYCLES_ANY"), "{off:?}");
    assert!(off.contains("CPU_CLK_UNHALTED.THREAD"), "{off:?}");
    assert!(off.is_subset(&all));
    let on = Constants {
        smt_on: true,
        threads_per_core: 2,
        ..Constants::default()
    };
    let on = tma_metrics::required_events_for(skx, &sel, &on).unwrap();
    assert!(on.contains("CPU_CLK_UNHALTED.THREAD_ANY"), "{on:?}");
    assert!(on.contains("INT_MISC.RECOVERY_CYCLES_ANY"), "{on:?}");
}
