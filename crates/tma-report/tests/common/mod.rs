//! Shared by the report tests: fixture paths and pages made from fixtures.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tma_report::{render, ReportConfig};

/// The repository root.
pub use tma_testkit::repo_root as root;

/// A file under tests/fixtures, relative to the crate (the tests' working directory), so
/// that pages show the paths the README's commands use, below `../../`.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new("../../tests/fixtures").join(rel)
}

/// The Zen 4 SHA-256 recording (one sample, level 2): a tree with known values.
pub fn stat_cfg() -> ReportConfig {
    ReportConfig {
        read: tma_stat::ReadOptions {
            cpu: Some("zen4".into()),
            level: Some(2),
            ..Default::default()
        },
        inputs: vec![fixture("import/zen4-sha256-synthetic.csv")],
        ..ReportConfig::default()
    }
}

/// The two-phase Zen 4 interval recording (60 intervals, level 2).
pub fn intervals_cfg() -> ReportConfig {
    ReportConfig {
        read: tma_stat::ReadOptions {
            cpu: Some("zen4".into()),
            level: Some(2),
            ..Default::default()
        },
        inputs: vec![fixture("report/zen4-phases-synthetic.csv")],
        ..ReportConfig::default()
    }
}

/// The `tma diff --json` of the Zen 4 diff fixtures.
pub fn diff_cfg() -> ReportConfig {
    ReportConfig {
        inputs: vec![fixture("report/zen4.diff.json")],
        ..ReportConfig::default()
    }
}

/// The chase perf.data (call chains) with its binary.
pub fn locate_cfg() -> ReportConfig {
    ReportConfig {
        inputs: vec![fixture("locate/chase.perf.data")],
        symdir: vec![fixture("locate")],
        ..ReportConfig::default()
    }
}

/// A `tma stat --regions` document (Zen 4 trees, two threads, a timeline).
pub fn regions_cfg() -> ReportConfig {
    ReportConfig {
        inputs: vec![fixture("regions/zen4-regions-before.json")],
        ..ReportConfig::default()
    }
}

/// The page of `cfg` as a string.
pub fn page(cfg: &ReportConfig) -> String {
    let mut notes = Vec::new();
    let r = tma_report::run(cfg, &mut notes).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    render::html(&mut out, &r).unwrap();
    String::from_utf8(out).unwrap()
}
