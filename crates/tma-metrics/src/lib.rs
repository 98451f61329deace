//! TMA formula engine: the catalog's formula language (perf `MetricExpr` grammar) parsed to an
//! AST ([`expr`]), evaluation of a [`Model`]'s tree against raw counts with a status per node,
//! [`required_events`] derived from the formulas, and bottleneck selection.
//!
//! # Design constraints
//! * Pure: no I/O, no unsafe. Counts come in through the [`Values`] trait, system facts
//!   through [`Constants`]; unit tests use map literals.
//! * Nothing panics and no NaN reaches the output: every node gets a [`Status`] and its value
//!   is `None` unless the status is [`Status::Ok`] or [`Status::OutOfRange`].
//! * Every formula is parsed once per model ([`CompiledModel`], cached process-wide), so
//!   evaluating a whole tree costs a few microseconds.
//!
//! # Evaluation rules
//! * `x / 0` (and `x % 0`) gives no value; the node becomes [`Status::DivisionByZero`] unless
//!   the formula guards the division with `d_ratio` (0 when the divisor is 0). `min`/`max`
//!   and comparisons never hide a missing value.
//! * A missing event makes the node [`Status::MissingEvents`] and lists exactly the events
//!   (including those of referenced metrics) that were needed and absent. Only the branch of
//!   `A if C else B` that the condition selects is needed.
//! * A `#constant` without a value (TSC frequency, duration, CHAs per socket) gives
//!   [`Status::MissingConstant`] with a message saying how to supply it.
//! * Percent nodes outside `[0, 100]` by more than [`PERCENT_TOLERANCE`] points keep their
//!   value with [`Status::OutOfRange`]; nothing is clamped (the formulas already carry the
//!   `max(0, ..)` clipping the vendor defines).
//! * References are followed recursively with memoization; a reference cycle gives
//!   [`Status::Error`] naming the cycle.
//!
//! # Example
//! ```
//! use std::collections::HashMap;
//! use tma_metrics::{evaluate, required_events, Constants, Selection, StopReason};
//!
//! let zen4 = tma_catalog::by_name("zen4").unwrap();
//! let sel = Selection::level(1);
//! let need = required_events(zen4, &sel).unwrap();
//! assert!(need.contains("ls_not_halted_cyc"));
//!
//! // 1000 cycles = 6000 dispatch slots.
//! let counts: HashMap<String, f64> = [
//!     ("ls_not_halted_cyc", 1000.0),
//!     ("de_no_dispatch_per_slot.no_ops_from_frontend", 600.0),
//!     ("de_src_op_disp.all", 1500.0),
//!     ("ex_ret_ops", 1200.0),
//!     ("de_no_dispatch_per_slot.backend_stalls", 3900.0),
//!     ("de_no_dispatch_per_slot.smt_contention", 0.0),
//! ]
//! .into_iter()
//! .map(|(k, v)| (k.to_string(), v))
//! .collect();
//! let report = evaluate(zen4, &sel, &counts, &Constants::default()).unwrap();
//! assert_eq!(report.node("backend_bound").unwrap().value, Some(65.0));
//! assert_eq!(report.node("retiring").unwrap().value, Some(20.0));
//! assert_eq!(report.bottleneck.node.as_deref(), Some("backend_bound"));
//! assert_eq!(report.bottleneck.stop, StopReason::Leaf);
//! ```

#![forbid(unsafe_code)]

pub mod expr;

mod bottleneck;
mod compiled;
mod eval;
mod info;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use tma_catalog::{Model, NodeDef, Unit};

pub use bottleneck::{
    decide, decide_summary, is_overlap_view, phases, phases_text, summary_threshold, Bottleneck,
    CloseSecond, PassedOver, Phase, Phases, StopReason, SummaryNode, TreeNode, Wording,
    AMBIGUITY_POINTS, OVERLAP_VIEWS, PHASES_LISTED,
};
pub use compiled::{CompiledModel, ConstKind};
pub use expr::{parse, Expr, ParseError};
pub use info::{
    bottleneck_metrics, select_metrics, select_perf_groups, PerfGroupSelection, BOTTLENECK_GROUP,
    DEFAULT_METRICS,
};

use compiled::CExpr;
use eval::Ctx;

/// Tolerance, in percentage points, before a percent node outside `[0, 100]` is flagged
/// [`Status::OutOfRange`] (counter skew and multiplex scaling make small excursions normal).
pub const PERCENT_TOLERANCE: f64 = 0.5;

/// Raw counts by event id. Ids are the full text of the formula operand, modifiers
/// included (`UOPS_RETIRED.MS:c1:e1`, `TOPDOWN.SLOTS:perf_metrics`), with perf backslash
/// escapes removed (`topdown-fe-bound`); the escaped spelling is tried second.
/// A retire-latency operand (`EV:retire_latency` / `EV:R`) is looked up by its full id and
/// falls back to the model's default table.
pub trait Values {
    /// The (multiplex-scaled) count of the event, `None` when not measured.
    fn event(&self, id: &str) -> Option<f64>;
    /// Fraction (0..=1) of the run during which the event was really counted
    /// (`time_running / time_enabled`), `None` when unknown.
    fn counted_share(&self, _id: &str) -> Option<f64> {
        None
    }
    /// `true` when some event was counted more than once, in different groups, as `perf
    /// stat -M` does for the events several metrics share. Each formula then reads the
    /// copies of the group [`Values::group_for`] names.
    fn grouped(&self) -> bool {
        false
    }
    /// The group whose copies the formula of `item` (a node or metric), which reads
    /// `events` (its own and those of the formulas it refers to), takes: the one perf
    /// computed it from, as perf computes a metric from its own group. `None`: read the
    /// default copies ([`Values::event`]).
    fn group_for(&self, _item: &str, _events: &[&str]) -> Option<usize> {
        None
    }
    /// The copy of `id` counted in `group`, else the default one.
    fn event_in(&self, id: &str, _group: usize) -> Option<f64> {
        self.event(id)
    }
    /// The counted share of the copy of `id` counted in `group`, else of the default one.
    fn counted_share_in(&self, id: &str, _group: usize) -> Option<f64> {
        self.counted_share(id)
    }
}

fn map_lookup<'a>(mut it: impl Iterator<Item = (&'a String, &'a f64)>, id: &str) -> Option<f64> {
    it.find(|(k, _)| k.eq_ignore_ascii_case(id))
        .map(|(_, v)| *v)
}

/// Exact id first, then case-insensitive.
impl Values for HashMap<String, f64> {
    fn event(&self, id: &str) -> Option<f64> {
        self.get(id)
            .copied()
            .or_else(|| map_lookup(self.iter(), id))
    }
}

/// Exact id first, then case-insensitive.
impl Values for BTreeMap<String, f64> {
    fn event(&self, id: &str) -> Option<f64> {
        self.get(id)
            .copied()
            .or_else(|| map_lookup(self.iter(), id))
    }
}

impl<V: Values + ?Sized> Values for &V {
    fn event(&self, id: &str) -> Option<f64> {
        (**self).event(id)
    }
    fn counted_share(&self, id: &str) -> Option<f64> {
        (**self).counted_share(id)
    }
}

/// System facts the formulas refer to as `#constants`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Constants {
    /// `#smt_on`: SMT active on the measured machine.
    pub smt_on: bool,
    /// `#threads`: hardware threads per core.
    pub threads_per_core: u32,
    /// `#core_wide`: every SMT sibling of each measured core was counted (system-wide
    /// mode); true whenever SMT is off.
    pub core_wide: bool,
    /// `#num_cpus_online`.
    pub num_cpus_online: u32,
    /// `#num_cores`.
    pub num_cores: u32,
    /// `#num_sockets`.
    pub num_sockets: u32,
    /// `#tsc_freq`: TSC ticks per second; `None` when unknown.
    pub tsc_freq_hz: Option<f64>,
    /// `#duration_time`: wall time of the measurement in seconds; `None` when unknown.
    pub duration_s: Option<f64>,
    /// `#chas_per_socket`: uncore CHA boxes per socket; `None` when unknown.
    pub chas_per_socket: Option<u32>,
}

impl Default for Constants {
    /// One thread per core, SMT off (so `core_wide`), one CPU, core and socket, the
    /// optional facts unknown.
    fn default() -> Self {
        Constants {
            smt_on: false,
            threads_per_core: 1,
            core_wide: true,
            num_cpus_online: 1,
            num_cores: 1,
            num_sockets: 1,
            tsc_freq_hz: None,
            duration_s: None,
            chas_per_socket: None,
        }
    }
}

/// Which part of the tree to compute and show.
///
/// A node is shown when its level is at most `max_level` and, if `nodes` is not empty, it
/// is one of `nodes`, an ancestor of one of them (for context) or a descendant of one of
/// them. A node named in `nodes` is shown with its ancestors even when it is deeper than
/// `max_level`; its descendants are shown down to `max_level`. Nodes outside the selection
/// are still evaluated when a shown node's formula or threshold refers to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Deepest level shown (1 = level 1 only).
    pub max_level: u8,
    /// Node names (case-insensitive) whose subtrees to show; empty = the whole tree.
    pub nodes: Vec<String>,
    /// Helper metrics to evaluate and report besides the nodes, by catalog name
    /// (case-insensitive; see [`select_metrics`]); empty = none.
    pub metrics: Vec<String>,
}

impl Selection {
    /// The whole tree down to `max_level`.
    pub fn level(max_level: u8) -> Self {
        Selection {
            max_level,
            nodes: Vec::new(),
            metrics: Vec::new(),
        }
    }
    /// Every node of the tree.
    pub fn all() -> Self {
        Selection::level(u8::MAX)
    }
}

impl Default for Selection {
    /// Levels 1 and 2, whole tree.
    fn default() -> Self {
        Selection::level(2)
    }
}

/// Errors for input the engine cannot use at all. Per-node problems are [`Status`]es.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// A name in [`Selection::nodes`] is not a node of the model.
    #[error("unknown node '{name}' for {model}: {}", suggest(suggestions))]
    UnknownNode {
        model: String,
        name: String,
        /// Close node names, best first.
        suggestions: Vec<String>,
    },
    /// A name given to [`select_metrics`] or in [`Selection::metrics`] is neither a metric
    /// nor a metric group of the model.
    #[error(
        "unknown metric or metric group '{name}' for {model}: {}",
        suggest_metric(suggestions)
    )]
    UnknownMetric {
        model: String,
        name: String,
        /// Close metric names, best first.
        suggestions: Vec<String>,
    },
    /// A `-M` name is not a `perf stat -M` group of the model.
    #[error(
        "unknown metric group '{name}' for {model}: use TopdownL1..TopdownL6, PipelineL1, \
         PipelineL2 or a group `tma list --metrics` shows"
    )]
    UnknownMetricGroup { model: String, name: String },
    /// A formula or threshold of the table does not parse.
    #[error("cannot parse the {what} of {item} in the {model} table: {error}")]
    Parse {
        model: String,
        item: String,
        /// `formula` or `threshold`.
        what: &'static str,
        error: ParseError,
    },
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        "no close match; `tma list` shows the nodes".to_string()
    } else {
        format!(
            "did you mean {}? (`tma list` shows all nodes)",
            s.join(", ")
        )
    }
}

fn suggest_metric(s: &[String]) -> String {
    if s.is_empty() {
        "no close match; `tma list --metrics` shows the metrics".to_string()
    } else {
        format!(
            "did you mean {}? (`tma list --metrics` shows all metrics)",
            s.join(", ")
        )
    }
}

/// Per-node outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// A division by zero that the formula does not guard (e.g. zero cycles).
    DivisionByZero,
    /// Events the formula needs were not measured; see `missing_events`.
    MissingEvents,
    /// A `#constant` has no value; the text names it and says how to supply it.
    MissingConstant(String),
    /// The value is outside the unit's range by more than [`PERCENT_TOLERANCE`]; kept as is.
    OutOfRange,
    /// Anything else (reference cycle, unknown constant, non-finite input...).
    Error(String),
}

impl Status {
    /// Short human label.
    pub fn label(&self) -> String {
        match self {
            Status::Ok => "ok".into(),
            Status::DivisionByZero => "division by zero".into(),
            Status::MissingEvents => "missing events".into(),
            Status::MissingConstant(c) => format!("missing constant: {c}"),
            Status::OutOfRange => "out of range".into(),
            Status::Error(e) => format!("error: {e}"),
        }
    }
    /// True when the node has a value (`Ok` or `OutOfRange`).
    pub fn has_value(&self) -> bool {
        matches!(self, Status::Ok | Status::OutOfRange)
    }
}

/// One evaluated node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeResult {
    pub name: &'static str,
    pub parent: Option<&'static str>,
    pub level: u8,
    /// In `unit`; `None` unless `status` is `Ok` or `OutOfRange`. Never NaN.
    pub value: Option<f64>,
    pub unit: Unit,
    pub status: Status,
    /// Threshold result; `None` when the node has no threshold or it cannot be evaluated.
    pub above_threshold: Option<bool>,
    /// Minimum counted share (0..=1) over every event the node used, transitively.
    pub counted_share: Option<f64>,
    /// Events (and retire-latency operands without a default) that were needed and absent.
    pub missing_events: Vec<String>,
    /// The value rests on a per-thread estimate: somewhere in the formula (or a metric it
    /// refers to) an `A if #core_wide else B` took `B` because the counts are not core-wide
    /// ([`Constants::core_wide`] false, e.g. one process counted with SMT on). On SKL, SKX and
    /// CLX that is the core clocks estimated from `CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE` and
    /// `CPU_CLK_UNHALTED.REF_XCLK` instead of the AnyThread `CPU_CLK_UNHALTED.THREAD_ANY`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    pub description: &'static str,
    pub locate_with: &'static [&'static str],
    pub formula: &'static str,
    pub threshold: &'static str,
}

/// One evaluated helper metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricResult {
    /// Catalog name (`Info_Thread_IPC`).
    pub name: &'static str,
    /// Name without the group prefix (`IPC`).
    pub short_name: &'static str,
    /// `Thread`, `Memory`, `Bottleneck`...
    pub group: &'static str,
    /// In `unit`; `None` unless `status` is `Ok` or `OutOfRange`. Never NaN.
    pub value: Option<f64>,
    pub unit: Unit,
    pub status: Status,
    pub counted_share: Option<f64>,
    /// Events that were needed and absent.
    pub missing_events: Vec<String>,
    /// See [`NodeResult::estimated`].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    pub description: &'static str,
}

/// The evaluated tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Model key (`spr`, `zen4`...).
    pub cpu: String,
    /// Shown nodes in [`node_order`].
    pub nodes: Vec<NodeResult>,
    pub bottleneck: Bottleneck,
    /// The metrics of [`Selection::metrics`], in that order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricResult>,
}

impl Report {
    /// A node by name (case-insensitive).
    pub fn node(&self, name: &str) -> Option<&NodeResult> {
        self.nodes
            .iter()
            .find(|n| n.name.eq_ignore_ascii_case(name))
    }
    /// A metric by catalog or short name (case-insensitive).
    pub fn metric(&self, name: &str) -> Option<&MetricResult> {
        self.metrics
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case(name) || m.short_name.eq_ignore_ascii_case(name))
    }
}

// ------------------------------------------------------------------ selection

pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn close_names(model: &Model, name: &str) -> Vec<String> {
    let lname = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = model
        .nodes
        .iter()
        .filter_map(|n| {
            let ln = n.name.to_lowercase();
            let d = edit_distance(&ln, &lname);
            let close = d <= (lname.len() / 3).max(2)
                || (lname.len() >= 3 && (ln.contains(&lname) || lname.contains(&ln)));
            close.then_some((d, n.name))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(5)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// Parent/children structure of `model.nodes`, by index (cheap to build: no parsing).
#[derive(Debug)]
pub(crate) struct Tree {
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    /// Depth-first order of every node: level-1 nodes and their subtrees in table order,
    /// then nodes whose parent is missing from the table, then anything in a parent cycle.
    order: Vec<usize>,
}

impl Tree {
    pub(crate) fn new(model: &Model) -> Tree {
        let n = model.nodes.len();
        let mut index: HashMap<String, usize> = HashMap::with_capacity(n);
        for (i, d) in model.nodes.iter().enumerate() {
            index.entry(d.name.to_ascii_lowercase()).or_insert(i);
        }
        let parent: Vec<Option<usize>> = model
            .nodes
            .iter()
            .enumerate()
            .map(|(i, d)| {
                d.parent
                    .and_then(|p| index.get(&p.to_ascii_lowercase()).copied())
                    .filter(|&p| p != i)
            })
            .collect();
        let mut children = vec![Vec::new(); n];
        for (i, p) in parent.iter().enumerate() {
            if let Some(p) = p {
                children[*p].push(i);
            }
        }
        let mut order = Vec::with_capacity(n);
        let mut visited = vec![false; n];
        let roots = (0..n)
            .filter(|&i| model.nodes[i].parent.is_none())
            .chain((0..n).filter(|&i| model.nodes[i].parent.is_some() && parent[i].is_none()))
            .chain(0..n);
        for r in roots {
            let mut stack = vec![r];
            while let Some(i) = stack.pop() {
                if std::mem::replace(&mut visited[i], true) {
                    continue;
                }
                order.push(i);
                stack.extend(children[i].iter().rev().filter(|&&c| !visited[c]));
            }
        }
        Tree {
            parent,
            children,
            order,
        }
    }

    /// Indexes (into `model.nodes`) of the shown nodes, as a mask.
    fn shown(&self, model: &Model, sel: &Selection) -> Result<Vec<bool>, MetricsError> {
        let n = model.nodes.len();
        let mut picked = Vec::new();
        for name in &sel.nodes {
            match model
                .nodes
                .iter()
                .position(|d| d.name.eq_ignore_ascii_case(name))
            {
                Some(i) => picked.push(i),
                None => {
                    return Err(MetricsError::UnknownNode {
                        model: model.key.to_string(),
                        name: name.clone(),
                        suggestions: close_names(model, name),
                    })
                }
            }
        }
        if picked.is_empty() {
            return Ok(model
                .nodes
                .iter()
                .map(|d| d.level <= sel.max_level)
                .collect());
        }
        let mut shown = vec![false; n];
        for &p in &picked {
            shown[p] = true;
            // Ancestors, for context (bounded walk: safe against parent cycles).
            let mut cur = self.parent[p];
            let mut steps = 0;
            while let Some(a) = cur {
                if steps > n {
                    break;
                }
                shown[a] = true;
                cur = self.parent[a];
                steps += 1;
            }
            // Descendants down to max_level.
            let mut seen = vec![false; n];
            let mut stack: Vec<usize> = self.children[p].clone();
            while let Some(i) = stack.pop() {
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                if model.nodes[i].level <= sel.max_level {
                    shown[i] = true;
                }
                stack.extend(self.children[i].iter().copied());
            }
        }
        Ok(shown)
    }

    fn ordered(&self, shown: &[bool]) -> Vec<usize> {
        self.order.iter().copied().filter(|&i| shown[i]).collect()
    }
}

/// The selected nodes in depth-first tree order (each parent followed by its children, in
/// table order), for rendering. Nodes whose parent is not in the table come last.
/// Unknown names in `sel.nodes` are ignored here ([`evaluate`] reports them).
pub fn node_order<'m>(model: &'m Model, sel: &Selection) -> Vec<&'m NodeDef> {
    let tree = Tree::new(model);
    let known = Selection {
        max_level: sel.max_level,
        nodes: sel
            .nodes
            .iter()
            .filter(|n| model.node(n).is_some())
            .cloned()
            .collect(),
        metrics: Vec::new(),
    };
    let shown = tree
        .shown(model, &known)
        .unwrap_or_else(|_| vec![false; model.nodes.len()]);
    tree.ordered(&shown)
        .into_iter()
        .map(|i| &model.nodes[i])
        .collect()
}

// ------------------------------------------------------------------ required events

/// The events of item `i`'s formula, once per item.
fn collect_item(
    cm: &CompiledModel,
    i: usize,
    consts: Option<&Constants>,
    seen: &mut [bool],
    events: &mut BTreeSet<u32>,
    retire: &mut BTreeSet<u32>,
) {
    if !seen[i] {
        seen[i] = true;
        collect(cm, &cm.items[i].formula, consts, seen, events, retire);
    }
}

fn collect(
    cm: &CompiledModel,
    e: &CExpr,
    consts: Option<&Constants>,
    seen: &mut [bool],
    events: &mut BTreeSet<u32>,
    retire: &mut BTreeSet<u32>,
) {
    match e {
        CExpr::Num(_) | CExpr::Const(_) | CExpr::UnknownConst(_) => {}
        CExpr::Event(i) => {
            events.insert(*i);
        }
        CExpr::RetireLat(i) => {
            retire.insert(*i);
        }
        CExpr::Ref(i) => collect_item(cm, *i as usize, consts, seen, events, retire),
        CExpr::Neg(a) => collect(cm, a, consts, seen, events, retire),
        CExpr::Bin(_, a, b) | CExpr::Call(_, a, b) => {
            collect(cm, a, consts, seen, events, retire);
            collect(cm, b, consts, seen, events, retire);
        }
        CExpr::If(t, c, o) => {
            let decided = consts.and_then(|k| eval::const_eval(c, k));
            match decided {
                Some(v) if v != 0.0 => collect(cm, t, consts, seen, events, retire),
                Some(_) => collect(cm, o, consts, seen, events, retire),
                None => {
                    collect(cm, c, consts, seen, events, retire);
                    collect(cm, t, consts, seen, events, retire);
                    collect(cm, o, consts, seen, events, retire);
                }
            }
        }
    }
}

/// The compiled model with the event slots and retire slots a selection needs.
type Needed = (std::sync::Arc<CompiledModel>, BTreeSet<u32>, BTreeSet<u32>);

/// (event slots, retire slots) needed by the shown nodes' formulas and thresholds.
fn needed(
    model: &Model,
    sel: &Selection,
    consts: Option<&Constants>,
) -> Result<Needed, MetricsError> {
    let cm = CompiledModel::get(model)?;
    let shown = cm.tree.shown(model, sel)?;
    let mut seen = vec![false; cm.items.len()];
    let (mut ev, mut rl) = (BTreeSet::new(), BTreeSet::new());
    for (i, s) in shown.iter().enumerate() {
        if !*s {
            continue;
        }
        collect_item(&cm, i, consts, &mut seen, &mut ev, &mut rl);
        if let Some(t) = &cm.items[i].threshold {
            collect(&cm, t, consts, &mut seen, &mut ev, &mut rl);
        }
    }
    for i in metric_items(model, sel)? {
        collect_item(&cm, i, consts, &mut seen, &mut ev, &mut rl);
    }
    Ok((cm, ev, rl))
}

/// Item indexes (after the nodes) of [`Selection::metrics`], in that order, no duplicates.
fn metric_items(model: &Model, sel: &Selection) -> Result<Vec<usize>, MetricsError> {
    let mut out: Vec<usize> = Vec::with_capacity(sel.metrics.len());
    for name in &sel.metrics {
        let j = model
            .metrics
            .iter()
            .position(|m| m.name.eq_ignore_ascii_case(name))
            .or_else(|| {
                model
                    .metrics
                    .iter()
                    .position(|m| m.short_name().eq_ignore_ascii_case(name))
            });
        let Some(j) = j else {
            return Err(MetricsError::UnknownMetric {
                model: model.key.to_string(),
                name: name.clone(),
                suggestions: Vec::new(),
            });
        };
        let i = model.nodes.len() + j;
        if !out.contains(&i) {
            out.push(i);
        }
    }
    Ok(out)
}

/// Every counter event id the selected nodes' formulas and thresholds need, following
/// references to other nodes and metrics (cycle-safe). Both branches of every conditional
/// are included; see [`required_events_for`] to drop the branches the constants rule out.
/// Ids are as written (modifiers kept, escapes removed). Retire-latency operands are not
/// counter events: see [`required_retire_latencies`].
pub fn required_events(model: &Model, sel: &Selection) -> Result<BTreeSet<String>, MetricsError> {
    let (cm, ev, _) = needed(model, sel, None)?;
    Ok(ev
        .iter()
        .map(|&i| cm.events[i as usize].id.clone())
        .collect())
}

/// Like [`required_events`], but a conditional whose condition depends only on constants
/// (`#smt_on`, `#core_wide`...) contributes only the branch those constants select.
pub fn required_events_for(
    model: &Model,
    sel: &Selection,
    consts: &Constants,
) -> Result<BTreeSet<String>, MetricsError> {
    let (cm, ev, _) = needed(model, sel, Some(consts))?;
    Ok(ev
        .iter()
        .map(|&i| cm.events[i as usize].id.clone())
        .collect())
}

/// The `EV:retire_latency` operands the selection uses, with the model's default (cycles)
/// when the table has one. A value in [`Values`] under the same id overrides the default.
pub fn required_retire_latencies(
    model: &Model,
    sel: &Selection,
) -> Result<BTreeMap<String, Option<f64>>, MetricsError> {
    let (cm, _, rl) = needed(model, sel, None)?;
    Ok(rl
        .iter()
        .map(|&i| {
            let s = &cm.retire[i as usize];
            (s.id.clone(), s.default)
        })
        .collect())
}

// ------------------------------------------------------------------ evaluate

pub(crate) fn is_percent(u: Unit) -> bool {
    matches!(u, Unit::PercentSlots | Unit::Percent)
}

/// Status of an evaluated item; `unit` enables the percent range check.
fn status_of(r: &eval::ItemResult, unit: Option<Unit>) -> Status {
    let (acc, v) = (&r.acc, r.value);
    if let Some(e) = &acc.error {
        Status::Error(e.clone())
    } else if !acc.missing.is_empty() || !acc.missing_retire.is_empty() {
        Status::MissingEvents
    } else if let Some(k) = acc.missing_consts.iter().next() {
        Status::MissingConstant(k.how_to_supply().to_string())
    } else if v.is_nan() {
        if acc.div0 {
            Status::DivisionByZero
        } else {
            Status::Error("the formula gave no number (NaN)".into())
        }
    } else if v.is_infinite() {
        Status::Error("the formula overflowed to infinity".into())
    } else if unit.is_some_and(is_percent)
        && !(-PERCENT_TOLERANCE..=100.0 + PERCENT_TOLERANCE).contains(&v)
    {
        Status::OutOfRange
    } else {
        Status::Ok
    }
}

/// Evaluate the selected nodes. Errors only for an unknown node name in `sel` or a formula
/// that does not parse; every per-node problem is a [`Status`].
/// To evaluate many intervals with one selection, build an [`Evaluator`] once.
pub fn evaluate(
    model: &Model,
    sel: &Selection,
    values: &dyn Values,
    consts: &Constants,
) -> Result<Report, MetricsError> {
    Ok(Evaluator::new(model, sel)?.evaluate(values, consts))
}

/// The numbers of one evaluated node, without the descriptive text of [`NodeResult`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeValue {
    /// Never NaN; `None` unless `status` is `Ok` or `OutOfRange`.
    pub value: Option<f64>,
    pub status: Status,
    pub above_threshold: Option<bool>,
    pub counted_share: Option<f64>,
    pub missing_events: Vec<String>,
    /// See [`NodeResult::estimated`].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

/// A model and a selection prepared once (compiled formulas, shown nodes in tree order),
/// for evaluating many sets of counts, e.g. every interval of a `perf stat -I` recording.
#[derive(Debug)]
pub struct Evaluator<'m> {
    model: &'m Model,
    cm: std::sync::Arc<CompiledModel>,
    order: Vec<usize>,
    /// Item indexes of the selected metrics.
    metrics: Vec<usize>,
}

impl<'m> Evaluator<'m> {
    /// Errors for an unknown node name in `sel` or a table formula that does not parse.
    pub fn new(model: &'m Model, sel: &Selection) -> Result<Self, MetricsError> {
        let cm = CompiledModel::get(model)?;
        let shown = cm.tree.shown(model, sel)?;
        let order = cm.tree.ordered(&shown);
        let metrics = metric_items(model, sel)?;
        Ok(Evaluator {
            model,
            cm,
            order,
            metrics,
        })
    }

    /// The event ids a node's or metric's formula reads, with those of the nodes and metrics
    /// it refers to (as perf expands them into one expression); empty for an unknown name.
    pub fn formula_events(&self, name: &str) -> Vec<&str> {
        let cm = &*self.cm;
        cm.items
            .iter()
            .find(|it| it.name.eq_ignore_ascii_case(name))
            .map(|it| {
                it.events
                    .iter()
                    .map(|&e| cm.events[e as usize].id.as_str())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The shown nodes in [`node_order`]; [`Evaluator::values`] follows this order.
    pub fn nodes(&self) -> Vec<&'m NodeDef> {
        self.order.iter().map(|&i| &self.model.nodes[i]).collect()
    }

    /// Values, statuses and threshold flags of the shown nodes, in [`Evaluator::nodes`] order.
    pub fn values(&self, values: &dyn Values, consts: &Constants) -> Vec<NodeValue> {
        let mut ctx = Ctx::new(&self.cm, values, consts);
        self.order
            .iter()
            .map(|&i| self.item_value(&mut ctx, i))
            .collect()
    }

    /// Value, status and (for nodes) threshold flag of one compiled item.
    fn item_value(&self, ctx: &mut Ctx<'_>, i: usize) -> NodeValue {
        let cm = &*self.cm;
        let r = ctx.item(i);
        let acc = &r.acc;
        let status = status_of(r, Some(cm.items[i].unit));
        let value = status.has_value().then_some(r.value);
        let mut missing: Vec<String> = acc
            .missing
            .iter()
            .map(|&e| cm.events[e as usize].id.clone())
            .chain(
                acc.missing_retire
                    .iter()
                    .map(|&e| cm.retire[e as usize].id.clone()),
            )
            .collect();
        missing.sort();
        let counted_share = acc.share;
        let estimated = acc.estimated;
        let above_threshold = match &cm.items[i].threshold {
            Some(t) => ctx.threshold(t),
            None => None,
        };
        NodeValue {
            value,
            status,
            above_threshold,
            counted_share,
            missing_events: missing,
            estimated,
        }
    }

    /// The full [`Report`]: node texts, values and the bottleneck.
    pub fn evaluate(&self, values: &dyn Values, consts: &Constants) -> Report {
        let mut ctx = Ctx::new(&self.cm, values, consts);
        let node_values: Vec<NodeValue> = self
            .order
            .iter()
            .map(|&i| self.item_value(&mut ctx, i))
            .collect();
        let metrics: Vec<MetricResult> = self
            .metrics
            .iter()
            .map(|&i| {
                let def = &self.model.metrics[i - self.model.nodes.len()];
                let v = self.item_value(&mut ctx, i);
                MetricResult {
                    name: def.name,
                    short_name: def.short_name(),
                    group: def.group,
                    value: v.value,
                    unit: def.unit,
                    status: v.status,
                    counted_share: v.counted_share,
                    missing_events: v.missing_events,
                    estimated: v.estimated,
                    description: def.description,
                }
            })
            .collect();
        let nodes: Vec<NodeResult> = self
            .order
            .iter()
            .zip(node_values)
            .map(|(&i, v)| {
                let def = &self.model.nodes[i];
                NodeResult {
                    name: def.name,
                    parent: def.parent,
                    level: def.level,
                    value: v.value,
                    unit: def.unit,
                    status: v.status,
                    above_threshold: v.above_threshold,
                    counted_share: v.counted_share,
                    missing_events: v.missing_events,
                    estimated: v.estimated,
                    description: def.description,
                    locate_with: def.locate_with,
                    formula: def.formula,
                    threshold: def.threshold,
                }
            })
            .collect();
        let bottleneck = bottleneck::find(&nodes);
        Report {
            cpu: self.model.key.to_string(),
            nodes,
            bottleneck,
            metrics,
        }
    }
}

/// Evaluate one helper metric or node by name (e.g. `Info_Thread_IPC`), with no selection:
/// `Ok(None)` when the model has no such name, otherwise the value and its status.
pub fn evaluate_metric(
    model: &Model,
    name: &str,
    values: &dyn Values,
    consts: &Constants,
) -> Result<Option<(Option<f64>, Status)>, MetricsError> {
    let cm = CompiledModel::get(model)?;
    let Some(i) = cm.item_index(name) else {
        return Ok(None);
    };
    let mut ctx = Ctx::new(&cm, values, consts);
    let r = ctx.item(i);
    let status = status_of(r, Some(cm.items[i].unit));
    Ok(Some((status.has_value().then_some(r.value), status)))
}
