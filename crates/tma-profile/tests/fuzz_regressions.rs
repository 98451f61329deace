//! Inputs the fuzz targets of fuzz/ (scripts/fuzz.sh) found to crash, hang or over-allocate a
//! parser of this crate, kept as fixtures (tests/fixtures/fuzz/<target>/, see the README
//! there): each must now be refused with an error, quickly, and without a large allocation
//! (this test binary's allocator aborts any single allocation over 256 MiB).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The system allocator, refusing (null: Rust aborts) any single allocation over 256 MiB, so
/// that an allocation sized by a number read from the input fails the test instead of
/// passing on a machine that overcommits memory.
struct Capped;

const CAP: usize = 256 << 20;

// SAFETY: forwards to the system allocator with the caller's arguments; refusing an
// allocation by returning null is allowed by the GlobalAlloc contract.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > CAP {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > CAP {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > CAP {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

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

/// perf.data files whose counts and lengths (the cmdline feature's string count, the
/// event_desc feature's event count and string length, an AUXTRACE record's data size) asked
/// linux-perf-data for gigabytes to terabytes before it read anything: each differs from
/// tests/fixtures/locate/chase.perf.data in a few bytes.
#[test]
fn perf_data_lengths_past_their_bytes_are_refused() {
    for (path, bytes) in fixtures("perf_data") {
        let start = Instant::now();
        let mut agg = tma_profile::aggregate::Aggregator::new();
        let err = tma_profile::import::import_bytes(&bytes, &mut agg)
            .expect_err(&format!("{} imported", path.display()));
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{}",
            path.display()
        );
        assert!(
            err.to_string().contains("runs past the bytes that hold it"),
            "{}: {err}",
            path.display()
        );
    }
}

/// The checks refuse none of the perf.data files perf wrote.
#[test]
fn perf_data_fixtures_still_import() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/locate");
    for name in [
        "chase.perf.data",
        "two-events.perf.data",
        "syswide.perf.data",
    ] {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let mut agg = tma_profile::aggregate::Aggregator::new();
        tma_profile::import::import_bytes(&bytes, &mut agg)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
