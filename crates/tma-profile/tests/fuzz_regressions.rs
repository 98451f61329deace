//! Inputs the fuzz targets of fuzz/ (scripts/fuzz.sh) found to crash, hang or over-allocate a
//! parser of this crate, kept as fixtures (tests/fixtures/fuzz/<target>/, see the README
//! there): each must now be refused with an error, quickly.

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn fixtures(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/fuzz")
        .join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "README.md"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {}", dir.display());
    out
}

/// A gzip stream that inflates 1000-fold (16 MiB of zeros in 16 KB) was inflated whole
/// before the protobuf was looked at: an allocation sized by the stream, not by the file.
#[test]
fn pprof_decompression_bombs_are_refused() {
    for (path, bytes) in fixtures("pprof") {
        let start = Instant::now();
        let err =
            tma_profile::pprof::decode(&bytes).expect_err(&format!("{} decoded", path.display()));
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{}",
            path.display()
        );
        if path.to_string_lossy().contains("gzip-bomb") {
            assert!(
                err.contains("decompression bomb"),
                "{}: {err}",
                path.display()
            );
        }
    }
}
