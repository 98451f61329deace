//! Bounded cardinality: `--cgroup-top N` names the busiest cgroups, re-chosen every
//! interval, and counts the rest in cgroup="other" so that totals are kept; the series
//! budget holds whatever the number of cgroups. Two sources of cgroups: the counting engine's
//! cgroup target (a tree per cgroup, ranked by slots), and the host's cgroup tree read from
//! cgroupfs (CPU time, here a fake tree where 1,000 cgroups come and go).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use tma_host::cgroupfs::CgroupFs;
use tma_perf::backend::{GroupReading, Measurement, RawInterval, Target};
use tma_serve::collect::{Bounds, Collector, Shared};
use tma_serve::expo::Format;
use tma_serve::hot::HotCgroups;
use tma_stat::sink::{IntervalData, IntervalSink, Start};

/// A small deterministic generator (xorshift), so that the churn is the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The samples of an exposition: series (name and labels) -> value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, rest) = l.rsplit_once('}').map_or_else(
                || {
                    let (s, r) = l.split_once(' ').unwrap();
                    (s.to_string(), r)
                },
                |(s, r)| (format!("{s}}}"), r.trim_start()),
            );
            let v = rest.split(' ').next().unwrap().parse().unwrap();
            (series, v)
        })
        .collect()
}

/// The series of `family` by the value of `label`.
fn by_label(all: &BTreeMap<String, f64>, family: &str, label: &str) -> BTreeMap<String, f64> {
    all.iter()
        .filter(|(s, _)| s.starts_with(&format!("{family}{{")))
        .filter_map(|(s, v)| {
            let start = s.find(&format!("{label}=\""))? + label.len() + 2;
            let end = start + s[start..].find('"')?;
            Some((s[start..end].to_string(), *v))
        })
        .collect()
}

/// The growth, from `prev` to `now`, of the series present in both, plus `other`'s: what
/// `sum(rate(...))` sees.
fn growth(prev: &BTreeMap<String, f64>, now: &BTreeMap<String, f64>) -> f64 {
    now.iter()
        .filter_map(|(k, v)| prev.get(k).map(|p| v - p))
        .sum()
}

// ------------------------------------------------------------------ the cgroup tree

/// A fake cgroup v2 tree: 10 slices holding up to 1,000 scopes that come and go.
struct FakeTree {
    dir: PathBuf,
    /// scope -> (slice, usage) of the live scopes.
    live: BTreeMap<usize, u64>,
    /// Each slice's usage (its scopes', the removed ones' included).
    slices: [u64; 10],
    root_own: u64,
}

const SCOPES: usize = 1000;

impl FakeTree {
    fn new(tag: &str) -> FakeTree {
        let dir = std::env::temp_dir().join(format!("tma-cgtree-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
        FakeTree {
            dir,
            live: BTreeMap::new(),
            slices: [0; 10],
            root_own: 0,
        }
    }

    fn scope_dir(&self, k: usize) -> PathBuf {
        self.dir.join(format!("s{}.slice/c{k}.scope", k % 10))
    }

    fn write(dir: &Path, usage: u64) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("cpu.stat"),
            format!("usage_usec {usage}\nuser_usec {usage}\nsystem_usec 0\n"),
        )
        .unwrap();
    }

    fn total(&self) -> u64 {
        self.slices.iter().sum::<u64>() + self.root_own
    }

    /// One refresh: scopes are born, grow and die (a dying scope grows once more first);
    /// the tree's growth, microseconds.
    fn step(&mut self, rng: &mut Rng) -> u64 {
        let before = self.total();
        for k in 0..SCOPES {
            let alive = self.live.contains_key(&k);
            let roll = rng.below(100);
            if !alive && roll < 12 {
                let u = rng.below(50_000);
                self.live.insert(k, u);
                self.slices[k % 10] += u;
            } else if alive {
                // A few busy ones, many idle ones.
                let g = if rng.below(20) == 0 {
                    rng.below(2_000_000)
                } else {
                    rng.below(3_000)
                };
                *self.live.get_mut(&k).unwrap() += g;
                self.slices[k % 10] += g;
                if roll < 10 {
                    self.live.remove(&k);
                    std::fs::remove_dir_all(self.scope_dir(k)).unwrap();
                }
            }
        }
        self.root_own += rng.below(10_000);
        for (k, u) in &self.live {
            Self::write(&self.scope_dir(*k), *u);
        }
        for (s, u) in self.slices.iter().enumerate() {
            Self::write(&self.dir.join(format!("s{s}.slice")), *u);
        }
        Self::write(&self.dir, self.total());
        self.total() - before
    }
}

impl Drop for FakeTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Publish one interval of software counts (no PMU) through `c`.
fn software_interval(c: &mut Collector, plan: &tma_perf::plan::Plan, k: u64) {
    let raw = RawInterval {
        start_s: k as f64,
        end_s: k as f64 + 1.0,
        groups: vec![GroupReading {
            group: 0,
            cpu: None,
            tid: None,
            cgroup: None,
            time_enabled_ns: 1_000_000_000,
            time_running_ns: 1_000_000_000,
            values: vec![900_000_000, 10, 2, 30],
        }],
    };
    let iv = Measurement::interval_readings(plan, &raw, false);
    c.interval(IntervalData {
        raw: Some(&raw),
        readings: &iv,
        report: None,
    })
    .unwrap();
}

#[test]
fn a_thousand_cgroups_coming_and_going_stay_within_the_budget_and_add_up() {
    let mut tree = FakeTree::new("churn");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    tree.step(&mut rng);
    let (shared, mut c) = collector(false);
    let plan = tma_perf::plan::Plan::software(&tma_perf::backend::software_events());
    c.start(Start::Software {
        plan: &plan,
        target: None,
        reason: Some("no `cpu` PMU"),
        streamed: true,
    })
    .unwrap();
    c.set_bounds(Bounds {
        cgroup_top: Some(1000),
        series_budget: 300,
    });
    c.set_hot_cgroups(HotCgroups::new(CgroupFs::new(&tree.dir)));
    software_interval(&mut c, &plan, 0);
    let mut prev = by_label(
        &samples(&shared.render(Format::Text)),
        "tma_cgroup_cpu_seconds_total",
        "cgroup",
    );
    let mut seen_max = 0.0f64;
    let mut renamed = 0;
    for k in 1..=15u64 {
        let grew = tree.step(&mut rng) as f64 / 1e6;
        software_interval(&mut c, &plan, k);
        for format in [Format::Text, Format::OpenMetrics] {
            let text = shared.render(format);
            let n = samples(&text).len() - usize::from(format == Format::OpenMetrics);
            assert!(n <= 300, "{n} series at step {k}:\n{text}");
        }
        let all = samples(&shared.render(Format::Text));
        let now = by_label(&all, "tma_cgroup_cpu_seconds_total", "cgroup");
        assert!(now.contains_key("other"));
        // Named: as many as the budget leaves, the rest counted in other.
        let left = all["tma_cgroups_left_out"];
        let seen = all["tma_cgroups_seen"];
        assert_eq!(now.len() as f64 - 1.0 + left, seen, "step {k}");
        assert!(now.len() > 100, "{left} left out, {} named", now.len());
        if seen > 300.0 {
            assert!(left > 0.0, "{seen} cgroups, none left out");
        }
        seen_max = seen_max.max(seen);
        // What sum(rate()) sees from one exposition to the next is the tree's growth.
        let g = growth(&prev, &now);
        assert!(
            (g - grew).abs() < 1e-6,
            "step {k}: series grew {g}, the tree {grew}"
        );
        renamed += now.keys().filter(|c| !prev.contains_key(*c)).count();
        prev = now;
    }
    // The tree held hundreds of cgroups at a time, and the named set changed.
    assert!(seen_max > 300.0, "{seen_max}");
    assert!(renamed > 50, "{renamed}");
}

#[test]
fn cgroup_top_with_a_small_n_names_the_busiest() {
    let mut tree = FakeTree::new("top");
    let mut rng = Rng(7);
    tree.step(&mut rng);
    let (shared, mut c) = collector(false);
    let plan = tma_perf::plan::Plan::software(&tma_perf::backend::software_events());
    c.start(Start::Software {
        plan: &plan,
        target: None,
        reason: None,
        streamed: true,
    })
    .unwrap();
    c.set_bounds(Bounds {
        cgroup_top: Some(5),
        series_budget: 300,
    });
    c.set_hot_cgroups(HotCgroups::new(CgroupFs::new(&tree.dir)));
    software_interval(&mut c, &plan, 0);
    let before: BTreeMap<usize, u64> = tree.live.clone();
    tree.step(&mut rng);
    software_interval(&mut c, &plan, 1);
    let all = samples(&shared.render(Format::Text));
    let named = by_label(&all, "tma_cgroup_cpu_seconds_total", "cgroup");
    assert_eq!(named.len(), 6, "{named:?}");
    // The busiest scope of the step (by its own growth) is named.
    let (busiest, _) = tree
        .live
        .iter()
        .filter_map(|(k, u)| Some((*k, u - before.get(k)?)))
        .max_by_key(|(_, g)| *g)
        .unwrap();
    let name = format!("s{}.slice/c{busiest}.scope", busiest % 10);
    assert!(named.contains_key(&name), "{name} not in {named:?}");
    assert_eq!(all["tma_cgroups_left_out"], all["tma_cgroups_seen"] - 5.0);
}

// ------------------------------------------------------------------ the engine's cgroups

/// Zen 4 level-1 counts of a cgroup of `cycles` cycles whose slots go (frontend, backend,
/// retiring, dispatched) shares.
fn zen4_value(ev: &str, cycles: f64, shares: (f64, f64, f64, f64)) -> u64 {
    let slots = 6.0 * cycles;
    let (fe, be, ret, disp) = shares;
    (match ev {
        "ls_not_halted_cyc" => cycles,
        "de_no_dispatch_per_slot.no_ops_from_frontend" => fe * slots,
        "de_no_dispatch_per_slot.backend_stalls" => be * slots,
        "ex_ret_ops" => ret * slots,
        "de_src_op_disp.all" => disp * slots,
        _ => 0.0,
    }) as u64
}

#[test]
fn engine_cgroups_beyond_the_top_are_counted_in_other() {
    let (plan, info) = zen4_level1();
    const N: usize = 50;
    let dirs: Vec<PathBuf> = (0..N).map(|i| format!("/cg/c{i}").into()).collect();
    let labels: Vec<String> = (0..N).map(|i| format!("c{i}")).collect();
    let shared = Arc::new(Shared::default());
    let mut c = Collector::new(
        Arc::clone(&shared),
        quiet_log(),
        tma_serve::collect::Build {
            version: "t".into(),
            cpu: "c".into(),
        },
        tma_serve::collect::Split::Target,
        labels.clone(),
        false,
    );
    c.set_bounds(Bounds {
        cgroup_top: Some(5),
        series_budget: 300,
    });
    let target = Target::Cgroups(dirs);
    c.start(Start::Tree {
        info: &info,
        plan: Some(&plan),
        target: Some(&target),
    })
    .unwrap();
    let mut rng = Rng(42);
    let mut prev: Option<BTreeMap<String, f64>> = None;
    for k in 0..6u64 {
        // Each cgroup: its cycles and level-1 shares this interval.
        let load: Vec<(f64, (f64, f64, f64, f64))> = (0..N)
            .map(|_| {
                let cycles = 1e6 * (1 + rng.below(1000)) as f64;
                let be = 0.1 + 0.01 * rng.below(50) as f64;
                let fe = 0.1 + 0.01 * rng.below(20) as f64;
                let ret = 1.0 - be - fe - 0.05;
                (cycles, (fe, be, ret, ret + 0.05))
            })
            .collect();
        let mut groups = Vec::new();
        for (i, (cycles, shares)) in load.iter().enumerate() {
            for cpu in [0u32, 1] {
                for (gi, g) in plan.groups.iter().enumerate() {
                    groups.push(GroupReading {
                        group: gi,
                        cpu: Some(cpu),
                        tid: None,
                        cgroup: Some(i as u32),
                        time_enabled_ns: 1_000_000_000,
                        time_running_ns: 1_000_000_000,
                        values: g
                            .events
                            .iter()
                            .map(|e| zen4_value(&e.name, cycles / 2.0, *shares))
                            .collect(),
                    });
                }
            }
        }
        let raw = RawInterval {
            start_s: k as f64,
            end_s: k as f64 + 1.0,
            groups,
        };
        let agg = Measurement::interval_readings(&plan, &raw, false);
        c.interval(IntervalData {
            raw: Some(&raw),
            readings: &agg,
            report: None,
        })
        .unwrap();
        let text = shared.render(Format::Text);
        let all = samples(&text);
        assert!(all.len() <= 300, "{}", all.len());
        assert_eq!(all["tma_cgroups_left_out"], (N - 5) as f64);
        let totals: BTreeMap<String, f64> = by_label(&all, "tma_slots_total", "cgroup")
            .into_iter()
            .collect();
        let total_of = |node: &str| -> BTreeMap<String, f64> {
            all.iter()
                .filter(|(s, _)| s.starts_with(&format!("tma_slots_total{{node=\"{node}\"")))
                .map(|(s, v)| {
                    let c = s.split("cgroup=\"").nth(1).unwrap();
                    (c[..c.find('"').unwrap()].to_string(), *v)
                })
                .collect()
        };
        let slots = total_of("total");
        assert_eq!(slots.len(), 6, "{totals:?}");
        // The five named are the five with the most slots this interval.
        let mut ranked: Vec<usize> = (0..N).collect();
        ranked.sort_by(|&a, &b| load[b].0.total_cmp(&load[a].0));
        for &i in &ranked[..5] {
            assert!(
                slots.contains_key(&labels[i]),
                "{} not named: {slots:?}",
                labels[i]
            );
        }
        // other's tree: the shares of the sum of the others.
        let rest = &ranked[5..];
        let rest_slots: f64 = rest.iter().map(|&i| 6.0 * load[i].0).sum();
        let rest_be: f64 = rest.iter().map(|&i| 6.0 * load[i].0 * load[i].1 .1).sum();
        let be_other = all["tma_node_ratio{node=\"backend_bound\",level=\"1\",cgroup=\"other\"}"];
        assert!((be_other - rest_be / rest_slots).abs() < 1e-6, "{be_other}");
        // Totals kept: from one interval to the next, the series present in both grow by
        // the slots of all 50 cgroups (backend-bound slots likewise).
        let all_slots: f64 = load.iter().map(|(c, _)| 6.0 * c).sum();
        let all_be: f64 = load.iter().map(|(c, s)| 6.0 * c * s.1).sum();
        let be = total_of("backend_bound");
        let mut both = BTreeMap::new();
        for (k2, v) in &slots {
            both.insert(format!("t{k2}"), *v);
        }
        for (k2, v) in &be {
            both.insert(format!("b{k2}"), *v);
        }
        if let Some(p) = &prev {
            let split = |m: &BTreeMap<String, f64>, t: char| -> BTreeMap<String, f64> {
                m.iter()
                    .filter(|(k, _)| k.starts_with(t))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect()
            };
            let gs = growth(&split(p, 't'), &split(&both, 't'));
            let gb = growth(&split(p, 'b'), &split(&both, 'b'));
            assert!(
                (gs - all_slots).abs() < 1e-6 * all_slots,
                "{gs} vs {all_slots}"
            );
            assert!((gb - all_be).abs() < 1e-6 * all_be, "{gb} vs {all_be}");
        }
        prev = Some(both);
    }
}
