//! The verdict logic of `tma doctor --verify`, on recorded counts
//! (tests/fixtures/doctor/verify/): the good set passes; each corruption fails the check it
//! should, with the reason it should.

use std::path::Path;

use tma_doctor::verify::{judge, parse_recorded, Recorded, Verdict, VerifyReport};

fn good() -> Recorded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/doctor/verify/synthetic-good.json");
    parse_recorded(&std::fs::read(path).unwrap()).unwrap()
}

fn verdict<'a>(r: &'a VerifyReport, id: &str) -> &'a tma_doctor::verify::VerifyRow {
    r.rows
        .iter()
        .find(|x| x.id == id)
        .unwrap_or_else(|| panic!("no row {id}: {:?}", r.rows))
}

#[test]
fn the_good_set_passes_every_check() {
    let r = judge(&good());
    assert!(r.hardware);
    assert!(!r.failed(), "{:#?}", r.rows);
    let ids: Vec<&str> = r.rows.iter().map(|x| x.id.as_str()).collect();
    for id in [
        "software.task_clock",
        "software.context_switches",
        "software.page_faults",
        "exact.add_loop.instructions",
        "exact.add_loop.branches",
        "exact.add_jmp_loop.instructions",
        "exact.add_jmp_loop.branches",
        "multiplex",
        "level1.imul_chain.sum",
        "level1.imul_chain.Core_Bound",
        "level1.pointer_chase_1g.Memory_Bound",
        "level1.random_branch.Bad_Speculation",
        "perf.add_loop",
    ] {
        assert!(ids.contains(&id), "missing {id}: {ids:?}");
    }
    assert!(r.rows.iter().all(|x| x.verdict == Verdict::Pass));
}

#[test]
fn an_instruction_too_many_per_iteration_fails_the_exact_check() {
    let mut rec = good();
    // 100000 more iterations, each retiring one instruction more than built.
    rec.loops[0].instructions[1] += 100_000;
    let r = judge(&rec);
    assert!(r.failed());
    let row = verdict(&r, "exact.add_loop.instructions");
    assert_eq!(row.verdict, Verdict::Fail);
    assert_eq!(
        row.reason,
        "100000 more iterations gave 10300000, not 10200000 = 100000 x 102"
    );
    assert_eq!(
        verdict(&r, "exact.add_loop.branches").verdict,
        Verdict::Pass
    );
}

#[test]
fn counting_kernel_code_shows_as_a_large_harness() {
    let mut rec = good();
    // Both runs 5000 instructions higher: the difference is right, the intercept is not
    // (user-only counting that also counted something else).
    for c in &mut rec.loops[1].instructions {
        *c += 5_000;
    }
    let r = judge(&rec);
    let row = verdict(&r, "exact.add_jmp_loop.instructions");
    assert_eq!(row.verdict, Verdict::Fail);
    assert!(
        row.reason.contains("the harness adds 5037"),
        "{}",
        row.reason
    );
}

#[test]
fn a_bad_multiplex_scale_fails() {
    let mut rec = good();
    let m = rec.multiplex.as_mut().unwrap();
    m.counters[3].value = m.counters[3].value * 102 / 100;
    let r = judge(&rec);
    let row = verdict(&r, "multiplex");
    assert_eq!(row.verdict, Verdict::Fail);
    assert!(row.measured.contains("branches:u#3"), "{}", row.measured);
    assert!(
        row.reason.starts_with("branches:u#3 scaled to"),
        "{}",
        row.reason
    );
    // Never multiplexed: nothing was checked, and that is a failure too.
    let mut rec = good();
    for c in &mut rec.multiplex.as_mut().unwrap().counters {
        c.time_running = c.time_enabled;
    }
    let row = verdict(&judge(&rec), "multiplex").clone();
    assert_eq!(row.verdict, Verdict::Fail);
    assert!(
        row.reason.contains("every counter all the time"),
        "{}",
        row.reason
    );
}

#[test]
fn level_one_must_sum_to_100_and_kernels_land_where_they_should() {
    let mut rec = good();
    *rec.level1[0].nodes.get_mut("Retiring").unwrap() -= 5.0;
    // The pointer chase came out core bound.
    let pc = &mut rec.level1[1].nodes;
    pc.insert("Core_Bound".into(), 60.0);
    pc.insert("Memory_Bound".into(), 35.5);
    let r = judge(&rec);
    let sum = verdict(&r, "level1.imul_chain.sum");
    assert_eq!(sum.verdict, Verdict::Fail);
    assert_eq!(sum.reason, "level 1 sums to 95.0%, not 100%");
    assert_eq!(
        verdict(&r, "level1.imul_chain.Core_Bound").verdict,
        Verdict::Pass
    );
    let mem = verdict(&r, "level1.pointer_chase_1g.Memory_Bound");
    assert_eq!(mem.verdict, Verdict::Fail);
    assert_eq!(mem.reason, "Core_Bound is higher (60.0%)");
    // Bad speculation too low.
    let mut rec = good();
    let rb = &mut rec.level1[2].nodes;
    rb.insert("Bad_Speculation".into(), 20.0);
    rb.insert("Retiring".into(), 55.0);
    let row = verdict(&judge(&rec), "level1.random_branch.Bad_Speculation").clone();
    assert_eq!(row.verdict, Verdict::Fail);
    assert_eq!(row.reason, "Retiring is higher (55.0%)");
}

#[test]
fn software_counts_are_checked_against_the_kernel_accounts() {
    let mut rec = good();
    let s = rec.software.as_mut().unwrap();
    s.task_clock_ns = s.thread_cpu_ns * 11 / 10;
    s.context_switches = s.sleeps - 1;
    s.page_faults = s.pages / 2;
    let r = judge(&rec);
    let tc = verdict(&r, "software.task_clock");
    assert_eq!(tc.verdict, Verdict::Fail);
    assert!(tc.reason.starts_with("task-clock is "), "{}", tc.reason);
    let cs = verdict(&r, "software.context_switches");
    assert_eq!(cs.verdict, Verdict::Fail);
    assert_eq!(cs.reason, "fewer context switches than sleeps (49 < 50)");
    let pf = verdict(&r, "software.page_faults");
    assert_eq!(pf.verdict, Verdict::Fail);
    assert_eq!(pf.reason, "128 faults for 256 fresh pages");
}

#[test]
fn without_a_pmu_only_the_software_path_is_judged() {
    let mut rec = good();
    rec.no_pmu = Some("perf_event_open of instructions:u failed: No such file or directory".into());
    rec.loops.clear();
    rec.multiplex = None;
    rec.level1.clear();
    rec.perf.clear();
    let r = judge(&rec);
    assert!(!r.hardware);
    assert!(!r.failed());
    for id in ["exact", "multiplex", "level1"] {
        assert_eq!(verdict(&r, id).verdict, Verdict::Skip);
    }
    assert!(r.notes[0].contains("only the software counting path was verified"));
    // A PMU that opens but counts nothing is not a pass.
    let mut rec = good();
    rec.loops.clear();
    rec.level1.clear();
    let r = judge(&rec);
    assert_eq!(verdict(&r, "exact").verdict, Verdict::Fail);
    assert_eq!(verdict(&r, "level1").verdict, Verdict::Fail);
    // Level 1 not measurable (no tables for this CPU): a skip that says why.
    rec.level1_skipped = Some("no TMA tables for this CPU".into());
    let r = judge(&rec);
    assert_eq!(verdict(&r, "level1").verdict, Verdict::Skip);
    assert_eq!(verdict(&r, "level1").reason, "no TMA tables for this CPU");
}

#[test]
fn perf_side_by_side_must_agree() {
    let mut rec = good();
    rec.perf[0].perf[1] += 50_000;
    let row = verdict(&judge(&rec), "perf.add_loop").clone();
    assert_eq!(row.verdict, Verdict::Fail);
    assert_eq!(
        row.reason,
        "per iteration we count 102.000, perf stat 102.500"
    );
}

#[test]
fn recordings_of_another_schema_are_refused() {
    let e = parse_recorded(br#"{"schema":"tma.stat","schema_version":1}"#).unwrap_err();
    assert!(e.contains("expected tma.doctor.verify v1"), "{e}");
    assert!(parse_recorded(b"not json").is_err());
}

/// The loops' per-iteration counts follow from their bytes: `add rax, rbx` and the
/// harness's `dec r15; jnz` (and `jmp $+2`), as the bench crate's assembler encodes them.
#[test]
fn loop_bodies_are_what_they_claim() {
    use tma_doctor::verify::{LOOPS, UNROLL};
    let add = tma_bench::asm::resolve(&tma_bench::asm::parse_insn("add rax, rbx").unwrap())
        .unwrap()
        .bytes;
    assert_eq!(LOOPS[0].copy, &[&add[..]]);
    assert_eq!(LOOPS[0].per_iter_instructions(), UNROLL + 2);
    assert_eq!(LOOPS[1].per_iter_instructions(), 2 * UNROLL + 2);
    assert_eq!(LOOPS[1].per_iter_branches(), UNROLL + 1);
    // The image holds UNROLL copies of the body between the prologue and the loop tail.
    let img = LOOPS[1].image().unwrap();
    let body: Vec<u8> = LOOPS[1].copy.concat();
    let n = img.windows(body.len()).filter(|w| *w == &body[..]).count();
    assert_eq!(n as u64, UNROLL);
}

/// Live, on this machine: the software path passes; with a PMU the hardware checks run too.
#[test]
fn live_verify_passes_here() {
    let rec = match tma_doctor::verify::measure(None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("SKIP: cannot count this thread's software events here: {e}");
            return;
        }
    };
    let r = judge(&rec);
    for x in &r.rows {
        if x.id.starts_with("software.") {
            assert_eq!(x.verdict, Verdict::Pass, "{x:?}");
        }
    }
    if rec.no_pmu.is_some() {
        eprintln!("note: no hardware PMU here: the hardware checks were skipped");
    }
}

/// On a machine with a PMU: every hardware check passes (skipped with the reason elsewhere).
#[test]
fn live_verify_hardware_passes() {
    if let Some(why) = no_pmu() {
        println!("skipped: needs a hardware PMU ({why})");
        return;
    }
    let rec = tma_doctor::verify::measure(None).expect("software counting");
    assert!(rec.no_pmu.is_none(), "no PMU: {:?}", rec.no_pmu);
    let r = judge(&rec);
    assert!(!r.failed(), "{:#?}", r.rows);
}

#[test]
fn perf_stat_csv_counts_and_refusals() {
    use tma_doctor::verify::parse_perf_stat_csv;
    let ok = "102037,,instructions:u,1049012,100.00,,\n";
    assert_eq!(parse_perf_stat_csv(ok, "instructions"), Ok(102037));
    let no = "<not supported>,,instructions:u,0,100.00,,\n";
    assert_eq!(
        parse_perf_stat_csv(no, "instructions"),
        Err("perf stat could not count instructions (<not supported>)".into())
    );
    assert!(parse_perf_stat_csv("", "instructions").is_err());
    // Judged: a skipped comparison is a skip row, not a failure.
    let mut rec = good();
    rec.perf.clear();
    rec.perf_skipped = Some("perf is not installed".into());
    let r = judge(&rec);
    assert!(!r.failed());
    assert_eq!(verdict(&r, "perf").verdict, Verdict::Skip);
}

/// The level-1 runs go through `tma stat -l 2` in process: with chosen counts (the synthetic
/// backend, Zen 4 counts of a SHA-256 run) each kernel gets the four level-1 nodes and the
/// Backend_Bound split under the names the checks use, summing to 100.
#[test]
fn level1_of_each_kernel_through_tma_stat() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/live/synthetic-zen4-sha256.json");
    let synthetic: tma_perf::backend::Synthetic =
        serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let got = tma_doctor::verify::measure_level1(
        Path::new("/bin/true"),
        tma_stat::BackendChoice::Synthetic(synthetic),
        Some("zen4".into()),
        tma_host::Host::system(),
    )
    .unwrap();
    let names: Vec<&str> = got.iter().map(|k| k.kernel.as_str()).collect();
    assert_eq!(names, ["imul_chain", "pointer_chase_1g", "random_branch"]);
    for k in &got {
        let keys: Vec<&str> = k.nodes.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "Backend_Bound",
                "Bad_Speculation",
                "Core_Bound",
                "Frontend_Bound",
                "Memory_Bound",
                "Retiring"
            ]
        );
        let sum: f64 = [
            "Frontend_Bound",
            "Bad_Speculation",
            "Backend_Bound",
            "Retiring",
        ]
        .iter()
        .map(|n| k.nodes[*n])
        .sum();
        assert!((sum - 100.0).abs() < 0.5, "{sum}");
    }
}

/// The kernels run (no PMU needed to run them): the JIT code and the 1 GiB chase buffer work.
#[test]
fn kernels_run() {
    for k in ["imul_chain", "random_branch"] {
        tma_doctor::verify::run_kernel(k).unwrap();
    }
    assert!(tma_doctor::verify::run_kernel("nope").is_err());
}

/// The exact-count loops run in this process too (`--run-loop`).
#[test]
fn loops_run() {
    for l in tma_doctor::verify::LOOPS {
        tma_doctor::verify::run_loop(l.name, 1000).unwrap();
    }
    assert!(tma_doctor::verify::run_loop("nope", 1).is_err());
}

/// Why hardware counting cannot be tried here, or None where it can.
fn no_pmu() -> Option<String> {
    tma_host::sysfs::Pmus::why_no_hardware_counting(&tma_host::Host::system())
}

/// With the loop's wall time recorded, task-clock may exceed the thread's CPU time by the
/// time the hypervisor took the vCPU (a loaded host), but never the wall time itself, nor
/// fall under the CPU time.
#[test]
fn task_clock_lies_between_the_cpu_time_and_the_wall_time() {
    let judge_tc = |task: u64, cpu: u64, wall: u64| {
        let mut rec = good();
        let s = rec.software.as_mut().unwrap();
        (s.task_clock_ns, s.thread_cpu_ns, s.wall_ns) = (task, cpu, wall);
        let r = judge(&rec);
        verdict(&r, "software.task_clock").clone()
    };
    // 5% of steal: between the two, a pass.
    assert_eq!(
        judge_tc(105_000_000, 100_000_000, 106_000_000).verdict,
        Verdict::Pass
    );
    // More than the wall time (plus the allowance): counted time it was not running.
    let over = judge_tc(120_000_000, 100_000_000, 106_000_000);
    assert_eq!(over.verdict, Verdict::Fail);
    assert!(
        over.reason.contains("over the loop's wall time"),
        "{}",
        over.reason
    );
    // Under the CPU time.
    let under = judge_tc(90_000_000, 100_000_000, 106_000_000);
    assert_eq!(under.verdict, Verdict::Fail);
    assert!(
        under.reason.contains("under the thread's CPU time"),
        "{}",
        under.reason
    );
    // A recording without the wall time keeps the CPU-time band.
    assert_eq!(judge_tc(105_000_000, 100_000_000, 0).verdict, Verdict::Fail);
}
