//! Core-clock estimate for turning seconds into core cycles on machines where no cycle counter
//! is readable (no PMU, as in many VMs) and the TSC does not tick at the core clock.
//!
//! Method: time a long chain of dependent `add` instructions, which
//! retire at exactly one per core cycle on every current x86 core, against the thread's CPU
//! time (so time spent waiting for a CPU on a loaded machine is not counted). Adds per second is the core frequency. The minimum time over a few trials is used
//! (interrupts and preemption only ever add time). The thread clock is
//! `tma_sys::clock::thread_cpu_time`.
// unsafe allowed: the inline-asm add chain.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

/// A point in time for timing a region: the calling thread's CPU time (which, unlike wall
/// time, does not advance while the thread waits for a CPU on a loaded machine) and the
/// monotonic wall clock.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    cpu: Duration,
    wall: Instant,
}

impl Stamp {
    /// Now.
    pub fn now() -> Stamp {
        Stamp {
            cpu: tma_sys::clock::thread_cpu_time(),
            wall: Instant::now(),
        }
    }

    /// Thread CPU seconds since `self`.
    pub fn cpu_seconds(&self) -> f64 {
        tma_sys::clock::thread_cpu_time()
            .saturating_sub(self.cpu)
            .as_secs_f64()
    }

    /// Wall-clock seconds since `self`.
    pub fn wall_seconds(&self) -> f64 {
        self.wall.elapsed().as_secs_f64()
    }
}

/// A measured core-clock frequency.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CoreClock {
    /// Core cycles per second.
    pub hz: f64,
}

impl CoreClock {
    /// Core cycles in `seconds` at this frequency.
    pub fn cycles(&self, seconds: f64) -> f64 {
        seconds * self.hz
    }
}

/// Adds per loop iteration of the calibration chain.
#[cfg(target_arch = "x86_64")]
const ADDS_PER_ITER: u64 = 100;

/// Run `iters` iterations of 100 dependent adds; returns a value so the work is observable.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn add_chain(iters: u64) -> u64 {
    let mut x: u64 = 1;
    let mut n = iters.max(1);
    // SAFETY: the assembly only reads and writes the two registers bound to `x` and `n`, does
    // not touch memory or the stack, and leaves flags clobbered (asm! assumes that by default).
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 100",
            "add {x}, {x}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            n = inout(reg) n,
            options(nomem, nostack),
        );
    }
    x ^ n
}

/// Measure the core clock: about 5 trials of roughly 4 ms each. `None` on non-x86 targets or
/// if the timer is unusable.
pub fn calibrate() -> Option<CoreClock> {
    #[cfg(target_arch = "x86_64")]
    {
        // Size the chain to about 4 ms at an assumed 1-5 GHz by doubling until it takes 2 ms.
        let mut iters: u64 = 1_000;
        loop {
            let t = Stamp::now();
            std::hint::black_box(add_chain(std::hint::black_box(iters)));
            let dt = t.cpu_seconds();
            if dt > 0.002 || iters > 1 << 30 {
                iters = ((iters as f64) * 0.004 / dt.max(1e-9)).ceil() as u64;
                break;
            }
            iters *= 2;
        }
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Stamp::now();
            std::hint::black_box(add_chain(std::hint::black_box(iters)));
            best = best.min(t.cpu_seconds());
        }
        if !(best.is_finite() && best > 0.0) {
            return None;
        }
        Some(CoreClock {
            hz: (iters * ADDS_PER_ITER) as f64 / best,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn plausible_frequency() {
        let Some(c) = super::calibrate() else {
            eprintln!("skipped: not x86_64");
            return;
        };
        // Any real x86 core runs between 0.5 and 7 GHz.
        assert!(c.hz > 0.5e9 && c.hz < 7e9, "core clock {} Hz", c.hz);
        assert!((c.cycles(2.0) - 2.0 * c.hz).abs() < 1.0);
    }
}
