//! `tma demo onednn`: oneDNN's matmul primitive and tma's reference matmul, each with 4 KiB
//! pages and with huge pages, oneDNN's executions as ITT regions.

use std::io;

use tma_workloads::workload::WorkloadReport;

use crate::step::{fmt_opt, fmt_unit, strs, Demo};
use crate::thp::{thp_mode_text, warn_if_thp_off};
use crate::DemoConfig;

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

pub(crate) fn run(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
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
    compare(
        demo,
        [
            dnnl_off.as_ref(),
            dnnl_on.as_ref(),
            ref_off.as_ref(),
            ref_on.as_ref(),
        ],
        pmu,
    )
}

/// The four runs side by side, each against the same code with 4 KiB pages.
fn compare(
    demo: &mut Demo<'_>,
    [dnnl_off, dnnl_on, ref_off, ref_on]: [Option<&WorkloadReport>; 4],
    pmu: bool,
) -> io::Result<()> {
    let rows = [
        OnednnRow {
            name: "oneDNN --thp off",
            report: dnnl_off,
            base: dnnl_off,
        },
        OnednnRow {
            name: "oneDNN --thp on",
            report: dnnl_on,
            base: dnnl_off,
        },
        OnednnRow {
            name: "reference --thp off",
            report: ref_off,
            base: ref_off,
        },
        OnednnRow {
            name: "reference --thp on",
            report: ref_on,
            base: ref_off,
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
            fmt_unit(share.map(|x| 100.0 * x), 0, "%"),
            faults
                .map(|f| f.to_string())
                .unwrap_or_else(|| "n/a".into()),
            fmt_unit(speedup(r), 2, "x"),
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
    if let Some(lib) = dnnl_off.and_then(|v| v.onednn.as_ref()) {
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
