use super::*;
use crate::rng::SplitMix64;

fn hex(imp: Sha256Impl, data: &[u8]) -> String {
    to_hex(&digest_with(imp, data).unwrap())
}

fn impls() -> Vec<Sha256Impl> {
    let mut v = vec![Sha256Impl::Portable];
    if Sha256Impl::Ni.is_available() {
        v.push(Sha256Impl::Ni);
    } else {
        eprintln!("skipped SHA-NI cases: this CPU lacks the SHA extensions");
    }
    v
}

fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    SplitMix64::new(seed).fill(&mut v);
    v
}

/// FIPS 180-4 / NIST CAVP example messages (csrc.nist.gov "SHA256.pdf" examples and the
/// one-million-'a' vector).
const VECTORS: &[(&[u8], &str)] = &[
    (
        b"",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ),
    (
        b"abc",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ),
    (
        b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    ),
    (
        b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
    ),
];

#[test]
fn nist_vectors() {
    for imp in impls() {
        for (msg, want) in VECTORS {
            assert_eq!(
                hex(imp, msg),
                *want,
                "{imp} on {:?}",
                String::from_utf8_lossy(msg)
            );
        }
    }
}

#[test]
fn one_million_a() {
    let msg = vec![b'a'; 1_000_000];
    for imp in impls() {
        assert_eq!(
            hex(imp, &msg),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
            "{imp}"
        );
    }
}

#[test]
fn ni_matches_portable_on_every_length_to_1024() {
    if !Sha256Impl::Ni.is_available() {
        eprintln!("skipped: this CPU lacks the SHA extensions");
        return;
    }
    let data = random_bytes(7, 1024);
    for len in 0..=1024 {
        let msg = &data[..len];
        assert_eq!(
            digest_with(Sha256Impl::Portable, msg).unwrap(),
            digest_with(Sha256Impl::Ni, msg).unwrap(),
            "length {len}"
        );
    }
    // Different content for every length too (not only prefixes of one buffer).
    let mut rng = SplitMix64::new(99);
    for len in 0..=1024 {
        let mut msg = vec![0u8; len];
        rng.fill(&mut msg);
        assert_eq!(
            digest_with(Sha256Impl::Portable, &msg).unwrap(),
            digest_with(Sha256Impl::Ni, &msg).unwrap(),
            "random message of length {len}"
        );
    }
}

#[test]
fn large_input_and_odd_chunkings() {
    let data = random_bytes(3, 3 * 1024 * 1024 + 17);
    let reference = digest_with(Sha256Impl::Portable, &data).unwrap();
    for imp in impls() {
        assert_eq!(
            digest_with(imp, &data).unwrap(),
            reference,
            "{imp} one shot"
        );
        let mut rng = SplitMix64::new(5);
        for fixed in [1usize, 3, 63, 64, 65, 127, 1000, 4096, 65537] {
            // Byte-at-a-time over 3 MiB is slow in debug builds: use a shorter prefix for tiny
            // chunks, checked against the portable one-shot digest of the same prefix.
            let msg = if fixed < 64 {
                &data[..70_001]
            } else {
                &data[..]
            };
            let want = digest_with(Sha256Impl::Portable, msg).unwrap();
            let mut h = Sha256::with_impl(imp).unwrap();
            for c in msg.chunks(fixed) {
                h.update(c);
            }
            assert_eq!(h.finalize(), want, "{imp} chunks of {fixed}");
        }
        let mut h = Sha256::with_impl(imp).unwrap();
        let mut rest = &data[..];
        while !rest.is_empty() {
            let n = (rng.below(300) as usize).min(rest.len());
            h.update(&rest[..n]);
            rest = &rest[n..];
        }
        assert_eq!(h.finalize(), reference, "{imp} random chunk sizes");
    }
}

#[test]
fn interleaved_matches_single() {
    let mut rng = SplitMix64::new(11);
    // Lengths chosen so streams finish at different times, plus empty and sub-block inputs.
    let lens = [
        0usize, 1, 55, 56, 64, 65, 1000, 4096, 4160, 70_000, 200_003, 3,
    ];
    let bufs: Vec<Vec<u8>> = lens
        .iter()
        .map(|&l| {
            let mut v = vec![0u8; l];
            rng.fill(&mut v);
            v
        })
        .collect();
    let inputs: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let want: Vec<_> = inputs
        .iter()
        .map(|d| digest_with(Sha256Impl::Portable, d).unwrap())
        .collect();
    for imp in impls() {
        for lanes in [1, 2, 3, 4, 5, 6, 7, 8, 9] {
            for take in [1, 2, 3, 4, 5, inputs.len()] {
                let got = digest_many_with(imp, &inputs[..take], lanes).unwrap();
                assert_eq!(got, want[..take], "{imp}, {lanes} lanes, {take} inputs");
            }
        }
        // Streaming: several rounds of update_many with partial blocks left in the buffers.
        let mut hs: Vec<Sha256> = (0..inputs.len())
            .map(|_| Sha256::with_impl(imp).unwrap())
            .collect();
        let mut offs = vec![0usize; inputs.len()];
        for round in 0..6 {
            let pieces: Vec<&[u8]> = inputs
                .iter()
                .zip(offs.iter_mut())
                .map(|(d, o)| {
                    let n = if round == 5 {
                        d.len() - *o
                    } else {
                        (rng.below(40_000) as usize).min(d.len() - *o)
                    };
                    let p = &d[*o..*o + n];
                    *o += n;
                    p
                })
                .collect();
            update_many_lanes(&mut hs, &pieces, [2, 3, 4, 6, 8, 4][round]);
        }
        let got: Vec<_> = hs.into_iter().map(Sha256::finalize).collect();
        assert_eq!(got, want, "{imp} streaming update_many");
    }
    assert_eq!(digest_many(&inputs), want);
}

/// Every interleave width the SHA-NI code has a kernel for, on the NIST vectors (the same
/// message in every lane, and the million-'a' vector) and on a length sweep (lane `j` of a call
/// gets length `len + j`, so the lanes end at different blocks), against the expected digests.
#[test]
fn every_lane_width_on_vectors_and_length_sweep() {
    if !Sha256Impl::Ni.is_available() {
        eprintln!("skipped: this CPU lacks the SHA extensions");
        return;
    }
    let million_a = vec![b'a'; 1_000_000];
    let mut vectors: Vec<(&[u8], &str)> = VECTORS.to_vec();
    vectors.push((
        &million_a,
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
    ));
    let data = random_bytes(23, 1024 + 16);
    for width in LANE_WIDTHS {
        for (msg, want) in &vectors {
            let got = digest_many_with(Sha256Impl::Ni, &vec![*msg; width], width).unwrap();
            assert!(
                got.iter().all(|d| to_hex(d) == *want),
                "{width} lanes on {} bytes",
                msg.len()
            );
        }
        for len in 0..=1024 {
            // Different bytes per lane too: lane j starts j bytes into the buffer.
            let inputs: Vec<&[u8]> = (0..width).map(|j| &data[j..j + len + j]).collect();
            let want: Vec<_> = inputs
                .iter()
                .map(|d| digest_with(Sha256Impl::Portable, d).unwrap())
                .collect();
            let got = digest_many_with(Sha256Impl::Ni, &inputs, width).unwrap();
            assert_eq!(got, want, "{width} lanes, lengths {len}..{}", len + width);
        }
    }
}

#[test]
fn hex_round_trip_and_errors() {
    let d = digest(b"abc");
    assert_eq!(from_hex(to_hex(&d).as_bytes()), Some(d));
    assert_eq!(from_hex(to_hex(&d).to_uppercase().as_bytes()), Some(d));
    assert_eq!(from_hex(b"abc"), None);
    assert_eq!(from_hex(&[b'g'; 64]), None);
    assert_eq!(Sha256Impl::parse("portable"), Ok(Sha256Impl::Portable));
    assert!(matches!(
        Sha256Impl::parse("fast"),
        Err(Sha256Error::UnknownImpl(_))
    ));
    if !Sha256Impl::Ni.is_available() {
        assert_eq!(
            Sha256::with_impl(Sha256Impl::Ni).unwrap_err(),
            Sha256Error::NiUnavailable
        );
    }
}

#[test]
fn portable_builds_agree() {
    // `sha256_compress_portable` runs the BMI2 build where the CPU has BMI2; the baseline
    // build (the same source without BMI2) must give the same states, including on the
    // blocks of the NIST vectors' padded messages.
    let mut blocks = random_bytes(7, 64 * 257);
    for (msg, want) in VECTORS.iter().filter(|(m, _)| m.len() <= 55) {
        let mut b = [0u8; 64];
        b[..msg.len()].copy_from_slice(msg);
        b[msg.len()] = 0x80;
        b[56..].copy_from_slice(&((msg.len() as u64) * 8).to_be_bytes());
        // One padded block: the baseline build alone gives the vector's digest.
        let mut st = H0;
        portable::compress_blocks(&mut st, &b);
        let got: String = st.iter().map(|w| format!("{w:08x}")).collect();
        assert_eq!(
            got,
            *want,
            "baseline build on {:?}",
            String::from_utf8_lossy(msg)
        );
        blocks.extend_from_slice(&b);
    }
    for n in [0, 1, 2, 17, 257, blocks.len() / 64] {
        let mut dispatched = H0;
        let mut baseline = H0;
        sha256_compress_portable(&mut dispatched, &blocks[..n * 64]);
        portable::compress_blocks(&mut baseline, &blocks[..n * 64]);
        assert_eq!(dispatched, baseline, "{n} blocks");
    }
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("bmi2") {
        eprintln!("portable_builds_agree: no BMI2 on this CPU: both sides ran the baseline build");
    }
}
