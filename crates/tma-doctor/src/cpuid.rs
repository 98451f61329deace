//! Live CPUID reads for [`crate::CpuidFacts`] (x86-64 only).
// unsafe allowed: the CPUID and RDTSC intrinsics.
#![allow(unsafe_code)]

use crate::CpuidFacts;

/// Read the vendor and Intel leaf 0xA (architectural performance monitoring) of this CPU.
#[allow(unused_unsafe)] // `__cpuid` is a safe fn on newer toolchains, unsafe on the MSRV.
pub fn live() -> CpuidFacts {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: CPUID is available on every x86-64 CPU; leaf 0 is always valid.
        let l0 = unsafe { __cpuid(0) };
        let mut v = Vec::with_capacity(12);
        for r in [l0.ebx, l0.edx, l0.ecx] {
            v.extend_from_slice(&r.to_le_bytes());
        }
        let vendor = String::from_utf8_lossy(&v).into_owned();
        let mut f = CpuidFacts {
            vendor: Some(vendor.clone()),
            ..Default::default()
        };
        if vendor == "GenuineIntel" && l0.eax >= 0xA {
            // SAFETY: leaf 0xA is within the maximum basic leaf reported by leaf 0.
            let a = unsafe { __cpuid(0xA) };
            f.perfmon_version = Some(a.eax & 0xff);
            f.gp_counters = Some((a.eax >> 8) & 0xff);
            f.fixed_counters = Some(a.edx & 0x1f);
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
#[allow(unused_unsafe)]
fn measure_tsc_mhz() -> Option<f64> {
    use std::arch::x86_64::_rdtsc;
    let t0 = std::time::Instant::now();
    // SAFETY: rdtsc has no preconditions on x86-64 (it may fault only if CR4.TSD is set,
    // which Linux does not do for ordinary processes).
    let c0 = unsafe { _rdtsc() };
    std::thread::sleep(std::time::Duration::from_millis(20));
    // SAFETY: as above.
    let c1 = unsafe { _rdtsc() };
    let us = t0.elapsed().as_secs_f64() * 1e6;
    (us > 0.0 && c1 > c0).then(|| (c1 - c0) as f64 / us)
}
