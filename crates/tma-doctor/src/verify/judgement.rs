//! Judging recorded counts: the pass/fail rows of each check ([`judge`]).

use super::tolerance;
use super::{
    Level1Counts, LoopCounts, MultiplexCounts, PerfCounts, Recorded, Scaled, SoftwareCounts,
    Verdict, VerifyReport, VerifyRow,
};

fn row(
    id: impl Into<String>,
    expected: String,
    measured: String,
    ok: bool,
    why: String,
) -> VerifyRow {
    VerifyRow {
        id: id.into(),
        expected,
        measured,
        verdict: if ok { Verdict::Pass } else { Verdict::Fail },
        reason: if ok { String::new() } else { why },
    }
}

fn skip(id: impl Into<String>, why: impl Into<String>) -> VerifyRow {
    VerifyRow {
        id: id.into(),
        expected: String::new(),
        measured: String::new(),
        verdict: Verdict::Skip,
        reason: why.into(),
    }
}

/// Judge recorded counts.
pub fn judge(r: &Recorded) -> VerifyReport {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    match &r.software {
        Some(s) => judge_software(s, &mut rows),
        None => rows.push(skip("software", "no software counts recorded")),
    }
    if let Some(why) = &r.interrupted {
        rows.push(skip("interrupted", format!("stopped by {why}")));
        notes.push(format!(
            "interrupted ({why}): the checks from that step on were not run; the rows above \
             it are judged as measured"
        ));
    }
    let hardware = r.no_pmu.is_none();
    if let Some(why) = &r.no_pmu {
        notes.push(format!(
            "no hardware PMU here ({why}): only the software counting path was verified; \
             run `tma doctor --verify` on a machine with a PMU for the exact-count, \
             multiplexing and level-1 checks"
        ));
        for id in ["exact", "multiplex", "level1"] {
            rows.push(skip(id, "no hardware PMU"));
        }
    } else {
        if r.loops.is_empty() && r.interrupted.is_none() {
            rows.push(row(
                "exact",
                "loop counts".into(),
                "none".into(),
                false,
                "the PMU opened but no loop was counted".into(),
            ));
        }
        for l in &r.loops {
            judge_loop(l, &mut rows);
        }
        match &r.multiplex {
            Some(m) => judge_multiplex(m, &mut rows),
            None if r.interrupted.is_some() => rows.push(skip("multiplex", "interrupted")),
            None => rows.push(skip("multiplex", "not measured")),
        }
        if r.level1.is_empty() {
            rows.push(match &r.level1_skipped {
                Some(why) => skip("level1", why.clone()),
                None if r.interrupted.is_some() => skip("level1", "interrupted"),
                None => row(
                    "level1",
                    "three kernels".into(),
                    "none".into(),
                    false,
                    "no level-1 result was recorded".into(),
                ),
            });
        }
        for k in &r.level1 {
            judge_level1(k, &mut rows);
        }
    }
    for p in &r.perf {
        judge_perf(p, &mut rows);
    }
    if let Some(why) = &r.perf_skipped {
        rows.push(skip("perf", why.clone()));
    }
    VerifyReport {
        source: r.source.clone(),
        hardware,
        rows,
        notes,
    }
}

fn judge_software(s: &SoftwareCounts, rows: &mut Vec<VerifyRow>) {
    use tolerance::*;
    let allowed = (s.thread_cpu_ns as f64 * TASK_CLOCK_REL) as u64 + TASK_CLOCK_ABS_NS;
    let diff = s.task_clock_ns.abs_diff(s.thread_cpu_ns);
    if s.wall_ns > 0 {
        // Between the thread's CPU time (less the allowance) and the loop's wall time: a
        // single task cannot be on its CPU longer than the time that passed.
        let low = s.thread_cpu_ns.saturating_sub(allowed);
        let high = s.wall_ns.max(s.thread_cpu_ns) + allowed;
        let ok = s.thread_cpu_ns > 0 && (low..=high).contains(&s.task_clock_ns);
        rows.push(row(
            "software.task_clock",
            format!(
                "{low}..{high} ns (thread CPU time {} .. wall time {}, ± {allowed})",
                s.thread_cpu_ns, s.wall_ns
            ),
            format!("{} ns", s.task_clock_ns),
            ok,
            if s.task_clock_ns < low {
                format!("task-clock is {diff} ns under the thread's CPU time")
            } else {
                format!(
                    "task-clock is {} ns over the loop's wall time: it counted time the task \
                     was not running",
                    s.task_clock_ns
                        .saturating_sub(s.wall_ns.max(s.thread_cpu_ns))
                )
            },
        ));
    } else {
        rows.push(row(
            "software.task_clock",
            format!("{} ns (thread CPU time) ± {allowed}", s.thread_cpu_ns),
            format!("{} ns", s.task_clock_ns),
            s.thread_cpu_ns > 0 && diff <= allowed,
            format!("task-clock is {diff} ns away from the thread's CPU time"),
        ));
    }
    let cs_ok = s.context_switches >= s.sleeps
        && s.context_switches.abs_diff(s.rusage_switches) <= RUSAGE_SLACK;
    rows.push(row(
        "software.context_switches",
        format!(
            ">= {} sleeps, = getrusage {} ± {RUSAGE_SLACK}",
            s.sleeps, s.rusage_switches
        ),
        s.context_switches.to_string(),
        cs_ok,
        if s.context_switches < s.sleeps {
            format!(
                "fewer context switches than sleeps ({} < {})",
                s.context_switches, s.sleeps
            )
        } else {
            format!(
                "getrusage counted {} switches, the counter {}",
                s.rusage_switches, s.context_switches
            )
        },
    ));
    let pf_ok = s.page_faults >= s.pages
        && s.page_faults <= s.pages + FAULT_EXTRA
        && s.page_faults.abs_diff(s.rusage_minor_faults) <= RUSAGE_SLACK;
    rows.push(row(
        "software.page_faults",
        format!(
            "{}..{} (one per fresh page), = getrusage {} ± {RUSAGE_SLACK}",
            s.pages,
            s.pages + FAULT_EXTRA,
            s.rusage_minor_faults
        ),
        s.page_faults.to_string(),
        pf_ok,
        if s.page_faults < s.pages || s.page_faults > s.pages + FAULT_EXTRA {
            format!("{} faults for {} fresh pages", s.page_faults, s.pages)
        } else {
            format!(
                "getrusage counted {} minor faults, the counter {}",
                s.rusage_minor_faults, s.page_faults
            )
        },
    ));
}

/// One event of a loop: the difference between the two runs must be exactly the model's,
/// and the intercept (the harness) small and non-negative.
fn judge_exact(
    id: String,
    per_iter: u64,
    iters: [u64; 2],
    counts: [u64; 2],
    harness_max: u64,
    rows: &mut Vec<VerifyRow>,
) {
    let di = iters[1].saturating_sub(iters[0]);
    let want = di * per_iter;
    let got = counts[1] as i128 - counts[0] as i128;
    let slack = (want / 10_000_000) * tolerance::PER_TEN_MILLION;
    let intercept = counts[0] as i128 - (iters[0] * per_iter) as i128;
    let diff_ok = (got - want as i128).unsigned_abs() <= slack as u128;
    let intercept_ok = (0..=harness_max as i128).contains(&intercept);
    let why = if !diff_ok {
        format!(
            "{} more iterations gave {got}, not {want} = {di} x {per_iter}",
            di
        )
    } else {
        format!(
            "the harness adds {intercept} (expected 0..={harness_max}): counts include \
             something other than the loop"
        )
    };
    rows.push(row(
        id,
        format!("{want} (+{di} iterations x {per_iter}), harness 0..={harness_max}"),
        format!("{got}, harness {intercept}"),
        diff_ok && intercept_ok,
        why,
    ));
}

fn judge_loop(l: &LoopCounts, rows: &mut Vec<VerifyRow>) {
    judge_exact(
        format!("exact.{}.instructions", l.name),
        l.per_iter_instructions,
        l.iters,
        l.instructions,
        tolerance::HARNESS_INSTRUCTIONS,
        rows,
    );
    judge_exact(
        format!("exact.{}.branches", l.name),
        l.per_iter_branches,
        l.iters,
        l.branches,
        tolerance::HARNESS_BRANCHES,
        rows,
    );
}

fn judge_multiplex(m: &MultiplexCounts, rows: &mut Vec<VerifyRow>) {
    let multiplexed = m.counters.iter().any(|c| c.time_running < c.time_enabled);
    if !multiplexed {
        rows.push(row(
            "multiplex",
            "some counters multiplexed (running < enabled)".into(),
            format!("{} counters, all always running", m.counters.len()),
            false,
            "the kernel scheduled every counter all the time: more counters than the PMU has \
             should have forced multiplexing (is the NMI watchdog off and the PMU larger than \
             expected?)"
                .into(),
        ));
        return;
    }
    let mut worst: Option<(f64, &Scaled)> = None;
    for c in &m.counters {
        let err = match c.scaled() {
            Some(s) => (s - c.expected as f64).abs() / (c.expected.max(1) as f64),
            None => f64::INFINITY,
        };
        if worst.is_none_or(|(w, _)| err > w) {
            worst = Some((err, c));
        }
    }
    let Some((err, c)) = worst else { return };
    rows.push(row(
        "multiplex",
        format!(
            "{} scaled totals within {}% of exact",
            m.counters.len(),
            tolerance::MULTIPLEX_REL * 100.0
        ),
        format!("worst {:.3}% ({})", err * 100.0, c.event),
        err <= tolerance::MULTIPLEX_REL,
        match c.scaled() {
            Some(s) => format!(
                "{} scaled to {s:.0} ({} x {}/{}) against exactly {}",
                c.event, c.value, c.time_enabled, c.time_running, c.expected
            ),
            None => format!("{} never ran", c.event),
        },
    ));
}

const LEVEL1: [&str; 4] = [
    "Frontend_Bound",
    "Bad_Speculation",
    "Backend_Bound",
    "Retiring",
];

fn judge_level1(k: &Level1Counts, rows: &mut Vec<VerifyRow>) {
    let missing: Vec<&str> = LEVEL1
        .iter()
        .copied()
        .filter(|n| !k.nodes.contains_key(*n))
        .collect();
    if !missing.is_empty() {
        rows.push(row(
            format!("level1.{}.sum", k.kernel),
            "four level-1 nodes".into(),
            format!("missing {}", missing.join(", ")),
            false,
            "level 1 is incomplete".into(),
        ));
        return;
    }
    let sum: f64 = LEVEL1.iter().map(|n| k.nodes[*n]).sum();
    rows.push(row(
        format!("level1.{}.sum", k.kernel),
        format!("100% ± {}", tolerance::LEVEL1_SUM_POINTS),
        format!("{sum:.1}%"),
        (sum - 100.0).abs() <= tolerance::LEVEL1_SUM_POINTS,
        format!("level 1 sums to {sum:.1}%, not 100%"),
    ));
    // The rivals of the expected node: the other level-1 nodes (for Core/Memory_Bound,
    // whose parent is Backend_Bound, the sibling instead of the parent).
    let rivals: Vec<&str> = match k.expect.as_str() {
        "Core_Bound" => vec![
            "Frontend_Bound",
            "Bad_Speculation",
            "Retiring",
            "Memory_Bound",
        ],
        "Memory_Bound" => vec![
            "Frontend_Bound",
            "Bad_Speculation",
            "Retiring",
            "Core_Bound",
        ],
        e => LEVEL1.iter().copied().filter(|n| *n != e).collect(),
    };
    let Some(&got) = k.nodes.get(&k.expect) else {
        rows.push(row(
            format!("level1.{}.{}", k.kernel, k.expect),
            format!("{} high", k.expect),
            "missing".into(),
            false,
            format!("no {} value", k.expect),
        ));
        return;
    };
    let top_rival = rivals
        .iter()
        .filter_map(|n| k.nodes.get(*n).map(|v| (*n, *v)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let beats = top_rival.is_none_or(|(_, v)| got > v);
    let ok = got >= tolerance::KERNEL_NODE_MIN && beats;
    rows.push(row(
        format!("level1.{}.{}", k.kernel, k.expect),
        format!(
            "{} >= {}% and above {}",
            k.expect,
            tolerance::KERNEL_NODE_MIN,
            rivals.join("/")
        ),
        format!("{got:.1}%"),
        ok,
        match top_rival {
            Some((n, v)) if !beats => format!("{n} is higher ({v:.1}%)"),
            _ => format!("{} is only {got:.1}%", k.expect),
        },
    ));
}

fn judge_perf(p: &PerfCounts, rows: &mut Vec<VerifyRow>) {
    let di = p.iters[1].saturating_sub(p.iters[0]).max(1) as f64;
    let ours = (p.ours[1] as f64 - p.ours[0] as f64) / di;
    let perf = (p.perf[1] as f64 - p.perf[0] as f64) / di;
    let rel = (ours - perf).abs() / perf.abs().max(1.0);
    rows.push(row(
        format!("perf.{}", p.name),
        format!(
            "perf stat = ours per iteration ({} by construction)",
            p.per_iter_instructions
        ),
        format!("ours {ours:.3}, perf {perf:.3}"),
        rel <= tolerance::PERF_REL,
        format!("per iteration we count {ours:.3}, perf stat {perf:.3}"),
    ));
}
