//! The `perf_data_z` target under afl: [`tma_fuzz::targets::perf_data_z`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::perf_data_z::TARGET);
}
