//! What one counter should count, independent of how it gets opened: an [`EventSpec`].
//!
//! Catalog encodings (`tma_catalog::Model::encode`) and user `-e` events both become an
//! `EventSpec`; [`crate::attr`] turns it into a `perf_event_attr`, [`crate::plan`] packs specs
//! into counter groups.

use serde::{Deserialize, Serialize};

/// Which kind of counter an event needs (mirrors `tma_catalog::EventKind`, plus the events
/// that do not live on a core PMU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecKind {
    /// An ordinary core event on a general-purpose or fixed counter of `pmu`.
    Core,
    /// TOPDOWN.SLOTS: leader of the group holding PERF_METRICS events.
    Slots,
    /// A PERF_METRICS slice, byte index 0..=7 (config 0x8000 + 0x100 * index).
    PerfMetrics(u8),
    /// Time-stamp counter (`msr/tsc/`).
    Tsc,
    /// A generic hardware event (`PERF_TYPE_HARDWARE` id, e.g. 0 = cycles), possibly bound to
    /// a hybrid PMU (`pmu` non-empty: its type goes into config bits 32-63).
    Hardware(u64),
    /// A kernel software event.
    Software(SoftwareEvent),
    /// A tracepoint (`PERF_TYPE_TRACEPOINT`), by its tracefs id (`events/SYS/NAME/id`);
    /// counted like a software event, without a hardware counter.
    Tracepoint(u64),
}

/// The kernel software events `tma` counts (`PERF_TYPE_SOFTWARE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SoftwareEvent {
    TaskClock,
    CpuClock,
    PageFaults,
    ContextSwitches,
    CpuMigrations,
    MinorFaults,
    MajorFaults,
}

impl SoftwareEvent {
    /// Every software event, in the order `tma stat` prints them.
    pub const ALL: [SoftwareEvent; 7] = [
        SoftwareEvent::TaskClock,
        SoftwareEvent::CpuClock,
        SoftwareEvent::ContextSwitches,
        SoftwareEvent::CpuMigrations,
        SoftwareEvent::PageFaults,
        SoftwareEvent::MinorFaults,
        SoftwareEvent::MajorFaults,
    ];

    /// The perf name (`task-clock`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SoftwareEvent::TaskClock => "task-clock",
            SoftwareEvent::CpuClock => "cpu-clock",
            SoftwareEvent::PageFaults => "page-faults",
            SoftwareEvent::ContextSwitches => "context-switches",
            SoftwareEvent::CpuMigrations => "cpu-migrations",
            SoftwareEvent::MinorFaults => "minor-faults",
            SoftwareEvent::MajorFaults => "major-faults",
        }
    }

    /// `PERF_COUNT_SW_*` id.
    pub fn config(self) -> u64 {
        use perf_event_open_sys::bindings as b;
        (match self {
            SoftwareEvent::TaskClock => b::PERF_COUNT_SW_TASK_CLOCK,
            SoftwareEvent::CpuClock => b::PERF_COUNT_SW_CPU_CLOCK,
            SoftwareEvent::PageFaults => b::PERF_COUNT_SW_PAGE_FAULTS,
            SoftwareEvent::ContextSwitches => b::PERF_COUNT_SW_CONTEXT_SWITCHES,
            SoftwareEvent::CpuMigrations => b::PERF_COUNT_SW_CPU_MIGRATIONS,
            SoftwareEvent::MinorFaults => b::PERF_COUNT_SW_PAGE_FAULTS_MIN,
            SoftwareEvent::MajorFaults => b::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
        }) as u64
    }

    /// Parse a perf software event name (also the perf aliases `cs`, `migrations`, `faults`).
    pub fn parse(name: &str) -> Option<SoftwareEvent> {
        let n = name.trim().to_ascii_lowercase();
        let n = n.strip_suffix(":u").unwrap_or(&n);
        Some(match n {
            "task-clock" => SoftwareEvent::TaskClock,
            "cpu-clock" => SoftwareEvent::CpuClock,
            "page-faults" | "faults" => SoftwareEvent::PageFaults,
            "context-switches" | "cs" => SoftwareEvent::ContextSwitches,
            "cpu-migrations" | "migrations" => SoftwareEvent::CpuMigrations,
            "minor-faults" => SoftwareEvent::MinorFaults,
            "major-faults" => SoftwareEvent::MajorFaults,
            _ => return None,
        })
    }

    /// The event counts nanoseconds rather than occurrences.
    pub fn is_time(self) -> bool {
        matches!(self, SoftwareEvent::TaskClock | SoftwareEvent::CpuClock)
    }
}

/// One event to count: everything needed to open it and to place it on a counter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventSpec {
    /// Canonical id as the formulas name it (`UOPS_RETIRED.MS:c1:e1`, `task-clock`).
    pub name: String,
    /// sysfs PMU name (`cpu`, `cpu_core`, `cpu_atom`, `msr`, `software`); empty for generic
    /// hardware events on a non-hybrid machine.
    pub pmu: String,
    pub kind: SpecKind,
    /// `perf_event_attr.config` (raw encoding in the PMU's format).
    pub config: u64,
    /// `perf_event_attr.config1` (offcore response, load latency, frontend MSR value).
    pub config1: u64,
    /// Fixed counter index (0 instructions, 1 cycles, 2 ref-cycles, 3 slots).
    pub fixed: Option<u8>,
    /// General-purpose counters the event may use (bit i = counter i); 0 = fixed only.
    pub counter_mask: u32,
    /// Needs an extra MSR no other event may use at the same time (Intel `TakenAlone`).
    pub taken_alone: bool,
    /// The extra MSR (0x1A6, 0x3F6, 0x3F7...), 0 when none.
    pub msr_index: u16,
    pub exclude_kernel: bool,
    pub exclude_user: bool,
}

impl EventSpec {
    /// A software event.
    pub fn software(ev: SoftwareEvent) -> Self {
        EventSpec {
            name: ev.name().to_string(),
            pmu: "software".to_string(),
            kind: SpecKind::Software(ev),
            config: ev.config(),
            config1: 0,
            fixed: None,
            counter_mask: 0,
            taken_alone: false,
            msr_index: 0,
            exclude_kernel: false,
            exclude_user: false,
        }
    }

    /// An ordinary raw core event on `pmu` with the given config.
    pub fn raw(name: impl Into<String>, pmu: impl Into<String>, config: u64) -> Self {
        EventSpec {
            name: name.into(),
            pmu: pmu.into(),
            kind: SpecKind::Core,
            config,
            config1: 0,
            fixed: None,
            counter_mask: u32::MAX,
            taken_alone: false,
            msr_index: 0,
            exclude_kernel: false,
            exclude_user: false,
        }
    }

    /// Does this event need a hardware PMU counter?
    pub fn is_hardware(&self) -> bool {
        !matches!(self.kind, SpecKind::Software(_) | SpecKind::Tracepoint(_))
    }

    /// Does this event need a core PMU (`cpu`, `cpu_core`, `cpu_atom`, any further core type
    /// `cpu_…` of a hybrid part, or a generic hardware event)? An ENOENT/EOPNOTSUPP for such
    /// an event means "no hardware counters".
    pub fn needs_core_pmu(&self) -> bool {
        match self.kind {
            SpecKind::Hardware(_) | SpecKind::Slots | SpecKind::PerfMetrics(_) => true,
            SpecKind::Core => {
                self.pmu.is_empty()
                    || tma_host::sysfs::CORE_PMU_NAMES.contains(&self.pmu.as_str())
                    || self.pmu.starts_with("cpu_")
            }
            SpecKind::Tsc | SpecKind::Software(_) | SpecKind::Tracepoint(_) => false,
        }
    }

    /// Build from a catalog encoding, whose `config` is opened as it is: the catalog's tables
    /// already hold what perf opens (instructions 0xC0, core cycles 0x3C, each conversion
    /// from perfmon named in `tma_catalog::conversions`), and a fixed-counter pseudo
    /// encoding left there is meant: `INST_RETIRED.PREC_DIST` 0x0100 asks the kernel for
    /// fixed counter 0 with precise distribution, where 0xC0 would be a general counter.
    /// Returns `None` for `:retire_latency` operands, which are not counted.
    pub fn from_encoding(e: &tma_catalog::Encoding) -> Option<Self> {
        if e.retire_latency {
            return None;
        }
        let kind = match e.kind {
            tma_catalog::EventKind::Core => SpecKind::Core,
            tma_catalog::EventKind::Slots => SpecKind::Slots,
            tma_catalog::EventKind::PerfMetrics(i) => SpecKind::PerfMetrics(i),
            tma_catalog::EventKind::Tsc => SpecKind::Tsc,
        };
        Some(EventSpec {
            name: e.name.clone(),
            pmu: e.pmu.to_string(),
            kind,
            config: e.config,
            config1: e.config1,
            fixed: e.fixed,
            counter_mask: e.counter_mask,
            taken_alone: e.taken_alone,
            msr_index: e.msr_index,
            exclude_kernel: e.exclude_kernel,
            exclude_user: e.exclude_user,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intel(
        name: &str,
        kind: tma_catalog::EventKind,
        config: u64,
        fixed: Option<u8>,
    ) -> EventSpec {
        EventSpec::from_encoding(&tma_catalog::Encoding {
            pmu: "cpu",
            config,
            config1: 0,
            kind,
            fixed,
            counter_mask: 0,
            precise: false,
            taken_alone: false,
            msr_index: 0,
            exclude_user: false,
            exclude_kernel: false,
            retire_latency: false,
            name: name.to_string(),
        })
        .unwrap()
    }

    #[test]
    fn fixed_counter_encodings_open_as_the_catalog_gives_them() {
        use tma_catalog::EventKind::*;
        // What perf opens for each fixed-counter event: the catalog's config, unchanged.
        // INST_RETIRED.PREC_DIST keeps perfmon's 0x00/0x01 (fixed counter 0 with PDIST);
        // a rewrite to 0xC0 would sample INST_RETIRED.ANY_P on a general counter.
        for key in ["icl", "icx", "tgl", "spr", "emr", "gnr", "adl", "mtl"] {
            let m = tma_catalog::by_name(key).unwrap();
            let open = |id: &str| EventSpec::from_encoding(&m.encode(id).unwrap()).unwrap();
            let p = open("INST_RETIRED.PREC_DIST");
            assert_eq!(
                (p.config, p.fixed, p.counter_mask),
                (0x0100, Some(0), 0),
                "{key}"
            );
            assert_eq!(p.pmu, m.pmu, "{key}");
            assert_eq!(open("INST_RETIRED.ANY").config, 0xC0, "{key}");
            let c = ["CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.CORE"]
                .into_iter()
                .find(|id| m.event(id).is_some())
                .unwrap();
            assert_eq!((open(c).config, open(c).fixed), (0x3C, Some(1)), "{key}");
        }
        // Skylake era: THREAD_ANY keeps its AnyThread bit (21) on 0x3C.
        let skx = tma_catalog::by_name("skx").unwrap();
        let any = EventSpec::from_encoding(&skx.encode("CPU_CLK_UNHALTED.THREAD_ANY").unwrap());
        assert_eq!(any.unwrap().config, 0x0020_003C);
        // Pseudo encodings given directly are not rewritten either.
        assert_eq!(
            intel("INST_RETIRED.PREC_DIST", Core, 0x0100, Some(0)).config,
            0x0100
        );
        // REF_TSC 0x0300 is accepted everywhere and stays.
        assert_eq!(
            intel("CPU_CLK_UNHALTED.REF_TSC", Core, 0x0300, Some(2)).config,
            0x0300
        );
        let s = intel("TOPDOWN.SLOTS:perf_metrics", Slots, 0x0400, Some(3));
        assert_eq!((s.kind, s.config), (SpecKind::Slots, 0x0400));
    }

    #[test]
    fn zen4_catalog_encoding() {
        let m = tma_catalog::by_name("zen4").unwrap();
        let z = EventSpec::from_encoding(
            &m.encode("de_no_dispatch_per_slot.no_ops_from_frontend:c6")
                .unwrap(),
        )
        .unwrap();
        // pmu-data README 5.1: 0x1060001A0.
        assert_eq!((z.pmu.as_str(), z.config), ("cpu", 0x1060001A0));
        assert_eq!(z.fixed, None);
    }

    #[test]
    fn software_names() {
        assert_eq!(
            SoftwareEvent::parse("cs"),
            Some(SoftwareEvent::ContextSwitches)
        );
        assert_eq!(
            SoftwareEvent::parse("Task-Clock"),
            Some(SoftwareEvent::TaskClock)
        );
        assert_eq!(SoftwareEvent::parse("cycles"), None);
        assert_eq!(SoftwareEvent::TaskClock.config(), 1);
    }
}
