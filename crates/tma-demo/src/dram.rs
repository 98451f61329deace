//! `tma demo dram`: a dependent pointer chase through DRAM, then the same chase with a
//! jump-pointer prefetch.

use std::io;

use tma_workloads::workload::WorkloadReport;

use crate::step::{fmt_opt, fmt_unit, speedup, strs, Demo};
use crate::DemoConfig;

pub(crate) fn run(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
    let (size, accesses) = if args.quick {
        ("128M", "1000000")
    } else {
        ("512M", "20000000")
    };
    let wl = |prefetch: bool| {
        let mut v = strs(&["workload", "dram", "--size", size, "--accesses", accesses]);
        if prefetch {
            v.push("--prefetch".into());
        }
        v
    };
    writeln!(
        demo.out,
        "== tma demo dram: a dependent pointer chase through {size}, then with a prefetch =="
    )?;
    demo.say(
        "Each load's address comes from the previous load, through a random cycle over a buffer\n\
         far larger than the last-level cache: one DRAM round trip per step, no prefetcher can\n\
         guess the next address.",
    )?;
    demo.heading("measure the chase")?;
    demo.say(
        "Expected TMA: Backend_Bound > Memory_Bound > DRAM_Bound (latency, not bandwidth). Without\n\
         a PMU `tma stat` says so and shows the software counts.",
    )?;
    let before = demo.measure(&wl(false), &demo.report_path("dram.json"))?;
    if args.locate {
        demo.heading("locate the hot code")?;
        demo.locate(
            &wl(false),
            "the samples land in tma_workloads::dram::chase, on the load of `node.next` (or the \
             instruction after it: timer samples can skid), the load every step waits for. The \
             chain set-up (DramChain::build) also shows, since it runs before the timed loop.",
        )?;
    }
    demo.heading("apply the fix: jump-pointer prefetch 16 steps ahead, measure again")?;
    demo.say(
        "Each node also stores the node 16 steps further on; prefetching it keeps up to 16\n\
         misses in flight, so a step costs about latency/16 until other limits take over.",
    )?;
    let after = demo.measure(&wl(true), &demo.report_path("dram-prefetch.json"))?;

    demo.heading("compare")?;
    fn dram(v: Option<&WorkloadReport>) -> Option<&tma_workloads::workload::DramReport> {
        v.and_then(|v| v.dram.as_ref())
    }
    let base = dram(before.as_ref()).map(|d| d.ns_per_access);
    let mut t = tma_render::table(&[
        "variant",
        "ns/access",
        "accesses/s",
        "cycles/access",
        "speedup",
    ]);
    for (name, v) in [
        ("no prefetch", before.as_ref()),
        ("prefetch", after.as_ref()),
    ] {
        let ns = dram(v).map(|d| d.ns_per_access);
        t.add_row(vec![
            name.to_string(),
            fmt_opt(ns, 2),
            fmt_opt(dram(v).map(|d| d.accesses_per_second), 0),
            fmt_opt(dram(v).and_then(|d| d.cycles_per_access), 1),
            fmt_unit(speedup(base, ns), 2, "x"),
        ]);
    }
    tma_render::align_right(&mut t, &[1, 2, 3, 4]);
    writeln!(
        demo.out,
        "Before/after (CPU time of the timed region; cycles from the core-clock calibration):"
    )?;
    writeln!(demo.out, "{t}")?;
    if let (Some(b), Some(n)) = (base, dram(after.as_ref()).map(|d| d.ns_per_access)) {
        writeln!(
            demo.out,
            "speedup: {:.2}x (prefetch over no prefetch)",
            b / n
        )?;
    }
    demo.diff_and_report(
        &demo.report_path("dram.json"),
        &demo.report_path("dram-prefetch.json"),
        "dram",
        args.keep_dir,
    )
}
