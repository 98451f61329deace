//! `tma demo [sha256|dram|thp|onednn]`: the method, walked through on this machine with a bundled case.
//!
//! Every step runs a real `tma` command as a child process of the `tma` executable named in
//! [`DemoConfig::exe`] and prints it first (`$ tma ...`), so the user can repeat it by hand.
//! The steps are: measure (`tma stat` on the slow variant: the TMA tree, or on a machine
//! without a PMU the explanation and the software counts), locate (`tma locate`: hot function
//! and instruction), apply the fix (SHA-NI instead of portable; the software prefetch on;
//! transparent huge pages for the matmul's buffers),
//! measure again, and compare. A step that fails prints why and the walkthrough continues;
//! figures come from the workloads' own `--report` JSON (`tma.workload` v1), cycles from
//! their core-clock calibration.
//!
//! This is its own crate rather than part of `tma-workloads` because it orchestrates other
//! `tma` commands (stat, locate, bench, workload) as child processes and reads their reports;
//! the workloads crate holds the measured kernels, compiled at opt-level 3 even in debug.
//!
//! One file per case (`sha.rs`, `dram.rs`, `thp.rs`, `onednn.rs`), each a `run` over the
//! steps of `step.rs`, which runs a step's command and reads the report it wrote.

mod dram;
mod onednn;
mod sha;
mod step;
mod thp;

use std::io::{self, Write};
use std::path::PathBuf;

use tma_host::Host;

use step::Demo;
pub use step::StepStart;

/// A bundled case study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// SHA-256: portable code vs the SHA-NI instructions (and interleaved streams).
    Sha256,
    /// DRAM-bound pointer chase vs the same chase with a software prefetch.
    Dram,
    /// Reference matmul reading its weights column-wise, without and with huge pages.
    Thp,
    /// oneDNN's matmul primitive (the real library) and the reference matmul, each without and
    /// with huge pages, oneDNN's primitives as ITT regions.
    Onednn,
}

/// What the walkthrough does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoConfig {
    /// The `tma` executable whose subcommands the steps run.
    pub exe: PathBuf,
    /// Case studies, in order.
    pub cases: Vec<Case>,
    /// Small sizes: a walkthrough in seconds (figures are noisier).
    pub quick: bool,
    /// Directory for the workload reports (created if missing).
    pub dir: PathBuf,
    /// Keep `dir` at the end (and say so); otherwise it is removed.
    pub keep_dir: bool,
    /// Run the `tma locate` step.
    pub locate: bool,
    /// Run the `tma bench --preset sha` step.
    pub bench: bool,
    /// The executable is a debug build: print a note that the figures are not representative.
    pub debug_build: bool,
    /// Print derivations too (the SHA-256 instruction-level bound, line by line).
    pub verbose: bool,
    /// Where the steps' machine facts are read (whether there is a core PMU, the CPU vendor).
    pub host: Host,
    /// The oneDNN library of the onednn case (`--dnnl`); `None`: the workload searches.
    pub dnnl: Option<PathBuf>,
}

/// Errors that stop the walkthrough (a failing step does not: it is reported and skipped).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    #[error("cannot create the report directory {}: {err}", dir.display())]
    ReportDir { dir: PathBuf, err: io::Error },
    /// Writing the walkthrough's output failed (for example a closed pipe).
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The end of a walkthrough.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DemoSummary {
    /// The steps that failed, as `$ tma ...: why`.
    pub failures: Vec<String>,
    /// SIGINT or SIGTERM stopped the walkthrough (the steps after the current one did not run).
    pub interrupted: Option<tma_sys::signal::Interrupt>,
}

/// How many `Step N:` headings the walkthrough of `cfg` has.
pub fn planned_steps(cfg: &DemoConfig) -> usize {
    cfg.cases
        .iter()
        .map(|case| match case {
            // measure, fix, interleave, compare, diff and report; locate; bench
            Case::Sha256 => 5 + usize::from(cfg.locate) + usize::from(cfg.bench),
            // measure, fix, compare, diff and report; locate
            Case::Dram => 4 + usize::from(cfg.locate),
            // measure, fix, compare; locate
            Case::Thp => 3 + usize::from(cfg.locate),
            // oneDNN off and on, reference off and on, compare
            Case::Onednn => 5,
        })
        .sum()
}

/// Run the walkthrough, writing it to `out` (the steps' own output goes to the inherited
/// standard output, so `out` is flushed before each step).
pub fn run(cfg: &DemoConfig, out: &mut dyn Write) -> Result<DemoSummary, DemoError> {
    run_with_progress(cfg, out, &mut |_| {})
}

/// [`run`], telling `progress` as each step starts.
pub fn run_with_progress(
    cfg: &DemoConfig,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(StepStart<'_>),
) -> Result<DemoSummary, DemoError> {
    std::fs::create_dir_all(&cfg.dir).map_err(|err| DemoError::ReportDir {
        dir: cfg.dir.clone(),
        err,
    })?;
    let mut demo = Demo {
        out,
        progress,
        steps: planned_steps(cfg),
        exe: cfg.exe.clone(),
        dir: cfg.dir.clone(),
        step: 0,
        failures: Vec::new(),
        trees: !tma_host::sysfs::core_pmu_types(&cfg.host.sys).is_empty(),
    };
    let mut result = walk(&mut demo, cfg);
    let mut interrupted = None;
    if let (Err(e), Some(sig)) = (&result, tma_sys::signal::interrupted()) {
        if e.kind() == io::ErrorKind::Interrupted {
            interrupted = Some(sig);
            result = writeln!(
                demo.out,
                "\nInterrupted by {sig} in step {} of {}: the walkthrough stopped; the steps after it did not run.",
                demo.step,
                demo.steps.max(demo.step)
            );
        }
    }
    if !cfg.keep_dir {
        let _ = std::fs::remove_dir_all(&cfg.dir);
    }
    result?;
    Ok(DemoSummary {
        failures: demo.failures,
        interrupted,
    })
}

fn walk(demo: &mut Demo<'_>, cfg: &DemoConfig) -> io::Result<()> {
    if cfg.debug_build {
        writeln!(
            demo.out,
            "note: this tma is a debug build, so the workloads run unoptimised and far from the\n\
             \x20     hardware limits; build with `cargo build --release` for representative figures."
        )?;
    }
    for case in &cfg.cases {
        match case {
            Case::Sha256 => sha::run(demo, cfg)?,
            Case::Dram => dram::run(demo, cfg)?,
            Case::Thp => thp::run(demo, cfg)?,
            Case::Onednn => onednn::run(demo, cfg)?,
        }
    }
    writeln!(demo.out)?;
    if demo.failures.is_empty() {
        writeln!(demo.out, "All steps ran.")?;
    } else {
        writeln!(
            demo.out,
            "Steps that failed (the walkthrough continued without them):"
        )?;
        for f in &demo.failures {
            writeln!(demo.out, "  {f}")?;
        }
    }
    if cfg.keep_dir {
        writeln!(demo.out, "Workload reports kept in {}", cfg.dir.display())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quick walkthrough of `cases` in `dir` with an executable that does not exist.
    fn config(dir: &std::path::Path, cases: Vec<Case>, locate: bool, bench: bool) -> DemoConfig {
        DemoConfig {
            exe: dir.join("no-such-tma"),
            cases,
            quick: true,
            dir: dir.join("reports"),
            keep_dir: false,
            locate,
            bench,
            debug_build: false,
            verbose: false,
            host: Host::system(),
            dnnl: None,
        }
    }

    #[test]
    fn failing_steps_are_reported_and_the_walkthrough_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let reports = dir.path().join("reports");
        let cfg = config(dir.path(), vec![Case::Dram, Case::Thp], true, true);
        let mut out = Vec::new();
        let summary = run(&cfg, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Step 1: measure the chase"), "{text}");
        assert!(text.contains("cannot start tma stat"), "{text}");
        assert!(
            text.contains("$ tma stat -- tma workload matmul --m 16 --thp off"),
            "{text}"
        );
        assert!(text.contains("Step 6: measure with 4 KiB pages"), "{text}");
        assert!(text.contains("Steps that failed"), "{text}");
        assert!(!summary.failures.is_empty());
        assert!(
            !reports.exists(),
            "the temporary report directory is removed"
        );
    }

    /// The step count a progress display shows matches the headings the walkthrough
    /// writes, for every choice of cases and optional steps (each step fails at once here:
    /// the executable does not exist).
    #[test]
    fn planned_steps_match_the_headings() {
        let dir = tempfile::tempdir().unwrap();
        for cases in [
            vec![Case::Sha256],
            vec![Case::Dram],
            vec![Case::Thp],
            vec![Case::Onednn],
            vec![Case::Sha256, Case::Dram, Case::Thp, Case::Onednn],
        ] {
            for (locate, bench) in [(false, false), (true, false), (false, true), (true, true)] {
                let cfg = config(dir.path(), cases.clone(), locate, bench);
                let mut seen: Vec<(usize, usize, String)> = Vec::new();
                let mut out = Vec::new();
                run_with_progress(&cfg, &mut out, &mut |p| {
                    seen.push((p.step, p.steps, p.title.to_string()))
                })
                .unwrap();
                let text = String::from_utf8(out).unwrap();
                let headings = text.lines().filter(|l| l.starts_with("Step ")).count();
                assert_eq!(planned_steps(&cfg), headings, "{cfg:?}");
                assert_eq!(seen.len(), headings);
                for (i, (step, steps, title)) in seen.iter().enumerate() {
                    assert_eq!((*step, *steps), (i + 1, headings));
                    assert!(text.contains(&format!("Step {step}: {title}")));
                }
            }
        }
    }
}
