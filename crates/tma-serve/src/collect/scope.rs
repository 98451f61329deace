//! The scopes of an interval (the target, each cgroup or CPU, the followed cgroups of
//! `--cgroup-top`) and the series of each.

use tma_catalog::Unit;
use tma_perf::backend::{Measurement, RawInterval, Target};
use tma_perf::event::SoftwareEvent;
use tma_perf::plan::Plan;
use tma_perf::Interval;
use tma_stat::sink::IntervalData;
use tma_stat::IntervalReport;

use crate::anomaly::ScopeValues;

use super::families::{
    fleet_slots, node_path, Part, CYCLES, F_BOTTLENECK, F_COUNTED, F_CYCLES, F_EVENT,
    F_INSTRUCTIONS, F_METRIC, F_NODE, F_SLOTS, F_SOFTWARE, INSTRUCTIONS, MEMORY_BOUND, SOFTWARE,
};
use super::{Collector, Mode, ScopeLabel, Split};

impl Collector {
    /// What `--anomaly` learns of a scope: its level-1 shares, IPC, the memory-bound share.
    pub(super) fn anomaly_values(&self, s: &ScopeIv) -> Option<ScopeValues> {
        let Mode::Tree { info, .. } = &self.mode else {
            return None;
        };
        let rep = s.report.as_ref()?;
        let mut values = Vec::new();
        let mut memory_bound = None;
        for n in &rep.report.nodes {
            let Some(v) = n.value.filter(|_| n.status.has_value()) else {
                continue;
            };
            if n.level == 1 && n.unit == Unit::PercentSlots {
                values.push((node_path(info.model, n.name), v / 100.0));
            }
            if MEMORY_BOUND.iter().any(|m| n.name.eq_ignore_ascii_case(m)) {
                memory_bound = Some(v / 100.0);
            }
        }
        let count = |names: &[&str]| {
            names
                .iter()
                .find_map(|e| s.readings.get(e).and_then(|r| r.value))
        };
        if let (Some(i), Some(c)) = (count(INSTRUCTIONS), count(CYCLES)) {
            if c > 0.0 {
                values.push(("IPC".to_string(), i / c));
            }
        }
        Some(ScopeValues {
            scope: s.label.as_ref().map_or(String::new(), |(_, v)| v.clone()),
            values,
            memory_bound,
        })
    }

    /// The scopes of an interval, each with where its counts come from.
    pub(super) fn scopes(&self, iv: &IntervalData<'_>) -> Vec<ScopeIv> {
        let plan = self.plan();
        if let (Some(raw), Some(plan), Some(followed)) = (iv.raw, plan, &self.hot_followed) {
            return self.hot_scopes(raw, plan, followed);
        }
        if let (Some(raw), Some(plan)) = (iv.raw, plan) {
            if let Some(Target::Cgroups(dirs)) = &self.target {
                return (0..dirs.len() as u32)
                    .map(|i| {
                        let key = ScopeKey::Cgroup(i);
                        let r = part(&|g| key.holds(g), raw, plan);
                        let label = self
                            .cgroup_labels
                            .get(i as usize)
                            .cloned()
                            .unwrap_or_else(|| dirs[i as usize].display().to_string());
                        let report = self.eval(&r);
                        ScopeIv {
                            label: Some(("cgroup", label)),
                            key,
                            readings: r,
                            report,
                            rest: false,
                        }
                    })
                    .collect();
            }
            if self.split == Split::PerCpu {
                let mut cpus: Vec<u32> = raw.groups.iter().filter_map(|g| g.cpu).collect();
                cpus.sort_unstable();
                cpus.dedup();
                if !cpus.is_empty() {
                    return cpus
                        .into_iter()
                        .map(|c| {
                            let key = ScopeKey::Cpu(c);
                            let r = part(&|g| key.holds(g), raw, plan);
                            let report = self.eval(&r);
                            ScopeIv {
                                label: Some(("cpu", c.to_string())),
                                key,
                                readings: r,
                                report,
                                rest: false,
                            }
                        })
                        .collect();
                }
            }
        }
        vec![ScopeIv {
            label: None,
            key: ScopeKey::Whole,
            readings: iv.readings.clone(),
            report: iv.report.cloned(),
            rest: false,
        }]
    }

    /// The scopes of a `--cgroup-top` interval counted with a PMU: each followed cgroup
    /// without the followed cgroups below it, and the rest of the system (never named).
    pub(super) fn hot_scopes(
        &self,
        raw: &RawInterval,
        plan: &Plan,
        followed: &[(u32, String)],
    ) -> Vec<ScopeIv> {
        let whole: Vec<Interval> = followed
            .iter()
            .map(|(id, _)| part(&|g| g.cgroup == Some(*id), raw, plan))
            .collect();
        let below = |a: &str, b: &str| {
            a.is_empty() || b.strip_prefix(a).is_some_and(|r| r.starts_with('/'))
        };
        // The followed cgroups right below each one (no followed cgroup in between).
        let children = |i: usize| -> Vec<usize> {
            let a = &followed[i].1;
            (0..followed.len())
                .filter(|&j| j != i && below(a, &followed[j].1))
                .filter(|&j| {
                    !(0..followed.len()).any(|k| {
                        k != i
                            && k != j
                            && below(a, &followed[k].1)
                            && below(&followed[k].1, &followed[j].1)
                    })
                })
                .collect()
        };
        let mut out = Vec::with_capacity(followed.len() + 1);
        for (i, (id, path)) in followed.iter().enumerate() {
            let subs: Vec<&Interval> = children(i).into_iter().map(|j| &whole[j]).collect();
            let r = minus(&whole[i], &subs);
            let report = self.eval(&r);
            out.push(ScopeIv {
                label: Some((
                    "cgroup",
                    if path.is_empty() {
                        crate::hot::ROOT_LABEL.to_string()
                    } else {
                        path.clone()
                    },
                )),
                key: ScopeKey::Cgroup(*id),
                readings: r,
                report,
                rest: false,
            });
        }
        // The rest: the system less the followed cgroups that have no followed ancestor.
        let tops: Vec<&Interval> = (0..followed.len())
            .filter(|&j| {
                !(0..followed.len()).any(|k| k != j && below(&followed[k].1, &followed[j].1))
            })
            .map(|j| &whole[j])
            .collect();
        let system = part(&|g| g.cgroup.is_none(), raw, plan);
        let r = minus(&system, &tops);
        let report = self.eval(&r);
        out.push(ScopeIv {
            label: None,
            key: ScopeKey::Whole,
            readings: r,
            report,
            rest: true,
        });
        out
    }

    /// The series of one scope (labels without the scope's own), counters as the growth of
    /// this interval; and the scope's weight for the top-N choice (its slots, else its
    /// task-clock).
    pub(super) fn scope_parts(&self, s: &ScopeIv) -> (Vec<Part>, f64) {
        let mut parts = Vec::new();
        let mut weight = None;
        let (model, info) = match &self.mode {
            Mode::Tree { info, .. } => (Some(info.model), Some(info)),
            _ => (None, None),
        };
        let aliases: Vec<&str> = match &self.mode {
            Mode::Tree { plan: Some(p), .. } => p.aliases.iter().map(|(a, _)| a.as_str()).collect(),
            _ => Vec::new(),
        };
        if let (Some(rep), Some(model), Some(info)) = (&s.report, model, info) {
            let duration = (s.readings.end_s - s.readings.start_s).max(0.0);
            let consts = info.request.constants((duration > 0.0).then_some(duration));
            let slots = fleet_slots(model, &s.readings, &consts);
            for n in &rep.report.nodes {
                let Some(v) = n.value.filter(|_| n.status.has_value()) else {
                    continue;
                };
                if !matches!(n.unit, Unit::PercentSlots | Unit::Percent) {
                    continue;
                }
                let mut labels = vec![
                    ("node", node_path(model, n.name)),
                    ("level", n.level.to_string()),
                ];
                // One core type's tree of a hybrid part (or their merged view).
                labels.extend(info.core_type.map(|t| ("core_type", t.to_string())));
                if let Some(share) = n.counted_share {
                    parts.push(Part::gauge(F_COUNTED, labels.clone(), share));
                }
                if let (Some(total), Unit::PercentSlots) = (slots, n.unit) {
                    parts.push(Part::counter(F_SLOTS, labels.clone(), v / 100.0 * total));
                }
                parts.push(Part::gauge(F_NODE, labels, v / 100.0));
            }
            if let Some(total) = slots {
                parts.push(Part::counter(
                    F_SLOTS,
                    vec![("node", "total".into()), ("level", "0".into())],
                    total,
                ));
                weight = Some(total);
            }
            for (family, names) in [(F_CYCLES, CYCLES), (F_INSTRUCTIONS, INSTRUCTIONS)] {
                let value = names
                    .iter()
                    .find_map(|e| s.readings.get(e).and_then(|r| r.value));
                if let Some(v) = value.filter(|v| v.is_finite() && *v >= 0.0) {
                    parts.push(Part::counter(family, Vec::new(), v));
                }
            }
            if let Some(b) = &rep.report.bottleneck.node {
                parts.push(Part::gauge(
                    F_BOTTLENECK,
                    vec![("node", node_path(model, b))],
                    1.0,
                ));
            }
            for m in &rep.report.metrics {
                if let Some(v) = m.value.filter(|_| m.status.has_value()) {
                    parts.push(Part::gauge(
                        F_METRIC,
                        vec![("name", m.short_name.to_string())],
                        v,
                    ));
                }
            }
        }
        for r in s
            .readings
            .readings
            .iter()
            .filter(|r| r.cpu.is_none() && r.tid.is_none())
        {
            let Some(v) = r.value else { continue };
            if let Some(k) = SOFTWARE
                .iter()
                .position(|(e, ..)| e.name().eq_ignore_ascii_case(&r.event))
            {
                if SOFTWARE[k].0 == SoftwareEvent::TaskClock && weight.is_none() {
                    weight = Some(v);
                }
                parts.push(Part::counter(F_SOFTWARE + k, Vec::new(), v * SOFTWARE[k].3));
                continue;
            }
            if model.is_none()
                || SoftwareEvent::parse(&r.event).is_some()
                || r.event == "duration_time"
                || aliases.contains(&r.event.as_str())
            {
                continue;
            }
            parts.push(Part::counter(F_EVENT, vec![("event", r.event.clone())], v));
        }
        (parts, weight.filter(|w| w.is_finite()).unwrap_or(0.0))
    }
}

/// Where a scope's counts come from in the raw interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScopeKey {
    Whole,
    Cgroup(u32),
    Cpu(u32),
}

impl ScopeKey {
    pub(super) fn holds(self, g: &tma_perf::backend::GroupReading) -> bool {
        match self {
            ScopeKey::Whole => true,
            ScopeKey::Cgroup(i) => g.cgroup == Some(i),
            ScopeKey::Cpu(c) => g.cpu == Some(c),
        }
    }
}

/// One scope of an interval.
pub(super) struct ScopeIv {
    pub(super) label: ScopeLabel,
    pub(super) key: ScopeKey,
    pub(super) readings: Interval,
    pub(super) report: Option<IntervalReport>,
    /// `--cgroup-top` with a PMU: the counts of no followed cgroup (always in `other`).
    pub(super) rest: bool,
}

/// `a`'s readings less the sum of `subs`' (readings of one plan, in the same order), each
/// value at least 0: a counted cgroup less the counted cgroups below it, the system less
/// the counted cgroups. Counted as the least counted of them.
pub(super) fn minus(a: &Interval, subs: &[&Interval]) -> Interval {
    let mut out = a.clone();
    for (k, r) in out.readings.iter_mut().enumerate() {
        for b in subs {
            let Some(x) = b.readings.get(k).filter(|x| x.event == r.event) else {
                continue;
            };
            if let (Some(v), Some(w)) = (r.value, x.value) {
                r.value = Some((v - w).max(0.0));
            }
            if let (Some(v), Some(w)) = (r.raw, x.raw) {
                r.raw = Some(v.saturating_sub(w));
            }
            if let (Some(s), Some(t)) = (r.counted_share, x.counted_share) {
                r.counted_share = Some(s.min(t));
            }
        }
    }
    out
}

/// The sum of `parts`' readings (one plan, same order): the scopes folded into `other`.
pub(super) fn plus(parts: &[&Interval]) -> Option<Interval> {
    let (first, rest) = parts.split_first()?;
    let mut out = (*first).clone();
    for (k, r) in out.readings.iter_mut().enumerate() {
        for b in rest {
            let Some(x) = b.readings.get(k).filter(|x| x.event == r.event) else {
                continue;
            };
            r.value = match (r.value, x.value) {
                (Some(v), Some(w)) => Some(v + w),
                (v, w) => v.or(w),
            };
            if let (Some(v), Some(w)) = (r.raw, x.raw) {
                r.raw = Some(v.saturating_add(w));
            }
            if let (Some(e), Some(f)) = (r.time_enabled_ns, x.time_enabled_ns) {
                r.time_enabled_ns = Some(e.saturating_add(f));
            }
            if let (Some(e), Some(f)) = (r.time_running_ns, x.time_running_ns) {
                r.time_running_ns = Some(e.saturating_add(f));
            }
            if let (Some(e), Some(f)) = (r.time_enabled_ns, r.time_running_ns) {
                r.counted_share = Some(if e == 0 {
                    1.0
                } else {
                    (f as f64 / e as f64).min(1.0)
                });
            }
            if r.value.is_some() {
                r.status = tma_perf::ReadingStatus::Counted;
            }
        }
    }
    Some(out)
}

/// The readings of the groups of `raw` that `keep` keeps.
pub(super) fn part(
    keep: &dyn Fn(&tma_perf::backend::GroupReading) -> bool,
    raw: &RawInterval,
    plan: &Plan,
) -> Interval {
    let sub = RawInterval {
        start_s: raw.start_s,
        end_s: raw.end_s,
        groups: raw.groups.iter().filter(|g| keep(g)).cloned().collect(),
    };
    Measurement::interval_readings(plan, &sub, false)
}
