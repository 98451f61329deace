//! `--fix` and `--restore`: the safe fixes `tma doctor` knows, with every previous value saved
//! first (atomically) so that `--restore FILE` undoes them.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{DoctorError, DoctorReport, Roots, Status};
use tma_checks::bracketed;

/// Which root a path is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RootKind {
    Proc,
    Sys,
}

/// One planned change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FixAction {
    /// Check id this fixes.
    pub check: &'static str,
    pub root: RootKind,
    /// Path relative to the root (`sys/kernel/perf_event_paranoid`).
    pub path: String,
    /// Value written.
    pub value: String,
}

impl FixAction {
    /// The shell command equivalent (with the real /proc or /sys prefix).
    pub fn command(&self) -> String {
        let prefix = match self.root {
            RootKind::Proc => "/proc",
            RootKind::Sys => "/sys",
        };
        format!("echo {} > {prefix}/{}", self.value, self.path)
    }
}

/// A value changed by `--fix`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedValue {
    pub root: RootKind,
    pub path: String,
    pub previous: String,
    pub new: String,
}

/// The state file written by `--fix` and read by `--restore`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixState {
    pub schema: String,
    pub schema_version: u32,
    pub values: Vec<FixedValue>,
}

/// The schema name of the state file `--fix` writes (what to restore).
pub const SCHEMA: &str = "tma.doctor.state";

/// The fixes for the checks that are not ok: perf_event_paranoid -> 0, NMI watchdog -> 0,
/// THP -> always, cpufreq governor -> performance.
pub fn planned_fixes(roots: &Roots, report: &DoctorReport) -> Vec<FixAction> {
    let bad = |id: &str| report.get(id).is_some_and(|c| c.status != Status::Ok);
    let mut v = Vec::new();
    if bad("paranoid") && roots.proc.join("sys/kernel/perf_event_paranoid").exists() {
        v.push(FixAction {
            check: "paranoid",
            root: RootKind::Proc,
            path: "sys/kernel/perf_event_paranoid".into(),
            value: "0".into(),
        });
    }
    if bad("nmi_watchdog") {
        v.push(FixAction {
            check: "nmi_watchdog",
            root: RootKind::Proc,
            path: "sys/kernel/nmi_watchdog".into(),
            value: "0".into(),
        });
    }
    if report.get("thp").is_some_and(|c| c.fix.is_some())
        && roots.sys_exists("kernel/mm/transparent_hugepage/enabled")
    {
        v.push(FixAction {
            check: "thp",
            root: RootKind::Sys,
            path: "kernel/mm/transparent_hugepage/enabled".into(),
            value: "always".into(),
        });
    }
    if bad("governor") {
        let dir = roots.sys.join("devices/system/cpu");
        let mut cpus: Vec<u32> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_prefix("cpu")?
                            .parse::<u32>()
                            .ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        cpus.sort_unstable();
        for c in cpus {
            let rel = format!("devices/system/cpu/cpu{c}/cpufreq/scaling_governor");
            match roots.sys_text(&rel) {
                Ok(g) if g != "performance" => v.push(FixAction {
                    check: "governor",
                    root: RootKind::Sys,
                    path: rel,
                    value: "performance".into(),
                }),
                _ => {}
            }
        }
    }
    v
}

fn read_current(a: &FixAction, roots: &Roots) -> Result<String, DoctorError> {
    let s = match a.root {
        RootKind::Proc => roots.proc_text(&a.path),
        RootKind::Sys => roots.sys_text(&a.path),
    }
    .map_err(|e| DoctorError::Write {
        path: e.path().display().to_string(),
        source: e.into_io(),
    })?;
    Ok(if a.check == "thp" {
        bracketed(&s).unwrap_or(s)
    } else {
        s
    })
}

fn write_value(roots: &Roots, root: RootKind, rel: &str, value: &str) -> Result<(), DoctorError> {
    let p = match root {
        RootKind::Proc => roots.proc.join(rel),
        RootKind::Sys => roots.sys.join(rel),
    };
    // Plain open+write (no rename): /proc and /sys files must be written in place.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .map_err(|source| DoctorError::Write {
            path: p.display().to_string(),
            source,
        })?;
    f.write_all(format!("{value}\n").as_bytes())
        .map_err(|source| DoctorError::Write {
            path: p.display().to_string(),
            source,
        })
}

/// Apply `actions`: first save every previous value to `state_path` (atomically), then print
/// each command to `log` and write it. If a write fails, the values already written are put
/// back and the error is returned.
/// What [`apply_fixes`] would do, changing nothing (`tma doctor --fix --dry-run`): each
/// action with the value it would replace (`?` when unreadable).
pub fn preview_fixes(roots: &Roots, actions: &[FixAction]) -> Vec<FixedValue> {
    actions
        .iter()
        .map(|a| FixedValue {
            root: a.root,
            path: a.path.clone(),
            previous: read_current(a, roots).unwrap_or_else(|_| "?".into()),
            new: a.value.clone(),
        })
        .collect()
}

pub fn apply_fixes(
    roots: &Roots,
    actions: &[FixAction],
    state_path: &Path,
    log: &mut dyn Write,
) -> Result<FixState, DoctorError> {
    let mut values = Vec::new();
    for a in actions {
        values.push(FixedValue {
            root: a.root,
            path: a.path.clone(),
            previous: read_current(a, roots)?,
            new: a.value.clone(),
        });
    }
    let state = FixState {
        schema: SCHEMA.into(),
        schema_version: 1,
        values,
    };
    let save_err = |reason: String| DoctorError::SaveState {
        path: state_path.display().to_string(),
        reason,
    };
    tma_render::write_output(state_path, |w| {
        serde_json::to_writer_pretty(&mut *w, &state).map_err(|source| {
            tma_render::OutputError::Json {
                what: "doctor state",
                source,
            }
        })?;
        writeln!(w)?;
        Ok(())
    })
    .map_err(|e| save_err(e.to_string()))?;
    for (i, a) in actions.iter().enumerate() {
        let _ = writeln!(log, "{}", a.command());
        if let Err(e) = write_value(roots, a.root, &a.path, &a.value) {
            for done in state.values[..i].iter().rev() {
                let _ = write_value(roots, done.root, &done.path, &done.previous);
            }
            return Err(e);
        }
    }
    Ok(state)
}

/// Write back the previous values recorded in `state_path`, printing each command to `log`.
pub fn restore(
    roots: &Roots,
    state_path: &Path,
    log: &mut dyn Write,
) -> Result<FixState, DoctorError> {
    let text = std::fs::read(state_path).map_err(|source| DoctorError::ReadState {
        path: state_path.display().to_string(),
        source,
    })?;
    let bad = |reason: String| DoctorError::BadState {
        path: state_path.display().to_string(),
        reason,
    };
    let state: FixState = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    if state.schema != SCHEMA || state.schema_version != 1 {
        return Err(bad(format!(
            "schema {} version {} (expected {SCHEMA} version 1)",
            state.schema, state.schema_version
        )));
    }
    const ALLOWED: &[&str] = &[
        "sys/kernel/perf_event_paranoid",
        "sys/kernel/nmi_watchdog",
        "kernel/mm/transparent_hugepage/enabled",
    ];
    for v in &state.values {
        let ok = ALLOWED.contains(&v.path.as_str())
            || (v.path.starts_with("devices/system/cpu/cpu")
                && v.path.ends_with("/cpufreq/scaling_governor")
                && !v.path.contains(".."));
        if !ok || v.previous.contains(['\n', '/']) {
            return Err(bad(format!(
                "unexpected entry {} = {:?}",
                v.path, v.previous
            )));
        }
    }
    for v in state.values.iter().rev() {
        let prefix = match v.root {
            RootKind::Proc => "/proc",
            RootKind::Sys => "/sys",
        };
        let _ = writeln!(log, "echo {} > {prefix}/{}", v.previous, v.path);
        write_value(roots, v.root, &v.path, &v.previous)?;
    }
    Ok(state)
}
