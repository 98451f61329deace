//! `tma workload NAME [opts]`: run a bundled case-study workload (`tma_workloads::workload`)
//! as an ordinary process; text by default, `--json` for the `tma.workload` v1 document, and
//! `--report FILE` additionally writes that document to FILE (`-`: standard output); a file is replaced only when the command succeeds.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tma_workloads::dram::DramConfig;
use tma_workloads::matmul::{MatmulConfig, ThpAdvice};
use tma_workloads::onednn::OnednnConfig;
use tma_workloads::workload::{self, parse_size, render, ShaOptions, WorkloadConfig, WorkloadKind};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub workload: Workload,
}

#[derive(Debug, clap::Subcommand)]
pub enum Workload {
    /// Hash random buffers with SHA-256 (portable or SHA-NI, one or several interleaved streams).
    Sha256(ShaArgs),
    /// Dependent random loads through a buffer far larger than the LLC (DRAM latency bound).
    Dram(DramArgs),
    /// Reference f32 matmul reading its weights column-wise (a new page per load), its buffers
    /// advised for or against transparent huge pages.
    Matmul(MatmulArgs),
    /// oneDNN's f32 matmul primitive (libdnnl loaded at run time: --dnnl, else libdnnl.so.3 or
    /// .so.2) on buffers tma allocates and advises for or against transparent huge pages.
    Onednn(OnednnArgs),
}

#[derive(Debug, clap::Args)]
pub struct Common {
    /// Print a `tma.workload` v1 JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON document to FILE (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Skip the core-clock calibration (no cycle figures).
    #[arg(long)]
    pub no_calibrate: bool,
}

#[derive(Debug, clap::Args)]
pub struct ShaArgs {
    /// Implementation: portable, ni (SHA extensions) or auto (fastest available).
    #[arg(long = "impl", value_name = "IMPL", default_value = "auto", hide_possible_values = true,
          value_parser = crate::cmd::completions::sha256_impls())]
    pub imp: String,
    /// Bytes per buffer (suffixes K, M, G = KiB, MiB, GiB).
    #[arg(long, value_name = "BYTES", default_value = "1M", value_parser = parse_size)]
    pub size: u64,
    /// Times each buffer is hashed.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub iters: u64,
    /// Independent buffers hashed together; with SHA-NI they are interleaved (2, 3, 4, 6 or 8 lanes).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub streams: usize,
    /// Seed of the buffer contents.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct DramArgs {
    /// Buffer size (suffixes K, M, G = KiB, MiB, GiB); keep it far above the last-level cache.
    #[arg(long, value_name = "BYTES", default_value = "512M", value_parser = parse_size)]
    pub size: u64,
    /// Dependent loads to time.
    #[arg(long, value_name = "N", default_value_t = 20_000_000)]
    pub accesses: u64,
    /// Prefetch the node DISTANCE steps ahead (jump-pointer prefetching).
    #[arg(long)]
    pub prefetch: bool,
    /// Steps between a node and the node its jump pointer (prefetch target) names.
    #[arg(long, value_name = "D", default_value_t = 16)]
    pub distance: u64,
    /// Seed of the random chain.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Do not ask for transparent huge pages (then TLB misses add to every access).
    #[arg(long)]
    pub no_huge_pages: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ThpArg {
    /// madvise(MADV_HUGEPAGE) on the buffers.
    On,
    /// madvise(MADV_NOHUGEPAGE) on the buffers.
    Off,
}

#[derive(Debug, clap::Args)]
pub struct MatmulArgs {
    /// Rows of A and C.
    #[arg(long, value_name = "M", default_value_t = 1024)]
    pub m: usize,
    /// Columns of A, rows of the weight matrix B (the dot-product length).
    #[arg(long, value_name = "K", default_value_t = 4096)]
    pub k: usize,
    /// Columns of B and C; 4*N bytes separate two loads of a column (1000: a new page each).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub n: usize,
    /// Advise the buffers for (on) or against (off) transparent huge pages.
    #[arg(long, value_enum, default_value = "on")]
    pub thp: ThpArg,
    /// Seed of the matrix contents.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct OnednnArgs {
    /// Rows of A and C.
    #[arg(long, value_name = "M", default_value_t = 1024)]
    pub m: usize,
    /// Columns of A, rows of the weight matrix B.
    #[arg(long, value_name = "K", default_value_t = 4096)]
    pub k: usize,
    /// Columns of B and C.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub n: usize,
    /// Executions of the primitive timed (it is created once).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub reps: usize,
    /// Advise the buffers for (on) or against (off) transparent huge pages.
    #[arg(long, value_enum, default_value = "on")]
    pub thp: ThpArg,
    /// The oneDNN library: libdnnl.so.2 (oneDNN 2.x, e.g. Debian's libdnnl2) or libdnnl.so.3
    /// (3.x, e.g. the PyPI onednn wheel's lib/libdnnl.so.3). Default: the first of
    /// libdnnl.so.3 and libdnnl.so.2 the loader finds. A library outside the system
    /// directories gets its directory in LD_LIBRARY_PATH, and a SYCL build (the wheel) its
    /// OCL_ICD_FILENAMES: tma runs itself again with them.
    #[arg(long, value_name = "PATH")]
    pub dnnl: Option<PathBuf>,
    /// Seed of the matrix contents.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub common: Common,
}

/// Set when tma has run itself again with the environment a oneDNN needs: it is not done
/// twice.
const ONEDNN_REEXEC: &str = "TMA_ONEDNN_ENV_SET";

/// For `--dnnl PATH` outside the system directories, or a SYCL build beside its OpenCL
/// runtime: run this same command again with the variables the library needs (the loader
/// reads LD_LIBRARY_PATH only at start; OCL_ICD_FILENAMES must be set before the runtime
/// loads). Returns only when nothing is missing, or when exec fails.
fn onednn_environment(lib: &std::path::Path) -> anyhow::Result<()> {
    if std::env::var_os(ONEDNN_REEXEC).is_some() {
        return Ok(());
    }
    let env = tma_workloads::onednn::environment(
        lib,
        std::env::var_os("LD_LIBRARY_PATH").as_deref(),
        std::env::var_os("OCL_ICD_FILENAMES").as_deref(),
    );
    if env.is_empty() {
        return Ok(());
    }
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("cannot find the tma executable to run again")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .env(ONEDNN_REEXEC, "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let err = cmd.exec();
    Err(anyhow::Error::new(err).context("cannot run tma again with the environment oneDNN needs"))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Workload::Onednn(OnednnArgs {
        dnnl: Some(lib), ..
    }) = &args.workload
    {
        onednn_environment(lib)?;
    }
    let (kind, common) = split(args.workload);
    crate::output::check(None, [("--report", common.report.as_deref())])?;
    let cfg = WorkloadConfig {
        kind,
        calibrate: !common.no_calibrate,
    };
    let report = run_interruptible(cfg)?;
    if let Some(path) = &common.report {
        tma_render::write_output(path, |w| render::json(w, &report))
            .with_context(|| format!("writing the workload report to {}", path.display()))?;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if common.json {
        render::json(&mut out, &report)?;
    } else {
        render::text(&mut out, &report)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Run the workload on a thread of its own while this one waits for it or for SIGINT/SIGTERM
/// (`tma_sys::signal`, 10 checks a second): the timed loops stay free of checks. Interrupted,
/// there are no figures to report (the timed region did not end): say so and exit 128 + the
/// signal at once, which ends the workload; no `--report` file is written.
fn run_interruptible(cfg: WorkloadConfig) -> anyhow::Result<workload::WorkloadReport> {
    let (tx, rx) = std::sync::mpsc::channel();
    // Unnamed: the thread keeps the process's name (comm), as profiles show it.
    let thread = std::thread::Builder::new()
        .spawn(move || {
            let _ = tx.send(workload::run(&cfg));
        })
        .context("cannot start the workload thread")?;
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(r) => {
                // Let the thread end first: its thread-local destructors send the totals of
                // the regions it named (tma stat --itt: oneDNN's tasks on this thread),
                // which the process's exit would otherwise cut short.
                let _ = thread.join();
                return Ok(r?);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the workload thread ended without a result")
            }
        }
        if let Some(sig) = tma_sys::signal::interrupted() {
            eprintln!(
                "tma workload: interrupted by {sig} during the run: no figures (the timed \
                 region did not end), no report written"
            );
            std::process::exit(i32::from(sig.exit_code()));
        }
    }
}

/// The workload's own options and the options every workload shares.
fn split(w: Workload) -> (WorkloadKind, Common) {
    match w {
        Workload::Sha256(a) => (
            WorkloadKind::Sha256(ShaOptions {
                imp: a.imp,
                size_bytes: a.size,
                iters: a.iters,
                streams: a.streams,
                seed: a.seed,
            }),
            a.common,
        ),
        Workload::Dram(a) => (
            WorkloadKind::Dram(DramConfig {
                size_bytes: a.size,
                accesses: a.accesses,
                prefetch: a.prefetch,
                distance: a.distance,
                seed: a.seed,
                huge_pages: !a.no_huge_pages,
            }),
            a.common,
        ),
        Workload::Matmul(a) => (
            WorkloadKind::Matmul(MatmulConfig {
                m: a.m,
                k: a.k,
                n: a.n,
                thp: match a.thp {
                    ThpArg::On => ThpAdvice::On,
                    ThpArg::Off => ThpAdvice::Off,
                },
                seed: a.seed,
                host: tma_host::Host::system(),
            }),
            a.common,
        ),
        Workload::Onednn(a) => (
            WorkloadKind::Onednn(OnednnConfig {
                m: a.m,
                k: a.k,
                n: a.n,
                reps: a.reps,
                thp: match a.thp {
                    ThpArg::On => ThpAdvice::On,
                    ThpArg::Off => ThpAdvice::Off,
                },
                seed: a.seed,
                library: a.dnnl,
                host: tma_host::Host::system(),
            }),
            a.common,
        ),
    }
}
