//! Real measurements on this machine with the tsc clock, checked against values that hold on
//! every current x86 core, within 2%: add r64 latency 1, imul r64 latency 3, and throughputs
//! bound by construction: 4 independent add chains = 0.25 and 3 independent imul chains = 1.0
//! (latency-bound: each chain issues one instruction per latency). The best throughput over the
//! chain sweep is core-specific (0.25/1.0 on 4-ALU, 1-multiplier cores such as Zen 3; about
//! 0.19/0.33 on Zen 5, family 0x1a, with 6 ALUs and 3 multipliers), so for it we only
//! check the bounds every core satisfies. The method's rejection rule, medians and bounded
//! retries make these robust to load rather than a loose tolerance.

use std::sync::Mutex;

use tma_bench::{BenchError, ClockChoice, ClockKind, FormReport, Options, Source};

/// One timing at a time: the tests of this file run on parallel threads, and two measurements
/// at once on a 2-CPU machine contend for the core (and, on a VM whose vCPUs are host SMT
/// siblings, for its L1 and ports: a pointer chase then reads 4.3 instead of 4), which is the
/// very noise the figures are checked against. A poisoned lock (a failed test) still serializes.
static TIMING: Mutex<()> = Mutex::new(());

fn bench(src: &Source, opts: &Options) -> Result<FormReport, BenchError> {
    let _one = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    tma_bench::bench(src, opts)
}

/// Figures of a report that came back without any (withheld after a failed self-check).
fn has_figures(r: &FormReport) -> bool {
    r.latency.iter().all(|p| !p.figures.is_empty())
}

fn tsc_opts() -> Options {
    Options {
        clock: ClockChoice::One(ClockKind::Tsc),
        ..Options::default()
    }
}

/// One measurement; None (skipped, with the reason printed) when the self-check refused six
/// times in a row because the host is too contended to calibrate.
fn run(text: &str, opts: &Options) -> Option<FormReport> {
    for _ in 0..6 {
        match bench(&Source::Text(text.into()), opts) {
            Ok(r) if has_figures(&r) => return Some(r),
            Ok(_) => {
                eprintln!("{text}: figures withheld (self-check failed), measuring again");
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(e @ BenchError::SelfCheck { .. }) => {
                eprintln!("{text}: {e}");
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(e) => panic!("{text}: {e}"),
        }
    }
    eprintln!("skipped: the calibration self-check refused 6 times (host too contended)");
    None
}

/// A figure's value, or NaN when tma marked it unconverged (no claim to judge:
/// [`measure_until`] measures again, then skips saying so).
fn claimed(f: &tma_bench::Figure) -> f64 {
    if f.converged {
        f.median
    } else {
        f64::NAN
    }
}

fn lat(r: &FormReport, pair: &str) -> f64 {
    claimed(&r.latency.iter().find(|p| p.pair == pair).unwrap().figures[0])
}

fn tp_best(r: &FormReport) -> f64 {
    claimed(&r.throughput.as_ref().unwrap().best[0])
}

/// A report whose off figure shows the noise itself: some figure marked implausible (`*`) has
/// a p10-p90 spread over 2% of its median. A wrong method gives a tight figure.
fn noisy(r: &FormReport) -> bool {
    r.latency
        .iter()
        .flat_map(|p| &p.figures)
        .chain(r.throughput.iter().flat_map(|t| &t.best))
        .any(|f| !f.snapped_ok && (f.p90 - f.p10) / f.median > 0.02)
}

fn within(x: f64, want: f64) -> bool {
    ((x - want) / want).abs() <= 0.02
}

/// Bounded re-measurement: a figure outside 2% is measured again after a pause (at most 5
/// times in all) so a burst of host noise (another tenant contending for the ALUs slows
/// 1-cycle chains for a second or so) does not fail the test; a wrong method still fails every attempt. When
/// the tool itself refuses (imul/add self-check off by more than 1%: the host is too contended
/// to calibrate), it is asked again after a pause, at most 6 times; if it refuses every time,
/// the test reports that it was skipped (None) instead of judging numbers it never produced.
/// Five misses that disagree with each other by more than 2% are the host's doing too (another
/// tenant on the host's SMT sibling skews a chain by a few percent for minutes, each attempt
/// tight but the attempts apart; seen: a pointer chase at 4.12 to 4.26): that is skipped with
/// the figures printed. A wrong method reads the same every time and still fails.
fn measure_until(
    text: &str,
    opts: &Options,
    want: f64,
    get: impl Fn(&FormReport) -> f64,
) -> Option<f64> {
    let mut last = None;
    let (mut tries, mut refusals) = (0, 0);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    // Whether every attempt that missed showed the host's noise in the figures themselves.
    let mut all_noisy = true;
    while tries < 5 && refusals < 6 {
        match bench(&Source::Text(text.into()), opts) {
            Ok(r) => {
                tries += 1;
                let v = get(&r);
                last = Some(v);
                if within(v, want) {
                    return last;
                }
                all_noisy &= noisy(&r);
                (lo, hi) = (lo.min(v), hi.max(v));
                eprintln!("{text}: {v:.4} (want {want}), measuring again");
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
            Err(e @ BenchError::SelfCheck { .. }) => {
                refusals += 1;
                eprintln!("{text}: {e}");
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(e) => panic!("{text}: {e}"),
        }
    }
    if last.is_none() {
        eprintln!(
            "skipped: the calibration self-check refused {refusals} times (host too contended)"
        );
    }
    if tries == 5 && all_noisy && last.is_some_and(|v| !v.is_nan()) {
        eprintln!("skipped: {text}: every attempt read off its plausible value with a p10-p90 spread over 2% (marked `*`: a noisy host; a wrong method gives a tight figure)");
        return None;
    }
    if last.is_some_and(f64::is_nan) {
        eprintln!("skipped: {text}: tma marked the figure unconverged every time (host too noisy to confirm it)");
        return None;
    }
    if tries == 5 && hi / lo > 1.02 {
        eprintln!("skipped: {text}: the 5 attempts read {lo:.3} to {hi:.3}, off {want} and apart by over 2% (the host's contention, not a method that reads the same every time)");
        return None;
    }
    last
}

#[test]
fn add_latency_is_one_cycle() {
    let mut o = tsc_opts();
    o.throughput = false;
    let Some(v) = measure_until("add rax, rcx", &o, 1.0, |r| lat(r, "1->1")) else {
        return;
    };
    assert!(within(v, 1.0), "add latency {v}");
}

/// A pair across register files is closed with a connector and derived from the chain and the
/// connector round trip. `movq rax, xmm1` closed by `movq xmm1, rax` is the very same loop as
/// the round trip (timed once), so the lower bound is exactly 1 and the upper chain - 1.
#[test]
fn cross_file_pair_is_derived_from_connector_round_trip() {
    let mut o = tsc_opts();
    o.throughput = false;
    let Some(r) = run("movq rax, xmm1", &o) else {
        return;
    };
    let p = r.latency.iter().find(|p| p.pair == "2->1").unwrap();
    assert_eq!(p.body, "movq rax, xmm1; movq xmm1, rax");
    let d = p.derived.as_ref().expect("cross-file pair is derived");
    assert_eq!(d.connector, "movq xmm1, rax");
    assert_eq!(d.round_trip_body, "movq rax, xmm1; movq xmm1, rax");
    assert_eq!(d.chain, d.round_trip);
    assert_eq!(d.lower, 1.0);
    assert!((d.upper - (d.chain - 1.0)).abs() < 1e-9, "{d:?}");
    assert!((p.figures[0].median - d.upper).abs() < 1e-9, "{d:?}");
    assert!(
        (d.lower - (d.chain - d.round_trip + 1.0).clamp(0.0, d.upper)).abs() < 1e-9,
        "{d:?}"
    );
    // Two crossings take at least 2 cycles.
    assert!(d.round_trip >= 1.96, "{d:?}");
}

/// adc reads and writes the flags: flags->flags is a 1-cycle chain on every current core
/// (the carry chain of multi-word additions), with rax's own chain broken by a mov.
#[test]
fn adc_flags_pairs_are_measured() {
    let mut o = tsc_opts();
    o.throughput = false;
    let Some(v) = measure_until("adc rax, rbx", &o, 1.0, |r| lat(r, "3->3")) else {
        return;
    };
    assert!(within(v, 1.0), "adc flags->flags {v}");
    let Some(r) = run("adc rax, rbx", &o) else {
        return;
    };
    let pairs: Vec<String> = r
        .latency
        .iter()
        .map(|p| format!("{} {}->{}", p.pair, p.from, p.to))
        .collect();
    assert_eq!(
        pairs,
        [
            "1->1 rax->rax",
            "1->3 rax->flags",
            "2->1 rbx->rax",
            "2->3 rbx->flags",
            "3->1 flags->rax",
            "3->3 flags->flags"
        ]
    );
    let p = r.latency.iter().find(|p| p.pair == "3->1").unwrap();
    let d = p.derived.as_ref().unwrap();
    assert_eq!(d.connector, "test rax, rax");
    assert!(d.lower <= d.upper && d.upper >= 0.98, "{d:?}");
}

/// mul writes rdx:rax implicitly and reads rax: copies are made independent by reloading rax
/// from a spare register; the result is bounded by the latency chain (every core overlaps
/// independent multiplies at least somewhat: at most 1 per latency) and by 4 per cycle.
#[test]
fn mul_throughput_uses_reloads() {
    let mut o = tsc_opts();
    o.latency = false;
    let Some(r) = run("mul rcx", &o) else {
        return;
    };
    let tp = r.throughput.as_ref().expect("mul throughput measured");
    assert_eq!(tp.per_chains[0].body, "mov rax, r13; mul rcx");
    let v = tp.best[0].median;
    assert!((0.25 * 0.98..=3.0 * 1.02).contains(&v), "mul tp {v}");
    assert!(
        r.notes.iter().any(|n| n.contains("mov rax, r13")),
        "{:?}",
        r.notes
    );
    if let Some(c) = run("cpuid", &o) {
        assert!(c.throughput_note.unwrap().contains("serializing"));
    }
}

/// [`run`] for `bench_all` (presets).
fn run_all(text: &str, opts: &Options) -> Option<Vec<FormReport>> {
    for _ in 0..6 {
        match tma_bench::bench_all(&Source::Text(text.into()), opts) {
            Ok(r) => return Some(r),
            Err(e @ BenchError::SelfCheck { .. }) => {
                eprintln!("{text}: {e}");
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(e) => panic!("{text}: {e}"),
        }
    }
    eprintln!("skipped: the calibration self-check refused 6 times (host too contended)");
    None
}

/// A lone FP division or square root is measured with the fast and the slow value preset,
/// each report saying which; an explicit vector --init turns the presets off.
#[test]
fn fp_div_sqrt_presets() {
    let mut o = tsc_opts();
    o.chains = vec![4];
    for t in ["divsd xmm0, xmm1", "sqrtps xmm0, xmm1"] {
        let Some(r) = run_all(t, &o) else { return };
        let presets: Vec<&str> = r
            .iter()
            .map(|f| f.preset.as_deref().unwrap().split(':').next().unwrap())
            .collect();
        assert_eq!(presets, ["fast", "slow"], "{t}");
        for f in &r {
            // Both presets give a plausible FP divide/sqrt latency (a few to a few dozen cycles).
            let l = f.latency_summary().unwrap_or_else(|| panic!("{f:?}"));
            assert!((3.0..60.0).contains(&l), "{t}: {l}");
        }
        assert!(r[1]
            .preset
            .as_deref()
            .unwrap()
            .contains(if t.starts_with("div") {
                "f64 1.0002"
            } else {
                "f32 1.0002"
            }));
    }
    o.vec_init = vec![(iced_x86::Register::XMM1, 1.5f64.to_le_bytes().repeat(8))];
    o.throughput = false;
    let Some(r) = run_all("divsd xmm0, xmm1", &o) else {
        return;
    };
    assert_eq!(r.len(), 1);
    assert!(r[0].preset.is_none());
}

/// A cross-file chain takes at least 2 cycles (instruction + connector). `sbb rax, rax` only
/// depends on the carry on AMD cores, so its rax->flags chains loop through flags alone in
/// about 1 cycle: those pairs must be withheld with the reason, never reported as "<= 0".
#[test]
fn cross_file_pairs_shorter_than_two_cycles_are_withheld() {
    let mut o = tsc_opts();
    o.throughput = false;
    let Some(r) = run("sbb rax, rax", &o) else {
        return;
    };
    for p in &r.latency {
        if let Some(d) = &p.derived {
            assert!(
                d.chain >= 1.9,
                "{} reported from a {:.3}-cycle chain",
                p.pair,
                d.chain
            );
        }
    }
    let withheld: Vec<&str> = r
        .latency_skipped
        .iter()
        .filter(|(_, why)| why.contains("(< 2)"))
        .map(|(p, _)| p.as_str())
        .collect();
    for p in &withheld {
        assert!(
            r.notes.iter().any(|n| n.starts_with(&format!("pair {p} "))),
            "{:?}",
            r.notes
        );
    }
    eprintln!("withheld on this CPU: {withheld:?}");
}

#[test]
fn imul_latency_is_three_cycles() {
    let mut o = tsc_opts();
    o.throughput = false;
    let Some(v) = measure_until("imul rax, rbx", &o, 3.0, |r| lat(r, "1->1")) else {
        return;
    };
    assert!(within(v, 3.0), "imul latency {v}");
}

#[test]
fn imul_three_chains_is_one_per_cycle() {
    let mut o = tsc_opts();
    o.latency = false;
    o.chains = vec![3];
    let Some(v) = measure_until("imul rax, rbx", &o, 1.0, tp_best) else {
        return;
    };
    assert!(within(v, 1.0), "imul throughput with 3 chains {v}");
}

#[test]
fn add_two_chains_is_half_a_cycle() {
    let mut o = tsc_opts();
    o.latency = false;
    o.chains = vec![2];
    let Some(v) = measure_until("add rax, rcx", &o, 0.5, tp_best) else {
        return;
    };
    assert!(within(v, 0.5), "add throughput with 2 chains {v}");
}

#[test]
fn best_throughputs_are_within_what_any_core_can_do() {
    let mut o = tsc_opts();
    o.latency = false;
    // A best figure tma marks unconverged is not a claim (the host was too noisy to confirm
    // it): measure again, a few times, then skip saying so.
    let mut tries = 0;
    let (add, imul) = loop {
        let (Some(add), Some(imul)) = (run("add rax, rcx", &o), run("imul rax, rbx", &o)) else {
            return;
        };
        let (add, imul) = (add.throughput.unwrap(), imul.throughput.unwrap());
        if add.best[0].converged && imul.best[0].converged {
            break (add, imul);
        }
        tries += 1;
        if tries == 4 {
            eprintln!(
                "skipped: the best throughput stayed unconverged 4 times (host too noisy): add {:?}, imul {:?}",
                add.best[0].repetitions, imul.best[0].repetitions
            );
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let (a, i) = (add.best[0].median, imul.best[0].median);
    eprintln!(
        "add best {a:.4} ({} chains), imul best {i:.4} ({} chains)",
        add.best_chains, imul.best_chains
    );
    // At least 4 adds and 1 imul per cycle (every current core), at most 8 per cycle (no
    // x86 core dispatches more); an uncalibrated or mis-normalised result falls outside.
    assert!((0.125 * 0.98..=0.25 * 1.02).contains(&a), "add tp {a}");
    assert!((0.25 * 0.98..=1.0 * 1.02).contains(&i), "imul tp {i}");
    assert!(add.best_chains >= 4 && imul.best_chains >= 2);
}

#[test]
fn div_by_zero_is_reported_with_a_fix() {
    let mut o = tsc_opts();
    o.throughput = false;
    o.init = vec![(iced_x86::Register::RCX, 0)];
    let e = bench(&Source::Text("div rcx".into()), &o).unwrap_err();
    assert!(matches!(e, BenchError::Fault(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "div rcx raised #DE (SIGFPE): divisor rcx=0; pass --init rcx=3"
    );
}

/// `--init` for vector registers reaches the registers, lane 0 = the last hex digits: the body
/// moves one 64-bit lane of xmm1 into the divisor, which faults exactly when that lane is 0.
#[test]
fn vector_init_values_reach_the_register() {
    let mut o = tsc_opts();
    o.throughput = false;
    let init = |s: &str| match tma_bench::parse_init(s).unwrap() {
        tma_bench::InitValue::Vector(r, b) => vec![(r, b)],
        other => panic!("{other:?}"),
    };
    let run = |body: &str, o: &Options| bench(&Source::Text(body.into()), o);
    // Lane 0 zero, lane 1 non-zero: movq faults, pextrq of lane 1 does not.
    o.vec_init = init("xmm1=0x00000000000000100000000000000000");
    let e = run("movq rcx, xmm1; div rcx", &o).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("div rcx raised #DE (SIGFPE): divisor zero or quotient too large; rcx is written by the body"),
        "{e}"
    );
    match run("pextrq rcx, xmm1, 1; div rcx", &o) {
        Ok(_) | Err(BenchError::SelfCheck { .. }) => {}
        Err(e) => panic!("lane 1 is 0x10, not 0: {e}"),
    }
    // The other way round.
    o.vec_init = init("xmm1=0x00000000000000000000000000000010");
    assert!(run("pextrq rcx, xmm1, 1; div rcx", &o)
        .unwrap_err()
        .to_string()
        .contains("#DE"));
    // Without --init the default pattern (f32 1.5 lanes) is non-zero in every lane.
    o.vec_init.clear();
    match run("movq rcx, xmm1; div rcx", &o) {
        Ok(_) | Err(BenchError::SelfCheck { .. }) => {}
        Err(e) => panic!("default pattern: {e}"),
    }
}

#[test]
fn ud2_raises_sigill() {
    let e = bench(&Source::Bytes(vec![0x0f, 0x0b]), &tsc_opts()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ud2 raised #UD (SIGILL): this CPU does not execute this instruction or encoding"
    );
}

#[test]
fn null_load_is_a_segfault() {
    let mut o = tsc_opts();
    o.init = vec![(iced_x86::Register::RBX, 0)];
    let e = bench(&Source::Text("mov rax, [rbx]".into()), &o).unwrap_err();
    let s = e.to_string();
    assert!(
        s.starts_with("mov rax, [rbx] faulted (SIGSEGV) accessing address 0x0"),
        "{s}"
    );
}

#[test]
fn perf_clock_reports_or_skips() {
    if let Err(why) = tma_bench::clock::available(ClockKind::Perf) {
        eprintln!("skipped: {why}");
        assert!(
            why.contains("no hardware PMU") || why.contains("permission"),
            "{why}"
        );
        return;
    }
    let mut o = tsc_opts();
    o.clock = ClockChoice::One(ClockKind::Perf);
    o.throughput = false;
    let Some(v) = measure_until("imul rax, rbx", &o, 3.0, |r| lat(r, "1->1")) else {
        return;
    };
    assert!(within(v, 3.0), "imul latency on perf clock {v}");
}

#[test]
fn rdpmc_clock_reports_or_skips() {
    if let Err(why) = tma_bench::clock::available(ClockKind::Rdpmc) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut o = tsc_opts();
    o.clock = ClockChoice::One(ClockKind::Rdpmc);
    o.throughput = false;
    let Some(v) = measure_until("add rax, rcx", &o, 1.0, |r| lat(r, "1->1")) else {
        return;
    };
    assert!(within(v, 1.0), "add latency on rdpmc clock {v}");
}

#[test]
fn clock_all_reports_unavailable_clocks_per_clock() {
    let mut o = tsc_opts();
    o.clock = ClockChoice::All;
    o.throughput = false;
    let Some(r) = run("add rax, rcx", &o) else {
        return;
    };
    assert_eq!(r.clocks.len(), 4);
    let tsc = r.clocks.iter().find(|c| c.clock == ClockKind::Tsc).unwrap();
    assert!(tsc.unavailable.is_none());
    for c in &r.clocks {
        if let (false, Some(why)) = (c.clock == ClockKind::Tsc, &c.unavailable) {
            eprintln!("{}: {why}", c.clock);
        }
    }
    // Raw TSC ticks per add: positive and finite; the calibrated figure is in cycles.
    let f = &r.latency[0].figures[0];
    assert!(f.raw_tsc_ticks > 0.0 && f.raw_tsc_ticks.is_finite());
}

/// The body row of a latency measurement (a pointer chase has no register pair).
fn body_fig(r: &FormReport) -> &tma_bench::Figure {
    &r.latency
        .iter()
        .find(|p| p.pair == "body")
        .expect("a body row")
        .figures[0]
}

/// Its value, NaN when unconverged ([`claimed`]).
fn body_lat(r: &FormReport) -> f64 {
    claimed(body_fig(r))
}

/// L1 load-to-use latency through a pointer chase (`mov rax, [rax]`, the buffer holds the
/// address itself): 4 or 5 cycles on every current x86 core (Zen: 4 with a simple address,
/// 5 with an index; Intel: 4-5). The figure is printed either way.
#[test]
fn pointer_chase_gives_the_l1_load_to_use_latency() {
    let mut o = tsc_opts();
    o.throughput = false;
    for text in ["mov rax, [rax]", "mov rax, [rax+rbx*8]"] {
        let Some(r) = run(text, &o) else {
            return;
        };
        let v = body_lat(&r);
        eprintln!(
            "{text}: {v:.3} cycles (converged: {})",
            r.latency[0].figures[0].converged
        );
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("pointer chase over one cache line")),
            "{:?}",
            r.notes
        );
        let v = if within(v, 4.0) || within(v, 5.0) {
            v
        } else {
            // A burst of host noise: measure again (bounded) before judging.
            match measure_until(text, &o, v.round().clamp(4.0, 5.0), body_lat) {
                Some(v) => v,
                None => return,
            }
        };
        assert!(within(v, 4.0) || within(v, 5.0), "{text}: {v}");
    }
}

/// `add rax, [rbx]`: rbx points into the harness buffer; rax->rax is a 1-cycle chain and the
/// loads are independent, so the throughput is below 1 (at least two loads per cycle on every
/// current core).
#[test]
fn memory_source_operands_read_the_buffer() {
    let o = tsc_opts();
    let Some(v) = measure_until("add rax, [rbx]", &o, 1.0, |r| lat(r, "1->1")) else {
        return;
    };
    assert!(within(v, 1.0), "add rax, [rbx] latency 1->1 {v}");
    let Some(r) = run("add rax, [rbx]", &o) else {
        return;
    };
    let tp = r.throughput_summary().unwrap();
    eprintln!("add rax, [rbx]: throughput {tp:.3}");
    assert!(tp > 0.2 && tp < 0.9, "{tp}");
}

/// Store-to-load forwarding: a store and a dependent load of the same location. Its cost is
/// core-specific (memory renaming can make it very short); it is at least the 1 cycle of a
/// dependent operation and far below an L2 round trip.
#[test]
fn store_to_load_forwarding_is_timed() {
    let mut o = tsc_opts();
    o.throughput = false;
    let Some(r) = run("mov [rbx], rax; mov rax, [rbx]", &o) else {
        return;
    };
    let v = body_fig(&r).median;
    eprintln!("store-to-load forwarding (mov [rbx], rax; mov rax, [rbx]): {v:.3} cycles");
    assert!((0.9..14.0).contains(&v), "{v}");
}

/// A pointer chase over 64 MiB in random line order misses every cache: far slower than L1.
#[test]
fn a_chase_over_a_large_buffer_leaves_the_caches() {
    let mut o = tsc_opts();
    o.throughput = false;
    o.method.mem = Some(64 << 20);
    o.method.reps = 5;
    let Some(r) = run("mov rax, [rax]", &o) else {
        return;
    };
    let v = body_fig(&r).median;
    eprintln!("pointer chase over 64 MiB: {v:.1} cycles per load");
    assert!(v > 20.0, "{v}");
}
