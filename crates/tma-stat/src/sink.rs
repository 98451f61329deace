//! The one interface of every consumer of a stat run: [`IntervalSink`].
//!
//! A source (live counting, a snapshot replay, a `perf stat` import) yields raw intervals; the
//! pipeline evaluates them (and, between the source and the sinks, descends into the
//! bottleneck with `--drilldown` and splits per core or thread) and pushes each step into one
//! sink: [`IntervalSink::start`] once per step (the CPU, the plan, the target),
//! [`IntervalSink::interval`] for each interval (raw counts, readings, the evaluated tree),
//! [`IntervalSink::finish`] at the end of the step (what only a whole step has: per-core trees,
//! `-e` totals, the `--repeat` samples). The printers of `tma stat` ([`TreeOutput`]), the
//! in-memory collection of `tma diff` and `tma report` ([`Collect`]), `tma serve`'s collector
//! and `tma locate`'s bottleneck pass ([`Discard`]: the bottleneck is in the
//! [`Outcome`](crate::Outcome)) are sinks; [`Both`] feeds two at once.

use std::io::Write;

use tma_perf::backend::{Measurement, RawInterval, Target};
use tma_perf::plan::Plan;
use tma_perf::Interval;

use crate::error::usage;
use crate::eval::{IntervalReport, RunInfo, StatRun};
use crate::render::counts;
use crate::render::tree::{Format, RenderOptions, TreeWriter, TreesWriter};
use crate::{RunStart, StatError};

/// What is known before a step's first interval.
#[derive(Debug, Clone, Copy)]
pub enum Start<'a> {
    /// Hardware counters (or a recording of them): every interval comes with its tree.
    Tree {
        info: &'a RunInfo,
        /// The counter groups (live counting and snapshots; `None` for perf stat imports).
        plan: Option<&'a Plan>,
        /// What is counted (`None` for perf stat imports).
        target: Option<&'a Target>,
    },
    /// No hardware counters: software counts only, and no tree.
    Software {
        plan: &'a Plan,
        target: Option<&'a Target>,
        /// Why there are no hardware counters, when known.
        reason: Option<&'a str>,
        /// The intervals come as they are read (`-I`); else one whole-run total per run
        /// of the target, and [`Finish::Software`] holds the runs.
        streamed: bool,
    },
}

/// One interval.
#[derive(Debug, Clone, Copy)]
pub struct IntervalData<'a> {
    /// The raw group readings per attach point (CPU, thread, cgroup), for breakdowns
    /// through [`Measurement::interval_readings`]; `None` for perf stat imports and trees of
    /// whole runs.
    pub raw: Option<&'a RawInterval>,
    /// The aggregated, multiplex-scaled readings.
    pub readings: &'a Interval,
    /// The evaluated tree ([`Start::Tree`] only).
    pub report: Option<&'a IntervalReport>,
}

/// The end of a step.
#[derive(Debug, Clone, Copy)]
pub enum Finish<'a> {
    Tree {
        info: &'a RunInfo,
        /// What only a whole live or replayed step has (`None` for perf stat imports).
        whole: Option<WholeStep<'a>>,
    },
    Software {
        plan: &'a Plan,
        target: &'a Target,
        /// Every run of the target (their intervals when not streamed).
        runs: &'a [Measurement],
        interval_mode: bool,
        /// `--per-core`/`--per-thread`: each part's runs, labelled.
        parts: &'a [(String, Vec<Measurement>)],
    },
}

/// What a whole step of a live run or a snapshot replay adds to its intervals.
#[derive(Debug, Clone, Copy)]
pub struct WholeStep<'a> {
    /// `-e` events and their whole-run totals (`None` in interval mode).
    pub events: &'a [String],
    pub total: Option<&'a Interval>,
    /// `--per-core`/`--per-thread`: each part's tree (its source names the part).
    pub parts: &'a [StatRun],
    /// `--repeat N`: one tree per run (the intervals above are their mean).
    pub repeats: Option<&'a StatRun>,
}

/// Receives a stat run, step by step (one step unless `--drilldown`).
///
/// # Several trees at once (hybrid parts)
///
/// A run on every core type of a hybrid part gives a tree per core type and their merged
/// view (each tree's [`RunInfo::core_type`] names it: `P-core`, `E-core`, `cpu_lowpower`,
/// `merged`). In interval mode (`-I`) they come interleaved, each interval as soon as it
/// is read: [`start_trees`](Self::start_trees) once with every tree's [`Start`], then for
/// each interval every tree's [`tree_interval`](Self::tree_interval) (tree 0, 1, ..., the
/// merged view last; all trees of interval k before any of interval k+1), then
/// [`finish_trees`](Self::finish_trees) once with every tree's [`Finish`] (per-thread
/// trees of each type in its [`WholeStep`]). A whole run (one sample per tree) hands its
/// trees on one after the other as plain steps (`start`, `interval`, `finish`), which is
/// the same order. A run of one tree never uses the three methods.
///
/// Their defaults fit a sink that takes each interval on its own under the latest start
/// (a collector that publishes each interval with its tree's labels): `tree_interval`
/// calls `start` with that tree's [`Start`] and then `interval`, and `finish_trees` calls
/// `finish` for each tree. A sink that takes one tree per step (a printer, a collection)
/// overrides them, as [`TreeOutput`] does.
pub trait IntervalSink {
    /// Before each run of the counted target (live counting only), for a progress display.
    fn run_start(&mut self, _run: RunStart) {}
    /// Once per step, before its first interval.
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError>;
    /// Each interval, in order, as soon as it is read (or, for a whole step, its tree).
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError>;
    /// Once per step, after its last interval.
    fn finish(&mut self, _end: Finish<'_>) -> Result<(), StatError> {
        Ok(())
    }
    /// A run of several trees handed on interval by interval (see the trait's notes):
    /// every tree's start ([`Start::Tree`]), in the order each interval's trees come, once
    /// before the first interval. The default does nothing (each tree's start comes with
    /// each of its intervals through [`tree_interval`](Self::tree_interval)).
    fn start_trees(&mut self, _trees: &[Start<'_>]) -> Result<(), StatError> {
        Ok(())
    }
    /// One interval of tree `tree` (an index into what
    /// [`start_trees`](Self::start_trees) announced; `start` is that tree's entry). The
    /// default hands it on as a step of one interval: [`start`](Self::start) with `start`,
    /// then [`interval`](Self::interval).
    fn tree_interval(
        &mut self,
        _tree: usize,
        start: Start<'_>,
        iv: IntervalData<'_>,
    ) -> Result<(), StatError> {
        self.start(start)?;
        self.interval(iv)
    }
    /// The end of a run of several trees: every tree's end, in the order of
    /// [`start_trees`](Self::start_trees). The default calls [`finish`](Self::finish) for
    /// each.
    fn finish_trees(&mut self, ends: &[Finish<'_>]) -> Result<(), StatError> {
        for end in ends {
            self.finish(*end)?;
        }
        Ok(())
    }
}

/// Takes nothing: for a run whose [`Outcome`](crate::Outcome) (the bottleneck, the exit
/// status) is all the caller wants, such as `tma locate`'s quick pass.
#[derive(Debug, Default)]
pub struct Discard;

impl IntervalSink for Discard {
    fn start(&mut self, _: Start<'_>) -> Result<(), StatError> {
        Ok(())
    }
    fn interval(&mut self, _: IntervalData<'_>) -> Result<(), StatError> {
        Ok(())
    }
}

/// Two sinks fed by one run (a tree on the terminal and a collector, say).
pub struct Both<'a>(pub &'a mut dyn IntervalSink, pub &'a mut dyn IntervalSink);

impl IntervalSink for Both<'_> {
    fn run_start(&mut self, run: RunStart) {
        self.0.run_start(run);
        self.1.run_start(run);
    }
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        self.0.start(start)?;
        self.1.start(start)
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        self.0.interval(iv)?;
        self.1.interval(iv)
    }
    fn finish(&mut self, end: Finish<'_>) -> Result<(), StatError> {
        self.0.finish(end)?;
        self.1.finish(end)
    }
    fn start_trees(&mut self, trees: &[Start<'_>]) -> Result<(), StatError> {
        self.0.start_trees(trees)?;
        self.1.start_trees(trees)
    }
    fn tree_interval(
        &mut self,
        tree: usize,
        start: Start<'_>,
        iv: IntervalData<'_>,
    ) -> Result<(), StatError> {
        self.0.tree_interval(tree, start, iv)?;
        self.1.tree_interval(tree, start, iv)
    }
    fn finish_trees(&mut self, ends: &[Finish<'_>]) -> Result<(), StatError> {
        self.0.finish_trees(ends)?;
        self.1.finish_trees(ends)
    }
}

/// `tma stat`'s printed output: the tree, `--compact` lines, CSV or JSON (and `--plot`),
/// or the software counts where there are no hardware counters.
pub struct TreeOutput<'w> {
    out: &'w mut dyn Write,
    opts: RenderOptions,
    writer: TreeWriter,
    info: Option<RunInfo>,
    software: Option<SoftwareStep>,
    progress: Option<&'w mut dyn FnMut(RunStart)>,
    /// A run of several trees handed on interval by interval: their infos and writer.
    trees: Option<(Vec<RunInfo>, TreesWriter)>,
    /// CSV: the header of core-typed trees was written (the trees of a hybrid part share
    /// one header; each row names its core type).
    core_csv_header: bool,
}

/// The software counts of a step.
struct SoftwareStep {
    plan: Plan,
    target: Option<Target>,
    streamed: bool,
    written: usize,
    /// `--json` of streamed intervals: the document being written.
    json: Option<tma_render::JsonStream>,
}

impl<'w> TreeOutput<'w> {
    pub fn new(out: &'w mut dyn Write, opts: &RenderOptions) -> TreeOutput<'w> {
        TreeOutput {
            out,
            opts: opts.clone(),
            writer: TreeWriter::new(opts.clone()),
            info: None,
            software: None,
            progress: None,
            trees: None,
            core_csv_header: false,
        }
    }

    /// Begin the current tree's output: its header, unless it is one more core type's tree
    /// of a hybrid part in CSV, whose rows go under the first one's header.
    fn begin_tree(&mut self, info: &RunInfo) -> Result<(), StatError> {
        let shared = self.opts.format == Format::Csv && info.core_type.is_some();
        if !(shared && self.core_csv_header) {
            self.writer.begin(self.out, info)?;
        }
        self.core_csv_header |= shared;
        Ok(())
    }

    /// Also tell `progress` before each run of the counted target.
    pub fn with_progress(mut self, progress: &'w mut dyn FnMut(RunStart)) -> TreeOutput<'w> {
        self.progress = Some(progress);
        self
    }
}

impl IntervalSink for TreeOutput<'_> {
    fn run_start(&mut self, run: RunStart) {
        if let Some(p) = self.progress.as_deref_mut() {
            p(run);
        }
    }

    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        match start {
            Start::Tree { info, .. } => {
                // A new tree (a drill-down step): a new writer, begun at its first interval.
                self.writer = TreeWriter::new(self.opts.clone());
                self.info = Some(info.clone());
                self.software = None;
            }
            Start::Software {
                plan,
                target,
                streamed,
                ..
            } => {
                self.info = None;
                self.software = Some(SoftwareStep {
                    plan: plan.clone(),
                    target: target.cloned(),
                    streamed,
                    written: 0,
                    json: None,
                });
            }
        }
        Ok(())
    }

    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        if let (Some(ir), Some(info)) = (iv.report, self.info.take()) {
            let r = (|| -> Result<(), StatError> {
                if self.writer.count() == 0 {
                    self.begin_tree(&info)?;
                }
                self.writer
                    .interval_with_counts(self.out, &info, ir, Some(iv.readings))?;
                if iv.raw.is_some() {
                    // Counted live: show each interval as it comes.
                    self.out.flush()?;
                }
                Ok(())
            })();
            self.info = Some(info);
            return r;
        }
        if let (Some(sw), Some(raw)) = (self.software.as_mut(), iv.raw) {
            if !sw.streamed {
                return Ok(());
            }
            let Some(target) = sw.target.as_ref() else {
                return Ok(());
            };
            let fmt = counts::CountsFormat::of(&self.opts);
            counts::software_interval(
                self.out,
                target,
                &sw.plan,
                raw,
                sw.written == 0,
                fmt,
                &mut sw.json,
            )?;
            sw.written += 1;
            self.out.flush()?;
        }
        Ok(())
    }

    fn finish(&mut self, end: Finish<'_>) -> Result<(), StatError> {
        match end {
            Finish::Tree { info, whole } => {
                if self.writer.count() == 0 {
                    self.begin_tree(info)?;
                }
                self.writer.end(self.out, info)?;
                self.whole_step(info, whole)
            }
            Finish::Software {
                plan,
                target,
                runs,
                interval_mode,
                parts,
            } => {
                if let Some(sw) = self.software.as_mut().filter(|s| s.streamed) {
                    counts::end_software_json(self.out, sw.json.take())?;
                    return Ok(());
                }
                let fmt = counts::CountsFormat::of(&self.opts);
                counts::software(self.out, target, plan, runs, interval_mode, fmt)?;
                for (label, part) in parts {
                    writeln!(self.out)?;
                    writeln!(self.out, "--- {label} ---")?;
                    counts::software(self.out, target, plan, part, interval_mode, fmt)?;
                }
                Ok(())
            }
        }
    }

    fn start_trees(&mut self, trees: &[Start<'_>]) -> Result<(), StatError> {
        self.info = None;
        self.software = None;
        let infos: Vec<RunInfo> = trees
            .iter()
            .filter_map(|t| match t {
                Start::Tree { info, .. } => Some((*info).clone()),
                Start::Software { .. } => None,
            })
            .collect();
        let mut writer = TreesWriter::new(self.opts.clone());
        writer.begin(self.out, &infos)?;
        self.trees = Some((infos, writer));
        Ok(())
    }

    fn tree_interval(
        &mut self,
        tree: usize,
        _start: Start<'_>,
        iv: IntervalData<'_>,
    ) -> Result<(), StatError> {
        let (Some((infos, writer)), Some(ir)) = (self.trees.as_mut(), iv.report) else {
            return Ok(());
        };
        let Some(info) = infos.get(tree) else {
            return Ok(());
        };
        writer.interval(self.out, tree, info, ir, Some(iv.readings))?;
        // Show each interval's trees as they come.
        self.out.flush()?;
        Ok(())
    }

    fn finish_trees(&mut self, ends: &[Finish<'_>]) -> Result<(), StatError> {
        if let Some((infos, mut writer)) = self.trees.take() {
            writer.end(self.out, &infos)?;
        }
        for end in ends {
            if let Finish::Tree { info, whole } = end {
                self.whole_step(info, *whole)?;
            }
        }
        Ok(())
    }
}

impl TreeOutput<'_> {
    /// What a whole step adds after its tree: the `-e` totals, the per-core or per-thread
    /// trees.
    fn whole_step(
        &mut self,
        info: &RunInfo,
        whole: Option<WholeStep<'_>>,
    ) -> Result<(), StatError> {
        let Some(w) = whole else { return Ok(()) };
        if prints_totals(&self.opts, info) {
            counts::extra_events(self.out, w.events, w.total)?;
        }
        for part in w.parts {
            self.out.write_all(b"\n")?;
            crate::render::tree::render(self.out, part, &self.opts)?;
        }
        Ok(())
    }
}

/// What [`Collect`] gathered: every sample's tree of a recording.
#[derive(Debug, Default)]
pub struct Collect {
    run: Option<StatRun>,
    repeats: Option<StatRun>,
}

impl Collect {
    /// The collected trees: the intervals, or one per `--repeat` run (their mean otherwise).
    pub fn into_run(self) -> Result<(StatRun, bool), StatError> {
        if let Some(r) = self.repeats {
            return Ok((r, true));
        }
        self.run
            .map(|r| (r, false))
            .ok_or_else(|| usage("the recording gave no tree to compare"))
    }
}

impl IntervalSink for Collect {
    fn start(&mut self, start: Start<'_>) -> Result<(), StatError> {
        match start {
            Start::Software { .. } => Err(usage(
                "the recording holds software counts only (no hardware counters where it was \
                 recorded): there is no TMA tree to compare",
            )),
            Start::Tree { info, .. } if self.run.is_some() && info.core_type.is_some() => {
                Err(hybrid_refused())
            }
            Start::Tree { .. } if self.run.is_some() => Err(usage(
                "the recording is a --drilldown run (one partial tree per step): record with \
                 -l N for one whole tree to compare",
            )),
            Start::Tree { info, .. } => {
                self.run = Some(StatRun {
                    info: info.clone(),
                    intervals: Vec::new(),
                });
                Ok(())
            }
        }
    }

    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), StatError> {
        if let (Some(run), Some(ir)) = (self.run.as_mut(), iv.report) {
            run.intervals.push(ir.clone());
        }
        Ok(())
    }

    fn start_trees(&mut self, _trees: &[Start<'_>]) -> Result<(), StatError> {
        Err(hybrid_refused())
    }

    fn finish(&mut self, end: Finish<'_>) -> Result<(), StatError> {
        if let Finish::Tree { whole: Some(w), .. } = end {
            if !w.parts.is_empty() {
                return Err(usage(
                    "the recording is a --per-core/--per-thread run: record without them to \
                     compare whole trees",
                ));
            }
            self.repeats = w.repeats.cloned();
        }
        Ok(())
    }
}

/// Why [`Collect`] takes no run of several core types' trees.
fn hybrid_refused() -> StatError {
    usage(
        "the recording holds a tree per core type of a hybrid part: read one type's tree \
         (StatConfig::one_tree, with --cpu naming that type's table: adl, adl-e)",
    )
}

/// Whether a format prints the `-e` totals after the tree (text of whole runs).
fn prints_totals(opts: &RenderOptions, info: &RunInfo) -> bool {
    opts.format == Format::Text && !info.interval_mode
}
