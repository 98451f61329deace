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
//!
//! # Interleaved kernels for 2 to 4 streams
//!
//! Written as inline assembly, one `asm!` loop over the blocks with every register named
//! (`x_kernel!`): stream j keeps ABEF, CDGH and its newest message vector W in registers
//! for the whole call (4 streams: 8 + 4 registers, plus xmm0 and two temporaries), so nothing
//! spills. The message schedule is computed just in time, in the block whose rounds use it:
//! in group i, W[i] of every stream (message bytes for i < 4, one SHA256MSG1, PALIGNR, PADDD,
//! SHA256MSG2 step for i >= 4, with W[i-4], W[i-3], W[i-2] read back from a small per-stream
//! buffer as memory operands and W[i-1] from its register), then the four rounds of every
//! stream with W+K made from the register (`paddd` with the aligned K, `pshufd` for the upper
//! pair). The schedule chain (about 5 cycles per step) is shorter than a stream's round chain
//! (8 cycles per group), so it runs ahead of the rounds in the out-of-order window.
//!
//! On a Zen 3 VM (AMD EPYC, family 25 model 1), this kernel hashes 4 streams at 0.86 to 0.88
//! cycles/byte (3 streams: 0.88, 2: 0.99). The instruction mix limits it, not the dependency
//! chains: of its 52.7 cycles per block and stream, the schedule's SHA256MSG2 costs the most
//! (13.1), and every variant tried (other shuffles, VEX forms, more or fewer streams, a scalar
//! fifth stream) was no faster. The kernels tried and the figures of each run are in
//! `docs/sha256-kernels.md`.
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
    // 2 to 4 streams: the register-allocated kernels; wider: the intrinsics one.
    let st: &mut [[u32; 8]] = states;
    match N {
        2 => {
            let (st, bl) = (fixed::<2>(st), core::array::from_fn(|j| blocks[j]));
            // SAFETY: an NiToken exists only when CPUID reported sha, sse2, ssse3 and sse4.1,
            // the target features of the kernel; every lane holds at least `n` whole blocks.
            unsafe { sha256_compress_ni_x2(st, bl, n) }
        }
        3 => {
            let (st, bl) = (fixed::<3>(st), core::array::from_fn(|j| blocks[j]));
            // SAFETY: as for 2 streams.
            unsafe { sha256_compress_ni_x3(st, bl, n) }
        }
        4 => {
            let (st, bl) = (fixed::<4>(st), core::array::from_fn(|j| blocks[j]));
            // SAFETY: as for 2 streams.
            unsafe { sha256_compress_ni_x4(st, bl, n) }
        }
        // SAFETY: an NiToken exists only when CPUID reported sha, sse2, ssse3 and sse4.1, which
        // are exactly the target features `sha256_compress_ni_lanes` is compiled with; every
        // lane holds at least `n` whole blocks.
        _ => unsafe { sha256_compress_ni_lanes::<N>(states, blocks, n) },
    }
    n
}

/// `states` as an array of `M` states (the caller matched `N == M`).
fn fixed<const M: usize>(states: &mut [[u32; 8]]) -> &mut [[u32; 8]; M] {
    states
        .try_into()
        .expect("compress_lanes matched the lane count")
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

/// The 16 W+K vectors of one block: vector `i` holds W[4i..4i+4] + K[4i..4i+4] (lane 0 first).
type Schedule = [__m128i; 16];

/// Block `b` of `data` as an array reference (bounds checked once per block, not per load).
#[inline]
fn block_at(data: &[u8], b: usize) -> &[u8; 64] {
    let (block, _) = data[b * 64..]
        .split_first_chunk::<64>()
        .expect("the kernel asserted that every lane holds n blocks");
    block
}

/// Message-schedule vector `v` (0..16) of one block into `out[v]`, as W+K: the first four from
/// the message bytes, the others from the ring `w` of the previous four (indexed `v % 4`).
/// Used for the first block of a call, whose schedule is computed before any round.
macro_rules! schedule_step {
    ($w:ident, $block:expr, $mask:expr, $v:expr, $out:expr) => {{
        let v: usize = $v;
        if v < 4 {
            $w[v] = _mm_shuffle_epi8(load16(&$block[16 * v..]), $mask);
        } else {
            $w[v % 4] = schedule(&$w, v);
        }
        $out[v] = _mm_add_epi32($w[v % 4], k4(v));
    }};
}

/// A 16-byte load that LLVM cannot turn into a register copy (volatile: it stays a load, which
/// LLVM still folds into the memory operand of SHA256MSG1 or PALIGNR). The pipelined schedule
/// keeps W[v-2], W[v-3] and W[v-4] of every stream in memory on purpose (registers are for the
/// states and the newest W of each stream); a plain load would be forwarded from the store and
/// the value kept in a register, which brings back the spills this layout avoids.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline]
fn load_mem(v: &__m128i) -> __m128i {
    // SAFETY: `v` is a reference, so valid and aligned for a read of its 16 bytes.
    unsafe { core::ptr::read_volatile(v) }
}

/// W+K words 2 and 3 of a schedule vector, in lanes 0 and 1 (the operand of the second
/// SHA256RNDS2 of a group): one 8-byte load from memory, no shuffle on the vector pipes.
///
/// Written as inline assembly because LLVM otherwise notices that the same 16 bytes were just
/// loaded for the first SHA256RNDS2 and replaces this load by a `psrldq` of that register,
/// which costs a slot on the pipe SHA256RNDS2 needs.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline]
fn high_pair(wk: &__m128i) -> __m128i {
    let p: *const __m128i = wk;
    let r: __m128i;
    // SAFETY: `p` points at a live 16-byte __m128i, so bytes 8..16 are readable; movq has no
    // alignment requirement; the asm only reads that memory and writes the output register.
    unsafe {
        core::arch::asm!(
            "movq {r}, qword ptr [{p} + 8]",
            r = out(xmm_reg) r,
            p = in(reg) p,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    r
}

/// N-stream interleaved kernel in intrinsics, used for 6 and 8 streams (2 to 4 use the
/// register-allocated kernels, see the module docs).
///
/// The schedule goes through memory, software-pipelined: while the rounds of block b run, the
/// schedule of block b+1 is computed into a second buffer, one schedule vector of every stream
/// per four-round group; only the newest W of each stream stays in a register, the older W that
/// SHA256MSG1 and PALIGNR need are read back from memory as operands, and the rounds read their
/// W+K with plain loads (`movdqa` into xmm0 for the first SHA256RNDS2 of a group, an 8-byte
/// `movq` of the upper half for the second). From 6 streams on the 2N state registers alone
/// exceed the 16 xmm registers and LLVM spills; with 2 to 4 streams this kernel ran at 1.0 to 1.1
/// cycles/byte (64 to 70 cycles/block), against 0.90 to 0.94 for the register-allocated ones:
/// it stores W+K and W (two stores per schedule step, and stores are the scarcest memory port:
/// one per cycle), and LLVM put the W of 3 streams through memory too.
///
/// An AVX2 schedule for 8 streams, so that the SHA unit would run only SHA256RNDS2, was slower
/// (the legacy-SSE SHA instructions pay for dirty ymm upper halves; see
/// `docs/sha256-kernels.md`).
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
    if n == 0 {
        return;
    }
    let mask = bswap_mask();
    let zero = _mm_set_epi64x(0, 0);
    let mut abef = [zero; N];
    let mut cdgh = [zero; N];
    for j in 0..N {
        (abef[j], cdgh[j]) = to_ni_layout(&states[j]);
    }
    assert!(
        N <= WIDE_MAX,
        "the wide kernel's scratch holds {WIDE_MAX} streams"
    );
    let mut scratch = WideScratch {
        a: [[zero; 16]; WIDE_MAX],
        _pad_b: [zero; 5],
        b: [[zero; 16]; WIDE_MAX],
        _pad_w: [zero; 6],
        wbuf: [[zero; 16]; WIDE_MAX],
    };
    let WideScratch { a, b, wbuf, .. } = &mut scratch;
    let mut cur: &mut [Schedule; N] = (&mut a[..N]).try_into().expect("N <= WIDE_MAX");
    let mut next: &mut [Schedule; N] = (&mut b[..N]).try_into().expect("N <= WIDE_MAX");
    let wbuf: &mut [Schedule; N] = (&mut wbuf[..N]).try_into().expect("N <= WIDE_MAX");
    // Prologue: the schedule of block 0.
    for j in 0..N {
        let block = block_at(blocks[j], 0);
        let mut w = [zero; 4];
        for v in 0..16 {
            schedule_step!(w, block, mask, v, cur[j]);
        }
    }
    // W of the next block, per stream (read back with `load_mem`), and the newest W of each
    // stream in a register.
    let mut last = [zero; N];
    // The 64 rounds of block b for every stream; with `$sched`, also the schedule of block
    // b + 1 (`$nb`: its blocks) into `next`: in four-round group i, schedule vector i of every
    // stream, right after that stream's first SHA256RNDS2. One stream's schedule is a chain
    // (W[v] needs W[v-1] through PALIGNR, PADDD and SHA256MSG2, 5 cycles), so it is spread over
    // the whole block rather than computed in one go.
    macro_rules! rounds {
        ($sched:expr, $nb:expr) => {{
            let abef_save = abef;
            let cdgh_save = cdgh;
            macro_rules! group {
                ($i:expr) => {{
                    const I: usize = $i;
                    for j in 0..N {
                        cdgh[j] = _mm_sha256rnds2_epu32(cdgh[j], abef[j], cur[j][I]);
                        if $sched {
                            let w = if I < 4 {
                                // `I % 4` is `I` here; it keeps the constant range in bounds for
                                // the branches not taken.
                                _mm_shuffle_epi8(load16(&$nb[j][16 * (I % 4)..]), mask)
                            } else {
                                let m = _mm_sha256msg1_epu32(
                                    load_mem(&wbuf[j][I - 4]),
                                    load_mem(&wbuf[j][I - 3]),
                                );
                                // From 4 streams on the registers are taken by the states:
                                // W[v-1] comes from memory too (a store-to-load forward on the
                                // schedule chain, which has the slack of 4 streams' rounds).
                                let prev = if N >= 4 {
                                    load_mem(&wbuf[j][I - 1])
                                } else {
                                    last[j]
                                };
                                let t = _mm_alignr_epi8(prev, load_mem(&wbuf[j][I - 2]), 4);
                                _mm_sha256msg2_epu32(_mm_add_epi32(t, m), prev)
                            };
                            if I < 15 {
                                wbuf[j][I] = w;
                            }
                            if N < 4 {
                                last[j] = w;
                            }
                            next[j][I] = _mm_add_epi32(w, k4(I));
                        }
                    }
                    for j in 0..N {
                        abef[j] = _mm_sha256rnds2_epu32(abef[j], cdgh[j], high_pair(&cur[j][I]));
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
        }};
    }
    for b in 0..n - 1 {
        let nb: [&[u8; 64]; N] = core::array::from_fn(|j| block_at(blocks[j], b + 1));
        rounds!(true, nb);
        core::mem::swap(&mut cur, &mut next);
    }
    let nb: [&[u8; 64]; 0] = [];
    rounds!(false, nb);
    for j in 0..N {
        from_ni_layout(abef[j], cdgh[j], &mut states[j]);
    }
}

/// Streams the wide kernel ([`sha256_compress_ni_lanes`]) can take.
const WIDE_MAX: usize = 8;

/// What the wide kernel stores and reads back, in one 4 KiB-aligned block with fixed offsets:
/// the W+K of the current and the next block (`a`, `b`, swapping roles every block) and the W
/// of the schedule. As three separate stack arrays their offsets within a 4 KiB page moved with
/// the size of the environment, and where one buffer's stores 4K-aliased another's loads,
/// 8 streams ran at 1.76 to 1.86 cycles/byte instead of 1.17 to 1.24 (`env PADVAR=...` of 0 to
/// 3584 bytes, 32 KiB buffers). The pads put the buffers at 0, 80 and 176 bytes (mod 256): slot
/// `i` of one buffer then shares its page offset only with slots at least 5 groups of four
/// rounds away in another (5 x 16 stores of 8 streams are more than the store queue holds).
/// With this block: 1.14 to 1.18 at every size. K stays a constant operand (a copy in this
/// block was slower; see `docs/sha256-kernels.md`).
#[repr(C, align(4096))]
struct WideScratch {
    a: [Schedule; WIDE_MAX],
    _pad_b: [__m128i; 5],
    b: [Schedule; WIDE_MAX],
    _pad_w: [__m128i; 6],
    wbuf: [Schedule; WIDE_MAX],
}

/// K as 16-byte aligned vectors: the memory operand of `paddd` (legacy SSE) must be aligned.
#[repr(C, align(16))]
struct AlignedK([u32; 64]);
static K_ALIGNED: AlignedK = AlignedK(K);

/// The byte shuffle of [`bswap_mask`] in memory, for `pshufb`'s memory operand.
#[repr(C, align(16))]
struct AlignedMask([u8; 16]);
static BSWAP_MASK: AlignedMask =
    AlignedMask([3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12]);

// Text of the register-allocated kernels (`sha256_compress_ni_x2` to `_x4`): one `asm!` loop
// over the blocks. Stream `j` keeps ABEF, CDGH and its newest message word vector W in the
// registers named by the caller for the whole call; `{wbuf}` holds the 16 W of every stream
// (256 bytes each), `{save}` the states at the start of the block (32 bytes per stream), `{k}`
// the aligned K, `{m0}`.. the current block of each stream. `$o` is the byte offset of the group
// (16 x its number) in K, in a block and in a stream's W. xmm0 is the W+K operand of SHA256RNDS2
// and a temporary; xmm13 and xmm14 are temporaries.
//
// One loop rather than one `asm!` block per group (the previous form, with the block loop, the
// state additions and the block pointers in Rust): 53.4 against 55.4 cycles per block and
// stream for 4 streams, measured side by side with scripts/sha-ni-ablation (the compiler kept
// the saved states on the stack and reloaded them, and computed every pointer with its bounds
// check per block).

/// Rounds 4i..4i+4 of one stream: W+K from the newest W, the upper pair shifted down for the
/// second SHA256RNDS2.
macro_rules! x_rounds {
    ($o:literal, $abef:literal, $cdgh:literal, $w:literal) => {
        concat!(
            "movdqa xmm0, ",
            $w,
            "\n",
            "paddd xmm0, xmmword ptr [{k} + ",
            $o,
            "]\n",
            "sha256rnds2 ",
            $cdgh,
            ", ",
            $abef,
            ", xmm0\n",
            "pshufd xmm0, xmm0, 0x0E\n",
            "sha256rnds2 ",
            $abef,
            ", ",
            $cdgh,
            ", xmm0\n",
        )
    };
}

/// Keep W of stream `j` for the later schedule steps that read it.
macro_rules! x_store {
    ($o:literal, $j:literal, $w:literal) => {
        concat!(
            "movdqa xmmword ptr [{wbuf} + 256*",
            $j,
            " + ",
            $o,
            "], ",
            $w,
            "\n"
        )
    };
}

/// W[i] (i < 4) of stream `j`: 16 message bytes (from the block `$mp` points at), byte-swapped.
macro_rules! x_load {
    ($o:literal, $j:literal, $w:literal, $mp:ident) => {
        concat!(
            "movdqu ",
            $w,
            ", xmmword ptr [{",
            stringify!($mp),
            "} + ",
            $o,
            "]\n",
            "pshufb ",
            $w,
            ", xmmword ptr [{mask}]\n",
            x_store!($o, $j, $w),
        )
    };
}

/// W[i] (i >= 4) of stream `j` from W[i-4], W[i-3], W[i-2] (memory) and W[i-1] (the register).
macro_rules! x_step {
    ($o:literal, $j:literal, $w:literal) => {
        concat!(
            "movdqa xmm13, xmmword ptr [{wbuf} + 256*",
            $j,
            " + ",
            $o,
            " - 64]\n",
            "sha256msg1 xmm13, xmmword ptr [{wbuf} + 256*",
            $j,
            " + ",
            $o,
            " - 48]\n",
            "movdqa xmm14, ",
            $w,
            "\n",
            "palignr xmm14, xmmword ptr [{wbuf} + 256*",
            $j,
            " + ",
            $o,
            " - 32], 4\n",
            "paddd xmm13, xmm14\n",
            "sha256msg2 xmm13, ",
            $w,
            "\n",
            "movdqa ",
            $w,
            ", xmm13\n",
        )
    };
}

/// One group of every stream: the schedule first (all streams), then the rounds. `load`: W[0..4]
/// from the message; `step`: W[4..14], stored for later steps; `last`: W[14], W[15] (no later
/// step reads them).
macro_rules! x_group {
    (load, $o:literal; $(($j:literal, $a:literal, $c:literal, $w:literal, $mp:ident)),*) => {
        concat!($(x_load!($o, $j, $w, $mp),)* $(x_rounds!($o, $a, $c, $w),)*)
    };
    (step, $o:literal; $(($j:literal, $a:literal, $c:literal, $w:literal, $mp:ident)),*) => {
        concat!($(x_step!($o, $j, $w), x_store!($o, $j, $w),)* $(x_rounds!($o, $a, $c, $w),)*)
    };
    (last, $o:literal; $(($j:literal, $a:literal, $c:literal, $w:literal, $mp:ident)),*) => {
        concat!($(x_step!($o, $j, $w),)* $(x_rounds!($o, $a, $c, $w),)*)
    };
}

/// The whole loop: save the states, the 16 groups, add the saved states, next block.
macro_rules! x_loop {
    ($(($j:literal, $a:literal, $c:literal, $w:literal, $mp:ident)),*) => {
        concat!(
            "2:\n",
            $(
                "movdqa xmmword ptr [{save} + 32*", $j, "], ", $a, "\n",
                "movdqa xmmword ptr [{save} + 32*", $j, " + 16], ", $c, "\n",
            )*
            x_group!(load, 0; $(($j, $a, $c, $w, $mp)),*),
            x_group!(load, 16; $(($j, $a, $c, $w, $mp)),*),
            x_group!(load, 32; $(($j, $a, $c, $w, $mp)),*),
            x_group!(load, 48; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 64; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 80; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 96; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 112; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 128; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 144; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 160; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 176; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 192; $(($j, $a, $c, $w, $mp)),*),
            x_group!(step, 208; $(($j, $a, $c, $w, $mp)),*),
            x_group!(last, 224; $(($j, $a, $c, $w, $mp)),*),
            x_group!(last, 240; $(($j, $a, $c, $w, $mp)),*),
            $(
                "paddd ", $a, ", xmmword ptr [{save} + 32*", $j, "]\n",
                "paddd ", $c, ", xmmword ptr [{save} + 32*", $j, " + 16]\n",
                "add {", stringify!($mp), "}, 64\n",
            )*
            "dec {n}\n",
            "jnz 2b\n",
        )
    };
}

/// The memory a register-allocated kernel reads and writes besides the message: K, the byte
/// shuffle, the W of every stream and the saved states, together in one 4 KiB-aligned block.
/// Apart, their addresses could share their low 12 bits (the stack against the statics): a load
/// of K then waits behind a store to W it only seems to depend on (4K aliasing). 2 streams
/// read 1.10 to 1.29 cycles/byte instead of 0.99 to 1.01 with some environment sizes (which move
/// the stack).
#[repr(C, align(4096))]
struct Scratch<const N: usize> {
    k: [u32; 64],
    mask: [u8; 16],
    wbuf: [[__m128i; 16]; N],
    save: [[__m128i; 2]; N],
}

/// A register-allocated N-stream kernel (N <= 4) named `$name`; the stream list gives each
/// stream's ABEF, CDGH and W registers and the name of its block pointer.
macro_rules! x_kernel {
    ($name:ident, $n:literal; $(($j:tt, $a:tt, $c:tt, $wr:tt, $mp:ident)),*) => {
        /// Register-allocated N-stream kernel (see the notes above `sha256_compress_ni_lanes`).
        ///
        /// # Safety
        /// The CPU must support sha, sse2, ssse3 and sse4.1. `blocks[j]` shorter than `n`
        /// blocks panics (checked).
        #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
        #[inline(never)]
        unsafe fn $name(states: &mut [[u32; 8]; $n], blocks: [&[u8]; $n], n: usize) {
            assert!(blocks.iter().all(|b| b.len() >= n * 64));
            if n == 0 {
                return;
            }
            let zero = _mm_set_epi64x(0, 0);
            let mut abef = [zero; $n];
            let mut cdgh = [zero; $n];
            for j in 0..$n {
                (abef[j], cdgh[j]) = to_ni_layout(&states[j]);
            }
            let mut sc = Scratch::<$n> {
                k: K_ALIGNED.0,
                mask: BSWAP_MASK.0,
                wbuf: [[zero; 16]; $n],
                save: [[zero; 2]; $n],
            };
            // SAFETY: the loop runs `n` >= 1 times; each pass reads 64 bytes at each `{mJ}`
            // (which then advances by 64; the assert above guarantees n x 64 bytes per lane),
            // the 64 words of `sc.k`, `sc.mask`, and reads and writes `sc.wbuf` (16 vectors,
            // 256 bytes per stream) and `sc.save` (32 bytes per stream) only; it writes the
            // registers and flags declared here.
            unsafe {
                core::arch::asm!(
                    x_loop!($(($j, $a, $c, $wr, $mp)),*),
                    wbuf = in(reg) sc.wbuf.as_mut_ptr(),
                    save = in(reg) sc.save.as_mut_ptr(),
                    k = in(reg) sc.k.as_ptr(),
                    mask = in(reg) sc.mask.as_ptr(),
                    n = inout(reg) n => _,
                    $($mp = inout(reg) blocks[$j].as_ptr() => _,)*
                    $(inout($a) abef[$j], inout($c) cdgh[$j], out($wr) _,)*
                    out("xmm0") _, out("xmm13") _, out("xmm14") _,
                    options(nostack)
                )
            }
            for j in 0..$n {
                from_ni_layout(abef[j], cdgh[j], &mut states[j]);
            }
        }
    };
}

x_kernel!(sha256_compress_ni_x2, 2;
    (0, "xmm1", "xmm2", "xmm9", m0), (1, "xmm3", "xmm4", "xmm10", m1));
x_kernel!(sha256_compress_ni_x3, 3;
    (0, "xmm1", "xmm2", "xmm9", m0), (1, "xmm3", "xmm4", "xmm10", m1),
    (2, "xmm5", "xmm6", "xmm11", m2));
x_kernel!(sha256_compress_ni_x4, 4;
    (0, "xmm1", "xmm2", "xmm9", m0), (1, "xmm3", "xmm4", "xmm10", m1),
    (2, "xmm5", "xmm6", "xmm11", m2), (3, "xmm7", "xmm8", "xmm12", m3));
