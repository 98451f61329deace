//! Byte-for-byte assembling check, table-driven: tests/fixtures/bench/encodings.txt holds
//! `Intel text | hex` lines whose hex was produced by GNU as + objdump (an assembler
//! independent of iced-x86). Every line goes through tma's whole front end (parser, operand-kind
//! resolution, encoding choice, refusal checks).

use tma_bench::{asm, prepare, Source};

#[test]
fn encodings_match_gnu_as() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/bench/encodings.txt"
    );
    let text = std::fs::read_to_string(path).expect("fixture");
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (src, want) = line.split_once(" | ").expect("TEXT | HEX");
        let want = want.trim();
        // All features present: this test is about encoding, not about this CPU.
        match prepare(&Source::Text(src.into()), &|_| Some(true)) {
            Ok((_, ins)) => {
                let got: Vec<String> = ins
                    .iter()
                    .flat_map(|i| asm::encode(i).unwrap())
                    .map(|b| format!("{b:02x}"))
                    .collect();
                if got.join(" ") != want {
                    failures.push(format!("{src}: got {} want {want}", got.join(" ")));
                }
            }
            Err(e) => failures.push(format!("{src}: {e}")),
        }
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} encodings");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
