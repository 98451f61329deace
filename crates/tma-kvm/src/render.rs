//! Terminal rendering of a [`KvmReport`].

use std::io::{self, Write};

use crate::doc::KvmDoc;
use crate::stats::{KvmReport, ReasonRow};

/// The schema name of `tma kvm --json`.
pub const SCHEMA: &str = "tma.kvm";
/// Its version.
pub const SCHEMA_VERSION: u32 = 1;
/// The schema name of `tma kvm --memory --json`.
pub const MEMORY_SCHEMA: &str = "tma.kvm.memory";
/// Its version: 2 since schema names 2026-11 (version 1 was named `tma.kvm-memory`).
pub const MEMORY_SCHEMA_VERSION: u32 = 2;

/// The `tma kvm --json` document ([`KvmDoc`], schema [`SCHEMA`]): the whole run, and each
/// interval's report when `-I` asked for them.
pub fn json(
    w: &mut dyn Write,
    report: &KvmReport,
    intervals: &[KvmReport],
) -> Result<(), tma_render::OutputError> {
    tma_render::write_json(w, SCHEMA, SCHEMA_VERSION, &KvmDoc::of(report, intervals))
}

/// One `-I` interval as text, numbered from 1.
pub fn interval(w: &mut dyn Write, n: u32, r: &KvmReport, opt: RenderOptions) -> io::Result<()> {
    writeln!(w, "# interval {n}")?;
    render(w, r, opt)?;
    writeln!(w)
}

/// Options for [`render`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderOptions {
    /// Add the per-vCPU breakdown.
    pub per_vcpu: bool,
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.2}us"))
}

fn reason_table(rows: &[ReasonRow]) -> comfy_table::Table {
    let mut t = tma_render::table(&[
        "VM-EXIT", "isa", "code", "Samples", "Samples%", "Rate/s", "Time%", "Min Time", "Max Time",
        "Avg time",
    ]);
    for r in rows {
        let code = if r.isa == "vmx" {
            r.code.to_string()
        } else {
            format!("{:#x}", r.code)
        };
        let avg = match (r.mean_us, r.mean_rel_err_pct) {
            (Some(m), Some(e)) => format!("{m:.2}us ( +- {e:6.2}% )"),
            (Some(m), None) => format!("{m:.2}us"),
            _ => "-".into(),
        };
        t.add_row(vec![
            r.name.clone(),
            r.isa.clone(),
            code,
            r.count.to_string(),
            format!("{:.2}%", r.share_pct),
            format!("{:.1}", r.rate_per_s),
            if r.paired > 0 {
                format!("{:.2}%", r.time_share_pct)
            } else {
                "-".into()
            },
            us(r.min_us),
            us(r.max_us),
            avg,
        ]);
    }
    tma_render::align_right(&mut t, &[0, 2, 3, 4, 5, 6, 7, 8, 9]);
    t
}

/// Render the report as text.
pub fn render(w: &mut dyn Write, r: &KvmReport, opt: RenderOptions) -> io::Result<()> {
    writeln!(
        w,
        "KVM backend: {}   duration: {:.3} s",
        r.backend, r.duration_s
    )?;
    if let Some(line) = &r.kvm_exit_not_emitted {
        writeln!(w, "{line}")?;
    } else if r.totals.kvm_exit == 0 {
        writeln!(
            w,
            "No KVM events were recorded: no guest ran in the measured scope during the measurement."
        )?;
    } else {
        writeln!(w)?;
        writeln!(w, "Analyze events for all VMs, all VCPUs:")?;
        writeln!(w)?;
        writeln!(w, "{}", reason_table(&r.exits))?;
        writeln!(w)?;
        writeln!(
            w,
            "Total Samples:{}, Total events handled time:{:.2}us, exits without a following kvm_entry: {}.",
            r.totals.kvm_exit, r.exit_time_total_us, r.unpaired_exits
        )?;
        let t = &r.timer;
        writeln!(
            w,
            "timer: {} ({}, {:.1}/s) = EXTERNAL_INTERRUPT {} + PREEMPTION_TIMER {} + TDCALL {} + SVM interrupt {} + IA32_TSC_DEADLINE (0x6e0) writes {}",
            t.total,
            t.share_of_exits_pct
                .map_or_else(|| "-".into(), |p| format!("{p:.2}% of exits")),
            t.rate_per_s,
            t.external_interrupt,
            t.preemption_timer,
            t.tdcall,
            t.svm_interrupt,
            t.tsc_deadline_msr_writes
        )?;
        writeln!(w, "Legend: Time = from kvm_exit to the next kvm_entry of the same vCPU thread: the host's exit handling, including the round trip through the VMM for IO/MMIO exits; +- is the relative standard error of the mean. timer groups the timer-related exits: EXTERNAL_INTERRUPT, PREEMPTION_TIMER and TDCALL (VMX/TDX), interrupt (SVM), and guest writes to IA32_TSC_DEADLINE (MSR 0x6e0, from kvm_msr, not counted again when under a TDCALL). Unknown codes are shown as numbers. Port/MSR/MMIO-write times below run from kvm_pio, kvm_msr or the kvm_mmio write to the next kvm_entry of the thread.")?;
    }
    render_vmm(w, r)?;
    if opt.per_vcpu && !r.per_vcpu.is_empty() {
        writeln!(w)?;
        writeln!(w, "Per vCPU thread:")?;
        for v in &r.per_vcpu {
            writeln!(
                w,
                "  pid {} tid {} vcpu {}: {} exits, {} userspace exits, {} emulated instructions",
                v.pid,
                v.tid,
                v.vcpu_id.map_or_else(|| "?".into(), |x| x.to_string()),
                v.exits,
                v.userspace_exits,
                v.emulated_insns
            )?;
            if !v.reasons.is_empty() {
                writeln!(w, "{}", reason_table(&v.reasons))?;
            }
        }
    }
    if r.lost_records > 0 {
        writeln!(
            w,
            "WARNING: the kernel lost {} records (ring buffer full): counts above are too low; use a larger --mmap-pages.",
            r.lost_records
        )?;
    }
    if r.throttle_events > 0 {
        writeln!(
            w,
            "WARNING: the kernel throttled sampling {} times (kernel.perf_event_max_sample_rate): counts above are too low.",
            r.throttle_events
        )?;
    }
    if r.undecodable_records > 0 {
        writeln!(
            w,
            "WARNING: {} records were too short for their format and were skipped.",
            r.undecodable_records
        )?;
    }
    Ok(())
}

fn render_vmm(w: &mut dyn Write, r: &KvmReport) -> io::Result<()> {
    let t = &r.totals;
    writeln!(w)?;
    writeln!(
        w,
        "VMM-level events: kvm_userspace_exit {}, kvm_pio {}, kvm_mmio {}, kvm_msr {}, kvm_cpuid {}, kvm_emulate_insn {}",
        t.kvm_userspace_exit, t.kvm_pio, t.kvm_mmio, t.kvm_msr, t.kvm_cpuid, t.kvm_emulate_insn
    )?;
    if !r.userspace_exits.is_empty() {
        writeln!(w)?;
        let mut tb = tma_render::table(&["userspace exit", "reason", "count", "share", "rate/s"]);
        for u in &r.userspace_exits {
            tb.add_row(vec![
                u.name.clone(),
                u.reason.to_string(),
                u.count.to_string(),
                format!("{:.2}%", u.share_pct),
                format!("{:.1}", u.rate_per_s),
            ]);
        }
        tma_render::align_right(&mut tb, &[1, 2, 3, 4]);
        writeln!(w, "{tb}")?;
    }
    let timed = |paired: u64, min: Option<f64>, mean: Option<f64>, max: Option<f64>| {
        if paired == 0 {
            vec!["-".to_string(), "-".into(), "-".into()]
        } else {
            vec![us(min), us(mean), us(max)]
        }
    };
    if !r.pio.is_empty() {
        writeln!(w)?;
        let with_time = r.pio.iter().any(|p| p.paired > 0);
        let mut h = vec!["port", "dir", "count", "bytes"];
        if with_time {
            h.extend(["Min Time", "Avg time", "Max Time"]);
        }
        let mut tb = tma_render::table(&h);
        for p in &r.pio {
            let mut row = vec![
                format!("{:#x}", p.port),
                p.direction.clone(),
                p.count.to_string(),
                p.bytes.to_string(),
            ];
            if with_time {
                row.extend(timed(p.paired, p.min_us, p.mean_us, p.max_us));
            }
            tb.add_row(row);
        }
        tma_render::align_right(&mut tb, &[0, 2, 3, 4, 5, 6]);
        writeln!(w, "{tb}")?;
    }
    if !r.mmio.is_empty() {
        writeln!(w)?;
        let mut tb = tma_render::table(&["mmio gpa", "type", "count"]);
        for m in &r.mmio {
            tb.add_row(vec![
                format!("{:#x}", m.gpa),
                m.kind.clone(),
                m.count.to_string(),
            ]);
        }
        tma_render::align_right(&mut tb, &[0, 2]);
        writeln!(w, "{tb}")?;
    }
    if !r.msr.is_empty() {
        writeln!(w)?;
        let with_time = r.msr.iter().any(|p| p.paired > 0);
        let mut h = vec!["msr", "access", "count", "#GP"];
        if with_time {
            h.extend(["Min Time", "Avg time", "Max Time"]);
        }
        let mut tb = tma_render::table(&h);
        for m in &r.msr {
            let mut row = vec![
                format!("{:#x}", m.msr),
                m.access.clone(),
                m.count.to_string(),
                m.gp_faults.to_string(),
            ];
            if with_time {
                row.extend(timed(m.paired, m.min_us, m.mean_us, m.max_us));
            }
            tb.add_row(row);
        }
        tma_render::align_right(&mut tb, &[0, 2, 3, 4, 5, 6]);
        writeln!(w, "{tb}")?;
    }
    if !r.cpuid.is_empty() {
        writeln!(w)?;
        let mut tb = tma_render::table(&["cpuid function", "count"]);
        for c in &r.cpuid {
            tb.add_row(vec![format!("{:#x}", c.function), c.count.to_string()]);
        }
        tma_render::align_right(&mut tb, &[0, 1]);
        writeln!(w, "{tb}")?;
    }
    if r.emulated_insns > 0 {
        writeln!(
            w,
            "emulated instructions: {} ({} failed)",
            r.emulated_insns, r.emulation_failed
        )?;
    }
    if r.kvm_exit_not_emitted.is_some() && r.timer.tsc_deadline_msr_writes > 0 {
        writeln!(
            w,
            "timer: IA32_TSC_DEADLINE (0x6e0) writes {} (the timer-related exit reasons need kvm_exit)",
            r.timer.tsc_deadline_msr_writes
        )?;
    }
    Ok(())
}

/// The `tma kvm --memory --json` document (schema `tma.kvm-memory`, version 1).
pub fn memory_json(
    w: &mut dyn Write,
    report: &crate::memory::MemoryReport,
) -> Result<(), tma_render::OutputError> {
    tma_render::write_json(w, MEMORY_SCHEMA, MEMORY_SCHEMA_VERSION, report)
}

/// `tma kvm --memory` as text: per VMM its THP settings, guest-memory mappings, and verdict.
pub fn memory(w: &mut dyn Write, report: &crate::memory::MemoryReport) -> io::Result<()> {
    use crate::memory::size_text;
    if report.vms.is_empty() && report.unreadable.is_empty() {
        writeln!(w, "no VMM processes found (QEMU, Firecracker, Cloud Hypervisor, crosvm, or a holder of /dev/kvm)")?;
    }
    for (i, vm) in report.vms.iter().enumerate() {
        if i > 0 {
            writeln!(w)?;
        }
        writeln!(w, "VMM pid {} ({})", vm.pid, vm.name)?;
        let opt = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
        writeln!(
            w,
            "THP: system {}, process THP_enabled {}",
            opt(vm.thp.system.map(|m| m.name().to_string())),
            opt(vm.thp.process_enabled.map(|e| if e {
                "1"
            } else {
                "0 (prctl PR_SET_THP_DISABLE)"
            }
            .to_string()))
        )?;
        if let Some(g) = &vm.guest_memfd {
            writeln!(
                w,
                "guest_memfd: {} file(s) open, {} mapped into the VMM; private pages are not mapped, so their page size is not visible here",
                g.fds,
                size_text(g.mapped_bytes)
            )?;
        }
        if !vm.mappings.is_empty() {
            let mut t = tma_render::table(&[
                "Address", "Backing", "Page", "Size", "Resident", "Huge", "Huge%", "Advice", "Path",
            ]);
            for m in &vm.mappings {
                let pct = if m.resident == 0 {
                    "-".to_string()
                } else {
                    format!("{:.0}%", 100.0 * m.huge_bytes as f64 / m.resident as f64)
                };
                t.add_row(vec![
                    format!("{:x}-{:x}", m.start, m.end),
                    m.backing.name().to_string(),
                    size_text(m.page_size),
                    size_text(m.size),
                    size_text(m.resident),
                    size_text(m.huge_bytes),
                    pct,
                    match m.advice {
                        crate::memory::Advice::Hugepage => "hugepage",
                        crate::memory::Advice::NoHugepage => "nohugepage",
                        crate::memory::Advice::None => "-",
                    }
                    .to_string(),
                    m.path.clone(),
                ]);
            }
            tma_render::align_right(&mut t, &[2, 3, 4, 5, 6]);
            writeln!(w, "{t}")?;
        }
        writeln!(w, "verdict: {}", vm.verdict)?;
        if let Some(f) = &vm.fix {
            writeln!(w, "fix: {f}")?;
        }
    }
    for u in &report.unreadable {
        writeln!(w, "pid {}: {}", u.pid, u.error)?;
    }
    Ok(())
}
