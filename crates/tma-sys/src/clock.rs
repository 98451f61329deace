//! The calling thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`), which unlike wall time does
//! not advance while the thread waits for a CPU on a loaded machine.

use std::time::Duration;

/// CPU time consumed by the calling thread so far.
pub fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// [`thread_cpu_time`] in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    thread_cpu_time().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_clock_advances_with_work() {
        let t0 = thread_cpu_time();
        let mut x = 1u64;
        while thread_cpu_time() - t0 < Duration::from_millis(2) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(thread_cpu_ns() >= t0.as_nanos() as u64 + 2_000_000);
    }
}
