//! Evaluating the TMA tree on any counts: every bundled CPU model (Intel, the hybrid parts'
//! P- and E-core tables, AMD Zen, the Arm Neoverse cores), through the evaluator of
//! `tma stat` (`tma_stat::eval::TreeEval`: the formulas, `#core_wide` per thread, the checks
//! that a recording holds the tree's events), then the tree's text, JSON and CSV renderers.
//! No count, however odd (NaN, infinities, zero, negative, 1e308, absent, not counted,
//! counted for a share above 1), may panic.
//!
//! Input: byte 0 picks the model (`tma_catalog::models()`, modulo their number); byte 1
//! picks the form of the rest:
//! * bit 1 clear: **counts**. Bit 0: the topology is unknown (SMT off) or SMT on (16 CPUs, 8
//!   cores). Bits 5-7: the interval's duration (see `duration`). Then, interval after
//!   interval (4 at most), one tag byte per event of the model's tree in order (the events
//!   `crate::evaluate_request` lists, sorted), and the tag's operand: see `reading`.
//! * bit 1 set: a **recording**: the rest is `perf stat` output (`-x,` CSV, `-j` JSON or
//!   text, a hybrid part's `cpu_core/`/`cpu_atom/` events, a `tma stat --record` snapshot),
//!   read by `tma_stat::evaluate` as `tma stat --import FILE --cpu MODEL` does (bit 0: with
//!   `--smt on`); the merged view of a hybrid part is reached this way.
//!
//! Bits 2-4 of byte 1 pick the renderer the tree then goes through (one per input: all of
//! them each time would cost more than the evaluation): see `render`.
use std::sync::{LazyLock, Mutex};

use crate::{Bound, Target};
use tma_perf::{Interval, Reading, ReadingStatus};
use tma_stat::eval::{RunInfo, StatRun, TreeEval};

/// A model's prepared trees (formulas compiled once, before the first input): the
/// [`RunInfo`] and evaluator without and with an SMT topology, and the tree's events.
struct Prepared {
    info: [RunInfo; 2],
    tree: [Mutex<TreeEval>; 2],
    events: Vec<String>,
}

static MODELS: LazyLock<Vec<Prepared>> = LazyLock::new(|| {
    tma_catalog::models()
        .iter()
        .map(|&model| {
            let smt = tma_perf::snapshot::Topology {
                cpus: 16,
                cores: 8,
                sockets: 1,
                smt: true,
            };
            let (_, events) = crate::evaluate_request(model, None);
            let info = [None, Some(smt)].map(|topology| RunInfo {
                model,
                cpu_source: "from --cpu".into(),
                source: "fuzz input".into(),
                interval_mode: true,
                request: crate::evaluate_request(model, topology).0,
                command: None,
                event_map: Vec::new(),
                scope: None,
                core_type: None,
            });
            let tree = info
                .each_ref()
                .map(|i| Mutex::new(TreeEval::new(i).expect("a bundled model compiles")));
            Prepared { info, tree, events }
        })
        .collect()
});

pub const TARGET: Target = Target {
    name: "evaluate",
    setup: || {
        crate::warm_models();
        LazyLock::force(&MODELS);
    },
    bound: |_| Bound {
        per_byte: 256,
        fixed: 8 << 20,
    },
    run: evaluate,
};

fn evaluate(data: &[u8]) {
    let [m, form, rest @ ..] = data else {
        return;
    };
    let prepared = &MODELS[usize::from(*m) % MODELS.len()];
    let smt = usize::from(form & 1);
    if form & 2 != 0 {
        recording(prepared.info[0].model.key, smt == 1, (form >> 2) & 7, rest);
        return;
    }
    let (start_s, end_s) = duration(form >> 5);
    let mut tree = prepared.tree[smt].lock().unwrap_or_else(|e| e.into_inner());
    let mut input = rest;
    let mut intervals = Vec::new();
    while !input.is_empty() && intervals.len() < 4 {
        let readings = prepared
            .events
            .iter()
            .filter_map(|e| reading(e, &mut input))
            .collect();
        intervals.push(Interval {
            start_s,
            end_s,
            readings,
            printed: Vec::new(),
        });
    }
    if tree.check_present(intervals.iter()).is_err() {
        return;
    }
    let mut reports = Vec::new();
    for iv in &intervals {
        tree.per_thread(iv);
        let ir = tree.eval(iv);
        let _ = tree.check_computable(iv, &ir);
        reports.push(ir);
    }
    let run = StatRun {
        info: prepared.info[smt].clone(),
        intervals: reports,
    };
    render(&run, (form >> 2) & 7);
}

/// The interval's start and end (seconds) for a duration code: zero, negative, NaN, huge,
/// tiny and one second.
fn duration(code: u8) -> (f64, f64) {
    match code {
        0 => (0.0, 0.0),
        1 => (1.0, 0.0),
        2 => (0.0, f64::NAN),
        3 => (0.0, f64::INFINITY),
        4 => (0.0, 1e300),
        5 => (0.0, 1e-300),
        6 => (0.5, 1.0),
        _ => (0.0, 1.0),
    }
}

/// One event's reading from a tag byte (its low 3 bits) and operand, or `None` (absent from
/// the data). The high 5 bits of a counted reading give its counted share in 16ths (0 to
/// 31/16: not counted at all, counted part of the time, and impossible shares above 1).
fn reading(event: &str, input: &mut &[u8]) -> Option<Reading> {
    let (&tag, rest) = input.split_first()?;
    *input = rest;
    let mut take8 = || {
        let (b, rest) = input.split_first_chunk::<8>()?;
        *input = rest;
        Some(u64::from_le_bytes(*b))
    };
    let value = match tag & 7 {
        0 => return None,
        1 => return Some(Reading::missing(event, ReadingStatus::NotCounted)),
        2 => return Some(Reading::missing(event, ReadingStatus::NotSupported)),
        3 => f64::from_bits(take8()?),
        4 => take8()? as f64,
        5 => f64::from(tag >> 3) * 1e6,
        6 => 0.0,
        _ => [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            -1.0,
            1e308,
        ][usize::from(tag >> 3) % 8],
    };
    let mut r = Reading::from_scaled(event, value, None);
    r.counted_share = Some(f64::from(tag >> 3) / 16.0);
    Some(r)
}

/// `tma stat --import FILE --cpu KEY -l 6 -m` of a recording, then the renderers.
fn recording(key: &str, smt: bool, how: u8, bytes: &[u8]) {
    let path = crate::scratch_file("recording", bytes);
    let root = crate::repo_root().join("tests/fixtures/doctor/this-vm");
    let cfg = tma_stat::StatConfig {
        input: tma_stat::Input::Import(path),
        cpu: Some(key.to_string()),
        level: 6,
        smt: smt.then_some(true),
        metrics: Some(Vec::new()),
        host: tma_host::Host::new(root.join("sys"), root.join("proc")),
        ..tma_stat::StatConfig::default()
    };
    if let Ok(ev) = tma_stat::evaluate(&cfg, &mut std::io::sink()) {
        render(&ev.run, how);
    }
}

/// The tree through one of `tma stat`'s renderers: 0 text, 1 text with every node, 2 the
/// compact text, 3 JSON, 4 CSV; 5 to 7 none (the evaluation alone).
fn render(run: &StatRun, how: u8) {
    use tma_stat::render::tree::{render, Format, RenderOptions};
    let (format, verbose, compact) = match how {
        0 => (Format::Text, 0, false),
        1 => (Format::Text, 1, false),
        2 => (Format::Text, 0, true),
        3 => (Format::Json, 0, false),
        4 => (Format::Csv, 1, false),
        _ => return,
    };
    let opts = RenderOptions {
        format,
        verbose,
        compact,
        plot: None,
    };
    let _ = render(&mut std::io::sink(), run, &opts);
}
