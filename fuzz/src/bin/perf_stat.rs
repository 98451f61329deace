//! The `perf_stat` target under afl: [`tma_fuzz::targets::perf_stat`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::perf_stat::TARGET);
}
