//! zstd-compressed perf.data records (`perf record -z`: `PERF_RECORD_COMPRESSED`, type 81,
//! and `PERF_RECORD_COMPRESSED2`, type 83, whose body starts with the compressed length).
//!
//! linux-perf-data decompresses them itself (its `zstd` feature) but without a bound: a
//! record of 64 KB can inflate to gigabytes. Before it sees the file, [`check`] inflates the
//! file's compressed records here, as the one zstd stream perf writes them as (each record
//! continues the stream of the one before), counting the output and keeping none of it, and
//! refuses a file whose records inflate past [`limit`] of their size: a decompression bomb.

use super::error::ImportError;

/// Compressed records may inflate to this many times their compressed size...
pub const MAX_RATIO: u64 = 64;
/// ...plus this many bytes. perf's own ratio (`perf record -z`, zstd level 1) is about 3 to
/// 10 on sample records; the bound leaves room for far more repetitive data.
pub const SLACK: u64 = 1 << 20;

/// The most bytes compressed records of `compressed` bytes in all may inflate to.
pub fn limit(compressed: u64) -> u64 {
    compressed.saturating_mul(MAX_RATIO).saturating_add(SLACK)
}

/// The compressed data of a record of type `ty` (81 or 83) with body `body` (after the
/// 8-byte header), as linux-perf-data takes it; `None` for another type or a
/// `COMPRESSED2` record whose length runs past its body (the parser refuses it).
pub fn payload(ty: u64, body: &[u8], big_endian: bool) -> Option<&[u8]> {
    match ty {
        81 => Some(body),
        83 => {
            let (len, rest) = body.split_first_chunk::<8>()?;
            let len = if big_endian {
                u64::from_be_bytes(*len)
            } else {
                u64::from_le_bytes(*len)
            };
            rest.get(..usize::try_from(len).ok()?)
        }
        _ => None,
    }
}

/// Inflate `payloads` (the compressed records' data, in file order) as one zstd stream and
/// return how many bytes they give; an error when that passes [`limit`] of their size (a
/// decompression bomb) or when the data is not zstd.
pub fn check(payloads: &[&[u8]]) -> Result<u64, ImportError> {
    if payloads.is_empty() {
        return Ok(0);
    }
    let size: u64 = payloads.iter().map(|p| p.len() as u64).sum();
    let max = limit(size);
    let mut dctx = zstd_safe::DCtx::create();
    let mut out = vec![0u8; 128 << 10];
    let mut total: u64 = 0;
    for p in payloads {
        let mut input = zstd_safe::InBuffer::around(p);
        loop {
            let mut output = zstd_safe::OutBuffer::around(&mut out[..]);
            dctx.decompress_stream(&mut output, &mut input)
                .map_err(|code| {
                    ImportError::Parse(format!(
                        "a compressed record (perf record -z) is not valid zstd data: {}",
                        zstd_safe::get_error_name(code)
                    ))
                })?;
            let produced = output.pos();
            total = total.saturating_add(produced as u64);
            if total > max {
                return Err(ImportError::BadHeader(format!(
                    "its compressed records (perf record -z, {size} bytes) inflate to more than \
                     {max} bytes ({MAX_RATIO} times their size and {} MiB): refused as a \
                     decompression bomb",
                    SLACK >> 20
                )));
            }
            // Done with this record once its input is used up and the output buffer was not
            // filled (a full buffer may leave output in the decoder).
            if input.pos() == p.len() && produced < out.len() {
                break;
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compress(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; zstd_safe::compress_bound(data.len())];
        let n = zstd_safe::compress(&mut out[..], data, 19).expect("compress");
        out.truncate(n);
        out
    }

    #[test]
    fn counts_what_the_records_inflate_to() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let z = compress(&data);
        // Split the stream across two records, as perf does.
        let (a, b) = z.split_at(z.len() / 2);
        assert_eq!(check(&[a, b]).unwrap(), data.len() as u64);
        assert_eq!(check(&[]).unwrap(), 0);
    }

    #[test]
    fn refuses_a_bomb_and_garbage() {
        let zeros = vec![0u8; 64 << 20];
        let z = compress(&zeros);
        assert!(z.len() < 64 << 10, "{}", z.len());
        let err = check(&[&z]).unwrap_err().to_string();
        assert!(err.contains("decompression bomb"), "{err}");
        let err = check(&[b"not zstd at all"]).unwrap_err().to_string();
        assert!(err.contains("not valid zstd"), "{err}");
    }

    #[test]
    fn compressed2_payload_is_its_stated_length() {
        let mut body = 3u64.to_le_bytes().to_vec();
        body.extend_from_slice(b"abcde");
        assert_eq!(payload(83, &body, false), Some(&b"abc"[..]));
        assert_eq!(payload(81, &body, false), Some(&body[..]));
        let mut long = 9u64.to_le_bytes().to_vec();
        long.extend_from_slice(b"abc");
        assert_eq!(payload(83, &long, false), None);
        assert_eq!(payload(1, &body, false), None);
    }
}
