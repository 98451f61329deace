//! A step of the walkthrough: its heading, the `tma` command it runs as a child process
//! (printed first, as the user would type it), and the workload report that command wrote.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use tma_workloads::workload::render::SCHEMA as WORKLOAD_SCHEMA;
use tma_workloads::workload::WorkloadReport;

/// How a step's command ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    Ok,
    Failed(String),
}

/// A step of the walkthrough about to start, for a progress display (the caller decides
/// whether and how to show it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepStart<'a> {
    /// This step's number, from 1 (as in the `Step N:` heading).
    pub step: usize,
    /// The walkthrough's steps (see [`crate::planned_steps`]).
    pub steps: usize,
    /// The step's heading.
    pub title: &'a str,
}

pub(crate) struct Demo<'a> {
    pub(crate) out: &'a mut dyn Write,
    pub(crate) progress: &'a mut dyn FnMut(StepStart<'_>),
    pub(crate) steps: usize,
    pub(crate) exe: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) step: usize,
    pub(crate) failures: Vec<String>,
    /// The machine has a core PMU: `tma stat` records snapshots of its trees, which the
    /// diff-and-report step compares.
    pub(crate) trees: bool,
}

/// A step's command line as shown to the user: `$ tma ARGS`, shell-quoted.
fn show(args: &[String]) -> String {
    let mut words = vec!["tma".to_string()];
    words.extend(args.iter().cloned());
    format!("$ {}", tma_render::shell_words(&words))
}

pub(crate) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Demo<'_> {
    pub(crate) fn heading(&mut self, title: &str) -> io::Result<()> {
        stop_if_interrupted()?;
        self.step += 1;
        (self.progress)(StepStart {
            step: self.step,
            steps: self.steps.max(self.step),
            title,
        });
        writeln!(self.out)?;
        writeln!(self.out, "Step {}: {title}", self.step)
    }

    pub(crate) fn say(&mut self, text: &str) -> io::Result<()> {
        for line in text.lines() {
            writeln!(self.out, "  {line}")?;
        }
        Ok(())
    }

    /// Run `tma ARGS` with the terminal as its stdout/stderr.
    pub(crate) fn run(&mut self, args: &[String]) -> io::Result<Outcome> {
        writeln!(self.out, "{}", show(args))?;
        self.out.flush()?;
        let status = wait_step(Command::new(&self.exe).args(args.iter().map(OsString::from)));
        stop_if_interrupted()?;
        let outcome = match status {
            Ok(s) if s.success() => Outcome::Ok,
            Ok(s) => Outcome::Failed(match s.code() {
                Some(c) => format!("exit status {c}"),
                None => format!("terminated by {s}"),
            }),
            Err(e) => Outcome::Failed(format!("cannot start {}: {e}", self.exe.display())),
        };
        if let Outcome::Failed(why) = &outcome {
            writeln!(
                self.out,
                "  -> this step failed ({why}); continuing with the next one"
            )?;
            self.failures.push(format!("{}: {why}", show(args)));
        }
        Ok(outcome)
    }

    pub(crate) fn report_path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Measure a workload under `tma stat`; if stat fails or the report is missing, run the
    /// workload alone so the comparison still has its figures.
    pub(crate) fn measure(
        &mut self,
        workload: &[String],
        report: &Path,
    ) -> io::Result<Option<WorkloadReport>> {
        self.measure_with(&[], workload, report)
    }

    /// [`Demo::measure`] with options of `tma stat` (`--itt`).
    pub(crate) fn measure_with(
        &mut self,
        stat_opts: &[String],
        workload: &[String],
        report: &Path,
    ) -> io::Result<Option<WorkloadReport>> {
        let _ = std::fs::remove_file(report);
        let mut wl = workload.to_vec();
        wl.push("--report".into());
        wl.push(report.display().to_string());
        // With a PMU, keep the tree's snapshot for the diff-and-report step.
        let mut stat = strs(&["stat"]);
        stat.extend(stat_opts.iter().cloned());
        if self.trees {
            let snap = snapshot_path(report);
            let _ = std::fs::remove_file(&snap);
            stat.push("--record".into());
            stat.push(snap.display().to_string());
        }
        self.wrapped(&stat, &wl)?;
        if let Some(v) = read_report(report) {
            return Ok(Some(v));
        }
        writeln!(
            self.out,
            "  no workload report from that run; measuring the workload on its own:"
        )?;
        self.run(&wl)?;
        let v = read_report(report);
        if v.is_none() {
            writeln!(self.out, "  -> no figures for this variant")?;
        }
        Ok(v)
    }

    /// The last step of a case: `tma diff` of the trees `tma stat` recorded before and after
    /// the fix, and a `tma report` page of both trees and their diff. The page is written
    /// outside a temporary report directory, so that it outlives the walkthrough.
    pub(crate) fn diff_and_report(
        &mut self,
        before: &Path,
        after: &Path,
        case: &str,
        keep_dir: bool,
    ) -> io::Result<()> {
        self.heading("compare the trees: tma diff, and a tma report page")?;
        if !self.trees {
            return self.say(
                "This machine has no hardware PMU, so `tma stat` could count only software events:
                 there are no TMA trees to compare. With a PMU this step runs
                 `tma diff BEFORE AFTER` on the two runs' `--record` snapshots and writes a
                 `tma report` page with both trees, their diff and the bottleneck's move.",
            );
        }
        let (b, a) = (snapshot_path(before), snapshot_path(after));
        if !b.exists() || !a.exists() {
            return self
                .say("no snapshot from one of the two `tma stat` runs above: nothing to compare");
        }
        let (bs, as_) = (b.display().to_string(), a.display().to_string());
        self.run(&strs(&["diff", &bs, &as_]))?;
        let diff = self.report_path(&format!("{case}.diff.json"));
        let ds = diff.display().to_string();
        self.run(&strs(&["diff", &bs, &as_, "--json", "-o", &ds]))?;
        let page = if keep_dir {
            self.report_path(&format!("tma-demo-{case}.html"))
        } else {
            std::env::temp_dir().join(format!("tma-demo-{case}-{}.html", std::process::id()))
        };
        let ps = page.display().to_string();
        let mut args = strs(&["report", &bs, &as_]);
        if diff.exists() {
            args.push(ds);
        }
        args.extend(strs(&[
            "--title",
            &format!("tma demo {case}: before and after"),
            "-o",
            &ps,
        ]));
        if let Outcome::Ok = self.run(&args)? {
            self.say(&format!(
                "The page: {ps} (one self-contained file; open it in a browser)"
            ))?;
        }
        Ok(())
    }

    pub(crate) fn locate(&mut self, workload: &[String], what: &str) -> io::Result<()> {
        self.locate_with(&[], workload, what)
    }

    /// `tma locate OPTS -- tma WORKLOAD --no-calibrate`.
    pub(crate) fn locate_with(
        &mut self,
        opts: &[String],
        workload: &[String],
        what: &str,
    ) -> io::Result<()> {
        // Without the core-clock calibration: its add chain would show up among the samples.
        let mut workload = workload.to_vec();
        workload.push("--no-calibrate".into());
        let mut head = strs(&["locate"]);
        head.extend(opts.iter().cloned());
        match self.wrapped(&head, &workload)? {
            Wrapped::Ok => self.say(&format!("Expected: {what}")),
            Wrapped::Failed => self.say(&format!("What it would show: {what}")),
            Wrapped::NotStarted => Ok(()),
        }
    }

    /// Run `tma HEAD -- tma WORKLOAD`, this same executable after `--` (its path is passed,
    /// `tma` shown); a failure is said and noted, and the walkthrough goes on.
    fn wrapped(&mut self, head: &[String], workload: &[String]) -> io::Result<Wrapped> {
        let mut shown = head.to_vec();
        shown.push("--".into());
        let mut real = shown.clone();
        shown.push("tma".into());
        real.push(self.exe.display().to_string());
        shown.extend_from_slice(workload);
        real.extend_from_slice(workload);
        writeln!(self.out, "{}", show(&shown))?;
        self.out.flush()?;
        let status = wait_step(Command::new(&self.exe).args(&real));
        stop_if_interrupted()?;
        let command = &head[0];
        let (said, why, ended) = match status {
            Ok(s) if s.success() => return Ok(Wrapped::Ok),
            Ok(s) => {
                let why = s
                    .code()
                    .map(|c| format!("exit status {c}"))
                    .unwrap_or_else(|| s.to_string());
                let said = format!("`tma {command}` failed ({why})");
                (said, why, Wrapped::Failed)
            }
            Err(e) => {
                let said = format!("cannot start tma {command}: {e}");
                (said, e.to_string(), Wrapped::NotStarted)
            }
        };
        writeln!(self.out, "  -> {said}; continuing")?;
        self.failures.push(format!("{}: {why}", show(&shown)));
        Ok(ended)
    }
}

/// How a `tma COMMAND -- tma WORKLOAD` step ended.
enum Wrapped {
    Ok,
    Failed,
    NotStarted,
}

/// How long a step's command has to end after the demo passed it SIGINT/SIGTERM, before SIGKILL.
const STEP_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Run a step's command to its end. On SIGINT/SIGTERM (`tma_sys::signal`) the command is
/// passed the signal (a Ctrl-C reached it already; a SIGTERM may have been sent to the demo
/// alone) and, if still running after [`STEP_GRACE`], killed.
fn wait_step(cmd: &mut Command) -> io::Result<std::process::ExitStatus> {
    let mut child = cmd.spawn()?;
    let mut forwarded: Option<std::time::Instant> = None;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        if let Some(sig) = tma_sys::signal::interrupted() {
            match forwarded {
                None => {
                    let _ = tma_sys::process::kill(child.id() as i32, sig.number());
                    forwarded = Some(std::time::Instant::now());
                }
                Some(t) if t.elapsed() > STEP_GRACE => {
                    let _ = child.kill();
                    return child.wait();
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The error that ends the walkthrough after SIGINT/SIGTERM (told apart by its kind and
/// `tma_sys::signal::interrupted`).
fn stop_if_interrupted() -> io::Result<()> {
    match tma_sys::signal::interrupted() {
        Some(sig) => Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!("interrupted by {sig}"),
        )),
        None => Ok(()),
    }
}

/// Where `tma stat --record` keeps the snapshot of the run behind a workload report.
fn snapshot_path(report: &Path) -> PathBuf {
    report.with_extension("snapshot.json")
}

/// A `tma.workload` document, read through its type.
pub(crate) fn read_report(path: &Path) -> Option<WorkloadReport> {
    let bytes = std::fs::read(path).ok()?;
    if tma_render::recognize(&bytes).schema() != Some(WORKLOAD_SCHEMA) {
        return None;
    }
    WorkloadReport::read(&bytes).ok()
}

/// `v` with `prec` decimals, or `n/a`.
pub(crate) fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    fmt_unit(v, prec, "")
}

/// [`fmt_opt`] with a unit after the figure (`2.00x`, `67%`).
pub(crate) fn fmt_unit(v: Option<f64>, prec: usize, unit: &str) -> String {
    v.map_or_else(|| "n/a".into(), |x| format!("{x:.prec$}{unit}"))
}

/// How many times `base` is `v` (the speed-up of a run that took `v` over one that took `base`).
pub(crate) fn speedup(base: Option<f64>, v: Option<f64>) -> Option<f64> {
    base.zip(v).filter(|(_, v)| *v > 0.0).map(|(b, v)| b / v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_shown_shell_quoted() {
        assert_eq!(
            show(&strs(&["stat", "--", "tma", "a b"])),
            "$ tma stat -- tma 'a b'"
        );
    }

    #[test]
    fn only_workload_reports_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        std::fs::write(&p, br#"{"schema": "tma.stat", "x": 1}"#).unwrap();
        assert!(read_report(&p).is_none());
        // A workload's own document reads back through its type.
        let r = tma_workloads::workload::run(&tma_workloads::workload::WorkloadConfig {
            kind: tma_workloads::workload::WorkloadKind::Dram(tma_workloads::dram::DramConfig {
                size_bytes: 1 << 20,
                accesses: 1000,
                ..Default::default()
            }),
            calibrate: false,
        })
        .unwrap();
        let mut bytes = Vec::new();
        tma_workloads::workload::render::json(&mut bytes, &r).unwrap();
        std::fs::write(&p, &bytes).unwrap();
        let v = read_report(&p).unwrap();
        assert_eq!(v, r);
        assert!(v.dram.as_ref().is_some_and(|d| d.ns_per_access > 0.0));
        assert_eq!(
            fmt_opt(v.dram.as_ref().and_then(|d| d.cycles_per_access), 2),
            "n/a"
        );
        // One that is not whole is no report: the walkthrough then measures on its own.
        std::fs::write(
            &p,
            br#"{"schema": "tma.workload", "dram": {"ns_per_access": 2.5}}"#,
        )
        .unwrap();
        assert!(read_report(&p).is_none());
    }

    /// With trees (a PMU), the last step diffs the two snapshots and writes a report page
    /// with both and their diff; a stand-in `tma` (a shell script) logs the commands.
    #[test]
    fn the_last_step_diffs_the_snapshots_and_writes_a_page() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tma");
        let log = dir.path().join("log");
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\necho \"$*\" >> {}\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let reports = dir.path().join("reports");
        std::fs::create_dir_all(&reports).unwrap();
        for f in ["dram.snapshot.json", "dram-prefetch.snapshot.json"] {
            std::fs::write(reports.join(f), "{}").unwrap();
        }
        let mut out = Vec::new();
        let mut progress = |_: StepStart<'_>| {};
        let mut demo = Demo {
            out: &mut out,
            progress: &mut progress,
            steps: 1,
            exe,
            dir: reports.clone(),
            step: 0,
            failures: Vec::new(),
            trees: true,
        };
        let (b, a) = (
            reports.join("dram.json"),
            reports.join("dram-prefetch.json"),
        );
        demo.diff_and_report(&b, &a, "dram", true).unwrap();
        assert!(demo.failures.is_empty(), "{:?}", demo.failures);
        let text = String::from_utf8(out).unwrap();
        let (bs, as_) = (
            reports.join("dram.snapshot.json").display().to_string(),
            reports
                .join("dram-prefetch.snapshot.json")
                .display()
                .to_string(),
        );
        let diff = reports.join("dram.diff.json").display().to_string();
        let page = reports.join("tma-demo-dram.html").display().to_string();
        let log = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(
            lines,
            [
                format!("diff {bs} {as_}"),
                format!("diff {bs} {as_} --json -o {diff}"),
                format!(
                    "report {bs} {as_} {diff} --title tma demo dram: before and after -o {page}"
                ),
            ],
            "{text}"
        );
        assert!(text.contains(&format!("The page: {page}")), "{text}");
    }
}
