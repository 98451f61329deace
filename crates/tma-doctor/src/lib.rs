//! The `tma doctor` command: the checks of `tma-checks` (read under [`Roots`], so tests run
//! against fake trees), the fixes, and `--verify`'s known-answer counts. Nothing is changed
//! unless [`apply_fixes`] is called; it records every previous value in a [`FixState`] that
//! [`restore`] writes back.

use serde::Serialize;

mod fix;
pub mod verify;
mod verify_sys;

pub use fix::{
    apply_fixes, planned_fixes, preview_fixes, restore, FixAction, FixState, FixedValue, RootKind,
};
pub use tma_checks::{
    cpu_model, cpuid, kernel_version, run_checks, tree_caveats, Check, CpuidFacts, DoctorReport,
    Roots, Status,
};

/// What `tma doctor` is asked to do besides checking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Only check.
    Check,
    /// Apply the safe fixes, saving the previous values to `state` first.
    Fix { state: std::path::PathBuf },
    /// Say which fixes `Fix` would apply and the values they would replace; change nothing
    /// (no value written, no state file).
    FixDryRun,
    /// Write back the values saved in `state` by an earlier fix.
    Restore { state: std::path::PathBuf },
}

/// Everything `tma doctor` needs (clap-free).
#[derive(Debug, Clone)]
pub struct DoctorConfig {
    pub roots: Roots,
    pub cpuid: CpuidFacts,
    pub action: Action,
}

/// The checks after the action, and what the action changed.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorRun {
    #[serde(flatten)]
    pub report: DoctorReport,
    pub fixes_applied: Vec<FixedValue>,
    pub restored: Vec<FixedValue>,
    /// `--fix --dry-run`: the fixes that would be applied (nothing was changed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes_planned: Vec<FixedValue>,
}

impl DoctorRun {
    /// Whether a check reports a problem (`tma doctor` then exits 1; warnings do not count).
    pub fn has_problem(&self) -> bool {
        self.report
            .checks
            .iter()
            .any(|c| c.status == Status::Problem)
    }
}

/// Run the action (each command it runs is written to `notes`), then the checks.
pub fn run(cfg: &DoctorConfig, notes: &mut dyn std::io::Write) -> Result<DoctorRun, DoctorError> {
    let mut applied = Vec::new();
    let mut restored = Vec::new();
    let mut planned = Vec::new();
    match &cfg.action {
        Action::Check => {}
        Action::FixDryRun => {
            let before = run_checks(&cfg.roots, &cfg.cpuid);
            let actions = planned_fixes(&cfg.roots, &before);
            planned = preview_fixes(&cfg.roots, &actions);
            let w = |notes: &mut dyn std::io::Write, line: String| {
                writeln!(notes, "{line}").map_err(DoctorError::Notes)
            };
            if actions.is_empty() {
                w(
                    notes,
                    "dry run: nothing to fix: no check with a safe automatic fix failed".into(),
                )?;
            }
            for (a, v) in actions.iter().zip(&planned) {
                w(
                    notes,
                    format!("dry run: would run `{}` (now {})", a.command(), v.previous),
                )?;
            }
            if !actions.is_empty() {
                w(
                    notes,
                    "dry run: nothing was changed and no state file was written".into(),
                )?;
            }
        }
        Action::Restore { state } => restored = restore(&cfg.roots, state, notes)?.values,
        Action::Fix { state } => {
            let before = run_checks(&cfg.roots, &cfg.cpuid);
            let actions = planned_fixes(&cfg.roots, &before);
            if actions.is_empty() {
                writeln!(
                    notes,
                    "nothing to fix: no check with a safe automatic fix failed"
                )
                .map_err(DoctorError::Notes)?;
            } else {
                applied = apply_fixes(&cfg.roots, &actions, state, notes)?.values;
                writeln!(
                    notes,
                    "previous values saved to {}; undo with `tma doctor --restore {}`",
                    state.display(),
                    state.display()
                )
                .map_err(DoctorError::Notes)?;
            }
        }
    }
    Ok(DoctorRun {
        report: run_checks(&cfg.roots, &cfg.cpuid),
        fixes_applied: applied,
        restored,
        fixes_planned: planned,
    })
}

/// The schema name of `tma doctor --json`.
pub const SCHEMA: &str = "tma.doctor";
/// The schema name of the state file `tma doctor --fix` keeps.
pub const STATE_SCHEMA: &str = fix::SCHEMA;

/// Render as JSON (schema [`SCHEMA`], version 1).
pub fn render_json(
    w: &mut dyn std::io::Write,
    r: &DoctorRun,
) -> Result<(), tma_render::OutputError> {
    tma_render::write_json(w, SCHEMA, 1, r)
}

/// Render as text.
pub fn render(w: &mut dyn std::io::Write, r: &DoctorReport) -> std::io::Result<()> {
    for c in &r.checks {
        writeln!(w, "[{:<7}] {:<12} {}", c.status.label(), c.id, c.summary)?;
        if !c.explanation.trim().is_empty() {
            for line in tma_render::wrap(&c.explanation, &" ".repeat(24), 24 + 92) {
                writeln!(w, "{line}")?;
            }
        }
        if let Some(f) = &c.fix {
            writeln!(w, "{:24}fix: {f}", "")?;
        }
    }
    let (ok, warn, prob) = r
        .checks
        .iter()
        .fold((0, 0, 0), |(a, b, c), x| match x.status {
            Status::Ok => (a + 1, b, c),
            Status::Warning => (a, b + 1, c),
            Status::Problem => (a, b, c + 1),
        });
    writeln!(w)?;
    writeln!(w, "{ok} ok, {warn} warnings, {prob} problems")?;
    Ok(())
}

/// Where `tma doctor --verify` takes its counts from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifyConfig {
    /// Judge these recorded counts (`--replay FILE`) instead of measuring.
    pub replay: Option<std::path::PathBuf>,
    /// Also save the measured counts here (`--record FILE`).
    pub record: Option<std::path::PathBuf>,
    /// This program (`tma`), which `perf stat` runs with `doctor --run-loop` for the
    /// side-by-side check; `None` skips it.
    pub exe: Option<std::path::PathBuf>,
}

/// `tma doctor --verify`: measure (or read) the known-answer counts and judge them.
pub fn verify(cfg: &VerifyConfig) -> Result<verify::VerifyReport, DoctorError> {
    let rec = match &cfg.replay {
        Some(path) => {
            let bytes =
                tma_render::files::read_input(path).map_err(|e| DoctorError::BadRecording {
                    path: tma_render::files::display_input(path),
                    reason: format!("cannot read it: {e}"),
                })?;
            let mut rec =
                verify::parse_recorded(&bytes).map_err(|reason| DoctorError::BadRecording {
                    path: path.display().to_string(),
                    reason,
                })?;
            rec.source = format!("replay of {}", path.display());
            rec
        }
        None => verify::measure(cfg.exe.as_deref()).map_err(DoctorError::Verify)?,
    };
    if let Some(path) = &cfg.record {
        tma_render::write_output(path, |w| verify::write_recorded(w, &rec)).map_err(|e| {
            DoctorError::SaveState {
                path: path.display().to_string(),
                reason: e.to_string(),
            }
        })?;
    }
    Ok(verify::judge(&rec))
}

/// Errors of `--fix` / `--restore` / `--verify`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoctorError {
    #[error("cannot write {path}: {source}; run as root to apply fixes")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read state file {path}: {source}")]
    ReadState {
        path: String,
        source: std::io::Error,
    },
    #[error("state file {path} is not a tma doctor state file: {reason}")]
    BadState { path: String, reason: String },
    #[error("cannot save state file {path}: {reason}; nothing was changed")]
    SaveState { path: String, reason: String },
    #[error("cannot write the list of commands: {0}")]
    Notes(std::io::Error),
    #[error(
        "cannot count this thread's software events ({0}); perf_event_open is refused here: \
         check /proc/sys/kernel/perf_event_paranoid (<= 2 for your own threads) or seccomp"
    )]
    Verify(std::io::Error),
    #[error("{path} is not a tma doctor --verify recording: {reason}")]
    BadRecording { path: String, reason: String },
}
