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

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tma_host::Host;
use tma_workloads::sha256::bound::{judge, Beaten, Bounds, Kernel, Share as BoundShare, Term};
use tma_workloads::workload::render::SCHEMA as WORKLOAD_SCHEMA;
use tma_workloads::workload::WorkloadReport;

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

/// How a step's command ended.
#[derive(Debug)]
enum Outcome {
    Ok,
    Failed(String),
}

/// A step of the walkthrough about to start, for a progress display (the caller decides
/// whether and how to show it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepStart<'a> {
    /// This step's number, from 1 (as in the `Step N:` heading).
    pub step: usize,
    /// The walkthrough's steps (see [`planned_steps`]).
    pub steps: usize,
    /// The step's heading.
    pub title: &'a str,
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

struct Demo<'a> {
    out: &'a mut dyn Write,
    progress: &'a mut dyn FnMut(StepStart<'_>),
    steps: usize,
    exe: PathBuf,
    dir: PathBuf,
    step: usize,
    failures: Vec<String>,
    /// The machine has a core PMU: `tma stat` records snapshots of its trees, which the
    /// diff-and-report step compares.
    trees: bool,
}

/// A step's command line as shown to the user: `$ tma ARGS`, shell-quoted.
fn show(args: &[String]) -> String {
    let mut words = vec!["tma".to_string()];
    words.extend(args.iter().cloned());
    format!("$ {}", tma_render::shell_words(&words))
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Demo<'_> {
    fn heading(&mut self, title: &str) -> io::Result<()> {
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

    fn say(&mut self, text: &str) -> io::Result<()> {
        for line in text.lines() {
            writeln!(self.out, "  {line}")?;
        }
        Ok(())
    }

    /// Run `tma ARGS` with the terminal as its stdout/stderr.
    fn run(&mut self, args: &[String]) -> io::Result<Outcome> {
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

    fn report_path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Measure a workload under `tma stat`; if stat fails or the report is missing, run the
    /// workload alone so the comparison still has its figures.
    fn measure(
        &mut self,
        workload: &[String],
        report: &Path,
    ) -> io::Result<Option<WorkloadReport>> {
        self.measure_with(&[], workload, report)
    }

    /// [`Demo::measure`] with options of `tma stat` (`--itt`).
    fn measure_with(
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
        let mut real = stat.clone();
        stat.extend(strs(&["--", "tma"]));
        stat.extend(wl.iter().cloned());
        // `tma stat -- tma ...` must run this same executable: pass its path, show `tma`.
        real.push("--".into());
        real.push(self.exe.display().to_string());
        real.extend(wl.iter().cloned());
        writeln!(self.out, "{}", show(&stat))?;
        self.out.flush()?;
        let status = wait_step(Command::new(&self.exe).args(&real));
        stop_if_interrupted()?;
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                let why = s
                    .code()
                    .map(|c| format!("exit status {c}"))
                    .unwrap_or_else(|| s.to_string());
                writeln!(self.out, "  -> `tma stat` failed ({why}); continuing")?;
                self.failures.push(format!("{}: {why}", show(&stat)));
            }
            Err(e) => {
                writeln!(self.out, "  -> cannot start tma stat: {e}; continuing")?;
                self.failures.push(format!("{}: {e}", show(&stat)));
            }
        }
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
    fn diff_and_report(
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

    fn locate(&mut self, workload: &[String], what: &str) -> io::Result<()> {
        self.locate_with(&[], workload, what)
    }

    /// `tma locate OPTS -- tma WORKLOAD --no-calibrate`.
    fn locate_with(&mut self, opts: &[String], workload: &[String], what: &str) -> io::Result<()> {
        // Without the core-clock calibration: its add chain would show up among the samples.
        let mut workload = workload.to_vec();
        workload.push("--no-calibrate".into());
        let mut real = strs(&["locate"]);
        real.extend(opts.iter().cloned());
        real.push("--".into());
        real.push(self.exe.display().to_string());
        real.extend(workload.iter().cloned());
        let mut shown = strs(&["locate"]);
        shown.extend(opts.iter().cloned());
        shown.extend(strs(&["--", "tma"]));
        shown.extend(workload.iter().cloned());
        writeln!(self.out, "{}", show(&shown))?;
        self.out.flush()?;
        let status = wait_step(Command::new(&self.exe).args(&real));
        stop_if_interrupted()?;
        match status {
            Ok(s) if s.success() => {
                self.say(&format!("Expected: {what}"))?;
            }
            Ok(s) => {
                let why = s
                    .code()
                    .map(|c| format!("exit status {c}"))
                    .unwrap_or_else(|| s.to_string());
                writeln!(self.out, "  -> `tma locate` failed ({why}); continuing")?;
                self.say(&format!("What it would show: {what}"))?;
                self.failures.push(format!("{}: {why}", show(&shown)));
            }
            Err(e) => {
                writeln!(self.out, "  -> cannot start tma locate: {e}; continuing")?;
                self.failures.push(format!("{}: {e}", show(&shown)));
            }
        }
        Ok(())
    }
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
fn read_report(path: &Path) -> Option<WorkloadReport> {
    let bytes = std::fs::read(path).ok()?;
    if tma_render::recognize(&bytes).schema() != Some(WORKLOAD_SCHEMA) {
        return None;
    }
    WorkloadReport::read(&bytes).ok()
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_f64()
}

/// The lower bounds in a `tma bench --preset sha --json` document.
fn sha_bounds(v: &Value) -> Option<Bounds> {
    let b = v.pointer("/sha/bounds")?;
    let term = |t: &Value| {
        Some(Term {
            name: t.get("name")?.as_str()?.to_string(),
            cycles: t.get("cycles")?.as_f64()?,
        })
    };
    let terms = b
        .get("terms")?
        .as_array()?
        .iter()
        .map(term)
        .collect::<Option<Vec<_>>>()?;
    let beaten = match b.get("beaten").and_then(Value::as_array) {
        None => Vec::new(),
        Some(a) => a
            .iter()
            .map(|x| {
                Some(Beaten {
                    term: term(x.get("term")?)?,
                    by: x.get("by")?.as_str()?.to_string(),
                    measured: x.get("measured")?.as_f64()?,
                })
            })
            .collect::<Option<Vec<_>>>()?,
    };
    Some(Bounds {
        terms,
        one_stream: f(b, &["one_stream_cycles_per_block"])?,
        beaten,
    })
}

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "n/a".into())
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
            Case::Sha256 => demo_sha(demo, cfg)?,
            Case::Dram => demo_dram(demo, cfg)?,
            Case::Thp => demo_thp(demo, cfg)?,
            Case::Onednn => demo_onednn(demo, cfg)?,
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

fn demo_sha(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
    let (size, iters) = if args.quick {
        ("256K", "8")
    } else {
        ("1M", "512")
    };
    let wl = |imp: &str, streams: &str| {
        strs(&[
            "workload",
            "sha256",
            "--impl",
            imp,
            "--size",
            size,
            "--iters",
            iters,
            "--streams",
            streams,
        ])
    };
    writeln!(
        demo.out,
        "== tma demo sha256: portable SHA-256 vs the SHA-NI instructions =="
    )?;
    let ni = tma_workloads::sha256::Sha256Impl::Ni.is_available();
    demo.say(&format!(
        "The workload hashes {size}-byte buffers {iters} times. This CPU {} the SHA extensions.",
        if ni { "has" } else { "lacks" }
    ))?;

    demo.heading("measure the portable implementation")?;
    demo.say(
        "TMA level 1 splits the pipeline slots into Frontend/Bad speculation/Backend/Retiring.\n\
         Portable SHA-256 is about 3000 scalar ALU instructions per 64-byte block: expect\n\
         Retiring to dominate, i.e. the code is fast at doing too much work. Without a PMU\n\
         `tma stat` says so and shows the software counts it can still take.",
    )?;
    let before = demo.measure(&wl("portable", "1"), &demo.report_path("sha-portable.json"))?;

    if args.locate {
        demo.heading("locate the hot code")?;
        demo.locate(
            &wl("portable", "1"),
            "nearly all samples in the portable compression function \
             (tma_workloads::sha256::bmi2::compress_bmi2 where the CPU has BMI2, else \
             tma_workloads::sha256::portable::sha256_compress_portable), spread over the \
             rotate/xor/add round instructions.",
        )?;
    }

    demo.heading("apply the fix: SHA-NI (two rounds per SHA256RNDS2), measure again")?;
    let after = if ni {
        demo.measure(&wl("ni", "1"), &demo.report_path("sha-ni.json"))?
    } else {
        demo.say("skipped: this CPU lacks SHA-NI (CPUID flag `sha`)")?;
        None
    };

    demo.heading("interleave independent streams (4 buffers at once)")?;
    demo.say(
        "One stream waits on the SHA256RNDS2 latency chain (32 dependent instructions per block);\n\
         independent streams fill those waits, towards the instruction's throughput.",
    )?;
    let inter = if ni {
        let wl4 = wl("ni", "4");
        let report = demo.report_path("sha-ni-x4.json");
        let _ = std::fs::remove_file(&report);
        let mut a = wl4.clone();
        a.push("--report".into());
        a.push(report.display().to_string());
        demo.run(&a)?;
        read_report(&report)
    } else {
        demo.say("skipped: this CPU lacks SHA-NI")?;
        None
    };

    let mut bounds: Option<Bounds> = None;
    if args.bench {
        demo.heading("the instruction-level bound: measure the SHA-NI instructions")?;
        let out = demo.report_path("bench-sha.json");
        let _ = std::fs::remove_file(&out);
        let mut b = strs(&["bench", "--preset", "sha", "--json", "-o"]);
        b.push(out.display().to_string());
        if let Outcome::Ok = demo.run(&b)? {
            let v = std::fs::read(&out)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            match v.as_ref().and_then(sha_bounds) {
                Some(bd) => {
                    let v = v.as_ref();
                    let at = |p: &str| v.and_then(|v| v.pointer(p));
                    demo.say(&format!(
                        "lower-bound terms: the latency chain of one stream (K streams: it / K), and the\n\
                         throughput of the block's instruction mix, its instructions measured alone and in mixed\n\
                         pairs; the bound of each kernel is the largest term its own figure does not beat (under\n\
                         \"compare\"){}",
                        if args.verbose { "" } else { "; -v prints the derivation" }
                    ))?;
                    if let Some(r) = at("/sha/bounds/reference").filter(|r| !r.is_null()) {
                        let c = f(r, &["cycles"]).unwrap_or(f64::NAN);
                        demo.say(&format!(
                            "reference, not a bound: a straightforward schedule of this mix ({}) runs at {:.2} cycles/byte",
                            r.get("name").and_then(Value::as_str).unwrap_or("?"),
                            c / 64.0
                        ))?;
                    }
                    if args.verbose {
                        let lines = at("/sha/bounds/derivation")
                            .and_then(Value::as_array)
                            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
                            .unwrap_or_default();
                        // Its bound line is the bench's alone; the bound after the kernels is
                        // printed under "compare".
                        writeln!(demo.out, "derivation of the terms:")?;
                        for l in lines
                            .iter()
                            .filter(|l| !l.starts_with("interleaved bound:"))
                        {
                            writeln!(demo.out, "  {l}")?;
                        }
                    }
                    let unconfirmed = at("/sha/unconfirmed")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    if unconfirmed > 0 {
                        demo.say(&format!(
                            "the bound is unconfirmed: {unconfirmed} of its measured inputs did not converge (a noisy host);\n\
                             the \"of bound\" column is left out rather than shown against a bound that is likely too high"
                        ))?;
                    } else {
                        bounds = Some(bd);
                    }
                }
                None => demo.say("could not read the bounds from the bench report")?,
            }
        }
    }

    demo.heading("compare")?;
    fn sha(v: Option<&WorkloadReport>) -> Option<&tma_workloads::workload::ShaReport> {
        v.and_then(|v| v.sha256.as_ref())
    }
    // The kernels against the bound of their stream count; a term one of them beats was no
    // lower bound, and is said so instead of a share over 100%.
    let kernels: Vec<(usize, Kernel)> = [(1, 1u32, after.as_ref()), (2, 4, inter.as_ref())]
        .into_iter()
        .filter_map(|(row, streams, v)| {
            let c = sha(v)?.cycles_per_byte?;
            Some((
                row,
                Kernel {
                    name: format!(
                        "the SHA-NI kernel, {streams} stream{}",
                        if streams == 1 { "" } else { "s" }
                    ),
                    streams,
                    cycles_per_block: 64.0 * c,
                },
            ))
        })
        .collect();
    let judged = bounds.as_ref().map(|b| {
        judge(
            b,
            &kernels.iter().map(|(_, k)| k.clone()).collect::<Vec<_>>(),
        )
    });
    let bound_of = |row: usize| -> Option<&BoundShare> {
        let i = kernels.iter().position(|(r, _)| *r == row)?;
        judged.as_ref().map(|j| &j.kernels[i])
    };
    let rows: Vec<(&str, Option<&WorkloadReport>, Option<&BoundShare>)> = vec![
        ("portable", before.as_ref(), None),
        ("SHA-NI, 1 stream", after.as_ref(), bound_of(1)),
        ("SHA-NI, 4 streams", inter.as_ref(), bound_of(2)),
    ];
    let base = sha(before.as_ref()).map(|s| s.ns_per_byte);
    let mut t = tma_render::table(&[
        "variant",
        "ns/byte",
        "GB/s",
        "cycles/byte",
        "speedup",
        "bound c/B",
        "of bound",
    ]);
    for (name, v, bound) in &rows {
        let nspb = sha(*v).map(|s| s.ns_per_byte);
        let cpb = sha(*v).and_then(|s| s.cycles_per_byte);
        let speed = match (base, nspb) {
            (Some(b), Some(n)) if n > 0.0 => Some(b / n),
            _ => None,
        };
        let bound_cpb = bound
            .and_then(|b| b.bound.as_ref())
            .map(|t| t.cycles / 64.0);
        let of_bound = bound.and_then(|b| b.share).map(|s| 100.0 * s);
        t.add_row(vec![
            name.to_string(),
            fmt_opt(nspb, 3),
            fmt_opt(sha(*v).map(|s| s.gb_per_second), 3),
            fmt_opt(cpb, 2),
            speed
                .map(|s| format!("{s:.2}x"))
                .unwrap_or_else(|| "n/a".into()),
            fmt_opt(bound_cpb, 2),
            of_bound
                .map(|p| format!("{p:.0}%"))
                .unwrap_or_else(|| "n/a".into()),
        ]);
    }
    tma_render::align_right(&mut t, &[1, 2, 3, 4, 5, 6]);
    writeln!(
        demo.out,
        "Before/after (CPU time of the timed region; cycles from the core-clock calibration):"
    )?;
    writeln!(demo.out, "{t}")?;
    if let (Some(b), Some(n)) = (base, sha(after.as_ref()).map(|s| s.ns_per_byte)) {
        writeln!(demo.out, "speedup: {:.2}x (SHA-NI over portable)", b / n)?;
    }
    if let (Some(j), Some(b)) = (&judged, &bounds) {
        let chain_held = !j
            .beaten
            .iter()
            .any(|x| x.term.name.starts_with("the latency chain"));
        writeln!(
            demo.out,
            "lower bounds: one stream {}, interleaved {}",
            if chain_held {
                format!("{:.2} cycles/byte (latency chain)", b.one_stream / 64.0)
            } else {
                "n/a (the latency chain was beaten)".into()
            },
            j.interleaved()
                .map_or("n/a (every term was beaten)".into(), |t| format!(
                    "{:.2} cycles/byte (bound by {})",
                    t.cycles / 64.0,
                    t.name
                ))
        )?;
        for k in &j.kernels {
            if let Some(t) = &k.bound {
                writeln!(demo.out, "{}: bound by {}", k.kernel.name, t.name)?;
            }
        }
        for b in &j.beaten {
            writeln!(demo.out, "NOT A LOWER BOUND: {}", b.message())?;
        }
    }
    if bounds.is_none() {
        writeln!(
            demo.out,
            "(no instruction-level bound: the `tma bench --preset sha` step did not give one)"
        )?;
    }
    demo.diff_and_report(
        &demo.report_path("sha-portable.json"),
        &demo.report_path("sha-ni.json"),
        "sha256",
        args.keep_dir,
    )
}

fn demo_dram(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
    let (size, accesses) = if args.quick {
        ("128M", "1000000")
    } else {
        ("512M", "20000000")
    };
    let wl = |prefetch: bool| {
        let mut v = strs(&["workload", "dram", "--size", size, "--accesses", accesses]);
        if prefetch {
            v.push("--prefetch".into());
        }
        v
    };
    writeln!(
        demo.out,
        "== tma demo dram: a dependent pointer chase through {size}, then with a prefetch =="
    )?;
    demo.say(
        "Each load's address comes from the previous load, through a random cycle over a buffer\n\
         far larger than the last-level cache: one DRAM round trip per step, no prefetcher can\n\
         guess the next address.",
    )?;
    demo.heading("measure the chase")?;
    demo.say(
        "Expected TMA: Backend_Bound > Memory_Bound > DRAM_Bound (latency, not bandwidth). Without\n\
         a PMU `tma stat` says so and shows the software counts.",
    )?;
    let before = demo.measure(&wl(false), &demo.report_path("dram.json"))?;
    if args.locate {
        demo.heading("locate the hot code")?;
        demo.locate(
            &wl(false),
            "the samples land in tma_workloads::dram::chase, on the load of `node.next` (or the \
             instruction after it: timer samples can skid), the load every step waits for. The \
             chain set-up (DramChain::build) also shows, since it runs before the timed loop.",
        )?;
    }
    demo.heading("apply the fix: jump-pointer prefetch 16 steps ahead, measure again")?;
    demo.say(
        "Each node also stores the node 16 steps further on; prefetching it keeps up to 16\n\
         misses in flight, so a step costs about latency/16 until other limits take over.",
    )?;
    let after = demo.measure(&wl(true), &demo.report_path("dram-prefetch.json"))?;

    demo.heading("compare")?;
    fn dram(v: Option<&WorkloadReport>) -> Option<&tma_workloads::workload::DramReport> {
        v.and_then(|v| v.dram.as_ref())
    }
    let base = dram(before.as_ref()).map(|d| d.ns_per_access);
    let mut t = tma_render::table(&[
        "variant",
        "ns/access",
        "accesses/s",
        "cycles/access",
        "speedup",
    ]);
    for (name, v) in [
        ("no prefetch", before.as_ref()),
        ("prefetch", after.as_ref()),
    ] {
        let ns = dram(v).map(|d| d.ns_per_access);
        let speed = match (base, ns) {
            (Some(b), Some(n)) if n > 0.0 => Some(b / n),
            _ => None,
        };
        t.add_row(vec![
            name.to_string(),
            fmt_opt(ns, 2),
            fmt_opt(dram(v).map(|d| d.accesses_per_second), 0),
            fmt_opt(dram(v).and_then(|d| d.cycles_per_access), 1),
            speed
                .map(|s| format!("{s:.2}x"))
                .unwrap_or_else(|| "n/a".into()),
        ]);
    }
    tma_render::align_right(&mut t, &[1, 2, 3, 4]);
    writeln!(
        demo.out,
        "Before/after (CPU time of the timed region; cycles from the core-clock calibration):"
    )?;
    writeln!(demo.out, "{t}")?;
    if let (Some(b), Some(n)) = (base, dram(after.as_ref()).map(|d| d.ns_per_access)) {
        writeln!(
            demo.out,
            "speedup: {:.2}x (prefetch over no prefetch)",
            b / n
        )?;
    }
    demo.diff_and_report(
        &demo.report_path("dram.json"),
        &demo.report_path("dram-prefetch.json"),
        "dram",
        args.keep_dir,
    )
}

/// The system THP mode as the demos print it.
fn thp_mode_text<E: std::fmt::Display>(mode: &Result<tma_host::ThpMode, E>) -> String {
    match mode {
        Ok(m) => m.to_string(),
        Err(e) => format!("unknown ({e})"),
    }
}

/// Where THP is off (or its mode unknown), say that `--thp on` cannot gain here, and that
/// `who` so.
fn warn_if_thp_off<E>(
    demo: &mut Demo<'_>,
    mode: &Result<tma_host::ThpMode, E>,
    who: &str,
) -> io::Result<()> {
    if matches!(mode, Ok(tma_host::ThpMode::Never)) || mode.is_err() {
        demo.say(&format!(
            "THP is off on this machine, so `--thp on` cannot get huge pages: the comparison\n\
             below will show no gain, and {who} so."
        ))?;
    }
    Ok(())
}

fn demo_thp(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
    // 64 (or 16) rows of A against the full 4096x1000 weight matrix of the case: every row
    // walks all 1000 columns, 4096 pages per column, so the page walks dominate without huge
    // pages while a run stays around a second.
    let m = if args.quick { "16" } else { "64" };
    let wl = |thp: &str| strs(&["workload", "matmul", "--m", m, "--thp", thp]);
    let pmu = !tma_host::sysfs::core_pmu_types(&args.host.sys).is_empty();
    let intel = args
        .host
        .cpuinfo()
        .is_ok_and(|c| c.vendor.as_deref() == Some("GenuineIntel"));
    let mode = args.host.thp_mode();
    writeln!(
        demo.out,
        "== tma demo thp: a reference matmul without and with transparent huge pages =="
    )?;
    demo.say(&format!(
        "C = A x B with A {m}x4096 and the weight matrix B 4096x1000 (f32), each output one dot\n\
         product down a column of B: 4000 bytes between loads, so every load is on a new 4 KiB\n\
         page and a column spans 4096 pages, more than the TLBs hold. With 2 MiB pages all of B\n\
         (16 MiB) needs 8 TLB entries. System THP mode: {}.",
        thp_mode_text(&mode)
    ))?;
    warn_if_thp_off(demo, &mode, "the workload says")?;

    demo.heading("measure with 4 KiB pages (--thp off: MADV_NOHUGEPAGE)")?;
    demo.say(if pmu {
        "Expected TMA: Backend_Bound > Memory_Bound > L1_Bound > DTLB_Load, with Load_STLB_Miss\n\
         under it: the loads wait for page walks, not for DRAM."
    } else {
        "Expected TMA: Backend_Bound > Memory_Bound > L1_Bound > DTLB_Load (Load_STLB_Miss). Without\n\
         a PMU `tma stat` says so and shows the software counts: note the page faults, one per\n\
         4 KiB page touched."
    })?;
    let before = demo.measure(&wl("off"), &demo.report_path("matmul-thp-off.json"))?;

    if args.locate {
        demo.heading("locate the hot loop")?;
        let (opts, what) = if pmu && intel {
            (
                strs(&["--node", "DTLB_Load"]),
                "the DTLB_Load node's locate-with event lands in tma_workloads::matmul::matmul_ref, \
                 on the load of B[p] (the column walk), the load that misses the TLB.",
            )
        } else {
            (
                strs(&["-e", "cpu-clock"]),
                "nearly all samples in tma_workloads::matmul::matmul_ref, on the load of B[p] \
                 and the add that waits for it (timer samples skid to the next instructions); \
                 cpu-clock shows where the time goes, not why: the page walks are only seen \
                 as the gain in the next step.",
            )
        };
        demo.locate_with(&opts, &wl("off"), what)?;
    }

    demo.heading("apply the fix: huge pages (--thp on: MADV_HUGEPAGE), measure again")?;
    demo.say(
        "The same buffers, 2 MiB-aligned, advised MADV_HUGEPAGE before their first touch; the\n\
         workload reads back from /proc/self/smaps how much of them the kernel really put on\n\
         huge pages.",
    )?;
    let after = demo.measure(&wl("on"), &demo.report_path("matmul-thp-on.json"))?;

    demo.heading("compare")?;
    let secs = |v: Option<&WorkloadReport>| v.map(|v| v.seconds);
    let base = secs(before.as_ref());
    let mut t = tma_render::table(&[
        "variant",
        "seconds",
        "GFLOP/s",
        "cycles/FMA",
        "on huge pages",
        "speedup",
    ]);
    fn mm(v: Option<&WorkloadReport>) -> Option<&tma_workloads::workload::MatmulReport> {
        v.and_then(|v| v.matmul.as_ref())
    }
    for (name, v) in [("--thp off", before.as_ref()), ("--thp on", after.as_ref())] {
        let s = secs(v);
        let speed = match (base, s) {
            (Some(b), Some(n)) if n > 0.0 => Some(b / n),
            _ => None,
        };
        t.add_row(vec![
            name.to_string(),
            fmt_opt(s, 3),
            fmt_opt(mm(v).map(|m| m.run.gflops), 3),
            fmt_opt(mm(v).and_then(|m| m.cycles_per_fma), 1),
            mm(v)
                .and_then(|m| m.run.huge_pages.as_ref())
                .map(|h| h.share)
                .map(|x| format!("{:.0}%", x * 100.0))
                .unwrap_or_else(|| "n/a".into()),
            speed
                .map(|s| format!("{s:.2}x"))
                .unwrap_or_else(|| "n/a".into()),
        ]);
    }
    tma_render::align_right(&mut t, &[1, 2, 3, 4, 5]);
    writeln!(
        demo.out,
        "Before/after (CPU time of the timed region; huge pages from /proc/self/smaps):"
    )?;
    writeln!(demo.out, "{t}")?;
    for v in [before.as_ref(), after.as_ref()].into_iter().flatten() {
        if let Some(note) = v.matmul.as_ref().and_then(|m| m.run.note.as_deref()) {
            writeln!(demo.out, "note: {note}")?;
        }
    }
    if let (Some(b), Some(n)) = (base, secs(after.as_ref())) {
        writeln!(
            demo.out,
            "speedup: {:.2}x (huge pages over 4 KiB pages)",
            b / n
        )?;
    }
    if pmu {
        demo.say(
            "In the two `tma stat` trees above, DTLB_Load and Load_STLB_Miss shrink from the\n\
             --thp off run to the --thp on run: the time saved is the page walks.",
        )?;
    } else {
        demo.say(
            "This machine has no PMU, so the demo can only show time (and the page faults in the\n\
             software counts): with one, `tma stat` shows the DTLB nodes (DTLB_Load,\n\
             Load_STLB_Miss) falling from the --thp off run to the --thp on run.",
        )?;
    }
    Ok(())
}

/// One row of the onednn case's comparison: a variant and its report.
struct OnednnRow<'a> {
    name: &'static str,
    report: Option<&'a WorkloadReport>,
    /// The report of the same code with 4 KiB pages (the speed-up's base).
    base: Option<&'a WorkloadReport>,
}

/// Huge-page share and page faults of a report, whichever workload wrote it.
fn backing_of(v: &WorkloadReport) -> (Option<f64>, Option<u64>) {
    if let Some(o) = &v.onednn {
        let share = o.run.huge_pages.as_ref().map(|h| h.share);
        return (share, Some(o.run.setup_page_faults));
    }
    if let Some(m) = &v.matmul {
        return (m.run.huge_pages.as_ref().map(|h| h.share), None);
    }
    (None, None)
}

fn demo_onednn(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
    // oneDNN: the seeds' shape (1024x4096 by 4096x1000), a few executes; quick: a quarter of
    // the rows. The reference: 64 (16) rows of A against the same weights, as in `demo thp`.
    let (m, reps) = if args.quick {
        ("256", "3")
    } else {
        ("1024", "5")
    };
    let m_ref = if args.quick { "16" } else { "64" };
    let dnnl = args.dnnl.as_ref().map(|p| p.display().to_string());
    let onednn = |thp: &str| {
        let mut v = strs(&["workload", "onednn", "--m", m, "--reps", reps, "--thp", thp]);
        if let Some(d) = &dnnl {
            v.push("--dnnl".into());
            v.push(d.clone());
        }
        v
    };
    let reference = |thp: &str| strs(&["workload", "matmul", "--m", m_ref, "--thp", thp]);
    let pmu = demo.trees;
    let mode = args.host.thp_mode();
    writeln!(
        demo.out,
        "== tma demo onednn: oneDNN's matmul primitive and tma's reference matmul, without and with huge pages =="
    )?;
    demo.say(&format!(
        "The investigation behind this case: a oneDNN f32 matmul (1024x4096 by 4096x1000) ran\n\
         slower in a guest without transparent huge pages. The slow code was benchdnn's\n\
         *reference* matmul, which reads the weights down their columns (4000 bytes apart: a new\n\
         4 KiB page at every load), as `tma workload matmul` does. oneDNN's optimised primitive\n\
         packs the weights into blocks and reads them nearly in order, so it depends much less on\n\
         the page size. Both run here, each with --thp off and --thp on, on buffers tma maps and\n\
         advises itself (handed to oneDNN as user memory). System THP mode: {}.",
        thp_mode_text(&mode)
    ))?;
    warn_if_thp_off(demo, &mode, "the workloads say")?;
    let itt = strs(&["--itt"]);

    demo.heading("oneDNN's primitive with 4 KiB pages (--thp off), its executions as ITT regions")?;
    demo.say(
        "oneDNN marks each execution of a primitive as an ITT task named by its kind (domain\n\
         dnnl::primitive::execute). `tma stat --itt` loads tma's ITT collector into the program,\n\
         so each task becomes a region, with no change to oneDNN: look for the `matmul` region.\n\
         Each thread that names a task has its own regions (an OpenMP build names the task on\n\
         every thread of its team; a SYCL build, on the calling thread, its TBB workers naming\n\
         TBB's own tasks); the tree shows them per thread and merged.",
    )?;
    if !pmu {
        demo.say(
            "This machine has no PMU: the regions and the program carry software counts\n\
             (task-clock, page faults, context switches); the TMA tree per region needs a PMU.",
        )?;
    }
    let dnnl_off = demo.measure_with(
        &itt,
        &onednn("off"),
        &demo.report_path("onednn-thp-off.json"),
    )?;
    if dnnl_off.is_none() {
        demo.say(
            "No oneDNN run: the workload said why above. Install oneDNN (`apt-get install\n\
             libdnnl2`, or the PyPI `onednn` wheel and `--dnnl VENV/lib/libdnnl.so.3`) to see the\n\
             real library; the reference matmul below runs anyway.",
        )?;
    }

    demo.heading("oneDNN's primitive with huge pages (--thp on)")?;
    let dnnl_on =
        demo.measure_with(&itt, &onednn("on"), &demo.report_path("onednn-thp-on.json"))?;

    demo.heading("tma's reference matmul with 4 KiB pages (--thp off)")?;
    demo.say(&format!(
        "The loop benchdnn's reference runs: {m_ref} rows of A against the same 4096x1000 weights,\n\
         every load of B on a new page."
    ))?;
    let ref_off = demo.measure(&reference("off"), &demo.report_path("matmul-thp-off.json"))?;

    demo.heading("tma's reference matmul with huge pages (--thp on)")?;
    let ref_on = demo.measure(&reference("on"), &demo.report_path("matmul-thp-on.json"))?;

    demo.heading("compare")?;
    let rows = [
        OnednnRow {
            name: "oneDNN --thp off",
            report: dnnl_off.as_ref(),
            base: dnnl_off.as_ref(),
        },
        OnednnRow {
            name: "oneDNN --thp on",
            report: dnnl_on.as_ref(),
            base: dnnl_off.as_ref(),
        },
        OnednnRow {
            name: "reference --thp off",
            report: ref_off.as_ref(),
            base: ref_off.as_ref(),
        },
        OnednnRow {
            name: "reference --thp on",
            report: ref_on.as_ref(),
            base: ref_off.as_ref(),
        },
    ];
    let mut t = tma_render::table(&[
        "variant",
        "CPU s",
        "wall s",
        "GFLOP/s",
        "on huge pages",
        "faults (touch)",
        "speed-up",
    ]);
    let speedup = |r: &OnednnRow<'_>| match (r.base, r.report) {
        (Some(b), Some(n)) if n.seconds > 0.0 => Some(b.seconds / n.seconds),
        _ => None,
    };
    for r in &rows {
        let (share, faults) = r.report.map(backing_of).unwrap_or((None, None));
        let gflops = r.report.and_then(|v| {
            v.onednn
                .as_ref()
                .map(|o| o.run.gflops)
                .or(v.matmul.as_ref().map(|m| m.run.gflops))
        });
        t.add_row(vec![
            r.name.to_string(),
            fmt_opt(r.report.map(|v| v.seconds), 3),
            fmt_opt(r.report.map(|v| v.wall_seconds), 3),
            fmt_opt(gflops, 2),
            share
                .map(|x| format!("{:.0}%", x * 100.0))
                .unwrap_or_else(|| "n/a".into()),
            faults
                .map(|f| f.to_string())
                .unwrap_or_else(|| "n/a".into()),
            speedup(r)
                .map(|s| format!("{s:.2}x"))
                .unwrap_or_else(|| "n/a".into()),
        ]);
    }
    tma_render::align_right(&mut t, &[1, 2, 3, 4, 5, 6]);
    writeln!(
        demo.out,
        "Each code with 4 KiB pages and with huge pages (CPU s: the process's CPU time over the\n\
         timed part, all threads; oneDNN's GFLOP/s over the wall clock with its threads, the\n\
         reference's over its one thread's CPU time; faults: minor page faults while the\n\
         buffers were first touched; speed-up: CPU time with 4 KiB pages over this row's):"
    )?;
    writeln!(demo.out, "{t}")?;
    writeln!(
        demo.out,
        "(The reference's page faults: `page-faults` in its `tma stat` counts above, the whole run.)"
    )?;
    for (name, v) in rows.iter().filter_map(|r| Some((r.name, r.report?))) {
        let note = v
            .onednn
            .as_ref()
            .and_then(|o| o.run.note.as_deref())
            .or(v.matmul.as_ref().and_then(|m| m.run.note.as_deref()));
        if let Some(note) = note {
            writeln!(demo.out, "note ({name}): {note}")?;
        }
    }
    if let Some(lib) = dnnl_off.as_ref().and_then(|v| v.onednn.as_ref()) {
        writeln!(
            demo.out,
            "oneDNN: {} ({}, {} runtime), implementation {}",
            lib.run.library.version,
            lib.run.library.path,
            lib.run.library.cpu_runtime,
            lib.run.implementation.as_deref().unwrap_or("not reported")
        )?;
    }
    let (sd, sr) = (speedup(&rows[1]), speedup(&rows[3]));
    match (sd, sr) {
        (Some(d), Some(r)) => writeln!(
            demo.out,
            "huge pages: oneDNN's primitive {d:.2}x, the reference matmul {r:.2}x. The page size\n\
             matters where the loads jump a page at a time (the reference, which the\n\
             investigation measured); the blocked primitive reads its packed weights in order."
        )?,
        (None, Some(r)) => writeln!(
            demo.out,
            "huge pages: the reference matmul {r:.2}x (no oneDNN figures to compare)."
        )?,
        (Some(d), None) => writeln!(
            demo.out,
            "huge pages: oneDNN's primitive {d:.2}x (no reference figures to compare)."
        )?,
        (None, None) => {}
    }
    if pmu {
        demo.say(
            "In the `tma stat` trees above, DTLB_Load and Load_STLB_Miss fall from --thp off to\n\
             --thp on for the reference matmul, and much less for oneDNN's primitive.",
        )?;
    } else {
        demo.say(
            "What this machine cannot show: it has no PMU, so there are no TMA trees and no dTLB\n\
             miss or page-walk counts, per region or at all. What it can show: the time, the\n\
             huge-page share of the buffers (smaps) and the page faults (one per 4 KiB page, or\n\
             one per 2 MiB page with huge pages). With a PMU, `tma stat --itt` gives the\n\
             `matmul` region its own tree, with the DTLB nodes.",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds read from a `tma bench --preset sha --json` document, with a term the bench
    /// found beaten, and a kernel of the demo that beats another: both said, no share over 100%.
    #[test]
    fn sha_bounds_read_from_the_bench_document() {
        let v: Value = serde_json::from_str(
            r#"{"sha": {"bounds": {
                "one_stream_cycles_per_block": 128.0,
                "interleaved_cycles_per_block": 36.8,
                "terms": [{"name": "sha256rnds2 alone", "cycles": 32.0, "formula": "32 x 1.000"},
                          {"name": "sha256rnds2's pipe", "cycles": 36.8, "formula": "32.0 + ..."}],
                "beaten": [{"term": {"name": "vector issue", "cycles": 60.0, "formula": "..."},
                            "by": "the block mix measured as one body", "measured": 57.4}],
                "reference": {"name": "the block mix measured as one body", "cycles": 57.4,
                              "formula": "..."}}}}"#,
        )
        .unwrap();
        let b = sha_bounds(&v).unwrap();
        assert_eq!(b.one_stream, 128.0);
        assert_eq!(b.terms.len(), 2);
        assert_eq!(b.beaten[0].term.name, "vector issue");
        let k = |streams, c| Kernel {
            name: format!("{streams}"),
            streams,
            cycles_per_block: c,
        };
        let j = judge(&b, &[k(1, 130.0), k(4, 34.0)]);
        assert_eq!(j.beaten.len(), 2);
        assert_eq!(j.beaten[1].term.name, "sha256rnds2's pipe");
        assert_eq!(j.interleaved().unwrap().name, "sha256rnds2 alone");
        assert!(j.kernels.iter().all(|k| k.share.unwrap() <= 1.0));
        // An older document without `beaten` reads too.
        let mut old = v.clone();
        old["sha"]["bounds"]
            .as_object_mut()
            .unwrap()
            .remove("beaten");
        assert!(sha_bounds(&old).unwrap().beaten.is_empty());
    }

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

    #[test]
    fn failing_steps_are_reported_and_the_walkthrough_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let reports = dir.path().join("reports");
        let cfg = DemoConfig {
            exe: dir.path().join("no-such-tma"),
            cases: vec![Case::Dram, Case::Thp],
            quick: true,
            dir: reports.clone(),
            keep_dir: false,
            locate: true,
            bench: true,
            debug_build: false,
            verbose: false,
            host: Host::system(),
            dnnl: None,
        };
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
                let cfg = DemoConfig {
                    exe: dir.path().join("no-such-tma"),
                    cases: cases.clone(),
                    quick: true,
                    dir: dir.path().join("reports"),
                    keep_dir: false,
                    locate,
                    bench,
                    debug_build: false,
                    verbose: false,
                    host: Host::system(),
                    dnnl: None,
                };
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
