//! `tma demo sha256`: portable SHA-256 against the SHA-NI instructions, one stream and four
//! interleaved, and both against the instruction-level bound of `tma bench --preset sha`.

use std::io;
use std::path::Path;

use tma_bench::doc::BenchDoc;
use tma_bench::sha::ShaReport;
use tma_bench::sha_bound::{judge, Kernel, Share};
use tma_bench::ShaBounds;
use tma_workloads::workload::WorkloadReport;

use crate::step::{fmt_opt, fmt_unit, read_report, speedup, strs, Demo, Outcome};
use crate::DemoConfig;

pub(crate) fn run(demo: &mut Demo<'_>, args: &DemoConfig) -> io::Result<()> {
    let (size, iters) = if args.quick {
        ("256K", "8")
    } else {
        ("1M", "512")
    };
    let wl = |imp: &str, streams: &str| {
        strs(&[
            "workload",
            "sha256",
            "--impl",
            imp,
            "--size",
            size,
            "--iters",
            iters,
            "--streams",
            streams,
        ])
    };
    writeln!(
        demo.out,
        "== tma demo sha256: portable SHA-256 vs the SHA-NI instructions =="
    )?;
    let ni = tma_workloads::sha256::Sha256Impl::Ni.is_available();
    demo.say(&format!(
        "The workload hashes {size}-byte buffers {iters} times. This CPU {} the SHA extensions.",
        if ni { "has" } else { "lacks" }
    ))?;

    demo.heading("measure the portable implementation")?;
    demo.say(
        "TMA level 1 splits the pipeline slots into Frontend/Bad speculation/Backend/Retiring.\n\
         Portable SHA-256 is about 3000 scalar ALU instructions per 64-byte block: expect\n\
         Retiring to dominate, i.e. the code is fast at doing too much work. Without a PMU\n\
         `tma stat` says so and shows the software counts it can still take.",
    )?;
    let before = demo.measure(&wl("portable", "1"), &demo.report_path("sha-portable.json"))?;

    if args.locate {
        demo.heading("locate the hot code")?;
        demo.locate(
            &wl("portable", "1"),
            "nearly all samples in the portable compression function \
             (tma_workloads::sha256::bmi2::compress_bmi2 where the CPU has BMI2, else \
             tma_workloads::sha256::sha256_compress_portable), spread over the \
             rotate/xor/add round instructions.",
        )?;
    }

    demo.heading("apply the fix: SHA-NI (two rounds per SHA256RNDS2), measure again")?;
    let after = if ni {
        demo.measure(&wl("ni", "1"), &demo.report_path("sha-ni.json"))?
    } else {
        demo.say("skipped: this CPU lacks SHA-NI (CPUID flag `sha`)")?;
        None
    };

    demo.heading("interleave independent streams (4 buffers at once)")?;
    demo.say(
        "One stream waits on the SHA256RNDS2 latency chain (32 dependent instructions per block);\n\
         independent streams fill those waits, towards the instruction's throughput.",
    )?;
    let inter = if ni {
        let report = demo.report_path("sha-ni-x4.json");
        let _ = std::fs::remove_file(&report);
        let mut a = wl("ni", "4");
        a.push("--report".into());
        a.push(report.display().to_string());
        demo.run(&a)?;
        read_report(&report)
    } else {
        demo.say("skipped: this CPU lacks SHA-NI")?;
        None
    };

    let bounds = if args.bench {
        bench(demo, args.verbose)?
    } else {
        None
    };
    demo.heading("compare")?;
    compare(demo, [&before, &after, &inter], bounds.as_ref())?;
    demo.diff_and_report(
        &demo.report_path("sha-portable.json"),
        &demo.report_path("sha-ni.json"),
        "sha256",
        args.keep_dir,
    )
}

/// The `--preset sha` report of a `tma.bench` document, read through its type.
fn read_sha(path: &Path) -> Option<ShaReport> {
    let bytes = std::fs::read(path).ok()?;
    if tma_render::recognize(&bytes).schema() != Some(tma_bench::render::JSON_SCHEMA) {
        return None;
    }
    serde_json::from_slice::<BenchDoc>(&bytes).ok()?.sha
}

/// The `tma bench --preset sha` step: the bounds, unless the bench did not give them or did
/// not confirm their inputs.
fn bench(demo: &mut Demo<'_>, verbose: bool) -> io::Result<Option<ShaBounds>> {
    demo.heading("the instruction-level bound: measure the SHA-NI instructions")?;
    let out = demo.report_path("bench-sha.json");
    let _ = std::fs::remove_file(&out);
    let mut b = strs(&["bench", "--preset", "sha", "--json", "-o"]);
    b.push(out.display().to_string());
    if let Outcome::Failed(_) = demo.run(&b)? {
        return Ok(None);
    }
    let Some(sha) = read_sha(&out) else {
        demo.say("could not read the bounds from the bench report")?;
        return Ok(None);
    };
    demo.say(&format!(
        "lower-bound terms: the latency chain of one stream (K streams: it / K), and the\n\
         throughput of the block's instruction mix, its instructions measured alone and in mixed\n\
         pairs; the bound of each kernel is the largest term its own figure does not beat (under\n\
         \"compare\"){}",
        if verbose {
            ""
        } else {
            "; -v prints the derivation"
        }
    ))?;
    if let Some(r) = &sha.bounds.reference {
        demo.say(&format!(
            "reference, not a bound: a straightforward schedule of this mix ({}) runs at {:.2} cycles/byte",
            r.name,
            r.cycles / 64.0
        ))?;
    }
    if verbose {
        // Its bound line is the bench's alone; the bound after the kernels is printed under
        // "compare".
        writeln!(demo.out, "derivation of the terms:")?;
        for l in sha
            .bounds
            .derivation
            .iter()
            .filter(|l| !l.starts_with("interleaved bound:"))
        {
            writeln!(demo.out, "  {l}")?;
        }
    }
    let unconfirmed = sha.unconfirmed.len();
    if unconfirmed > 0 {
        demo.say(&format!(
            "the bound is unconfirmed: {unconfirmed} of its measured inputs did not converge (a noisy host);\n\
             the \"of bound\" column is left out rather than shown against a bound that is likely too high"
        ))?;
        return Ok(None);
    }
    Ok(Some(sha.bounds))
}

fn sha(v: Option<&WorkloadReport>) -> Option<&tma_workloads::workload::ShaReport> {
    v.and_then(|v| v.sha256.as_ref())
}

/// The table of the portable, SHA-NI and 4-stream runs, each kernel against the bound of its
/// stream count; a term one of them beats was no lower bound, and is said so instead of a
/// share over 100%.
fn compare(
    demo: &mut Demo<'_>,
    [before, after, inter]: [&Option<WorkloadReport>; 3],
    bounds: Option<&ShaBounds>,
) -> io::Result<()> {
    let kernels: Vec<(usize, Kernel)> = [(1, 1u32, after.as_ref()), (2, 4, inter.as_ref())]
        .into_iter()
        .filter_map(|(row, streams, v)| {
            let c = sha(v)?.cycles_per_byte?;
            Some((
                row,
                Kernel {
                    name: format!(
                        "the SHA-NI kernel, {streams} stream{}",
                        if streams == 1 { "" } else { "s" }
                    ),
                    streams,
                    cycles_per_block: 64.0 * c,
                },
            ))
        })
        .collect();
    let judged = bounds.map(|b| {
        judge(
            b,
            &kernels.iter().map(|(_, k)| k.clone()).collect::<Vec<_>>(),
        )
    });
    let bound_of = |row: usize| -> Option<&Share> {
        let i = kernels.iter().position(|(r, _)| *r == row)?;
        judged.as_ref().map(|j| &j.kernels[i])
    };
    let rows: Vec<(&str, Option<&WorkloadReport>, Option<&Share>)> = vec![
        ("portable", before.as_ref(), None),
        ("SHA-NI, 1 stream", after.as_ref(), bound_of(1)),
        ("SHA-NI, 4 streams", inter.as_ref(), bound_of(2)),
    ];
    let base = sha(before.as_ref()).map(|s| s.ns_per_byte);
    let mut t = tma_render::table(&[
        "variant",
        "ns/byte",
        "GB/s",
        "cycles/byte",
        "speedup",
        "bound c/B",
        "of bound",
    ]);
    for (name, v, bound) in &rows {
        let nspb = sha(*v).map(|s| s.ns_per_byte);
        let cpb = sha(*v).and_then(|s| s.cycles_per_byte);
        let bound_cpb = bound
            .and_then(|b| b.bound.as_ref())
            .map(|t| t.cycles / 64.0);
        let of_bound = bound.and_then(|b| b.share).map(|s| 100.0 * s);
        t.add_row(vec![
            name.to_string(),
            fmt_opt(nspb, 3),
            fmt_opt(sha(*v).map(|s| s.gb_per_second), 3),
            fmt_opt(cpb, 2),
            fmt_unit(speedup(base, nspb), 2, "x"),
            fmt_opt(bound_cpb, 2),
            fmt_unit(of_bound, 0, "%"),
        ]);
    }
    tma_render::align_right(&mut t, &[1, 2, 3, 4, 5, 6]);
    writeln!(
        demo.out,
        "Before/after (CPU time of the timed region; cycles from the core-clock calibration):"
    )?;
    writeln!(demo.out, "{t}")?;
    if let (Some(b), Some(n)) = (base, sha(after.as_ref()).map(|s| s.ns_per_byte)) {
        writeln!(demo.out, "speedup: {:.2}x (SHA-NI over portable)", b / n)?;
    }
    let (Some(j), Some(b)) = (&judged, bounds) else {
        return writeln!(
            demo.out,
            "(no instruction-level bound: the `tma bench --preset sha` step did not give one)"
        );
    };
    writeln!(
        demo.out,
        "lower bounds: one stream {}, interleaved {}",
        if j.chain_held {
            format!(
                "{:.2} cycles/byte (latency chain)",
                b.one_stream_cycles_per_block / 64.0
            )
        } else {
            "n/a (the latency chain was beaten)".into()
        },
        j.interleaved()
            .map_or("n/a (every term was beaten)".into(), |t| format!(
                "{:.2} cycles/byte (bound by {})",
                t.cycles / 64.0,
                t.name
            ))
    )?;
    for k in &j.kernels {
        if let Some(t) = &k.bound {
            writeln!(demo.out, "{}: bound by {}", k.kernel.name, t.name)?;
        }
    }
    for b in &j.beaten {
        writeln!(demo.out, "NOT A LOWER BOUND: {}", b.message())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds read back from what `tma bench --preset sha --json` writes; any other
    /// document gives none.
    #[test]
    fn sha_bounds_read_from_the_bench_document() {
        let figures = tma_bench::sha::ShaFigures {
            rnds2_lat_src: 4.0,
            rnds2_lat_dst: 4.0,
            msg2_lat: 3.0,
            tp: tma_bench::sha::BLOCK_MIX
                .iter()
                .map(|(op, _)| (*op, 1.0))
                .collect(),
            mixed: Vec::new(),
            block_body: Some(40.0),
        };
        let report = ShaReport {
            forms: Vec::new(),
            bounds: tma_bench::sha::bounds(&figures).unwrap(),
            unconfirmed: Vec::new(),
        };
        let outcome = tma_bench::BenchOutcome {
            sha: Some(report.clone()),
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bench.json");
        let mut bytes = Vec::new();
        tma_bench::render::json(&mut bytes, &outcome).unwrap();
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(read_sha(&p), Some(report));
        std::fs::write(&p, br#"{"schema": "tma.stat", "sha": null}"#).unwrap();
        assert_eq!(read_sha(&p), None);
    }
}
