//! The generated E-core tables (`adl-e`, `mtl-e`) under the real formula engine, with random
//! but consistent counts derived from the tables' own encodings.
//!
//! Count model: the E-core topdown events share one event code per level-1 category (0x71
//! frontend, 0x73 bad speculation, 0x74 backend) and a umask bit per cause; an event with
//! umask 0 (`.ALL`, `.ALL_P`) counts every cause. So a run draws the level-1 split of the
//! slots (W x cycles), splits each category over the umask bits that the table's events of
//! that code name, and gives every event the sum of its bits. Parent/child sums then only
//! hold if the formulas AND the encodings are right: a wrong umask in a table breaks them.

use std::collections::{BTreeSet, HashMap};

use tma_catalog::{by_name, CoreKind, Model};
use tma_metrics::{evaluate, evaluate_metric, required_events, Constants, Selection, Status};

/// SplitMix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
    /// `n` random weights, each at least `min` before normalizing, summing to 1.
    fn split(&mut self, n: usize, min: f64) -> Vec<f64> {
        let w: Vec<f64> = (0..n).map(|_| self.range(min, 1.0)).collect();
        let s: f64 = w.iter().sum();
        w.into_iter().map(|x| x / s).collect()
    }
}

/// Counts for every event id in `ids` of model `m` in one synthetic run.
fn counts(m: &Model, ids: &[String], rng: &mut Rng) -> HashMap<String, f64> {
    let cycles = rng.range(1e8, 1e10).round();
    let slots = m.slots_per_cycle as f64 * cycles;
    let l1 = rng.split(4, 0.02); // frontend, bad speculation, backend, retiring
                                 // Per category code: the named umask bits and their share of the category's slots.
    let mut per_bit: HashMap<(u64, u64), f64> = HashMap::new();
    for (i, code) in [0x71u64, 0x73, 0x74].into_iter().enumerate() {
        let bits: BTreeSet<u64> = m
            .events
            .iter()
            .filter(|e| e.code as u64 == code)
            .flat_map(|e| (0..8).map(move |b| e.umask as u64 & (1 << b)))
            .filter(|b| *b != 0)
            .collect();
        assert!(
            !bits.is_empty(),
            "{}: no umask bits for code {code:#x}",
            m.key
        );
        let w = rng.split(bits.len(), 0.02);
        for (b, w) in bits.into_iter().zip(w) {
            per_bit.insert((code, b), w * l1[i] * slots);
        }
    }
    let inst = rng.range(0.3, 1.0) * l1[3] * slots;
    ids.iter()
        .map(|id| {
            let e = m.encode(id).unwrap_or_else(|e| panic!("{}: {e}", m.key));
            let (code, umask) = (e.config & 0xff, (e.config >> 8) & 0xff);
            let v = match code {
                0x71 | 0x73 | 0x74 => per_bit
                    .iter()
                    .filter(|((c, b), _)| *c == code && (umask == 0 || umask & b != 0))
                    .map(|(_, v)| *v)
                    .sum(),
                // TOPDOWN_RETIRING.ALL: 0xC2 on Gracemont, 0x72 on Crestmont.
                0xc2 | 0x72 => l1[3] * slots,
                0x3c if e.exclude_user => 0.2 * cycles,
                0x3c => cycles,
                0xc0 => inst,
                0x00 if umask == 0x03 => 0.8 * cycles, // REF_TSC (fixed counter 2)
                _ => panic!("{}: no count model for {id}", m.key),
            };
            (id.clone(), v.round())
        })
        .collect()
}

#[test]
fn e_core_level1_sums_to_100_and_every_parent_equals_its_children() {
    let sel = Selection::level(3);
    for key in ["adl-e", "mtl-e"] {
        let m = by_name(key).unwrap();
        assert_eq!(m.core_kind, CoreKind::Efficiency);
        let ids: Vec<String> = required_events(m, &sel).unwrap().into_iter().collect();
        for seed in 0..200u64 {
            let mut rng = Rng(seed ^ 0xA5A5_0000 ^ key.len() as u64);
            let vals = counts(m, &ids, &mut rng);
            let r = evaluate(m, &sel, &vals, &Constants::default()).unwrap();
            assert_eq!(r.nodes.len(), 26, "{key}");
            let v = |name: &str| {
                let n = r.node(name).unwrap();
                assert_eq!(n.status, Status::Ok, "{key} seed {seed} {name}");
                n.value.unwrap()
            };
            let l1: f64 = [
                "Frontend_Bound",
                "Bad_Speculation",
                "Backend_Bound",
                "Retiring",
            ]
            .iter()
            .map(|n| v(n))
            .sum();
            assert!(
                (l1 - 100.0).abs() < 0.01,
                "{key} seed {seed}: level 1 = {l1}"
            );
            let mut parents = 0;
            for p in m.nodes {
                let kids: Vec<f64> = m.children(Some(p.name)).map(|k| v(k.name)).collect();
                if kids.is_empty() {
                    continue;
                }
                parents += 1;
                let sum: f64 = kids.iter().sum();
                assert!(
                    (sum - v(p.name)).abs() < 0.01,
                    "{key} seed {seed}: children of {} sum to {sum}, node is {}",
                    p.name,
                    v(p.name)
                );
                assert!(kids.iter().all(|k| *k >= 0.0 && *k <= v(p.name) + 0.01));
            }
            // Level-1 parents: all but Retiring; level-2: all but Branch_Mispredicts.
            assert_eq!(parents, 8, "{key}");
        }
    }
}

#[test]
fn e_core_thresholds_bottleneck_and_helpers() {
    // A frontend-latency-heavy Gracemont run: Frontend_Bound 40 %, Ifetch_Latency 30 %,
    // ICache_Misses 25 %, Backend_Bound 20 %, Retiring 30 %, so Bad_Speculation 10 %.
    let m = by_name("adl-e").unwrap();
    let c = 1e9;
    let s = 5.0 * c;
    let mut vals: HashMap<String, f64> = m.event_ids().into_iter().map(|id| (id, 0.0)).collect();
    for (id, v) in [
        ("CPU_CLK_UNHALTED.CORE", c),
        ("INST_RETIRED.ANY", 1.5 * c),
        ("TOPDOWN_FE_BOUND.ALL", 0.40 * s),
        ("TOPDOWN_FE_BOUND.FRONTEND_LATENCY", 0.30 * s),
        ("TOPDOWN_FE_BOUND.ICACHE", 0.25 * s),
        ("TOPDOWN_FE_BOUND.ITLB", 0.05 * s),
        ("TOPDOWN_FE_BOUND.FRONTEND_BANDWIDTH", 0.10 * s),
        ("TOPDOWN_BE_BOUND.ALL", 0.20 * s),
        ("TOPDOWN_RETIRING.ALL", 0.30 * s),
    ] {
        vals.insert(id.to_string(), v);
    }
    let r = evaluate(m, &Selection::level(3), &vals, &Constants::default()).unwrap();
    let node = |n: &str| r.node(n).unwrap();
    assert!((node("Bad_Speculation").value.unwrap() - 10.0).abs() < 1e-9);
    assert_eq!(node("Frontend_Bound").above_threshold, Some(true)); // 40 > 20
    assert_eq!(node("Ifetch_Latency").above_threshold, Some(true)); // 30 > 15
    assert_eq!(node("ICache_Misses").above_threshold, Some(true)); // 25 > 5
    assert_eq!(node("ITLB_Misses").above_threshold, Some(false)); // 5 is not > 5
    assert_eq!(node("Ifetch_Bandwidth").above_threshold, Some(false)); // 10 is not > 10
    assert_eq!(node("Retiring").above_threshold, Some(false)); // 30 < 75
    assert_eq!(node("Bad_Speculation").above_threshold, Some(false)); // 10 < 15
    assert_eq!(r.bottleneck.node.as_deref(), Some("ICache_Misses"));
    assert_eq!(
        r.bottleneck.path,
        ["Frontend_Bound", "Ifetch_Latency", "ICache_Misses"]
    );
    let k = Constants::default();
    let ipc = evaluate_metric(m, "Info_Thread_IPC", &vals, &k).unwrap();
    assert_eq!(ipc, Some((Some(1.5), Status::Ok)));
    let slots = evaluate_metric(m, "Info_Thread_SLOTS", &vals, &k).unwrap();
    assert_eq!(slots, Some((Some(s), Status::Ok)));
}
