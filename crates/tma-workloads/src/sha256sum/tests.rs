//! Unit tests of the checksum-line format (moved from the CLI with the code).

use super::format::*;

#[test]
fn quoting_matches_coreutils_examples() {
    assert_eq!(quote_name(b"plain.txt"), "plain.txt");
    assert_eq!(quote_name(b"x y"), "'x y'");
    assert_eq!(quote_name(b"it's"), "\"it's\"");
    assert_eq!(quote_name(b"n\nl"), "'n'$'\\n''l'");
    assert_eq!(quote_name(b"q\x01"), "'q'$'\\001'");
    assert_eq!(quote_name(b"a'b\"c"), "'a'\\''b\"c'");
    assert_eq!(quote_name(b"~ab"), "'~ab'");
    assert_eq!(quote_name(b"a~"), "a~");
    assert_eq!(quote_name(b"a:b"), "'a:b'");
}

#[test]
fn escape_round_trip() {
    let n = b"a\\b\nc\rd";
    assert!(needs_escape(n));
    assert_eq!(unescape(&escape(n)).unwrap(), n.to_vec());
    assert_eq!(unescape(b"a\\x"), None);
}

#[test]
fn line_formats() {
    let hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    let mut st = FormatState::default();
    let l = parse_line(format!("{hex}  a b").as_bytes(), &mut st).unwrap();
    assert_eq!(l.name, b"a b");
    let l = parse_line(format!("{hex} *bin").as_bytes(), &mut st).unwrap();
    assert_eq!(l.name, b"bin");
    // Standard format seen: the single-separator format is now refused.
    assert!(parse_line(format!("{hex} x").as_bytes(), &mut st).is_none());
    let mut st = FormatState::default();
    let l = parse_line(format!("SHA256 (x) y) = {hex}").as_bytes(), &mut st).unwrap();
    assert_eq!(l.name, b"x) y");
    assert!(parse_line(b"garbage", &mut st).is_none());
    assert!(parse_line(format!("{hex}x  a").as_bytes(), &mut st).is_none());
    let l = parse_line(format!("\\{hex}  a\\nb").as_bytes(), &mut st).unwrap();
    assert_eq!(l.name, b"a\nb");
}

use super::{run, Sha256sumConfig, Sha256sumOutcome, Streams};

/// Run with `input` as standard input; returns (outcome, stdout, stderr).
fn run_with(cfg: &Sha256sumConfig, input: &[u8]) -> (Sha256sumOutcome, String, String) {
    let mut stdin = std::io::Cursor::new(input.to_vec());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let outcome = run(
        cfg,
        Streams {
            stdin: &mut stdin,
            stdout: &mut out,
            stderr: &mut err,
        },
    )
    .unwrap();
    (
        outcome,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

#[test]
fn hashes_standard_input_through_the_given_streams() {
    let cfg = Sha256sumConfig::default();
    let (outcome, out, err) = run_with(&cfg, b"abc");
    assert_eq!(outcome, Sha256sumOutcome::Ok);
    assert_eq!(out, format!("{ABC}  -\n"));
    assert_eq!(err, "");
    let tag = Sha256sumConfig {
        tag: true,
        ..Sha256sumConfig::default()
    };
    assert_eq!(run_with(&tag, b"abc").1, format!("SHA256 (-) = {ABC}\n"));
}

#[test]
fn checks_standard_input_and_reports_missing_files() {
    let cfg = Sha256sumConfig {
        check: true,
        ..Sha256sumConfig::default()
    };
    let list = format!("{ABC}  /nonexistent/tma-sha256sum-test\n");
    let (outcome, out, err) = run_with(&cfg, list.as_bytes());
    assert_eq!(outcome, Sha256sumOutcome::Failed);
    assert_eq!(
        out,
        "/nonexistent/tma-sha256sum-test: FAILED open or read\n"
    );
    assert!(err.contains("No such file or directory"), "{err}");
    assert!(
        err.contains("WARNING: 1 listed file could not be read"),
        "{err}"
    );
}

#[test]
fn contradictory_options_are_usage_errors() {
    let cfg = Sha256sumConfig {
        check: true,
        tag: true,
        ..Sha256sumConfig::default()
    };
    let (outcome, out, err) = run_with(&cfg, b"");
    assert_eq!(outcome, Sha256sumOutcome::Usage);
    assert_eq!(outcome.exit_code(), 1);
    assert_eq!(out, "");
    assert_eq!(
        err,
        "tma sha256sum: the --tag option is meaningless when verifying checksums\n\
         Try 'tma sha256sum --help' for more information.\n"
    );
}

/// The rolling lanes: a large file first, then many small ones, a missing file, a directory
/// and standard input in between; every width and a look-ahead of 1 to 6 files. Each digest
/// must be the file's own (checked against the portable one-shot digest) and the results must
/// come in the order of the arguments, each exactly once.
#[test]
fn rolling_lanes_keep_order_and_digests() {
    use super::hash::{hash_files_batched, Rolling};
    use crate::sha256::{digest_with, Sha256Impl};
    let dir = tempfile::tempdir().unwrap();
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    let mut want: Vec<Option<[u8; 32]>> = Vec::new();
    let stdin_data = b"from standard input".repeat(5000);
    let mut x: u32 = 7;
    // Sizes around the read chunk (64 KiB) and the block edges; the first is the large one.
    let sizes = [
        700_000usize,
        0,
        1,
        55,
        64,
        65_536,
        65_537,
        3,
        131_072,
        200_000,
        119,
        64 * 1024 - 1,
        5,
    ];
    for (i, s) in sizes.iter().enumerate() {
        let data: Vec<u8> = (0..*s)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        let p = dir.path().join(format!("f{i}"));
        std::fs::write(&p, &data).unwrap();
        names.push(p.into_os_string());
        want.push(Some(digest_with(Sha256Impl::Portable, &data).unwrap()));
        match i {
            3 => {
                names.push(dir.path().join("missing").into_os_string());
                want.push(None);
            }
            6 => {
                names.push("-".into());
                want.push(Some(
                    digest_with(Sha256Impl::Portable, &stdin_data).unwrap(),
                ));
            }
            9 => {
                names.push(dir.path().as_os_str().to_owned());
                want.push(None);
            }
            _ => {}
        }
    }
    for (width, threaded) in [1, 2, 3, 4, 8]
        .into_iter()
        .flat_map(|w| [(w, false), (w, true)])
    {
        for lookahead in 1..=6 {
            let mut stdin = std::io::Cursor::new(stdin_data.clone());
            let mut got: Vec<(usize, Option<[u8; 32]>)> = Vec::new();
            hash_files_batched(
                Sha256Impl::best(),
                &names,
                Rolling {
                    width,
                    lookahead,
                    threaded,
                },
                &mut stdin,
                &mut |i, r| {
                    got.push((i, r.ok()));
                    Ok(())
                },
            )
            .unwrap();
            let order: Vec<usize> = got.iter().map(|(i, _)| *i).collect();
            assert_eq!(
                order,
                (0..names.len()).collect::<Vec<_>>(),
                "width {width}, look-ahead {lookahead}, threaded {threaded}"
            );
            let digests: Vec<Option<[u8; 32]>> = got.into_iter().map(|(_, d)| d).collect();
            assert_eq!(
                digests, want,
                "width {width}, look-ahead {lookahead}, threaded {threaded}"
            );
        }
    }
}
