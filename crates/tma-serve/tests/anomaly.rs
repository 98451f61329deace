//! `--anomaly` on a replayed recording with a planted antagonist: three cgroups of a Zen 4
//! host counted for 40 intervals (tests/fixtures/serve/zen4-antagonist.snapshot.json). From
//! interval 31 to 33 `batch` turns memory-bound (its backend_bound_memory share from 10% to
//! 55% of its slots) and `web`, co-located, slows down (IPC 2.0 -> 1.1, backend_bound 20% ->
//! 45%); `cron` goes on as before. The exporter marks web's intervals and names batch.
//!
//! The fixture is written by `write_antagonist_fixture` below (run it with `cargo test -p
//! tma-serve --test anomaly -- --ignored`); a test checks the file is what it writes.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use tma_perf::backend::{Ending, GroupReading, Measurement, RawInterval, Target};
use tma_perf::snapshot::{CpuIdentity, RecordedRun, Settings, Snapshot, Topology};
use tma_serve::anomaly::AnomalyConfig;
use tma_serve::expo::Format;
use tma_serve::Recording;
use tma_stat::eval::Request;
use tma_stat::{Input, StatConfig};

const FIXTURE: &str = "serve/zen4-antagonist.snapshot.json";
const CGROUPS: [&str; 3] = ["web", "batch", "cron"];
const INTERVALS: usize = 40;
/// The intervals (0-based) where batch is memory-bound.
const PLANTED: std::ops::Range<usize> = 30..33;

/// One cgroup's interval: cycles, (frontend, bad speculation, backend, retiring) shares,
/// the memory part of backend, IPC.
struct Load {
    cycles: f64,
    shares: (f64, f64, f64, f64),
    memory: f64,
    ipc: f64,
}

/// A deterministic wobble in -1..1 (so the distributions have some width).
fn wobble(i: usize, k: usize) -> f64 {
    (((i * 7 + k * 13) % 11) as f64 - 5.0) / 5.0
}

fn load(cgroup: usize, i: usize) -> Load {
    let w = wobble(i, cgroup);
    let planted = PLANTED.contains(&i);
    match (cgroup, planted) {
        // web: steady, slowed down while batch thrashes the caches.
        (0, false) => Load {
            cycles: 2e9,
            shares: (0.15, 0.05, 0.20 + 0.01 * w, 0.60 - 0.01 * w),
            memory: 0.3,
            ipc: 2.0 + 0.02 * w,
        },
        (0, true) => Load {
            cycles: 2e9,
            shares: (0.12, 0.05, 0.45, 0.38),
            memory: 0.6,
            ipc: 1.1,
        },
        // batch: its memory-bound share jumps.
        (1, false) => Load {
            cycles: 1.5e9,
            shares: (0.10, 0.05, 0.30 + 0.01 * w, 0.55 - 0.01 * w),
            memory: 0.33,
            ipc: 1.5 + 0.02 * w,
        },
        (1, true) => Load {
            cycles: 1.5e9,
            shares: (0.05, 0.05, 0.65, 0.25),
            memory: 0.85,
            ipc: 0.7,
        },
        // cron: unaffected.
        _ => Load {
            cycles: 0.5e9,
            shares: (0.25, 0.10, 0.25 + 0.01 * w, 0.40 - 0.01 * w),
            memory: 0.2,
            ipc: 1.2 + 0.02 * w,
        },
    }
}

/// The count of `event` (a plan event name) for a load.
fn count(event: &str, l: &Load) -> u64 {
    let slots = 6.0 * l.cycles;
    let (fe, bad, be, ret) = l.shares;
    (match event {
        "ls_not_halted_cyc" => l.cycles,
        "de_no_dispatch_per_slot.no_ops_from_frontend" => fe * slots,
        "de_no_dispatch_per_slot.backend_stalls" => be * slots,
        "ex_ret_ops" => ret * slots,
        "de_src_op_disp.all" => (ret + bad) * slots,
        // Cycles with no retirement, and those waiting on a load (memory share of backend).
        "ex_no_retire.not_complete" => l.cycles,
        "ex_no_retire.load_not_complete" => l.memory * l.cycles,
        "ex_ret_instr" => l.ipc * l.cycles,
        _ => 0.0,
    })
    .round() as u64
}

fn request() -> Request {
    Request {
        level: 2,
        nodes: Vec::new(),
        topology: None,
        metrics: vec!["IPC".into()],
        bottlenecks: Vec::new(),
    }
}

/// The recording: what `tma stat -G web,batch,cron -l 2 -m IPC -I 1000 --record` would hold.
fn antagonist_snapshot() -> Snapshot {
    let model = tma_catalog::by_name("zen4").unwrap();
    let plan = tma_stat::groups::counting_plan(model, &request().selection(), &[], false).unwrap();
    let intervals: Vec<RawInterval> = (0..INTERVALS)
        .map(|i| RawInterval {
            start_s: i as f64,
            end_s: i as f64 + 1.0,
            groups: (0..CGROUPS.len())
                .flat_map(|c| {
                    let l = load(c, i);
                    plan.groups
                        .iter()
                        .enumerate()
                        .map(|(gi, g)| GroupReading {
                            group: gi,
                            cpu: Some(0),
                            tid: None,
                            cgroup: Some(c as u32),
                            time_enabled_ns: 1_000_000_000,
                            time_running_ns: 1_000_000_000,
                            values: g.events.iter().map(|e| count(&e.name, &l)).collect(),
                        })
                        .collect::<Vec<_>>()
                })
                .collect(),
        })
        .collect();
    Snapshot {
        schema: tma_perf::snapshot::SCHEMA.into(),
        schema_version: tma_perf::snapshot::SCHEMA_VERSION,
        tool: "tma (synthetic: crates/tma-serve/tests/anomaly.rs)".into(),
        cpu: CpuIdentity {
            vendor: "AuthenticAMD".into(),
            family: 25,
            model: 17,
            stepping: 1,
            model_name: "synthetic Zen 4".into(),
            catalog_key: Some("zen4".into()),
        },
        topology: Topology {
            cpus: 1,
            cores: 1,
            sockets: 1,
            smt: false,
        },
        command_line: "tma stat -G web,batch,cron -l 2 -m IPC -I 1000 --record"
            .split(' ')
            .map(String::from)
            .collect(),
        target: Target::Cgroups(
            CGROUPS
                .iter()
                .map(|c| PathBuf::from(format!("/sys/fs/cgroup/{c}")))
                .collect(),
        ),
        settings: Settings {
            level: 2,
            interval_ms: Some(1000),
            ..Settings::default()
        },
        hardware: true,
        note: None,
        start_unix_s: 1_795_000_000.0,
        duration_s: INTERVALS as f64,
        runs: vec![RecordedRun {
            step: 0,
            plan: 0,
            repeat: 0,
            groups: (0..plan.groups.len()).collect(),
            measurement: Measurement {
                start_unix_s: 1_795_000_000.0,
                wall_ns: INTERVALS as u64 * 1_000_000_000,
                intervals,
                ending: Ending::Interrupted,
                failed_groups: Vec::new(),
            },
        }],
        plans: vec![plan],
        cpu_cores: Vec::new(),
    }
}

fn written() -> Vec<u8> {
    let mut out = Vec::new();
    antagonist_snapshot().write(&mut out).unwrap();
    out
}

#[test]
#[ignore = "writes the fixture"]
fn write_antagonist_fixture() {
    std::fs::write(fixture(FIXTURE), written()).unwrap();
}

#[test]
fn the_fixture_is_what_its_generator_writes() {
    let on_disk = std::fs::read(fixture(FIXTURE)).unwrap();
    assert!(
        on_disk == written(),
        "{FIXTURE} differs from its generator: cargo test -p tma-serve --test anomaly -- --ignored"
    );
}

#[test]
fn the_planted_antagonist_is_named() {
    let stat = StatConfig {
        input: Input::Import(fixture(FIXTURE)),
        cpu: Some("zen4".into()),
        level: 2,
        metrics: Some(vec!["IPC".into()]),
        ..StatConfig::default()
    };
    let rec = Recording::load(&stat, &quiet_log()).unwrap();
    assert_eq!(rec.len(), INTERVALS);
    let (shared, _) = collector(true);
    let mut c = tma_serve::collect::Collector::new(
        Arc::clone(&shared),
        quiet_log(),
        tma_serve::collect::Build {
            version: "t".into(),
            cpu: "c".into(),
        },
        tma_serve::collect::Split::Target,
        CGROUPS.map(String::from).to_vec(),
        true,
    );
    c.set_anomaly(AnomalyConfig {
        window: 30,
        ..AnomalyConfig::default()
    });
    rec.start(&mut c).unwrap();
    let mut marked = Vec::new();
    for i in 0..INTERVALS {
        rec.publish(i, &mut c).unwrap();
        let text = shared.render(Format::Text);
        for l in text.lines().filter(|l| l.starts_with("tma_anomaly{")) {
            marked.push((i, l.to_string()));
        }
    }
    println!("{marked:#?}");
    let at = |i: usize| -> Vec<&str> {
        marked
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, l)| l.as_str())
            .collect()
    };
    // Nothing before the planted moment; cron never.
    assert!(
        marked.iter().all(|(i, _)| *i >= PLANTED.start),
        "{marked:#?}"
    );
    assert!(
        marked.iter().all(|(_, l)| !l.contains("cgroup=\"cron\"")),
        "{marked:#?}"
    );
    // batch, whose own memory share rose the most, is marked but blames nobody.
    assert!(
        marked.iter().any(|(_, l)| l.contains("cgroup=\"batch\"")),
        "{marked:#?}"
    );
    assert!(
        marked
            .iter()
            .all(|(_, l)| !l.contains("cgroup=\"batch\",antagonist")),
        "{marked:#?}"
    );
    // At the planted moment web's IPC and backend share are marked, batch named.
    let first = at(PLANTED.start);
    for node in ["IPC", "backend_bound"] {
        let want = format!("tma_anomaly{{node=\"{node}\",cgroup=\"web\",antagonist=\"batch\"}} 1");
        assert!(first.contains(&want.as_str()), "{want} not in {first:#?}");
    }
}
