//! One interval's readings as the values the formulas read ([`IntervalValues`]): each event
//! from the group that counted a formula's events together, and perf's generic hardware
//! events for the model's ([`Aliases`]).

use tma_catalog::Model;
use tma_perf::Interval;

/// Sets of copies are numbered in one space for [`tma_metrics::Values::group_for`]: blocks
/// of perf's listing below this, groups from it up.
const GROUPS: usize = 1 << 20;

/// Which set `set` names for reading `r`: its group or its block.
fn set_of(r: &tma_perf::Reading, set: usize) -> Option<usize> {
    if set >= GROUPS {
        r.group.map(|g| g + GROUPS)
    } else {
        r.block
    }
}

/// [`tma_metrics::Values`] over one interval's aggregated readings. An event perf counted in
/// several groups (`perf stat -M`) is read, for each formula, from the group that counted
/// all the formula's events together, as perf computes each metric; see its
/// [`group_for`](tma_metrics::Values::group_for).
pub(crate) struct IntervalValues<'a> {
    iv: &'a Interval,
    /// `iv`'s readings by event: a formula reads each of its events through it.
    index: tma_perf::ReadingIndex<'a>,
    grouped: bool,
    /// The model's events that perf's generic ones name (see [`Aliases`]).
    aliases: &'a Aliases,
}

/// The model's events perf's generic hardware events stand for (`cycles` for
/// `CPU_CLK_UNHALTED.THREAD`): (generic name, canonical id). A recording of `perf stat -M`
/// with perf's older metrics counts `cycles` in one metric's group and the named event in
/// another's; the import keeps the generic name, and a formula reads it for the named event
/// in a group that holds no copy under the name.
#[derive(Debug, Default)]
pub(crate) struct Aliases(Vec<(&'static str, String)>);

impl Aliases {
    pub(crate) fn of(model: &Model) -> Aliases {
        let mut v = Vec::new();
        for &g in tma_perfstat::GENERIC_HARDWARE {
            for id in model.resolve_perf_event_all(g).unwrap_or_default() {
                v.push((g, id));
            }
        }
        Aliases(v)
    }

    /// Whether reading `event` is a generic alias of `id`.
    fn stands_for(&self, event: &str, id: &str) -> bool {
        self.0
            .iter()
            .any(|(g, c)| event.eq_ignore_ascii_case(g) && c.eq_ignore_ascii_case(id))
    }

    /// The id `event` counts: its alias's canonical id, or itself.
    fn canonical<'e>(&'e self, event: &'e str) -> &'e str {
        self.0
            .iter()
            .find(|(g, _)| event.eq_ignore_ascii_case(g))
            .map_or(event, |(_, c)| c.as_str())
    }
}

impl<'a> IntervalValues<'a> {
    pub(crate) fn new(iv: &'a Interval, aliases: &'a Aliases) -> Self {
        // Only imported recordings that count an event more than once have blocks.
        let grouped = iv.readings.iter().any(|r| r.block.is_some()) && {
            let mut seen = std::collections::HashSet::new();
            iv.readings
                .iter()
                .filter(|r| r.cpu.is_none() && r.tid.is_none())
                .any(|r| !seen.insert(aliases.canonical(&r.event).to_ascii_lowercase()))
        };
        IntervalValues {
            iv,
            index: iv.index(),
            grouped,
            aliases,
        }
    }

    /// The aggregated copies of `id` (one, or one per group perf counted it in), its
    /// generic aliases' copies among them.
    fn aggregated<'s>(&'s self, id: &'s str) -> impl Iterator<Item = &'a tma_perf::Reading> + 's {
        let iv = self.iv;
        iv.readings.iter().filter(move |r| {
            r.cpu.is_none()
                && r.tid.is_none()
                && (r.event.eq_ignore_ascii_case(id) || self.aliases.stands_for(&r.event, id))
        })
    }

    /// The copy of `id` in `set`: a group ([`GROUPS`] and up) or a block of perf's listing;
    /// one under its own name first, else a generic alias's.
    fn copy_in(&self, id: &str, set: usize) -> Option<&'a tma_perf::Reading> {
        let mut alias = None;
        for r in self.aggregated(id).filter(|r| set_of(r, set) == Some(set)) {
            if r.event.eq_ignore_ascii_case(id) {
                return Some(r);
            }
            alias.get_or_insert(r);
        }
        alias
    }

    /// Events of `events` counted more than once in the interval.
    pub(crate) fn repeated<'e>(&self, events: &[&'e str]) -> Vec<&'e str> {
        events
            .iter()
            .copied()
            .filter(|e| self.aggregated(e).nth(1).is_some())
            .collect()
    }
}

impl tma_metrics::Values for IntervalValues<'_> {
    fn event(&self, id: &str) -> Option<f64> {
        self.index.get(id).and_then(|r| r.value)
    }
    fn counted_share(&self, id: &str) -> Option<f64> {
        self.index.get(id).and_then(|r| r.counted_share)
    }
    fn grouped(&self) -> bool {
        self.grouped
    }
    /// When one of `events` was counted more than once: the group perf printed `item`'s
    /// value beside, where it holds a copy of each repeated event (perf computed the metric
    /// from that group); else the group that counted every event of `events` the interval
    /// holds, of several the one counted the longest (the first on a tie). `None` when no
    /// event is repeated, or no group holds them all (the node then mixes groups: the
    /// default copies, those counted the longest, are read).
    fn group_for(&self, item: &str, events: &[&str]) -> Option<usize> {
        let repeated = self.repeated(events);
        if repeated.is_empty() {
            return None;
        }
        let printed = self.iv.printed.iter().filter_map(|m| {
            let set = m.group.map(|g| g + GROUPS)?;
            crate::crosscheck::same_node(&m.name, item).then_some(set)
        });
        for set in printed {
            if repeated.iter().all(|e| self.copy_in(e, set).is_some()) {
                return Some(set);
            }
        }
        let present: Vec<&str> = events
            .iter()
            .copied()
            .filter(|e| self.aggregated(e).next().is_some())
            .collect();
        let first = present.first()?;
        // A group that counted them all together; else a block perf listed them in (one
        // metric's events, which perf could not count as one group).
        for sets in [true, false] {
            let mut best: Option<(usize, f64)> = None;
            for r in self.aggregated(first) {
                let set = if sets {
                    r.group.map(|g| g + GROUPS)
                } else {
                    r.block
                };
                let Some(set) = set else { continue };
                if present.iter().all(|e| self.copy_in(e, set).is_some()) {
                    let share = r.counted_share.unwrap_or(0.0);
                    if best.is_none_or(|(_, s)| share > s) {
                        best = Some((set, share));
                    }
                }
            }
            if let Some((set, _)) = best {
                return Some(set);
            }
        }
        None
    }
    fn event_in(&self, id: &str, group: usize) -> Option<f64> {
        match self.copy_in(id, group) {
            Some(r) => r.value,
            None => self.event(id),
        }
    }
    fn counted_share_in(&self, id: &str, group: usize) -> Option<f64> {
        match self.copy_in(id, group) {
            Some(r) => r.counted_share,
            None => self.counted_share(id),
        }
    }
}
