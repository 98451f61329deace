//! `tma workload NAME`: run a bundled case-study workload as an ordinary process and report
//! its runtime and throughput, so any analysis command can be pointed at it
//! (`tma stat -- tma workload dram`, `tma locate -- tma workload sha256 --impl portable`).
//!
//! [`run`] validates a [`WorkloadConfig`], runs the workload and returns a [`WorkloadReport`]
//! (the `tma.workload` v1 document, see [`render`]).
//!
//! Cycles are estimated from a calibration of the core clock (a timed chain of dependent adds,
//! one per cycle) run before and after the workload, because this machine has no readable
//! cycle counter and its TSC does not tick at the core clock.

pub mod render;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::clock::{self, CoreClock};
use crate::dram::{self, DramConfig, DramError};
use crate::matmul::{self, MatmulConfig, MatmulError};
use crate::onednn::{self, OnednnConfig, OnednnError};
use crate::sha256::run::{self as sha_run, Sha256Workload};
use crate::sha256::{Sha256Error, Sha256Impl};

/// Which workload to run, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Hash random buffers with SHA-256.
    Sha256(ShaOptions),
    /// Dependent random loads through a large buffer.
    Dram(DramConfig),
    /// A reference matmul reading its weights column-wise, with or without huge pages.
    Matmul(MatmulConfig),
    /// A oneDNN matmul primitive (the library loaded at run time) on tma's buffers.
    Onednn(OnednnConfig),
}

/// Parameters of the SHA-256 workload as given by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShaOptions {
    /// Implementation name: `portable`, `ni` or `auto`.
    pub imp: String,
    /// Bytes per buffer.
    pub size_bytes: u64,
    /// Times each buffer is hashed.
    pub iters: u64,
    /// Independent buffers hashed together.
    pub streams: usize,
    /// Seed of the buffer contents.
    pub seed: u64,
}

/// A workload run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadConfig {
    /// The workload and its parameters.
    pub kind: WorkloadKind,
    /// Calibrate the core clock before and after (cycle figures); off for `--no-calibrate`.
    pub calibrate: bool,
}

/// Bad parameters or a failed workload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    #[error("--streams must be at least 1")]
    NoStreams,
    #[error("--size and --iters must be at least 1: there is nothing to time otherwise")]
    NothingToHash,
    #[error("--accesses must be at least 1: there is nothing to time otherwise")]
    NoAccesses,
    #[error(transparent)]
    Sha256(#[from] Sha256Error),
    #[error(transparent)]
    Dram(#[from] DramError),
    #[error(transparent)]
    Matmul(#[from] MatmulError),
    #[error(transparent)]
    Onednn(#[from] OnednnError),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockReport {
    /// Mean of the calibrations before and after, in Hz.
    pub core_hz: f64,
    pub before_hz: f64,
    pub after_hz: f64,
    /// How the clock was measured.
    pub method: Cow<'static, str>,
}

fn clock_report(before: Option<CoreClock>, after: Option<CoreClock>) -> Option<ClockReport> {
    let (b, a) = (before?, after?);
    Some(ClockReport {
        core_hz: (b.hz + a.hz) / 2.0,
        before_hz: b.hz,
        after_hz: a.hz,
        method: "dependent add chain timed with the thread CPU clock (1 add per core cycle)".into(),
    })
}

/// The `tma.workload` v1 document: what [`render::json`] writes (schema [`render::SCHEMA`])
/// and what its readers (`tma demo`) read back, one type for both. The envelope (`schema`,
/// `schema_version`) is [`tma_render::JsonEnvelope`]'s; readers check it first
/// ([`tma_render::recognize()`]). Read back, a matmul report's own `seconds` and
/// `wall_seconds` (written once, at the top) are 0 until [`WorkloadReport::read`] fills them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// `sha256`, `dram`, `matmul` or `onednn`.
    #[serde(deserialize_with = "workload_name")]
    pub name: Name,
    /// Implementation (`portable`/`ni`) for sha256; `prefetch`/`no-prefetch` for dram;
    /// `thp-on`/`thp-off` for matmul and onednn.
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matmul: Option<MatmulReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onednn: Option<OnednnReport>,
}

/// The sha256 part of a [`WorkloadReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShaReport {
    pub streams: usize,
    pub buffer_bytes: u64,
    pub iters: u64,
    pub bytes: u64,
    pub ns_per_byte: f64,
    pub bytes_per_second: f64,
    pub gb_per_second: f64,
    pub cycles_per_byte: Option<f64>,
    /// The fastest pass over the buffers (`best_bytes_per_second` of
    /// [`crate::sha256::run::Sha256WorkloadResult`]).
    pub best_bytes_per_second: f64,
    pub best_cycles_per_byte: Option<f64>,
    pub digest: String,
}

/// The dram part of a [`WorkloadReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// The matmul part of a [`WorkloadReport`]: the run's result (its times are the document's
/// `seconds` and `wall_seconds`) and the cycles per multiply-add.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulReport {
    #[serde(flatten)]
    pub run: crate::matmul::MatmulResult,
    /// Core cycles per multiply-add, when the clock was calibrated.
    pub cycles_per_fma: Option<f64>,
}

/// The onednn part of a [`WorkloadReport`]: the run's result (its times are the document's
/// `seconds`, the process's CPU time over all threads, and `wall_seconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnednnReport {
    #[serde(flatten)]
    pub run: crate::onednn::OnednnResult,
}

/// A workload's name, one of `NAMES`. (Named so that serde does not take the field for a
/// string borrowed from the input: it is read by `workload_name` into the constant.)
pub type Name = &'static str;

/// The workloads by the names their documents give.
const NAMES: [&str; 4] = ["sha256", "dram", "matmul", "onednn"];

fn workload_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let s = String::deserialize(d)?;
    NAMES
        .into_iter()
        .find(|n| *n == s)
        .ok_or_else(|| serde::de::Error::unknown_variant(&s, &NAMES))
}

impl WorkloadReport {
    /// A `tma.workload` document's payload (the envelope is not checked here), with a matmul
    /// report's times taken from the top of the document, where they were written.
    pub fn read(bytes: &[u8]) -> Result<WorkloadReport, serde_json::Error> {
        let mut r: WorkloadReport = serde_json::from_slice(bytes)?;
        if let Some(m) = r.matmul.as_mut() {
            m.run.seconds = r.seconds;
            m.run.wall_seconds = r.wall_seconds;
        }
        if let Some(o) = r.onednn.as_mut() {
            o.run.seconds = r.seconds;
            o.run.wall_seconds = r.wall_seconds;
        }
        Ok(r)
    }
}

/// Validate the configuration, run the workload (between two core-clock calibrations unless
/// `calibrate` is off) and build its report.
pub fn run(cfg: &WorkloadConfig) -> Result<WorkloadReport, WorkloadError> {
    match &cfg.kind {
        WorkloadKind::Sha256(o) => run_sha(o, cfg.calibrate),
        WorkloadKind::Dram(d) => run_dram(d, cfg.calibrate),
        WorkloadKind::Matmul(m) => run_matmul(m, cfg.calibrate),
        WorkloadKind::Onednn(o) => run_onednn(o),
    }
}

fn calibrate(on: bool) -> Option<CoreClock> {
    if on {
        clock::calibrate()
    } else {
        None
    }
}

fn run_sha(o: &ShaOptions, cal: bool) -> Result<WorkloadReport, WorkloadError> {
    let imp = Sha256Impl::parse(&o.imp)?;
    if !imp.is_available() {
        return Err(Sha256Error::NiUnavailable.into());
    }
    if o.streams == 0 {
        return Err(WorkloadError::NoStreams);
    }
    if o.size_bytes == 0 || o.iters == 0 {
        return Err(WorkloadError::NothingToHash);
    }
    let cfg = Sha256Workload {
        imp,
        size_bytes: o.size_bytes,
        iters: o.iters,
        streams: o.streams,
        seed: o.seed,
    };
    let before = calibrate(cal);
    let r = sha_run::run(&cfg)?;
    let after = calibrate(cal);
    let clock = clock_report(before, after);
    let cycles_per_byte = clock
        .as_ref()
        .filter(|_| r.bytes > 0)
        .map(|c| r.seconds * c.core_hz / r.bytes as f64);
    let best_cycles_per_byte = clock
        .as_ref()
        .filter(|_| r.best_bytes_per_second > 0.0)
        .map(|c| c.core_hz / r.best_bytes_per_second);
    Ok(WorkloadReport {
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
            best_bytes_per_second: r.best_bytes_per_second,
            best_cycles_per_byte,
            digest: r.digest.clone(),
        }),
        dram: None,
        matmul: None,
        onednn: None,
    })
}

fn run_dram(cfg: &DramConfig, cal: bool) -> Result<WorkloadReport, WorkloadError> {
    if cfg.accesses == 0 {
        return Err(WorkloadError::NoAccesses);
    }
    let before = calibrate(cal);
    let r = dram::run(cfg)?;
    let after = calibrate(cal);
    let clock = clock_report(before, after);
    let cycles_per_access = clock
        .as_ref()
        .filter(|_| r.accesses > 0)
        .map(|c| r.seconds * c.core_hz / r.accesses as f64);
    Ok(WorkloadReport {
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
        matmul: None,
        onednn: None,
    })
}

fn run_matmul(cfg: &MatmulConfig, cal: bool) -> Result<WorkloadReport, WorkloadError> {
    let before = calibrate(cal);
    let r = matmul::run(cfg)?;
    let after = calibrate(cal);
    let clock = clock_report(before, after);
    let cycles_per_fma = clock
        .as_ref()
        .filter(|_| r.flops > 0)
        .map(|c| r.seconds * c.core_hz / (r.flops / 2) as f64);
    Ok(WorkloadReport {
        name: "matmul",
        imp: format!("thp-{}", r.thp.name()),
        seconds: r.seconds,
        wall_seconds: r.wall_seconds,
        clock,
        sha256: None,
        dram: None,
        matmul: Some(MatmulReport {
            run: r,
            cycles_per_fma,
        }),
        onednn: None,
    })
}

/// The oneDNN matmul: no core-clock calibration (the library runs on several threads, whose
/// cycles one thread's calibration does not give).
fn run_onednn(cfg: &OnednnConfig) -> Result<WorkloadReport, WorkloadError> {
    let r = onednn::run(cfg)?;
    Ok(WorkloadReport {
        name: "onednn",
        imp: format!("thp-{}", r.thp.name()),
        seconds: r.seconds,
        wall_seconds: r.wall_seconds,
        clock: None,
        sha256: None,
        dram: None,
        matmul: None,
        onednn: Some(OnednnReport { run: r }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn bad_parameters_are_refused_before_running() {
        let sha = |streams, size_bytes, iters| WorkloadConfig {
            kind: WorkloadKind::Sha256(ShaOptions {
                imp: "portable".into(),
                size_bytes,
                iters,
                streams,
                seed: 1,
            }),
            calibrate: false,
        };
        assert!(matches!(run(&sha(0, 64, 1)), Err(WorkloadError::NoStreams)));
        assert!(matches!(
            run(&sha(1, 0, 1)),
            Err(WorkloadError::NothingToHash)
        ));
        let mut cfg = sha(1, 64, 1);
        if let WorkloadKind::Sha256(o) = &mut cfg.kind {
            o.imp = "fast".into();
        }
        assert!(matches!(run(&cfg), Err(WorkloadError::Sha256(_))));
    }

    #[test]
    fn small_sha_run_reports_and_renders() {
        let cfg = WorkloadConfig {
            kind: WorkloadKind::Sha256(ShaOptions {
                imp: "portable".into(),
                size_bytes: 64,
                iters: 1,
                streams: 1,
                seed: 1,
            }),
            calibrate: false,
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.name, "sha256");
        let mut text = Vec::new();
        render::text(&mut text, &r).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with("sha256 workload: impl portable, 1 stream x 1 iteration of 64 bytes")
        );
        assert!(text.contains("not measured (no core-clock calibration)"));
        let mut json = Vec::new();
        render::json(&mut json, &r).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["schema"], render::SCHEMA);
        assert_eq!(v["sha256"]["bytes"], 64);
    }

    /// The `tma.workload` round trip: what `tma workload --json` writes reads back into
    /// [`WorkloadReport`] (by [`WorkloadReport::read`]), equal to the report, and that, written
    /// again, gives the same bytes.
    #[test]
    fn each_workloads_document_reads_back_as_written() {
        let kinds = [
            WorkloadKind::Sha256(ShaOptions {
                imp: "portable".into(),
                size_bytes: 64,
                iters: 1,
                streams: 2,
                seed: 1,
            }),
            WorkloadKind::Dram(DramConfig {
                size_bytes: 1 << 20,
                accesses: 1000,
                ..DramConfig::default()
            }),
            WorkloadKind::Matmul(MatmulConfig {
                m: 8,
                k: 8,
                n: 8,
                host: tma_host::Host::new("/nonexistent/sys", "/nonexistent"),
                ..MatmulConfig::default()
            }),
        ];
        let onednn = WorkloadKind::Onednn(OnednnConfig {
            m: 4,
            k: 8,
            n: 8,
            reps: 2,
            host: tma_host::Host::new("/nonexistent/sys", "/nonexistent"),
            ..OnednnConfig::default()
        });
        for kind in kinds.into_iter().chain([onednn]) {
            let r = match run(&WorkloadConfig {
                kind,
                calibrate: true,
            }) {
                Err(WorkloadError::Onednn(OnednnError::NotFound { .. })) => {
                    println!("skipped: the onednn document (no oneDNN installed)");
                    continue;
                }
                r => r.unwrap(),
            };
            let mut bytes = Vec::new();
            render::json(&mut bytes, &r).unwrap();
            let found = tma_render::recognize(&bytes);
            assert_eq!(found.schema(), Some(render::SCHEMA));
            assert_eq!(found.version(), Some(render::SCHEMA_VERSION));
            let doc = WorkloadReport::read(&bytes).unwrap();
            assert_eq!(doc, r, "{}", r.name);
            let mut again = Vec::new();
            render::json(&mut again, &doc).unwrap();
            assert_eq!(String::from_utf8(again), String::from_utf8(bytes));
        }
    }
}
