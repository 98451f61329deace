//! The `evaluate` target under afl: [`tma_fuzz::targets::evaluate`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::evaluate::TARGET);
}
