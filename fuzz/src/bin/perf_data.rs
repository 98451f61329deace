//! The `perf_data` target under afl: [`tma_fuzz::targets::perf_data`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::perf_data::TARGET);
}
