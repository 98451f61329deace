//! The one interleaver of a hybrid part's trees. Its intervals come per core type, counted
//! live or read by an import's thread per type; it merges each interval's trees and hands
//! them on: with intervals, every tree of an interval before the next interval
//! ([`IntervalSink::start_trees`], `tree_interval`, `finish_trees`; plain steps where there
//! is one tree only); a whole run, the trees one after the other as plain steps at its end.

use tma_metrics::Bottleneck;
use tma_perf::backend::RawInterval;
use tma_perf::Interval;

use super::merge::merge_interval;
use super::tables::CoreTable;
use crate::eval::IntervalReport;
use crate::sink::{Finish, IntervalData, IntervalSink, Start};
use crate::StatError;

/// One interval of one core type's tree.
pub(crate) struct TypeInterval {
    /// The type's raw readings (counted live; `None` for a recording).
    pub raw: Option<RawInterval>,
    pub readings: Interval,
    pub report: IntervalReport,
    /// The type's cycles in the interval, which weigh its tree in the merged view (`None`
    /// where not recorded).
    pub cycles: Option<f64>,
}

/// Hands a hybrid part's trees on to a sink: each core type's (in the order of its
/// tables), then the merged view's.
pub(crate) struct Interleaver<'a> {
    tables: &'a [CoreTable],
    /// Every tree's start: the core types', then, from the first interval, the merged view's.
    starts: Vec<Start<'a>>,
    /// The merged view's start, until the first interval.
    merged: Option<Start<'a>>,
    /// Each interval as it comes; else a whole run, handed on at the end.
    interval_mode: bool,
    started: bool,
    /// A whole run: each tree's last interval.
    whole: Vec<Option<(Interval, IntervalReport)>>,
    /// The last interval's bottleneck: the merged view's, else the first tree's.
    last: Option<Bottleneck>,
}

impl<'a> Interleaver<'a> {
    /// `starts`: each core type's tree; `merged`: the merged view's, where there is one.
    pub fn new(
        tables: &'a [CoreTable],
        starts: Vec<Start<'a>>,
        merged: Option<Start<'a>>,
        interval_mode: bool,
    ) -> Self {
        Interleaver {
            tables,
            starts,
            merged,
            interval_mode,
            started: false,
            whole: Vec::new(),
            last: None,
        }
    }

    /// No merged view after all (the cycles that weigh it were not recorded): before the
    /// first interval.
    pub fn without_merged(&mut self) {
        self.merged = None;
    }

    /// Before the first interval (or the end, without one): every tree is known.
    fn begin(&mut self, sink: &mut dyn IntervalSink) -> Result<(), StatError> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        self.starts.extend(self.merged.take());
        match self.starts.as_slice() {
            _ if !self.interval_mode => Ok(()),
            [one] => sink.start(*one),
            several => sink.start_trees(several),
        }
    }

    /// One interval: each core type's tree (`None` for a type whose recording has ended),
    /// in the order of the tables; the merged view where every type has one.
    pub fn interval(
        &mut self,
        sink: &mut dyn IntervalSink,
        parts: Vec<Option<TypeInterval>>,
    ) -> Result<(), StatError> {
        self.begin(sink)?;
        let merging = self.starts.len() > self.tables.len();
        let merged = (merging && parts.iter().all(Option::is_some)).then(|| {
            let weighed: Vec<(&CoreTable, &IntervalReport, f64)> = self
                .tables
                .iter()
                .zip(&parts)
                .filter_map(|(t, p)| {
                    let p = p.as_ref()?;
                    Some((t, &p.report, p.cycles?))
                })
                .collect();
            merge_interval(&weighed)
        });
        self.last = merged
            .as_ref()
            .or(parts.iter().flatten().map(|p| &p.report).next())
            .map(|ir| ir.report.bottleneck.clone());
        let merged = merged.map(|ir| {
            let readings = Interval {
                start_s: ir.start_s,
                end_s: ir.end_s,
                readings: Vec::new(),
                printed: Vec::new(),
            };
            (readings, ir)
        });
        if !self.interval_mode {
            self.whole = parts
                .into_iter()
                .map(|p| p.map(|p| (p.readings, p.report)))
                .chain([merged])
                .collect();
            return Ok(());
        }
        let several = self.starts.len() > 1;
        let merged_tree = parts.len();
        for (k, p) in parts.iter().enumerate() {
            let Some(p) = p else { continue };
            let iv = IntervalData {
                raw: p.raw.as_ref(),
                readings: &p.readings,
                report: Some(&p.report),
            };
            if several {
                sink.tree_interval(k, self.starts[k], iv)?;
            } else {
                sink.interval(iv)?;
            }
        }
        if let Some((readings, report)) = &merged {
            let iv = IntervalData {
                raw: None,
                readings,
                report: Some(report),
            };
            sink.tree_interval(merged_tree, self.starts[merged_tree], iv)?;
        }
        Ok(())
    }

    /// The end: each core type's tree's end, in the order of the tables (the merged view's
    /// follows). Gives the last interval's bottleneck.
    pub fn finish(
        mut self,
        sink: &mut dyn IntervalSink,
        mut ends: Vec<Finish<'a>>,
    ) -> Result<Option<Bottleneck>, StatError> {
        self.begin(sink)?;
        if let Some(&Start::Tree { info, .. }) = self.starts.get(self.tables.len()) {
            ends.push(Finish::Tree { info, whole: None });
        }
        if !self.interval_mode {
            for (k, (start, end)) in self.starts.iter().zip(&ends).enumerate() {
                sink.start(*start)?;
                if let Some(Some((readings, report))) = self.whole.get(k) {
                    sink.interval(IntervalData {
                        raw: None,
                        readings,
                        report: Some(report),
                    })?;
                }
                sink.finish(*end)?;
            }
        } else if let [one] = ends.as_slice() {
            sink.finish(*one)?;
        } else {
            sink.finish_trees(&ends)?;
        }
        Ok(self.last)
    }
}
