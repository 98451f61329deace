//! `tma kvm`: count KVM VM exits by reason (like `perf kvm stat`), plus the exits that reach
//! the VMM. Samples every kvm tracepoint with sample_period=1 from per-CPU ring buffers.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use tma_kvm::{render, KvmReport, RenderOptions, SessionConfig, Target};

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
    #[arg(short = 'a', long = "all-cpus", visible_alias = "all")]
    pub all: bool,
    /// Instead of counting exits: is each VMM's guest memory on huge pages? (default: all VMMs)
    #[arg(long, conflicts_with_all = ["duration", "interval", "per_vcpu", "command"])]
    pub memory: bool,
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
    /// Write the report to FILE instead of standard output (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Ring buffer data pages per CPU (power of two).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub mmap_pages: usize,
    /// Command to launch and measure (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
}

pub fn run(args: Args, root: &super::args::RootArg) -> anyhow::Result<ExitCode> {
    crate::output::check(args.output.as_deref(), [])?;
    if args.memory {
        return memory(&args, root);
    }
    let targets = args.pid.is_some() as u8 + args.all as u8 + !args.command.is_empty() as u8;
    if targets != 1 {
        bail!("give exactly one target: -a (all VMs), -p VMM_PID, or -- CMD");
    }
    if let Some(d) = args.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration must be a positive number of seconds, got {d}");
        }
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
    cfg.check()?;
    let opts = RenderOptions {
        per_vcpu: args.per_vcpu,
    };
    let mut intervals: Vec<KvmReport> = Vec::new();
    let mut n = 0u32;
    let outcome = tma_kvm::run(&cfg, |r| {
        n += 1;
        if args.json {
            intervals.push(r.clone());
        } else {
            let _ = render::interval(&mut std::io::stdout().lock(), n, r, opts);
        }
    })
    .context("tma kvm")?;
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            render::json(w, &outcome.report, &intervals)
        } else {
            Ok(tma_kvm::render(w, &outcome.report, opts)?)
        }
    })?;
    Ok(ExitCode::from(
        outcome
            .child_status
            .map_or(0, |st| tma_perf::process::shell_status_of(&st)),
    ))
}

/// `tma kvm --memory [-p PID | -a]`.
fn memory(args: &Args, root: &super::args::RootArg) -> anyhow::Result<ExitCode> {
    use tma_kvm::memory::{MemoryConfig, MemoryTarget};
    if args.pid.is_some() && args.all {
        bail!("give at most one target with --memory: -p VMM_PID or -a (the default)");
    }
    let cfg = MemoryConfig {
        target: args.pid.map_or(MemoryTarget::All, MemoryTarget::Pid),
        host: root.host(),
    };
    let report = tma_kvm::memory::run(&cfg).context("tma kvm --memory")?;
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            render::memory_json(w, &report)
        } else {
            Ok(render::memory(w, &report)?)
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
