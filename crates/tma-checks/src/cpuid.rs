//! Live CPUID reads for [`crate::CpuidFacts`], through `tma_sys::cpu` (x86-64 only).

use crate::CpuidFacts;

/// Read the vendor and Intel leaf 0xA (architectural performance monitoring) of this CPU.
pub fn live() -> CpuidFacts {
    #[cfg(target_arch = "x86_64")]
    {
        let mut f = CpuidFacts {
            vendor: Some(tma_sys::cpu::vendor()),
            ..Default::default()
        };
        if let Some(a) = tma_sys::cpu::arch_perfmon() {
            f.perfmon_version = Some(a.version);
            f.gp_counters = Some(a.gp_counters);
            f.fixed_counters = Some(a.fixed_counters);
        }
        f.tsc_mhz = measure_tsc_mhz();
        f
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        CpuidFacts::default()
    }
}

/// TSC ticks per microsecond over a 20 ms CLOCK_MONOTONIC window.
#[cfg(target_arch = "x86_64")]
fn measure_tsc_mhz() -> Option<f64> {
    let t0 = std::time::Instant::now();
    let c0 = tma_sys::cpu::rdtsc();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let c1 = tma_sys::cpu::rdtsc();
    let us = t0.elapsed().as_secs_f64() * 1e6;
    (us > 0.0 && c1 > c0).then(|| (c1 - c0) as f64 / us)
}
