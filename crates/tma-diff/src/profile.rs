//! Profile diffs, as `perf diff` does: the hot functions of two profiles (perf.data files,
//! symbolized as `tma locate --import` does, or `tma locate --json` documents), each with
//! its share of the samples before and after and the change in points.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tma_profile::hotspots::{FunctionRow, Profile, ReportOptions};
use tma_profile::locate::LocateConfig;

use crate::DiffError;

/// What an input file holds, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A perf.data file (magic `PERFILE2`).
    PerfData,
    /// A `tma locate --json` document (schema `tma.locate`).
    Locate,
    /// Anything else: a TMA tree (`tma stat --json`, a snapshot or a recording).
    Tree,
}

impl InputKind {
    /// Whether this is a profile (perf.data or `tma.locate`).
    pub fn is_profile(self) -> bool {
        self != InputKind::Tree
    }
}

/// The kind of the input at `path`.
pub fn detect(path: &Path) -> Result<InputKind, DiffError> {
    let bytes = read(path)?;
    Ok(kind_of(&bytes))
}

/// The kind of an input's bytes.
pub fn kind_of(bytes: &[u8]) -> InputKind {
    match tma_render::recognize(bytes) {
        tma_render::Recognized::PerfData => InputKind::PerfData,
        r if r.schema() == Some(tma_profile::render::JSON_SCHEMA) => InputKind::Locate,
        _ => InputKind::Tree,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, DiffError> {
    tma_render::files::read_input(path).map_err(|source| DiffError::Read {
        file: tma_render::files::display_input(path),
        source,
    })
}

/// Everything a profile diff needs; no clap.
#[derive(Debug, Clone, Default)]
pub struct ProfileConfig {
    pub before: PathBuf,
    pub after: PathBuf,
    /// perf.data files: the event to show (else the first, with a note when there are more).
    pub event: Option<String>,
    /// perf.data files: look for binaries here (by file name) before their recorded paths.
    pub symdir: Vec<PathBuf>,
    /// perf.data files: kernel symbols (a copy of a machine's /proc/kallsyms).
    pub kallsyms: Option<PathBuf>,
}

/// One function's share of one profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub function: String,
    pub module: String,
    pub samples: u64,
    /// Percent of the profile's samples.
    pub percent: f64,
}

/// One side of a profile diff.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSide {
    pub file: String,
    /// `perf.data` or `tma.locate`.
    pub kind: &'static str,
    /// The sampled event.
    pub event: String,
    /// Samples in the profile.
    pub samples: u64,
    /// Every function with samples (a `tma.locate` document: those it lists).
    pub functions: Vec<Share>,
    /// Notes of the import (several events, a truncated function table).
    pub notes: Vec<String>,
    /// The whole profile, call chains included, when the input holds them (a perf.data
    /// file): for a differential flame graph.
    pub stacks: Option<Box<Profile>>,
}

/// One function, before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRow {
    pub function: String,
    pub module: String,
    #[serde(default)]
    pub before_samples: u64,
    /// Percent of the before profile's samples (0 where the function has none).
    pub before_percent: f64,
    #[serde(default)]
    pub after_samples: u64,
    pub after_percent: f64,
    /// after - before, in points of %.
    pub delta: f64,
}

/// Two profiles compared.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileDiff {
    pub before: ProfileSide,
    pub after: ProfileSide,
    /// Sorted by |delta|, largest first; ties by the larger share, then by name.
    pub rows: Vec<ProfileRow>,
}

impl ProfileDiff {
    /// Notes for the reader: each side's import notes, and events that differ.
    pub fn notes(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .before
            .notes
            .iter()
            .map(|n| format!("{} (before): {n}", self.before.file))
            .chain(
                self.after
                    .notes
                    .iter()
                    .map(|n| format!("{} (after): {n}", self.after.file)),
            )
            .collect();
        if self.before.event != self.after.event {
            out.push(format!(
                "the profiles sample different events: {} before, {} after",
                self.before.event, self.after.event
            ));
        }
        out
    }
}

/// Read both profiles and compare them.
pub fn run(cfg: &ProfileConfig) -> Result<ProfileDiff, DiffError> {
    let before = load(cfg, &cfg.before)?;
    let after = load(cfg, &cfg.after)?;
    Ok(diff(before, after))
}

/// Read one profile: a perf.data file or a `tma.locate` document.
pub fn load(cfg: &ProfileConfig, path: &Path) -> Result<ProfileSide, DiffError> {
    let file = path.display().to_string();
    let bytes = read(path)?;
    match kind_of(&bytes) {
        InputKind::PerfData => from_perf_data(cfg, path, file),
        InputKind::Locate => from_locate_json(&bytes, file),
        InputKind::Tree => Err(DiffError::NotProfile { file }),
    }
}

fn from_perf_data(
    cfg: &ProfileConfig,
    path: &Path,
    file: String,
) -> Result<ProfileSide, DiffError> {
    let lc = LocateConfig {
        import: Some(path.to_path_buf()),
        event: cfg.event.clone(),
        symdir: cfg.symdir.clone(),
        kallsyms: cfg.kallsyms.clone(),
        report: ReportOptions {
            top: 0,
            ..ReportOptions::default()
        },
        ..LocateConfig::default()
    };
    let located = tma_profile::locate::run(&lc, &mut std::io::sink())
        .map_err(|e| DiffError::Locate(Box::new(e)))?;
    let p = located.profile;
    let stacks = Some(Box::new(p.clone()));
    Ok(ProfileSide {
        file,
        kind: "perf.data",
        event: p.event,
        samples: p.counts.samples,
        functions: shares(p.functions),
        notes: p.notes,
        stacks,
    })
}

fn shares(functions: Vec<FunctionRow>) -> Vec<Share> {
    functions
        .into_iter()
        .map(|f| Share {
            function: f.function,
            module: f.module,
            samples: f.samples,
            percent: f.percent,
        })
        .collect()
}

fn from_locate_json(bytes: &[u8], file: String) -> Result<ProfileSide, DiffError> {
    let bad = |detail: String| DiffError::LocateJson {
        file: file.clone(),
        detail,
    };
    let found = tma_render::recognize(bytes).version().unwrap_or(0);
    if found != tma_profile::render::JSON_SCHEMA_VERSION {
        return Err(bad(format!(
            "schema_version {found} (this tma reads {})",
            tma_profile::render::JSON_SCHEMA_VERSION
        )));
    }
    let doc: Profile = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    let mut notes = Vec::new();
    let listed: u64 = doc.functions.iter().map(|f| f.samples).sum();
    if listed < doc.counts.samples {
        notes.push(format!(
            "lists {} functions holding {listed} of {} samples (written with --top); the \
             others count as 0",
            doc.functions.len(),
            doc.counts.samples
        ));
    }
    Ok(ProfileSide {
        file,
        kind: "tma.locate",
        event: doc.event,
        samples: doc.counts.samples,
        functions: shares(doc.functions),
        notes,
        stacks: None,
    })
}

/// Compare two profiles by (function, module); a function on one side only has 0 on the
/// other.
pub fn diff(before: ProfileSide, after: ProfileSide) -> ProfileDiff {
    let mut rows: Vec<ProfileRow> = Vec::new();
    let key = |s: &Share| (s.function.clone(), s.module.clone());
    for b in &before.functions {
        let a = after.functions.iter().find(|a| key(a) == key(b));
        rows.push(ProfileRow {
            function: b.function.clone(),
            module: b.module.clone(),
            before_samples: b.samples,
            before_percent: b.percent,
            after_samples: a.map_or(0, |a| a.samples),
            after_percent: a.map_or(0.0, |a| a.percent),
            delta: a.map_or(0.0, |a| a.percent) - b.percent,
        });
    }
    for a in after
        .functions
        .iter()
        .filter(|a| !before.functions.iter().any(|b| key(a) == key(b)))
    {
        rows.push(ProfileRow {
            function: a.function.clone(),
            module: a.module.clone(),
            before_samples: 0,
            before_percent: 0.0,
            after_samples: a.samples,
            after_percent: a.percent,
            delta: a.percent,
        });
    }
    rows.sort_by(|x, y| {
        y.delta
            .abs()
            .total_cmp(&x.delta.abs())
            .then_with(|| {
                y.before_percent
                    .max(y.after_percent)
                    .total_cmp(&x.before_percent.max(x.after_percent))
            })
            .then_with(|| x.function.cmp(&y.function))
            .then_with(|| x.module.cmp(&y.module))
    });
    ProfileDiff {
        before,
        after,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(f: &str, n: u64, pct: f64) -> Share {
        Share {
            function: f.into(),
            module: "m".into(),
            samples: n,
            percent: pct,
        }
    }

    fn side(functions: Vec<Share>) -> ProfileSide {
        ProfileSide {
            file: "x".into(),
            kind: "tma.locate",
            event: "cycles".into(),
            samples: functions.iter().map(|f| f.samples).sum(),
            functions,
            notes: Vec::new(),
            stacks: None,
        }
    }

    #[test]
    fn kinds_by_first_bytes() {
        assert_eq!(kind_of(b"PERFILE2\0\0"), InputKind::PerfData);
        assert_eq!(
            kind_of(br#"{"schema": "tma.locate", "schema_version": 1}"#),
            InputKind::Locate
        );
        assert_eq!(
            kind_of(br#"{"schema": "tma.stat", "schema_version": 1}"#),
            InputKind::Tree
        );
        assert_eq!(kind_of(b"# started on\n1,,cycles\n"), InputKind::Tree);
    }

    #[test]
    fn one_sided_functions_are_zero_on_the_other_side_and_rows_sort_by_abs_delta() {
        let d = diff(
            side(vec![share("a", 60, 60.0), share("b", 40, 40.0)]),
            side(vec![share("a", 50, 50.0), share("c", 50, 50.0)]),
        );
        let got: Vec<(&str, f64, f64, f64)> = d
            .rows
            .iter()
            .map(|r| {
                (
                    r.function.as_str(),
                    r.before_percent,
                    r.after_percent,
                    r.delta,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("c", 0.0, 50.0, 50.0),
                ("b", 40.0, 0.0, -40.0),
                ("a", 60.0, 50.0, -10.0),
            ]
        );
        assert!(d.notes().is_empty());
    }

    #[test]
    fn same_name_in_another_module_is_another_function() {
        let mut other = share("a", 10, 100.0);
        other.module = "n".into();
        let d = diff(side(vec![share("a", 10, 100.0)]), side(vec![other]));
        assert_eq!(d.rows.len(), 2);
    }
}
