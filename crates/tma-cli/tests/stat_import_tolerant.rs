//! `tma stat --import` of recordings that hold more than the tree needs (software, uncore and
//! unused core events, toplev's PMM events, perf's default events): imported with one note,
//! refused with `--strict`, and still refused when none of the tree's events are there.
//! The fixtures are synthetic; tests/fixtures/README.md says how each was made.

use tma_testkit::{stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

const ICX: &str = "tests/fixtures/import/icx-extra-events-synthetic.csv";
const CLX: &str = "tests/fixtures/import/clx-toplev-pmm-synthetic.csv";
const DEFAULT: &str = "tests/fixtures/import/perf-default-events-synthetic.csv";
const ZEN4_DEFAULT: &str = "tests/fixtures/import/zen4-default-plus-tree-synthetic.csv";
const ZEN4: &str = "tests/fixtures/import/zen4-sha256-synthetic.csv";

/// Text, JSON and CSV of one import: all succeed; returns them with the text run's stderr.
fn three_formats(args: &[&str]) -> (String, serde_json::Value, String, String) {
    let text = TMA.run(args);
    assert!(text.status.success(), "{}", stderr(&text));
    let json = TMA.run(&[args, &["--json"]].concat());
    assert!(json.status.success(), "{}", stderr(&json));
    let j: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON output");
    assert_eq!(j["schema"], "tma.stat");
    let csv = TMA.run(&[args, &["--csv"]].concat());
    assert!(csv.status.success(), "{}", stderr(&csv));
    let csv_out = stdout(&csv);
    assert!(
        csv_out.starts_with("start_s,end_s,node,parent,level,value,unit,status,"),
        "{csv_out}"
    );
    (stdout(&text), j, csv_out, stderr(&text))
}

fn line<'a>(out: &'a str, start: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no `{start}` line in\n{out}"))
}

/// The lines of `err` that are the ignored-events note.
fn ignored_notes(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("tma: note: ignored "))
        .collect()
}

#[test]
fn extra_software_uncore_and_core_events_are_ignored_with_one_note() {
    let (text, j, csv, err) = three_formats(&["stat", "--import", ICX, "--cpu", "icx", "-l", "2"]);
    assert!(line(&text, "Backend_Bound").contains("45.4%"), "{text}");
    assert!(line(&text, "  Memory_Bound").contains("23.6%"), "{text}");
    assert!(line(&text, "Retiring").contains("30.0%"), "{text}");
    let notes = ignored_notes(&err);
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("uncore_imc/cas_count_read/"), "{err}");
    assert!(notes[0].contains("--strict"), "{err}");
    // Software events and the tree's own are not ignored.
    for kept in ["task-clock", "topdown-retiring", "INT_MISC.UOP_DROPPING"] {
        assert!(!notes[0].contains(kept), "{kept}: {err}");
    }
    // JSON: the same schema; ignored events are not among the imported ones.
    let events = j["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["perf"] == "topdown-retiring"));
    assert!(!events
        .iter()
        .any(|e| e["perf"].as_str().unwrap().starts_with("uncore")));
    assert!(
        csv.lines().any(|l| l.contains(",Backend_Bound,,1,")),
        "{csv}"
    );
}

#[test]
fn strict_refuses_unknown_events_in_one_line_without_output() {
    let dir = tempfile::tempdir().unwrap();
    for format in [None, Some("--json"), Some("--csv")] {
        let out = dir.path().join("out");
        let mut args = vec![
            "stat", "--import", ICX, "--cpu", "icx", "-l", "2", "--strict",
        ];
        args.extend(format);
        args.extend(["-o", out.to_str().unwrap()]);
        let o = TMA.run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{format:?}: {err}");
        let errors: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("tma: error"))
            .collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert!(errors[0].contains("not in the icx event tables"), "{err}");
        assert!(errors[0].contains("uncore_imc/cas_count_read/"), "{err}");
        // The events belong to no other CPU: no false hint.
        assert!(!errors[0].contains("try --cpu"), "{err}");
        assert!(ignored_notes(&err).is_empty(), "{err}");
        assert!(!out.exists(), "{format:?}");
    }
}

#[test]
fn toplev_style_recording_with_pmm_events_imports_on_clx() {
    let (text, j, csv, err) = three_formats(&["stat", "--import", CLX, "--cpu", "clx", "-l", "2"]);
    assert!(text.contains("(perf stat -x; CSV)"), "{text}");
    assert!(line(&text, "Frontend_Bound").contains("20.0%"), "{text}");
    assert!(line(&text, "  Fetch_Latency").contains("12.5%"), "{text}");
    assert!(line(&text, "Backend_Bound").contains("39.0%"), "{text}");
    assert!(line(&text, "Retiring").contains("35.0%"), "{text}");
    // MEM_LOAD_RETIRED.LOCAL_PMM and MEM_LOAD_L3_MISS_RETIRED.REMOTE_PMM: ignored while the
    // clx tables lack them (named in the note), resolved once they list them.
    let notes = ignored_notes(&err);
    assert!(notes.len() <= 1, "{err}");
    if let Some(n) = notes.first() {
        assert!(n.contains("cpu/event=0xd1,umask=0x80/"), "{err}");
        assert!(n.contains("cpu/event=0xd3,umask=0x10/"), "{err}");
    }
    assert!(!err.contains("error"), "{err}");
    let nodes = j["intervals"][0]["nodes"].as_array().expect("nodes");
    let backend = nodes
        .iter()
        .find(|n| n["name"] == "Backend_Bound")
        .expect("Backend_Bound in the JSON");
    assert!(
        (backend["value"].as_f64().unwrap() - 39.0).abs() < 1e-6,
        "{backend}"
    );
    assert!(csv.lines().any(|l| l.contains(",Retiring,,1,35")), "{csv}");
}

#[test]
fn perf_default_events_alone_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    for format in [None, Some("--json"), Some("--csv")] {
        let out = dir.path().join("out");
        let mut args = vec!["stat", "--import", DEFAULT, "--cpu", "zen4"];
        args.extend(format);
        args.extend(["-o", out.to_str().unwrap()]);
        let o = TMA.run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{format:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("holds only"), "{err}");
        assert!(err.contains("so no node can be computed"), "{err}");
        assert!(
            err.contains("tma events --cpu zen4 -l 1 --perf-cmd"),
            "{err}"
        );
        assert!(!out.exists(), "{format:?}");
    }
}

#[test]
fn perf_default_events_next_to_the_tree_events_import() {
    let args = ["--cpu", "zen4", "-l", "2"];
    let (text, j, csv, err) =
        three_formats(&[&["stat", "--import", ZEN4_DEFAULT][..], &args].concat());
    assert!(
        line(&text, "  backend_bound_cpu").contains("65.9%"),
        "{text}"
    );
    // `cycles` and `ls_not_halted_cyc` are one zen4 event, counted in groups of their own
    // (perf's default events beside the tree's): the vendor-named one is read (as perf's
    // metrics read it), the generic one kept under its name, so nothing is ignored.
    assert!(ignored_notes(&err).is_empty(), "{err}");
    // The same counts as the recording without the default events: the same tree (the
    // counts listed with it differ by the default events).
    let (_, j0, csv0, _) = three_formats(&[&["stat", "--import", ZEN4][..], &args].concat());
    let trees = |c: &str| {
        c.lines()
            .filter(|l| !l.contains(",event,"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(trees(&csv), trees(&csv0));
    let tree_of = |j: &serde_json::Value| {
        let mut iv = j["intervals"].clone();
        for i in iv.as_array_mut().unwrap() {
            i.as_object_mut().unwrap().remove("events");
        }
        iv
    };
    assert_eq!(tree_of(&j), tree_of(&j0));
}
