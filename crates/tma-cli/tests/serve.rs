//! `tma serve` against a real Prometheus server (Debian package `prometheus`): Prometheus
//! scrapes a `tma serve` child every second, and the test asks its HTTP API what it stored.
//! Two runs: the replay of a recorded multi-interval fixture (values known exactly), and live
//! software counts, system-wide and for a cgroup the test creates where cgroup v2 is writable.
//! Also: `tma stat -G` on that cgroup, and a clean SIGTERM shutdown (port released, exit 143).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tma_testkit::{fixture, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// GET `path` on 127.0.0.1:`port`: (status, body); `None` when nothing listens.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    // Prometheus answers in chunks.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child killed (and reaped) when dropped.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tma serve ARGS --listen 127.0.0.1:PORT`, logs into `log`; ready once it has published an
/// interval.
fn serve(args: &[&str], port: u16, log: &Path) -> Proc {
    let child = TMA
        .bare()
        .arg("serve")
        .args(args)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut p = Proc(child);
    wait_until("tma serve /-/ready", Duration::from_secs(15), || {
        if let Ok(Some(st)) = p.0.try_wait() {
            panic!(
                "tma serve exited with {st}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        http_get(port, "/-/ready").is_some_and(|(s, _)| s == 200)
    });
    p
}

/// A Prometheus server on 127.0.0.1 scraping `targets` (job `tma`) every second.
fn prometheus(bin: &Path, dir: &Path, targets: &[u16]) -> (Proc, u16) {
    let port = free_port();
    let list: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: tma\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        ),
    )
    .unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    let p = Proc(child);
    wait_until("prometheus /-/ready", Duration::from_secs(20), || {
        http_get(port, "/-/ready").is_some_and(|(s, _)| s == 200)
    });
    (p, port)
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query: each result's labels and value.
fn query(port: u16, q: &str) -> Vec<(serde_json::Map<String, serde_json::Value>, f64)> {
    let (status, body) = http_get(port, &format!("/api/v1/query?query={}", urlencode(q)))
        .expect("prometheus answers");
    assert_eq!(status, 200, "{q}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{body}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let labels = r["metric"].as_object().unwrap().clone();
            let val: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
            (labels, val)
        })
        .collect()
}

/// Wait until Prometheus has scraped every target at least `n` times.
fn wait_scrapes(port: u16, targets: usize, n: f64) {
    wait_until("3 scrapes of each target", Duration::from_secs(20), || {
        let r = query(port, "count_over_time(up{job=\"tma\"}[1m])");
        r.len() == targets && r.iter().all(|(_, v)| *v >= n)
    });
}

fn prometheus_or_skip() -> Option<PathBuf> {
    let p = which("prometheus");
    if p.is_none() {
        println!(
            "skipped: prometheus is not installed (Debian package `prometheus`; \
             scripts/test.sh installs it when run as root)"
        );
    }
    p
}

/// Stop `tma serve` with SIGTERM: it exits 143 (128 + SIGTERM, as every tma command) and logs
/// its stop, and the port is free again.
fn stop_cleanly(mut p: Proc, port: u16, log: &Path) {
    let pid = p.0.id().to_string();
    let st = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(st.success());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = p.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(log).unwrap();
    assert_eq!(status.code(), Some(143), "exit {status}: {text}");
    assert!(text.contains("event=stopped"), "{text}");
    assert!(text.contains("reason=signal"), "{text}");
    assert!(
        text.lines().all(|l| l.starts_with("ts=")),
        "logfmt lines only: {text}"
    );
    TcpListener::bind(("127.0.0.1", port)).expect("the port is released");
}

/// The three intervals of the fixture (tests/fixtures/README.md, serve/): Memory_Bound of
/// each, and INST_RETIRED.ANY of each.
const MEMORY_BOUND: [f64; 3] = [0.2, 0.3, 0.45];
const INST_RETIRED: [f64; 3] = [3.0e9, 2.0e9, 1.5e9];

#[test]
fn prometheus_scrapes_a_replayed_recording() {
    let Some(bin) = prometheus_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("serve.log");
    let f = fixture("serve/spr-intervals-synthetic.csv");
    let serve = serve(
        &[
            "--replay",
            f.to_str().unwrap(),
            "--cpu",
            "spr",
            "--interval",
            "1s",
        ],
        port,
        &log,
    );
    let (prom, pport) = prometheus(&bin, dir.path(), &[port]);
    wait_scrapes(pport, 1, 3.0);
    let up = query(pport, "up{job=\"tma\"}");
    assert_eq!(up.len(), 1);
    assert_eq!(up[0].1, 1.0);
    assert_eq!(query(pport, "tma_pmu_available")[0].1, 1.0);
    let mem = query(
        pport,
        "tma_node_ratio{node=\"Backend_Bound.Memory_Bound\",level=\"2\"}",
    );
    assert_eq!(mem.len(), 1, "{mem:?}");
    assert!(
        MEMORY_BOUND.iter().any(|m| (m - mem[0].1).abs() < 1e-9),
        "Memory_Bound {} is none of the recording's {MEMORY_BOUND:?}",
        mem[0].1
    );
    // Every interval was served at least once in the last minute: each value is in the store.
    let seen = query(
        pport,
        "count_values(\"v\", max_over_time(tma_node_ratio{node=\"Backend_Bound.Memory_Bound\"}[1m]))",
    );
    assert!(!seen.is_empty());
    let level1 = query(pport, "tma_node_ratio{level=\"1\"}");
    let nodes: Vec<&str> = level1
        .iter()
        .map(|(l, _)| l["node"].as_str().unwrap())
        .collect();
    for n in [
        "Frontend_Bound",
        "Bad_Speculation",
        "Backend_Bound",
        "Retiring",
    ] {
        assert!(nodes.contains(&n), "{n} missing from {nodes:?}");
    }
    let sum: f64 = level1.iter().map(|(_, v)| v).sum();
    assert!((sum - 1.0).abs() < 1e-6, "level 1 sums to {sum}");
    let b = query(pport, "tma_bottleneck_info");
    assert_eq!(b.len(), 1);
    assert!(b[0].0["node"].as_str().unwrap().contains('.'), "{b:?}");
    assert!(!query(pport, "tma_metric{name=\"IPC\"}").is_empty());
    let build = query(pport, "tma_build_info");
    assert_eq!(build[0].0["cpu_model"], "spr");
    assert_eq!(build[0].0["mode"], "replay");
    // The counter goes on across the loop: the sum of the intervals served so far.
    let inst = query(pport, "tma_event_total{event=\"INST_RETIRED.ANY\"}")[0].1;
    let sums: Vec<f64> = (1..200)
        .map(|k| (0..k).map(|i| INST_RETIRED[i % 3]).sum())
        .collect();
    assert!(sums.contains(&inst), "INST_RETIRED.ANY total {inst}");
    assert_eq!(query(pport, "tma_interval_seconds")[0].1, 1.0);
    drop(prom);
    stop_cleanly(serve, port, &log);
}

/// A cgroup v2 directory made by the test and removed when dropped (its tasks killed first).
struct TestCgroup {
    dir: PathBuf,
    /// The name relative to the cgroup2 mount.
    name: String,
    busy: Option<Child>,
}

impl TestCgroup {
    /// A new cgroup with one busy shell loop in it, or why not.
    fn with_busy_task() -> Result<TestCgroup, String> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(|e| e.to_string())?;
        let mount = mounts
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
            })
            .ok_or("no cgroup v2 hierarchy is mounted")?;
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("tma-serve-test-{}-{n}", std::process::id());
        let dir = mount.join(&name);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut cg = TestCgroup {
            dir,
            name,
            busy: None,
        };
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .map_err(|e| e.to_string())?;
        let pid = child.id();
        cg.busy = Some(child);
        std::fs::write(cg.dir.join("cgroup.procs"), pid.to_string())
            .map_err(|e| format!("cannot move pid {pid} into {}: {e}", cg.dir.display()))?;
        Ok(cg)
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        if let Some(mut c) = self.busy.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn has_core_pmu() -> bool {
    ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}

#[test]
fn prometheus_scrapes_live_counts_system_wide_and_per_cgroup() {
    let Some(bin) = prometheus_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (port, log) = (free_port(), dir.path().join("serve.log"));
    let all = serve(&["--interval", "1s"], port, &log);
    let mut targets = vec![port];
    let cg = match TestCgroup::with_busy_task() {
        Ok(cg) => Some(cg),
        Err(why) => {
            println!("skipped: the cgroup part: {why}");
            None
        }
    };
    let cg_port = free_port();
    let cg_log = dir.path().join("serve-cgroup.log");
    let per_cg = cg.as_ref().map(|cg| {
        targets.push(cg_port);
        serve(
            &["--interval", "1s", "--cgroup", &cg.name],
            cg_port,
            &cg_log,
        )
    });
    let (prom, pport) = prometheus(&bin, dir.path(), &targets);
    wait_scrapes(pport, targets.len(), 3.0);
    let up = query(pport, "up{job=\"tma\"}");
    assert_eq!(up.len(), targets.len());
    assert!(up.iter().all(|(_, v)| *v == 1.0), "{up:?}");
    let inst = format!("127.0.0.1:{port}");
    let pmu = query(pport, &format!("tma_pmu_available{{instance=\"{inst}\"}}"));
    let cpu = query(
        pport,
        &format!("tma_task_clock_seconds_total{{instance=\"{inst}\"}}"),
    );
    assert_eq!(cpu.len(), 1);
    assert!(cpu[0].1 > 0.0, "{cpu:?}");
    assert!(!query(
        pport,
        &format!("tma_context_switches_total{{instance=\"{inst}\"}}")
    )
    .is_empty());
    if has_core_pmu() {
        assert_eq!(pmu[0].1, 1.0);
        assert!(!query(pport, "tma_node_ratio{level=\"1\"}").is_empty());
    } else {
        assert_eq!(pmu[0].1, 0.0);
        let why = query(pport, "tma_pmu_info");
        assert!(!why.is_empty(), "the reason is exported");
        assert!(
            why[0].0["reason"].as_str().unwrap().contains("PMU"),
            "{why:?}"
        );
        assert!(
            query(pport, "tma_node_ratio").is_empty(),
            "no tree without hardware counters"
        );
        let logged = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            logged.matches("event=pmu_unavailable").count(),
            1,
            "the reason is logged once: {logged}"
        );
    }
    if let Some(cg) = &cg {
        // The busy loop runs in the cgroup: its CPU time shows under its label.
        let q = format!(
            "increase(tma_task_clock_seconds_total{{cgroup=\"{}\"}}[1m])",
            cg.name
        );
        let busy = query(pport, &q);
        assert_eq!(busy.len(), 1, "{q}: {busy:?}");
        assert!(busy[0].1 > 0.1, "the busy task's CPU time: {busy:?}");
    }
    drop(prom);
    stop_cleanly(all, port, &log);
    if let Some(p) = per_cg {
        stop_cleanly(p, cg_port, &cg_log);
    }
}

#[test]
fn stat_counts_a_cgroup() {
    let cg = match TestCgroup::with_busy_task() {
        Ok(cg) => cg,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let out = TMA
        .bare()
        .args(["stat", "-G", &cg.name, "--duration", "1", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        v["target"].as_str().unwrap().ends_with(&cg.name),
        "the target names the cgroup: {v}"
    );
    if !has_core_pmu() {
        // Software counts: the busy loop ran in the cgroup for part of the second (the machine
        // is shared, so not necessarily all of it).
        let ms = v["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event"] == "task-clock")
            .and_then(|e| e["value"].as_f64())
            .unwrap();
        assert!(ms > 50.0 && ms < 1500.0, "task-clock {ms} msec: {v}");
    }
    let bad = TMA
        .bare()
        .args(["stat", "-G", "no-such-cgroup-here", "--duration", "1"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("no-such-cgroup-here") && err.contains("cgroup"),
        "{err}"
    );
}

/// `--replay` of `tma stat --record` snapshots (the synthetic backend stands in for a PMU):
/// the tree served equals what `tma stat --import` computes from the same snapshot; a
/// software-only snapshot serves its counts and `tma_pmu_available 0`. A missing file is a
/// clear error, exit 2.
#[test]
fn replay_of_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.json");
    let st = TMA
        .bare()
        .args(["stat", "--synthetic-backend"])
        .arg(fixture("live/synthetic-zen4-sha256.json"))
        .args([
            "--cpu",
            "zen4",
            "-a",
            "-I",
            "200",
            "--duration",
            "0.5",
            "-l",
            "2",
        ])
        .arg("--record")
        .arg(&snap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let json = TMA
        .bare()
        .args(["stat", "--json", "--import"])
        .arg(&snap)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let first = &v["intervals"][0]["nodes"];
    let port = free_port();
    let log = dir.path().join("serve.log");
    let p = serve(
        &["--replay", snap.to_str().unwrap(), "--interval", "1s"],
        port,
        &log,
    );
    let (status, body) = http_get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    let mut compared = 0;
    for n in first.as_array().unwrap() {
        if n["level"] != 1 {
            continue;
        }
        let want = n["value"].as_f64().unwrap() / 100.0;
        let series = format!(
            "tma_node_ratio{{node=\"{}\",level=\"1\"}} ",
            n["name"].as_str().unwrap()
        );
        let got: f64 = body
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in {body}"))
            .parse()
            .unwrap();
        // The synthetic backend gives every interval the same shares.
        assert!((got - want).abs() < 1e-9, "{series}: {got} vs {want}");
        compared += 1;
    }
    assert!(compared >= 4, "{compared} level-1 nodes");
    stop_cleanly(p, port, &log);

    let sw = dir.path().join("sw.json");
    let st = TMA
        .bare()
        .args(["stat", "-a", "-I", "200", "--duration", "0.5", "--record"])
        .arg(&sw)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    if !has_core_pmu() {
        let port = free_port();
        let p = serve(
            &["--replay", sw.to_str().unwrap(), "--interval", "1s"],
            port,
            &log,
        );
        let (_, body) = http_get(port, "/metrics").unwrap();
        assert!(body.contains("\ntma_pmu_available 0\n"), "{body}");
        assert!(body.contains("\ntma_task_clock_seconds_total "), "{body}");
        assert!(!body.contains("tma_node_ratio"), "{body}");
        stop_cleanly(p, port, &log);
    }

    let out = TMA
        .bare()
        .args(["serve", "--listen", "127.0.0.1:0", "--replay"])
        .arg(dir.path().join("missing.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing.json"), "{err}");
}
