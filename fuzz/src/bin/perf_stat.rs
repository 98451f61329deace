//! perf stat output: `-x` CSV, `-j` JSON and the human-readable text, through the importer
//! (`tma_perfstat::parse`, which streams through `IntervalReader`, the reader behind
//! `tma stat --import`, `tma diff` and `tma report` of recordings).
//!
//! What the importer returns is not evaluated here: `tma_stat::evaluate` compiles the CPU
//! model's formulas on each run (about 0.5 s in this instrumented build), too slow for a
//! fuzzer; the formula parser has a target of its own (`expr`).
use tma_fuzz::Bound;

fn main() {
    tma_fuzz::main(
        "perf_stat",
        Bound {
            per_byte: 64,
            fixed: 8 << 20,
        },
        |data| {
            if let Ok(rec) = tma_perfstat::parse(data) {
                for iv in &rec.intervals {
                    let _ = tma_perfstat::aggregate(iv);
                }
            }
        },
    );
}
