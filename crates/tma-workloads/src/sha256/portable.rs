//! Portable SHA-256 compression function, written from FIPS 180-4 section 6.2.2.
//!
//! Plain Rust, no `unsafe`, no CPU feature requirements. The message schedule is kept as a
//! 16-word ring (W[t] only depends on W[t-2], W[t-7], W[t-15], W[t-16]), which keeps it in
//! registers and lets the compiler unroll the rounds.

use super::K;

#[inline(always)]
fn big_sigma0(x: u32) -> u32 {
    x.rotate_right(2) ^ x.rotate_right(13) ^ x.rotate_right(22)
}

#[inline(always)]
fn big_sigma1(x: u32) -> u32 {
    x.rotate_right(6) ^ x.rotate_right(11) ^ x.rotate_right(25)
}

#[inline(always)]
fn small_sigma0(x: u32) -> u32 {
    x.rotate_right(7) ^ x.rotate_right(18) ^ (x >> 3)
}

#[inline(always)]
fn small_sigma1(x: u32) -> u32 {
    x.rotate_right(17) ^ x.rotate_right(19) ^ (x >> 10)
}

#[inline(always)]
fn ch(x: u32, y: u32, z: u32) -> u32 {
    // (x AND y) XOR (NOT x AND z), written with one fewer operation.
    z ^ (x & (y ^ z))
}

#[inline(always)]
fn maj(x: u32, y: u32, z: u32) -> u32 {
    (x & y) | (z & (x | y))
}

/// Compress every 64-byte block of `blocks` into `state`.
///
/// `blocks.len()` must be a multiple of 64; a trailing partial block is ignored (callers
/// only pass whole blocks).
#[inline(never)]
pub fn sha256_compress_portable(state: &mut [u32; 8], blocks: &[u8]) {
    for block in blocks.chunks_exact(64) {
        let mut w = [0u32; 16];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
        for (t, &k) in K.iter().enumerate() {
            let wt = if t < 16 {
                w[t]
            } else {
                let v = small_sigma1(w[(t - 2) & 15])
                    .wrapping_add(w[(t - 7) & 15])
                    .wrapping_add(small_sigma0(w[(t - 15) & 15]))
                    .wrapping_add(w[t & 15]);
                w[t & 15] = v;
                v
            };
            let t1 = h
                .wrapping_add(big_sigma1(e))
                .wrapping_add(ch(e, f, g))
                .wrapping_add(k)
                .wrapping_add(wt);
            let t2 = big_sigma0(a).wrapping_add(maj(a, b, c));
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *s = s.wrapping_add(v);
        }
    }
}
