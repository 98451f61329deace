//! The SHA-256 workload behind `tma workload sha256`: hash `streams` random buffers of `size`
//! bytes, `iters` times, and time it.

use super::{digest_many_with, to_hex, Sha256Error, Sha256Impl};
use crate::clock::Stamp;
use crate::rng::SplitMix64;

/// Parameters of the SHA-256 workload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Sha256Workload {
    /// Implementation to run.
    pub imp: Sha256Impl,
    /// Bytes per buffer (one buffer per stream).
    pub size_bytes: u64,
    /// How many times each buffer is hashed.
    pub iters: u64,
    /// Independent streams hashed together (interleaved with SHA-NI when > 1).
    pub streams: usize,
    /// Seed of the buffer contents.
    pub seed: u64,
}

impl Default for Sha256Workload {
    fn default() -> Self {
        Sha256Workload {
            imp: Sha256Impl::best(),
            size_bytes: 1 << 20,
            iters: 256,
            streams: 1,
            seed: 1,
        }
    }
}

/// Result of one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sha256WorkloadResult {
    /// Implementation that ran.
    pub imp: Sha256Impl,
    /// Streams interleaved.
    pub streams: usize,
    /// Total bytes hashed (size x streams x iters).
    pub bytes: u64,
    /// CPU seconds of the timed hashing (buffer generation excluded).
    pub seconds: f64,
    /// Wall-clock seconds of the same region (larger on a loaded machine).
    pub wall_seconds: f64,
    /// Nanoseconds per byte.
    pub ns_per_byte: f64,
    /// Bytes per second.
    pub bytes_per_second: f64,
    /// Bytes per second of the fastest pass over the buffers (CPU time of each pass; one
    /// pass is `size x streams` bytes). On a shared host other tenants only ever slow a pass
    /// down, so this is the figure to compare with a peer's best run.
    pub best_bytes_per_second: f64,
    /// Digest of stream 0 (the same on every iteration, so every implementation must agree).
    pub digest: String,
}

/// Generate the buffers and time the hashing.
pub fn run(cfg: &Sha256Workload) -> Result<Sha256WorkloadResult, Sha256Error> {
    if !cfg.imp.is_available() {
        return Err(Sha256Error::NiUnavailable);
    }
    let streams = cfg.streams.max(1);
    let mut rng = SplitMix64::new(cfg.seed);
    let bufs: Vec<Vec<u8>> = (0..streams)
        .map(|_| {
            let mut v = vec![0u8; cfg.size_bytes as usize];
            rng.fill(&mut v);
            v
        })
        .collect();
    let inputs: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let mut first = [0u8; 32];
    let t = Stamp::now();
    let mut best = f64::INFINITY;
    for _ in 0..cfg.iters {
        let pass = Stamp::now();
        let d = digest_many_with(cfg.imp, std::hint::black_box(&inputs), streams)?;
        first = std::hint::black_box(d[0]);
        best = best.min(pass.cpu_seconds());
    }
    let seconds = t.cpu_seconds();
    let wall_seconds = t.wall_seconds();
    if cfg.iters == 0 {
        first = digest_many_with(cfg.imp, &inputs[..1], 1)?[0];
    }
    let bytes = cfg.size_bytes * streams as u64 * cfg.iters;
    Ok(Sha256WorkloadResult {
        imp: cfg.imp,
        streams,
        bytes,
        seconds,
        wall_seconds,
        ns_per_byte: if bytes > 0 {
            seconds * 1e9 / bytes as f64
        } else {
            0.0
        },
        bytes_per_second: if seconds > 0.0 {
            bytes as f64 / seconds
        } else {
            0.0
        },
        best_bytes_per_second: if best.is_finite() && best > 0.0 {
            (cfg.size_bytes * streams as u64) as f64 / best
        } else {
            0.0
        },
        digest: to_hex(&first),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_impl_and_stream_count_agrees() {
        let mut digests = Vec::new();
        for imp in [Sha256Impl::Portable, Sha256Impl::Ni] {
            if !imp.is_available() {
                eprintln!("skipped {imp}: not supported by this CPU");
                continue;
            }
            for streams in [1, 2, 4] {
                let r = run(&Sha256Workload {
                    imp,
                    size_bytes: 4096 + 7,
                    iters: 3,
                    streams,
                    seed: 9,
                })
                .unwrap();
                assert_eq!(r.bytes, (4096 + 7) * streams as u64 * 3);
                assert!(r.seconds > 0.0 && r.ns_per_byte > 0.0);
                // The fastest of three passes is at least as fast as their average.
                assert!(
                    r.best_bytes_per_second >= r.bytes_per_second * 0.999,
                    "{} < {}",
                    r.best_bytes_per_second,
                    r.bytes_per_second
                );
                digests.push(r.digest);
            }
        }
        assert!(digests.windows(2).all(|w| w[0] == w[1]), "{digests:?}");
    }
}
