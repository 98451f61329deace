//! SHA-256 with the x86 SHA extensions (SHA256RNDS2, SHA256MSG1, SHA256MSG2), the only module
//! of the SHA-256 code that contains `unsafe`.
//!
//! Soundness rests on [`NiToken`]: it can only be made by [`NiToken::detect`], which checks
//! CPUID (through `is_x86_feature_detected!`) for every feature the `#[target_feature]`
//! functions below are compiled with. The safe wrappers take a token, so calling them on a CPU
//! without SHA-NI is impossible from safe code.
//!
//! Layout of the state in the SHA-NI registers (lane 3 first): `ABEF` holds A, B, E, F and
//! `CDGH` holds C, D, G, H. One SHA256RNDS2 performs two rounds: it takes CDGH, ABEF and two
//! W+K words (lanes 0 and 1) and returns the new ABEF; the old ABEF becomes the new CDGH.
//! So the 64 rounds of a block are a chain of 32 dependent SHA256RNDS2: a single stream runs
//! at the instruction's latency. [`compress_lanes`] interleaves N independent streams so that
//! N chains are in flight and the core can approach the instruction's throughput instead.
// unsafe allowed: SHA-NI intrinsics behind #[target_feature], gated by NiToken.
#![allow(unsafe_code)]

use core::arch::x86_64::{
    __m128i, _mm_add_epi32, _mm_alignr_epi8, _mm_blend_epi16, _mm_loadu_si128, _mm_set_epi64x,
    _mm_sha256msg1_epu32, _mm_sha256msg2_epu32, _mm_sha256rnds2_epu32, _mm_shuffle_epi32,
    _mm_shuffle_epi8, _mm_storeu_si128,
};

use super::K;

/// Proof that this CPU supports SHA-NI and the SSE levels the kernels use.
#[derive(Clone, Copy, Debug)]
pub struct NiToken(());

impl NiToken {
    /// `Some` if CPUID reports `sha`, `sse2`, `ssse3` and `sse4.1`.
    pub fn detect() -> Option<Self> {
        if std::arch::is_x86_feature_detected!("sha")
            && std::arch::is_x86_feature_detected!("sse2")
            && std::arch::is_x86_feature_detected!("ssse3")
            && std::arch::is_x86_feature_detected!("sse4.1")
        {
            Some(NiToken(()))
        } else {
            None
        }
    }
}

/// Compress the whole 64-byte blocks of `blocks` into `state` (a trailing partial block is
/// ignored).
#[inline]
pub fn compress(_cpu: NiToken, state: &mut [u32; 8], blocks: &[u8]) {
    // SAFETY: an NiToken exists only when CPUID reported sha, sse2, ssse3 and sse4.1, which
    // are exactly the target features `sha256_compress_ni` is compiled with.
    unsafe { sha256_compress_ni(state, blocks) }
}

/// Compress `N` independent streams at once, interleaving their round chains. Each lane
/// consumes `min(len / 64)` blocks over all lanes; the number of blocks consumed is returned.
#[inline]
pub fn compress_lanes<const N: usize>(
    _cpu: NiToken,
    states: &mut [[u32; 8]; N],
    blocks: [&[u8]; N],
) -> usize {
    let n = blocks.iter().map(|b| b.len() / 64).min().unwrap_or(0);
    // SAFETY: an NiToken exists only when CPUID reported sha, sse2, ssse3 and sse4.1, which
    // are exactly the target features `sha256_compress_ni_lanes` is compiled with; every lane
    // holds at least `n` whole blocks.
    unsafe { sha256_compress_ni_lanes::<N>(states, blocks, n) };
    n
}

/// Byte shuffle that turns each big-endian 32-bit message word into a little-endian lane.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline]
fn bswap_mask() -> __m128i {
    _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203)
}

/// Load 16 bytes.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline]
fn load16(bytes: &[u8]) -> __m128i {
    assert!(bytes.len() >= 16);
    // SAFETY: the assert above guarantees 16 readable bytes; loadu has no alignment
    // requirement; SSE2 is part of the x86_64 baseline.
    unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
}

/// K[4i..4i+4] as a vector.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline]
fn k4(i: usize) -> __m128i {
    let k = &K[4 * i..4 * i + 4];
    _mm_set_epi64x(
        ((k[3] as i64) << 32) | k[2] as i64,
        ((k[1] as i64) << 32) | k[0] as i64,
    )
}

/// State words A..H -> (ABEF, CDGH) register layout.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
fn to_ni_layout(state: &[u32; 8]) -> (__m128i, __m128i) {
    let mut bytes = [0u8; 32];
    for (chunk, w) in bytes.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    let abcd = _mm_shuffle_epi32(load16(&bytes[..16]), 0xB1); // lanes B A D C
    let efgh = _mm_shuffle_epi32(load16(&bytes[16..]), 0x1B); // lanes H G F E
    let abef = _mm_alignr_epi8(abcd, efgh, 8); // F E B A
    let cdgh = _mm_blend_epi16(efgh, abcd, 0xF0); // H G D C
    (abef, cdgh)
}

/// (ABEF, CDGH) register layout -> state words A..H.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
fn from_ni_layout(abef: __m128i, cdgh: __m128i, state: &mut [u32; 8]) {
    let feba = _mm_shuffle_epi32(abef, 0x1B); // A B E F (lane 0 first)
    let dchg = _mm_shuffle_epi32(cdgh, 0xB1); // G H C D
    let abcd = _mm_blend_epi16(feba, dchg, 0xF0);
    let efgh = _mm_alignr_epi8(dchg, feba, 8);
    let mut bytes = [0u8; 32];
    // SAFETY: `bytes` has 32 writable bytes; storeu has no alignment requirement.
    unsafe {
        _mm_storeu_si128(bytes.as_mut_ptr().cast(), abcd);
        _mm_storeu_si128(bytes.as_mut_ptr().add(16).cast(), efgh);
    }
    for (w, chunk) in state.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
}

/// Next message-schedule group: W[t..t+4] from the previous four groups `w` (ring indexed by
/// group number mod 4), for group number `i >= 4`.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline]
fn schedule(w: &[__m128i; 4], i: usize) -> __m128i {
    let t = _mm_sha256msg1_epu32(w[i % 4], w[(i + 1) % 4]);
    let t = _mm_add_epi32(t, _mm_alignr_epi8(w[(i + 3) % 4], w[(i + 2) % 4], 4));
    _mm_sha256msg2_epu32(t, w[(i + 3) % 4])
}

/// Single-stream kernel.
///
/// # Safety
/// The CPU must support sha, sse2, ssse3 and sse4.1.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline(never)]
unsafe fn sha256_compress_ni(state: &mut [u32; 8], blocks: &[u8]) {
    let mask = bswap_mask();
    let (mut abef, mut cdgh) = to_ni_layout(state);
    for block in blocks.chunks_exact(64) {
        let (abef_save, cdgh_save) = (abef, cdgh);
        let mut w = [
            _mm_shuffle_epi8(load16(&block[0..]), mask),
            _mm_shuffle_epi8(load16(&block[16..]), mask),
            _mm_shuffle_epi8(load16(&block[32..]), mask),
            _mm_shuffle_epi8(load16(&block[48..]), mask),
        ];
        macro_rules! group {
            ($i:expr) => {{
                let i: usize = $i;
                if i >= 4 {
                    w[i % 4] = schedule(&w, i);
                }
                let wk = _mm_add_epi32(w[i % 4], k4(i));
                cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
                abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
            }};
        }
        group!(0);
        group!(1);
        group!(2);
        group!(3);
        group!(4);
        group!(5);
        group!(6);
        group!(7);
        group!(8);
        group!(9);
        group!(10);
        group!(11);
        group!(12);
        group!(13);
        group!(14);
        group!(15);
        abef = _mm_add_epi32(abef, abef_save);
        cdgh = _mm_add_epi32(cdgh, cdgh_save);
    }
    from_ni_layout(abef, cdgh, state);
}

/// N-stream interleaved kernel: the same 16 four-round groups, with the N streams' SHA256RNDS2
/// pairs issued back to back so that N independent latency chains overlap.
///
/// # Safety
/// The CPU must support sha, sse2, ssse3 and sse4.1, and every `blocks[j]` must hold at least
/// `n` whole 64-byte blocks (checked with an assert, so a violation panics instead of reading
/// out of bounds).
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline(never)]
unsafe fn sha256_compress_ni_lanes<const N: usize>(
    states: &mut [[u32; 8]; N],
    blocks: [&[u8]; N],
    n: usize,
) {
    assert!(blocks.iter().all(|b| b.len() >= n * 64));
    let mask = bswap_mask();
    let zero = _mm_set_epi64x(0, 0);
    let mut abef = [zero; N];
    let mut cdgh = [zero; N];
    for j in 0..N {
        (abef[j], cdgh[j]) = to_ni_layout(&states[j]);
    }
    for b in 0..n {
        let abef_save = abef;
        let cdgh_save = cdgh;
        let mut w = [[zero; 4]; N];
        for j in 0..N {
            let block = &blocks[j][b * 64..b * 64 + 64];
            for q in 0..4 {
                w[j][q] = _mm_shuffle_epi8(load16(&block[16 * q..]), mask);
            }
        }
        macro_rules! group {
            ($i:expr) => {{
                let i: usize = $i;
                let k = k4(i);
                for j in 0..N {
                    if i >= 4 {
                        w[j][i % 4] = schedule(&w[j], i);
                    }
                    let wk = _mm_add_epi32(w[j][i % 4], k);
                    cdgh[j] = _mm_sha256rnds2_epu32(cdgh[j], abef[j], wk);
                }
                for j in 0..N {
                    let wk = _mm_add_epi32(w[j][i % 4], k);
                    abef[j] = _mm_sha256rnds2_epu32(abef[j], cdgh[j], _mm_shuffle_epi32(wk, 0x0E));
                }
            }};
        }
        group!(0);
        group!(1);
        group!(2);
        group!(3);
        group!(4);
        group!(5);
        group!(6);
        group!(7);
        group!(8);
        group!(9);
        group!(10);
        group!(11);
        group!(12);
        group!(13);
        group!(14);
        group!(15);
        for j in 0..N {
            abef[j] = _mm_add_epi32(abef[j], abef_save[j]);
            cdgh[j] = _mm_add_epi32(cdgh[j], cdgh_save[j]);
        }
    }
    for j in 0..N {
        from_ni_layout(abef[j], cdgh[j], &mut states[j]);
    }
}
