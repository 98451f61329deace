//! One exposition: the families of an interval (or of an interval of several trees), named
//! within `--cgroup-top` and the series budget, the rest folded into `other`.

use std::time::{Instant, UNIX_EPOCH};

use tma_perf::Interval;
use tma_stat::sink::IntervalData;

use crate::anomaly::{Finding, ScopeValues};
use crate::expo::{Family, Kind};
use crate::hot::Naming;

use super::families::{count, scope_families, total_key, Part, F_CYCLES, F_INSTRUCTIONS, F_SLOTS};
use super::scope::{part, plus, ScopeIv, ScopeKey};
use super::{Collector, Mode, ScopeLabel};

impl Collector {
    /// `tma_anomaly` of the findings of an interval (logged, too).
    pub(super) fn anomaly_family(&self, scopes: &[ScopeIv], findings: &[Finding]) -> Family {
        let mut f = Family::new(
            "tma_anomaly",
            Kind::Gauge,
            "1 when the last interval's value of a level-1 node (or IPC) fell outside the \
             distribution --anomaly learnt for that cgroup (or CPU, or host); antagonist: the \
             co-located cgroup whose memory-bound share rose the most at the same moment.",
        );
        let key = scopes
            .first()
            .and_then(|s| s.label.as_ref().map(|(k, _)| *k));
        for x in findings {
            let mut labels = vec![("node", x.node.clone())];
            if let Some(k) = key {
                labels.push((k, x.scope.clone()));
            }
            if let Some(a) = &x.antagonist {
                labels.push(("antagonist", a.clone()));
            }
            f.push(labels, 1.0);
            self.log.info(
                "anomaly",
                &[
                    ("scope", &x.scope),
                    ("node", &x.node),
                    ("value", &format!("{:.4}", x.value)),
                    ("mean", &format!("{:.4}", x.mean)),
                    ("deviation", &format!("{:.4}", x.deviation)),
                    ("antagonist", &x.antagonist.as_deref().unwrap_or("none")),
                ],
            );
        }
        f
    }

    /// The families that do not depend on an interval.
    pub(super) fn state_families(&self) -> Vec<Family> {
        let mut out = Vec::new();
        let mut build = Family::new(
            "tma_build",
            Kind::Info,
            "tma version, the CPU model of the tables (`none` without a PMU), the TMA version \
             of the tables and this machine's CPU.",
        );
        let (model, tables) = match &self.mode {
            Mode::Tree { info, .. } => (
                info.model.key.to_string(),
                info.model
                    .tma_version
                    .unwrap_or(info.model.source)
                    .to_string(),
            ),
            _ => ("none".to_string(), "none".to_string()),
        };
        build.push(
            vec![
                ("version", self.build.version.clone()),
                ("cpu_model", model),
                ("table_version", tables),
                ("cpu", self.build.cpu.clone()),
                (
                    "mode",
                    if self.replay { "replay" } else { "live" }.to_string(),
                ),
            ],
            1.0,
        );
        out.push(build);
        if let Some(avail) = self.pmu_available() {
            let mut a = Family::new(
                "tma_pmu_available",
                Kind::Gauge,
                "1 when hardware counters are counted (the TMA tree is exported), 0 when only \
                 software counts are.",
            );
            a.push(Vec::new(), if avail { 1.0 } else { 0.0 });
            out.push(a);
        }
        if let Mode::Software { reason, .. } = &self.mode {
            let mut r = Family::new(
                "tma_pmu",
                Kind::Info,
                "Why hardware counters are not available (only while tma_pmu_available is 0).",
            );
            r.push(vec![("reason", reason.clone())], 1.0);
            out.push(r);
        }
        out
    }

    pub(super) fn add_total(
        &mut self,
        family: &'static str,
        scope: &ScopeLabel,
        key: &str,
        v: f64,
    ) -> f64 {
        let s = scope.as_ref().map_or(String::new(), |(_, v)| v.clone());
        let t = self
            .totals
            .entry((family, s, key.to_string()))
            .or_insert(0.0);
        if v.is_finite() && v > 0.0 {
            *t += v;
        }
        *t
    }

    /// Put `parts` of `scope` into `families`: gauges as they are, counters as running
    /// totals (the fleet counters stamped with `at_ms`).
    pub(super) fn push_parts(
        &mut self,
        families: &mut [Family],
        scope: &ScopeLabel,
        parts: Vec<Part>,
        at_ms: i64,
    ) {
        for p in parts {
            let mut labels = p.labels;
            let value = if p.counter {
                let key = total_key(&labels);
                self.add_total(families[p.family].base, scope, &key, p.value)
            } else {
                p.value
            };
            if let Some(s) = scope {
                labels.push(s.clone());
            }
            if matches!(p.family, F_SLOTS | F_CYCLES | F_INSTRUCTIONS) {
                families[p.family].push_at(labels, value, at_ms);
            } else {
                families[p.family].push(labels, value);
            }
        }
    }

    pub(super) fn families(&mut self, iv: &IntervalData<'_>, t0: Instant) -> Vec<Family> {
        let scopes = self.scopes(iv);
        let parts: Vec<(Vec<Part>, f64)> = scopes.iter().map(|s| self.scope_parts(s)).collect();
        self.families_of(iv, scopes, parts, false, t0)
    }

    /// The families of an interval of several trees (the core types of a hybrid part and
    /// their merged view): each tree's series with its `core_type` label, per scope.
    pub(super) fn tree_families(&mut self, t0: Instant) -> Vec<Family> {
        let pending = std::mem::take(&mut self.pending);
        let mut merged: Vec<(ScopeIv, Vec<Part>, f64)> = Vec::new();
        for (k, p) in pending.iter().enumerate() {
            let Some((raw, readings, report)) = p else {
                continue;
            };
            let iv = IntervalData {
                raw: raw.as_ref(),
                readings,
                report: report.as_ref(),
            };
            std::mem::swap(&mut self.mode, &mut self.trees[k]);
            let label = match &self.mode {
                Mode::Tree { info, .. } => info.core_type.map(str::to_string),
                _ => None,
            }
            .unwrap_or_else(|| format!("tree{k}"));
            let scopes = self.scopes(&iv);
            let parts: Vec<(Vec<Part>, f64)> = scopes.iter().map(|s| self.scope_parts(s)).collect();
            std::mem::swap(&mut self.mode, &mut self.trees[k]);
            for (s, (mut p, w)) in scopes.into_iter().zip(parts) {
                for part in &mut p {
                    if !part.labels.iter().any(|(k, _)| *k == "core_type") {
                        part.labels.push(("core_type", label.clone()));
                    }
                }
                match merged.iter_mut().find(|m| m.0.label == s.label) {
                    Some(m) => {
                        m.1.extend(p);
                        m.2 += w;
                    }
                    None => merged.push((s, p, w)),
                }
            }
        }
        // Split per cgroup or CPU: the merged view (no raw counts to split) is left out.
        if merged.iter().any(|m| m.0.label.is_some()) {
            merged.retain(|m| m.0.label.is_some());
        }
        // A core type that counted nothing in this interval (no task ran on it) keeps its
        // counters' series, grown by nothing.
        for (s, p, _) in &mut merged {
            for (_, prev) in self.tree_counters.iter().filter(|(l, _)| *l == s.label) {
                if !p
                    .iter()
                    .any(|x| x.counter && x.family == prev.family && x.labels == prev.labels)
                {
                    p.push(Part {
                        value: 0.0,
                        ..prev.clone()
                    });
                }
            }
        }
        self.tree_counters = merged
            .iter()
            .flat_map(|(s, p, _)| {
                p.iter()
                    .filter(|x| x.counter)
                    .map(|x| (s.label.clone(), x.clone()))
            })
            .collect();
        let empty = Interval {
            start_s: 0.0,
            end_s: 0.0,
            readings: Vec::new(),
            printed: Vec::new(),
        };
        let first = pending.iter().flatten().next().map_or(&empty, |p| &p.1);
        let iv = IntervalData {
            raw: None,
            readings: first,
            report: None,
        };
        let (scopes, parts): (Vec<ScopeIv>, Vec<(Vec<Part>, f64)>) =
            merged.into_iter().map(|(s, p, w)| (s, (p, w))).unzip();
        let out = self.families_of(&iv, scopes, parts, true, t0);
        self.pending = vec![None; pending.len()];
        out
    }

    /// The families of an interval's `scopes` and their `parts`; `multi`: several trees.
    pub(super) fn families_of(
        &mut self,
        iv: &IntervalData<'_>,
        scopes: Vec<ScopeIv>,
        parts: Vec<(Vec<Part>, f64)>,
        multi: bool,
        t0: Instant,
    ) -> Vec<Family> {
        let at_ms = (self.clock)()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut out = self.interval_families(iv, at_ms);
        let hot_pmu = self.hot_followed.is_some();
        let kind = if hot_pmu {
            ScopeKey::Cgroup(0)
        } else {
            scopes.first().map_or(ScopeKey::Whole, |s| s.key)
        };
        let split = !matches!(kind, ScopeKey::Whole);
        if self.anomaly.is_some() && !multi {
            out.push(self.anomalies(&scopes));
        }
        // Series outside the scopes: those above, the evaluation time, the left-out count,
        // and what a scrape adds (one per HTTP status, the scrape time).
        let fixed = count(&out) + 1 + usize::from(split) + crate::http::STATUSES.len() + 1;
        let budget = self.bounds.series_budget;
        // The hot cgroups of the cgroup tree take what the scopes leave (at least their own
        // gauges and the `other` bucket).
        let hot_min = if self.hot.is_some() { 3 } else { 0 };
        let avail = budget.saturating_sub(fixed + hot_min);
        // The cgroup tree's CPU time (read before naming: with a PMU, a followed cgroup
        // that has left the tree is not named, its last counts go to `other`).
        let charged = self.scan_hot();
        let scanned = self.hot.is_some() && !charged.is_empty();
        let chosen = self.choose_named(&scopes, &parts, kind, &charged, avail);
        let weights: Vec<f64> = parts.iter().map(|p| p.1).collect();
        let (fams, shown_names) = self.scope_series(iv, &scopes, parts, &chosen, kind, at_ms);
        // With the cgroup tree, its refresh says how many cgroups are left out.
        if split && !(hot_pmu && self.hot.is_some()) {
            out.push(left_out_family(kind, chosen.n - chosen.keep.min(chosen.n)));
        }
        out.extend(fams);
        self.trim_to_budget(&mut out, budget, hot_min);
        if let (Some(hot), true) = (self.hot.as_mut(), scanned) {
            let room = budget.saturating_sub(count(&out) + 1 + crate::http::STATUSES.len() + 1 + 2);
            let top = self.bounds.cgroup_top.unwrap_or(usize::MAX);
            let naming = if hot_pmu {
                Naming::These(&shown_names)
            } else {
                Naming::Top(top)
            };
            out.extend(hot.families(&charged, naming, room));
        }
        if hot_pmu {
            self.follow_next(&scopes, &weights, &charged, chosen.room_for);
        }
        let mut eval = Family::new(
            "tma_evaluation_duration_seconds",
            Kind::Gauge,
            "Time spent turning the last interval into these series, seconds.",
        );
        eval.push(Vec::new(), t0.elapsed().as_secs_f64());
        out.push(eval);
        out
    }

    /// The state families and those of the interval itself (its length, the count of
    /// intervals, when it was published).
    fn interval_families(&self, iv: &IntervalData<'_>, at_ms: i64) -> Vec<Family> {
        let mut out = self.state_families();
        let mut len = Family::new(
            "tma_interval_seconds",
            Kind::Gauge,
            "Length of the last counted interval, seconds.",
        );
        len.push(
            Vec::new(),
            (iv.readings.end_s - iv.readings.start_s).max(0.0),
        );
        let mut n = Family::new(
            "tma_intervals",
            Kind::Counter,
            "Intervals counted (or replayed).",
        );
        n.push(Vec::new(), self.intervals as f64);
        let mut at = Family::new(
            "tma_last_interval_timestamp_seconds",
            Kind::Gauge,
            "Unix time the last interval was published.",
        );
        at.push(Vec::new(), (at_ms as f64) / 1e3);
        out.extend([len, n, at]);
        out
    }

    /// `tma_anomaly` of an interval's scopes (`--anomaly`).
    fn anomalies(&mut self, scopes: &[ScopeIv]) -> Family {
        let values: Vec<ScopeValues> = scopes
            .iter()
            .filter(|s| !s.rest)
            .filter_map(|s| self.anomaly_values(s))
            .collect();
        let findings = self
            .anomaly
            .as_mut()
            .map_or_else(Vec::new, |d| d.observe(&values));
        self.anomaly_family(scopes, &findings)
    }

    /// The CPU time of the cgroup tree's cgroups (`--cgroup-top` without a cgroup target;
    /// none without it, or when the tree cannot be read: warned once).
    fn scan_hot(&mut self) -> Vec<(String, u64)> {
        let mut charged = Vec::new();
        if let Some(hot) = self.hot.as_mut() {
            match hot.scan() {
                Ok(c) => charged = c,
                Err(e) => {
                    if !self.warned_hot {
                        self.warned_hot = true;
                        self.log.warn("cgroup_tree_unreadable", &[("error", &e)]);
                    }
                }
            }
        }
        charged
    }

    /// Which scopes are named: the busiest first, as many as `--cgroup-top` and the series
    /// budget (`avail` samples) leave room for.
    fn choose_named(
        &self,
        scopes: &[ScopeIv],
        parts: &[(Vec<Part>, f64)],
        kind: ScopeKey,
        charged: &[(String, u64)],
        avail: usize,
    ) -> Chosen {
        let hot_pmu = self.hot_followed.is_some();
        let split = !matches!(kind, ScopeKey::Whole);
        let scanned = self.hot.is_some() && !charged.is_empty();
        let live: std::collections::HashSet<&str> =
            charged.iter().map(|(p, _)| p.as_str()).collect();
        let in_tree = |s: &ScopeIv| {
            s.label
                .as_ref()
                .is_some_and(|(_, l)| live.contains(l.as_str()))
        };
        let nameable = |s: &ScopeIv| !s.rest && (!hot_pmu || !scanned || in_tree(s));
        // The scopes that may be named (never the rest of a `--cgroup-top` counted with a
        // PMU), busiest first; the others after them.
        let mut order: Vec<usize> = (0..scopes.len())
            .filter(|&i| nameable(&scopes[i]))
            .collect();
        let n = order.len();
        order.sort_by(|&a, &b| parts[b].1.total_cmp(&parts[a].1).then(a.cmp(&b)));
        order.extend((0..scopes.len()).filter(|&i| !nameable(&scopes[i])));
        let cap = match kind {
            ScopeKey::Cgroup(_) => self.bounds.cgroup_top.unwrap_or(n).min(n),
            _ => n,
        };
        let biggest = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
        // With a PMU and the cgroup tree, each named cgroup has its CPU time series too.
        let per = usize::from(hot_pmu && self.hot.is_some());
        let mut keep = if split { cap } else { n };
        while split && keep > 0 {
            let need: usize = order[..keep]
                .iter()
                .map(|&i| parts[i].0.len() + per)
                .sum::<usize>()
                + if keep < n || hot_pmu { biggest } else { 0 };
            if need <= avail {
                break;
            }
            keep -= 1;
        }
        // How many cgroups the budget would leave room for (the next choice of a
        // `--cgroup-top` counted with a PMU).
        let room_for = avail.saturating_sub(biggest) / (biggest + per).max(1);
        Chosen {
            order,
            n,
            keep,
            room_for,
        }
    }

    /// The scope families: the series of the named scopes, and `other` for the rest (its
    /// gauges from their summed counts, its counters' growth as below); the names shown.
    fn scope_series(
        &mut self,
        iv: &IntervalData<'_>,
        scopes: &[ScopeIv],
        parts: Vec<(Vec<Part>, f64)>,
        chosen: &Chosen,
        kind: ScopeKey,
        at_ms: i64,
    ) -> (Vec<Family>, std::collections::HashSet<String>) {
        let hot_pmu = self.hot_followed.is_some();
        let split = !matches!(kind, ScopeKey::Whole);
        let Chosen { order, keep, .. } = chosen;
        let keep = *keep;
        let mut fams = scope_families();
        // The growth `other` takes: that of the folded scopes, and that of the scopes named
        // now but not in the last exposition (their series start here, and a series' first
        // sample adds nothing to a rate: the growth would be lost). So, from one exposition
        // to the next, the growth of the series present in both adds up to the growth of
        // the whole. Every scope's own totals go on all the same.
        let mut other_incs: Vec<Part> = Vec::new();
        let mut add_other = |c: &Part| match other_incs
            .iter_mut()
            .find(|o| o.family == c.family && o.labels == c.labels)
        {
            Some(o) => o.value += c.value.max(0.0),
            None => other_incs.push(Part {
                value: c.value.max(0.0),
                ..c.clone()
            }),
        };
        let mut parts: Vec<Option<Vec<Part>>> = parts.into_iter().map(|p| Some(p.0)).collect();
        let mut named = std::collections::HashSet::new();
        for (rank, &i) in order.iter().enumerate() {
            let p = parts[i].take().unwrap_or_default();
            let label = &scopes[i].label;
            let shown = rank < keep;
            let name = label.as_ref().map_or(String::new(), |(_, v)| v.clone());
            let continued = self.named.as_ref().is_none_or(|prev| prev.contains(&name));
            for c in p.iter().filter(|c| c.counter) {
                // With zero growth, a counter seen only in other scopes still has its
                // series in `other`.
                add_other(&Part {
                    value: if split && !(shown && continued) {
                        c.value
                    } else {
                        0.0
                    },
                    ..c.clone()
                });
            }
            if shown {
                named.insert(name);
                self.push_parts(&mut fams, label, p, at_ms);
                continue;
            }
            if scopes[i].rest {
                continue;
            }
            for c in p.into_iter().filter(|c| c.counter) {
                let key = total_key(&c.labels);
                let base = fams[c.family].base;
                self.add_total(base, label, &key, c.value);
            }
        }
        let shown_names = named.clone();
        if split {
            self.named = Some(named);
        }
        if split {
            let label: ScopeLabel = match kind {
                ScopeKey::Cpu(_) => Some(("cpu", "other".into())),
                _ => Some(("cgroup", "other".into())),
            };
            // The gauges of `other` from the summed counts of the folded scopes.
            let folded: Vec<ScopeKey> = order[keep..].iter().map(|&i| scopes[i].key).collect();
            let mut gauges = Vec::new();
            if hot_pmu {
                let rs: Vec<&Interval> =
                    order[keep..].iter().map(|&i| &scopes[i].readings).collect();
                if let Some(r) = plus(&rs) {
                    let report = self.eval(&r);
                    let other = ScopeIv {
                        label: label.clone(),
                        key: ScopeKey::Whole,
                        readings: r,
                        report,
                        rest: false,
                    };
                    gauges = self.scope_parts(&other).0;
                    gauges.retain(|p| !p.counter);
                }
            } else if let (Some(raw), Some(plan), false) = (iv.raw, self.plan(), folded.is_empty())
            {
                let r = part(&|g| folded.iter().any(|k| k.holds(g)), raw, plan);
                let report = self.eval(&r);
                let other = ScopeIv {
                    label: label.clone(),
                    key: ScopeKey::Whole,
                    readings: r,
                    report,
                    rest: false,
                };
                gauges = self.scope_parts(&other).0;
                gauges.retain(|p| !p.counter);
            }
            gauges.extend(other_incs);
            self.push_parts(&mut fams, &label, gauges, at_ms);
        }
        (fams, shown_names)
    }

    /// Within the budget whatever the request: the least needed families are emptied first
    /// (warned once).
    fn trim_to_budget(&mut self, out: &mut [Family], budget: usize, hot_min: usize) {
        // Within the budget whatever the request: the least needed families go first.
        let mut dropped = Vec::new();
        for base in ["tma_event", "tma_node_counted_ratio", "tma_metric"] {
            let used = count(out) + 1 + crate::http::STATUSES.len() + 1 + hot_min;
            if used <= budget {
                break;
            }
            if let Some(f) = out.iter_mut().find(|f| f.base == base && !f.is_empty()) {
                f.samples.clear();
                dropped.push(base);
            }
        }
        if !dropped.is_empty() && !self.warned_budget {
            self.warned_budget = true;
            self.log.warn(
                "series_budget_exceeded",
                &[
                    ("budget", &budget),
                    ("dropped", &dropped.join(",")),
                    (
                        "fix",
                        &"raise --series-budget, or export fewer nodes (-l, --nodes) and \
                          metrics (-m)",
                    ),
                ],
            );
        }
    }

    /// `--cgroup-top` counted with a PMU: choose the cgroups to count next, and forget the
    /// running totals of the cgroups that left the tree.
    fn follow_next(
        &mut self,
        scopes: &[ScopeIv],
        weights: &[f64],
        charged: &[(String, u64)],
        room_for: usize,
    ) {
        let measured: Vec<(String, f64)> = scopes
            .iter()
            .zip(weights)
            .filter(|(s, _)| !s.rest)
            .filter_map(|(s, w)| Some((s.label.as_ref()?.1.clone(), *w)))
            .collect();
        let top = self.bounds.cgroup_top.unwrap_or(usize::MAX).min(room_for);
        let rest: f64 = scopes
            .iter()
            .zip(weights)
            .filter(|(s, _)| s.rest)
            .map(|(_, w)| w)
            .sum();
        self.hot_next = choose_hot(&measured, charged, rest, top);
        // The running totals of cgroups that left the tree go with them.
        let live: std::collections::HashSet<&str> = match &self.hot {
            Some(_) => charged.iter().map(|(p, _)| p.as_str()).collect(),
            None => measured.iter().map(|(p, _)| p.as_str()).collect(),
        };
        self.totals.retain(|(_, scope, _), _| {
            scope.is_empty() || scope == "other" || live.contains(scope.as_str())
        });
        self.hot_followed = None;
    }
}

/// Which scopes an exposition names.
pub(super) struct Chosen {
    /// The scopes, those that may be named first (busiest first), then the others.
    order: Vec<usize>,
    /// How many may be named.
    n: usize,
    /// How many are named (the first `keep` of `order`).
    keep: usize,
    /// How many cgroups the budget would leave room for (the next choice of a
    /// `--cgroup-top` counted with a PMU).
    room_for: usize,
}

/// `tma_cpus_left_out` or `tma_cgroups_left_out`: how many scopes went to `other`.
fn left_out_family(kind: ScopeKey, left_out: usize) -> Family {
    let (base, help) = match kind {
        ScopeKey::Cpu(_) => (
            "tma_cpus_left_out",
            "CPUs counted in cpu=\"other\" in the last interval (the series budget \
             leaves no room for each).",
        ),
        _ => (
            "tma_cgroups_left_out",
            "Cgroups counted in cgroup=\"other\" in the last interval (not among the \
             --cgroup-top busiest, or beyond the series budget).",
        ),
    };
    let mut f = Family::new(base, Kind::Gauge, help);
    f.push(Vec::new(), left_out as f64);
    f
}

/// The `top` cgroups to count next: by their slots (cycles on AMD; task-clock without a
/// tree) in the last interval: measured for the followed cgroups (`measured`), estimated
/// for the others from their CPU time (`charged`, microseconds, from cgroupfs) at the rate
/// of slots per CPU microsecond of all of them together (`rest`: the system's slots less
/// the followed cgroups'), else of the followed ones. The root (its own tasks) and cgroups
/// that used no CPU time are not chosen.
pub(super) fn choose_hot(
    measured: &[(String, f64)],
    charged: &[(String, u64)],
    rest: f64,
    top: usize,
) -> Vec<String> {
    let cpu: std::collections::HashMap<&str, u64> =
        charged.iter().map(|(p, u)| (p.as_str(), *u)).collect();
    let followed = |p: &str| measured.iter().any(|(q, _)| q == p);
    let rate = |w: f64, t: f64| (w > 0.0 && t > 0.0).then(|| w / t);
    let rest_time: u64 = charged
        .iter()
        .filter(|(p, _)| !followed(p))
        .map(|(_, u)| u)
        .sum();
    let (mut w, mut t) = (0.0, 0.0);
    for (p, weight) in measured {
        if let Some(&u) = cpu.get(p.as_str()) {
            w += weight;
            t += u as f64;
        }
    }
    let rate = rate(rest, rest_time as f64).or(rate(w, t));
    let mut scored: Vec<(f64, String)> = Vec::new();
    let mut add = |p: &str, score: f64| {
        if !p.is_empty() && score > 0.0 && !scored.iter().any(|(_, q)| q == p) {
            scored.push((score, p.to_string()));
        }
    };
    match rate {
        Some(rate) => {
            for (p, weight) in measured {
                // Still in the tree (or no tree to tell).
                if charged.is_empty() || cpu.contains_key(p.as_str()) {
                    add(p, *weight);
                }
            }
            for (p, u) in charged {
                if !followed(p) {
                    add(p, *u as f64 * rate);
                }
            }
        }
        // Nothing measured yet to convert by: CPU time alone.
        None => {
            for (p, u) in charged {
                add(p, *u as f64);
            }
            if charged.is_empty() {
                for (p, weight) in measured {
                    add(p, *weight);
                }
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.into_iter().take(top).map(|(_, p)| p).collect()
}
