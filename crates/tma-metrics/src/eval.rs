//! Expression evaluation against [`Values`] and [`Constants`], with per-item memoization,
//! reference-cycle detection and a record of why a value is missing.
//!
//! NaN is the "no value" marker inside the evaluator and is never hidden: every operator,
//! `min`, `max` and comparisons propagate it; only `d_ratio(a, 0)` yields 0 (with a finite
//! `a`), as perf defines it. A condition that is NaN makes the whole conditional NaN (and
//! both branches are visited so every missing event gets reported).

use std::collections::BTreeSet;

use crate::compiled::{CExpr, CompiledModel, ConstKind};
use crate::expr::{BinOp, Func};
use crate::{Constants, Values};

/// Why an evaluated value may be unusable, accumulated over everything it used.
#[derive(Debug, Default, Clone)]
pub(crate) struct Acc {
    /// Event slot indexes that had no value.
    pub missing: BTreeSet<u32>,
    /// Retire-latency slot indexes with neither a value nor a model default.
    pub missing_retire: BTreeSet<u32>,
    pub missing_consts: BTreeSet<ConstKind>,
    pub div0: bool,
    pub error: Option<String>,
    /// Minimum counted share over the events used.
    pub share: Option<f64>,
    /// The value went through the `else` branch of an `A if #core_wide else B`: a per-thread
    /// estimate for counts that are not core-wide (the SKL/SKX/CLX core clocks from
    /// `ONE_THREAD_ACTIVE` / `REF_XCLK` instead of the AnyThread `THREAD_ANY`).
    pub estimated: bool,
}

impl Acc {
    fn merge(&mut self, o: &Acc) {
        self.missing.extend(o.missing.iter().copied());
        self.missing_retire.extend(o.missing_retire.iter().copied());
        self.missing_consts.extend(o.missing_consts.iter().copied());
        self.div0 |= o.div0;
        self.estimated |= o.estimated;
        if self.error.is_none() {
            self.error.clone_from(&o.error);
        }
        if let Some(s) = o.share {
            self.add_share(s);
        }
    }
    fn add_share(&mut self, s: f64) {
        self.share = Some(match self.share {
            Some(c) => c.min(s),
            None => s,
        });
    }
    fn set_error(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(msg);
        }
    }
    /// True when nothing prevents using the value (it may still be NaN from x/0).
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty()
            && self.missing_retire.is_empty()
            && self.missing_consts.is_empty()
            && self.error.is_none()
    }
}

#[derive(Debug)]
pub(crate) struct ItemResult {
    pub value: f64,
    pub acc: Acc,
}

enum Slot {
    Todo,
    Busy,
    Done(ItemResult),
}

#[derive(Clone, Copy)]
enum EvVal {
    Found(f64, Option<f64>),
    Missing,
    NotFinite(f64),
}

pub(crate) struct Ctx<'a> {
    cm: &'a CompiledModel,
    values: &'a dyn Values,
    consts: &'a Constants,
    events: Vec<Option<EvVal>>,
    items: Vec<Slot>,
    stack: Vec<u32>,
    /// Result handed out for a reference that closes a cycle (not memoized).
    cycle: ItemResult,
    /// The values count some events in several groups (see [`Values::grouped`]).
    grouped: bool,
    /// The group the item being evaluated reads its events from.
    group: Option<usize>,
    /// Event values by (slot, group), for grouped values.
    in_group: std::collections::HashMap<(u32, usize), EvVal>,
    /// Item results by (item, group), for grouped values.
    item_groups: std::collections::HashMap<(usize, usize), ItemResult>,
}

fn truthy(v: f64) -> bool {
    v != 0.0
}
fn b2f(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

impl<'a> Ctx<'a> {
    pub fn new(cm: &'a CompiledModel, values: &'a dyn Values, consts: &'a Constants) -> Self {
        Ctx {
            cm,
            values,
            consts,
            events: vec![None; cm.events.len()],
            items: (0..cm.items.len()).map(|_| Slot::Todo).collect(),
            stack: Vec::new(),
            cycle: ItemResult {
                value: f64::NAN,
                acc: Acc::default(),
            },
            grouped: values.grouped(),
            group: None,
            in_group: std::collections::HashMap::new(),
            item_groups: std::collections::HashMap::new(),
        }
    }

    fn here(&self) -> &'static str {
        self.stack
            .last()
            .map(|&i| self.cm.items[i as usize].name)
            .unwrap_or("threshold")
    }

    /// Evaluate (once) a node or metric.
    pub fn item(&mut self, i: usize) -> &ItemResult {
        if self.grouped {
            // perf computes a metric from one group, its references expanded into it: an
            // item evaluated inside another reads the outer one's group.
            let group = if self.stack.is_empty() {
                let cm = self.cm;
                let names: Vec<&str> = cm.items[i]
                    .events
                    .iter()
                    .map(|&e| cm.events[e as usize].id.as_str())
                    .collect();
                self.values.group_for(cm.items[i].name, &names)
            } else {
                self.group
            };
            if let Some(g) = group {
                return self.item_in(i, g);
            }
        }
        match &self.items[i] {
            Slot::Done(_) => {}
            Slot::Busy => return self.cycle_at(i),
            Slot::Todo => {
                self.items[i] = Slot::Busy;
                self.stack.push(i as u32);
                let cm = self.cm;
                let outer = self.group.take();
                let mut acc = Acc::default();
                let value = self.eval(&cm.items[i].formula, &mut acc);
                self.group = outer;
                self.stack.pop();
                self.items[i] = Slot::Done(ItemResult { value, acc });
            }
        }
        match &self.items[i] {
            Slot::Done(r) => r,
            // Unreachable: the slot was just filled; answer "no value" rather than panic.
            _ => &self.cycle,
        }
    }

    /// The result of a reference to item `i` while it is being evaluated: no value, and an
    /// error naming the cycle from `i` round to it again.
    fn cycle_at(&mut self, i: usize) -> &ItemResult {
        let pos = self
            .stack
            .iter()
            .position(|&s| s as usize == i)
            .unwrap_or(0);
        let mut chain: Vec<&str> = self.stack[pos..]
            .iter()
            .map(|&s| self.cm.items[s as usize].name)
            .collect();
        chain.push(self.cm.items[i].name);
        self.cycle = ItemResult {
            value: f64::NAN,
            acc: Acc {
                error: Some(format!("reference cycle: {}", chain.join(" -> "))),
                ..Acc::default()
            },
        };
        &self.cycle
    }

    /// Evaluate (once per group) an item whose events are read from group `g`.
    fn item_in(&mut self, i: usize, g: usize) -> &ItemResult {
        if !self.item_groups.contains_key(&(i, g)) {
            if self.stack.contains(&(i as u32)) {
                return self.cycle_at(i);
            }
            self.stack.push(i as u32);
            let outer = self.group.replace(g);
            let cm = self.cm;
            let mut acc = Acc::default();
            let value = self.eval(&cm.items[i].formula, &mut acc);
            self.group = outer;
            self.stack.pop();
            self.item_groups.insert((i, g), ItemResult { value, acc });
        }
        match self.item_groups.get(&(i, g)) {
            Some(r) => r,
            None => &self.cycle,
        }
    }

    /// Evaluate a threshold: `Some(true/false)`, or `None` when it cannot be decided.
    pub fn threshold(&mut self, e: &CExpr) -> Option<bool> {
        let mut acc = Acc::default();
        let v = self.eval(e, &mut acc);
        (acc.is_clean() && v.is_finite()).then(|| truthy(v))
    }

    fn event(&mut self, i: u32) -> EvVal {
        if let Some(g) = self.group {
            if let Some(&v) = self.in_group.get(&(i, g)) {
                return v;
            }
            let v = self.lookup(i, Some(g));
            self.in_group.insert((i, g), v);
            return v;
        }
        if let Some(v) = self.events[i as usize] {
            return v;
        }
        let v = self.lookup(i, None);
        self.events[i as usize] = Some(v);
        v
    }

    fn lookup(&self, i: u32, group: Option<usize>) -> EvVal {
        let slot = &self.cm.events[i as usize];
        let get = |id: &str| match group {
            Some(g) => self.values.event_in(id, g),
            None => self.values.event(id),
        };
        let share = |id: &str| match group {
            Some(g) => self.values.counted_share_in(id, g),
            None => self.values.counted_share(id),
        };
        let mut found = get(&slot.id);
        let mut key = slot.id.as_str();
        if found.is_none() && slot.raw != slot.id {
            found = get(&slot.raw);
            key = &slot.raw;
        }
        match found {
            Some(x) if x.is_finite() => EvVal::Found(x, share(key)),
            Some(x) => EvVal::NotFinite(x),
            None if slot.id.eq_ignore_ascii_case("duration_time") => match self.consts.duration_s {
                Some(d) => EvVal::Found(d, None),
                None => EvVal::Missing,
            },
            None => EvVal::Missing,
        }
    }

    fn constant(&self, k: ConstKind) -> Option<f64> {
        let c = self.consts;
        Some(match k {
            ConstKind::SmtOn => b2f(c.smt_on),
            ConstKind::Threads => c.threads_per_core as f64,
            ConstKind::CoreWide => b2f(c.core_wide),
            ConstKind::NumCpusOnline => c.num_cpus_online as f64,
            ConstKind::NumCores => c.num_cores as f64,
            ConstKind::NumSockets => c.num_sockets as f64,
            ConstKind::TscFreq => return c.tsc_freq_hz,
            ConstKind::DurationTime => return c.duration_s,
            ConstKind::ChasPerSocket => return c.chas_per_socket.map(f64::from),
        })
    }

    pub fn eval(&mut self, e: &CExpr, acc: &mut Acc) -> f64 {
        match e {
            CExpr::Num(n) => *n,
            CExpr::Const(k) => match self.constant(*k) {
                Some(v) => v,
                None => {
                    acc.missing_consts.insert(*k);
                    f64::NAN
                }
            },
            CExpr::UnknownConst(name) => {
                acc.set_error(format!(
                    "unknown constant #{name} in {}; known: #smt_on #threads #core_wide \
                     #num_cpus_online #num_cores #num_sockets #tsc_freq #duration_time \
                     #chas_per_socket",
                    self.here()
                ));
                f64::NAN
            }
            CExpr::Event(i) => match self.event(*i) {
                EvVal::Found(v, share) => {
                    if let Some(s) = share {
                        acc.add_share(s);
                    }
                    v
                }
                EvVal::Missing => {
                    acc.missing.insert(*i);
                    f64::NAN
                }
                EvVal::NotFinite(x) => {
                    acc.set_error(format!(
                        "event {} has the non-finite value {x}",
                        self.cm.events[*i as usize].id
                    ));
                    f64::NAN
                }
            },
            CExpr::RetireLat(i) => {
                let slot = &self.cm.retire[*i as usize];
                let measured = self
                    .values
                    .event(&slot.id)
                    .or_else(|| self.values.event(&slot.alt));
                match measured.or(slot.default) {
                    Some(v) if v.is_finite() => v,
                    Some(v) => {
                        acc.set_error(format!("{} has the non-finite value {v}", slot.id));
                        f64::NAN
                    }
                    None => {
                        acc.missing_retire.insert(*i);
                        f64::NAN
                    }
                }
            }
            CExpr::Ref(i) => {
                let r = self.item(*i as usize);
                acc.merge(&r.acc);
                r.value
            }
            CExpr::Neg(a) => -self.eval(a, acc),
            CExpr::Bin(op, a, b) => {
                let x = self.eval(a, acc);
                let y = self.eval(b, acc);
                if x.is_nan() || y.is_nan() {
                    return f64::NAN;
                }
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => {
                        if y == 0.0 {
                            acc.div0 = true;
                            f64::NAN
                        } else {
                            x / y
                        }
                    }
                    BinOp::Rem => {
                        // perf: integer remainder of the truncated operands.
                        let (xi, yi) = (x as i64, y as i64);
                        if yi == 0 {
                            acc.div0 = true;
                            f64::NAN
                        } else {
                            xi.wrapping_rem(yi) as f64
                        }
                    }
                    BinOp::Lt => b2f(x < y),
                    BinOp::Gt => b2f(x > y),
                    BinOp::And => b2f(truthy(x) && truthy(y)),
                    BinOp::Or => b2f(truthy(x) || truthy(y)),
                    BinOp::Xor => b2f(truthy(x) != truthy(y)),
                }
            }
            CExpr::If(then, cond, otherwise) => {
                let c = self.eval(cond, acc);
                if c.is_nan() {
                    // Undecidable: visit both branches so every missing input is reported.
                    self.eval(then, acc);
                    self.eval(otherwise, acc);
                    f64::NAN
                } else if truthy(c) {
                    self.eval(then, acc)
                } else {
                    if matches!(**cond, CExpr::Const(ConstKind::CoreWide)) {
                        acc.estimated = true;
                    }
                    self.eval(otherwise, acc)
                }
            }
            CExpr::Call(f, a, b) => {
                let x = self.eval(a, acc);
                let y = self.eval(b, acc);
                if x.is_nan() || y.is_nan() {
                    return f64::NAN;
                }
                match f {
                    Func::Min => x.min(y),
                    Func::Max => x.max(y),
                    Func::DRatio => {
                        if y == 0.0 {
                            0.0
                        } else {
                            x / y
                        }
                    }
                }
            }
        }
    }
}

/// Evaluate an expression that only uses constants and numbers; `None` when it touches an
/// event, a reference or an unknown constant. Used to prune branches in `required_events`.
pub(crate) fn const_eval(e: &CExpr, c: &Constants) -> Option<f64> {
    let v = match e {
        CExpr::Num(n) => *n,
        CExpr::Const(k) => match k {
            ConstKind::SmtOn => b2f(c.smt_on),
            ConstKind::Threads => c.threads_per_core as f64,
            ConstKind::CoreWide => b2f(c.core_wide),
            ConstKind::NumCpusOnline => c.num_cpus_online as f64,
            ConstKind::NumCores => c.num_cores as f64,
            ConstKind::NumSockets => c.num_sockets as f64,
            ConstKind::TscFreq => c.tsc_freq_hz?,
            ConstKind::DurationTime => c.duration_s?,
            ConstKind::ChasPerSocket => f64::from(c.chas_per_socket?),
        },
        CExpr::UnknownConst(_) | CExpr::Event(_) | CExpr::RetireLat(_) | CExpr::Ref(_) => {
            return None
        }
        CExpr::Neg(a) => -const_eval(a, c)?,
        CExpr::Bin(op, a, b) => {
            let (x, y) = (const_eval(a, c)?, const_eval(b, c)?);
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div if y != 0.0 => x / y,
                BinOp::Div | BinOp::Rem => return None,
                BinOp::Lt => b2f(x < y),
                BinOp::Gt => b2f(x > y),
                BinOp::And => b2f(truthy(x) && truthy(y)),
                BinOp::Or => b2f(truthy(x) || truthy(y)),
                BinOp::Xor => b2f(truthy(x) != truthy(y)),
            }
        }
        CExpr::If(t, cond, o) => {
            if truthy(const_eval(cond, c)?) {
                const_eval(t, c)?
            } else {
                const_eval(o, c)?
            }
        }
        CExpr::Call(f, a, b) => {
            let (x, y) = (const_eval(a, c)?, const_eval(b, c)?);
            match f {
                Func::Min => x.min(y),
                Func::Max => x.max(y),
                Func::DRatio => {
                    if y == 0.0 {
                        0.0
                    } else {
                        x / y
                    }
                }
            }
        }
    };
    (!v.is_nan()).then_some(v)
}
