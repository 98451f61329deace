//! The `expr` target under afl: [`tma_fuzz::targets::expr`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::expr::TARGET);
}
