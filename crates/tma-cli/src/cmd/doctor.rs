//! `tma doctor`: is this machine set up to measure, and what to fix.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde::Serialize;
use tma_doctor::{CpuidFacts, DoctorReport, FixedValue, Roots};

/// Check the measurement environment (PMU, paranoid, NMI watchdog, THP, governor, ...).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON (schema tma.doctor, version 1).
    #[arg(long)]
    pub json: bool,
    /// Apply the safe fixes (perf_event_paranoid, NMI watchdog, THP, governor), printing each
    /// command; previous values are saved to the --state file first.
    #[arg(long, conflicts_with = "restore")]
    pub fix: bool,
    /// Where --fix saves the previous values.
    #[arg(long, value_name = "FILE", default_value = "tma-doctor-state.json")]
    pub state: PathBuf,
    /// Undo a previous --fix from its state file.
    #[arg(long, value_name = "FILE")]
    pub restore: Option<PathBuf>,
    /// Write the report to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    #[serde(flatten)]
    report: &'a DoctorReport,
    fixes_applied: &'a [FixedValue],
    restored: &'a [FixedValue],
}

pub fn run(args: Args, root: &crate::cmd::args::RootArg) -> anyhow::Result<ExitCode> {
    let (roots, cpuid) = match &root.root {
        Some(r) => {
            if !r.join("proc").is_dir() || !r.join("sys").is_dir() {
                bail!("--root {} must contain proc/ and sys/", r.display());
            }
            (Roots::under(r), CpuidFacts::default())
        }
        None => (Roots::system(), tma_doctor::cpuid::live()),
    };
    let mut log: Vec<u8> = Vec::new();
    let mut applied = Vec::new();
    let mut restored = Vec::new();
    if let Some(state) = &args.restore {
        let s = tma_doctor::restore(&roots, state, &mut log)
            .with_context(|| format!("restore from {}", state.display()))?;
        restored = s.values;
    } else if args.fix {
        let before = tma_doctor::run_checks(&roots, &cpuid);
        let actions = tma_doctor::planned_fixes(&roots, &before);
        if actions.is_empty() {
            writeln!(
                log,
                "nothing to fix: no check with a safe automatic fix failed"
            )?;
        } else {
            let s = tma_doctor::apply_fixes(&roots, &actions, &args.state, &mut log)
                .context("apply fixes")?;
            writeln!(
                log,
                "previous values saved to {}; undo with `tma doctor --restore {}`",
                args.state.display(),
                args.state.display()
            )?;
            applied = s.values;
        }
    }
    // Commands go to stderr so that --json on stdout stays one document.
    if !log.is_empty() {
        let mut e = std::io::stderr().lock();
        e.write_all(&log)?;
    }
    let report = tma_doctor::run_checks(&roots, &cpuid);
    let render = |w: &mut dyn Write| -> Result<(), tma_report::ReportError> {
        if args.json {
            tma_report::write_json(
                w,
                "tma.doctor",
                1,
                &JsonOut {
                    report: &report,
                    fixes_applied: &applied,
                    restored: &restored,
                },
            )
        } else {
            tma_doctor::render(w, &report)?;
            Ok(())
        }
    };
    match &args.output {
        Some(p) => tma_report::write_atomic(p, render)?,
        None => {
            let mut out = std::io::stdout().lock();
            render(&mut out)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
