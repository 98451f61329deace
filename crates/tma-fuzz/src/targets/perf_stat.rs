//! perf stat output: `-x` CSV, `-j` JSON and the human-readable text, through the importer
//! (`tma_perfstat::parse`, which streams through `IntervalReader`, the reader behind
//! `tma stat --import`, `tma diff` and `tma report` of recordings).
//!
//! What the importer returns is not evaluated here: `tma_stat::evaluate` compiles the CPU
//! model's formulas on each run (about 0.5 s in this instrumented build), too slow for a
//! fuzzer; the formula parser has a target of its own (`expr`).
use crate::{Bound, Target};

pub const TARGET: Target = Target {
    name: "perf_stat",
    setup: crate::no_setup,
    bound: |_| Bound {
        per_byte: 64,
        fixed: 8 << 20,
    },
    run: |data| {
        if let Ok(rec) = tma_perfstat::parse(data) {
            for iv in &rec.intervals {
                let _ = tma_perfstat::aggregate(iv);
            }
        }
    },
};
