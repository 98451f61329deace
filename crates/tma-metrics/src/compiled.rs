//! [`CompiledModel`]: every formula and threshold of a [`Model`] parsed once, with each
//! identifier resolved to a metric reference, an event slot, a retire-latency operand or a
//! constant. Evaluation then never touches strings except to ask [`crate::Values`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tma_catalog::{Model, Unit};

use crate::expr::{self, BinOp, Expr, Func};
use crate::MetricsError;

/// A `#constant` the engine knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConstKind {
    SmtOn,
    Threads,
    CoreWide,
    NumCpusOnline,
    NumCores,
    NumSockets,
    TscFreq,
    DurationTime,
    ChasPerSocket,
}

impl ConstKind {
    /// Resolve a `#name` (without `#`), case-insensitive, perf aliases included.
    pub fn from_name(name: &str) -> Option<ConstKind> {
        Some(match name.to_ascii_lowercase().as_str() {
            "smt_on" => ConstKind::SmtOn,
            "threads" | "threads_per_core" => ConstKind::Threads,
            "core_wide" => ConstKind::CoreWide,
            "num_cpus_online" | "num_cpus" => ConstKind::NumCpusOnline,
            "num_cores" => ConstKind::NumCores,
            "num_sockets" | "num_packages" => ConstKind::NumSockets,
            "tsc_freq" | "system_tsc_freq" => ConstKind::TscFreq,
            "duration_time" => ConstKind::DurationTime,
            "chas_per_socket" => ConstKind::ChasPerSocket,
            _ => return None,
        })
    }
    /// Canonical `#name`.
    pub fn name(self) -> &'static str {
        match self {
            ConstKind::SmtOn => "#smt_on",
            ConstKind::Threads => "#threads",
            ConstKind::CoreWide => "#core_wide",
            ConstKind::NumCpusOnline => "#num_cpus_online",
            ConstKind::NumCores => "#num_cores",
            ConstKind::NumSockets => "#num_sockets",
            ConstKind::TscFreq => "#tsc_freq",
            ConstKind::DurationTime => "#duration_time",
            ConstKind::ChasPerSocket => "#chas_per_socket",
        }
    }
    /// What the constant is and how to supply it (for `Status::MissingConstant`).
    pub fn how_to_supply(self) -> &'static str {
        match self {
            ConstKind::TscFreq => {
                "#tsc_freq (TSC ticks per second) is unknown: supply the TSC frequency \
                 (Constants.tsc_freq_hz), e.g. from the recording machine's tsc_freq_khz"
            }
            ConstKind::DurationTime => {
                "#duration_time (measurement wall time in seconds) is unknown: supply the \
                 run duration (Constants.duration_s) or a duration_time event"
            }
            ConstKind::ChasPerSocket => {
                "#chas_per_socket (uncore CHA boxes per socket) is unknown: supply it \
                 (Constants.chas_per_socket), e.g. the number of uncore_cha_* PMUs / sockets"
            }
            // The others always have a value in `Constants`.
            _ => "constant has no value",
        }
    }
}

/// A compiled expression.
#[derive(Debug, Clone)]
pub(crate) enum CExpr {
    Num(f64),
    Const(ConstKind),
    /// A `#name` the engine does not know; evaluates to an Error status.
    UnknownConst(String),
    /// Index into `CompiledModel::events`.
    Event(u32),
    /// Index into `CompiledModel::retire`.
    RetireLat(u32),
    /// Index into `CompiledModel::items`.
    Ref(u32),
    Neg(Box<CExpr>),
    Bin(BinOp, Box<CExpr>, Box<CExpr>),
    If(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    Call(Func, Box<CExpr>, Box<CExpr>),
}

/// One counter event operand.
#[derive(Debug, Clone)]
pub(crate) struct EventSlot {
    /// Event id with escapes removed, modifiers kept: what `required_events` reports and
    /// the first key tried in `Values`.
    pub id: String,
    /// The text as written, tried second when it differs (escaped forms).
    pub raw: String,
}

/// One `EV:retire_latency` operand.
#[derive(Debug, Clone)]
pub(crate) struct RetireSlot {
    /// Full id as written (escapes removed), e.g. `MEM_LOAD_RETIRED.L3_HIT:retire_latency`.
    pub id: String,
    /// The same operand in the other spelling (`:R` <-> `:retire_latency`), also tried.
    pub alt: String,
    /// The model's default for the base event, if the table has one.
    pub default: Option<f64>,
}

/// A node or helper metric.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub name: &'static str,
    pub formula: CExpr,
    /// Only nodes have thresholds; `None` when empty.
    pub threshold: Option<CExpr>,
    pub unit: Unit,
    /// Indexes into `CompiledModel::events` of the events the formula names, directly or
    /// through the items it refers to.
    pub events: Vec<u32>,
}

/// The events of item `i` and of the items its formula refers to (transitively; a
/// reference cycle is cut where it closes).
fn gather(items: &[Item], i: usize, seen: &mut [bool]) -> Vec<u32> {
    let mut out = items[i].events.clone();
    seen[i] = true;
    let mut refs = Vec::new();
    references(&items[i].formula, &mut refs);
    for r in refs {
        let r = r as usize;
        if r < items.len() && !seen[r] {
            for e in gather(items, r, seen) {
                if !out.contains(&e) {
                    out.push(e);
                }
            }
        }
    }
    out
}

/// Visit every node of an expression, depth first.
fn walk(e: &CExpr, f: &mut impl FnMut(&CExpr)) {
    f(e);
    match e {
        CExpr::Neg(a) => walk(a, f),
        CExpr::Bin(_, a, b) | CExpr::Call(_, a, b) => {
            walk(a, f);
            walk(b, f);
        }
        CExpr::If(a, b, c) => {
            walk(a, f);
            walk(b, f);
            walk(c, f);
        }
        CExpr::Num(_)
        | CExpr::Const(_)
        | CExpr::UnknownConst(_)
        | CExpr::Event(_)
        | CExpr::RetireLat(_)
        | CExpr::Ref(_) => {}
    }
}

/// The items an expression refers to directly.
fn references(e: &CExpr, out: &mut Vec<u32>) {
    walk(e, &mut |x| {
        if let CExpr::Ref(i) = x {
            out.push(*i);
        }
    });
}

/// The event slots an expression names directly (references to items not followed).
fn direct_events(e: &CExpr, out: &mut Vec<u32>) {
    walk(e, &mut |x| {
        if let CExpr::Event(i) = x {
            if !out.contains(i) {
                out.push(*i);
            }
        }
    });
}

/// Every formula and threshold of one [`Model`], parsed and resolved. Build once per model
/// (see [`CompiledModel::get`] for the process-wide cache) and evaluate many times.
#[derive(Debug)]
pub struct CompiledModel {
    pub(crate) key: &'static str,
    pub(crate) tree: crate::Tree,
    /// Nodes first (same indexes as `Model::nodes`), then helper metrics.
    pub(crate) items: Vec<Item>,
    pub(crate) events: Vec<EventSlot>,
    pub(crate) retire: Vec<RetireSlot>,
}

type CacheKey = (usize, usize, usize, usize, usize, usize);
static CACHE: OnceLock<Mutex<HashMap<CacheKey, Arc<CompiledModel>>>> = OnceLock::new();

struct Builder<'m> {
    model: &'m Model,
    names: HashMap<String, u32>,
    events: Vec<EventSlot>,
    event_index: HashMap<String, u32>,
    retire: Vec<RetireSlot>,
    retire_index: HashMap<String, u32>,
}

impl Builder<'_> {
    fn compile(&mut self, e: &Expr) -> CExpr {
        match e {
            Expr::Num(n) => CExpr::Num(*n),
            Expr::Const(c) => match ConstKind::from_name(c) {
                Some(k) => CExpr::Const(k),
                None => CExpr::UnknownConst(c.clone()),
            },
            Expr::Ident(id) => {
                let plain = id.unescaped();
                if let Some(&i) = self.names.get(&plain.to_ascii_lowercase()) {
                    return CExpr::Ref(i);
                }
                if id.is_retire_latency() {
                    if let Some(&i) = self.retire_index.get(&plain.to_ascii_lowercase()) {
                        return CExpr::RetireLat(i);
                    }
                    let base = crate::expr::unescape(id.base());
                    let default = self
                        .model
                        .retire_latencies
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(&base))
                        .map(|&(_, v)| v);
                    let alt = std::iter::once(base.clone())
                        .chain(id.modifiers().map(|m| {
                            if m == "R" {
                                "retire_latency".to_string()
                            } else if crate::expr::is_retire_latency_modifier(m) {
                                "R".to_string()
                            } else {
                                m.to_string()
                            }
                        }))
                        .collect::<Vec<_>>()
                        .join(":");
                    let i = self.retire.len() as u32;
                    self.retire.push(RetireSlot {
                        id: plain.clone(),
                        alt,
                        default,
                    });
                    self.retire_index.insert(plain.to_ascii_lowercase(), i);
                    return CExpr::RetireLat(i);
                }
                // Event names are case-insensitive: one slot per name, first spelling kept.
                let key = plain.to_ascii_lowercase();
                if let Some(&i) = self.event_index.get(&key) {
                    return CExpr::Event(i);
                }
                let i = self.events.len() as u32;
                self.events.push(EventSlot {
                    id: plain,
                    raw: id.text.clone(),
                });
                self.event_index.insert(key, i);
                CExpr::Event(i)
            }
            Expr::Neg(a) => CExpr::Neg(Box::new(self.compile(a))),
            Expr::Bin(op, a, b) => {
                CExpr::Bin(*op, Box::new(self.compile(a)), Box::new(self.compile(b)))
            }
            Expr::If {
                then,
                cond,
                otherwise,
            } => CExpr::If(
                Box::new(self.compile(then)),
                Box::new(self.compile(cond)),
                Box::new(self.compile(otherwise)),
            ),
            Expr::Call(f, a, b) => {
                CExpr::Call(*f, Box::new(self.compile(a)), Box::new(self.compile(b)))
            }
        }
    }
}

impl CompiledModel {
    /// Parse and resolve every formula and threshold of `model`.
    /// Errors name the model, the node or metric, and show the parse error.
    pub fn new(model: &Model) -> Result<CompiledModel, MetricsError> {
        let mut names = HashMap::new();
        // Nodes win over helper metrics of the same name; first definition wins.
        for (i, n) in model.nodes.iter().enumerate() {
            names.entry(n.name.to_ascii_lowercase()).or_insert(i as u32);
        }
        for (j, m) in model.metrics.iter().enumerate() {
            names
                .entry(m.name.to_ascii_lowercase())
                .or_insert((model.nodes.len() + j) as u32);
        }
        let mut b = Builder {
            model,
            names,
            events: Vec::new(),
            event_index: HashMap::new(),
            retire: Vec::new(),
            retire_index: HashMap::new(),
        };
        let parse = |name: &str, what: &'static str, src: &str| {
            expr::parse(src).map_err(|error| MetricsError::Parse {
                model: model.key.to_string(),
                item: name.to_string(),
                what,
                error,
            })
        };
        let mut items = Vec::with_capacity(model.nodes.len() + model.metrics.len());
        for n in model.nodes {
            let f = parse(n.name, "formula", n.formula)?;
            let formula = b.compile(&f);
            let threshold = if n.threshold.trim().is_empty() {
                None
            } else {
                let t = parse(n.name, "threshold", n.threshold)?;
                Some(b.compile(&t))
            };
            let mut events = Vec::new();
            direct_events(&formula, &mut events);
            items.push(Item {
                name: n.name,
                formula,
                threshold,
                unit: n.unit,
                events,
            });
        }
        for m in model.metrics {
            let f = parse(m.name, "formula", m.formula)?;
            let formula = b.compile(&f);
            let mut events = Vec::new();
            direct_events(&formula, &mut events);
            items.push(Item {
                name: m.name,
                formula,
                threshold: None,
                unit: m.unit,
                events,
            });
        }
        // Each item's events with those of the items it refers to, as perf expands a
        // metric's references into one expression (and counts it as one group).
        let all: Vec<Vec<u32>> = (0..items.len())
            .map(|i| gather(&items, i, &mut vec![false; items.len()]))
            .collect();
        for (it, a) in items.iter_mut().zip(all) {
            it.events = a;
        }
        Ok(CompiledModel {
            key: model.key,
            tree: crate::Tree::new(model),
            items,
            events: b.events,
            retire: b.retire,
        })
    }

    /// The compiled form of `model`, built on first use and cached for the life of the
    /// process. The cache key is the addresses of the model's `'static` tables, which are
    /// never freed, so a key cannot be reused by another model.
    pub fn get(model: &Model) -> Result<Arc<CompiledModel>, MetricsError> {
        let key = (
            model.nodes.as_ptr() as usize,
            model.nodes.len(),
            model.metrics.as_ptr() as usize,
            model.metrics.len(),
            model.retire_latencies.as_ptr() as usize,
            model.retire_latencies.len(),
        );
        let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(c) = cache.lock().ok().and_then(|m| m.get(&key).cloned()) {
            // Also check the key strings: two empty tables share a dangling address.
            if c.key == model.key {
                return Ok(c);
            }
        }
        let c = Arc::new(CompiledModel::new(model)?);
        if let Ok(mut m) = cache.lock() {
            m.insert(key, c.clone());
        }
        Ok(c)
    }

    /// Item index of a node or metric name (case-insensitive).
    pub(crate) fn item_index(&self, name: &str) -> Option<usize> {
        self.items
            .iter()
            .position(|it| it.name.eq_ignore_ascii_case(name))
    }

    /// Model key (`spr`, `zen4`, ...).
    pub fn key(&self) -> &'static str {
        self.key
    }
}
