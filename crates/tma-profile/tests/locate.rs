//! The locate use case in-process: `tma_profile::run` on the recorded perf.data fixture (the
//! replay of a sampling session), rendered by `tma_profile::render`, and its refusals.

use tma_profile::{render, LocateConfig, LocateError};
use tma_testkit::fixture;

fn import_config() -> LocateConfig {
    LocateConfig {
        import: Some(fixture("locate").join("chase.perf.data")),
        symdir: vec![fixture("locate")],
        ..LocateConfig::default()
    }
}

/// Source-line rows depend on where the checkout lives (DWARF holds absolute paths).
fn without_source_lines(t: &str) -> String {
    t.lines()
        .filter(|l| !l.contains("chase.c:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn imported_fixture_renders_the_golden_text_report() {
    let mut notes = Vec::new();
    let located = tma_profile::run(&import_config(), &mut notes).unwrap();
    assert_eq!(located.exit_status, 0);
    assert_eq!(located.duration_ns, 0);
    assert!(notes.is_empty(), "{}", String::from_utf8_lossy(&notes));
    let mut out = Vec::new();
    render::text(&mut out, &located.profile).unwrap();
    let golden = std::fs::read_to_string(fixture("locate").join("chase.report.txt")).unwrap();
    assert_eq!(
        without_source_lines(&String::from_utf8(out).unwrap()),
        without_source_lines(&golden)
    );
}

#[test]
fn json_document_has_the_schema_and_the_hot_function() {
    let located = tma_profile::run(&import_config(), &mut std::io::sink()).unwrap();
    let mut out = Vec::new();
    render::json(&mut out, &located.profile).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["schema"], tma_profile::JSON_SCHEMA);
    assert_eq!(v["schema_version"], tma_profile::JSON_SCHEMA_VERSION);
    assert_eq!(v["functions"][0]["function"], "chase");
}

/// The `tma.locate` round trip: the document reads back into [`tma_profile::hotspots::Profile`] (less
/// the parts it does not hold), and that, written again, gives the same bytes.
#[test]
fn json_document_reads_back_as_written() {
    let located = tma_profile::run(&import_config(), &mut std::io::sink()).unwrap();
    let mut out = Vec::new();
    render::json(&mut out, &located.profile).unwrap();
    let r = tma_render::recognize(&out);
    assert_eq!(r.schema(), Some(tma_profile::JSON_SCHEMA));
    assert_eq!(r.version(), Some(tma_profile::JSON_SCHEMA_VERSION));
    let doc: tma_profile::hotspots::Profile = serde_json::from_slice(&out).unwrap();
    let written = tma_profile::hotspots::Profile {
        frames: Vec::new(),
        stacks: Vec::new(),
        tasks: Vec::new(),
        sort: Vec::new(),
        modules: Vec::new(),
        value_names: Vec::new(),
        transitions: Vec::new(),
        ..located.profile
    };
    assert!(written.annotation.is_some());
    assert_eq!(doc, written);
    let mut again = Vec::new();
    render::json(&mut again, &doc).unwrap();
    assert_eq!(
        String::from_utf8(again).unwrap(),
        String::from_utf8(out).unwrap()
    );
}

#[test]
fn settings_that_do_not_go_together_are_refused() {
    let run = |cfg: LocateConfig| tma_profile::run(&cfg, &mut std::io::sink()).unwrap_err();
    let e = run(LocateConfig {
        node: Some("Memory_Bound".into()),
        ..import_config()
    });
    assert!(matches!(e, LocateError::Usage(_)), "{e}");
    let e = run(LocateConfig {
        command: vec!["true".into()],
        ..import_config()
    });
    assert_eq!(e.to_string(), "--import reads a file: give no command");
    let e = run(LocateConfig {
        pid: Some(1),
        command: vec!["true".into()],
        ..LocateConfig::default()
    });
    assert!(e.to_string().contains("not both"), "{e}");
    let e = run(LocateConfig::default());
    assert!(e.to_string().starts_with("nothing to sample"), "{e}");
    let e = run(LocateConfig {
        import: Some(fixture("locate").join("chase.c")),
        ..LocateConfig::default()
    });
    assert!(matches!(e, LocateError::Import { .. }), "{e}");
}

/// A `perf record -e '{…}:S'` file samples with a read group; a plain recording does not
/// (what `tma report` asks before drawing the TMA flame graph).
#[test]
fn group_recordings_are_told_from_plain_ones() {
    use tma_profile::import::{file_has_read_groups, has_read_groups};
    let group_path = tma_testkit::fixture("profile-tree/group.perf.data");
    let group = std::fs::read(&group_path).unwrap();
    assert!(has_read_groups(&group));
    // From the file, reading its header and attributes only: the same answers.
    assert!(file_has_read_groups(&group_path).unwrap());
    for plain in ["locate/chase.perf.data", "locate/two-events.perf.data"] {
        let path = tma_testkit::fixture(plain);
        let b = std::fs::read(&path).unwrap();
        assert!(!has_read_groups(&b), "{plain}");
        assert!(!file_has_read_groups(&path).unwrap(), "{plain}");
    }
    assert!(!has_read_groups(b"PERFILE2"));
    assert!(!has_read_groups(b""));
    // Short, cut and hostile headers: no groups, no panic.
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<Vec<u8>> = vec![b"PERFILE2".to_vec(), Vec::new(), group[..48].to_vec()];
    // The attribute section said to start or end past any address.
    for (at, v) in [(24, u64::MAX - 3), (32, u64::MAX), (16, u64::MAX)] {
        let mut b = group.clone();
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        cases.push(b);
    }
    for (i, b) in cases.iter().enumerate() {
        let path = dir.path().join(format!("case{i}.perf.data"));
        std::fs::write(&path, b).unwrap();
        let (bytes, file) = (
            has_read_groups(b),
            file_has_read_groups(&path).unwrap_or(false),
        );
        // A section that runs past the end (case 4) is read as far as the file goes: the
        // group recording's own attributes are still there, for the bytes. The file is not
        // read for a section larger than perf writes.
        assert_eq!((bytes, file), (i == 4, false), "case {i}");
    }
}
