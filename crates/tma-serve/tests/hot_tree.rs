//! `--cgroup-top N` with a PMU ([`tma_serve::hot_tree`]): the tree of the N hottest
//! cgroups, counted in perf_event's cgroup mode and re-chosen every refresh.
//!
//! Without a PMU on the test machines, the hardware path is proved through a fake
//! [`HotCounters`] that records every open and close and gives, for each followed cgroup,
//! the Zen 4 counts of its tasks and its descendants' (as cgroup mode counts), and the
//! system-wide counts of every task; the CPU time comes from a fake cgroup v2 tree. The
//! same cgroup code path is then run live with software events on real cgroups made under
//! the cgroup2 mount (skipped, with the reason, where that cannot be done).

mod common;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use common::*;
use tma_host::cgroupfs::CgroupFs;
use tma_perf::backend::{GroupReading, RawInterval, RunError};
use tma_perf::plan::Plan;
use tma_serve::collect::{Bounds, Collector, Shared};
use tma_serve::expo::Format;
use tma_serve::hot::HotCgroups;
use tma_serve::hot_tree::{HotCounters, HotTree};
use tma_stat::sink::{IntervalSink, Start};

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The samples of an exposition: series -> value.
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
            (series, rest.split(' ').next().unwrap().parse().unwrap())
        })
        .collect()
}

/// The series whose name and labels start with `prefix`, by their `cgroup` label.
fn by_cgroup(all: &BTreeMap<String, f64>, prefix: &str) -> BTreeMap<String, f64> {
    all.iter()
        .filter(|(s, _)| s.starts_with(prefix))
        .filter_map(|(s, v)| {
            let start = s.find("cgroup=\"")? + 8;
            let end = start + s[start..].find('"')?;
            Some((s[start..end].to_string(), *v))
        })
        .collect()
}

/// The growth from `prev` to `now` of the series present in both: what `sum(rate())` sees.
fn growth(prev: &BTreeMap<String, f64>, now: &BTreeMap<String, f64>) -> f64 {
    now.iter()
        .filter_map(|(k, v)| prev.get(k).map(|p| v - p))
        .sum()
}

// ------------------------------------------------------------------ the world

/// What a cgroup's own tasks did in one interval: cycles and the (frontend, backend,
/// retiring, dispatched) shares of their 6 slots per cycle.
#[derive(Debug, Clone, Copy)]
struct Load {
    cycles: u64,
    /// CPU time, microseconds.
    usec: u64,
    shares: (f64, f64, f64, f64),
}

impl Load {
    fn new(cycles: u64, be: f64) -> Load {
        let fe = 0.15;
        let ret = 1.0 - be - fe - 0.05;
        Load {
            cycles,
            // 1 GHz.
            usec: cycles / 1000,
            shares: (fe, be, ret, ret + 0.05),
        }
    }

    /// The Zen 4 level-1 counts of this load.
    fn value(&self, ev: &str) -> u64 {
        let slots = 6 * self.cycles;
        let (fe, be, ret, disp) = self.shares;
        let share = |s: f64| (s * slots as f64).round() as u64;
        match ev {
            "ls_not_halted_cyc" => self.cycles,
            "de_no_dispatch_per_slot.no_ops_from_frontend" => share(fe),
            "de_no_dispatch_per_slot.backend_stalls" => share(be),
            "ex_ret_ops" => share(ret),
            "de_src_op_disp.all" => share(disp),
            "task-clock" => self.usec * 1000,
            _ => 0,
        }
    }
}

/// A fake cgroup v2 tree and what its cgroups' tasks do each interval.
struct World {
    dir: PathBuf,
    /// Live cgroups (paths relative to the root, `""` the root) -> own CPU time so far.
    own: BTreeMap<String, u64>,
    /// CPU time of removed cgroups, folded into their parent (as the kernel does).
    folded: BTreeMap<String, u64>,
    /// This interval's load of each cgroup's own tasks.
    load: BTreeMap<String, Load>,
}

fn parent(path: &str) -> String {
    path.rsplit_once('/')
        .map_or(String::new(), |(p, _)| p.to_string())
}

/// `b` is `a` or below it.
fn within(a: &str, b: &str) -> bool {
    a.is_empty() || a == b || b.strip_prefix(a).is_some_and(|r| r.starts_with('/'))
}

impl World {
    fn new(tag: &str) -> World {
        let dir = std::env::temp_dir().join(format!("tma-hot-tree-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        let mut own = BTreeMap::new();
        own.insert(String::new(), 0);
        let w = World {
            dir,
            own,
            folded: BTreeMap::new(),
            load: BTreeMap::new(),
        };
        w.write();
        w
    }

    fn add(&mut self, path: &str) {
        let p = parent(path);
        if !self.own.contains_key(&p) {
            self.add(&p);
        }
        self.own.entry(path.to_string()).or_insert(0);
    }

    /// Remove a leaf cgroup; its time stays in its parent's usage.
    fn remove(&mut self, path: &str) {
        if self.own.keys().any(|c| c != path && within(path, c)) {
            return;
        }
        if let Some(t) = self.own.remove(path) {
            let f = self.folded.remove(path).unwrap_or(0);
            *self.folded.entry(parent(path)).or_insert(0) += t + f;
            std::fs::remove_dir_all(self.dir.join(path)).unwrap();
        }
        self.load.remove(path);
    }

    /// The interval's loads happen: CPU time grows, cpu.stat files are written.
    fn run(&mut self, load: BTreeMap<String, Load>) {
        for (p, l) in &load {
            self.add(p);
            *self.own.get_mut(p).unwrap() += l.usec;
        }
        self.load = load;
        self.write();
    }

    fn write(&self) {
        for path in self.own.keys() {
            let usage: u64 = self
                .own
                .iter()
                .filter(|(c, _)| within(path, c))
                .map(|(_, t)| t)
                .sum::<u64>()
                + self
                    .folded
                    .iter()
                    .filter(|(c, _)| within(path, c))
                    .map(|(_, t)| t)
                    .sum::<u64>();
            let d = self.dir.join(path);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup.procs"), "").unwrap();
            std::fs::write(d.join("cpu.stat"), format!("usage_usec {usage}\n")).unwrap();
        }
    }

    /// The counts of `ev` of the tasks in and below `path` this interval.
    fn count(&self, path: &str, ev: &str) -> u64 {
        self.load
            .iter()
            .filter(|(c, _)| within(path, c))
            .map(|(_, l)| l.value(ev))
            .sum()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Counters that record their opens and closes and count what the world's tasks did:
/// cgroup mode counts a cgroup's descendants too.
struct FakeCounters {
    world: Rc<RefCell<World>>,
    plan: Plan,
    ids: BTreeMap<u32, String>,
    next: u32,
    calls: Rc<RefCell<Vec<String>>>,
    t: f64,
}

impl HotCounters for FakeCounters {
    fn add(&mut self, path: &Path) -> Result<u32, RunError> {
        let w = self.world.borrow();
        let rel = path
            .strip_prefix(&w.dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if !path.join("cgroup.procs").exists() {
            return Err(RunError::BadCgroup {
                path: path.to_path_buf(),
                why: "gone".into(),
            });
        }
        assert!(
            !self.ids.values().any(|p| *p == rel),
            "{rel} opened while it is open"
        );
        self.calls.borrow_mut().push(format!("open {rel}"));
        let id = self.next;
        self.next += 1;
        self.ids.insert(id, rel);
        Ok(id)
    }

    fn remove(&mut self, id: u32) -> bool {
        match self.ids.remove(&id) {
            Some(p) => {
                self.calls.borrow_mut().push(format!("close {p}"));
                true
            }
            None => false,
        }
    }

    fn read(&mut self) -> Result<RawInterval, RunError> {
        let w = self.world.borrow();
        let mut groups = Vec::new();
        let points: Vec<(Option<u32>, &str)> = std::iter::once((None, ""))
            .chain(self.ids.iter().map(|(id, p)| (Some(*id), p.as_str())))
            .collect();
        for (cgroup, path) in points {
            for cpu in [0u32, 1] {
                for (gi, g) in self.plan.groups.iter().enumerate() {
                    groups.push(GroupReading {
                        group: gi,
                        cpu: Some(cpu),
                        tid: None,
                        cgroup,
                        time_enabled_ns: 1_000_000_000,
                        time_running_ns: 1_000_000_000,
                        values: g
                            .events
                            .iter()
                            .map(|e| {
                                let v = w.count(path, &e.name);
                                // Split over two CPUs, the halves adding up exactly.
                                if cpu == 0 {
                                    v / 2
                                } else {
                                    v - v / 2
                                }
                            })
                            .collect(),
                    });
                }
            }
        }
        self.t += 1.0;
        Ok(RawInterval {
            start_s: self.t - 1.0,
            end_s: self.t,
            groups,
        })
    }
}

/// What [`setup`] gives: the published state, the collector, the hot tree, the call log.
type Setup = (
    Arc<Shared>,
    Collector,
    HotTree<FakeCounters>,
    Rc<RefCell<Vec<String>>>,
);

/// A Zen 4 level-1 collector following the hot cgroups of `world` (top `top`, budget
/// `budget`), its counters' call log.
fn setup(world: &Rc<RefCell<World>>, top: usize, budget: usize) -> Setup {
    let (plan, info) = zen4_level1();
    let (shared, mut c) = collector(false);
    c.set_bounds(Bounds {
        cgroup_top: Some(top),
        series_budget: budget,
    });
    let dir = world.borrow().dir.clone();
    c.set_hot_cgroups(HotCgroups::new(CgroupFs::new(&dir)));
    c.start(Start::Tree {
        info: &info,
        plan: Some(&plan),
        target: None,
    })
    .unwrap();
    let calls = Rc::new(RefCell::new(Vec::new()));
    let fake = FakeCounters {
        world: Rc::clone(world),
        plan,
        ids: BTreeMap::new(),
        next: 0,
        calls: Rc::clone(&calls),
        t: 0.0,
    };
    (shared, c, HotTree::new(fake, dir), calls)
}

fn loads(list: &[(&str, u64, f64)]) -> BTreeMap<String, Load> {
    list.iter()
        .map(|(p, c, be)| (p.to_string(), Load::new(*c, *be)))
        .collect()
}

#[test]
fn a_new_choice_opens_and_closes_exactly_the_cgroups_that_changed() {
    let world = Rc::new(RefCell::new(World::new("rechoice")));
    let (shared, mut c, mut tree, calls) = setup(&world, 3, 300);
    let first = loads(&[
        ("s1.slice/a.scope", 9_000_000, 0.30),
        ("s1.slice/b.scope", 8_000_000, 0.40),
        ("s1.slice/c.scope", 7_000_000, 0.50),
        ("s1.slice/d.scope", 1_000_000, 0.20),
        ("s2.slice/e.scope", 500_000, 0.25),
        ("", 2_000_000, 0.10),
    ]);
    // The first scan is the CPU time baseline: nothing is chosen yet.
    world.borrow_mut().run(first.clone());
    let r = tree.step(&mut c).unwrap();
    assert!(r.opened.is_empty() && r.closed.is_empty(), "{r:?}");
    world.borrow_mut().run(first.clone());
    let r = tree.step(&mut c).unwrap();
    let abc = ["s1.slice/a.scope", "s1.slice/b.scope", "s1.slice/c.scope"];
    assert_eq!(r.opened, abc, "by CPU time, busiest first");
    assert!(r.closed.is_empty());
    // The same loads: the same three, nothing opened or closed again.
    calls.borrow_mut().clear();
    world.borrow_mut().run(first.clone());
    let r = tree.step(&mut c).unwrap();
    assert!(r.opened.is_empty() && r.closed.is_empty(), "{r:?}");
    assert!(calls.borrow().is_empty(), "{:?}", calls.borrow());
    // Each followed cgroup's tree is its own tasks' (named since the exposition after it
    // was opened); the root's own tasks and d and e are in `other`.
    let text = shared.render(Format::Text);
    let all = samples(&text);
    let be = by_cgroup(&all, "tma_node_ratio{node=\"backend_bound\"");
    assert_eq!(be.len(), 4, "{be:?}");
    for (p, want) in [
        ("s1.slice/a.scope", 0.30),
        ("s1.slice/b.scope", 0.40),
        ("s1.slice/c.scope", 0.50),
    ] {
        assert!((be[p] - want).abs() < 1e-9, "{p}: {}", be[p]);
    }
    let other_be = (0.20 * 1.0 + 0.25 * 0.5 + 0.10 * 2.0) / 3.5;
    assert!((be["other"] - other_be).abs() < 1e-9, "{}", be["other"]);
    assert_eq!(all["tma_cgroups_left_out"], all["tma_cgroups_seen"] - 3.0);
    // d becomes the busiest and c goes quiet: d opened, c closed, a and b left alone.
    calls.borrow_mut().clear();
    world.borrow_mut().run(loads(&[
        ("s1.slice/a.scope", 9_000_000, 0.30),
        ("s1.slice/b.scope", 8_000_000, 0.40),
        ("s1.slice/c.scope", 100_000, 0.50),
        ("s1.slice/d.scope", 20_000_000, 0.20),
        ("s2.slice/e.scope", 500_000, 0.25),
    ]));
    let r = tree.step(&mut c).unwrap();
    assert_eq!(r.opened, ["s1.slice/d.scope"]);
    assert_eq!(r.closed, ["s1.slice/c.scope"]);
    assert_eq!(
        *calls.borrow(),
        ["close s1.slice/c.scope", "open s1.slice/d.scope"]
    );
    let mut followed = tree.followed();
    followed.sort_unstable();
    assert_eq!(
        followed,
        ["s1.slice/a.scope", "s1.slice/b.scope", "s1.slice/d.scope"]
    );
}

/// By slots, not CPU time: `fast` (3 GHz) and `slow` (1 GHz) are followed; `third` runs
/// at 4 GHz for less CPU time than `slow`. Its slots, estimated from its CPU time at the
/// rate of the cgroups not followed (measured as the system less the followed), are more
/// than `slow`'s measured ones: it takes `slow`'s place, and keeps it the next time.
#[test]
fn the_choice_goes_by_slots_where_they_are_counted() {
    let world = Rc::new(RefCell::new(World::new("slots")));
    let (_shared, mut c, mut tree, _calls) = setup(&world, 2, 300);
    let mk = |cycles: u64, usec: u64| Load {
        cycles,
        usec,
        ..Load::new(0, 0.3)
    };
    let all = [
        ("fast.scope", mk(30_000_000, 10_000)),
        ("slow.scope", mk(10_000_000, 10_000)),
        ("third.scope", mk(36_000_000, 9_000)),
    ];
    let run = |w: &Rc<RefCell<World>>| {
        w.borrow_mut()
            .run(all.iter().map(|(p, l)| (p.to_string(), *l)).collect());
    };
    run(&world);
    tree.step(&mut c).unwrap();
    run(&world);
    // By CPU time first: fast and slow (10 ms each) before third (9 ms).
    let r = tree.step(&mut c).unwrap();
    assert_eq!(r.opened, ["fast.scope", "slow.scope"], "{r:?}");
    run(&world);
    let r = tree.step(&mut c).unwrap();
    // slow: 60e6 slots measured; third: 9 ms at the rest's 24,000 slots per µs.
    assert_eq!(r.opened, ["third.scope"], "{r:?}");
    assert_eq!(r.closed, ["slow.scope"], "{r:?}");
    run(&world);
    let r = tree.step(&mut c).unwrap();
    assert!(r.opened.is_empty() && r.closed.is_empty(), "{r:?}");
}

#[test]
fn totals_add_up_and_the_budget_holds_while_cgroups_come_and_go() {
    // A small tree over many refreshes; then 1,000 cgroups, the top and the budget set
    // wide: the budget decides how many are followed.
    churn("churn", 120, 40, 12, 160);
    churn("churn1000", 1000, 10, 1000, 300);
}

/// `scopes` cgroups coming and going over `steps` refreshes, `--cgroup-top top`,
/// `--series-budget budget`.
fn churn(tag: &str, scopes: usize, steps: u64, top: usize, budget: usize) {
    let world = Rc::new(RefCell::new(World::new(tag)));
    let (shared, mut c, mut tree, calls) = setup(&world, top, budget);
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut alive: BTreeSet<String> = BTreeSet::new();
    let mut prev: Option<BTreeMap<String, f64>> = None;
    let mut opened_total = 0;
    let mut closed_total = 0;
    let mut changed_steps = 0;
    for k in 0..steps {
        // Scopes are born and die; a slice's own tasks sometimes run too (a followed slice
        // and a followed scope below it: the slice's tree leaves the scope out).
        for i in 0..scopes {
            let p = format!("s{}.slice/c{i}.scope", i % 4);
            let roll = rng.below(100);
            if alive.contains(&p) && roll < 8 {
                world.borrow_mut().remove(&p);
                alive.remove(&p);
            } else if !alive.contains(&p) && roll < 15 {
                alive.insert(p);
            }
        }
        let mut load = BTreeMap::new();
        for p in &alive {
            let busy = rng.below(10) == 0;
            let cycles = if busy {
                5_000_000 + rng.below(50_000_000)
            } else {
                rng.below(2_000_000)
            };
            load.insert(
                p.clone(),
                Load::new(cycles, 0.1 + 0.01 * rng.below(60) as f64),
            );
        }
        load.insert("s0.slice".into(), Load::new(rng.below(40_000_000), 0.45));
        load.insert(String::new(), Load::new(rng.below(3_000_000), 0.2));
        world.borrow_mut().run(load.clone());
        let before = calls.borrow().len();
        let r = tree.step(&mut c).unwrap();
        // The calls are exactly the cgroups that changed.
        let new_calls: Vec<String> = calls.borrow()[before..].to_vec();
        let mut want: Vec<String> = r.closed.iter().map(|p| format!("close {p}")).collect();
        want.extend(r.opened.iter().map(|p| format!("open {p}")));
        assert_eq!(new_calls, want, "step {k}");
        opened_total += r.opened.len();
        closed_total += r.closed.len();
        changed_steps += usize::from(!r.opened.is_empty());
        assert!(tree.followed().len() <= top);
        for format in [Format::Text, Format::OpenMetrics] {
            let text = shared.render(format);
            let n = samples(&text).len() - usize::from(format == Format::OpenMetrics);
            assert!(n <= budget, "{n} series at step {k}:\n{text}");
        }
        let all = samples(&shared.render(Format::Text));
        let named = by_cgroup(&all, "tma_slots_total{node=\"total\"");
        assert!(named.contains_key("other"));
        assert_eq!(
            named.len() as f64 - 1.0 + all["tma_cgroups_left_out"],
            all["tma_cgroups_seen"],
            "step {k}"
        );
        // The families that must add up, and what the system counted this interval.
        let w = world.borrow();
        let cycles = w.count("", "ls_not_halted_cyc") as f64;
        let want = [
            ("tma_slots_total{node=\"total\"", 6.0 * cycles),
            ("tma_cycles_total{", cycles),
            (
                "tma_slots_total{node=\"backend_bound\"",
                w.count("", "de_no_dispatch_per_slot.backend_stalls") as f64,
            ),
            (
                "tma_slots_total{node=\"bad_speculation\"",
                (w.count("", "de_src_op_disp.all") - w.count("", "ex_ret_ops")) as f64,
            ),
        ];
        drop(w);
        let now: BTreeMap<String, f64> = want
            .iter()
            .flat_map(|(f, _)| {
                by_cgroup(&all, f)
                    .into_iter()
                    .map(move |(c, v)| (format!("{f}|{c}"), v))
            })
            .collect();
        if let Some(p) = &prev {
            for (family, system) in want {
                let sub = |m: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
                    m.iter()
                        .filter(|(s, _)| s.starts_with(&format!("{family}|")))
                        .map(|(s, v)| (s.clone(), *v))
                        .collect()
                };
                let g = growth(&sub(p), &sub(&now));
                assert!(
                    (g - system).abs() <= 1e-9 * system.max(1.0),
                    "step {k}, {family}: the series grew {g}, the system {system}"
                );
            }
        }
        prev = Some(now);
    }
    // The choice changed often, and each change cost only the cgroups that changed.
    assert!(changed_steps as u64 > steps / 4, "{tag}: {changed_steps}");
    assert!(
        opened_total > 20 && closed_total > 10,
        "{tag}: {opened_total} {closed_total}"
    );
    assert_eq!(opened_total - closed_total, tree.followed().len());
    // With the top set wide, the budget bounds the cgroups followed.
    let followed = tree.followed().len();
    assert!(
        followed > 0 && (top <= 12 || followed < 40),
        "{tag}: {followed}"
    );
}

/// The same code path live, with software events: real cgroups under the cgroup2 mount,
/// busy loops in two of them, `--cgroup-top 2`. The two busy cgroups are followed with
/// their task-clock close to their CPU time; when the load moves from one to a third,
/// exactly that one is closed and the third opened.
#[test]
fn live_software_counts_follow_the_busy_cgroups() {
    use tma_perf::cgroup_counters::CgroupCounters;
    let host = tma_host::Host::system();
    let mount = match host.cgroup2_mount() {
        Ok(Some(m)) => m,
        other => {
            println!("skipped: no cgroup v2 hierarchy mounted ({other:?})");
            return;
        }
    };
    let root = mount.join(format!("tma-serve-hot-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&root) {
        println!(
            "skipped: cannot create a cgroup under {}: {e}",
            mount.display()
        );
        return;
    }
    struct Cleanup(PathBuf, Vec<std::process::Child>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for c in &mut self.1 {
                let _ = c.kill();
                let _ = c.wait();
            }
            for _ in 0..100 {
                for n in ["a", "b", "c"] {
                    let _ = std::fs::remove_dir(self.0.join(n));
                }
                if std::fs::remove_dir(&self.0).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    let mut guard = Cleanup(root.clone(), Vec::new());
    for n in ["a", "b", "c"] {
        std::fs::create_dir(root.join(n)).unwrap();
    }
    let busy_in = |guard: &mut Cleanup, name: &str| -> Result<usize, String> {
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        guard.1.push(child);
        std::fs::write(root.join(name).join("cgroup.procs"), pid.to_string())
            .map_err(|e| format!("cannot move pid {pid} into {name}: {e}"))?;
        Ok(guard.1.len() - 1)
    };
    let a = match busy_in(&mut guard, "a") {
        Ok(i) => i,
        Err(e) => {
            println!("skipped: {e}");
            return;
        }
    };
    busy_in(&mut guard, "b").unwrap();
    let plan = Plan::software(&tma_perf::backend::software_events());
    let counters = match CgroupCounters::open(&plan, &host) {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: cannot open software counters system-wide: {e}");
            return;
        }
    };
    let (shared, mut c) = collector(false);
    c.set_bounds(Bounds {
        cgroup_top: Some(2),
        series_budget: 300,
    });
    c.set_hot_cgroups(HotCgroups::new(CgroupFs::new(&root)));
    c.start(Start::Software {
        plan: &plan,
        target: None,
        reason: Some("software events through the cgroup path"),
        streamed: true,
    })
    .unwrap();
    let mut tree = HotTree::new(counters, &root);
    let pause = || std::thread::sleep(std::time::Duration::from_millis(300));
    // Baseline, then the choice.
    tree.step(&mut c).unwrap();
    pause();
    let r = match tree.step(&mut c) {
        Ok(r) => r,
        Err(e) => panic!("cgroup-mode counting failed: {e}"),
    };
    let mut opened = r.opened.clone();
    opened.sort_unstable();
    assert_eq!(opened, ["a", "b"], "{r:?}");
    pause();
    let r = tree.step(&mut c).unwrap();
    assert!(r.opened.is_empty() && r.closed.is_empty(), "{r:?}");
    let series = |family: &str| by_cgroup(&samples(&shared.render(Format::Text)), family);
    let (tc0, cpu0) = (
        series("tma_task_clock_seconds_total{"),
        series("tma_cgroup_cpu_seconds_total{"),
    );
    pause();
    let r = tree.step(&mut c).unwrap();
    assert!(r.opened.is_empty() && r.closed.is_empty(), "{r:?}");
    let (tc, cpu) = (
        series("tma_task_clock_seconds_total{"),
        series("tma_cgroup_cpu_seconds_total{"),
    );
    for n in ["a", "b"] {
        // One interval (300 ms and the step's own time) of a busy loop on a shared 2-CPU
        // machine, by task-clock in cgroup mode and by cgroupfs.
        let (t, u) = (tc[n] - tc0[n], cpu[n] - cpu0[n]);
        // (Some of it at least, however loaded the machine.)
        assert!(t > 0.001 && t < 1.5, "{n}: task-clock {t} s");
        assert!(
            (t - u).abs() < 0.02 + 0.1 * u,
            "{n}: task-clock {t} s, CPU time {u} s"
        );
    }
    assert!(tc.contains_key("other"));
    // The load moves from a to c: a closed, c opened, b left alone.
    let mut child = guard.1.remove(a);
    let _ = child.kill();
    let _ = child.wait();
    busy_in(&mut guard, "c").unwrap();
    let (opened_before, closed_before) = tree.counters().churn();
    pause();
    let r = tree.step(&mut c).unwrap();
    assert_eq!(r.opened, ["c"], "{r:?}");
    assert_eq!(r.closed, ["a"], "{r:?}");
    assert_eq!(
        tree.counters().churn(),
        (opened_before + 1, closed_before + 1)
    );
    let mut f = tree.followed();
    f.sort_unstable();
    assert_eq!(f, ["b", "c"]);
}
