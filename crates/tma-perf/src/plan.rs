//! Group planning: pack events into groups that fit the counters of one PMU.
//!
//! The algorithm is greedy and deterministic (documented so `-v` output can be reasoned about):
//! 1. Events are de-duplicated by name; the first spec wins.
//! 2. Topdown `slots` and every PERF_METRICS event of a PMU go into one group led by `slots`
//!    (fixed counter 3; the metric events take no counter), as the kernel requires.
//! 3. Every `taken_alone` event gets a group of its own (its extra MSR admits no company).
//! 4. Software events share one group, TSC (`msr`) events another: they take no PMU counter.
//! 5. The remaining core events are walked formula set by formula set (the engine passes one
//!    set per tree node or metric). A set's unplaced events are added to the open group of
//!    their PMU if they all fit; otherwise a new group is opened for them; a set that is
//!    larger than one group is split over as few groups as the greedy walk gives.
//!
//! "Fits" means: a fixed event takes its fixed counter if free, else a general-purpose counter;
//! general-purpose events are matched to counters allowed by their counter mask (bipartite
//! matching, so a restrictive mask is honoured even when placed last); the NMI watchdog,
//! when on, takes the highest general-purpose counter.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::event::{EventSpec, SpecKind};

/// Counter resources of one PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// General-purpose counters per logical CPU.
    pub gp: u32,
    /// Fixed counters (0 instructions, 1 cycles, 2 ref-cycles, 3 slots).
    pub fixed: u32,
    /// The NMI watchdog is on and holds one general-purpose counter.
    pub nmi_watchdog: bool,
}

impl Limits {
    /// General-purpose counters left for us.
    pub fn usable_gp(&self) -> u32 {
        self.gp.saturating_sub(self.nmi_watchdog as u32)
    }
}

/// Where an event sits in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    Fixed(u8),
    Gp(u8),
    /// A PERF_METRICS slice read through the slots counter.
    Metric,
    /// A software or `msr` event: no PMU counter.
    NoCounter,
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Fixed(i) => write!(f, "fixed{i}"),
            Slot::Gp(i) => write!(f, "gp{i}"),
            Slot::Metric => f.write_str("metric"),
            Slot::NoCounter => f.write_str("-"),
        }
    }
}

/// One group: opened together, read together, on counters at the same time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub pmu: String,
    /// Leader first.
    pub events: Vec<EventSpec>,
    /// The counter each event uses (same order as `events`).
    pub slots: Vec<Slot>,
}

impl Group {
    /// General-purpose counters used.
    pub fn gp_used(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Gp(_)))
            .count()
    }
}

/// The counting plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub groups: Vec<Group>,
    /// Events no counter can hold (counter mask outside the usable counters), with the reason.
    pub unschedulable: Vec<(String, String)>,
    /// Other names of a counted event (`TOPDOWN.SLOTS` for `TOPDOWN.SLOTS:perf_metrics`):
    /// (alias, counted name). Readings are reported under both.
    #[serde(default)]
    pub aliases: Vec<(String, String)>,
}

/// Planning errors.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("no events to count")]
    Empty,
}

impl Plan {
    /// Every event of the plan, in group order.
    pub fn events(&self) -> impl Iterator<Item = &EventSpec> {
        self.groups.iter().flat_map(|g| g.events.iter())
    }

    /// Index of the group holding `event`.
    pub fn group_of(&self, event: &str) -> Option<usize> {
        self.groups
            .iter()
            .position(|g| g.events.iter().any(|e| e.name == event))
    }

    /// Groups that compete for hardware counters (multiplexed when more than one).
    pub fn hardware_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| g.slots.iter().any(|s| !matches!(s, Slot::NoCounter)))
            .count()
    }

    /// A plan with only software events: one group.
    pub fn software(events: &[EventSpec]) -> Plan {
        Plan {
            groups: vec![Group {
                pmu: "software".into(),
                events: events.to_vec(),
                slots: vec![Slot::NoCounter; events.len()],
            }],
            unschedulable: Vec::new(),
            aliases: Vec::new(),
        }
    }
}

impl Plan {
    /// One plan for every core type of a hybrid part, counted in one run: each type's plan
    /// (made with that type's own counters and constraints) in turn, its groups kept as they
    /// are. The groups that take no PMU counter (software events, TSC) are shared: an event
    /// a previous type's plan already counts there is not opened twice. Event names repeat
    /// across types (each table has its own `INST_RETIRED.ANY`), so readings are taken per
    /// type through [`Plan::core_view`].
    pub fn for_core_types(parts: &[Plan]) -> Plan {
        let mut out = Plan::default();
        for part in parts {
            for g in &part.groups {
                let shared = g.slots.iter().all(|s| *s == Slot::NoCounter);
                if !shared {
                    out.groups.push(g.clone());
                    continue;
                }
                let counted = |name: &str| {
                    out.groups.iter().any(|o| {
                        o.pmu == g.pmu
                            && o.slots.iter().all(|s| *s == Slot::NoCounter)
                            && o.events.iter().any(|e| e.name == name)
                    })
                };
                let fresh: Vec<EventSpec> = g
                    .events
                    .iter()
                    .filter(|e| !counted(&e.name))
                    .cloned()
                    .collect();
                if !fresh.is_empty() {
                    out.groups.push(Group {
                        pmu: g.pmu.clone(),
                        slots: vec![Slot::NoCounter; fresh.len()],
                        events: fresh,
                    });
                }
            }
            for u in &part.unschedulable {
                if !out.unschedulable.contains(u) {
                    out.unschedulable.push(u.clone());
                }
            }
            for a in &part.aliases {
                if !out.aliases.contains(a) {
                    out.aliases.push(a.clone());
                }
            }
        }
        out
    }

    /// What one core type of a [`Plan::for_core_types`] plan reads: its own groups (`pmu`)
    /// and the shared ones (any PMU not in `core_pmus`); the other types' groups are left
    /// empty, so group indexes stay those of the whole plan and its raw readings.
    pub fn core_view(&self, pmu: &str, core_pmus: &[&str]) -> Plan {
        Plan {
            groups: self
                .groups
                .iter()
                .map(|g| {
                    if g.pmu == pmu || !core_pmus.contains(&g.pmu.as_str()) {
                        g.clone()
                    } else {
                        Group {
                            pmu: g.pmu.clone(),
                            events: Vec::new(),
                            slots: Vec::new(),
                        }
                    }
                })
                .collect(),
            unschedulable: self.unschedulable.clone(),
            aliases: self.aliases.clone(),
        }
    }

    /// The core PMUs of the hardware groups, in order of first appearance (`cpu`, or
    /// `cpu_core`, `cpu_atom`, ... for a plan of every core type). Uncore and other PMUs
    /// count too: the caller knows which PMUs are core types.
    pub fn counter_pmus(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for g in &self.groups {
            if g.slots.iter().any(|s| *s != Slot::NoCounter) && !v.contains(&g.pmu.as_str()) {
                v.push(&g.pmu);
            }
        }
        v
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hw = self.hardware_groups();
        writeln!(
            f,
            "plan: {} group{}, {} on hardware counters{}",
            self.groups.len(),
            if self.groups.len() == 1 { "" } else { "s" },
            hw,
            if hw > 1 {
                " (multiplexed in one run; --no-multiplex runs once per group)"
            } else {
                ""
            }
        )?;
        for (i, g) in self.groups.iter().enumerate() {
            let fixed = g
                .slots
                .iter()
                .filter(|s| matches!(s, Slot::Fixed(_)))
                .count();
            writeln!(
                f,
                "  group {i} [{}]: {} event{}, {} gp + {} fixed counter{}",
                g.pmu,
                g.events.len(),
                if g.events.len() == 1 { "" } else { "s" },
                g.gp_used(),
                fixed,
                if fixed == 1 { "" } else { "s" }
            )?;
            for (e, s) in g.events.iter().zip(&g.slots) {
                writeln!(f, "    {:<7} {}", s.to_string(), e.name)?;
            }
        }
        for (e, why) in &self.unschedulable {
            writeln!(f, "  not schedulable: {e}: {why}")?;
        }
        Ok(())
    }
}

/// Build a plan. `sets` are the formula event sets (one per node / metric); `limits_for`
/// gives the counter limits of a PMU by name. The steps are those of the module doc.
pub fn plan(
    sets: &[Vec<EventSpec>],
    limits_for: &dyn Fn(&str) -> Limits,
) -> Result<Plan, PlanError> {
    let uniq_sets = dedup_sets(sets);
    if uniq_sets.iter().all(|s| s.is_empty()) {
        return Err(PlanError::Empty);
    }
    let all: Vec<&EventSpec> = uniq_sets.iter().flatten().collect();
    let mut out = Plan::default();
    add_topdown_groups(&mut out, &all);
    add_alone_groups(&mut out, &all, limits_for);
    add_no_counter_groups(&mut out, &all);
    add_counter_sets(&mut out, sets, limits_for);
    Ok(out)
}

/// 1. The sets with every event name kept only where it first appears.
fn dedup_sets(sets: &[Vec<EventSpec>]) -> Vec<Vec<EventSpec>> {
    let mut seen = std::collections::HashSet::new();
    sets.iter()
        .map(|s| {
            s.iter()
                .filter(|e| seen.insert(e.name.clone()))
                .cloned()
                .collect()
        })
        .collect()
}

/// 2. Topdown groups, one per PMU that has topdown events.
fn add_topdown_groups(out: &mut Plan, all: &[&EventSpec]) {
    let mut td_pmus: Vec<&str> = Vec::new();
    for e in all {
        if matches!(e.kind, SpecKind::Slots | SpecKind::PerfMetrics(_))
            && !td_pmus.contains(&e.pmu.as_str())
        {
            td_pmus.push(&e.pmu);
        }
    }
    for pmu in td_pmus {
        let group = topdown_group(out, all, pmu);
        out.groups.push(group);
    }
}

/// The group of `pmu`'s topdown events, led by `slots`; other slots events become aliases.
fn topdown_group(out: &mut Plan, all: &[&EventSpec], pmu: &str) -> Group {
    let leader = all
        .iter()
        .find(|e| e.pmu == pmu && e.kind == SpecKind::Slots)
        .map(|e| (*e).clone())
        .unwrap_or_else(|| EventSpec {
            kind: SpecKind::Slots,
            fixed: Some(3),
            counter_mask: 0,
            ..EventSpec::raw("TOPDOWN.SLOTS", pmu, 0x0400)
        });
    // Every other slots event of this PMU (same counter, other name) is an alias.
    for e in all
        .iter()
        .filter(|e| e.pmu == pmu && e.kind == SpecKind::Slots && e.name != leader.name)
    {
        out.aliases.push((e.name.clone(), leader.name.clone()));
    }
    let mut events = vec![leader];
    let mut slots = vec![Slot::Fixed(3)];
    for e in all
        .iter()
        .filter(|e| e.pmu == pmu && matches!(e.kind, SpecKind::PerfMetrics(_)))
    {
        events.push((*e).clone());
        slots.push(Slot::Metric);
    }
    Group {
        pmu: pmu.to_string(),
        events,
        slots,
    }
}

/// 3. Taken-alone events, one group each.
fn add_alone_groups(out: &mut Plan, all: &[&EventSpec], limits_for: &dyn Fn(&str) -> Limits) {
    for e in all.iter().filter(|e| e.taken_alone && is_counter_event(e)) {
        let lim = limits_for(&e.pmu);
        match place(&[], e, &lim) {
            Some(slots) => out.groups.push(Group {
                pmu: e.pmu.clone(),
                events: vec![(*e).clone()],
                slots,
            }),
            None => out
                .unschedulable
                .push((e.name.clone(), no_counter_reason(e, &lim))),
        }
    }
}

/// 4. Software events in one group, msr (TSC) events in another.
fn add_no_counter_groups(out: &mut Plan, all: &[&EventSpec]) {
    let software =
        |e: &EventSpec| matches!(e.kind, SpecKind::Software(_) | SpecKind::Tracepoint(_));
    let tsc = |e: &EventSpec| e.kind == SpecKind::Tsc;
    for (pmu_pred, pmu_name) in [
        (&software as &dyn Fn(&EventSpec) -> bool, "software"),
        (&tsc as &dyn Fn(&EventSpec) -> bool, "msr"),
    ] {
        let evs: Vec<EventSpec> = all
            .iter()
            .filter(|e| pmu_pred(e))
            .map(|e| (*e).clone())
            .collect();
        if !evs.is_empty() {
            out.groups.push(Group {
                pmu: pmu_name.into(),
                slots: vec![Slot::NoCounter; evs.len()],
                events: evs,
            });
        }
    }
}

/// 5. Ordinary counter events, formula set by formula set.
fn add_counter_sets(out: &mut Plan, sets: &[Vec<EventSpec>], limits_for: &dyn Fn(&str) -> Limits) {
    let mut open: Vec<usize> = Vec::new(); // the open (last made) group of each pmu
    let mut placed: std::collections::HashSet<String> = out
        .groups
        .iter()
        .flat_map(|g| g.events.iter().map(|e| e.name.clone()))
        .collect();
    for set in sets {
        let mut pending: Vec<&EventSpec> = Vec::new();
        for e in set {
            if is_counter_event(e)
                && !e.taken_alone
                && !placed.contains(&e.name)
                && !pending.iter().any(|p| p.name == e.name)
            {
                pending.push(e);
            }
        }
        for e in &pending {
            placed.insert(e.name.clone());
        }
        // Split by PMU (hybrid sets never mix).
        let mut pmus: Vec<&str> = Vec::new();
        for e in &pending {
            if !pmus.contains(&e.pmu.as_str()) {
                pmus.push(&e.pmu);
            }
        }
        for pmu in pmus {
            let lim = limits_for(pmu);
            let evs: Vec<&EventSpec> = pending.iter().copied().filter(|e| e.pmu == pmu).collect();
            if !add_to_existing(out, &open, set, pmu, &evs, &lim) {
                add_new_groups(out, &mut open, pmu, evs, &lim);
            }
        }
    }
}

/// Put all of `evs` (one PMU's unplaced events of `set`) into an existing group if they fit:
/// groups already holding events of the set (most first), then the open group of the PMU.
fn add_to_existing(
    out: &mut Plan,
    open: &[usize],
    set: &[EventSpec],
    pmu: &str,
    evs: &[&EventSpec],
    lim: &Limits,
) -> bool {
    let mut cands: Vec<(usize, usize)> = out
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| {
            g.pmu == pmu
                && g.slots
                    .iter()
                    .all(|s| matches!(s, Slot::Gp(_) | Slot::Fixed(_)))
        })
        .filter(|(_, g)| !g.events.iter().any(|e| e.taken_alone))
        .map(|(i, g)| {
            (
                i,
                g.events
                    .iter()
                    .filter(|e| set.iter().any(|x| x.name == e.name))
                    .count(),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut order: Vec<usize> = cands.into_iter().map(|(i, _)| i).collect();
    if let Some(g) = open.iter().copied().find(|&g| out.groups[g].pmu == pmu) {
        if !order.contains(&g) {
            order.push(g);
        }
    }
    for g in order {
        if let Some(slots) = try_add_all(&out.groups[g], evs, lim) {
            out.groups[g]
                .events
                .extend(evs.iter().map(|e| (*e).clone()));
            out.groups[g].slots = slots;
            return true;
        }
    }
    false
}

/// New group(s) for `evs`, as few as the greedy walk gives; the last becomes the open group
/// of `pmu`.
fn add_new_groups(
    out: &mut Plan,
    open: &mut Vec<usize>,
    pmu: &str,
    evs: Vec<&EventSpec>,
    lim: &Limits,
) {
    let empty = || Group {
        pmu: pmu.to_string(),
        events: Vec::new(),
        slots: Vec::new(),
    };
    let mut g = empty();
    for e in evs {
        if let Some(slots) = try_add_all(&g, &[e], lim) {
            g.events.push(e.clone());
            g.slots = slots;
            continue;
        }
        if place(&[], e, lim).is_none() {
            out.unschedulable
                .push((e.name.clone(), no_counter_reason(e, lim)));
            continue;
        }
        // Current new group is full: close it and start another.
        out.groups.push(std::mem::replace(&mut g, empty()));
        g.slots = place(&[], e, lim).unwrap_or_default();
        g.events.push(e.clone());
    }
    if !g.events.is_empty() {
        out.groups.push(g);
        let idx = out.groups.len() - 1;
        open.retain(|&o| out.groups[o].pmu != pmu);
        open.push(idx);
    }
}

fn is_counter_event(e: &EventSpec) -> bool {
    matches!(e.kind, SpecKind::Core | SpecKind::Hardware(_))
}

fn no_counter_reason(e: &EventSpec, lim: &Limits) -> String {
    format!(
        "counter mask {:#x} allows none of the {} usable general-purpose counters{}",
        e.counter_mask,
        lim.usable_gp(),
        if lim.nmi_watchdog {
            format!(
                " (the NMI watchdog holds one: {} frees it)",
                tma_sys::advice::NMI_WATCHDOG_OFF
            )
        } else {
            String::new()
        }
    )
}

/// Counter assignment for `existing` events plus `e`, or None when it does not fit.
fn place(existing: &[&EventSpec], e: &EventSpec, lim: &Limits) -> Option<Vec<Slot>> {
    let mut all: Vec<&EventSpec> = existing.to_vec();
    all.push(e);
    assign(&all, lim)
}

fn try_add_all(g: &Group, add: &[&EventSpec], lim: &Limits) -> Option<Vec<Slot>> {
    let mut all: Vec<&EventSpec> = g.events.iter().collect();
    all.extend_from_slice(add);
    assign(&all, lim)
}

/// Assign counters to a whole group: fixed events first, then bipartite matching of the rest
/// onto general-purpose counters (augmenting paths; groups are at most a dozen events).
fn assign(events: &[&EventSpec], lim: &Limits) -> Option<Vec<Slot>> {
    let gp = lim.usable_gp().min(32);
    let usable_mask: u32 = if gp >= 32 { u32::MAX } else { (1u32 << gp) - 1 };
    let mut slots = vec![Slot::NoCounter; events.len()];
    let mut fixed_taken = 0u32;
    let mut need_gp: Vec<usize> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match e.fixed {
            Some(f) if (f as u32) < lim.fixed && fixed_taken & (1 << f) == 0 => {
                fixed_taken |= 1 << f;
                slots[i] = Slot::Fixed(f);
            }
            _ => need_gp.push(i),
        }
    }
    // owner[c] = index into need_gp
    let mut owner: Vec<Option<usize>> = vec![None; gp as usize];
    fn augment(k: usize, allowed: &[u32], owner: &mut [Option<usize>], seen: &mut [bool]) -> bool {
        for c in 0..owner.len() {
            if allowed[k] & (1 << c) != 0 && !seen[c] {
                seen[c] = true;
                if owner[c].is_none_or(|o| augment(o, allowed, owner, seen)) {
                    owner[c] = Some(k);
                    return true;
                }
            }
        }
        false
    }
    let allowed: Vec<u32> = need_gp
        .iter()
        .map(|&i| events[i].counter_mask & usable_mask)
        .collect();
    for k in 0..need_gp.len() {
        let mut seen = vec![false; gp as usize];
        if !augment(k, &allowed, &mut owner, &mut seen) {
            return None;
        }
    }
    for (c, o) in owner.iter().enumerate() {
        if let Some(k) = o {
            slots[need_gp[*k]] = Slot::Gp(c as u8);
        }
    }
    Some(slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SoftwareEvent;

    fn ev(name: &str, mask: u32) -> EventSpec {
        EventSpec {
            counter_mask: mask,
            ..EventSpec::raw(name, "cpu", 0x1234)
        }
    }
    fn fixed(name: &str, idx: u8) -> EventSpec {
        EventSpec {
            fixed: Some(idx),
            counter_mask: 0xff,
            ..EventSpec::raw(name, "cpu", 0xc0)
        }
    }
    const SPR: Limits = Limits {
        gp: 8,
        fixed: 4,
        nmi_watchdog: false,
    };
    const ZEN: Limits = Limits {
        gp: 6,
        fixed: 0,
        nmi_watchdog: false,
    };

    fn names(g: &Group) -> Vec<&str> {
        g.events.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn topdown_group_led_by_slots_even_if_listed_late() {
        let m = |i: u8| EventSpec {
            kind: SpecKind::PerfMetrics(i),
            counter_mask: 0,
            ..EventSpec::raw(
                format!("PERF_METRICS.{i}"),
                "cpu",
                0x8000 + 0x100 * i as u64,
            )
        };
        let slots2 = EventSpec {
            kind: SpecKind::Slots,
            fixed: Some(3),
            ..EventSpec::raw("TOPDOWN.SLOTS:perf_metrics", "cpu", 0x0400)
        };
        let slots1 = EventSpec {
            name: "TOPDOWN.SLOTS".into(),
            ..slots2.clone()
        };
        let sets = vec![
            vec![m(0), m(1), ev("A", 0xff), slots1],
            vec![m(2), m(3), slots2],
        ];
        let p = plan(&sets, &|_| SPR).unwrap();
        assert_eq!(
            p.aliases,
            vec![(
                "TOPDOWN.SLOTS:perf_metrics".to_string(),
                "TOPDOWN.SLOTS".to_string()
            )]
        );
        assert_eq!(names(&p.groups[0])[0], "TOPDOWN.SLOTS");
        assert_eq!(p.groups[0].events.len(), 5);
        assert_eq!(p.groups[0].slots[0], Slot::Fixed(3));
        assert!(p.groups[0].slots[1..].iter().all(|s| *s == Slot::Metric));
        assert_eq!(names(&p.groups[1]), ["A"]);
    }

    #[test]
    fn zen_l1_fits_six_counters_l2_splits() {
        let l1: Vec<_> = (0..6).map(|i| ev(&format!("L1_{i}"), 0x3f)).collect();
        let l2: Vec<_> = (0..6).map(|i| ev(&format!("L2_{i}"), 0x3f)).collect();
        let p = plan(std::slice::from_ref(&l1), &|_| ZEN).unwrap();
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.groups[0].gp_used(), 6);
        let p = plan(&[l1, l2], &|_| ZEN).unwrap();
        assert_eq!(p.groups.len(), 2);
        assert!(names(&p.groups[1]).iter().all(|n| n.starts_with("L2_")));
    }

    #[test]
    fn nmi_watchdog_takes_a_counter() {
        let l1: Vec<_> = (0..6).map(|i| ev(&format!("E{i}"), 0x3f)).collect();
        let lim = Limits {
            nmi_watchdog: true,
            ..ZEN
        };
        let p = plan(&[l1], &|_| lim).unwrap();
        assert_eq!(p.groups.len(), 2);
        assert_eq!(p.groups[0].gp_used(), 5);
        // An event restricted to the watchdog's counter cannot be placed.
        let p = plan(&[vec![ev("ONLY5", 1 << 5)]], &|_| lim).unwrap();
        assert!(p.groups.is_empty());
        assert_eq!(p.unschedulable[0].0, "ONLY5");
        assert!(p.unschedulable[0].1.contains("nmi_watchdog"));
    }

    #[test]
    fn counter_masks_are_matched() {
        // Two events that only fit counter 0 or 1, one that fits only 0: matching must put
        // the flexible one on 1 even though it comes first.
        let sets = vec![vec![ev("ANY01", 0b11), ev("ONLY0", 0b01)]];
        let p = plan(&sets, &|_| Limits {
            gp: 4,
            fixed: 3,
            nmi_watchdog: false,
        })
        .unwrap();
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.groups[0].slots, vec![Slot::Gp(1), Slot::Gp(0)]);
        // Two events both restricted to counter 0 need two groups.
        let sets = vec![vec![ev("A0", 1), ev("B0", 1)]];
        let p = plan(&sets, &|_| SPR).unwrap();
        assert_eq!(p.groups.len(), 2);
    }

    #[test]
    fn fixed_counters_and_fallback() {
        let sets = vec![vec![
            fixed("INST_RETIRED.ANY", 0),
            fixed("CPU_CLK_UNHALTED.THREAD", 1),
            fixed("INST_RETIRED.ANY_P_DUP", 0),
        ]];
        let p = plan(&sets, &|_| SPR).unwrap();
        assert_eq!(
            p.groups[0].slots,
            vec![Slot::Fixed(0), Slot::Fixed(1), Slot::Gp(0)]
        );
    }

    #[test]
    fn taken_alone_alone_and_formula_sets_together() {
        let mut ta = ev("FRONTEND_RETIRED.LATENCY_GE_4", 0xff);
        ta.taken_alone = true;
        ta.msr_index = 0x3F7;
        let a: Vec<_> = (0..5).map(|i| ev(&format!("A{i}"), 0xff)).collect();
        let b: Vec<_> = (0..5).map(|i| ev(&format!("B{i}"), 0xff)).collect();
        let mut sa = a.clone();
        sa.push(ta);
        let p = plan(&[sa, b], &|_| SPR).unwrap();
        let g: Vec<Vec<&str>> = p.groups.iter().map(names).collect();
        assert_eq!(g[0], ["FRONTEND_RETIRED.LATENCY_GE_4"]);
        // Set A (5) fits; set B (5) would overflow 8 counters, so it gets its own group.
        assert_eq!(g[1], ["A0", "A1", "A2", "A3", "A4"]);
        assert_eq!(g[2], ["B0", "B1", "B2", "B3", "B4"]);
        assert_eq!(p.group_of("B3"), Some(2));
    }

    #[test]
    fn formula_set_joins_the_group_holding_its_events() {
        let s1: Vec<_> = ["CYC", "A1", "A2", "A3", "A4"]
            .iter()
            .map(|n| ev(n, 0xff))
            .collect();
        let s2: Vec<_> = ["B1", "B2", "B3", "B4", "B5"]
            .iter()
            .map(|n| ev(n, 0xff))
            .collect();
        let s3 = vec![ev("CYC", 0xff), ev("A5", 0xff)];
        let p = plan(&[s1, s2, s3], &|_| SPR).unwrap();
        assert_eq!(p.groups.len(), 2);
        // A5 shares a formula with CYC, so it goes where CYC is, not into the open B group.
        assert_eq!(p.group_of("A5"), p.group_of("CYC"));
        assert_ne!(p.group_of("A5"), p.group_of("B1"));
    }

    #[test]
    fn software_group_and_dedup() {
        let t = EventSpec::software(SoftwareEvent::TaskClock);
        let c = EventSpec::software(SoftwareEvent::ContextSwitches);
        let p = plan(&[vec![t.clone(), c.clone()], vec![t]], &|_| SPR).unwrap();
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.groups[0].events.len(), 2);
        assert_eq!(p.hardware_groups(), 0);
        assert!(p.to_string().contains("task-clock"));
        assert_eq!(plan(&[], &|_| SPR), Err(PlanError::Empty));
    }

    #[test]
    fn core_type_plans_are_joined_and_viewed_per_type() {
        let on = |pmu: &str, names: &[&str]| -> Vec<EventSpec> {
            names
                .iter()
                .map(|n| EventSpec {
                    counter_mask: 0xff,
                    ..EventSpec::raw(*n, pmu, 1)
                })
                .collect()
        };
        let lim = |_: &str| Limits {
            gp: 2,
            fixed: 3,
            nmi_watchdog: false,
        };
        let sw = crate::backend::software_events();
        let core = plan(&[on("cpu_core", &["A", "B", "C"]), sw.clone()], &lim).unwrap();
        let atom = plan(&[on("cpu_atom", &["A", "D"]), sw.clone()], &lim).unwrap();
        let lp = plan(&[on("cpu_lowpower", &["A"]), sw], &lim).unwrap();
        let all = Plan::for_core_types(&[core.clone(), atom, lp]);
        // Each type's groups, then one software group (not three).
        let pmus: Vec<&str> = all.groups.iter().map(|g| g.pmu.as_str()).collect();
        assert_eq!(
            pmus,
            [
                "software",
                "cpu_core",
                "cpu_core",
                "cpu_atom",
                "cpu_lowpower"
            ]
        );
        assert_eq!(all.counter_pmus(), ["cpu_core", "cpu_atom", "cpu_lowpower"]);
        let types = ["cpu_core", "cpu_atom", "cpu_lowpower"];
        let v = all.core_view("cpu_atom", &types);
        assert_eq!(v.groups.len(), all.groups.len());
        let names: Vec<&str> = v.events().map(|e| e.name.as_str()).collect();
        assert_eq!(&names[names.len() - 2..], ["A", "D"]);
        assert!(names.contains(&"task-clock"));
        assert_eq!(v.events().filter(|e| e.name == "A").count(), 1);
        // A uniform plan is its own view.
        assert_eq!(core.core_view("cpu_core", &["cpu_core"]), core);
    }

    #[test]
    fn hybrid_pmus_never_share_a_group() {
        let a = ev("X", 0xff);
        let b = EventSpec {
            pmu: "cpu_atom".into(),
            ..ev("Y", 0x3f)
        };
        let p = plan(&[vec![a, b]], &|_| SPR).unwrap();
        assert_eq!(p.groups.len(), 2);
        assert_ne!(p.groups[0].pmu, p.groups[1].pmu);
    }
}
