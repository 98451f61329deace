//! `tma kvm`: count KVM VM exits by reason (like `perf kvm stat`), plus the exits that reach
//! the VMM. Samples every kvm tracepoint with sample_period=1 from per-CPU ring buffers.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use tma_kvm::{KvmReport, RenderOptions, SessionConfig, Target};

/// Count KVM VM exits by reason (VMX / SVM / TDX names), rates and handling times.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exactly one target: -a (all VMs), -p PID (one VMM) or -- CMD (launch it).\n\
Needs root (or CAP_PERFMON plus read access to tracefs). tracefs is mounted when absent and \
unmounted again at the end."
)]
pub struct Args {
    /// Measure the VMM process PID (all its vCPU threads).
    #[arg(short = 'p', long = "pid", value_name = "VMM_PID")]
    pub pid: Option<u32>,
    /// Measure every VM on this host.
    #[arg(short = 'a', long = "all-cpus")]
    pub all: bool,
    /// Stop after this many seconds (default: when CMD exits, or at Ctrl-C).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Also print a report every MS milliseconds.
    #[arg(short = 'I', long = "interval", value_name = "MS")]
    pub interval: Option<u64>,
    /// Add the per-vCPU breakdown.
    #[arg(long)]
    pub per_vcpu: bool,
    /// Print JSON (schema tma.kvm, version 1).
    #[arg(long)]
    pub json: bool,
    /// Write the report to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Ring buffer data pages per CPU (power of two).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub mmap_pages: usize,
    /// Command to launch and measure (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    report: &'a KvmReport,
    intervals: &'a [KvmReport],
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let targets = args.pid.is_some() as u8 + args.all as u8 + !args.command.is_empty() as u8;
    if targets != 1 {
        bail!("give exactly one target: -a (all VMs), -p VMM_PID, or -- CMD");
    }
    if let Some(d) = args.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration must be a positive number of seconds, got {d}");
        }
    }
    if args.interval == Some(0) {
        bail!("-I must be at least 1 ms");
    }
    if !args.mmap_pages.is_power_of_two() {
        bail!(
            "--mmap-pages must be a power of two, got {}",
            args.mmap_pages
        );
    }
    let target = match (args.pid, args.all) {
        (Some(p), _) => Target::Pid(p),
        (None, true) => Target::All,
        _ => Target::Command(args.command.clone()),
    };
    let mut cfg = SessionConfig::new(target);
    cfg.duration = args.duration.map(Duration::from_secs_f64);
    cfg.interval = args.interval.map(Duration::from_millis);
    cfg.mmap_pages = args.mmap_pages;
    let opts = RenderOptions {
        per_vcpu: args.per_vcpu,
    };
    let mut intervals = Vec::new();
    let mut n = 0u32;
    let outcome = tma_kvm::run(&cfg, |r| {
        n += 1;
        if args.json {
            intervals.push(r.clone());
        } else {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "# interval {n}");
            let _ = tma_kvm::render(&mut out, r, opts);
            let _ = writeln!(out);
        }
    })
    .context("tma kvm")?;
    let report = outcome.report;
    let render = |w: &mut dyn Write| -> Result<(), tma_report::ReportError> {
        if args.json {
            tma_report::write_json(
                w,
                "tma.kvm",
                1,
                &JsonOut {
                    report: &report,
                    intervals: &intervals,
                },
            )
        } else {
            tma_kvm::render(w, &report, opts)?;
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
    if let Some(st) = outcome.child_status {
        if let Some(code) = st.code() {
            return Ok(ExitCode::from(code.clamp(0, 255) as u8));
        }
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = st.signal() {
            return Ok(ExitCode::from((128 + sig).clamp(0, 255) as u8));
        }
    }
    Ok(ExitCode::SUCCESS)
}
