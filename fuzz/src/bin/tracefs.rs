//! The `tracefs` target under afl: [`tma_fuzz::targets::tracefs`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::tracefs::TARGET);
}
