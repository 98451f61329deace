//! The fleet counters through a real Prometheus server (Debian package `prometheus`): two
//! replayed targets are scraped every second while the shipped recording rules
//! (deploy/prometheus/tma-rules.yml, unchanged) are evaluated; the level-1 shares the rules
//! record, for each host and for the two added up, equal what `tma stat --import` computes
//! from the same recordings (each interval's share weighted by its slots) to 1e-9.
//!
//! The targets' counters carry the time of the interval they count, the same for both, so
//! that Prometheus's rate() extrapolates both hosts alike and the ratio of sums is exact.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use tma_serve::collect::Shared;
use tma_serve::http::{Limits, Server};
use tma_serve::Recording;
use tma_stat::sink::{IntervalData, IntervalSink, Start};

const A: &str = SPR_INTERVALS;
const B: &str = "serve/spr-fleet-b-synthetic.csv";
/// Intervals published after the warm-up (A loops every 3, B every 4).
const STEPS: usize = 6;

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Ends the Prometheus server with the test.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One GET that closes the connection; (status, body).
fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let (status, _, body) = parse_response(&out);
    Some((status, body))
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query: (labels, value) of each sample.
fn query(prom: SocketAddr, q: &str) -> Vec<(serde_json::Value, f64)> {
    let (status, body) = http_get(prom, &format!("/api/v1/query?query={}", encode(q)))
        .unwrap_or_else(|| panic!("no answer to {q}"));
    assert_eq!(status, 200, "{q}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["metric"].clone(),
                s["value"][1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// One interval as `tma stat --import` evaluates it: (slots, level-1 shares).
type Evaluated = (f64, Vec<(String, f64)>);

/// What `tma stat --import` makes of each interval of `rel`.
struct Stat(Vec<Evaluated>);

impl IntervalSink for Stat {
    fn start(&mut self, _: Start<'_>) -> Result<(), tma_stat::StatError> {
        Ok(())
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), tma_stat::StatError> {
        let slots = iv
            .readings
            .get("TOPDOWN.SLOTS:perf_metrics")
            .and_then(|r| r.value)
            .unwrap();
        let shares = iv
            .report
            .unwrap()
            .report
            .nodes
            .iter()
            .filter(|n| n.level == 1)
            .map(|n| (n.name.to_string(), n.value.unwrap() / 100.0))
            .collect();
        self.0.push((slots, shares));
        Ok(())
    }
}

fn stat(rel: &str) -> Vec<Evaluated> {
    let mut s = Stat(Vec::new());
    tma_stat::run(&import_config(rel), &mut s, &mut std::io::sink()).unwrap();
    s.0
}

/// The slot-weighted share of each level-1 node over the published steps of `hosts`.
fn expected(hosts: &[&Vec<Evaluated>]) -> Vec<(String, f64)> {
    let names: Vec<String> = hosts[0][0].1.iter().map(|(n, _)| n.clone()).collect();
    names
        .iter()
        .map(|name| {
            let (mut num, mut den) = (0.0, 0.0);
            for h in hosts {
                for j in 0..STEPS {
                    let (slots, shares) = &h[j % h.len()];
                    let v = shares.iter().find(|(n, _)| n == name).unwrap().1;
                    num += v * slots;
                    den += slots;
                }
            }
            (name.clone(), num / den)
        })
        .collect()
}

fn scrapes(shared: &Shared) -> u64 {
    shared
        .stats
        .snapshot()
        .iter()
        .find(|(c, _)| *c == 200)
        .map_or(0, |(_, n)| *n)
}

/// Wait until each target answered `n` more scrapes than `from`.
fn wait_scrapes(shared: &[Arc<Shared>], from: &[u64], n: u64) {
    let t0 = Instant::now();
    while shared.iter().zip(from).any(|(s, f)| scrapes(s) < f + n) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "Prometheus stopped scraping"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write_config(dir: &Path, targets: &[SocketAddr]) -> PathBuf {
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/prometheus/tma-rules.yml")
        .canonicalize()
        .unwrap();
    let cfg = dir.join("prometheus.yml");
    let targets: Vec<String> = targets.iter().map(|a| format!("'{a}'")).collect();
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - '{}'\n\
             scrape_configs:\n  - job_name: tma\n    scrape_timeout: 1s\n    \
             static_configs:\n      - targets: [{}]\n",
            rules.display(),
            targets.join(", ")
        ),
    )
    .unwrap();
    cfg
}

#[test]
fn recording_rules_give_tma_stat_shares_for_one_host_and_the_sum_of_two() {
    let Some(prometheus) = on_path("prometheus") else {
        println!("skipped: prometheus is not installed (Debian package `prometheus`)");
        return;
    };
    let log = quiet_log();
    let now = Arc::new(AtomicI64::new(0));
    let set_now = || {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        now.store(ms, Ordering::SeqCst);
    };
    let mut hosts = Vec::new();
    let mut servers = Vec::new();
    set_now();
    for rel in [A, B] {
        let rec = Recording::load(&import_config(rel), &log).unwrap();
        let (shared, mut c) = collector(true);
        let clock = Arc::clone(&now);
        c.set_clock(Box::new(move || {
            UNIX_EPOCH + Duration::from_millis(clock.load(Ordering::SeqCst) as u64)
        }));
        rec.start(&mut c).unwrap();
        // Warm-up: one loop, published before Prometheus starts, so that every counter
        // starts well above zero (rate() would otherwise stop its extrapolation at zero,
        // differently for each series).
        for i in 0..rec.len() {
            rec.publish(i, &mut c).unwrap();
        }
        let server = Server::start(
            TcpListener::bind("127.0.0.1:0").unwrap(),
            tma_serve::handler(Arc::clone(&shared)),
            Limits::default(),
            Arc::clone(&shared.stats),
            quiet_log(),
        )
        .unwrap();
        hosts.push((rec, c, shared));
        servers.push(server);
    }
    let addrs: Vec<SocketAddr> = servers.iter().map(Server::addr).collect();
    let dir = std::env::temp_dir().join(format!("tma-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = write_config(&dir, &addrs);
    let prom = free_port();
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={prom}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    let _kill = Kill(child);
    let t0 = Instant::now();
    while http_get(prom, "/-/ready").map(|r| r.0) != Some(200) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "Prometheus did not start: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let shared: Vec<Arc<Shared>> = hosts.iter().map(|h| Arc::clone(&h.2)).collect();
    wait_scrapes(&shared, &[0, 0], 2);
    for j in 0..STEPS {
        // Both hosts count interval j at the same moment.
        set_now();
        let before: Vec<u64> = shared.iter().map(|s| scrapes(s)).collect();
        for (rec, c, _) in &mut hosts {
            rec.publish(j, c).unwrap();
        }
        wait_scrapes(&shared, &before, 2);
    }
    // Rules evaluated after the last scrapes.
    std::thread::sleep(Duration::from_millis(2500));
    let a = stat(A);
    let b = stat(B);
    let label = |m: &serde_json::Value, k: &str| m[k].as_str().unwrap_or("").to_string();
    let per_host = query(prom, "instance:tma_node_slots:ratio_rate5m{level=\"1\"}");
    let job = query(prom, "job:tma_node_slots:ratio_rate5m{level=\"1\"}");
    assert_eq!(per_host.len(), 8, "{per_host:?}");
    assert_eq!(job.len(), 4, "{job:?}");
    let mut checked = 0;
    for (addr, want) in [(addrs[0], expected(&[&a])), (addrs[1], expected(&[&b]))] {
        for (node, v) in want {
            let got = per_host
                .iter()
                .find(|(m, _)| label(m, "instance") == addr.to_string() && label(m, "node") == node)
                .unwrap_or_else(|| panic!("no {node} of {addr} in {per_host:?}"))
                .1;
            assert!((got - v).abs() < 1e-9, "{addr} {node}: {got} vs {v}");
            checked += 1;
        }
    }
    let both = expected(&[&a, &b]);
    for (node, v) in &both {
        let got = job
            .iter()
            .find(|(m, _)| label(m, "node") == *node)
            .unwrap()
            .1;
        assert!((got - v).abs() < 1e-9, "both {node}: {got} vs {v}");
        checked += 1;
    }
    // The sum of two is the ratio of the sums, not the mean of the two hosts' shares.
    let be = |w: &[(String, f64)]| w.iter().find(|(n, _)| n == "Backend_Bound").unwrap().1;
    let mean = (be(&expected(&[&a])) + be(&expected(&[&b]))) / 2.0;
    assert!((be(&both) - mean).abs() > 1e-3, "{} vs {mean}", be(&both));
    assert_eq!(checked, 12);
    // IPC of the two, from the counters.
    let ipc = query(prom, "job:tma_ipc:ratio_rate5m");
    assert_eq!(ipc.len(), 1, "{ipc:?}");
    for s in servers {
        s.stop();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
