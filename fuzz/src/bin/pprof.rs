//! The `pprof` target under afl: [`tma_fuzz::targets::pprof`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::pprof::TARGET);
}
