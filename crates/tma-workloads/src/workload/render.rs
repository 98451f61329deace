//! Output of `tma workload`: the text summary and the `tma.workload` v1 JSON document.

use std::io::{self, Write};

use super::{ClockReport, MatmulReport, OnednnReport, WorkloadReport};
use crate::matmul::{Check, HugePages};
use tma_host::ThpMode;

/// JSON schema name of the `--json` / `--report` document.
pub const SCHEMA: &str = "tma.workload";
/// JSON schema version of the `--json` / `--report` document.
pub const SCHEMA_VERSION: u32 = 1;

/// Write `report` as the `tma.workload` v1 JSON document.
pub fn json(w: &mut dyn Write, report: &WorkloadReport) -> Result<(), tma_render::OutputError> {
    tma_render::write_json(w, SCHEMA, SCHEMA_VERSION, report)
}

/// Write the text summary of `report`.
pub fn text(w: &mut dyn Write, report: &WorkloadReport) -> io::Result<()> {
    if let Some(s) = &report.sha256 {
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
        runtime_line(w, report)?;
        writeln!(
            w,
            "  throughput   {:.3} GB/s   {:.4} ns/byte",
            s.gb_per_second, s.ns_per_byte
        )?;
        write_cycles(w, "cycles/byte ", s.cycles_per_byte, report.clock.as_ref())?;
        if s.iters > 1 && s.best_bytes_per_second > 0.0 {
            let cpb = s
                .best_cycles_per_byte
                .map(|c| format!("   {c:.3} cycles/byte"))
                .unwrap_or_default();
            writeln!(
                w,
                "  fastest pass {:.3} GB/s{cpb} ({} passes timed in groups of at least 1 MiB; host noise only slows them down)",
                s.best_bytes_per_second / 1e9,
                s.iters
            )?;
        }
        writeln!(w, "  digest       {} (stream 0)", s.digest)?;
    }
    if let Some(d) = &report.dram {
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
        runtime_line(w, report)?;
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
    }
    if let Some(m) = &report.matmul {
        write_matmul(w, report, m)?;
    }
    if let Some(o) = &report.onednn {
        write_onednn(w, report, o)?;
    }
    Ok(())
}

fn write_onednn(w: &mut dyn Write, report: &WorkloadReport, o: &OnednnReport) -> io::Result<()> {
    let r = &o.run;
    writeln!(
        w,
        "onednn workload: oneDNN matmul primitive, f32 {}x{} by {}x{} (row-major), {} execute{}, --thp {}",
        r.m,
        r.k,
        r.k,
        r.n,
        r.reps,
        plural(r.reps as u64),
        r.thp.name()
    )?;
    writeln!(
        w,
        "  library      {} (oneDNN {}, {} API, {} CPU runtime{})",
        r.library.path,
        r.library.version,
        r.library.api,
        r.library.cpu_runtime,
        if r.library.hash.is_empty() || r.library.hash == "N/A" {
            String::new()
        } else {
            format!(", git {}", r.library.hash)
        }
    )?;
    writeln!(
        w,
        "  primitive    {}",
        r.implementation
            .as_deref()
            .unwrap_or("(implementation not reported)")
    )?;
    writeln!(
        w,
        "  setup        {:.3} s mapping and filling the buffers, {:.3} s creating the primitive (not timed)",
        r.setup_seconds, r.create_seconds
    )?;
    writeln!(
        w,
        "  runtime      {:.6} s CPU time, all threads ({:.6} s wall clock)",
        report.seconds, report.wall_seconds
    )?;
    writeln!(
        w,
        "  throughput   {:.3} GFLOP/s over the wall clock ({} flops); fastest execute {:.3} GFLOP/s",
        r.gflops, r.flops, r.best_gflops
    )?;
    huge_pages_line(
        w,
        r.huge_pages.as_ref(),
        r.huge_pages_error.as_deref(),
        "; oneDNN's own scratch memory is not counted",
    )?;
    writeln!(
        w,
        "  page faults  {} while first touching the buffers, {} during the timed executes (minor faults, getrusage)",
        r.setup_page_faults, r.timed_page_faults
    )?;
    tail_lines(
        w,
        r.thp_mode.as_ref(),
        r.thp_mode_error.as_deref(),
        &r.check,
        r.checksum,
        r.note.as_deref(),
    )
}

fn write_matmul(w: &mut dyn Write, report: &WorkloadReport, m: &MatmulReport) -> io::Result<()> {
    writeln!(
        w,
        "matmul workload: f32 {}x{} by {}x{}, weights read column-wise ({} bytes between loads), --thp {}",
        m.run.m,
        m.run.k,
        m.run.k,
        m.run.n,
        m.run.n * 4,
        m.run.thp.name()
    )?;
    writeln!(
        w,
        "  setup        {:.3} s (mapping and filling the buffers, not timed)",
        m.run.setup_seconds
    )?;
    runtime_line(w, report)?;
    writeln!(
        w,
        "  throughput   {:.3} GFLOP/s ({} flops)",
        m.run.gflops, m.run.flops
    )?;
    write_cycles(w, "cycles/FMA", m.cycles_per_fma, report.clock.as_ref())?;
    huge_pages_line(
        w,
        m.run.huge_pages.as_ref(),
        m.run.huge_pages_error.as_deref(),
        "",
    )?;
    tail_lines(
        w,
        m.run.thp_mode.as_ref(),
        m.run.thp_mode_error.as_deref(),
        &m.run.check,
        m.run.checksum,
        m.run.note.as_deref(),
    )
}

/// The huge-page share of a matmul's buffers (`extra` ends the parenthesis).
fn huge_pages_line(
    w: &mut dyn Write,
    huge_pages: Option<&HugePages>,
    error: Option<&str>,
    extra: &str,
) -> io::Result<()> {
    match huge_pages {
        Some(h) => writeln!(
            w,
            "  huge pages   {:.1}% of the buffers ({} of {} bytes, AnonHugePages in /proc/self/smaps{}){extra}",
            h.share * 100.0,
            h.huge_bytes,
            h.bytes,
            if h.exact { "" } else { "; an upper bound, the mappings extend beyond the buffers" }
        ),
        None => writeln!(
            w,
            "  huge pages   unknown: {}",
            error.unwrap_or("smaps not read")
        ),
    }
}

/// The THP mode, the result check and the note that end a matmul's report.
fn tail_lines(
    w: &mut dyn Write,
    thp_mode: Option<&ThpMode>,
    thp_mode_error: Option<&str>,
    check: &Check,
    checksum: f64,
    note: Option<&str>,
) -> io::Result<()> {
    match thp_mode {
        Some(mode) => writeln!(
            w,
            "  THP mode     {mode} (system, transparent_hugepage/enabled)"
        )?,
        None => writeln!(
            w,
            "  THP mode     unknown: {}",
            thp_mode_error.unwrap_or("not read")
        )?,
    }
    writeln!(
        w,
        "  check        {} elements match an f64 dot product (worst error {:.1e} of the tolerance)",
        check.elements, check.worst_error_ratio
    )?;
    writeln!(w, "  checksum     {checksum:.6e}")?;
    if let Some(note) = note {
        writeln!(w, "  note: {note}")?;
    }
    Ok(())
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
) -> io::Result<()> {
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

/// The timed part's CPU and wall-clock time, the same line for every workload.
fn runtime_line(w: &mut dyn Write, report: &WorkloadReport) -> io::Result<()> {
    writeln!(
        w,
        "  runtime      {:.6} s CPU time ({:.6} s wall clock)",
        report.seconds, report.wall_seconds
    )
}
