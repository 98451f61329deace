//! `tma workload NAME [opts]`: run a bundled case-study workload as an ordinary process, so any
//! analysis command can be pointed at it (`tma stat -- tma workload dram`,
//! `tma locate -- tma workload sha256 --impl portable`). Each workload times itself and prints
//! its runtime and throughput; `--json` prints a `tma.workload` v1 document instead, and
//! `--report FILE` additionally writes that document to FILE (atomically) whatever is printed.
//!
//! Cycles are estimated from a calibration of the core clock (a timed chain of dependent adds,
//! one per cycle) run before and after the workload, because this machine has no readable
//! cycle counter and its TSC does not tick at the core clock.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use tma_workloads::clock::{self, CoreClock};
use tma_workloads::dram::{self, DramConfig};
use tma_workloads::sha256::run::{self as sha_run, Sha256Workload};
use tma_workloads::sha256::Sha256Impl;

/// JSON schema name and version of the `--json` document.
pub const SCHEMA: &str = "tma.workload";
pub const SCHEMA_VERSION: u32 = 1;

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
}

#[derive(Debug, clap::Args)]
pub struct Common {
    /// Print a `tma.workload` v1 JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON document to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Skip the core-clock calibration (no cycle figures).
    #[arg(long)]
    pub no_calibrate: bool,
}

#[derive(Debug, clap::Args)]
pub struct ShaArgs {
    /// Implementation: portable, ni (SHA extensions) or auto (fastest available).
    #[arg(long = "impl", value_name = "IMPL", default_value = "auto")]
    pub imp: String,
    /// Bytes per buffer (suffixes K, M, G = KiB, MiB, GiB).
    #[arg(long, value_name = "BYTES", default_value = "1M", value_parser = parse_size)]
    pub size: u64,
    /// Times each buffer is hashed.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub iters: u64,
    /// Independent buffers hashed together; with SHA-NI they are interleaved (2 or 4 lanes).
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

/// Parse a byte count with an optional binary suffix: `4096`, `64K`, `512M`, `1G`, `2GiB`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("`{s}` is not a size: expected a number of bytes like 4096, 64K, 512M or 1G")
    })?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => {
            return Err(format!(
                "`{s}` has an unknown size suffix: use K, M or G (powers of 1024)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// Core-clock measurement around the workload.
#[derive(Debug, Clone, Serialize)]
pub struct ClockReport {
    /// Mean of the calibrations before and after, in Hz.
    pub core_hz: f64,
    pub before_hz: f64,
    pub after_hz: f64,
    /// How the clock was measured.
    pub method: &'static str,
}

fn clock_report(before: Option<CoreClock>, after: Option<CoreClock>) -> Option<ClockReport> {
    let (b, a) = (before?, after?);
    Some(ClockReport {
        core_hz: (b.hz + a.hz) / 2.0,
        before_hz: b.hz,
        after_hz: a.hz,
        method: "dependent add chain timed with the thread CPU clock (1 add per core cycle)",
    })
}

/// The `tma.workload` v1 document.
#[derive(Debug, Serialize)]
pub struct WorkloadReport {
    /// `sha256` or `dram`.
    pub name: &'static str,
    /// Implementation (`portable`/`ni`) for sha256; `prefetch`/`no-prefetch` for dram.
    #[serde(rename = "impl")]
    pub imp: String,
    /// CPU seconds of the timed region (the thread's CPU time: not inflated when the machine
    /// is busy and the process waits for a CPU).
    pub seconds: f64,
    /// Wall-clock seconds of the timed region.
    pub wall_seconds: f64,
    /// Core clock, when calibrated.
    pub clock: Option<ClockReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<ShaReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram: Option<DramReport>,
}

#[derive(Debug, Serialize)]
pub struct ShaReport {
    pub streams: usize,
    pub buffer_bytes: u64,
    pub iters: u64,
    pub bytes: u64,
    pub ns_per_byte: f64,
    pub bytes_per_second: f64,
    pub gb_per_second: f64,
    pub cycles_per_byte: Option<f64>,
    pub digest: String,
}

#[derive(Debug, Serialize)]
pub struct DramReport {
    pub bytes: u64,
    pub nodes: u64,
    pub accesses: u64,
    pub prefetch: bool,
    pub distance: u64,
    pub huge_pages_requested: bool,
    pub setup_seconds: f64,
    pub ns_per_access: f64,
    pub accesses_per_second: f64,
    pub cycles_per_access: Option<f64>,
    pub checksum: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.workload {
        Workload::Sha256(a) => run_sha(a),
        Workload::Dram(a) => run_dram(a),
    }
}

fn calibrate(common: &Common) -> Option<CoreClock> {
    if common.no_calibrate {
        None
    } else {
        clock::calibrate()
    }
}

fn run_sha(a: ShaArgs) -> anyhow::Result<ExitCode> {
    let imp = Sha256Impl::parse(&a.imp)?;
    if !imp.is_available() {
        return Err(tma_workloads::sha256::Sha256Error::NiUnavailable.into());
    }
    if a.streams == 0 {
        anyhow::bail!("--streams must be at least 1");
    }
    if a.size == 0 || a.iters == 0 {
        anyhow::bail!("--size and --iters must be at least 1: there is nothing to time otherwise");
    }
    let cfg = Sha256Workload {
        imp,
        size_bytes: a.size,
        iters: a.iters,
        streams: a.streams,
        seed: a.seed,
    };
    let before = calibrate(&a.common);
    let r = sha_run::run(&cfg)?;
    let after = calibrate(&a.common);
    let clock = clock_report(before, after);
    let cycles_per_byte = clock
        .as_ref()
        .filter(|_| r.bytes > 0)
        .map(|c| r.seconds * c.core_hz / r.bytes as f64);
    let report = WorkloadReport {
        name: "sha256",
        imp: imp.name().to_string(),
        seconds: r.seconds,
        wall_seconds: r.wall_seconds,
        clock,
        sha256: Some(ShaReport {
            streams: r.streams,
            buffer_bytes: cfg.size_bytes,
            iters: cfg.iters,
            bytes: r.bytes,
            ns_per_byte: r.ns_per_byte,
            bytes_per_second: r.bytes_per_second,
            gb_per_second: r.bytes_per_second / 1e9,
            cycles_per_byte,
            digest: r.digest.clone(),
        }),
        dram: None,
    };
    emit(&a.common, &report, |w| {
        let s = report.sha256.as_ref().expect("sha report");
        writeln!(
            w,
            "sha256 workload: impl {}, {} stream{} x {} iteration{} of {} bytes = {} bytes hashed",
            report.imp,
            s.streams,
            plural(s.streams as u64),
            s.iters,
            plural(s.iters),
            s.buffer_bytes,
            s.bytes
        )?;
        writeln!(
            w,
            "  runtime      {:.6} s CPU time ({:.6} s wall clock)",
            report.seconds, report.wall_seconds
        )?;
        writeln!(
            w,
            "  throughput   {:.3} GB/s   {:.4} ns/byte",
            s.gb_per_second, s.ns_per_byte
        )?;
        write_cycles(w, "cycles/byte ", s.cycles_per_byte, report.clock.as_ref())?;
        writeln!(w, "  digest       {} (stream 0)", s.digest)?;
        Ok(())
    })
}

fn run_dram(a: DramArgs) -> anyhow::Result<ExitCode> {
    if a.accesses == 0 {
        anyhow::bail!("--accesses must be at least 1: there is nothing to time otherwise");
    }
    let cfg = DramConfig {
        size_bytes: a.size,
        accesses: a.accesses,
        prefetch: a.prefetch,
        distance: a.distance,
        seed: a.seed,
        huge_pages: !a.no_huge_pages,
    };
    let before = calibrate(&a.common);
    let r = dram::run(&cfg)?;
    let after = calibrate(&a.common);
    let clock = clock_report(before, after);
    let cycles_per_access = clock
        .as_ref()
        .filter(|_| r.accesses > 0)
        .map(|c| r.seconds * c.core_hz / r.accesses as f64);
    let report = WorkloadReport {
        name: "dram",
        imp: if r.prefetch {
            "prefetch"
        } else {
            "no-prefetch"
        }
        .to_string(),
        seconds: r.seconds,
        wall_seconds: r.wall_seconds,
        clock,
        sha256: None,
        dram: Some(DramReport {
            bytes: r.bytes,
            nodes: r.nodes,
            accesses: r.accesses,
            prefetch: r.prefetch,
            distance: r.distance,
            huge_pages_requested: cfg.huge_pages,
            setup_seconds: r.setup_seconds,
            ns_per_access: r.ns_per_access,
            accesses_per_second: r.accesses_per_second,
            cycles_per_access,
            checksum: r.checksum,
        }),
    };
    emit(&a.common, &report, |w| {
        let d = report.dram.as_ref().expect("dram report");
        writeln!(
            w,
            "dram workload: pointer chase over {} bytes ({} nodes), {} dependent loads, {}",
            d.bytes,
            d.nodes,
            d.accesses,
            if d.prefetch {
                format!("software prefetch {} steps ahead", d.distance)
            } else {
                "no prefetch".to_string()
            }
        )?;
        writeln!(
            w,
            "  setup        {:.3} s (building the chain, not timed)",
            d.setup_seconds
        )?;
        writeln!(
            w,
            "  runtime      {:.6} s CPU time ({:.6} s wall clock)",
            report.seconds, report.wall_seconds
        )?;
        writeln!(
            w,
            "  throughput   {:.0} accesses/s   {:.2} ns/access",
            d.accesses_per_second, d.ns_per_access
        )?;
        write_cycles(
            w,
            "cycles/access",
            d.cycles_per_access,
            report.clock.as_ref(),
        )?;
        writeln!(w, "  checksum     {:#018x}", d.checksum)?;
        Ok(())
    })
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn write_cycles(
    w: &mut dyn Write,
    label: &str,
    v: Option<f64>,
    clock: Option<&ClockReport>,
) -> std::io::Result<()> {
    match (v, clock) {
        (Some(v), Some(c)) => writeln!(
            w,
            "  {label:<12} {v:.3} (core clock {:.3} GHz from a timed dependent add chain; \
             before {:.3}, after {:.3})",
            c.core_hz / 1e9,
            c.before_hz / 1e9,
            c.after_hz / 1e9
        ),
        _ => writeln!(w, "  {label:<12} not measured (no core-clock calibration)"),
    }
}

fn emit(
    common: &Common,
    report: &WorkloadReport,
    text: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<ExitCode> {
    if let Some(path) = &common.report {
        tma_report::write_atomic(path, |w| {
            tma_report::write_json(w, SCHEMA, SCHEMA_VERSION, report)
        })
        .with_context(|| format!("writing the workload report to {}", path.display()))?;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if common.json {
        tma_report::write_json(&mut out, SCHEMA, SCHEMA_VERSION, report)?;
    } else {
        text(&mut out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("12X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }
}
