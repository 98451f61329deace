//! Taking the counts on this machine ([`measure`]): software events of this thread, the exact
//! loops, multiplexing, `perf stat` side by side and the level-1 kernels.

use std::collections::BTreeMap;
use std::io;

use tma_perf::event::SoftwareEvent;
use tma_perf::selfcount::{self, SelfGroup};

use super::loops::{KERNELS, LOOPS};
use super::{
    Level1Counts, LoopCounts, MultiplexCounts, PerfCounts, Recorded, Scaled, SoftwareCounts,
};

/// `Some(what to record)` when a signal asked the run to stop, before `step`.
fn stop_before(step: &str) -> Option<String> {
    tma_sys::signal::interrupted().map(|sig| format!("{} before {step}", sig.name()))
}

/// Iteration counts of the exact check, and repetitions (the fewest counts are kept: an
/// interrupt can only add).
const EXACT_ITERS: [u64; 2] = [1_000, 101_000];
const REPEAT: usize = 3;
/// Iterations and counters of the multiplexing run (about 0.1-0.3 s).
const MUX_ITERS: u64 = 2_000_000;
const MUX_COUNTERS: usize = 12;

/// The percent-of-slots nodes of a `tma.stat` JSON document, under the names the checks use
/// (`tma_core_bound` and Zen's `backend_bound_cpu` are both `Core_Bound`).
pub fn level1_nodes(stat_json: &[u8]) -> Result<BTreeMap<String, f64>, String> {
    let v: serde_json::Value = serde_json::from_slice(stat_json).map_err(|e| e.to_string())?;
    let nodes = v["intervals"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|i| i["nodes"].as_array())
        .ok_or("the tma.stat document has no intervals with nodes")?;
    let mut out = BTreeMap::new();
    for n in nodes {
        let (Some(name), Some(value)) = (n["name"].as_str(), n["value"].as_f64()) else {
            continue;
        };
        let canonical = match name.trim_start_matches("tma_") {
            "frontend_bound" => "Frontend_Bound",
            "bad_speculation" => "Bad_Speculation",
            "backend_bound" => "Backend_Bound",
            "retiring" => "Retiring",
            "core_bound" | "backend_bound_cpu" => "Core_Bound",
            "memory_bound" | "backend_bound_memory" => "Memory_Bound",
            _ => continue,
        };
        out.insert(canonical.to_string(), value);
    }
    Ok(out)
}

/// `tma stat -l 2` of each kernel (`exe doctor --run-kernel NAME`), in process, with the
/// given backend (perf_event_open, or chosen counts in tests).
pub fn measure_level1(
    exe: &std::path::Path,
    backend: tma_stat::BackendChoice,
    cpu: Option<String>,
    host: tma_host::Host,
) -> Result<Vec<Level1Counts>, String> {
    let mut out = Vec::new();
    for k in &KERNELS {
        if let Some(sig) = tma_sys::signal::interrupted() {
            return Err(format!(
                "interrupted by {} before the kernel {}",
                sig.name(),
                k.name
            ));
        }
        let cfg = tma_stat::StatConfig {
            cpu: cpu.clone(),
            level: 2,
            render: tma_stat::RenderOptions {
                format: tma_stat::Format::Json,
                verbose: 1,
                ..tma_stat::RenderOptions::default()
            },
            input: tma_stat::Input::Live(tma_stat::LiveOptions {
                target: tma_stat::LiveTarget::Command(vec![
                    exe.as_os_str().to_owned(),
                    "doctor".into(),
                    "--run-kernel".into(),
                    k.name.into(),
                ]),
                backend: backend.clone(),
                command_stdout: tma_perf::process::CommandStdout::Null,
                ..tma_stat::LiveOptions::default()
            }),
            host: host.clone(),
            ..tma_stat::StatConfig::default()
        };
        let mut json = Vec::new();
        let mut sink = tma_stat::TreeOutput::new(&mut json, &cfg.render);
        tma_stat::run(&cfg, &mut sink, &mut std::io::sink())
            .map_err(|e| format!("tma stat -l 2 of {}: {e}", k.name))?;
        out.push(Level1Counts {
            kernel: k.name.into(),
            expect: k.expect.into(),
            nodes: level1_nodes(&json)?,
        });
    }
    Ok(out)
}

/// The first field of `perf stat -x,` output for an event: its count, or why there is none.
pub fn parse_perf_stat_csv(text: &str, event: &str) -> Result<u64, String> {
    let line = text
        .lines()
        .find(|l| l.split(',').nth(2).is_some_and(|e| e.starts_with(event)))
        .ok_or_else(|| format!("perf stat printed no {event} line"))?;
    let first = line.split(',').next().unwrap_or("").trim();
    first
        .parse::<u64>()
        .map_err(|_| format!("perf stat could not count {event} ({first})"))
}

/// `perf stat -x, -e instructions:u` of `exe doctor --run-loop NAME --iters N`, for the two
/// iteration counts of each exact loop.
fn measure_perf(exe: &std::path::Path, loops: &[LoopCounts]) -> Result<Vec<PerfCounts>, String> {
    let mut out = Vec::new();
    for l in loops {
        let mut perf = [0u64; 2];
        for (k, &iters) in l.iters.iter().enumerate() {
            let o = std::process::Command::new("perf")
                .args(["stat", "-x,", "-e", "instructions:u", "--"])
                .arg(exe)
                .args([
                    "doctor",
                    "--run-loop",
                    &l.name,
                    "--iters",
                    &iters.to_string(),
                ])
                .output()
                .map_err(|e| format!("perf is not installed or cannot run ({e})"))?;
            if !o.status.success() {
                return Err(format!(
                    "perf stat failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            perf[k] = parse_perf_stat_csv(&String::from_utf8_lossy(&o.stderr), "instructions")?;
        }
        out.push(PerfCounts {
            name: l.name.clone(),
            per_iter_instructions: l.per_iter_instructions,
            iters: l.iters,
            ours: l.instructions,
            perf,
        });
    }
    Ok(out)
}

/// Take the counts on this machine (`exe`: this program, for `perf stat` to run the loops;
/// `None` skips the perf comparison). Errors only when even software counting of this
/// thread is impossible.
pub fn measure(exe: Option<&std::path::Path>) -> io::Result<Recorded> {
    let software = measure_software()?;
    let mut rec = Recorded {
        source: "live".into(),
        software: Some(software),
        ..Recorded::default()
    };
    if let Some(at) = stop_before("the hardware checks") {
        rec.interrupted = Some(at);
        return Ok(rec);
    }
    let hw = [
        selfcount::hardware(selfcount::HW_INSTRUCTIONS, true),
        selfcount::hardware(selfcount::HW_BRANCH_INSTRUCTIONS, true),
    ];
    let group = match SelfGroup::open(&hw) {
        Ok(g) => g,
        Err(e) => {
            rec.no_pmu = Some(format!(
                "perf_event_open of instructions:u and branches:u failed: {}",
                tma_sys::advice::explain(tma_sys::advice::Op::PerfOpenUser, &e)
            ));
            return Ok(rec);
        }
    };
    let mut intercepts = Vec::new();
    for spec in &LOOPS {
        if let Some(at) = stop_before(&format!("the exact-count loop {}", spec.name)) {
            rec.interrupted = Some(at);
            return Ok(rec);
        }
        let mut code = spec.load()?;
        let mut lc = LoopCounts {
            name: spec.name.into(),
            per_iter_instructions: spec.per_iter_instructions(),
            per_iter_branches: spec.per_iter_branches(),
            iters: EXACT_ITERS,
            instructions: [u64::MAX; 2],
            branches: [u64::MAX; 2],
        };
        for (k, &iters) in EXACT_ITERS.iter().enumerate() {
            for _ in 0..REPEAT {
                group.start()?;
                code.run(iters);
                group.stop()?;
                let r = group.read()?;
                lc.instructions[k] = lc.instructions[k].min(r.values[0].0);
                lc.branches[k] = lc.branches[k].min(r.values[1].0);
            }
        }
        intercepts.push((
            lc.instructions[0].saturating_sub(EXACT_ITERS[0] * lc.per_iter_instructions),
            lc.branches[0].saturating_sub(EXACT_ITERS[0] * lc.per_iter_branches),
        ));
        rec.loops.push(lc);
    }
    drop(group);
    if let Some(at) = stop_before("the multiplexing check") {
        rec.interrupted = Some(at);
        return Ok(rec);
    }
    rec.multiplex = Some(measure_multiplex(intercepts.first().copied())?);
    match exe {
        Some(exe) => {
            if let Some(at) = stop_before("the perf stat comparison") {
                rec.interrupted = Some(at);
                return Ok(rec);
            }
            match measure_perf(exe, &rec.loops) {
                Ok(p) => rec.perf = p,
                Err(why) => rec.perf_skipped = Some(why),
            }
            if let Some(at) = stop_before("the level-1 kernels") {
                rec.interrupted = Some(at);
                return Ok(rec);
            }
            match measure_level1(
                exe,
                tma_stat::BackendChoice::Live,
                None,
                tma_host::Host::system(),
            ) {
                Ok(l) => rec.level1 = l,
                Err(why) => rec.level1_skipped = Some(why),
            }
        }
        None => {
            rec.perf_skipped = Some("no program path to run the loops under perf".into());
            rec.level1_skipped = Some("no program path to run the kernels under tma stat".into());
        }
    }
    Ok(rec)
}

/// More single-event groups than the PMU has counters, over one long run of the first loop.
fn measure_multiplex(intercept: Option<(u64, u64)>) -> io::Result<MultiplexCounts> {
    let spec = &LOOPS[0];
    let mut code = spec.load()?;
    let (ci, cb) = intercept.unwrap_or((0, 0));
    let mut groups = Vec::with_capacity(MUX_COUNTERS);
    for k in 0..MUX_COUNTERS {
        let (cfg, name, expected) = if k % 2 == 0 {
            (
                selfcount::HW_INSTRUCTIONS,
                "instructions:u",
                MUX_ITERS * spec.per_iter_instructions() + ci,
            )
        } else {
            (
                selfcount::HW_BRANCH_INSTRUCTIONS,
                "branches:u",
                MUX_ITERS * spec.per_iter_branches() + cb,
            )
        };
        let g = SelfGroup::open(&[selfcount::hardware(cfg, true)])?;
        groups.push((g, format!("{name}#{k}"), expected));
    }
    for (g, ..) in &groups {
        g.start()?;
    }
    code.run(MUX_ITERS);
    for (g, ..) in &groups {
        g.stop()?;
    }
    let mut counters = Vec::with_capacity(groups.len());
    for (g, event, expected) in groups {
        let r = g.read()?;
        counters.push(Scaled {
            event,
            expected,
            value: r.values[0].0,
            time_enabled: r.time_enabled,
            time_running: r.time_running,
        });
    }
    Ok(MultiplexCounts { counters })
}

/// task-clock against thread CPU time, context switches of a known sleeper, page faults of
/// a known touch of fresh pages: software events of this thread.
fn measure_software() -> io::Result<SoftwareCounts> {
    let mut s = SoftwareCounts::default();
    // task-clock over ~100 ms of work.
    let g = SelfGroup::open(&[selfcount::software(SoftwareEvent::TaskClock)])?;
    let t0 = tma_sys::clock::thread_cpu_ns();
    let wall = std::time::Instant::now();
    g.start()?;
    let mut x = 1u64;
    while tma_sys::clock::thread_cpu_ns() - t0 < 100_000_000 {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    g.stop()?;
    let t1 = tma_sys::clock::thread_cpu_ns();
    s.wall_ns = wall.elapsed().as_nanos() as u64;
    s.task_clock_ns = g.read()?.values[0].0;
    s.thread_cpu_ns = t1 - t0;

    // 50 sleeps of 1 ms: each one is a context switch.
    let g = SelfGroup::open(&[selfcount::software(SoftwareEvent::ContextSwitches)])?;
    s.sleeps = 50;
    let u0 = tma_sys::usage::thread_usage()?;
    g.start()?;
    for _ in 0..s.sleeps {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    g.stop()?;
    let u1 = tma_sys::usage::thread_usage()?;
    s.context_switches = g.read()?.values[0].0;
    s.rusage_switches = u1.switches - u0.switches;

    // 256 fresh pages (no huge pages), each touched once.
    s.pages = 256;
    let mut map = memmap2::MmapMut::map_anon(s.pages as usize * 4096)?;
    // Without THP advice the kernel may back the range with huge pages: fewer faults.
    let _ = map.advise(memmap2::Advice::NoHugePage);
    let g = SelfGroup::open(&[selfcount::software(SoftwareEvent::PageFaults)])?;
    let u0 = tma_sys::usage::thread_usage()?;
    g.start()?;
    for p in 0..s.pages as usize {
        map[p * 4096] = 1;
    }
    g.stop()?;
    let u1 = tma_sys::usage::thread_usage()?;
    std::hint::black_box(&map);
    s.page_faults = g.read()?.values[0].0;
    s.rusage_minor_faults = u1.minor_faults - u0.minor_faults;
    Ok(s)
}
