//! SHA-256 (FIPS 180-4): a portable implementation and an x86 SHA-NI one, chosen at run time.
//!
//! * [`Sha256`] is a streaming hasher (`update` / `finalize`); [`digest`] hashes one buffer.
//! * [`Sha256Impl`] names an implementation; [`Sha256Impl::best`] is SHA-NI when CPUID has
//!   the `sha` flag, else portable. [`Sha256::with_impl`] forces one and fails with a typed
//!   error when the CPU lacks it.
//! * [`update_many`] / [`digest_many`] hash several independent streams at once. With SHA-NI,
//!   one stream is bound by the SHA256RNDS2 latency chain (32 dependent instructions per
//!   64-byte block); interleaving 2 to 8 streams ([`LANE_WIDTHS`]) keeps several chains in
//!   flight and brings the core towards the instruction's throughput bound (2 to 4 streams:
//!   register-allocated kernels in inline assembly; see the `ni` module docs).

mod portable;
pub mod run;

#[cfg(target_arch = "x86_64")]
mod bmi2;

#[cfg(target_arch = "x86_64")]
mod ni;

/// Compress every 64-byte block of `blocks` into `state` with the portable code (its BMI2 build
/// where CPUID reports BMI2).
///
/// `blocks.len()` must be a multiple of 64; a trailing partial block is ignored (callers
/// only pass whole blocks).
#[inline(never)]
pub fn sha256_compress_portable(state: &mut [u32; 8], blocks: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if bmi2::compress_if_available(state, blocks) {
        return;
    }
    portable::compress_blocks(state, blocks);
}

/// Round constants K0..K63 (FIPS 180-4, 4.2.2): the first 32 bits of the fractional parts of
/// the cube roots of the first 64 primes.
pub const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// Initial hash value H(0) (FIPS 180-4, 5.3.3): the first 32 bits of the fractional parts of
/// the square roots of the first 8 primes.
pub const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// Length of a digest in bytes.
pub const DIGEST_LEN: usize = 32;

/// Errors from choosing an implementation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Sha256Error {
    /// SHA-NI was asked for on a CPU without it.
    #[error(
        "the SHA-NI implementation needs the x86 SHA extensions, and this CPU does not report \
         them (CPUID flag `sha`, `sha_ni` in /proc/cpuinfo); use the portable implementation \
         (`--impl portable`) or `auto`"
    )]
    NiUnavailable,
    /// An implementation name that is not known.
    #[error("unknown SHA-256 implementation `{0}`; choose one of: portable, ni, auto")]
    UnknownImpl(String),
}

/// A SHA-256 implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sha256Impl {
    /// Plain Rust from FIPS 180-4; runs everywhere.
    Portable,
    /// x86 SHA extensions (SHA256RNDS2 / SHA256MSG1 / SHA256MSG2).
    Ni,
}

impl Sha256Impl {
    /// Short name, as accepted by [`Sha256Impl::parse`]: `portable` or `ni`.
    pub fn name(self) -> &'static str {
        match self {
            Sha256Impl::Portable => "portable",
            Sha256Impl::Ni => "ni",
        }
    }

    /// Is this implementation usable on the running CPU?
    pub fn is_available(self) -> bool {
        match self {
            Sha256Impl::Portable => true,
            Sha256Impl::Ni => ni_token().is_some(),
        }
    }

    /// The fastest implementation this CPU supports.
    pub fn best() -> Sha256Impl {
        if Sha256Impl::Ni.is_available() {
            Sha256Impl::Ni
        } else {
            Sha256Impl::Portable
        }
    }

    /// Parse `portable`, `ni` (also `sha-ni`, `shani`) or `auto` (= [`Sha256Impl::best`]).
    pub fn parse(s: &str) -> Result<Sha256Impl, Sha256Error> {
        match s.to_ascii_lowercase().as_str() {
            "portable" => Ok(Sha256Impl::Portable),
            "ni" | "sha-ni" | "shani" | "sha_ni" => Ok(Sha256Impl::Ni),
            "auto" => Ok(Sha256Impl::best()),
            _ => Err(Sha256Error::UnknownImpl(s.to_string())),
        }
    }
}

impl std::fmt::Display for Sha256Impl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(target_arch = "x86_64")]
type NiCpu = ni::NiToken;
#[cfg(not(target_arch = "x86_64"))]
#[derive(Debug, Clone, Copy)]
enum NiCpu {}

#[cfg(target_arch = "x86_64")]
fn ni_token() -> Option<NiCpu> {
    ni::NiToken::detect()
}
#[cfg(not(target_arch = "x86_64"))]
fn ni_token() -> Option<NiCpu> {
    None
}

/// A resolved implementation, carrying the CPU-support proof for SHA-NI.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Portable,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Ni(NiCpu),
}

impl Backend {
    fn new(imp: Sha256Impl) -> Result<Backend, Sha256Error> {
        match imp {
            Sha256Impl::Portable => Ok(Backend::Portable),
            Sha256Impl::Ni => ni_token()
                .map(Backend::Ni)
                .ok_or(Sha256Error::NiUnavailable),
        }
    }

    fn implementation(self) -> Sha256Impl {
        match self {
            Backend::Portable => Sha256Impl::Portable,
            Backend::Ni(_) => Sha256Impl::Ni,
        }
    }

    #[inline]
    fn compress(self, state: &mut [u32; 8], blocks: &[u8]) {
        match self {
            Backend::Portable => sha256_compress_portable(state, blocks),
            #[cfg(target_arch = "x86_64")]
            Backend::Ni(cpu) => ni::compress(cpu, state, blocks),
            #[cfg(not(target_arch = "x86_64"))]
            Backend::Ni(cpu) => match cpu {},
        }
    }
}

/// Streaming SHA-256 hasher.
///
/// ```
/// use tma_workloads::sha256::{Sha256, to_hex};
/// let mut h = Sha256::new();
/// h.update(b"ab");
/// h.update(b"c");
/// assert_eq!(
///     to_hex(&h.finalize()),
///     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// );
/// ```
#[derive(Debug, Clone)]
pub struct Sha256 {
    state: [u32; 8],
    buf: [u8; 64],
    buf_len: usize,
    total_len: u64,
    backend: Backend,
}

impl Default for Sha256 {
    fn default() -> Self {
        Sha256::new()
    }
}

impl Sha256 {
    /// A hasher using the fastest implementation this CPU supports.
    pub fn new() -> Sha256 {
        Sha256::with_impl(Sha256Impl::best()).unwrap_or_else(|_| Sha256::portable())
    }

    /// A hasher using the portable implementation.
    pub fn portable() -> Sha256 {
        Sha256::from_backend(Backend::Portable)
    }

    /// A hasher using `imp`; fails if the CPU lacks it.
    pub fn with_impl(imp: Sha256Impl) -> Result<Sha256, Sha256Error> {
        Ok(Sha256::from_backend(Backend::new(imp)?))
    }

    fn from_backend(backend: Backend) -> Sha256 {
        Sha256 {
            state: H0,
            buf: [0; 64],
            buf_len: 0,
            total_len: 0,
            backend,
        }
    }

    /// The implementation this hasher uses.
    pub fn implementation(&self) -> Sha256Impl {
        self.backend.implementation()
    }

    /// Number of message bytes fed so far.
    pub fn len(&self) -> u64 {
        self.total_len
    }

    /// True if no byte was fed yet.
    pub fn is_empty(&self) -> bool {
        self.total_len == 0
    }

    /// Complete a partially filled block buffer from the front of `data`; returns the rest.
    fn fill_buffer<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        if self.buf_len == 0 {
            return data;
        }
        let take = (64 - self.buf_len).min(data.len());
        self.buf[self.buf_len..self.buf_len + take].copy_from_slice(&data[..take]);
        self.buf_len += take;
        if self.buf_len == 64 {
            let buf = self.buf;
            self.backend.compress(&mut self.state, &buf);
            self.buf_len = 0;
        }
        &data[take..]
    }

    /// Keep the tail (< 64 bytes) of `data` for the next update.
    fn keep_tail(&mut self, tail: &[u8]) {
        debug_assert!(self.buf_len == 0 || tail.is_empty());
        self.buf[self.buf_len..self.buf_len + tail.len()].copy_from_slice(tail);
        self.buf_len += tail.len();
    }

    /// Feed message bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.total_len = self.total_len.wrapping_add(data.len() as u64);
        let rest = self.fill_buffer(data);
        let whole = rest.len() / 64 * 64;
        if whole > 0 {
            self.backend.compress(&mut self.state, &rest[..whole]);
        }
        self.keep_tail(&rest[whole..]);
    }

    /// Pad (FIPS 180-4, 5.1.1) and return the digest.
    pub fn finalize(mut self) -> [u8; DIGEST_LEN] {
        let bit_len = self.total_len.wrapping_mul(8);
        let mut pad = [0u8; 128];
        pad[0] = 0x80;
        // The padded tail is one block if the 0x80 byte and the 8 length bytes fit after the
        // buffered bytes, otherwise two.
        let pad_len = if self.buf_len < 56 {
            64 - self.buf_len
        } else {
            128 - self.buf_len
        };
        pad[pad_len - 8..pad_len].copy_from_slice(&bit_len.to_be_bytes());
        let total = self.total_len;
        self.update(&pad[..pad_len]);
        self.total_len = total;
        debug_assert_eq!(self.buf_len, 0);
        let mut out = [0u8; DIGEST_LEN];
        for (chunk, w) in out.chunks_exact_mut(4).zip(self.state) {
            chunk.copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}

/// SHA-256 of `data` with the fastest implementation.
pub fn digest(data: &[u8]) -> [u8; DIGEST_LEN] {
    let mut h = Sha256::new();
    h.update(data);
    h.finalize()
}

/// SHA-256 of `data` with a chosen implementation.
pub fn digest_with(imp: Sha256Impl, data: &[u8]) -> Result<[u8; DIGEST_LEN], Sha256Error> {
    let mut h = Sha256::with_impl(imp)?;
    h.update(data);
    Ok(h.finalize())
}

/// Default number of streams interleaved by [`update_many`] with SHA-NI: the widest interleave
/// that pays off. 4 streams use the widest register-allocated kernel and beat 3 and 2; 6 and 8
/// use the intrinsics kernel, whose state registers spill, and are slower
/// (`scripts/bench-sha256.sh` prints every width; figures in `docs/sha256-kernels.md`).
pub const DEFAULT_LANES: usize = 4;

/// Feed `inputs[i]` to `hashers[i]` for every `i`, interleaving independent streams (up to
/// [`DEFAULT_LANES`] at a time) when the hashers use SHA-NI. The result is exactly that of
/// calling `update` on each hasher in turn. Extra hashers or inputs (unequal slice lengths) are
/// ignored.
pub fn update_many(hashers: &mut [Sha256], inputs: &[&[u8]]) {
    update_many_lanes(hashers, inputs, DEFAULT_LANES)
}

/// Interleave widths the SHA-NI kernel is built for, widest first.
pub const LANE_WIDTHS: [usize; 5] = [8, 6, 4, 3, 2];

/// [`update_many`] with an explicit maximum number of interleaved streams (one of
/// [`LANE_WIDTHS`] or 1; other values are rounded down to one of those).
pub fn update_many_lanes(hashers: &mut [Sha256], inputs: &[&[u8]], max_lanes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let n = hashers.len().min(inputs.len());
        let ni = hashers[..n].iter().find_map(|h| match h.backend {
            Backend::Ni(cpu) => Some(cpu),
            Backend::Portable => None,
        });
        if let Some(cpu) = ni {
            if max_lanes >= 2 && n >= 2 {
                update_many_ni(cpu, &mut hashers[..n], &inputs[..n], max_lanes);
                return;
            }
        }
    }
    let _ = max_lanes;
    for (h, d) in hashers.iter_mut().zip(inputs) {
        h.update(d);
    }
}

#[cfg(target_arch = "x86_64")]
fn update_many_ni(cpu: NiCpu, hashers: &mut [Sha256], inputs: &[&[u8]], max_lanes: usize) {
    // Per stream: complete the buffered partial block, then split into whole blocks and a tail.
    let mut bodies: Vec<(usize, &[u8])> = Vec::with_capacity(hashers.len());
    let mut tails: Vec<&[u8]> = Vec::with_capacity(hashers.len());
    for (i, (h, d)) in hashers.iter_mut().zip(inputs).enumerate() {
        h.total_len = h.total_len.wrapping_add(d.len() as u64);
        let rest = h.fill_buffer(d);
        let whole = rest.len() / 64 * 64;
        tails.push(&rest[whole..]);
        if whole > 0 {
            bodies.push((i, &rest[..whole]));
        }
    }
    // Interleave: each call consumes the shortest remaining body of its group, so at least one
    // stream finishes per call. Portable hashers (mixed backends) are handled on their own.
    loop {
        bodies.retain(|(_, b)| !b.is_empty());
        let ni_idx: Vec<usize> = (0..bodies.len())
            .filter(|&k| matches!(hashers[bodies[k].0].backend, Backend::Ni(_)))
            .collect();
        let width = LANE_WIDTHS
            .iter()
            .copied()
            .find(|&w| w <= max_lanes && w <= ni_idx.len());
        if let Some(width) = width {
            let sel = &ni_idx[..width];
            match width {
                8 => lanes_step::<8>(cpu, hashers, &mut bodies, sel),
                6 => lanes_step::<6>(cpu, hashers, &mut bodies, sel),
                4 => lanes_step::<4>(cpu, hashers, &mut bodies, sel),
                3 => lanes_step::<3>(cpu, hashers, &mut bodies, sel),
                _ => lanes_step::<2>(cpu, hashers, &mut bodies, sel),
            }
        } else {
            for (i, body) in bodies.drain(..) {
                let h = &mut hashers[i];
                h.backend.compress(&mut h.state, body);
            }
            break;
        }
    }
    for (h, t) in hashers.iter_mut().zip(tails) {
        h.keep_tail(t);
    }
}

/// One call of the N-stream kernel on the bodies `sel` (indices into `bodies`).
#[cfg(target_arch = "x86_64")]
fn lanes_step<const N: usize>(
    cpu: NiCpu,
    hashers: &mut [Sha256],
    bodies: &mut [(usize, &[u8])],
    sel: &[usize],
) {
    let sel: [usize; N] = std::array::from_fn(|k| sel[k]);
    let mut states = sel.map(|k| hashers[bodies[k].0].state);
    let used = ni::compress_lanes::<N>(cpu, &mut states, sel.map(|k| bodies[k].1));
    for (s, k) in states.iter().zip(sel) {
        hashers[bodies[k].0].state = *s;
        bodies[k].1 = &bodies[k].1[used * 64..];
    }
}

/// SHA-256 of each input, with the fastest implementation, interleaving independent inputs.
pub fn digest_many(inputs: &[&[u8]]) -> Vec<[u8; DIGEST_LEN]> {
    let mut hs: Vec<Sha256> = inputs.iter().map(|_| Sha256::new()).collect();
    update_many(&mut hs, inputs);
    hs.into_iter().map(Sha256::finalize).collect()
}

/// [`digest_many`] with a chosen implementation and maximum number of interleaved streams.
pub fn digest_many_with(
    imp: Sha256Impl,
    inputs: &[&[u8]],
    max_lanes: usize,
) -> Result<Vec<[u8; DIGEST_LEN]>, Sha256Error> {
    let proto = Sha256::with_impl(imp)?;
    let mut hs: Vec<Sha256> = inputs.iter().map(|_| proto.clone()).collect();
    update_many_lanes(&mut hs, inputs, max_lanes);
    Ok(hs.into_iter().map(Sha256::finalize).collect())
}

/// Lower-case hexadecimal rendering of a digest.
pub fn to_hex(digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(digest.len() * 2);
    for &b in digest {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// Parse a 64-digit hexadecimal digest (either case). `None` if malformed.
pub fn from_hex(s: &[u8]) -> Option<[u8; DIGEST_LEN]> {
    if s.len() != 2 * DIGEST_LEN {
        return None;
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; DIGEST_LEN];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = (nib(pair[0])? << 4) | nib(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests;
