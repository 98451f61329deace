//! `tma doctor`: is this machine set up to measure, and what to fix.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use tma_doctor::{Action, CpuidFacts, DoctorConfig, Roots};

/// Check the measurement environment (PMU, paranoid, NMI watchdog, THP, governor, ...).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 no check reports a problem (warnings allowed); 1 a check \
reports a problem (with --fix: after the fixes; with --verify: a known-answer check failed); \
2 tma could not run the checks (bad option, unreadable root, failed fix); 130 / 143 interrupted \
by SIGINT / SIGTERM."
)]
pub struct Args {
    /// Print JSON (schema tma.doctor, version 1).
    #[arg(long)]
    pub json: bool,
    /// Apply the safe fixes (perf_event_paranoid, NMI watchdog, THP, governor), printing each
    /// command; previous values are saved to the --state file first.
    #[arg(long, conflicts_with = "restore")]
    pub fix: bool,
    /// With --fix: print the commands it would run and the values they would replace; change
    /// nothing and write no state file.
    #[arg(long, requires = "fix")]
    pub dry_run: bool,
    /// Where --fix saves the previous values.
    #[arg(long, value_name = "FILE", default_value = "tma-doctor-state.json")]
    pub state: PathBuf,
    /// Undo a previous --fix from its state file.
    #[arg(long, value_name = "FILE")]
    pub restore: Option<PathBuf>,
    /// Known-answer self-test of the counting path: exact instruction/branch counts of JIT
    /// loops, multiplexing, level 1 (with a PMU); software events otherwise. Exit 1 on any
    /// failure.
    #[arg(long, conflicts_with_all = ["fix", "restore"])]
    pub verify: bool,
    /// With --verify: judge counts recorded by --record (on another machine) instead.
    #[arg(
        long,
        value_name = "FILE",
        requires = "verify",
        conflicts_with = "record"
    )]
    pub replay: Option<PathBuf>,
    /// With --verify: also save the measured counts to FILE (for --replay).
    #[arg(long, value_name = "FILE", requires = "verify")]
    pub record: Option<PathBuf>,
    /// Internal (--verify's perf comparison): run the named exact-count loop and exit.
    #[arg(long, value_name = "NAME", hide = true)]
    pub run_loop: Option<String>,
    /// Internal (--verify's level-1 check): run the named known-character kernel and exit.
    #[arg(long, value_name = "NAME", hide = true)]
    pub run_kernel: Option<String>,
    /// Internal: iterations of --run-loop.
    #[arg(long, value_name = "N", hide = true, default_value_t = 1000)]
    pub iters: u64,
    /// Write the report to FILE instead of standard output (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args, root: &crate::cmd::args::RootArg) -> anyhow::Result<ExitCode> {
    if let Some(name) = &args.run_kernel {
        tma_doctor::verify::run_kernel(name)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = &args.run_loop {
        tma_doctor::verify::run_loop(name, args.iters)?;
        return Ok(ExitCode::SUCCESS);
    }
    crate::output::check(
        args.output.as_deref(),
        [("--record", args.record.as_deref().filter(|_| args.verify))],
    )?;
    if args.verify {
        return verify(&args);
    }
    let (roots, cpuid) = match &root.root {
        Some(r) => {
            if !r.join("proc").is_dir() || !r.join("sys").is_dir() {
                bail!("--root {} must contain proc/ and sys/", r.display());
            }
            (Roots::under(r), CpuidFacts::default())
        }
        None => (Roots::system(), tma_doctor::cpuid::live()),
    };
    let action = match (&args.restore, args.fix) {
        (Some(state), _) => Action::Restore {
            state: state.clone(),
        },
        (None, true) if args.dry_run => Action::FixDryRun,
        (None, true) => Action::Fix {
            state: args.state.clone(),
        },
        (None, false) => Action::Check,
    };
    let cfg = DoctorConfig {
        roots,
        cpuid,
        action,
    };
    // Commands go to stderr so that --json on stdout stays one document.
    let mut done =
        tma_doctor::run(&cfg, &mut std::io::stderr()).with_context(|| match &cfg.action {
            Action::Restore { state } => format!("restore from {}", state.display()),
            _ => "apply fixes".to_string(),
        })?;
    // The VMs on this host: is their guest memory on huge pages? (`tma kvm --memory`)
    let vms = tma_kvm::memory::run(&tma_kvm::MemoryConfig {
        target: tma_kvm::MemoryTarget::All,
        host: root.host(),
    });
    for vm in vms.map(|r| r.vms).unwrap_or_default() {
        let who = format!("VMM pid {} ({})", vm.pid, vm.name);
        let good = vm.fix.is_none();
        done.report.checks.push(tma_doctor::Check::vm_memory(
            &who,
            good,
            &vm.verdict,
            vm.fix.clone(),
        ));
    }
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            tma_doctor::render_json(w, &done)
        } else {
            Ok(tma_doctor::render(w, &done.report)?)
        }
    })?;
    // A problem reported is a failure, so CI can gate on it (warnings are not).
    Ok(if done.has_problem() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `tma doctor --verify`: the pass/fail table; exit 1 on any failure.
fn verify(args: &Args) -> anyhow::Result<ExitCode> {
    let cfg = tma_doctor::VerifyConfig {
        replay: args.replay.clone(),
        record: args.record.clone(),
        exe: std::env::current_exe().ok(),
    };
    let report = tma_doctor::verify(&cfg)?;
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            tma_render::write_json(
                w,
                tma_doctor::verify::REPORT_SCHEMA,
                tma_doctor::verify::REPORT_SCHEMA_VERSION,
                &report,
            )
        } else {
            Ok(tma_doctor::verify::render(w, &report)?)
        }
    })?;
    Ok(if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
