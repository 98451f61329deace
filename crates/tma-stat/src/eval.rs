//! From readings to the TMA tree: the formula constants of a request, one [`IntervalReport`]
//! per interval (evaluated one at a time by [`TreeEval`], so a long recording streams), and
//! [`StatRun`], the evaluated run the renderers and other commands (`tma locate`) use.

use serde::Serialize;
use tma_catalog::Model;
use tma_metrics::{Bottleneck, Constants, Report, Selection};
use tma_perf::{Interval, ReadingStatus};

use crate::StatError;

mod values;

use values::{Aliases, IntervalValues};

/// Which part of the tree to compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub level: u8,
    pub nodes: Vec<String>,
    /// Topology of the measured machine, for the formulas' `#smt_on` / `#num_cpus_online`
    /// constants: discovered for live runs, stored in snapshots, given with `--smt` on import.
    /// `None` means unknown: SMT off and one CPU are assumed (see [`Request::constants`]).
    pub topology: Option<tma_perf::snapshot::Topology>,
    /// Helper metrics shown after the tree, grouped (`-m`, `-M`), by catalog name.
    pub metrics: Vec<String>,
    /// `Bottleneck_*` metrics shown as a ranked list of costs (`-B`).
    pub bottlenecks: Vec<String>,
}

/// The metrics a command line asks for, resolved against the chosen model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricChoice {
    /// Deepest tree level `-M TopdownLN` / `PipelineLN` asks for (0 = none).
    pub level: u8,
    pub metrics: Vec<String>,
    pub bottlenecks: Vec<String>,
}

impl MetricChoice {
    /// Resolve `-m`, `-M` and `-B` of `cfg` for `model`. `-B` on a model without
    /// `Bottleneck_*` metrics is an error that says so.
    pub fn resolve(cfg: &crate::StatConfig, model: &Model) -> Result<MetricChoice, StatError> {
        Self::resolve_with(
            cfg.metrics.as_deref(),
            &cfg.metric_groups,
            cfg.bottlenecks,
            model,
        )
    }

    /// Resolve `-m LIST` (`Some(empty)`: the default set), `-M NAMES` and `-B` for `model`.
    pub fn resolve_with(
        metric_words: Option<&[String]>,
        metric_groups: &[String],
        bottlenecks: bool,
        model: &Model,
    ) -> Result<MetricChoice, StatError> {
        let mut metrics: Vec<String> = Vec::new();
        let push = |names: Vec<&'static str>, into: &mut Vec<String>| {
            for n in names {
                if !into.iter().any(|m| m == n) {
                    into.push(n.to_string());
                }
            }
        };
        if let Some(words) = metric_words {
            push(tma_metrics::select_metrics(model, words)?, &mut metrics);
        }
        let mut level = 0;
        if !metric_groups.is_empty() {
            let g = tma_metrics::select_perf_groups(model, metric_groups)?;
            level = g.level;
            push(g.metrics, &mut metrics);
        }
        let mut chosen_bottlenecks = Vec::new();
        if bottlenecks {
            let b = tma_metrics::bottleneck_metrics(model);
            if b.is_empty() {
                return Err(crate::error::usage(format!(
                    "-B: the {} tables have no Bottleneck_* metrics",
                    model.key
                )));
            }
            push(b, &mut chosen_bottlenecks);
            metrics.retain(|m| !chosen_bottlenecks.contains(m));
        }
        Ok(MetricChoice {
            level,
            metrics,
            bottlenecks: chosen_bottlenecks,
        })
    }
}

impl Request {
    /// The formula constants for one interval of this request.
    pub fn constants(&self, duration_s: Option<f64>) -> Constants {
        let mut c = Constants {
            duration_s,
            ..Constants::default()
        };
        if let Some(t) = &self.topology {
            c.smt_on = t.smt;
            c.threads_per_core = match (t.smt, t.cores) {
                (false, _) => 1,
                (true, 0) => 2,
                (true, cores) => (t.cpus / cores).max(2),
            };
            c.num_cpus_online = t.cpus.max(1);
            c.num_cores = t.cores.max(1);
            c.num_sockets = t.sockets.max(1);
        }
        c
    }

    /// The node selection of this request.
    pub fn selection(&self) -> Selection {
        Selection {
            max_level: self.level,
            nodes: self.nodes.clone(),
            metrics: self
                .metrics
                .iter()
                .chain(&self.bottlenecks)
                .cloned()
                .collect(),
        }
    }
}

/// How one event of an interval was (not) measured, for status texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::enum_variant_names)] // the names mirror perf's `<not counted>` wording
pub enum EventState {
    /// Absent from the data.
    NotRecorded,
    NotCounted,
    NotSupported,
}

/// One evaluated stretch of time.
#[derive(Debug, Clone)]
pub struct IntervalReport {
    pub start_s: f64,
    pub end_s: f64,
    pub report: Report,
    /// Why each missing event of the report is missing (by canonical id): sorted by id, one
    /// entry per id (see [`IntervalReport::missing_state`]).
    pub missing_states: Vec<(String, EventState)>,
    /// Events that counted exactly 0 (to explain divisions by zero).
    pub zero_events: Vec<String>,
    /// Every counted event of the interval is 0.
    pub all_zero: bool,
    /// The values perf printed for nodes of the tree, beside tma's (imported recordings).
    pub perf: Vec<crate::crosscheck::PerfCheck>,
    /// In the merged view of a hybrid part's core types: the nodes that exist on some
    /// core types only, with those types (`P-core`), by node name.
    pub only_on: Vec<(&'static str, String)>,
}

impl IntervalReport {
    /// Why `event` is missing, when the report lists it.
    pub fn missing_state(&self, event: &str) -> Option<EventState> {
        self.missing_states
            .binary_search_by(|(m, _)| m.as_str().cmp(event))
            .ok()
            .map(|i| self.missing_states[i].1)
    }
}

impl IntervalReport {
    /// `P-core only` for a node of the merged view that exists on some core types only.
    pub fn only_on_text(&self, node: &str) -> Option<String> {
        self.only_on
            .iter()
            .find(|(n, _)| *n == node)
            .map(|(_, t)| format!("{t} only"))
    }
}

/// What is known about a run before its first interval: the renderers' header.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub model: &'static Model,
    /// How the model was chosen: "from --cpu", "identified from this machine"...
    pub cpu_source: String,
    /// Where the data came from: "imported from FILE (perf stat -x, CSV)", "counted live...".
    pub source: String,
    /// Interval data (`-I`): one report per interval.
    pub interval_mode: bool,
    pub request: Request,
    /// The command `tma locate` should run, when known (else `CMD`).
    pub command: Option<String>,
    /// For imported data: each perf event spec and the event id it was read as.
    pub event_map: Vec<(String, String)>,
    /// For imported data whose every event carries one scope modifier: its letters
    /// (`u`: user space only). `None`: all of the work.
    pub scope: Option<String>,
    /// For one core type's tree of a hybrid part (recorded or counted live): `P-core`,
    /// `E-core`, the PMU name of a further type (`cpu_lowpower`), or `merged` for the view
    /// of every type weighted by cycles.
    pub core_type: Option<&'static str>,
}

/// An evaluated run: its header and every interval.
#[derive(Debug, Clone)]
pub struct StatRun {
    pub info: RunInfo,
    pub intervals: Vec<IntervalReport>,
}

impl StatRun {
    /// Evaluate the requested tree on every interval (formulas compiled once).
    pub fn evaluate(info: RunInfo, intervals: &[Interval]) -> Result<StatRun, StatError> {
        let ev = TreeEval::new(&info)?;
        ev.check_present(intervals.iter())?;
        let intervals = intervals.iter().map(|iv| ev.eval(iv)).collect();
        Ok(StatRun { info, intervals })
    }

    /// The bottleneck of the last interval (the whole run when there are no intervals).
    pub fn bottleneck(&self) -> Option<&Bottleneck> {
        self.intervals.last().map(|ir| &ir.report.bottleneck)
    }
}

/// The tree of one request, prepared once and evaluated interval by interval.
pub struct TreeEval {
    model: &'static Model,
    request: Request,
    /// `#core_wide` as the data says, when it says (see [`TreeEval::per_thread`]).
    core_wide: Option<bool>,
    required: std::collections::BTreeSet<String>,
    evaluator: tma_metrics::Evaluator<'static>,
    aliases: Aliases,
}

impl TreeEval {
    /// Compile the formulas of the run's request.
    pub fn new(info: &RunInfo) -> Result<TreeEval, StatError> {
        let sel = info.request.selection();
        Ok(TreeEval {
            model: info.model,
            request: info.request.clone(),
            core_wide: None,
            required: tma_metrics::required_events(info.model, &sel)?,
            evaluator: tma_metrics::Evaluator::new(info.model, &sel)?,
            aliases: Aliases::of(info.model),
        })
    }

    /// An error unless the data (these intervals; a stream passes its first one) holds at
    /// least one of the events the tree needs: a recording of other events would otherwise
    /// print a tree of dashes.
    pub fn check_present<'a>(
        &self,
        intervals: impl Iterator<Item = &'a Interval> + Clone,
    ) -> Result<(), StatError> {
        let present = self
            .required
            .iter()
            .any(|id| intervals.clone().any(|iv| iv.get(id).is_some()));
        if present {
            return Ok(());
        }
        let some: Vec<&str> = self.required.iter().take(4).map(String::as_str).collect();
        let (key, level) = (self.model.key, self.request.level);
        Err(StatError::NoEvents(format!(
            "the data holds none of the {} events the {key} level-{level} tree needs (e.g. {}); \
             record them with the command from `tma events --cpu {key} -l {level} --perf-cmd`",
            self.required.len(),
            some.join(", "),
        )))
    }

    /// For imports, after [`TreeEval::check_present`] on the first interval and its report:
    /// an error when no node can be computed because each needs an event the recording lacks
    /// altogether (a default `perf stat` run has `cycles`, nothing else of a tree). Events
    /// that are present but not counted or not supported do not count as lacking: the tree
    /// shows their status.
    pub fn check_computable(&self, iv: &Interval, ir: &IntervalReport) -> Result<(), StatError> {
        let absent =
            |n: &tma_metrics::NodeResult| n.missing_events.iter().any(|e| iv.get(e).is_none());
        if ir.report.nodes.is_empty() || !ir.report.nodes.iter().all(absent) {
            return Ok(());
        }
        let held: Vec<&str> = self
            .required
            .iter()
            .filter(|id| iv.get(id).is_some())
            .map(String::as_str)
            .collect();
        let lacking: Vec<&str> = self
            .required
            .iter()
            .filter(|id| iv.get(id).is_none())
            .take(4)
            .map(String::as_str)
            .collect();
        let (key, level) = (self.model.key, self.request.level);
        Err(StatError::NoEvents(format!(
            "the data holds only {} of the {} events the {key} level-{level} tree needs, so no \
             node can be computed (it lacks e.g. {}); record them with the command from \
             `tma events --cpu {key} -l {level} --perf-cmd`",
            held.join(", "),
            self.required.len(),
            lacking.join(", "),
        )))
    }

    /// Evaluate one interval.
    /// For a recording with SMT on that holds no AnyThread count
    /// (`CPU_CLK_UNHALTED.THREAD_ANY`), as perf's default recording of one process on
    /// Skylake-era parts: the counts are per thread, and the formulas that need the whole
    /// core's clocks estimate them (`#core_wide` off). Returns whether that applies.
    pub fn per_thread(&mut self, iv: &Interval) -> bool {
        let smt = self.request.topology.is_some_and(|t| t.smt);
        let uses = self
            .model
            .nodes
            .iter()
            .any(|n| n.formula.contains("#core_wide"));
        let any_thread = iv.get("CPU_CLK_UNHALTED.THREAD_ANY").is_some();
        let applies = smt && uses && !any_thread;
        if applies {
            self.core_wide = Some(false);
        }
        applies
    }

    pub fn eval(&self, iv: &Interval) -> IntervalReport {
        let mut consts = self.request.constants(duration_of(iv));
        if let Some(w) = self.core_wide {
            consts.core_wide = w;
        }
        let values = IntervalValues::new(iv, &self.aliases);
        let report = self.evaluator.evaluate(&values, &consts);
        let perf = if iv.printed.is_empty() {
            Vec::new()
        } else {
            crate::crosscheck::check(iv, &report, self.model, &self.evaluator, &values, &consts)
        };
        let mut ir = interval_report(iv, report);
        ir.perf = perf;
        ir
    }

    /// The nodes of the tree whose own events perf counted in several groups without one
    /// group holding them all (`perf stat -M`): each of those reads the copies counted the
    /// longest, which were not counted together. With the events concerned.
    pub fn mixed_groups(&self, iv: &Interval) -> Vec<(&'static str, Vec<String>)> {
        use tma_metrics::Values;
        let values = IntervalValues::new(iv, &self.aliases);
        if !values.grouped() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for n in self.evaluator.nodes() {
            let events = self.evaluator.formula_events(n.name);
            let repeated = values.repeated(&events);
            if !repeated.is_empty() && values.group_for(n.name, &events).is_none() {
                out.push((n.name, repeated.iter().map(|e| e.to_string()).collect()));
            }
        }
        out
    }

    /// Events counted in more than one group, with how many.
    pub fn repeated_events(iv: &Interval) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for r in iv
            .readings
            .iter()
            .filter(|r| r.cpu.is_none() && r.tid.is_none() && r.group.is_some())
        {
            match out
                .iter_mut()
                .find(|(e, _)| e.eq_ignore_ascii_case(&r.event))
            {
                Some((_, n)) => *n += 1,
                None => out.push((r.event.clone(), 1)),
            }
        }
        out.retain(|(_, n)| *n > 1);
        out
    }
}

fn duration_of(iv: &Interval) -> Option<f64> {
    if iv.end_s > iv.start_s {
        return Some(iv.end_s - iv.start_s);
    }
    iv.get("duration_time")
        .and_then(|r| r.value)
        .map(|ns| ns / 1e9)
}

/// Pair a report with the facts about its interval that status texts need.
fn interval_report(iv: &Interval, report: Report) -> IntervalReport {
    let mut states: std::collections::BTreeMap<&str, EventState> = Default::default();
    let missing = report
        .nodes
        .iter()
        .map(|n| &n.missing_events)
        .chain(report.metrics.iter().map(|m| &m.missing_events));
    let readings = iv.index();
    for events in missing {
        for e in events {
            states
                .entry(e)
                .or_insert_with(|| match readings.get(e).map(|r| r.status) {
                    Some(ReadingStatus::NotSupported) => EventState::NotSupported,
                    Some(ReadingStatus::NotCounted) => EventState::NotCounted,
                    _ => EventState::NotRecorded,
                });
        }
    }
    let missing_states = states
        .into_iter()
        .map(|(e, st)| (e.to_string(), st))
        .collect();
    let aggregated = || {
        iv.readings
            .iter()
            .filter(|r| r.cpu.is_none() && r.tid.is_none())
    };
    let zero_events = aggregated()
        .filter(|r| r.value == Some(0.0))
        .map(|r| r.event.clone())
        .collect();
    let mut any = false;
    let all_zero = aggregated().filter_map(|r| r.value).all(|v| {
        any = true;
        v == 0.0
    });
    IntervalReport {
        start_s: iv.start_s,
        end_s: iv.end_s,
        report,
        missing_states,
        all_zero: any && all_zero,
        zero_events,
        perf: Vec::new(),
        only_on: Vec::new(),
    }
}
