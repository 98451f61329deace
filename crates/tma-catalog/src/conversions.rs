//! The places where the generated Intel tables deliberately hold another encoding than the
//! perfmon row they were made from, each with its reason. Every other field of every
//! generated Intel event is perfmon's (checked by `tests/perfmon_rows.rs` when the vendor
//! data is present, and by `tests/intel.rs` on the tables alone).
//!
//! perfmon writes the events of the first fixed counters with a pseudo encoding: event
//! 0x00 and umask = fixed-counter index + 1 (pmu-data README 3.1). For the plain
//! instruction and core-cycle counts perf opens the architectural events instead (0xC0,
//! 0x3C), which the kernel still schedules on the fixed counter and which every kernel
//! accepts, where 0x0100 and 0x0200 are refused before Ice Lake. Those are the
//! conversions below, matched by event name.
//!
//! Not converted, on purpose: `INST_RETIRED.PREC_DIST` (Ice Lake and later). Its 0x0100
//! is what perfmon and perf open: it asks the kernel for fixed counter 0 with precise
//! distribution (PDIST). Rewritten to 0xC0 it would be `INST_RETIRED.ANY_P` on a general
//! counter, sampled without PDIST. `CPU_CLK_UNHALTED.REF_TSC` (0x0300) and `TOPDOWN.SLOTS`
//! (0x0400) keep perfmon's encoding too; no architectural event stands for them.
//!
//! `cargo xtask gen-tables` reads this file through `#[path]` and applies the table; it
//! refuses to run when a named event's perfmon row no longer has the encoding written here.
//! This file must stay self-contained (no `crate::` paths) for that reason.

/// One deliberate difference between a perfmon row and the generated table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodingConversion {
    /// perfmon `EventName`.
    pub event: &'static str,
    /// The fixed counter perfmon names for the event (`Fixed counter N`).
    pub fixed: u8,
    /// perfmon's `(EventCode, UMask)`.
    pub perfmon: (u16, u8),
    /// `(event code, umask)` in the generated tables. Every other field stays perfmon's
    /// (the AnyThread bit of `CPU_CLK_UNHALTED.THREAD_ANY` included).
    pub ours: (u16, u8),
    /// Why, in one line.
    pub reason: &'static str,
}

/// Every deliberate encoding conversion, by perfmon event name.
pub static ENCODING_CONVERSIONS: &[EncodingConversion] = &[
    EncodingConversion {
        event: "INST_RETIRED.ANY",
        fixed: 0,
        perfmon: (0x00, 0x01),
        ours: (0xC0, 0x00),
        reason: "perf opens instructions as the architectural event 0xC0, which the kernel \
                 places on fixed counter 0 and accepts on every model (0x0100 only from Ice Lake on)",
    },
    EncodingConversion {
        event: "CPU_CLK_UNHALTED.THREAD",
        fixed: 1,
        perfmon: (0x00, 0x02),
        ours: (0x3C, 0x00),
        reason: "perf opens core cycles as the architectural event 0x3C, which the kernel \
                 places on fixed counter 1 and accepts on every model (0x0200 only from Ice Lake on)",
    },
    EncodingConversion {
        event: "CPU_CLK_UNHALTED.CORE",
        fixed: 1,
        perfmon: (0x00, 0x02),
        ours: (0x3C, 0x00),
        reason: "the E-core name of core cycles: the architectural event 0x3C, as for \
                 CPU_CLK_UNHALTED.THREAD",
    },
    EncodingConversion {
        event: "CPU_CLK_UNHALTED.THREAD_ANY",
        fixed: 1,
        perfmon: (0x00, 0x02),
        ours: (0x3C, 0x00),
        reason: "core cycles of both SMT threads (Skylake era): 0x3C with the AnyThread bit, \
                 as perf opens it; those kernels refuse 0x0200",
    },
];

/// The conversion for a perfmon event name (exact, upper case as perfmon writes it).
pub fn conversion_for(event: &str) -> Option<&'static EncodingConversion> {
    ENCODING_CONVERSIONS.iter().find(|c| c.event == event)
}
