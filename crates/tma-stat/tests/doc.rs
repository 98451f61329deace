//! The `tma.stat` document round trip: what `tma stat --json` writes for a recording reads
//! back into [`StatDoc`], and that, written again, gives the same bytes.

use std::path::{Path, PathBuf};

use tma_host::Host;
use tma_stat::render::doc::StatDoc;
use tma_stat::render::tree::{SCHEMA, SCHEMA_VERSION};
use tma_stat::{Format, Input, RenderOptions, StatConfig};

const ZEN4: &str = "import/zen4-sha256-synthetic.csv";

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(rel)
}

/// `tma stat --import FILE --json` with these settings.
fn written(file: &Path, cfg: StatConfig) -> Vec<u8> {
    let cfg = StatConfig {
        input: Input::Import(file.to_path_buf()),
        render: RenderOptions {
            format: Format::Json,
            ..RenderOptions::default()
        },
        host: Host::new("/nonexistent/sys", "/nonexistent"),
        ..cfg
    };
    let mut out = Vec::new();
    let mut sink = tma_stat::TreeOutput::new(&mut out, &cfg.render);
    tma_stat::run(&cfg, &mut sink, &mut Vec::new()).unwrap();
    drop(sink);
    out
}

/// Read a document into the type and write it again.
fn round_trip(bytes: &[u8]) -> StatDoc {
    tma_testkit::round_trip(bytes, SCHEMA, SCHEMA_VERSION)
}

#[test]
fn a_tree_reads_back_as_written() {
    let cfg = StatConfig {
        cpu: Some("zen4".into()),
        level: 2,
        ..StatConfig::default()
    };
    let bytes = written(&fixture(ZEN4), cfg);
    let doc = round_trip(&bytes);
    // The golden file was written from the same recording named by another path.
    let mut golden = round_trip(&std::fs::read(fixture("import/golden/zen4-l2.json")).unwrap());
    golden.head.source.clone_from(&doc.head.source);
    assert_eq!(golden, doc);
    assert_eq!(doc.head.cpu.key, "zen4");
    assert_eq!(doc.head.level, 2);
    assert_eq!(doc.head.events.len(), 12);
    assert_eq!(doc.intervals.len(), 1);
    let iv = &doc.intervals[0];
    let b = iv.nodes.iter().find(|n| n.bottleneck).unwrap();
    assert_eq!(iv.bottleneck.node.as_deref(), Some(&*b.name));
    assert_eq!(
        iv.bottleneck.path.last().map(String::as_str),
        Some(&*b.name)
    );
    assert!(iv.metrics.is_empty());
}

#[test]
fn metrics_read_back_as_written() {
    let cfg = StatConfig {
        cpu: Some("icx".into()),
        metrics: Some(vec!["IPC".into()]),
        bottlenecks: true,
        ..StatConfig::default()
    };
    let doc = round_trip(&written(&fixture("import/icx-metrics-synthetic.csv"), cfg));
    let iv = &doc.intervals[0];
    let ipc = iv.metrics.iter().find(|m| m.short_name == "IPC").unwrap();
    assert_eq!((&*ipc.kind, ipc.rank), ("metric", None));
    assert!(iv.metrics.iter().any(|m| m.rank == Some(1)));
}

#[test]
fn intervals_read_back_as_written() {
    // The Zen 4 recording, counted twice: `perf stat -I` lines start with the time.
    let csv = std::fs::read_to_string(fixture(ZEN4)).unwrap();
    let mut lines = String::new();
    for t in ["1.000000000", "2.000000000"] {
        for l in csv.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
            lines.push_str(&format!("{t},{l}\n"));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("intervals.csv");
    std::fs::write(&rec, lines).unwrap();
    let cfg = StatConfig {
        cpu: Some("zen4".into()),
        ..StatConfig::default()
    };
    let doc = round_trip(&written(&rec, cfg));
    assert!(doc.head.interval_mode);
    assert_eq!(doc.intervals.len(), 2);
    assert_eq!(doc.intervals[1].start_s, 1.0);
    assert_eq!(doc.intervals[0].nodes, doc.intervals[1].nodes);
}
