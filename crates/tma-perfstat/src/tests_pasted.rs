//! perf's text as users paste it (tests/fixtures/import/pasted/, README there): without its
//! header, in other locales; and counts no counter holds, in every form.

use super::*;

fn pasted(name: &str) -> Recording {
    let p = tma_testkit::fixture("import/pasted").join(name);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(detect(&bytes).unwrap(), ImportFormat::PerfText, "{name}");
    parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn value(iv: &Interval, ev: &str) -> Option<f64> {
    iv.get(ev).and_then(|r| r.value)
}

#[test]
fn headerless_rows_are_text_not_csv() {
    let rec = pasted("zen4-brn-misp-headerless.txt");
    let iv = &rec.intervals[0];
    assert_eq!(value(iv, "ex_ret_brn_misp"), Some(255_351.0));
    assert_eq!(value(iv, "ex_ret_brn"), Some(219_730_483.0));
    assert_eq!(
        iv.get("ls_not_halted_cyc").map(|r| r.status),
        Some(tma_perf::readings::ReadingStatus::NotCounted)
    );
    assert_eq!(iv.printed.len(), 1);

    let rec = pasted("interval-headerless.txt");
    assert!(rec.interval_mode);
    assert_eq!(rec.intervals.len(), 2);
    assert_eq!(rec.intervals[1].end_s, 2.002195317);
    assert_eq!(value(&rec.intervals[1], "cycles"), Some(2_107_000_123.0));
    // A first line of CSV is still CSV.
    let csv = b"255351,,ex_ret_brn_misp,100,100.00,0.0,%  bad_speculation_mispredicts\n";
    assert_eq!(
        detect(csv).unwrap(),
        ImportFormat::PerfCsv { separator: ',' }
    );
}

#[test]
fn the_locale_is_decided_from_the_whole_file() {
    for name in ["default-pt_BR.txt", "default-fr_FR-nnbsp.txt"] {
        let bytes = std::fs::read(tma_testkit::fixture("import/pasted").join(name)).unwrap();
        let rec = pasted(name);
        let iv = &rec.intervals[0];
        // `1.088 page-faults` comes before any number that says how the file writes them.
        assert_eq!(value(iv, "page-faults"), Some(1088.0), "{name}");
        assert_eq!(value(iv, "task-clock"), Some(129.06e6), "{name}");
        assert_eq!(value(iv, "cycles"), Some(557_024_381.0), "{name}");
        assert_eq!(value(iv, "instructions"), Some(1_234_567_890.0), "{name}");
        assert_eq!(iv.end_s, 0.129336842, "{name}");
        let reader = IntervalReader::new(&bytes[..]).unwrap();
        let f = reader.number_format().unwrap();
        assert_eq!(f.decimal, ',', "{name}");
        assert!(!f.is_c(), "{name}");
    }
}

/// A recording of `rows` in `form` with `count` as the cycles count.
fn with_count(form: usize, count: &str) -> String {
    match form {
        0 => format!("{count},,cycles,100,100.00,,\n1000,,instructions,100,100.00,,\n"),
        1 => format!(
            "{{\"counter-value\" : \"{count}\", \"unit\" : \"\", \"event\" : \"cycles\", \
             \"event-runtime\" : 100, \"pcnt-running\" : 100.00}}\n"
        ),
        _ => format!(
            " Performance counter stats for 'x':\n\n   {count}      cycles\n     1,000      \
             instructions\n"
        ),
    }
}

#[test]
fn impossible_counts_are_refused_by_line_never_read() {
    use proptest::prelude::*;
    let count = prop_oneof![
        "[0-9]{18,30}",
        "-[0-9]{1,12}",
        "-?[0-9]{1,8}\\.[0-9]{1,6}",
        "[0-9]{1,3}(,[0-9]{3}){0,8}",
        "-?[0-9]\\.[0-9]{1,4}e[-+]?[0-9]{1,3}",
        Just(String::new()),
        Just("inf".to_string()),
        Just("NaN".to_string()),
        "[ -~]{0,8}",
    ];
    let result = tma_testkit::proptest_runner(600).run(&(count, 0usize..3), |(count, form)| {
        let text = with_count(form, &count);
        match parse(text.as_bytes()) {
            Ok(rec) => {
                // The cycles line was read, unless (perf's text) it does not start as a
                // count and so is prose.
                let c = count.trim().trim_start_matches(['-', '+']);
                let numeric = c.starts_with(|c: char| c.is_ascii_digit());
                prop_assert!(
                    rec.intervals.iter().all(|iv| iv.get("cycles").is_some())
                        || form == 2 && !numeric,
                    "{text:?}: the cycles line was dropped"
                );
                for iv in &rec.intervals {
                    for r in &iv.readings {
                        if let Some(v) = r.value {
                            prop_assert!(
                                v.is_finite() && (0.0..=u64::MAX as f64).contains(&v),
                                "{text:?}: {} read as {v}",
                                r.event
                            );
                        }
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains("line "), "{text:?}: {msg}");
            }
        }
        Ok(())
    });
    assert!(result.is_ok(), "{result:?}");
    for form in 0..3 {
        for bad in ["99999999999999999999999999", "-5"] {
            let text = with_count(form, bad);
            let e = parse(text.as_bytes()).unwrap_err();
            // The text form has no negative counts: `-5` is not a counter line there.
            assert!(
                matches!(
                    e,
                    ImportError::ImpossibleCount { line: 1 | 3, .. }
                        | ImportError::TextRow { line: 3 }
                ),
                "{form} {bad}: {e}"
            );
        }
    }
}

#[test]
fn a_last_line_without_its_line_end_is_said() {
    // Cut inside the one counter line: cut off, not a malformed line.
    let cut = b"1.000000000,1000000000,,ls_not_halted_cyc,25000000";
    assert_eq!(
        IntervalReader::new(&cut[..]).err(),
        Some(ImportError::CutOff { line: 1 })
    );
    // Cut after a whole field: read, and said.
    let cut = b"1.000000000,1000000000,,ls_not_halted_cyc,250000000,50.00,,";
    let mut r = IntervalReader::new(&cut[..]).unwrap();
    while r.next_interval().unwrap().is_some() {}
    assert_eq!(r.unterminated_end(), Some(1));
    let whole = b"1.000000000,1000000000,,ls_not_halted_cyc,250000000,50.00,,\n";
    let mut r = IntervalReader::new(&whole[..]).unwrap();
    while r.next_interval().unwrap().is_some() {}
    assert_eq!(r.unterminated_end(), None);
}
