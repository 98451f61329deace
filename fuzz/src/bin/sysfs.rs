//! The `sysfs` target under afl: [`tma_fuzz::targets::sysfs`].
fn main() {
    tma_fuzz_afl::main(tma_fuzz::targets::sysfs::TARGET);
}
