//! Inputs the `tracefs` fuzz target of fuzz/ (scripts/fuzz.sh) found to crash a parser of
//! this crate, kept as fixtures (tests/fixtures/fuzz/tracefs/, see the README there): each
//! must now be read (or refused) without a panic.

/// tests/fixtures/fuzz/<target>/<name>.
fn fixture_of(target: &str, name: &str) -> Vec<u8> {
    tma_testkit::fixture_bytes(&format!("fuzz/{target}/{name}"))
}

/// A tracefs `format` file whose field declaration ends its type with a no-break space
/// (U+00A0, two bytes in UTF-8), as the `tracefs` target found: the name was cut inside the
/// character (a panic). Now it parses; a hand-written declaration shows where the cut goes.
#[test]
fn tracefs_field_typed_with_a_multibyte_space() {
    let data = fixture_of("tracefs", "nbsp-in-field-declaration");
    let text = &data[..data.iter().position(|&b| b == 0).unwrap_or(data.len())];
    let _ = tma_perf::tracefs::format::EventFormat::parse(text);

    let fmt =
        "name: x\nID: 1\nformat:\n\tfield:unsigned long\u{a0}rax;\toffset:0;\tsize:8;\tsigned:0;\n";
    let f = tma_perf::tracefs::format::EventFormat::parse(fmt.as_bytes()).expect("parses");
    assert_eq!(f.fields.len(), 1);
    assert_eq!(f.fields[0].name, "rax");
    assert_eq!(f.fields[0].c_type, "unsigned long");
}
