//! `tma demo thp`: a reference matmul that reads its weights down their columns, with 4 KiB
//! pages and with transparent huge pages.

use std::io;

use tma_workloads::workload::WorkloadReport;

use crate::step::{fmt_opt, fmt_unit, speedup, strs, Demo};
use crate::DemoConfig;

/// The system THP mode as the demos print it.
pub(crate) fn thp_mode_text<E: std::fmt::Display>(mode: &Result<tma_host::ThpMode, E>) -> String {
    match mode {
        Ok(m) => m.to_string(),
        Err(e) => format!("unknown ({e})"),
    }
}

/// Where THP is off (or its mode unknown), say that `--thp on` cannot gain here, and that
/// `who` so.
pub(crate) fn warn_if_thp_off<E>(
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

pub(crate) fn run(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
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
        t.add_row(vec![
            name.to_string(),
            fmt_opt(s, 3),
            fmt_opt(mm(v).map(|m| m.run.gflops), 3),
            fmt_opt(mm(v).and_then(|m| m.cycles_per_fma), 1),
            fmt_unit(
                mm(v)
                    .and_then(|m| m.run.huge_pages.as_ref())
                    .map(|h| 100.0 * h.share),
                0,
                "%",
            ),
            fmt_unit(speedup(base, s), 2, "x"),
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
