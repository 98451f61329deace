//! DRAM-bound random access: a dependent pointer chase through a buffer far larger than the
//! last-level cache, with an optional software prefetch that hides the DRAM latency.
//!
//! # Design
//! The buffer is an array of 16-byte [`Node`]s linked into one random cycle that visits every
//! node (a uniformly random cyclic permutation, the distribution Sattolo's algorithm gives,
//! built here from a shuffled visit order). Each step loads `node.next`, so every load depends
//! on the previous one: the core can have only one miss in flight and the hardware prefetchers
//! see no pattern. Each step therefore costs a full DRAM round trip (plus a TLB miss unless
//! huge pages back the buffer): the textbook case where TMA level 3 says `DRAM_Bound` and the
//! latency, not the bandwidth, is the limit.
//!
//! A software prefetch cannot help a chase by itself: the address of the next node is only
//! known once the current load returns. The classic fix is *jump-pointer prefetching* (Luk and
//! Mowry, "Compiler-based prefetching for recursive data structures", ASPLOS 1996): every node
//! also stores `jump`, the node `distance` steps further along the chain, written when the
//! structure is built. In `--prefetch` mode each step issues `prefetch(node.jump)`; the jump
//! field is in the same cache line as `next`, so it costs no extra miss. A node is then
//! requested `distance` steps before it is needed, up to `distance` misses are in flight at
//! once, and a step costs about `latency / distance` instead of `latency` until the
//! per-step work or the memory bandwidth becomes the limit. Both modes use the same layout,
//! so they touch exactly the same memory.
//!
//! The hot loops are `#[inline(never)]` functions named [`chase`] and [`chase_prefetch`], so
//! a sampling profiler (`tma locate`) attributes time to them by name.

use std::time::Instant;

use crate::clock::Stamp;
use crate::rng::SplitMix64;

/// Errors from configuring the workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DramError {
    /// Buffer too small to hold a cycle.
    #[error("buffer size {0} bytes is too small: the DRAM workload needs at least 2 nodes of 16 bytes (use --size 32 or more; sizes far above the last-level cache, e.g. 512M, show the effect)")]
    TooSmall(u64),
    /// Buffer too large for 32-bit node indices.
    #[error(
        "buffer size {0} bytes is too large: at most 2^32 nodes of 16 bytes (64 GiB) are supported"
    )]
    TooLarge(u64),
    /// Prefetch distance out of range.
    #[error("prefetch distance {distance} must be between 1 and the number of nodes ({nodes})")]
    BadDistance { distance: u64, nodes: u64 },
}

/// One 16-byte element of the chain. Four share a 64-byte cache line, but as neighbours in
/// memory are unrelated in the chain, every step still lands on a line not touched recently.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(16))]
pub struct Node {
    /// Index of the next node in the chain.
    pub next: u32,
    /// Index of the node `distance` steps ahead (the jump pointer used by the prefetch mode).
    pub jump: u32,
    /// Payload summed by the traversal so the loads are used.
    pub value: u64,
}

/// Size of a [`Node`] in bytes.
pub const NODE_BYTES: u64 = std::mem::size_of::<Node>() as u64;

/// Workload parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DramConfig {
    /// Buffer size in bytes (rounded down to whole nodes). Default 512 MiB: 16 times a 32 MiB
    /// L3, so nearly every access goes to DRAM.
    pub size_bytes: u64,
    /// Number of dependent loads timed.
    pub accesses: u64,
    /// Issue a software prefetch of the node `distance` steps ahead.
    pub prefetch: bool,
    /// How many steps ahead the jump pointers point.
    pub distance: u64,
    /// Seed of the random chain.
    pub seed: u64,
    /// Ask the kernel for transparent huge pages (`madvise(MADV_HUGEPAGE)`) so the run
    /// measures DRAM latency rather than page walks.
    pub huge_pages: bool,
}

impl Default for DramConfig {
    fn default() -> Self {
        DramConfig {
            size_bytes: 512 << 20,
            accesses: 20_000_000,
            prefetch: false,
            distance: 16,
            seed: 1,
            huge_pages: true,
        }
    }
}

/// The built chain.
pub struct DramChain {
    nodes: Vec<Node>,
    start: u32,
    distance: u64,
}

impl std::fmt::Debug for DramChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DramChain")
            .field("nodes", &self.nodes.len())
            .field("start", &self.start)
            .field("distance", &self.distance)
            .finish()
    }
}

impl DramChain {
    /// Build the random cycle for `cfg` (size, distance, seed, huge pages).
    // Manual swaps and index loops: `slice::swap` and iterators are function calls per element
    // in debug builds, where the tests run this on 128 MiB.
    #[allow(clippy::manual_swap)]
    pub fn build(cfg: &DramConfig) -> Result<DramChain, DramError> {
        let n = cfg.size_bytes / NODE_BYTES;
        if n < 2 {
            return Err(DramError::TooSmall(cfg.size_bytes));
        }
        if n > u32::MAX as u64 + 1 {
            return Err(DramError::TooLarge(cfg.size_bytes));
        }
        if cfg.distance == 0 || cfg.distance > n {
            return Err(DramError::BadDistance {
                distance: cfg.distance,
                nodes: n,
            });
        }
        let n = n as usize;
        let mut nodes: Vec<Node> = Vec::with_capacity(n);
        if cfg.huge_pages {
            sys::advise_huge_pages(nodes.as_ptr().cast(), n * NODE_BYTES as usize);
        }
        nodes.resize(n, Node::default());

        // Visit order: a Fisher-Yates shuffle of 0..n. Linking order[k] -> order[k+1] (mod n)
        // gives a uniformly random n-cycle. The loops index plain slices with `while` so they
        // stay reasonably fast in unoptimised (debug) builds too, where tests run them.
        let mut order_vec: Vec<u32> = vec![0; n];
        let order: &mut [u32] = &mut order_vec;
        let mut i = 0;
        while i < n {
            order[i] = i as u32;
            i += 1;
        }
        let mut rng = SplitMix64::new(cfg.seed);
        let mut i = n - 1;
        while i > 0 {
            let j = rng.below(i as u64 + 1) as usize;
            let t = order[i];
            order[i] = order[j];
            order[j] = t;
            i -= 1;
        }
        let d = cfg.distance as usize;
        let slots: &mut [Node] = &mut nodes;
        let mut k = 0;
        while k < n {
            let mut next = k + 1;
            if next == n {
                next = 0;
            }
            let mut jump = k + d;
            if jump >= n {
                jump -= n;
            }
            slots[order[k] as usize] = Node {
                next: order[next],
                jump: order[jump],
                value: k as u64,
            };
            k += 1;
        }
        let start = order[0];
        Ok(DramChain {
            start,
            nodes,
            distance: cfg.distance,
        })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if the chain has no nodes (never, once built).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Bytes occupied by the nodes.
    pub fn bytes(&self) -> u64 {
        self.nodes.len() as u64 * NODE_BYTES
    }

    /// The nodes, for inspection.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// First node of the traversal.
    pub fn start(&self) -> u32 {
        self.start
    }
}

/// Follow `steps` links from `start`; returns a checksum of the visited payloads and the end
/// node, so the loads cannot be optimised away.
#[inline(never)]
pub fn chase(nodes: &[Node], start: u32, steps: u64) -> u64 {
    let mut p = start as usize;
    let mut sum = 0u64;
    let mut i = 0;
    while i < steps {
        let node = &nodes[p];
        sum = sum.wrapping_add(node.value);
        p = node.next as usize;
        i += 1;
    }
    sum ^ ((p as u64) << 40)
}

/// [`chase`] plus a software prefetch of `node.jump` at every step (jump-pointer
/// prefetching). Same result as [`chase`].
#[inline(never)]
pub fn chase_prefetch(nodes: &[Node], start: u32, steps: u64) -> u64 {
    let mut p = start as usize;
    let mut sum = 0u64;
    let mut i = 0;
    while i < steps {
        let node = &nodes[p];
        sys::prefetch(nodes.as_ptr().wrapping_add(node.jump as usize).cast());
        sum = sum.wrapping_add(node.value);
        p = node.next as usize;
        i += 1;
    }
    sum ^ ((p as u64) << 40)
}

/// Result of one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DramResult {
    /// Buffer bytes actually used (whole nodes).
    pub bytes: u64,
    /// Nodes in the cycle.
    pub nodes: u64,
    /// Dependent loads timed.
    pub accesses: u64,
    /// Whether the prefetch mode ran.
    pub prefetch: bool,
    /// Jump-pointer distance.
    pub distance: u64,
    /// Seconds spent building the chain (not part of the timed region).
    pub setup_seconds: f64,
    /// CPU seconds of the timed traversal.
    pub seconds: f64,
    /// Wall-clock seconds of the same region (larger on a loaded machine).
    pub wall_seconds: f64,
    /// Timed seconds per access, in nanoseconds.
    pub ns_per_access: f64,
    /// Accesses per second.
    pub accesses_per_second: f64,
    /// Checksum of the traversal (identical with and without prefetch for equal inputs).
    pub checksum: u64,
}

/// Build the chain for `cfg` and time `cfg.accesses` steps.
pub fn run(cfg: &DramConfig) -> Result<DramResult, DramError> {
    let t0 = Instant::now();
    let chain = DramChain::build(cfg)?;
    let setup_seconds = t0.elapsed().as_secs_f64();
    Ok(run_on(&chain, cfg.accesses, cfg.prefetch, setup_seconds))
}

/// Time `accesses` steps on an already built chain.
pub fn run_on(chain: &DramChain, accesses: u64, prefetch: bool, setup_seconds: f64) -> DramResult {
    let t = Stamp::now();
    let checksum = if prefetch {
        chase_prefetch(&chain.nodes, chain.start, accesses)
    } else {
        chase(&chain.nodes, chain.start, accesses)
    };
    let seconds = t.cpu_seconds();
    let wall_seconds = t.wall_seconds();
    let checksum = std::hint::black_box(checksum);
    DramResult {
        bytes: chain.bytes(),
        nodes: chain.len() as u64,
        accesses,
        prefetch,
        distance: chain.distance,
        setup_seconds,
        seconds,
        wall_seconds,
        ns_per_access: if accesses > 0 {
            seconds * 1e9 / accesses as f64
        } else {
            0.0
        },
        accesses_per_second: if seconds > 0.0 {
            accesses as f64 / seconds
        } else {
            0.0
        },
        checksum,
    }
}

/// The only `unsafe` of this module: the prefetch hint and the huge-page advice.
mod sys {
    // unsafe allowed: the PREFETCHT0 intrinsic and madvise(2).
    #![allow(unsafe_code)]

    /// Hint the CPU to bring the cache line at `p` into all cache levels. Never faults, even
    /// for an invalid address; does nothing on non-x86 targets.
    #[inline(always)]
    pub fn prefetch(p: *const i8) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: PREFETCHT0 is a hint: it never faults and never changes memory or
            // architectural state, whatever the address; SSE is part of the x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// Ask for transparent huge pages on the 2 MiB-aligned part of `[p, p + len)`, which must
    /// be memory this process owns (an allocation not yet touched). Failure is harmless (the
    /// buffer then uses 4 KiB pages), so the result is ignored.
    pub fn advise_huge_pages(p: *const u8, len: usize) {
        const HUGE: usize = 2 << 20;
        let start = (p as usize).div_ceil(HUGE) * HUGE;
        let end = (p as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: [start, end) lies inside the caller's allocation; MADV_HUGEPAGE only
            // changes how the kernel backs the pages, never their contents or mapping rights.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(size: u64, distance: u64) -> DramConfig {
        DramConfig {
            size_bytes: size,
            accesses: 1000,
            distance,
            huge_pages: false,
            ..DramConfig::default()
        }
    }

    #[test]
    fn chain_is_one_cycle_with_correct_jumps() {
        let chain = DramChain::build(&small(16 * 1000, 7)).unwrap();
        let n = chain.len();
        assert_eq!(n, 1000);
        let nodes = chain.nodes();
        let mut seen = vec![false; n];
        let mut path = Vec::with_capacity(n);
        let mut p = chain.start() as usize;
        for _ in 0..n {
            assert!(!seen[p], "node {p} visited twice before the cycle closed");
            seen[p] = true;
            path.push(p);
            p = nodes[p].next as usize;
        }
        assert_eq!(p, chain.start() as usize, "cycle closes after n steps");
        for (k, &node) in path.iter().enumerate() {
            assert_eq!(nodes[node].jump as usize, path[(k + 7) % n]);
        }
    }

    #[test]
    fn prefetch_gives_same_checksum() {
        let chain = DramChain::build(&small(16 * 4096, 16)).unwrap();
        let a = run_on(&chain, 10_000, false, 0.0);
        let b = run_on(&chain, 10_000, true, 0.0);
        assert_eq!(a.checksum, b.checksum);
        assert_eq!(a.accesses, 10_000);
        assert!(a.ns_per_access > 0.0 && a.accesses_per_second > 0.0);
    }

    #[test]
    fn bad_configs_are_errors() {
        assert_eq!(
            DramChain::build(&small(16, 1)).unwrap_err(),
            DramError::TooSmall(16)
        );
        assert!(matches!(
            DramChain::build(&small(16 * 10, 11)).unwrap_err(),
            DramError::BadDistance { .. }
        ));
        assert!(matches!(
            DramChain::build(&small(16 * 10, 0)).unwrap_err(),
            DramError::BadDistance { .. }
        ));
    }

    #[test]
    fn seeds_differ() {
        let a = DramChain::build(&small(16 * 64, 1)).unwrap();
        let mut cfg = small(16 * 64, 1);
        cfg.seed = 2;
        let b = DramChain::build(&cfg).unwrap();
        assert_ne!(
            a.nodes().iter().map(|n| n.next).collect::<Vec<_>>(),
            b.nodes().iter().map(|n| n.next).collect::<Vec<_>>()
        );
    }
}
