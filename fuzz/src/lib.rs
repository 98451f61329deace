//! afl's side of the fuzz targets: each binary of fuzz/src/bin runs one target of
//! crates/tma-fuzz (the target, its bounds and its seeds are there; see fuzz/README.md).
//!
//! Run without afl (`fuzz/target/debug/<target> < file`), a target reads one input from
//! stdin and applies the same checks: that is how a crash is reproduced.

use std::time::Instant;

use tma_fuzz::{check, last_peak, Target};

/// The target's main: afl's persistent loop over [`check`]. Outside afl (no `__AFL_SHM_ID`)
/// it reads one input from stdin, checks it and says what it used.
pub fn main(target: Target) {
    (target.setup)();
    let name = target.name;
    if std::env::var_os("__AFL_SHM_ID").is_none() {
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut data).expect("read stdin");
        let bound = (target.bound)(&data);
        let start = Instant::now();
        check(name, bound, &data, target.run);
        let first = start.elapsed();
        // TMA_FUZZ_REPEAT=N: run the input N more times and say the mean time of those (the
        // steady-state cost of one input, what afl's persistent loop pays), to find slow
        // targets without afl.
        let repeat: u32 = std::env::var("TMA_FUZZ_REPEAT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if repeat > 0 {
            let again = Instant::now();
            for _ in 0..repeat {
                check(name, bound, &data, target.run);
            }
            eprintln!(
                "tma-fuzz {name}: first run {first:?}, then {:?} per run ({repeat} runs)",
                again.elapsed() / repeat
            );
        }
        eprintln!(
            "tma-fuzz {name}: {} bytes in, {:?}, peak {} bytes allocated (bound {})",
            data.len(),
            start.elapsed(),
            last_peak(),
            bound.limit(data.len())
        );
        return;
    }
    afl::fuzz!(|data: &[u8]| {
        check(name, (target.bound)(data), data, target.run);
    });
}
