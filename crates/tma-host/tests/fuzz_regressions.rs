//! Inputs the `proc` fuzz target of fuzz/ (scripts/fuzz.sh) found to crash a /proc parser,
//! kept as fixtures (tests/fixtures/fuzz/proc/, see the README there): each must now be read
//! (or refused) without a panic.

/// tests/fixtures/fuzz/<target>/<name>.
fn fixture_of(target: &str, name: &str) -> Vec<u8> {
    tma_testkit::fixture_bytes(&format!("fuzz/{target}/{name}"))
}

fn proc_fixture(name: &str) -> Vec<u8> {
    fixture_of("proc", name)
}

/// An smaps text (the `proc` target, 2026-11-28) with a size in kB whose bytes overflow u64:
/// a multiplication overflow (a panic in debug builds, a wrapped size in release). Now the
/// line is refused, naming it.
#[test]
fn smaps_size_in_kb_that_overflows_bytes() {
    match tma_host::parse_smaps(&proc_fixture("smaps-size-overflow")) {
        Err(tma_host::ParseError::BadLine { what, .. }) => {
            assert!(what.contains("too large"), "{what}")
        }
        other => panic!("expected a refused line, got {other:?}"),
    }
}

/// A CPU list (the `proc` target) of hundreds of plausible ranges, 8 KB in all, that made a
/// list of over a quarter of a million entries (a 1.1 MB allocation, over the target's bound).
/// Now a list is held to 65,536 entries.
#[test]
fn cpu_list_of_many_ranges_is_bounded() {
    assert_eq!(
        tma_host::parse_cpu_list(&proc_fixture("cpu-list-many-ranges")),
        Err(tma_host::ParseError::ListTooLong(65_536))
    );
}
