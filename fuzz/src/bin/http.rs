//! The `http` target under afl: [`tma_fuzz::targets::http`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::http::TARGET);
}
