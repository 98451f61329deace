//! Shared helpers of the tma-serve tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tma_serve::collect::{Build, Collector, Shared, Split};
use tma_serve::log::Log;
use tma_stat::{Input, StatConfig};

pub use tma_testkit::fixture;

/// The multi-interval Sapphire Rapids recording the serve tests use.
pub const SPR_INTERVALS: &str = "serve/spr-intervals-synthetic.csv";

/// The `tma stat` configuration that reads `rel` at level 2 with the default metrics.
pub fn import_config(rel: &str) -> StatConfig {
    StatConfig {
        input: Input::Import(fixture(rel)),
        cpu: Some("spr".into()),
        level: 2,
        metrics: Some(Vec::new()),
        ..StatConfig::default()
    }
}

pub fn quiet_log() -> Arc<Log> {
    Arc::new(Log::new(Box::new(std::io::sink())))
}

/// A quiet collector of one scope (no cgroups, no per-CPU split) and the state it publishes;
/// `replay`: intervals come from a recording.
pub fn collector(replay: bool) -> (Arc<Shared>, Collector) {
    let shared = Arc::new(Shared::default());
    let c = Collector::new(
        Arc::clone(&shared),
        quiet_log(),
        Build {
            version: "test".into(),
            cpu: "Test CPU".into(),
        },
        Split::Target,
        Vec::new(),
        replay,
    );
    (shared, c)
}

/// Shared state after every interval of `rel` went through a collector.
pub fn loaded(rel: &str) -> Arc<Shared> {
    let (shared, mut c) = collector(true);
    tma_stat::run(&import_config(rel), &mut c, &mut std::io::sink()).unwrap();
    shared
}

/// One GET; (status, content type, body).
pub fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    parse_response(&out)
}

pub fn parse_response(bytes: &[u8]) -> (u16, String, String) {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let ctype = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or("")
        .to_string();
    (status, ctype, body.to_string())
}

/// The value of the sample `series` (name and labels exactly as written) in an exposition.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// `promtool`, when installed.
pub fn promtool() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("promtool"))
        .find(|p| p.is_file())
}

/// A collector told there is no PMU, after one interval of software counts.
pub fn software_only() -> std::sync::Arc<tma_serve::collect::Shared> {
    use tma_perf::backend::{GroupReading, Measurement, RawInterval};
    use tma_stat::sink::{IntervalData, IntervalSink, Start};
    let (shared, mut c) = collector(false);
    let plan = tma_perf::plan::Plan::software(&tma_perf::backend::software_events());
    c.start(Start::Software {
        plan: &plan,
        target: None,
        reason: Some("no `cpu` PMU in /sys/bus/event_source/devices"),
        streamed: true,
    })
    .unwrap();
    let raw = RawInterval {
        start_s: 0.0,
        end_s: 1.0,
        groups: vec![GroupReading {
            group: 0,
            cpu: None,
            tid: None,
            cgroup: None,
            time_enabled_ns: 1_000_000_000,
            time_running_ns: 1_000_000_000,
            values: vec![500_000_000, 10, 2, 30],
        }],
    };
    let iv = Measurement::interval_readings(&plan, &raw, false);
    c.interval(IntervalData {
        raw: Some(&raw),
        readings: &iv,
        report: None,
    })
    .unwrap();
    shared
}

/// The counter plan and run description of a Zen 4 level-1 tree counted in interval mode,
/// for tests that feed a collector chosen counts.
pub fn zen4_level1() -> (tma_perf::plan::Plan, tma_stat::eval::RunInfo) {
    let model = tma_catalog::by_name("zen4").unwrap();
    let request = tma_stat::eval::Request {
        level: 1,
        nodes: Vec::new(),
        topology: None,
        metrics: Vec::new(),
        bottlenecks: Vec::new(),
    };
    let plan = tma_stat::groups::counting_plan(model, &request.selection(), &[], false).unwrap();
    let info = tma_stat::eval::RunInfo {
        model,
        cpu_source: "test".into(),
        source: "test".into(),
        interval_mode: true,
        request,
        command: None,
        event_map: Vec::new(),
        scope: None,
        core_type: None,
    };
    (plan, info)
}
