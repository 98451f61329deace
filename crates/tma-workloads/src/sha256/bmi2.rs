//! The portable compression function compiled with BMI2 (`rorx`), chosen at run time when CPUID
//! reports it: the only `unsafe` of the portable path.
// unsafe allowed: calling a #[target_feature] function, after checking CPUID for the feature.
#![allow(unsafe_code)]

/// Compress `blocks` with the BMI2 build when this CPU has BMI2; false (nothing done) when not.
#[inline]
pub(super) fn compress_if_available(state: &mut [u32; 8], blocks: &[u8]) -> bool {
    if !std::arch::is_x86_feature_detected!("bmi2") {
        return false;
    }
    // SAFETY: CPUID reported BMI2 just above, the only target feature `compress_bmi2` enables.
    unsafe { compress_bmi2(state, blocks) };
    true
}

#[target_feature(enable = "bmi2")]
#[inline(never)]
fn compress_bmi2(state: &mut [u32; 8], blocks: &[u8]) {
    super::portable::compress_blocks(state, blocks);
}
