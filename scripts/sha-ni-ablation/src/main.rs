//! Timing experiments on tma's 4-stream SHA-NI kernel: see README.md. Run `python3 gen.py` first.
#![allow(unsafe_code)]

use core::arch::x86_64::*;
use tma_workloads::sha256::{self, sha256_compress_portable, Sha256, K};

mod generated;

#[repr(C, align(16))]
pub struct Aligned<T>(pub T);
/// K as aligned vectors.
pub static K16: Aligned<[u32; 64]> = Aligned(K);
/// Vector i: K[4i+2], K[4i+3] in lanes 0 and 1 (and again in 2, 3).
pub static KHI: Aligned<[u32; 64]> = {
    let mut k = [0u32; 64];
    let mut i = 0;
    while i < 16 {
        k[4 * i] = K[4 * i + 2];
        k[4 * i + 1] = K[4 * i + 3];
        k[4 * i + 2] = K[4 * i + 2];
        k[4 * i + 3] = K[4 * i + 3];
        i += 1;
    }
    Aligned(k)
};
/// pshufb mask: big-endian words to lanes.
pub static MASK: Aligned<[u8; 16]> =
    Aligned([3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12]);

/// What a kernel reads and writes besides the message, in one 4 KiB-aligned block.
#[repr(C, align(4096))]
pub struct Scratch {
    pub k: [u32; 64],
    pub khi: [u32; 64],
    pub mask: [u8; 16],
    pub wbuf: [[__m128i; 16]; 4],
    pub save: [__m128i; 8],
}

/// State A..H -> [ABEF, CDGH] (lane 3 first, as SHA256RNDS2 wants).
fn to_ni(s: &[u32; 8]) -> [__m128i; 2] {
    let v = |a: u32, b: u32, c: u32, d: u32| {
        // SAFETY: SSE2 is part of x86_64.
        unsafe { _mm_set_epi32(a as i32, b as i32, c as i32, d as i32) }
    };
    [v(s[0], s[1], s[4], s[5]), v(s[2], s[3], s[6], s[7])]
}

fn from_ni(x: [__m128i; 2]) -> [u32; 8] {
    let mut a = [0u32; 4];
    let mut c = [0u32; 4];
    // SAFETY: 16 writable bytes each; storeu has no alignment requirement.
    unsafe {
        _mm_storeu_si128(a.as_mut_ptr().cast(), x[0]);
        _mm_storeu_si128(c.as_mut_ptr().cast(), x[1]);
    }
    [a[3], a[2], c[3], c[2], a[1], a[0], c[1], c[0]]
}

/// TSC ticks per core cycle: a chain of dependent adds runs at one per cycle.
fn ticks_per_cycle() -> f64 {
    let n: u64 = 100_000_000;
    (0..5)
        .map(|_| {
            // SAFETY: rdtsc has no preconditions on x86_64; the asm only touches its registers.
            unsafe {
                let t0 = _rdtsc();
                core::arch::asm!("2: add {x}, 1", "add {x}, 1", "add {x}, 1", "add {x}, 1", "sub {n}, 4", "jnz 2b",
                    x = inout(reg) 0u64 => _, n = inout(reg) n => _, options(nostack));
                (_rdtsc() - t0) as f64 / n as f64
            }
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .map(|s| s.parse().expect("a number"))
            .unwrap_or(d)
    };
    let (kib, trials) = (arg(1, 64), arg(2, 200));
    assert!(
        std::arch::is_x86_feature_detected!("sha") && std::arch::is_x86_feature_detected!("avx"),
        "needs SHA-NI and AVX"
    );
    let len = kib * 1024;
    let mut seed = 1u64;
    let bufs: Vec<Vec<u8>> = (0..4)
        .map(|_| {
            (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 33) as u8
                })
                .collect()
        })
        .collect();
    let blocks: [&[u8]; 4] = core::array::from_fn(|j| &bufs[j][..]);
    let n = len / 64;
    let mut want = [sha256::H0; 4];
    for (s, b) in want.iter_mut().zip(blocks) {
        sha256_compress_portable(s, b);
    }
    let tpc = ticks_per_cycle();
    let cycles_per_block = |ticks: f64| ticks / tpc / (4 * n) as f64;
    let time = |f: &mut dyn FnMut()| {
        // SAFETY: rdtsc has no preconditions on x86_64.
        let t0 = unsafe { _rdtsc() };
        f();
        (unsafe { _rdtsc() } - t0) as f64
    };
    let mut best = vec![f64::MAX; generated::KERNELS.len() + 1];
    for _ in 0..trials {
        for (i, (name, f, digests)) in generated::KERNELS.iter().enumerate() {
            let mut s = [sha256::H0; 4].map(|h| to_ni(&h));
            // SAFETY: gen.py's kernels need SHA-NI and AVX (asserted above) and n blocks per lane.
            best[i] = best[i].min(time(&mut || unsafe { f(&mut s, blocks, n) }));
            if *digests {
                assert_eq!(s.map(from_ni), want, "{name} computes a wrong state");
            }
        }
        let mut h: Vec<Sha256> = (0..4).map(|_| Sha256::new()).collect();
        let last = best.len() - 1;
        best[last] = best[last].min(time(&mut || sha256::update_many_lanes(&mut h, &blocks, 4)));
    }
    println!("{kib} KiB per stream, fastest of {trials}; {tpc:.4} TSC ticks per core cycle");
    println!(
        "{:<28} {:>13} {:>12}",
        "kernel", "cycles/block", "cycles/byte"
    );
    let names = generated::KERNELS
        .iter()
        .map(|k| k.0)
        .chain(["tma's own (update_many_lanes)"]);
    for (name, b) in names.zip(&best) {
        println!(
            "{name:<28} {:>13.1} {:>12.3}",
            cycles_per_block(*b),
            cycles_per_block(*b) / 64.0
        );
    }
    println!("\n{:<28} {:>13}", "instruction mix", "cycles/copy");
    let buf = vec![0u8; 4096];
    for (name, f) in generated::MIXES {
        let iters = 2000;
        // SAFETY: the bodies read at most 256 bytes of `buf`; SHA-NI asserted above.
        let t = (0..300)
            .map(|_| time(&mut || unsafe { f(buf.as_ptr(), iters) }))
            .fold(f64::MAX, f64::min);
        println!("{name:<28} {:>13.2}", t / tpc / (iters * 4) as f64);
    }
}
