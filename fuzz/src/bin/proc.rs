//! The `proc` target under afl: [`tma_fuzz::targets::proc`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::proc::TARGET);
}
