//! Table types shared by the generated Intel tables and the hand-written AMD tables.
//! These types are the contract between the catalog, the formula engine (`tma-metrics`),
//! the counter layer (`tma-perf`) and the CLI. Extend them; do not rename fields.

use serde::{Deserialize, Serialize};

/// CPU vendor: CPUID leaf 0 on x86, the `CPU implementer` of `/proc/cpuinfo` on Arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Vendor {
    Intel,
    Amd,
    /// Arm Ltd cores (implementer 0x41): the Neoverse tables. Events are PMUv3 event
    /// numbers (`code`, 16 bits; `perf_event_attr.config` is the number itself, no umask).
    Arm,
}

/// Which core type of a hybrid part a table describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum CoreKind {
    /// Not a hybrid part.
    Uniform,
    /// Hybrid performance core (`cpu_core` PMU, CPUID.1AH core type 0x40).
    Performance,
    /// Hybrid efficiency core (`cpu_atom` PMU, CPUID.1AH core type 0x20).
    Efficiency,
}

/// How the level-1 (and possibly level-2) topdown slices are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Topdown {
    /// Generic counters only (SKL/SKX/CLX, E-cores, AMD).
    Generic,
    /// `slots` fixed counter + PERF_METRICS with the four level-1 slices (ICL/ICX/TGL).
    PerfMetricsL1,
    /// `slots` + PERF_METRICS with eight slices, level 1 and level 2 (SPR and later P-cores).
    PerfMetricsL2,
}

/// Unit of a node or metric value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Percent of pipeline slots (TMA tree nodes): 0..100.
    #[serde(alias = "PercentSlots")]
    PercentSlots,
    /// Percent of something else (cycles, time, ...): 0..100.
    #[serde(alias = "Percent")]
    Percent,
    /// A plain ratio or count (IPC, GHz, per-instruction figures...).
    #[serde(alias = "Number")]
    Number,
}

impl Unit {
    /// The name documents and CSV give it (`percent_slots`, `percent`, `number`; see
    /// `tma_render::schema` for the convention). Documents written before it used
    /// `PercentSlots`, `Percent` and `Number`, which [`Unit::parse`] and serde still read.
    pub fn name(self) -> &'static str {
        match self {
            Unit::PercentSlots => "percent_slots",
            Unit::Percent => "percent",
            Unit::Number => "number",
        }
    }

    /// The unit a document names, in either spelling; `None` for any other text (the units
    /// of software counts, such as `msec`).
    pub fn parse(name: &str) -> Option<Unit> {
        match name {
            "percent_slots" | "PercentSlots" => Some(Unit::PercentSlots),
            "percent" | "Percent" => Some(Unit::Percent),
            "number" | "Number" => Some(Unit::Number),
            _ => None,
        }
    }

    /// Whether values in this unit are percentages (0..100).
    pub fn is_percent(self) -> bool {
        matches!(self, Unit::PercentSlots | Unit::Percent)
    }

    /// Whether a unit named `name` (either spelling) is a percentage.
    pub fn names_percent(name: &str) -> bool {
        Unit::parse(name).is_some_and(Unit::is_percent)
    }
}

#[cfg(test)]
mod unit_tests {
    use super::Unit;

    #[test]
    fn unit_names_old_and_new() {
        for u in [Unit::PercentSlots, Unit::Percent, Unit::Number] {
            let json = serde_json::to_string(&u).unwrap();
            assert_eq!(json, format!("\"{}\"", u.name()));
            assert_eq!(serde_json::from_str::<Unit>(&json).unwrap(), u);
            assert_eq!(Unit::parse(u.name()), Some(u));
        }
        for (old, u) in [
            ("PercentSlots", Unit::PercentSlots),
            ("Percent", Unit::Percent),
            ("Number", Unit::Number),
        ] {
            assert_eq!(
                serde_json::from_str::<Unit>(&format!("\"{old}\"")).unwrap(),
                u
            );
            assert_eq!(Unit::parse(old), Some(u));
        }
        assert!(Unit::names_percent("percent_slots") && Unit::names_percent("Percent"));
        assert!(!Unit::names_percent("number") && !Unit::names_percent("msec"));
    }
}

/// What kind of counter an event needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum EventKind {
    /// An ordinary core event: general-purpose counter (or fixed counter, see `fixed`).
    Core,
    /// TOPDOWN.SLOTS (fixed counter 3 on ICL+); must lead a group holding PERF_METRICS events.
    Slots,
    /// A PERF_METRICS slice (ICL+ P-cores); the value is the byte index 0..=7
    /// (retiring, bad-spec, fe-bound, be-bound, heavy-ops, br-mispredict, fetch-lat, mem-bound).
    PerfMetrics(u8),
    /// The time-stamp counter (`msr/tsc/`), used by frequency / utilization metrics.
    Tsc,
}

/// One PMU event of a model, with everything needed to program it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EventDef {
    /// Canonical upper-case vendor name, e.g. `UOPS_RETIRED.MS`, `ls_not_halted_cyc` for AMD
    /// (AMD names are kept lower case as AMD writes them; lookups are case-insensitive).
    pub name: &'static str,
    /// Event select. Intel: 8 bits. AMD: up to 12 bits (bits 8..11 go to config bits 32..35).
    /// Arm: the 16-bit PMUv3 event number (`config` bits 0..15), umask 0.
    pub code: u16,
    pub umask: u8,
    /// Counter mask (cmask / threshold), 0 = none.
    pub cmask: u8,
    pub inv: bool,
    pub edge: bool,
    /// Intel AnyThread bit (SMT-wide counting; pre-Ice-Lake only).
    pub any_thread: bool,
    /// Extra MSR the event needs (0x1A6/0x1A7 offcore response, 0x3F6 load latency,
    /// 0x3F7 frontend), 0 when none. Its value goes to `perf_event_attr.config1`.
    pub msr_index: u16,
    pub msr_value: u64,
    /// Bit mask of the general-purpose counters the event may use (bit i = counter i).
    /// 0 when the event can only live on a fixed counter.
    pub counter_mask: u32,
    /// Fixed counter index when the event has one (0 = instructions, 1 = cycles,
    /// 2 = ref cycles, 3 = slots).
    pub fixed: Option<u8>,
    /// The event can be sampled precisely (Intel PEBS / AMD IBS-capable).
    pub precise: bool,
    /// Intel `TakenAlone`: no other event sharing the same extra MSR may run at once.
    pub taken_alone: bool,
    pub kind: EventKind,
    /// Suggested sampling period (perfmon `SampleAfterValue`), 0 when unknown.
    pub sample_after: u64,
}

/// Compact constructors for the event tables: one short row per event
/// (`ev("UOPS_RETIRED.MS", 0xc2, 0x4, 0, PRECISE, 0xff, 2000003)`), so that tables holding
/// every event of a vendor file stay small to compile and to read.
pub mod event_row {
    use super::{EventDef, EventKind};

    /// Flag bits of [`ev`]: invert, edge detect, AnyThread, precise, taken alone.
    pub const INV: u8 = 1;
    pub const EDGE: u8 = 2;
    pub const ANY: u8 = 4;
    pub const PRECISE: u8 = 8;
    pub const ALONE: u8 = 16;

    /// An ordinary core event on the general-purpose counters `counter_mask`, no extra MSR,
    /// no fixed counter; `flags` is a sum of [`INV`], [`EDGE`], [`ANY`], [`PRECISE`], [`ALONE`].
    pub const fn ev(
        name: &'static str,
        code: u16,
        umask: u8,
        cmask: u8,
        flags: u8,
        counter_mask: u32,
        sample_after: u64,
    ) -> EventDef {
        EventDef {
            name,
            code,
            umask,
            cmask,
            inv: flags & INV != 0,
            edge: flags & EDGE != 0,
            any_thread: flags & ANY != 0,
            msr_index: 0,
            msr_value: 0,
            counter_mask,
            fixed: None,
            precise: flags & PRECISE != 0,
            taken_alone: flags & ALONE != 0,
            kind: EventKind::Core,
            sample_after,
        }
    }

    impl EventDef {
        /// The event programs the extra MSR `index` with `value` (`config1`).
        pub const fn with_msr(mut self, index: u16, value: u64) -> Self {
            self.msr_index = index;
            self.msr_value = value;
            self
        }
        /// The event lives on fixed counter `index`.
        pub const fn on_fixed(mut self, index: u8) -> Self {
            self.fixed = Some(index);
            self
        }
        /// The event is of `kind` rather than [`EventKind::Core`].
        pub const fn with_kind(mut self, kind: EventKind) -> Self {
            self.kind = kind;
            self
        }
    }
}

/// One node of the TMA tree (or AMD pipeline-utilization tree).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NodeDef {
    /// `Frontend_Bound`, `Memory_Bound`, ... (AMD: `frontend_bound`, `backend_bound_cpu`, ...).
    pub name: &'static str,
    /// Parent node name, `None` at level 1.
    pub parent: Option<&'static str>,
    /// 1 for the top level.
    pub level: u8,
    /// Expression in the catalog formula language, value in `unit`.
    pub formula: &'static str,
    /// Boolean expression (formula language) true when the node is worth looking at;
    /// it may refer to other nodes (usually the parent). Empty when the data gives none.
    pub threshold: &'static str,
    /// Events to sample to find this node's bottleneck in the code, best first; may be empty.
    pub locate_with: &'static [&'static str],
    /// One line, in our own words.
    pub description: &'static str,
    pub unit: Unit,
    /// perfmon `CountDomain` (Slots, Clocks, ...), empty if unknown.
    pub count_domain: &'static str,
}

impl NodeDef {
    /// A drill-down figure: a number shown under its parent to explain it (Arm's stage-2
    /// metrics: MPKI, miss ratios, the operation mix), not a share of the slots. The tables
    /// mark one with the constant threshold `0`: never over it, so never a bottleneck
    /// candidate, and the tree shows it under a parent on the bottleneck's path, unmarked.
    pub fn is_figure(&self) -> bool {
        self.threshold == "0"
    }
}

/// A helper / info metric referenced by node formulas (e.g. slots, core clocks, IPC).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MetricDef {
    pub name: &'static str,
    pub formula: &'static str,
    pub description: &'static str,
    pub unit: Unit,
    /// The group shown with the metric: `Thread`, `Core`, `Inst_Mix`, `Frontend`, `Memory`,
    /// `Memory_TLB`, `System`, `Bottleneck`... (Intel: the `Info_<group>_` part of the name).
    pub group: &'static str,
    /// The metric groups `perf stat -M` knows it by, `;`-separated (perfmon `MetricGroup`,
    /// e.g. `Ret;Summary`); empty when the data names none.
    pub perf_groups: &'static str,
}

impl MetricDef {
    /// The name without its group prefix: `IPC` for `Info_Thread_IPC`, `Mispredictions` for
    /// `Bottleneck_Mispredictions`; the whole name when it has no such prefix (AMD).
    pub fn short_name(&self) -> &'static str {
        let name = self.name;
        let rest = name.strip_prefix("Info_").unwrap_or(name);
        rest.strip_prefix(self.group)
            .and_then(|r| r.strip_prefix('_'))
            .filter(|r| !r.is_empty())
            .unwrap_or(name)
    }
    /// True when `perf stat -M` lists the metric under `group` (case-insensitive).
    pub fn in_perf_group(&self, group: &str) -> bool {
        self.perf_groups
            .split(';')
            .any(|g| !g.is_empty() && g.eq_ignore_ascii_case(group))
    }
}

/// Everything the tool knows about one microarchitecture (one core type of it).
#[derive(Debug, Serialize)]
pub struct Model {
    /// Short key used by `--cpu`: `skx`, `spr`, `adl`, `adl-e`, `zen4`, ...
    pub key: &'static str,
    /// Human name: "Sapphire Rapids".
    pub name: &'static str,
    pub vendor: Vendor,
    pub core_kind: CoreKind,
    /// sysfs PMU that counts the core events: `cpu`, `cpu_core` or `cpu_atom`.
    pub pmu: &'static str,
    /// Where the table came from, e.g. "Intel perfmon SPR metrics 1.3, TMA 5.2".
    pub source: &'static str,
    /// The TMA version of the tables: perfmon's `TmaVersion` ("5.2" on SPR, EMR and GNR).
    /// `None` where the data names none: the E-core trees (from the kernel `cpu_atom`
    /// metrics, which carry no version) and AMD, whose pipeline-utilization data is not a
    /// versioned TMA release.
    pub tma_version: Option<&'static str>,
    /// Pipeline slots per cycle (issue / dispatch width used by the model).
    pub slots_per_cycle: u32,
    /// General-purpose counters per logical CPU (with SMT on where it matters).
    pub gp_counters: u32,
    /// Fixed counters.
    pub fixed_counters: u32,
    pub topdown: Topdown,
    pub events: &'static [EventDef],
    /// Tree nodes; a parent always comes before its children.
    pub nodes: &'static [NodeDef],
    /// Helper metrics the nodes or thresholds may reference.
    pub metrics: &'static [MetricDef],
    /// Default retire latencies (cycles) for `EVENT:retire_latency` operands.
    pub retire_latencies: &'static [(&'static str, f64)],
}

/// An event reference as written in a formula: base name plus modifiers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId<'a> {
    pub base: &'a str,
    /// Modifiers in order, without the `:` (e.g. `["c1", "e1"]`).
    pub modifiers: Vec<&'a str>,
}

impl<'a> EventId<'a> {
    /// Split `UOPS_RETIRED.MS:c1:e1` into base and modifiers.
    pub fn parse(s: &'a str) -> Self {
        let mut it = s.split(':');
        let base = it.next().unwrap_or("");
        EventId {
            base,
            modifiers: it.collect(),
        }
    }
}

/// Tables up to this many rows are searched in place by [`Model::event`], [`Model::node`]
/// and [`Model::metric`].
const SCAN_AT_MOST: usize = 32;

/// A name compared and hashed without regard to ASCII case (as `eq_ignore_ascii_case`): the
/// key of the case-blind lookups (event and node names here, readings in tma-perf).
#[derive(Debug, Clone, Copy)]
pub struct Caseless<'a>(pub &'a str);

impl PartialEq for Caseless<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_ignore_ascii_case(other.0)
    }
}

impl Eq for Caseless<'_> {}

impl std::hash::Hash for Caseless<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // Lower-cased a chunk at a time: names equal in any case have one length, so they
        // are cut into the same chunks and hash alike.
        let mut buf = [0u8; 32];
        for chunk in self.0.as_bytes().chunks(buf.len()) {
            let b = &mut buf[..chunk.len()];
            b.copy_from_slice(chunk);
            b.make_ascii_lowercase();
            h.write(b);
        }
        h.write_usize(self.0.len());
    }
}

/// The first row of `table` whose name (`name_of`) is `name` in any ASCII case: in place for
/// a short table, else through the table's name index, built once per table (keyed by the
/// `'static` slice and the row type) and giving the same row as the search in place.
fn row_named<T: Sync + 'static>(
    table: &'static [T],
    name_of: fn(&T) -> &str,
    name: &str,
) -> Option<&'static T> {
    use std::any::TypeId;
    use std::collections::HashMap;
    use std::sync::OnceLock;
    if table.len() <= SCAN_AT_MOST {
        return table.iter().find(|r| name_of(r).eq_ignore_ascii_case(name));
    }
    // Row positions by name in any ASCII case, per table: its row type, address and length.
    type Index = HashMap<Caseless<'static>, usize>;
    static CACHE: crate::cache::Leaked<(TypeId, usize, usize), Index> = OnceLock::new();
    let key = (TypeId::of::<T>(), table.as_ptr() as usize, table.len());
    let index = crate::cache::get_or_build(&CACHE, key, || {
        let mut index = Index::with_capacity(table.len());
        for (pos, r) in table.iter().enumerate() {
            index.entry(Caseless(name_of(r))).or_insert(pos);
        }
        index
    });
    let pos = index.get(&Caseless(name));
    pos.map(|&p| &table[p])
}

impl Model {
    /// Look up an event by its base name, case-insensitively.
    pub fn event(&self, base: &str) -> Option<&'static EventDef> {
        row_named(self.events, |e| e.name, base)
    }
    /// Look up a tree node by name, case-insensitively.
    pub fn node(&self, name: &str) -> Option<&'static NodeDef> {
        row_named(self.nodes, |n| n.name, name)
    }
    /// Look up a helper metric by name, case-insensitively.
    pub fn metric(&self, name: &str) -> Option<&'static MetricDef> {
        row_named(self.metrics, |m| m.name, name)
    }
    /// Children of `parent` (or the level-1 nodes for `None`), in table order.
    pub fn children<'s>(
        &'s self,
        parent: Option<&'s str>,
    ) -> impl Iterator<Item = &'static NodeDef> + 's {
        self.nodes.iter().filter(move |n| match (n.parent, parent) {
            (None, None) => true,
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
            _ => false,
        })
    }
}

/// How to program one event id (base event plus modifiers) with `perf_event_open`.
/// Produced by [`Model::encode`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Encoding {
    /// sysfs PMU name: the model's core PMU (`cpu`, `cpu_core`), or `msr` for the TSC.
    pub pmu: &'static str,
    /// `perf_event_attr.config` for that PMU (raw event select layout).
    pub config: u64,
    /// `perf_event_attr.config1` (offcore response / load latency / frontend MSR value).
    pub config1: u64,
    pub kind: EventKind,
    /// Fixed counter index when the (unmodified) event lives on one.
    pub fixed: Option<u8>,
    /// General-purpose counters the event may use (bit i = counter i); 0 = fixed only.
    pub counter_mask: u32,
    pub precise: bool,
    pub taken_alone: bool,
    /// Extra MSR programmed with `config1`, 0 when none.
    pub msr_index: u16,
    /// `:SUP` modifier: count kernel mode only.
    pub exclude_user: bool,
    /// `:USER` modifier: count user mode only.
    pub exclude_kernel: bool,
    /// `:retire_latency` modifier: the operand is the event's average retire latency
    /// (TPEBS sampling, or the model's default from [`Model::retire_latencies`]).
    pub retire_latency: bool,
    /// The event id this encodes, as given.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::Caseless;
    use std::collections::HashSet;

    #[test]
    fn caseless_names_are_one_key_in_any_case_and_length() {
        let long = "UOPS_DISPATCHED.PORT_2_3_10__c1__e1_and_a_name_longer_than_one_chunk";
        let mut set = HashSet::new();
        let names = ["", "a", "TOPDOWN.SLOTS", long];
        let lower: Vec<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
        let upper: Vec<String> = names.iter().map(|n| n.to_ascii_uppercase()).collect();
        for i in 0..names.len() {
            assert!(set.insert(Caseless(names[i])));
            assert!(!set.insert(Caseless(&lower[i])));
            assert!(!set.insert(Caseless(&upper[i])));
        }
        assert!(set.insert(Caseless("TOPDOWN.SLOTS.")));
        assert_ne!(Caseless("é"), Caseless("É"), "ASCII case only");
    }
}
