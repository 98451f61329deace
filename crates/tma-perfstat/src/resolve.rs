//! Second import step: map perf event specs onto a CPU model's canonical event ids, and sum
//! per-CPU / per-thread rows into aggregated readings.

use std::collections::{HashMap, HashSet};

use super::ResolveError;
use tma_perf::readings::{Interval, Reading, ReadingStatus};

/// Events perf counts on any machine that no CPU table lists: software and tool events,
/// stalled-cycle and MSR events, and (in [`GENERIC_HARDWARE`]) generic hardware events. They
/// are kept under their perf name when the model does not know them.
const GENERIC_EVENTS: &[&str] = &[
    "task-clock",
    "cpu-clock",
    "page-faults",
    "faults",
    "minor-faults",
    "major-faults",
    "context-switches",
    "cs",
    "cpu-migrations",
    "migrations",
    "alignment-faults",
    "emulation-faults",
    "duration_time",
    "user_time",
    "system_time",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "msr/tsc/",
    "msr/aperf/",
    "msr/mperf/",
];

/// The generic events that name a hardware counter's event, which a CPU's table may also
/// name (`cycles` is `CPU_CLK_UNHALTED.THREAD` on Intel cores).
pub const GENERIC_HARDWARE: &[&str] = &[
    "cycles",
    "cpu-cycles",
    "instructions",
    "branches",
    "branch-instructions",
    "branch-misses",
    "cache-references",
    "cache-misses",
    "ref-cycles",
    "bus-cycles",
];

/// Whether `spec` is a generic hardware event (see [`GENERIC_HARDWARE`]), with or without
/// modifiers.
pub(crate) fn is_generic_hardware(spec: &str) -> bool {
    let base = spec.split(':').next().unwrap_or(spec);
    GENERIC_HARDWARE
        .iter()
        .any(|g| g.eq_ignore_ascii_case(base))
}

/// Whether `spec` is a generic perf event (with or without `:u`/`:k` style modifiers).
pub fn is_generic_event(spec: &str) -> bool {
    let base = spec.split(':').next().unwrap_or(spec);
    GENERIC_EVENTS.iter().any(|g| g.eq_ignore_ascii_case(base)) || is_generic_hardware(spec)
}

/// perf's event modifiers that do not change what is counted: precision (`p`, `pp`, `ppp`,
/// `P`), idle exclusion (`I`), sample read (`S`), pinned (`D`), weak group (`W`), `b`.
const NEUTRAL_MODIFIERS: &str = "pPISDWb";
/// perf's modifiers that restrict counting to part of the work: user (`u`), kernel (`k`),
/// hypervisor (`h`), guest (`G`), host (`H`).
const SCOPE_MODIFIERS: &str = "ukhGH";

/// What part of the work a recording's counts cover, from perf's event modifiers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scope {
    /// The modifier letters, in perf's order of `u`, `k`, `h`, `G`, `H` (empty: everything).
    pub letters: String,
}

impl Scope {
    /// `true` when the counts cover all the work (no scope modifier).
    pub fn is_all(&self) -> bool {
        self.letters.is_empty()
    }

    /// `user space only`, `the kernel only`, ... for notes.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for c in self.letters.chars() {
            parts.push(match c {
                'u' => "user space",
                'k' => "the kernel",
                'h' => "the hypervisor",
                'G' => "guests",
                'H' => "the host",
                _ => continue,
            });
        }
        if parts.is_empty() {
            "all of the work".to_string()
        } else {
            format!("{} only", parts.join(" and "))
        }
    }
}

/// Split perf's modifiers off an event spec: `TOPDOWN.SLOTS:u`, `topdown-retiring:u`,
/// `cpu/INT_MISC.UOP_DROPPING/u`, `cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/u`,
/// `cycles:ppp`, `cpu/cycles/:k`. Returns the spec without them and the scope letters.
/// Modifiers of the event tables (`:c1`, `:e1`, `:SUP`) are not perf's and stay.
pub fn split_modifiers(spec: &str) -> (&str, Scope) {
    let is_mods = |m: &str| {
        !m.is_empty()
            && m.chars()
                .all(|c| NEUTRAL_MODIFIERS.contains(c) || SCOPE_MODIFIERS.contains(c))
    };
    let scope_of = |m: &str| Scope {
        letters: SCOPE_MODIFIERS.chars().filter(|&c| m.contains(c)).collect(),
    };
    let t = spec.trim();
    // `pmu/terms/mods` or `pmu/terms/:mods`
    if let Some(close) = t.rfind('/') {
        if t[..close].contains('/') {
            let mods = t[close + 1..].trim_start_matches(':');
            if mods.is_empty() {
                return (t, Scope::default());
            }
            if is_mods(mods) {
                return (&t[..=close], scope_of(mods));
            }
            return (t, Scope::default());
        }
    }
    if let Some((base, mods)) = t.rsplit_once(':') {
        if !base.is_empty() && is_mods(mods) {
            return (base, scope_of(mods));
        }
    }
    (t, Scope::default())
}

/// Tool events perf counts in software for any scope: they take no modifier.
fn scopeless(spec: &str) -> bool {
    matches!(spec, "duration_time" | "user_time" | "system_time") || spec.starts_with("msr/")
}

/// The result of [`resolve`].
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveOutcome {
    /// Readings renamed to canonical ids (generic events keep their perf name).
    pub intervals: Vec<Interval>,
    /// perf spec -> canonical id, for every spec the model knows.
    pub mapping: Vec<(String, String)>,
    /// Generic events kept under their perf name.
    pub generic: Vec<String>,
    /// Specs dropped ([`Resolver::tolerant`]): unknown, or a second spec of one event.
    pub ignored: Vec<String>,
}

/// Renames readings from perf specs to a model's canonical event ids, one interval at a time.
/// Each spec is looked up once and remembered.
///
/// `resolve_spec` is normally `Model::resolve_perf_event_all` (empty = unknown). When several
/// ids share the spec's encoding (`TOPDOWN.SLOTS` and `TOPDOWN.SLOTS:perf_metrics`), the
/// reading is provided under each of them. Specs the model does not know and that are not
/// generic perf events are an error, or, for a [`Resolver::tolerant`] one, dropped and
/// listed by [`Resolver::ignored`]. Either way `guess_other_cpu(unknown, every spec seen)`
/// may name a model the recording clearly belongs to: that is always an error, which says
/// so. Two specs resolving to the same canonical id are an error too (tolerant: the second
/// is ignored).
pub struct Resolver<F, G> {
    model_key: &'static str,
    resolve_spec: F,
    guess_other_cpu: G,
    tolerant: bool,
    map: HashMap<String, Vec<String>>,
    /// Specs in order of first appearance.
    order: Vec<String>,
    /// canonical id -> the spec that resolved to it.
    by_canonical: HashMap<String, String>,
    /// Specs dropped by a tolerant resolver, in order of first appearance.
    ignored: Vec<String>,
    ignored_set: HashSet<String>,
    /// The scope every event of the recording was counted in, decided by the first specs
    /// learnt: its modifiers are read off each spec before the lookup. `None` before that,
    /// or when the events differ in scope (their modifiers then stay in the specs).
    scope: Option<Scope>,
    decided: bool,
    /// Specs whose scope differs from the others' and was read off to find the event.
    rescoped: Vec<String>,
    /// The interval being resolved has its groups told (its readings carry one): a generic
    /// alias of a named event (`cycles` beside `CPU_CLK_UNHALTED.THREAD`) is then another
    /// copy of that event, counted in its own group, as perf's metrics read it.
    grouped: bool,
}

impl<F, G> Resolver<F, G>
where
    F: FnMut(&str) -> Vec<String>,
    G: FnMut(&[String], &[String]) -> Option<&'static str>,
{
    pub fn new(model_key: &'static str, resolve_spec: F, guess_other_cpu: G) -> Self {
        Resolver {
            model_key,
            resolve_spec,
            guess_other_cpu,
            tolerant: false,
            map: HashMap::new(),
            order: Vec::new(),
            by_canonical: HashMap::new(),
            ignored: Vec::new(),
            ignored_set: HashSet::new(),
            scope: None,
            decided: false,
            rescoped: Vec::new(),
            grouped: false,
        }
    }

    /// The part of the work the counts cover, when all events were counted in one scope
    /// (`TOPDOWN.SLOTS:u`, `topdown-retiring:u`, ... : user space only). `None` before any
    /// spec was learnt, or when the events' scopes differ.
    pub fn scope(&self) -> Option<&Scope> {
        self.scope.as_ref()
    }

    /// Specs counted in a scope other events of the recording were not (`cycles:k` beside
    /// `instructions`) whose event the tables name only without it: they were read as that
    /// event, so the tree mixes scopes there.
    pub fn rescoped(&self) -> &[String] {
        &self.rescoped
    }

    /// The spec to look up: without perf's modifiers when they are the recording's common
    /// scope (or only precision and the like), as written otherwise.
    fn lookup_form<'s>(&self, spec: &'s str) -> std::borrow::Cow<'s, str> {
        let (base, scope) = split_modifiers(spec);
        if base.len() == spec.trim().len() {
            return std::borrow::Cow::Borrowed(spec);
        }
        let common = self.scope.as_ref().is_some_and(|s| *s == scope);
        if scope.is_all() || common {
            std::borrow::Cow::Borrowed(base)
        } else {
            // A scope of its own: keep the modifiers (`cycles:k` beside `cycles`).
            let mods = &spec.trim()[base.len()..];
            let neutral: String = mods
                .chars()
                .filter(|c| !NEUTRAL_MODIFIERS.contains(*c))
                .collect();
            if neutral.trim_start_matches(':').is_empty() {
                std::borrow::Cow::Borrowed(base)
            } else {
                std::borrow::Cow::Owned(format!("{base}{neutral}"))
            }
        }
    }

    /// Drop the readings of specs the model does not know (uncore events, core events of
    /// other tables) and of a second spec of one event instead of refusing them, unless the
    /// unknown ones clearly belong to another CPU.
    pub fn tolerant(mut self) -> Self {
        self.tolerant = true;
        self
    }

    /// Look up the specs not seen before; unknown specs among them are reported together.
    pub fn learn<'s>(
        &mut self,
        specs: impl IntoIterator<Item = &'s str>,
    ) -> Result<(), ResolveError> {
        let specs: Vec<&str> = specs.into_iter().collect();
        if !self.decided {
            // The first interval lists every event perf counted.
            self.decided = true;
            let mut scopes = specs
                .iter()
                .filter(|s| !scopeless(s))
                .map(|s| split_modifiers(s).1);
            if let Some(first) = scopes.next() {
                if scopes.all(|s| s == first) {
                    self.scope = Some(first);
                }
            }
        }
        let mut unknown: Vec<String> = Vec::new();
        for spec in specs {
            if self.map.contains_key(spec) || self.ignored_set.contains(spec) {
                continue;
            }
            let lookup = self.lookup_form(spec);
            let mut ids = (self.resolve_spec)(&lookup);
            let base = split_modifiers(spec).0;
            if ids.is_empty() && lookup != base {
                // A scope of its own that the tables cannot express (`ls_not_halted_cyc:k`
                // beside events of all the work): read as the event, and said.
                ids = (self.resolve_spec)(base);
                if !ids.is_empty() {
                    self.rescoped.push(spec.to_string());
                }
            }
            if ids.is_empty() && !is_generic_event(spec) {
                if !unknown.iter().any(|u| u == spec) {
                    unknown.push(spec.to_string());
                }
                continue;
            }
            let clash = ids
                .iter()
                .find_map(|c| self.by_canonical.get(c).map(|f| (c.clone(), f.clone())));
            if let Some((_, first)) = clash.as_ref() {
                if self.grouped && is_generic_hardware(first) != is_generic_hardware(spec) {
                    // A generic alias beside the named event, each in groups of its own: the
                    // alias keeps its perf name (the evaluator reads it for the named event
                    // only in a group without that event, as perf's older metrics did), the
                    // named spec stands for the event.
                    if is_generic_hardware(spec) {
                        self.map.insert(spec.to_string(), Vec::new());
                        self.order.push(spec.to_string());
                        continue;
                    }
                    self.map.insert(first.clone(), Vec::new());
                    self.by_canonical.retain(|_, s| s != first);
                }
            }
            let clash = ids
                .iter()
                .find_map(|c| self.by_canonical.get(c).map(|f| (c.clone(), f.clone())));
            if let Some((c, first)) = clash {
                if self.tolerant && is_generic_event(&first) && !is_generic_event(spec) {
                    // perf's metrics read the vendor-named event (counted in their groups),
                    // not the generic alias perf prints by default (`cycles`): the named one
                    // is read, the alias dropped.
                    self.map.remove(&first);
                    self.order.retain(|s| *s != first);
                    self.by_canonical.retain(|_, s| *s != first);
                    self.ignored_set.insert(first.clone());
                    self.ignored.push(first);
                } else if self.tolerant {
                    // The first spec's reading is used.
                    self.ignored_set.insert(spec.to_string());
                    self.ignored.push(spec.to_string());
                    continue;
                } else {
                    return Err(ResolveError::SameEvent {
                        model: self.model_key,
                        first,
                        second: spec.to_string(),
                        canonical: c,
                    });
                }
            }
            for c in &ids {
                self.by_canonical.insert(c.clone(), spec.to_string());
            }
            self.map.insert(spec.to_string(), ids);
            self.order.push(spec.to_string());
        }
        if unknown.is_empty() {
            return Ok(());
        }
        let seen: Vec<String> = self
            .order
            .iter()
            .chain(&self.ignored)
            .chain(&unknown)
            .cloned()
            .collect();
        let other_cpu = (self.guess_other_cpu)(&unknown, &seen);
        if self.tolerant && other_cpu.is_none() {
            for u in unknown {
                self.ignored_set.insert(u.clone());
                self.ignored.push(u);
            }
            return Ok(());
        }
        Err(ResolveError::UnknownEvents {
            model: self.model_key,
            other_cpu,
            events: unknown,
        })
    }

    /// Rename the readings of one interval.
    pub fn resolve(&mut self, iv: Interval) -> Result<Interval, ResolveError> {
        self.grouped = iv.readings.iter().any(|r| r.group.is_some());
        self.learn(iv.readings.iter().map(|r| r.event.as_str()))?;
        Ok(self.rename(iv))
    }

    /// Rename readings whose specs have all been learnt.
    fn rename(&self, mut iv: Interval) -> Interval {
        if self.map.values().all(|ids| ids.len() <= 1) {
            // No spec stands for several ids (nearly always): rename in place, without a
            // second vector of readings per interval.
            iv.readings.retain_mut(
                |r| match self.map.get(&r.event).and_then(|ids| ids.first()) {
                    // Ignored (tolerant): dropped.
                    None if !self.map.contains_key(&r.event) => false,
                    None => true,
                    Some(id) => {
                        if r.event != *id {
                            r.event.clear();
                            r.event.push_str(id);
                        }
                        true
                    }
                },
            );
            return iv;
        }
        let mut readings = Vec::with_capacity(iv.readings.len());
        for r in iv.readings {
            match self.map.get(&r.event).map(Vec::as_slice) {
                // Ignored (tolerant): dropped.
                None => {}
                Some([]) => readings.push(r),
                Some([id]) => {
                    let mut r = r;
                    if r.event != *id {
                        // Reuse the spec's allocation for the id.
                        r.event.clear();
                        r.event.push_str(id);
                    }
                    readings.push(r);
                }
                Some(ids) => {
                    for id in ids {
                        let mut c = r.clone();
                        c.event = id.clone();
                        readings.push(c);
                    }
                }
            }
        }
        Interval {
            start_s: iv.start_s,
            end_s: iv.end_s,
            readings,
            printed: iv.printed,
        }
    }

    /// perf spec -> canonical id, for every spec the model knows, in order of appearance.
    pub fn mapping(&self) -> Vec<(String, String)> {
        self.order
            .iter()
            .filter_map(|s| self.map[s].first().map(|c| (s.clone(), c.clone())))
            .collect()
    }

    /// Specs dropped by a tolerant resolver (unknown to the model, or a second spec of one
    /// event), in order of first appearance.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// Generic events kept under their perf name.
    pub fn generic(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|s| self.map[*s].is_empty())
            .cloned()
            .collect()
    }
}

/// [`Resolver`] (strict, or [`Resolver::tolerant`] when `tolerant`) over a whole recording
/// held in memory: every spec of every interval is checked before any reading is renamed.
pub fn resolve(
    intervals: &[Interval],
    model_key: &'static str,
    tolerant: bool,
    resolve_spec: impl FnMut(&str) -> Vec<String>,
    guess_other_cpu: impl FnMut(&[String], &[String]) -> Option<&'static str>,
) -> Result<ResolveOutcome, ResolveError> {
    let mut r = Resolver::new(model_key, resolve_spec, guess_other_cpu);
    if tolerant {
        r = r.tolerant();
    }
    r.learn(
        intervals
            .iter()
            .flat_map(|iv| iv.readings.iter().map(|x| x.event.as_str())),
    )?;
    Ok(ResolveOutcome {
        intervals: intervals.iter().map(|iv| r.rename(iv.clone())).collect(),
        mapping: r.mapping(),
        generic: r.generic(),
        ignored: r.ignored,
    })
}

/// Add an aggregated reading for every event that only has per-CPU / per-thread readings in
/// an interval: values are summed; the counted share is the mean share over the rows (a
/// row that was not counted contributes 0); the event is missing when no row was counted.
pub fn aggregate(iv: &Interval) -> Interval {
    let mut out = iv.clone();
    // An event counted in several groups (perf stat -M) is summed per group.
    type Key<'a> = (&'a str, Option<usize>, Option<usize>);
    let mut order: Vec<Key> = Vec::new();
    let mut groups: HashMap<Key, Vec<&Reading>> = HashMap::new();
    for r in &iv.readings {
        if r.cpu.is_some() || r.tid.is_some() {
            let e = groups
                .entry((r.event.as_str(), r.group, r.block))
                .or_default();
            if e.is_empty() {
                order.push((r.event.as_str(), r.group, r.block));
            }
            e.push(r);
        }
    }
    for key in order {
        let (ev, group, block) = key;
        if iv
            .readings
            .iter()
            .any(|r| r.cpu.is_none() && r.tid.is_none() && r.group == group && r.event == ev)
        {
            continue;
        }
        let rows = &groups[&key];
        let counted: Vec<&&Reading> = rows.iter().filter(|r| r.value.is_some()).collect();
        let reading = if counted.is_empty() {
            let status = if rows.iter().all(|r| r.status == ReadingStatus::NotSupported) {
                ReadingStatus::NotSupported
            } else {
                ReadingStatus::NotCounted
            };
            Reading::missing(ev, status)
        } else {
            let sum: f64 = counted.iter().filter_map(|r| r.value).sum();
            let share: f64 = rows
                .iter()
                .map(|r| r.counted_share.unwrap_or(0.0))
                .sum::<f64>()
                / rows.len() as f64;
            let mut r = Reading::from_scaled(ev, sum, Some(share * 100.0));
            // The copies' running times add up; a sum past u64 (a corrupt file, found by
            // fuzzing) is unknown, not a panic.
            r.time_running_ns = counted
                .iter()
                .try_fold(0u64, |sum, r| sum.checked_add(r.time_running_ns?));
            r
        };
        out.readings.push(Reading {
            group,
            block,
            ..reading
        });
    }
    out
}

#[cfg(test)]
mod arm_tests {
    use super::*;

    /// perf's spellings of Arm core events, with a common `:u`/`/u` scope, resolve through the
    /// Neoverse table to its event ids, and the scope is read off every one of them.
    #[test]
    fn arm_spellings_with_a_common_scope() {
        let v2 = tma_catalog::by_name("neoverse-v2").unwrap();
        let mut r = Resolver::new(
            v2.key,
            |s: &str| v2.resolve_perf_event_all(s).unwrap_or_default(),
            |_: &[String], _: &[String]| None,
        );
        let specs = [
            "armv8_pmuv3_0/stall_slot_frontend/u",
            "r3d:u",
            "r0x003f:u",
            "armv9_neoverse_v2/event=0x11/u",
            "OP_SPEC:u",
            "instructions:u",
        ];
        r.learn(specs).unwrap();
        assert_eq!(r.scope().map(|s| s.letters.as_str()), Some("u"));
        let ids: Vec<String> = r.mapping().into_iter().map(|(_, id)| id).collect();
        assert_eq!(
            ids,
            [
                "STALL_SLOT_FRONTEND",
                "STALL_SLOT_BACKEND",
                "STALL_SLOT",
                "CPU_CYCLES",
                "OP_SPEC",
                "INST_RETIRED"
            ]
        );
        assert!(r.rescoped().is_empty() && r.ignored().is_empty());
        // An x86 spelling is unknown to the Arm table.
        let mut r = Resolver::new(
            v2.key,
            |s: &str| v2.resolve_perf_event_all(s).unwrap_or_default(),
            |_: &[String], _: &[String]| None,
        );
        assert!(r.learn(["cpu/event=0x3c,umask=0x0/"]).is_err());
    }
}
