//! The processor itself: CPUID, the time-stamp counter and user-space counter reads
//! (x86-64 only).
// unsafe allowed: the CPUID and RDTSC intrinsics and the rdpmc instruction.
#![allow(unsafe_code)]

pub use std::arch::x86_64::CpuidResult;

/// CPUID leaf `leaf` (subleaf 0). A leaf above [`max_basic_leaf`] returns what the CPU returns
/// for out-of-range leaves (callers check the maximum first).
#[allow(unused_unsafe)] // `__cpuid` is a safe fn on newer toolchains, unsafe on the MSRV.
pub fn cpuid(leaf: u32) -> CpuidResult {
    // SAFETY: CPUID exists on every x86-64 CPU and reads no memory; any leaf number is allowed
    // (out-of-range leaves return data, they do not fault).
    unsafe { std::arch::x86_64::__cpuid(leaf) }
}

/// The highest basic CPUID leaf (leaf 0's eax).
pub fn max_basic_leaf() -> u32 {
    cpuid(0).eax
}

/// The vendor string of leaf 0 (`GenuineIntel`, `AuthenticAMD`, ...).
pub fn vendor() -> String {
    let l0 = cpuid(0);
    let mut v = Vec::with_capacity(12);
    for r in [l0.ebx, l0.edx, l0.ecx] {
        v.extend_from_slice(&r.to_le_bytes());
    }
    String::from_utf8_lossy(&v).into_owned()
}

/// Vendor and display family and model (leaf 0 and leaf 1, with the extended family and
/// model fields folded in as the vendors' manuals say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
}

/// This CPU's [`Signature`].
pub fn signature() -> Signature {
    let (family, model) = family_model(cpuid(1).eax);
    Signature {
        vendor: vendor(),
        family,
        model,
    }
}

/// Display family and model from leaf 1's eax.
fn family_model(eax: u32) -> (u32, u32) {
    let base_family = (eax >> 8) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((eax >> 20) & 0xff)
    } else {
        base_family
    };
    let mut model = (eax >> 4) & 0xf;
    if base_family == 0x6 || base_family == 0xf {
        model |= ((eax >> 16) & 0xf) << 4;
    }
    (family, model)
}

/// Intel's architectural performance monitoring leaf (0xA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchPerfmon {
    /// Version ID (`eax[7:0]`).
    pub version: u32,
    /// General-purpose counters per logical processor (`eax[15:8]`).
    pub gp_counters: u32,
    /// Fixed-function counters (`edx[4:0]`).
    pub fixed_counters: u32,
}

/// Leaf 0xA on an Intel CPU that has it; `None` on other vendors (where the leaf is reserved)
/// and on CPUs whose maximum basic leaf is below 0xA.
pub fn arch_perfmon() -> Option<ArchPerfmon> {
    if vendor() != "GenuineIntel" || max_basic_leaf() < 0xA {
        return None;
    }
    let a = cpuid(0xA);
    Some(ArchPerfmon {
        version: a.eax & 0xff,
        gp_counters: (a.eax >> 8) & 0xff,
        fixed_counters: a.edx & 0x1f,
    })
}

/// The time-stamp counter.
#[allow(unused_unsafe)] // `_rdtsc` is a safe fn on newer toolchains, unsafe on the MSRV.
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc reads no memory and has no preconditions on x86-64 (it could fault only
    // if CR4.TSD were set, which Linux does not do for ordinary processes).
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// `rdpmc` of general-purpose counter `idx`, after an lfence (so earlier instructions have
/// completed). Raises #GP, delivered as SIGSEGV, unless user-space rdpmc is enabled for this
/// task (CR4.PCE: `/sys/bus/event_source/devices/cpu/rdpmc` = 2, or 1 while a perf event is
/// mapped); callers check that first or run it where the signal is caught.
pub fn rdpmc(idx: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: lfence and rdpmc touch no memory and only the named registers (ecx in, edx:eax
    // out); a fault is a signal, not undefined behaviour.
    unsafe {
        std::arch::asm!(
            "lfence",
            "rdpmc",
            in("ecx") idx,
            out("eax") lo,
            out("edx") hi,
            options(nostack, nomem, preserves_flags)
        );
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_and_model_fold_the_extended_fields() {
        // Sapphire Rapids: family 6, model 0x8f (extended model 8).
        assert_eq!(family_model(0x000806f8), (6, 0x8f));
        // Zen 4: base family 0xf + extended family 0xa = 0x19, model 0x11.
        assert_eq!(family_model(0x00a10f11), (0x19, 0x11));
        // Family 5 takes no extended fields.
        assert_eq!(family_model(0x000f0543), (5, 4));
    }

    #[test]
    fn this_cpu_has_a_vendor_and_a_clock() {
        let s = signature();
        assert_eq!(s.vendor.len(), 12);
        assert!(s.family >= 6, "{s:?}");
        assert!(max_basic_leaf() >= 1);
        let t0 = rdtsc();
        assert!(rdtsc() >= t0);
    }
}
