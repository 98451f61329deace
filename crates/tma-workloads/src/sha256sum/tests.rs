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
