//! The HTTP server under bad clients, loopback only, bounded in count and time: 1,000
//! concurrent scrapes, clients that disconnect mid-response, a slow scraper, slow and
//! malformed requests. It keeps serving, its memory stays flat and no file descriptor leaks
//! (`/proc/self/fd`, the server runs in this process).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tma_serve::http::{Limits, Server};

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// `n` scrapes open at once, from 10 threads: every connection is opened and its request
/// sent before any response is read. Returns how many got a 200 with the exposition.
fn concurrent_scrapes(addr: SocketAddr, n: usize) -> usize {
    let per = n / 10;
    let threads: Vec<_> = (0..10)
        .map(|_| {
            std::thread::spawn(move || {
                let mut conns = Vec::with_capacity(per);
                for _ in 0..per {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                        .unwrap();
                    conns.push(s);
                }
                conns
                    .into_iter()
                    .filter(|mut s| {
                        let mut out = Vec::new();
                        let _ = s.read_to_end(&mut out);
                        let (status, _, body) = parse_response(&out);
                        status == 200 && body.contains("tma_node_ratio")
                    })
                    .count()
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

/// Clients that read a few bytes of the response and vanish.
fn disconnect_mid_response(addr: SocketAddr, n: usize) {
    for i in 0..n {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        if i % 2 == 0 {
            let mut b = [0u8; 16];
            let _ = s.read(&mut b);
        }
        drop(s);
    }
}

fn malformed(addr: SocketAddr) {
    let cases: [&[u8]; 7] = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage-tls-hello\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nBad Header\r\n\r\n",
        b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        b"\r\n\r\n\r\n",
        b"GET /metrics HTTP/9.9\r\n\r\n",
        b"GET /nothing-here HTTP/1.1\r\n\r\n",
    ];
    for c in cases {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(c).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let (status, _, _) = parse_response(&out);
        assert!((400..=505).contains(&status), "{:?} -> {status}", c);
    }
    // A head larger than the limit.
    let mut s = TcpStream::connect(addr).unwrap();
    let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "y".repeat(20_000));
    let _ = s.write_all(big.as_bytes());
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_eq!(parse_response(&out).0, 431);
}

/// One storm of every kind; a normal scrape must stay quick meanwhile.
fn storm(addr: SocketAddr) {
    // A slow scraper: reads its response a little at a time over ~1 s.
    let slow_reader = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let mut b = [0u8; 512];
        loop {
            std::thread::sleep(Duration::from_millis(20));
            match s.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&b[..n]),
            }
        }
        parse_response(&out).0
    });
    // Slow requests (one byte every 100 ms): they get a 408 at the read deadline.
    let slowloris: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                for b in b"GET /metrics HTTP/1.1\r\nHost: slow-slow-slow-slow\r\n" {
                    if s.write_all(&[*b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let mut out = Vec::new();
                let _ = s.read_to_end(&mut out);
                parse_response(&out).0
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    assert_eq!(get(addr, "/metrics", None).0, 200);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "a scrape took {:?} beside slow clients",
        t.elapsed()
    );
    assert_eq!(concurrent_scrapes(addr, 1000), 1000);
    disconnect_mid_response(addr, 200);
    malformed(addr);
    assert_eq!(slow_reader.join().unwrap(), 200);
    for h in slowloris {
        assert_eq!(h.join().unwrap(), 408);
    }
}

#[test]
fn bad_clients_memory_and_descriptors() {
    let shared = loaded(SPR_INTERVALS);
    let limits = Limits {
        read_timeout: Duration::from_millis(1500),
        write_timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let fds_before_server = fd_count();
    let server = Server::start(
        TcpListener::bind("127.0.0.1:0").unwrap(),
        tma_serve::handler(Arc::clone(&shared)),
        limits,
        Arc::clone(&shared.stats),
        quiet_log(),
    )
    .unwrap();
    let addr = server.addr();
    // Warm-up: the first storm grows the allocator's pools to their working size.
    storm(addr);
    let settle = |want: usize| {
        let t = Instant::now();
        while fd_count() > want && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        fd_count()
    };
    let fds1 = settle(fds_before_server + 1);
    let rss1 = rss_kib();
    for _ in 0..2 {
        storm(addr);
    }
    let fds2 = settle(fds1);
    let rss2 = rss_kib();
    println!(
        "fds: {fds_before_server} before the server, {fds1} after one storm, {fds2} after four"
    );
    println!("VmRSS: {rss1} KiB after one storm, {rss2} KiB after three");
    assert_eq!(
        fds1,
        fds_before_server + 1,
        "only the listening socket stays open"
    );
    assert_eq!(fds2, fds1, "no descriptor leaks over two more storms");
    assert!(
        rss2 <= rss1 + 4096,
        "memory grew from {rss1} to {rss2} KiB over two storms"
    );
    let stats = shared.stats.snapshot();
    println!("responses by status: {stats:?}");
    assert!(stats.iter().any(|(c, n)| *c == 200 && *n >= 3000));
    server.stop();
    assert_eq!(settle(fds_before_server), fds_before_server);
}
