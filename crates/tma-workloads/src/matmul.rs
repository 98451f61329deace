//! A reference f32 matrix multiply whose weight reads touch a new page at every access: the
//! kernel of the TDX/oneDNN investigation, where a guest without transparent huge pages ran it
//! markedly slower (TLB misses, and two-dimensional page walks in a VM).
//!
//! # Design
//! `C[M×N] = A[M×K] · B[K×N]`, all row-major f32, computed the straightforward way: each output
//! element is one dot product of a row of `A` (contiguous) with a column of the weight matrix
//! `B`. Walking down a column steps `N × 4` bytes per access, 4000 bytes for the default
//! `N = 1000`, so every load of `B` lands on a different 4 KiB page: one column touches `K`
//! pages (4096 by default), more than a second-level TLB holds, so with 4 KiB pages nearly
//! every load of `B` needs a page walk. The cache lines themselves are reused by the next
//! columns (16 f32 share a line), so on 2 MiB pages, where all of `B` (16 MiB) needs 8 TLB
//! entries, the same loop runs at the speed of its add chain instead.
//!
//! The three buffers are anonymous mappings aligned to 2 MiB and sized in whole 2 MiB units,
//! advised `MADV_HUGEPAGE` (`--thp on`) or `MADV_NOHUGEPAGE` (`--thp off`) before they are
//! first touched. Whether the kernel actually backed them with huge pages is then read back
//! from `/proc/self/smaps` ([`tma_host::Host::huge_page_share`]), not assumed.
//!
//! The hot loop is the `#[inline(never)]` function [`matmul_ref`], so `tma locate` attributes
//! time to it by name. The result is checked against an f64 dot product on a few elements.

use std::ops::Range;
use std::time::Instant;

use tma_host::{HostError, HugePageShare, ThpMode};

use crate::clock::Stamp;
use crate::rng::SplitMix64;

/// The huge-page advice given to the buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpAdvice {
    /// `madvise(MADV_HUGEPAGE)`.
    On,
    /// `madvise(MADV_NOHUGEPAGE)`.
    Off,
}

impl ThpAdvice {
    /// `on` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            ThpAdvice::On => "on",
            ThpAdvice::Off => "off",
        }
    }
}

/// Workload parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatmulConfig {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Columns of `A`, rows of `B` (the dot-product length).
    pub k: usize,
    /// Columns of `B` and `C`; `N × 4` bytes is the stride of a column walk.
    pub n: usize,
    /// Huge-page advice for the buffers.
    pub thp: ThpAdvice,
    /// Seed of the matrix contents.
    pub seed: u64,
    /// Where the THP mode and this process's smaps are read.
    pub host: tma_host::Host,
}

impl Default for MatmulConfig {
    fn default() -> Self {
        MatmulConfig {
            m: 1024,
            k: 4096,
            n: 1000,
            thp: ThpAdvice::On,
            seed: 1,
            host: tma_host::Host::system(),
        }
    }
}

/// Errors of the matmul workload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MatmulError {
    /// A dimension is zero.
    #[error("--m, --k and --n must be at least 1: there is nothing to multiply otherwise")]
    Empty,
    /// The buffers would not fit in the address space.
    #[error("a {m}×{k} by {k}×{n} problem is too large to allocate")]
    TooLarge { m: usize, k: usize, n: usize },
    /// mmap failed.
    #[error("cannot map {bytes} bytes for the matrices: {source}")]
    Map {
        bytes: usize,
        source: std::io::Error,
    },
    /// The product is wrong (a bug, not a measurement problem).
    #[error(
        "result check failed: C[{i}][{j}] = {got}, but the f64 dot product gives {want} \
         (tolerance {tolerance:e})"
    )]
    Check {
        i: usize,
        j: usize,
        got: f32,
        want: f64,
        tolerance: f64,
    },
}

/// How the buffers are backed, from smaps.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HugePages {
    /// Bytes of the three buffers as mapped (each rounded up to 2 MiB).
    pub bytes: u64,
    /// Of those, bytes on huge pages (AnonHugePages of exactly those mappings).
    pub huge_bytes: u64,
    /// `huge_bytes / bytes`.
    pub share: f64,
    /// Every smaps entry counted lies wholly inside the buffers (else an upper bound).
    pub exact: bool,
}

/// The result check.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Check {
    /// Output elements compared with an f64 dot product.
    pub elements: usize,
    /// Largest `|got - want| / tolerance` (below 1 passes); the tolerance is the worst-case
    /// f32 summation error `K · ε · Σ|a·b|`.
    pub worst_error_ratio: f64,
}

/// Result of one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MatmulResult {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// The advice given.
    pub thp: ThpAdvice,
    /// The system THP mode (`None`: the kernel has no THP, or it could not be read).
    pub thp_mode: Option<ThpMode>,
    /// Why the mode is unknown, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thp_mode_error: Option<String>,
    /// Huge-page backing of the buffers (`None` when smaps could not be read).
    pub huge_pages: Option<HugePages>,
    /// Why the backing is unknown, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_pages_error: Option<String>,
    /// Seconds spent mapping and filling the buffers (not timed).
    pub setup_seconds: f64,
    /// CPU seconds of the multiply (in `tma.workload` at the top of the document, so not
    /// serialized here).
    #[serde(skip)]
    pub seconds: f64,
    /// Wall-clock seconds of the multiply (at the top of `tma.workload` too).
    #[serde(skip)]
    pub wall_seconds: f64,
    /// Floating-point operations (`2·M·K·N`).
    pub flops: u64,
    /// `flops / seconds / 1e9`.
    pub gflops: f64,
    /// The result check.
    pub check: Check,
    /// Sum of all of `C` (as f64), so runs can be compared.
    pub checksum: f64,
    /// A plain statement when the advice did not get what it asked for (`--thp on` without
    /// huge pages, or `--thp off` with some).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `C = A · B`, row-major, each `C[i][j]` one dot product of row `i` of `A` with column `j` of
/// `B` (a stride of `n` elements, a new page per access once `n × 4` nears 4 KiB).
#[inline(never)]
pub fn matmul_ref(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    for i in 0..m {
        let row = &a[i * k..(i + 1) * k];
        for j in 0..n {
            let mut s = 0f32;
            let mut p = j;
            for &x in row {
                s += x * b[p];
                p += n;
            }
            c[i * n + j] = s;
        }
    }
}

fn fill(buf: &mut [f32], rng: &mut SplitMix64) {
    for x in buf {
        // 24 random bits into [-1, 1).
        *x = (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    }
}

/// Compare a few elements of `c` (the corners and some chosen by `seed`) with an f64 dot
/// product; errors on the first that is off by more than the worst-case f32 summation error.
pub(crate) fn check(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    (m, k, n): (usize, usize, usize),
    seed: u64,
) -> Result<Check, MatmulError> {
    let mut at = vec![(0, 0), (m - 1, n - 1), (0, n - 1), (m - 1, 0)];
    let mut rng = SplitMix64::new(seed ^ 0x5eed_c4ec);
    for _ in 0..12 {
        at.push((rng.below(m as u64) as usize, rng.below(n as u64) as usize));
    }
    let mut worst = 0f64;
    for &(i, j) in &at {
        let (mut want, mut mag) = (0f64, 0f64);
        for p in 0..k {
            let t = a[i * k + p] as f64 * b[p * n + j] as f64;
            want += t;
            mag += t.abs();
        }
        let tolerance = (k as f64 * f32::EPSILON as f64 * mag).max(f64::MIN_POSITIVE);
        let got = c[i * n + j];
        let ratio = (got as f64 - want).abs() / tolerance;
        if ratio.is_nan() || ratio > 1.0 {
            return Err(MatmulError::Check {
                i,
                j,
                got,
                want,
                tolerance,
            });
        }
        worst = worst.max(ratio);
    }
    Ok(Check {
        elements: at.len(),
        worst_error_ratio: worst,
    })
}

pub(crate) fn error_text(e: &HostError) -> String {
    if e.is_missing() {
        format!("{} does not exist", e.path().display())
    } else {
        e.to_string()
    }
}

/// The element counts of A (m×k), B (k×n) and C (m×n) and the flops of one multiply.
pub(crate) struct Sizes {
    pub la: usize,
    pub lb: usize,
    pub lc: usize,
    pub flops: u64,
}

/// [`Sizes`] of an m×k by k×n multiply, refused when a dimension is zero or a matrix's bytes
/// (plus the alignment slack) or the flops overflow.
pub(crate) fn sizes(m: usize, k: usize, n: usize) -> Result<Sizes, MatmulError> {
    if m == 0 || k == 0 || n == 0 {
        return Err(MatmulError::Empty);
    }
    let too_large = || MatmulError::TooLarge { m, k, n };
    let len = |r: usize, c: usize| {
        r.checked_mul(c)
            .filter(|l| {
                l.checked_mul(4)
                    .and_then(|b| b.checked_add(4 << 20))
                    .is_some()
            })
            .ok_or_else(too_large)
    };
    let (la, lb, lc) = (len(m, k)?, len(k, n)?, len(m, n)?);
    let flops = 2u64
        .checked_mul(m as u64)
        .and_then(|x| x.checked_mul(k as u64))
        .and_then(|x| x.checked_mul(n as u64))
        .ok_or_else(too_large)?;
    Ok(Sizes { la, lb, lc, flops })
}

/// Map and fill the buffers for `cfg`, time the multiply, read back the huge-page backing
/// and check the result.
pub fn run(cfg: &MatmulConfig) -> Result<MatmulResult, MatmulError> {
    let (m, k, n) = (cfg.m, cfg.k, cfg.n);
    let Sizes { la, lb, lc, flops } = sizes(m, k, n)?;

    let t0 = Instant::now();
    let mut a = sys::Buffer::new(la, cfg.thp)?;
    let mut b = sys::Buffer::new(lb, cfg.thp)?;
    let mut c = sys::Buffer::new(lc, cfg.thp)?;
    let mut rng = SplitMix64::new(cfg.seed);
    fill(a.as_mut_slice(), &mut rng);
    fill(b.as_mut_slice(), &mut rng);
    // Touch C before timing too, so its page faults are not in the timed region.
    c.as_mut_slice().fill(0.0);
    let setup_seconds = t0.elapsed().as_secs_f64();

    let t = Stamp::now();
    matmul_ref(a.as_slice(), b.as_slice(), c.as_mut_slice(), m, k, n);
    let seconds = t.cpu_seconds();
    let wall_seconds = t.wall_seconds();

    let ranges: Vec<Range<u64>> = [&a, &b, &c].iter().map(|x| x.range()).collect();
    let (huge_pages, huge_pages_error) = match cfg.host.huge_page_share(None, &ranges) {
        Ok(s) => (Some(backing(&s)), None),
        Err(e) => (None, Some(error_text(&e))),
    };
    let (thp_mode, thp_mode_error) = match cfg.host.thp_mode() {
        Ok(mode) => (Some(mode), None),
        Err(e) => (None, Some(error_text(&e))),
    };
    let check = check(
        a.as_slice(),
        b.as_slice(),
        c.as_slice(),
        (m, k, n),
        cfg.seed,
    )?;
    let checksum = c.as_slice().iter().map(|&x| x as f64).sum();
    let note = note(cfg.thp, thp_mode, huge_pages.as_ref());
    Ok(MatmulResult {
        m,
        k,
        n,
        thp: cfg.thp,
        thp_mode,
        thp_mode_error,
        huge_pages,
        huge_pages_error,
        setup_seconds,
        seconds,
        wall_seconds,
        flops,
        gflops: if seconds > 0.0 {
            flops as f64 / seconds / 1e9
        } else {
            0.0
        },
        check,
        checksum,
        note,
    })
}

pub(crate) fn backing(s: &HugePageShare) -> HugePages {
    HugePages {
        bytes: s.bytes,
        huge_bytes: s.huge_bytes,
        share: s.share(),
        exact: s.exact,
    }
}

/// Say plainly when the advice did not get what it asked for.
pub(crate) fn note(
    thp: ThpAdvice,
    mode: Option<ThpMode>,
    pages: Option<&HugePages>,
) -> Option<String> {
    let share = pages.map(|p| p.share)?;
    match thp {
        ThpAdvice::On if share < 0.5 => Some(match mode {
            Some(ThpMode::Never) => format!(
                "--thp on got {:.0}% huge pages: the system THP mode is `never`, so MADV_HUGEPAGE \
                 has no effect (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled); this \
                 run measured 4 KiB pages",
                share * 100.0
            ),
            None => format!(
                "--thp on got {:.0}% huge pages: this kernel has no transparent huge pages; this \
                 run measured 4 KiB pages",
                share * 100.0
            ),
            Some(m) => format!(
                "--thp on got only {:.0}% huge pages although THP is `{m}`: the kernel could not \
                 find free 2 MiB blocks (memory fragmented or short; try \
                 echo 1 > /proc/sys/vm/compact_memory); this run mostly measured 4 KiB pages",
                share * 100.0
            ),
        }),
        ThpAdvice::Off if share > 0.01 => Some(format!(
            "--thp off still has {:.0}% of the buffers on huge pages (MADV_NOHUGEPAGE was not honoured)",
            share * 100.0
        )),
        _ => None,
    }
}

/// The only `unsafe` of this module: the 2 MiB-aligned anonymous mappings and their advice.
pub(crate) mod sys {
    // unsafe allowed: mmap(2), munmap(2), madvise(2) and the slices over the mapping.
    #![allow(unsafe_code)]

    use std::ops::Range;

    use super::{MatmulError, ThpAdvice};

    const HUGE: usize = 2 << 20;

    /// `len` f32 in a private anonymous mapping that starts on a 2 MiB boundary and spans whole
    /// 2 MiB units, advised before its first touch. Unmapped on drop.
    pub struct Buffer {
        ptr: *mut f32,
        len: usize,
        bytes: usize,
    }

    impl Buffer {
        pub fn new(len: usize, thp: ThpAdvice) -> Result<Buffer, MatmulError> {
            let overflow = || MatmulError::Map {
                bytes: usize::MAX,
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the size overflows the address space",
                ),
            };
            let bytes = len
                .checked_mul(4)
                .and_then(|b| b.checked_next_multiple_of(HUGE))
                .ok_or_else(overflow)?
                .max(HUGE);
            let span = bytes.checked_add(HUGE).ok_or_else(overflow)?;
            // SAFETY: a fresh private anonymous mapping at an address of the kernel's choosing
            // aliases nothing; the result is checked against MAP_FAILED.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    span,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(MatmulError::Map {
                    bytes: span,
                    source: std::io::Error::last_os_error(),
                });
            }
            let start = (base as usize).next_multiple_of(HUGE);
            let head = start - base as usize;
            let tail = span - head - bytes;
            // SAFETY: [base, start) and [start + bytes, base + span) are the unaligned slack of
            // the mapping just made, which nothing refers to; unmapping them leaves exactly
            // [start, start + bytes), so smaps shows the buffer as its own mapping.
            unsafe {
                if head > 0 {
                    libc::munmap(base, head);
                }
                if tail > 0 {
                    libc::munmap((start + bytes) as *mut libc::c_void, tail);
                }
            }
            let advice = match thp {
                ThpAdvice::On => libc::MADV_HUGEPAGE,
                ThpAdvice::Off => libc::MADV_NOHUGEPAGE,
            };
            // SAFETY: [start, start + bytes) is this buffer's own mapping; the advice only
            // changes how the kernel backs the pages, never their contents. Failure (a kernel
            // without THP) is harmless and shows in the huge-page share read back from smaps.
            unsafe {
                libc::madvise(start as *mut libc::c_void, bytes, advice);
            }
            Ok(Buffer {
                ptr: start as *mut f32,
                len,
                bytes,
            })
        }

        pub fn as_slice(&self) -> &[f32] {
            // SAFETY: `ptr` is the start of a readable, writable mapping of `bytes >= len * 4`
            // bytes, aligned for f32, zero-filled by the kernel (so initialised), owned by
            // `self` and alive until drop; the shared borrow of `self` excludes writers.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }

        pub fn as_mut_slice(&mut self) -> &mut [f32] {
            // SAFETY: as in `as_slice`; the exclusive borrow of `self` makes this the only
            // reference into the mapping.
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
        }

        /// The mapping's address range.
        pub fn range(&self) -> Range<u64> {
            self.ptr as u64..self.ptr as u64 + self.bytes as u64
        }
    }

    impl Drop for Buffer {
        fn drop(&mut self) {
            // SAFETY: the mapping [ptr, ptr + bytes) is owned by `self` and no slice borrowed
            // from it outlives `self`.
            unsafe {
                libc::munmap(self.ptr.cast(), self.bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_matches_a_naive_f64_product() {
        let (m, k, n) = (3, 5, 4);
        let a: Vec<f32> = (0..m * k).map(|x| x as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..k * n).map(|x| 1.0 - x as f32 * 0.25).collect();
        let mut c = vec![0f32; m * n];
        matmul_ref(&a, &b, &mut c, m, k, n);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum();
                assert!((c[i * n + j] as f64 - want).abs() < 1e-4, "C[{i}][{j}]");
            }
        }
        assert_eq!(check(&a, &b, &c, (m, k, n), 1).unwrap().elements, 16);
        c[n + 2] += 1.0;
        let seen = (0..64).any(|s| {
            matches!(
                check(&a, &b, &c, (m, k, n), s),
                Err(MatmulError::Check { i: 1, j: 2, .. })
            )
        });
        assert!(seen, "a wrong element is caught by some seed");
    }

    #[test]
    fn small_run_is_checked_and_reports_its_backing() {
        let cfg = MatmulConfig {
            m: 4,
            k: 64,
            n: 1000,
            thp: ThpAdvice::Off,
            ..MatmulConfig::default()
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.flops, 2 * 4 * 64 * 1000);
        assert!(r.check.worst_error_ratio < 1.0);
        let hp = r.huge_pages.expect("this process's smaps is readable");
        // A, B and C each take one whole 2 MiB unit.
        assert_eq!(hp.bytes, 3 * (2 << 20));
        assert!(hp.exact);
        assert!(matches!(
            run(&MatmulConfig {
                m: 0,
                ..cfg.clone()
            }),
            Err(MatmulError::Empty)
        ));
        assert!(matches!(
            run(&MatmulConfig {
                m: usize::MAX,
                k: 3,
                ..cfg
            }),
            Err(MatmulError::TooLarge { .. })
        ));
    }

    #[test]
    fn notes_say_when_the_advice_missed() {
        let pages = |share| HugePages {
            bytes: 1,
            huge_bytes: 0,
            share,
            exact: true,
        };
        assert!(note(ThpAdvice::On, Some(ThpMode::Madvise), Some(&pages(0.99))).is_none());
        assert!(note(ThpAdvice::On, Some(ThpMode::Never), Some(&pages(0.0)))
            .unwrap()
            .contains("`never`"));
        assert!(
            note(ThpAdvice::On, Some(ThpMode::Madvise), Some(&pages(0.1)))
                .unwrap()
                .contains("fragmented")
        );
        assert!(note(ThpAdvice::On, None, Some(&pages(0.0)))
            .unwrap()
            .contains("no transparent huge pages"));
        assert!(note(ThpAdvice::Off, Some(ThpMode::Always), Some(&pages(0.0))).is_none());
        assert!(note(ThpAdvice::Off, Some(ThpMode::Always), Some(&pages(0.5))).is_some());
        assert!(note(ThpAdvice::On, Some(ThpMode::Never), None).is_none());
    }
}
