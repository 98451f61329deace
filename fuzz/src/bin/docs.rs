//! The `docs` target under afl: [`tma_fuzz::targets::docs`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::docs::TARGET);
}
