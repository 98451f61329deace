//! Event ids <-> perf_event_open encodings <-> perf command-line specs.
//!
//! * [`Model::encode`]: event id (`UOPS_RETIRED.MS:c1:e1`) to `perf_event_attr` fields.
//! * [`Model::perf_event_spec`]: event id to the form `perf stat -e` accepts.
//! * [`Model::resolve_perf_event`]: an event as `perf stat` printed it (vendor name, perf alias,
//!   raw encoding, or our own `perf_event_spec` form) back to the event id the formulas use.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::error::CatalogError;
use crate::types::{CoreKind, Encoding, EventId, EventKind, Model, Vendor};

/// perf alias names of the PERF_METRICS bytes 0..=7 (README section 6).
pub const TOPDOWN_ALIASES: [&str; 8] = [
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
    "topdown-heavy-ops",
    "topdown-br-mispredict",
    "topdown-fetch-lat",
    "topdown-mem-bound",
];

/// On the hybrid E-core PMU (`cpu_atom`) the sysfs events `topdown-retiring`,
/// `topdown-bad-spec`, `topdown-fe-bound` and `topdown-be-bound` are ordinary generic
/// events, not PERF_METRICS (pmu-data README section 6): their raw configs per E-core model,
/// in [`TOPDOWN_ALIASES`] order (retiring, bad-spec, fe-bound, be-bound).
const ECORE_TOPDOWN_CONFIGS: &[(&str, [u64; 4])] = &[
    // Gracemont: retiring 0xC2, bad-spec 0x73 umask 0x06, fe-bound 0x71, be-bound 0x74.
    ("adl-e", [0x00C2, 0x0673, 0x0071, 0x0074]),
    // Crestmont: retiring 0x72, bad-spec 0x73, fe-bound 0x71, be-bound 0x74.
    ("mtl-e", [0x0072, 0x0073, 0x0071, 0x0074]),
];

/// Words of the formula language that are not event or metric names.
const KEYWORDS: &[&str] = &["if", "else", "min", "max", "d_ratio"];

/// The identifiers (with their modifiers) of a formula-language expression, in order of
/// appearance, duplicates kept; `#constants`, numbers and keywords are skipped.
pub fn formula_identifiers(formula: &str) -> Vec<&str> {
    let b = formula.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'#' {
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                // digits, '.', exponent and hex digits
                if (b[i] == b'e' || b[i] == b'E') && b.get(i + 1) == Some(&b'-') {
                    i += 1;
                }
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            while i + 1 < b.len()
                && b[i] == b':'
                && (b[i + 1].is_ascii_alphanumeric() || b[i + 1] == b'_' || b[i + 1] == b'=')
            {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'=')
                {
                    i += 1;
                }
            }
            let word = &formula[start..i];
            if !KEYWORDS.contains(&word) {
                out.push(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// perf's `name=` cannot hold `:` or `,` (nor `=` unquoted): `:` becomes `__` and `=` `_eq_`.
pub fn mangle_name(id: &str) -> String {
    id.replace(':', "__").replace('=', "_eq_")
}

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Raw fields an encoding is built from.
#[derive(Debug, Clone, Copy, Default)]
struct Fields {
    code: u16,
    umask: u8,
    cmask: u8,
    inv: bool,
    edge: bool,
    any: bool,
}

impl Fields {
    fn config(&self, vendor: Vendor) -> u64 {
        let base = (self.code as u64 & 0xFF)
            | (self.umask as u64) << 8
            | (self.edge as u64) << 18
            | (self.inv as u64) << 23
            | (self.cmask as u64) << 24;
        match vendor {
            Vendor::Intel => base | (self.any as u64) << 21,
            Vendor::Amd => base | ((self.code as u64 >> 8) & 0xF) << 32,
            // PMUv3: `config` is the event number; there are no umask/cmask/inv/edge fields.
            Vendor::Arm => self.code as u64,
        }
    }
}

/// Per-model cache of the event ids and their encodings (resolving perf output matches
/// against every id, so this is computed once per model).
struct Index {
    ids: Vec<String>,
    encodings: Vec<(String, Encoding)>,
    /// Lower-cased id and lower-cased mangled id to the position in `ids` of the first id
    /// so named (what a search of `ids` in order finds).
    by_name: HashMap<String, usize>,
    /// The base events of `ids` (`EventId::base`).
    used_bases: std::collections::HashSet<String>,
    /// Positions in the model's event table by (code, umask), in table order.
    by_code: HashMap<(u16, u8), Vec<usize>>,
}

/// Identity of a model's tables: the `'static` slices (and the key and PMU names, by
/// address) never move or get freed.
type IndexKey = [usize; 10];

fn index_of(m: &Model) -> &'static Index {
    static CACHE: crate::cache::Leaked<IndexKey, Index> = OnceLock::new();
    thread_local! {
        // The last model this thread asked for: resolving one spec asks several times.
        static LAST: std::cell::Cell<Option<(IndexKey, &'static Index)>> =
            const { std::cell::Cell::new(None) };
    }
    let key: IndexKey = [
        m.events.as_ptr() as usize,
        m.events.len(),
        m.nodes.as_ptr() as usize,
        m.nodes.len(),
        m.metrics.as_ptr() as usize,
        m.metrics.len(),
        m.key.as_ptr() as usize,
        m.key.len(),
        m.pmu.as_ptr() as usize,
        m.pmu.len(),
    ];
    if let Some((k, i)) = LAST.get() {
        if k == key {
            return i;
        }
    }
    // Built outside the lock (encoding reads no index).
    let index = crate::cache::get_or_build(&CACHE, key, || build_index(m));
    LAST.set(Some((key, index)));
    index
}

fn build_index(m: &Model) -> Index {
    let ids = m.event_ids_uncached();
    let encodings = ids
        .iter()
        .filter_map(|id| m.encode(id).ok().map(|e| (id.clone(), e)))
        .collect();
    let mut by_name = HashMap::new();
    for (pos, id) in ids.iter().enumerate() {
        by_name.entry(id.to_ascii_lowercase()).or_insert(pos);
        by_name
            .entry(mangle_name(id).to_ascii_lowercase())
            .or_insert(pos);
    }
    let used_bases = ids
        .iter()
        .map(|id| EventId::parse(id).base.to_string())
        .collect();
    let mut by_code: HashMap<(u16, u8), Vec<usize>> = HashMap::new();
    for (pos, d) in m.events.iter().enumerate() {
        by_code.entry((d.code, d.umask)).or_default().push(pos);
    }
    Index {
        ids,
        encodings,
        by_name,
        used_bases,
        by_code,
    }
}

impl Model {
    /// Every event id the model's formulas and locate-with lists use, sorted and
    /// de-duplicated (names of nodes and metrics excluded).
    pub fn event_ids(&self) -> Vec<String> {
        index_of(self).ids.clone()
    }

    fn event_ids_uncached(&self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        let mut add = |id: &str| {
            if self.node(id).is_none() && self.metric(id).is_none() {
                ids.push(id.to_string());
            }
        };
        for n in self.nodes {
            formula_identifiers(n.formula)
                .into_iter()
                .for_each(&mut add);
            n.locate_with.iter().for_each(|l| add(l));
        }
        for m in self.metrics {
            formula_identifiers(m.formula)
                .into_iter()
                .for_each(&mut add);
        }
        ids.sort();
        ids.dedup();
        ids
    }

    /// The `perf_event_attr` fields for an event id (base event plus modifiers).
    pub fn encode(&self, id: &str) -> Result<Encoding, CatalogError> {
        let eid = EventId::parse(id);
        let def = self
            .event(eid.base)
            .ok_or_else(|| CatalogError::UnknownEvent {
                model: self.key,
                id: id.to_string(),
            })?;
        let mut f = Fields {
            code: def.code,
            umask: def.umask,
            cmask: def.cmask,
            inv: def.inv,
            edge: def.edge,
            any: def.any_thread,
        };
        let mut config1 = if def.msr_index != 0 { def.msr_value } else { 0 };
        let (mut excl_user, mut excl_kernel, mut retire_latency) = (false, false, false);
        let mut modified = false;
        for m in &eid.modifiers {
            let bad = || CatalogError::BadModifier {
                id: id.to_string(),
                modifier: m.to_string(),
            };
            let flag = |v: &str| match v {
                "" | "1" => Ok(true),
                "0" => Ok(false),
                _ => Err(bad()),
            };
            // PMUv3 events have no counter mask, umask, edge, invert or extra MSR: only the
            // privilege filters apply.
            if self.vendor == Vendor::Arm && !matches!(*m, "SUP" | "USER") {
                return Err(bad());
            }
            match *m {
                "SUP" => excl_user = true,
                "USER" => excl_kernel = true,
                "perf_metrics" | "percore" => {}
                "retire_latency" => retire_latency = true,
                _ if m.starts_with("ocr_msr_val=") => {
                    config1 = parse_num(&m["ocr_msr_val=".len()..]).ok_or_else(bad)?;
                }
                _ if m.starts_with('c') => {
                    let v = parse_num(&m[1..]).filter(|v| *v <= 0xFF).ok_or_else(bad)?;
                    f.cmask = v as u8;
                    modified = true;
                }
                _ if m.starts_with('u') => {
                    let v = parse_num(&m[1..]).filter(|v| *v <= 0xFF).ok_or_else(bad)?;
                    f.umask = v as u8;
                    modified = true;
                }
                _ if m.starts_with('e') => {
                    f.edge = flag(&m[1..])?;
                    modified = true;
                }
                _ if m.starts_with('i') => {
                    f.inv = flag(&m[1..])?;
                    modified = true;
                }
                _ => return Err(bad()),
            }
        }
        let (pmu, config) = match def.kind {
            EventKind::Tsc => ("msr", 0),
            _ => (self.pmu, f.config(self.vendor)),
        };
        let all_gp = if self.gp_counters >= 32 {
            u32::MAX
        } else {
            (1u32 << self.gp_counters) - 1
        };
        Ok(Encoding {
            pmu,
            config,
            config1,
            kind: def.kind,
            // A changed encoding cannot use the fixed counter: it needs a general one.
            fixed: if modified { None } else { def.fixed },
            counter_mask: if modified && def.counter_mask == 0 {
                all_gp
            } else {
                def.counter_mask
            },
            precise: def.precise,
            taken_alone: def.taken_alone,
            msr_index: def.msr_index,
            exclude_kernel: excl_kernel,
            exclude_user: excl_user,
            retire_latency,
            name: id.to_string(),
        })
    }

    /// The form `perf stat -e` accepts for an event id: `slots`, `topdown-fe-bound`,
    /// `msr/tsc/`, or `cpu/event=0xc2,umask=0x2,cmask=0x1,name=UOPS_RETIRED.SLOTS__c1/`
    /// (`name=` is the id through [`mangle_name`]; `k`/`u`/`R` modifiers follow the `/`).
    /// On hybrid parts the PMU is named (`cpu_core/slots/`).
    pub fn perf_event_spec(&self, id: &str) -> Result<String, CatalogError> {
        let e = self.encode(id)?;
        let hybrid = self.pmu != "cpu";
        let alias = |a: &str| {
            if hybrid {
                format!("{}/{a}/", self.pmu)
            } else {
                a.to_string()
            }
        };
        let plain = !e.exclude_kernel && !e.exclude_user && !e.retire_latency;
        match e.kind {
            EventKind::Tsc => return Ok("msr/tsc/".to_string()),
            EventKind::Slots if plain && e.config == 0x0400 => return Ok(alias("slots")),
            EventKind::PerfMetrics(b) if plain && e.config == 0x8000 + ((b as u64) << 8) => {
                if let Some(a) = TOPDOWN_ALIASES.get(b as usize) {
                    return Ok(alias(a));
                }
            }
            _ => {}
        }
        let c = e.config;
        if self.vendor == Vendor::Arm {
            // The PMUv3 format has `event` (config:0-15) and no umask term.
            let mut s = format!("{}/event={c:#x},name={}/", e.pmu, mangle_name(id));
            if e.exclude_user {
                s.push('k');
            }
            if e.exclude_kernel {
                s.push('u');
            }
            return Ok(s);
        }
        let mut s = format!("{}/event={:#x}", e.pmu, (c & 0xFF) | ((c >> 32) & 0xF) << 8);
        s += &format!(",umask={:#x}", (c >> 8) & 0xFF);
        if (c >> 24) & 0xFF != 0 {
            s += &format!(",cmask={:#x}", (c >> 24) & 0xFF);
        }
        if c & (1 << 18) != 0 {
            s += ",edge";
        }
        if c & (1 << 21) != 0 {
            s += ",any";
        }
        if c & (1 << 23) != 0 {
            s += ",inv";
        }
        if e.config1 != 0 {
            s += &format!(",config1={:#x}", e.config1);
        }
        s += &format!(",name={}/", mangle_name(id));
        if e.exclude_user {
            s.push('k');
        }
        if e.exclude_kernel {
            s.push('u');
        }
        if e.retire_latency {
            s.push('R');
        }
        Ok(s)
    }

    /// The event id the formulas use for an event as `perf stat` names it; see
    /// [`Model::resolve_perf_event_all`]. When several ids share one encoding (for example
    /// `TOPDOWN.SLOTS` and `TOPDOWN.SLOTS:perf_metrics`) this returns the id named in the
    /// spec, else the shortest one.
    pub fn resolve_perf_event(&self, spec: &str) -> Result<String, CatalogError> {
        let all = self.resolve_perf_event_all(spec)?;
        // resolve_perf_event_all never returns an empty list.
        all.into_iter()
            .next()
            .ok_or_else(|| CatalogError::UnknownPerfEvent {
                spec: spec.to_string(),
                model: self.key,
            })
    }

    /// Every event id of [`Model::event_ids`] that a perf event spec counts, best first.
    /// Accepted: a vendor event name in any case with perfmon modifiers
    /// (`uops_retired.ms:c1:e1`); our mangled `name=` form (`UOPS_RETIRED.MS__c1__e1`);
    /// perf aliases `slots`, `topdown-*`, `instructions`, `cycles`, `ref-cycles`, `msr/tsc/`
    /// (optionally as `cpu/…/` or `cpu_core/…/`); raw `cpu/event=0x..,umask=0x..,cmask=..,
    /// inv,edge,any,config1=..,name=X/[kuR]`, `rNNNN`, and `cpu@EV\,cmask\=1@`.
    /// Raw forms match by encoding (config, config1, privilege filter) against every id; an
    /// encoding no formula uses resolves to the id its table event's name would give
    /// (`cpu/event=0x20,umask=0x8,cmask=4/` as `OFFCORE_REQUESTS_OUTSTANDING.ALL_DATA_RD:c4`).
    pub fn resolve_perf_event_all(&self, spec: &str) -> Result<Vec<String>, CatalogError> {
        let ids: &[String] = &index_of(self).ids;
        let unknown = || CatalogError::UnknownPerfEvent {
            spec: spec.to_string(),
            model: self.key,
        };
        let s = spec.trim().replace('\\', "");
        if s.is_empty() {
            return Err(unknown());
        }
        // 1. A name the formulas use, plain or mangled.
        if let Some(id) = self.find_id_by_name(&s) {
            return Ok(self.with_same_encoding(&id));
        }
        // 2. A vendor name with modifiers that the formulas do not use as such.
        if let Ok(e) = self.encode(&s) {
            let canon = {
                let eid = EventId::parse(&s);
                let def_name = self.event(eid.base).map(|d| d.name).unwrap_or(eid.base);
                std::iter::once(def_name)
                    .chain(eid.modifiers.iter().copied())
                    .collect::<Vec<_>>()
                    .join(":")
            };
            let rest: Vec<String> = self
                .matching(&e)
                .into_iter()
                .filter(|i| *i != canon)
                .collect();
            let mut v = vec![canon];
            v.extend(rest);
            return Ok(v);
        }
        // 3. PMU-qualified forms.
        let (pmu, body, mods) = split_pmu(&s);
        if let Some(pmu) = pmu {
            if pmu == "msr" {
                return if body.eq_ignore_ascii_case("tsc") {
                    self.ids_of_kind(EventKind::Tsc).ok_or_else(unknown)
                } else {
                    Err(unknown())
                };
            }
            if self.vendor == Vendor::Arm {
                if !is_arm_core_pmu(pmu) && pmu != self.pmu {
                    return Err(self.bad(
                        spec,
                        &format!(
                            "`{pmu}` is not an Arm core PMU (the {} table reads events of \
                             `armv8_pmuv3_N`, `armv8_neoverse_*` or `armv9_neoverse_*`)",
                            self.key
                        ),
                    ));
                }
            } else if pmu != "cpu" && pmu != "cpu_core" && pmu != "cpu_atom" {
                return Err(self.bad(spec, &format!("unknown PMU `{pmu}`")));
            }
            // On a hybrid part each core type has its own PMU: an event counted on the other
            // one must not feed this model's formulas.
            if self.vendor != Vendor::Arm && pmu != "cpu" && self.pmu != "cpu" && pmu != self.pmu {
                return Err(self.bad(
                    spec,
                    &format!(
                        "it was counted on the `{pmu}` PMU, but the {} table is for `{}`; \
                         read `{pmu}` events with the table of that core type",
                        self.key, self.pmu
                    ),
                ));
            }
        }
        // 4. perf aliases.
        if !body.contains(['=', ',']) {
            if let Some(v) = self.resolve_alias(&body.to_ascii_lowercase(), mods) {
                return v.ok_or_else(unknown);
            }
            // `rNNNN` / `r0xNNNN`; on Arm also inside the PMU (`armv8_pmuv3_0/r3e/`).
            if pmu.is_none() || self.vendor == Vendor::Arm {
                if let Some(hex) = body.strip_prefix('r').filter(|h| {
                    let h = h.strip_prefix("0x").unwrap_or(h);
                    !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit())
                }) {
                    let hex = hex.strip_prefix("0x").unwrap_or(hex);
                    let config = u64::from_str_radix(hex, 16)
                        .map_err(|_| self.bad(spec, "`rNNNN` needs a hex config"))?;
                    return self.match_raw_lenient(spec, config, None, mods);
                }
            }
            if pmu.is_some() {
                // `cpu/EVENT_NAME/`
                if let Some(id) = self.find_id_by_name(body) {
                    return Ok(self.with_same_encoding(&id));
                }
                // A vendor name no formula uses as such (`cpu_core/TOPDOWN.SLOTS/`, where
                // the formulas name `TOPDOWN.SLOTS:perf_metrics`): as the bare name reads.
                if mods.is_empty() && self.encode(body).is_ok() {
                    return self.resolve_perf_event_all(body);
                }
            }
            return Err(unknown());
        }
        // 5. Term lists: `event=..,umask=..` or `EVENT_NAME,cmask=1`.
        let mut f = Fields::default();
        let mut config: Option<u64> = None;
        let mut config1: Option<u64> = None;
        let mut named: Option<String> = None;
        let mut any_field = false;
        for term in body.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (k, v) = match term.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (term, None),
            };
            let num = || {
                v.and_then(parse_num)
                    .ok_or_else(|| self.bad(spec, &format!("term `{term}` needs a number")))
            };
            let flag = || match v {
                None => Ok(true),
                Some(_) => num().map(|n| n != 0),
            };
            match k {
                "event" => {
                    let n = num()?;
                    let width = if self.vendor == Vendor::Arm {
                        0xFFFF
                    } else {
                        0xFFF
                    };
                    f.code = (n & width) as u16;
                    any_field = true;
                }
                "umask" | "cmask" | "inv" | "edge" | "any" if self.vendor == Vendor::Arm => {
                    return Err(self.bad(
                        spec,
                        &format!("term `{term}`: Arm PMUv3 events have only `event=`"),
                    ));
                }
                "umask" => f.umask = (num()? & 0xFF) as u8,
                "cmask" => f.cmask = (num()? & 0xFF) as u8,
                "inv" => f.inv = flag()?,
                "edge" => f.edge = flag()?,
                "any" => f.any = flag()?,
                "config" => config = Some(num()?),
                "config1" | "offcore_rsp" | "ldlat" | "frontend" => config1 = Some(num()?),
                "name" => named = v.map(str::to_string),
                "period" | "freq" | "no-overwrite" | "overwrite" | "percore" => {}
                _ if v.is_none() && !any_field => {
                    // an event name as the first term: start from its encoding
                    let e = self.encode(k).map_err(|_| unknown())?;
                    let c = e.config;
                    f = if self.vendor == Vendor::Arm {
                        Fields {
                            code: (c & 0xFFFF) as u16,
                            ..Fields::default()
                        }
                    } else {
                        Fields {
                            code: ((c & 0xFF) | ((c >> 32) & 0xF) << 8) as u16,
                            umask: (c >> 8) as u8,
                            cmask: (c >> 24) as u8,
                            inv: c & (1 << 23) != 0,
                            edge: c & (1 << 18) != 0,
                            any: c & (1 << 21) != 0,
                        }
                    };
                    if e.config1 != 0 {
                        config1 = Some(e.config1);
                    }
                    any_field = true;
                }
                _ => return Err(self.bad(spec, &format!("unsupported term `{term}`"))),
            }
        }
        let config = config.unwrap_or_else(|| f.config(self.vendor));
        let mut v = self.match_raw_lenient(spec, config, config1, mods)?;
        if let Some(n) = named {
            if let Some(id) = self.find_id_by_name(&n) {
                if let Some(pos) = v.iter().position(|x| *x == id) {
                    let id = v.remove(pos);
                    v.insert(0, id);
                }
            } else if let Some(canon) = self.named_alike(&n, v.first()) {
                // `name=` gives a documented event no formula uses, with this encoding: the
                // spec resolves as that name does (the name, then the formula ids alike).
                v.retain(|x| ids.contains(x) && *x != canon);
                v.insert(0, canon);
            }
        }
        if v.is_empty() {
            Err(unknown())
        } else {
            Ok(v)
        }
    }

    /// The canonical id of a `name=` value (mangled or not) when it encodes exactly as
    /// `first`, the id its encoding resolved to.
    fn named_alike(&self, name: &str, first: Option<&String>) -> Option<String> {
        let id = name.replace("__", ":").replace("_eq_", "=");
        let (a, b) = (self.encode(&id).ok()?, self.encode(first?).ok()?);
        let same = (a.pmu, a.config, a.config1, a.exclude_kernel, a.exclude_user)
            == (b.pmu, b.config, b.config1, b.exclude_kernel, b.exclude_user)
            && a.retire_latency == b.retire_latency;
        let eid = EventId::parse(&id);
        let def = self.event(eid.base)?;
        same.then(|| {
            std::iter::once(def.name)
                .chain(eid.modifiers.iter().copied())
                .collect::<Vec<_>>()
                .join(":")
        })
    }

    fn bad(&self, spec: &str, why: &str) -> CatalogError {
        CatalogError::BadPerfEvent {
            spec: spec.to_string(),
            why: why.to_string(),
            model: self.key,
        }
    }

    /// The first of the model's ids named `name`, plain or mangled, in any case.
    fn find_id_by_name(&self, name: &str) -> Option<String> {
        let index = index_of(self);
        index
            .by_name
            .get(&name.to_ascii_lowercase())
            .map(|&pos| index.ids[pos].clone())
    }

    /// `id` first, then every other id with the same encoding.
    fn with_same_encoding(&self, id: &str) -> Vec<String> {
        let mut v = vec![id.to_string()];
        if let Ok(e) = self.encode(id) {
            v.extend(self.matching(&e).into_iter().filter(|x| x != id));
        }
        v
    }

    fn matching(&self, e: &Encoding) -> Vec<String> {
        let mut v: Vec<String> = index_of(self)
            .encodings
            .iter()
            .filter(|(_, x)| {
                x.pmu == e.pmu
                    && x.config == e.config
                    && x.config1 == e.config1
                    && x.exclude_kernel == e.exclude_kernel
                    && x.exclude_user == e.exclude_user
                    && x.retire_latency == e.retire_latency
            })
            .map(|(id, _)| id.clone())
            .collect();
        v.sort_by_key(|s| (s.len(), s.clone()));
        v
    }

    /// Match a raw encoding. When the spec gave no config1 (`rNNNN`, or terms without
    /// `config1=`/`offcore_rsp=`...), an event that needs an extra-MSR value still matches on
    /// `config` alone if that is unambiguous (all candidates share one config1 value).
    fn match_raw_lenient(
        &self,
        spec: &str,
        config: u64,
        config1: Option<u64>,
        mods: &str,
    ) -> Result<Vec<String>, CatalogError> {
        let unknown = || CatalogError::UnknownPerfEvent {
            spec: spec.to_string(),
            model: self.key,
        };
        let exact = self.match_raw(config, config1.unwrap_or(0), mods);
        if !exact.is_empty() {
            return Ok(exact);
        }
        if config1.is_some() {
            return self
                .id_from_table(config, config1, mods)
                .ok_or_else(unknown);
        }
        // A documented event with exactly this encoding and no config1 is what perf counts
        // (SKL's `OFFCORE_RESPONSE`, whose MSR value the user sets), before any event that
        // needs a config1 the spec left out.
        if let Some(v) = self.id_from_table(config, Some(0), mods) {
            return Ok(v);
        }
        let probe = self.raw_probe(config, 0, mods);
        let mut cands: Vec<(&String, u64)> = index_of(self)
            .encodings
            .iter()
            .filter(|(_, x)| {
                x.pmu == probe.pmu
                    && x.config == probe.config
                    && x.exclude_kernel == probe.exclude_kernel
                    && x.exclude_user == probe.exclude_user
                    && x.retire_latency == probe.retire_latency
            })
            .map(|(id, x)| (id, x.config1))
            .collect();
        cands.sort_by_key(|(id, _)| (id.len(), id.to_string()));
        let mut values: Vec<u64> = cands.iter().map(|(_, c)| *c).collect();
        values.dedup();
        values.sort_unstable();
        values.dedup();
        match values.len() {
            0 => self.id_from_table(config, None, mods).ok_or_else(unknown),
            1 => Ok(cands.into_iter().map(|(id, _)| id.clone()).collect()),
            _ => Err(self.bad(
                spec,
                &format!(
                    "it matches events that differ only in config1 ({}); add `config1=` (or `offcore_rsp=`)",
                    cands
                        .iter()
                        .map(|(id, _)| id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// A raw encoding that no formula uses, as the id its event name would resolve to: an
    /// event of the model's table with exactly this encoding (`OFFCORE_REQUESTS_OUTSTANDING.
    /// CYCLES_WITH_DATA_RD`), else a base event with no cmask/inv/edge of its own plus the
    /// modifiers that give it (`OFFCORE_REQUESTS_OUTSTANDING.ALL_DATA_RD:c4`). Among
    /// events sharing an encoding, one the formulas use wins, then table order. Without
    /// `config1` the candidates must agree on it; as one-element list for the callers.
    fn id_from_table(&self, config: u64, config1: Option<u64>, mods: &str) -> Option<Vec<String>> {
        let want = if self.vendor == Vendor::Arm {
            Fields {
                code: (config & 0xFFFF) as u16,
                ..Fields::default()
            }
        } else {
            Fields {
                code: match self.vendor {
                    Vendor::Intel => (config & 0xFF) as u16,
                    Vendor::Amd | Vendor::Arm => {
                        ((config & 0xFF) | ((config >> 32) & 0xF) << 8) as u16
                    }
                },
                umask: (config >> 8) as u8,
                cmask: (config >> 24) as u8,
                inv: config & (1 << 23) != 0,
                edge: config & (1 << 18) != 0,
                any: self.vendor == Vendor::Intel && config & (1 << 21) != 0,
            }
        };
        // Bits outside the fields (or any=1 on AMD) name no table event.
        if want.config(self.vendor) != config {
            return None;
        }
        let index = index_of(self);
        let used = &index.used_bases;
        // (rank, table position, id, config1): exact events before base events with
        // modifiers, events the formulas use first.
        let mut found: Vec<(u8, usize, String, u64)> = Vec::new();
        let same_code = index
            .by_code
            .get(&(want.code, want.umask))
            .map_or(&[][..], Vec::as_slice);
        for &pos in same_code {
            let d = &self.events[pos];
            if d.kind == EventKind::Tsc {
                continue;
            }
            let c1 = if d.msr_index != 0 { d.msr_value } else { 0 };
            if config1.is_some_and(|c| c != c1) || d.any_thread != want.any {
                continue;
            }
            let exact = d.cmask == want.cmask && d.inv == want.inv && d.edge == want.edge;
            let base = d.cmask == 0 && !d.inv && !d.edge;
            if !exact && !base {
                continue;
            }
            let mut id = d.name.to_string();
            if !exact {
                if want.cmask != 0 {
                    id += &format!(":c{}", want.cmask);
                }
                if want.inv {
                    id += ":i1";
                }
                if want.edge {
                    id += ":e1";
                }
            }
            let user = mods.contains('u') && !mods.contains('k');
            let kernel = mods.contains('k') && !mods.contains('u');
            if kernel {
                id += ":SUP";
            } else if user {
                id += ":USER";
            }
            if mods.contains('R') {
                id += ":retire_latency";
            }
            let rank = u8::from(!exact) * 2 + u8::from(!used.contains(d.name));
            found.push((rank, pos, id, c1));
        }
        let first = found.iter().min_by_key(|(rank, pos, _, _)| (*rank, *pos))?;
        if config1.is_none() && found.iter().any(|f| f.3 != first.3) {
            return None;
        }
        Some(vec![first.2.clone()])
    }

    fn raw_probe(&self, config: u64, config1: u64, mods: &str) -> Encoding {
        Encoding {
            pmu: self.pmu,
            config,
            config1,
            kind: EventKind::Core,
            fixed: None,
            counter_mask: 0,
            precise: false,
            taken_alone: false,
            msr_index: 0,
            exclude_kernel: mods.contains('u') && !mods.contains('k'),
            exclude_user: mods.contains('k') && !mods.contains('u'),
            retire_latency: mods.contains('R'),
            name: String::new(),
        }
    }

    fn match_raw(&self, config: u64, config1: u64, mods: &str) -> Vec<String> {
        let probe = Encoding {
            pmu: self.pmu,
            config,
            config1,
            kind: EventKind::Core,
            fixed: None,
            counter_mask: 0,
            precise: false,
            taken_alone: false,
            msr_index: 0,
            exclude_kernel: mods.contains('u') && !mods.contains('k'),
            exclude_user: mods.contains('k') && !mods.contains('u'),
            retire_latency: mods.contains('R'),
            name: String::new(),
        };
        self.matching(&probe)
    }

    fn ids_of_kind(&self, kind: EventKind) -> Option<Vec<String>> {
        let mut v: Vec<String> = index_of(self)
            .encodings
            .iter()
            .filter(|(_, e)| {
                e.kind == kind && !e.retire_latency && !e.exclude_user && !e.exclude_kernel
            })
            .map(|(id, _)| id.clone())
            .collect();
        v.sort_by_key(|s| (s.len(), s.clone()));
        (!v.is_empty()).then_some(v)
    }

    /// `Some(result)` when `name` is a perf alias; `None` when it is not an alias at all.
    fn resolve_alias(&self, name: &str, mods: &str) -> Option<Option<Vec<String>>> {
        if name == "slots" {
            return Some(self.ids_of_kind(EventKind::Slots));
        }
        if let Some(b) = TOPDOWN_ALIASES.iter().position(|a| *a == name) {
            if self.core_kind == CoreKind::Efficiency {
                let config = ECORE_TOPDOWN_CONFIGS
                    .iter()
                    .find(|(k, _)| *k == self.key)
                    .and_then(|(_, c)| c.get(b));
                return Some(config.and_then(|c| {
                    let v = self.match_raw(*c, 0, mods);
                    (!v.is_empty()).then_some(v)
                }));
            }
            return Some(self.ids_of_kind(EventKind::PerfMetrics(b as u8)));
        }
        let config = match (name, self.vendor) {
            ("instructions", Vendor::Intel) => 0xC0,
            ("cycles" | "cpu-cycles", Vendor::Intel) => 0x3C,
            ("ref-cycles", Vendor::Intel) => 0x0300,
            ("instructions", Vendor::Amd) => 0xC0,
            ("cycles" | "cpu-cycles", Vendor::Amd) => 0x76,
            // The kernel's PMUv3 map of perf's generic hardware events (arm_pmuv3.c):
            // CPU_CYCLES, INST_RETIRED, PC_WRITE_RETIRED, BR_MIS_PRED, L1D_CACHE,
            // L1D_CACHE_REFILL, STALL_FRONTEND, STALL_BACKEND.
            ("cycles" | "cpu-cycles", Vendor::Arm) => 0x11,
            ("instructions", Vendor::Arm) => 0x08,
            ("branches" | "branch-instructions", Vendor::Arm) => 0x0C,
            ("branch-misses", Vendor::Arm) => 0x10,
            ("cache-references", Vendor::Arm) => 0x04,
            ("cache-misses", Vendor::Arm) => 0x03,
            ("stalled-cycles-frontend", Vendor::Arm) => 0x23,
            ("stalled-cycles-backend", Vendor::Arm) => 0x24,
            _ => return None,
        };
        let v = self.match_raw(config, 0, mods);
        Some((!v.is_empty()).then_some(v))
    }
}

/// An Arm core PMU as the kernel names it: `armv8_pmuv3` / `armv8_pmuv3_N` (ACPI and generic
/// device-tree probes), or the core's own name (`armv8_neoverse_n1`, `armv9_neoverse_v2`,
/// `armv8_cortex_a76`, ...).
pub fn is_arm_core_pmu(pmu: &str) -> bool {
    let rest = pmu
        .strip_prefix("armv8_")
        .or_else(|| pmu.strip_prefix("armv9_"));
    rest.is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// Split `cpu/body/mods`, `cpu@body@mods` or a bare `body:mods`-less name into
/// (pmu, body, trailing modifier letters).
fn split_pmu(s: &str) -> (Option<&str>, &str, &str) {
    for sep in ['/', '@'] {
        if let Some((pmu, rest)) = s.split_once(sep) {
            if let Some((body, mods)) = rest.rsplit_once(sep) {
                if !pmu.is_empty() && pmu.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return (Some(pmu), body, mods.trim_start_matches(':'));
                }
            }
        }
    }
    // `cycles:u` style
    match s.rsplit_once(':') {
        Some((b, m)) if !m.is_empty() && m.chars().all(|c| matches!(c, 'u' | 'k' | 'R')) => {
            (None, b, m)
        }
        _ => (None, s, ""),
    }
}
