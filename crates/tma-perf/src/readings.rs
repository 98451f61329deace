//! Counter readings: what every backend (live, software, replay, import) produces and what the
//! formula engine consumes. Multiplex scaling lives here, once.

use serde::{Deserialize, Serialize};
use tma_catalog::Caseless;

/// Whether a counter produced a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadingStatus {
    /// The counter ran for at least part of the time and has a value.
    Counted,
    /// The event exists but was never scheduled on a counter (`<not counted>`).
    NotCounted,
    /// The kernel or PMU does not support the event (`<not supported>`).
    NotSupported,
}

/// One event's reading, for the whole run or for one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// Canonical event id as written in catalog formulas (e.g. `UOPS_RETIRED.MS:c1:e1`,
    /// `TOPDOWN.SLOTS:perf_metrics`), or a software event name (`task-clock`).
    pub event: String,
    /// Raw counter value as read from the kernel; `None` for imported data, which only
    /// carries the already-scaled value.
    pub raw: Option<u64>,
    /// Value scaled for multiplexing (`raw * enabled / running`); `None` unless counted.
    pub value: Option<f64>,
    /// Nanoseconds the event was enabled, when known.
    pub time_enabled_ns: Option<u64>,
    /// Nanoseconds the event was really on a counter, when known.
    pub time_running_ns: Option<u64>,
    /// Share of the enabled time the event was really counted, 0..=1.
    pub counted_share: Option<f64>,
    pub status: ReadingStatus,
    /// Index of the group in the counting plan, when known. For an imported recording that
    /// counts an event more than once (`perf stat -M`): the group this copy was counted in.
    pub group: Option<usize>,
    /// For such a recording: the block of rows perf listed for one metric, which may span
    /// several groups when perf did not group a metric's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
    /// CPU the reading belongs to in a per-CPU / per-core breakdown (`None` = aggregated).
    pub cpu: Option<u32>,
    /// Thread id in a per-thread breakdown (`None` = aggregated).
    pub tid: Option<u32>,
}

impl Reading {
    /// Build a reading from what `read(2)` on a perf fd returns, applying multiplex scaling.
    ///
    /// `running == 0` means the event never got a counter: the status is `NotCounted` and
    /// there is no value (never a silent zero). Otherwise `value = raw * enabled / running`.
    pub fn from_raw(event: impl Into<String>, raw: u64, enabled_ns: u64, running_ns: u64) -> Self {
        let (value, share, status) = if running_ns == 0 {
            (None, Some(0.0), ReadingStatus::NotCounted)
        } else if running_ns >= enabled_ns {
            (Some(raw as f64), Some(1.0), ReadingStatus::Counted)
        } else {
            let share = running_ns as f64 / enabled_ns as f64;
            (
                Some(raw as f64 / share),
                Some(share),
                ReadingStatus::Counted,
            )
        };
        Reading {
            event: event.into(),
            raw: Some(raw),
            value,
            time_enabled_ns: Some(enabled_ns),
            time_running_ns: Some(running_ns),
            counted_share: share,
            status,
            group: None,
            block: None,
            cpu: None,
            tid: None,
        }
    }

    /// Build a reading from an already-scaled value and perf's "counter running" percentage
    /// (as in `perf stat -x,` output); `running_pct` of `None` means 100%.
    pub fn from_scaled(event: impl Into<String>, value: f64, running_pct: Option<f64>) -> Self {
        Reading {
            event: event.into(),
            raw: None,
            value: Some(value),
            time_enabled_ns: None,
            time_running_ns: None,
            counted_share: Some(running_pct.map_or(1.0, |p| (p / 100.0).clamp(0.0, 1.0))),
            status: ReadingStatus::Counted,
            group: None,
            block: None,
            cpu: None,
            tid: None,
        }
    }

    /// A reading with no value (`<not counted>` / `<not supported>`).
    pub fn missing(event: impl Into<String>, status: ReadingStatus) -> Self {
        Reading {
            event: event.into(),
            raw: None,
            value: None,
            time_enabled_ns: None,
            time_running_ns: None,
            counted_share: if status == ReadingStatus::NotCounted {
                Some(0.0)
            } else {
                None
            },
            status,
            group: None,
            block: None,
            cpu: None,
            tid: None,
        }
    }
}

/// Readings for one stretch of time: the whole run, or one `-I` interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Seconds since the start of counting at the beginning of this stretch.
    pub start_s: f64,
    /// Seconds since the start of counting at the end of this stretch.
    pub end_s: f64,
    pub readings: Vec<Reading>,
    /// The metric values perf printed beside the counts of an imported recording, kept to
    /// cross-check tma's own values against them. Empty for live counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub printed: Vec<PrintedMetric>,
}

/// A metric value perf printed beside a count: `# 30.5 %  tma_backend_bound` in its
/// human-readable output, the metric columns of `-x,`, `metric-value` and `metric-unit` of
/// `-j`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrintedMetric {
    /// The metric's name as perf printed it (`tma_backend_bound`, `Bad_Speculation`,
    /// `insn per cycle`), empty when perf printed only a unit (`6.437 K/sec`).
    pub name: String,
    /// The value as printed, in `unit`.
    pub value: f64,
    /// `%` for a percentage, otherwise what perf printed between value and name (`K/sec`,
    /// often nothing: a fraction or a ratio).
    pub unit: String,
    /// Digits perf printed after the decimal point: the value is exact to half a unit of
    /// the last one.
    pub decimals: u8,
    /// The line it was printed on (1-based).
    pub line: usize,
    /// The event spec of the count it was printed beside.
    pub event: String,
    /// Index of that count among the interval's rows as read (before events are resolved).
    pub row: usize,
    /// The group (and block of perf's listing) of that count, where the recording counts
    /// events more than once (see [`Reading::group`]): perf computed the metric from the
    /// copies of that group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
}

impl PrintedMetric {
    /// Half a unit of the last printed digit, in the printed unit.
    pub fn tolerance(&self) -> f64 {
        0.5 * 10f64.powi(-i32::from(self.decimals))
    }

    /// The value as a fraction when it is a percentage or a fraction of the pipeline (perf
    /// 6.0 printed `0.32 Bad_Speculation`), else the value.
    pub fn as_fraction(&self) -> f64 {
        if self.unit == "%" {
            self.value / 100.0
        } else {
            self.value
        }
    }
}

impl Interval {
    /// The aggregated (not per-CPU / per-thread) reading of an event, by canonical id.
    /// An event counted in several groups (`perf stat -M`) gives the copy counted the
    /// longest (the first of equals).
    pub fn get(&self, event: &str) -> Option<&Reading> {
        let mut copies = self
            .readings
            .iter()
            .filter(|r| r.cpu.is_none() && r.tid.is_none() && r.event.eq_ignore_ascii_case(event));
        let first = copies.next()?;
        if first.group.is_none() {
            return Some(first);
        }
        Some(copies.fold(first, longer_counted))
    }

    /// An index of the aggregated readings by event id, for many [`Interval::get`]s of one
    /// interval (a tree's evaluation reads every event of its formulas). An interval of a
    /// few readings is searched in place (cheaper than hashing them).
    pub fn index(&self) -> ReadingIndex<'_> {
        if self.readings.len() <= SCAN_AT_MOST {
            return ReadingIndex::Scan(self);
        }
        // (whether the first copy was counted in a group, the copy `get` gives so far)
        let mut found: std::collections::HashMap<Caseless<'_>, (bool, &Reading)> =
            std::collections::HashMap::with_capacity(self.readings.len());
        for r in self
            .readings
            .iter()
            .filter(|r| r.cpu.is_none() && r.tid.is_none())
        {
            found
                .entry(Caseless(&r.event))
                .and_modify(|(grouped, best)| {
                    // As `get`: the first copy, unless it was counted in a group; then the
                    // copy counted the longest, the first of equals.
                    if *grouped {
                        *best = longer_counted(best, r);
                    }
                })
                .or_insert((r.group.is_some(), r));
        }
        ReadingIndex::Hashed(found)
    }
}

/// Intervals of up to this many readings are searched in place by [`ReadingIndex`].
const SCAN_AT_MOST: usize = 24;

/// Of two copies of one event, the one counted longer (`a` on a tie).
fn longer_counted<'r>(a: &'r Reading, b: &'r Reading) -> &'r Reading {
    let share = |r: &Reading| r.counted_share.unwrap_or(0.0);
    if share(b) > share(a) {
        b
    } else {
        a
    }
}

/// [`Interval::index`]: the aggregated reading of each event, found as [`Interval::get`]
/// finds it, in constant time.
pub enum ReadingIndex<'a> {
    /// A short interval, searched in place.
    Scan(&'a Interval),
    /// Each event's reading (after whether its first copy was counted in a group).
    Hashed(std::collections::HashMap<Caseless<'a>, (bool, &'a Reading)>),
}

impl<'a> ReadingIndex<'a> {
    /// The reading [`Interval::get`] gives for `event`.
    pub fn get(&self, event: &str) -> Option<&'a Reading> {
        match self {
            ReadingIndex::Scan(iv) => iv.get(event),
            ReadingIndex::Hashed(by_event) => by_event.get(&Caseless(event)).map(|&(_, r)| r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_by_running_time() {
        let r = Reading::from_raw("X", 1000, 2_000, 500);
        assert_eq!(r.value, Some(4000.0));
        assert_eq!(r.counted_share, Some(0.25));
        assert_eq!(r.status, ReadingStatus::Counted);
    }

    #[test]
    fn never_scheduled_is_not_zero() {
        let r = Reading::from_raw("X", 0, 2_000, 0);
        assert_eq!(r.value, None);
        assert_eq!(r.status, ReadingStatus::NotCounted);
    }

    #[test]
    fn full_running_is_unscaled() {
        let r = Reading::from_raw("X", 7, 10, 10);
        assert_eq!(r.value, Some(7.0));
        assert_eq!(r.counted_share, Some(1.0));
    }

    #[test]
    fn index_finds_what_get_finds() {
        let r = |event: &str, share: f64, group: Option<usize>| {
            let mut r = Reading::from_scaled(event, share * 100.0, Some(share * 100.0));
            r.group = group;
            r
        };
        let mut per_cpu = r("CYCLES", 0.9, None);
        per_cpu.cpu = Some(1);
        let mut per_thread = r("Ops", 1.0, None);
        per_thread.tid = Some(7);
        let iv = Interval {
            start_s: 0.0,
            end_s: 1.0,
            readings: vec![
                per_cpu,
                r("cycles", 0.5, None),
                r("CYCLES", 0.8, Some(1)),
                r("ops", 0.25, Some(0)),
                r("OPS", 0.75, None),
                r("Ops", 0.5, Some(2)),
                r("ops", 0.75, Some(3)),
                per_thread,
                r("stalls", 0.0, Some(0)),
                r("Stalls", 0.0, Some(1)),
                r("é.x", 0.3, None),
            ],
            printed: Vec::new(),
        };
        let mut long = iv.clone();
        long.readings
            .extend((0..SCAN_AT_MOST).map(|i| r(&format!("filler{i}"), 1.0, None)));
        let names = [
            "cycles", "CYCLES", "ops", "Ops", "stalls", "STALLS", "é.x", "É.X", "none",
        ];
        for iv in [&iv, &long] {
            let index = iv.index();
            for e in names {
                let (a, b) = (iv.get(e), index.get(e));
                assert_eq!(
                    a.map(|r| r as *const Reading),
                    b.map(|r| r as *const Reading),
                    "{e}"
                );
            }
        }
        assert!(matches!(long.index(), ReadingIndex::Hashed(_)));
        let index = long.index();
        // The first copy ungrouped wins; grouped, the longest counted (the first of equals).
        assert_eq!(index.get("Cycles").and_then(|r| r.value), Some(50.0));
        assert_eq!(index.get("ops").and_then(|r| r.value), Some(75.0));
        assert!(index.get("ops").is_some_and(|r| r.group.is_none()));
        assert_eq!(index.get("stalls").and_then(|r| r.group), Some(0));
    }

    #[test]
    fn scaled_import_share() {
        let r = Reading::from_scaled("X", 10.0, Some(50.0));
        assert_eq!(r.counted_share, Some(0.5));
    }
}
