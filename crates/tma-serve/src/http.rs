//! A small HTTP/1.1 server for `/metrics`, bounded in every direction: a fixed pool of
//! worker threads, a bounded queue of accepted connections (the overflow gets a quick 503),
//! a cap on the request head, a deadline for reading it and a timeout for each write. One
//! request per connection (`Connection: close`), `GET` and `HEAD` only. Requests are parsed
//! with `httparse`; what it refuses gets a 400 and the connection is closed.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::log::Log;

/// The bounds of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Threads that serve connections.
    pub workers: usize,
    /// Accepted connections waiting for a worker; more get `503` at once.
    pub queue: usize,
    /// Time to receive the whole request head, from the accept.
    pub read_timeout: Duration,
    /// Time allowed to send the whole response (a slow or stalled reader).
    pub write_timeout: Duration,
    /// Largest request head, bytes (`431` beyond).
    pub max_head: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: 4,
            queue: 1024,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
            max_head: 8192,
        }
    }
}

/// A parsed request: what the handler needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET` or `HEAD`.
    pub method: String,
    /// The path without the query string.
    pub path: String,
    /// The `Accept` header, if any.
    pub accept: Option<String>,
}

/// A response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Extra header lines (`Allow: GET, HEAD`).
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into().into_bytes(),
            headers: Vec::new(),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// Responses by status, for `tma_http_responses_total`.
#[derive(Debug, Default)]
pub struct Stats {
    counts: [AtomicU64; STATUSES.len()],
}

/// The statuses the server answers with.
pub const STATUSES: [u16; 9] = [200, 400, 404, 405, 408, 431, 500, 503, 505];

impl Stats {
    fn count(&self, status: u16) {
        if let Some(i) = STATUSES.iter().position(|s| *s == status) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
    }
    /// (status, responses so far), for the statuses seen at least once.
    pub fn snapshot(&self) -> Vec<(u16, u64)> {
        STATUSES
            .iter()
            .zip(&self.counts)
            .map(|(s, c)| (*s, c.load(Ordering::Relaxed)))
            .filter(|(_, c)| *c > 0)
            .collect()
    }
}

/// What answers requests.
pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// A running server; [`Server::stop`] ends it and releases the port.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl Server {
    /// Serve on `listener` with `handler`; responses are counted in `stats`.
    pub fn start(
        listener: TcpListener,
        handler: Arc<Handler>,
        limits: Limits,
        stats: Arc<Stats>,
        log: Arc<Log>,
    ) -> std::io::Result<Server> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel::<TcpStream>(limits.queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let mut workers = Vec::new();
        for i in 0..limits.workers.max(1) {
            let rx: Arc<Mutex<Receiver<TcpStream>>> = Arc::clone(&rx);
            let handler = Arc::clone(&handler);
            let limits = limits.clone();
            let stats = Arc::clone(&stats);
            workers.push(
                std::thread::Builder::new()
                    .name(format!("http-{i}"))
                    .spawn(move || loop {
                        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok(stream) = next else { return };
                        let status = serve_connection(stream, &*handler, &limits);
                        stats.count(status);
                    })?,
            );
        }
        let stop2 = Arc::clone(&stop);
        let accept = std::thread::Builder::new()
            .name("http-accept".into())
            .spawn(move || {
                let mut last_error_log: Option<Instant> = None;
                loop {
                    let r = listener.accept();
                    if stop2.load(Ordering::SeqCst) {
                        return;
                    }
                    match r {
                        Ok((stream, _)) => match tx.try_send(stream) {
                            Ok(()) => {}
                            Err(TrySendError::Full(stream)) => {
                                stats.count(503);
                                busy(stream);
                            }
                            Err(TrySendError::Disconnected(_)) => return,
                        },
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => {
                            // Out of file descriptors and the like: say so (at most once a
                            // second) and give the system a moment.
                            if last_error_log.is_none_or(|t| t.elapsed() > Duration::from_secs(1)) {
                                log.warn("accept_failed", &[("error", &e)]);
                                last_error_log = Some(Instant::now());
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            })?;
        Ok(Server {
            addr,
            stop,
            accept: Some(accept),
            workers,
        })
    }

    /// The address the server listens on (the port chosen when it was 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, let the workers finish the connections they hold (each is bounded by
    /// the timeouts), and close the listening socket.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept call with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// The queue is full: a short 503 without reading the request, then close.
fn busy(stream: TcpStream) {
    let resp = Response::text(503, "busy: too many connections, retry\n");
    let _ = write_response(&stream, &resp, false, Duration::from_millis(100));
    let _ = stream.shutdown(Shutdown::Both);
}

/// Read one request from `stream`, answer it, close. Returns the status sent (or that
/// would have been sent to a client that went away).
fn serve_connection(stream: TcpStream, handler: &Handler, limits: &Limits) -> u16 {
    let _ = stream.set_nodelay(true);
    let (status, resp, head) = match read_request(&stream, limits) {
        Ok(req) => {
            let head = req.method == "HEAD";
            let resp = handler(&req);
            (resp.status, resp, head)
        }
        Err(Refused::Gone) => return 400,
        Err(Refused::Status(code, msg)) => (code, Response::text(code, msg), false),
    };
    let _ = write_response(&stream, &resp, head, limits.write_timeout);
    // Half-close, then drain briefly so the client gets the response rather than a reset
    // when it sent more than we read.
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut sink = [0u8; 1024];
    let mut drained = 0;
    while drained < 64 * 1024 {
        match (&stream).read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    status
}

enum Refused {
    /// The client closed or reset the connection before sending a request.
    Gone,
    Status(u16, String),
}

fn read_request(stream: &TcpStream, limits: &Limits) -> Result<Request, Refused> {
    let deadline = Instant::now() + limits.read_timeout;
    let mut buf = vec![0u8; limits.max_head];
    let mut len = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Refused::Status(
                408,
                "request head not received in time\n".into(),
            ));
        }
        let _ = stream.set_read_timeout(Some(left));
        if len == buf.len() {
            return Err(Refused::Status(
                431,
                format!("request head larger than {} bytes\n", limits.max_head),
            ));
        }
        match (&*stream).read(&mut buf[len..]) {
            Ok(0) => {
                if len == 0 {
                    return Err(Refused::Gone);
                }
                return Err(Refused::Status(400, "incomplete request\n".into()));
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(Refused::Status(
                    408,
                    "request head not received in time\n".into(),
                ))
            }
            Err(_) => return Err(Refused::Gone),
        }
        let mut headers = [httparse::EMPTY_HEADER; 48];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Partial) => continue,
            Ok(httparse::Status::Complete(_)) => return checked(&req),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(Refused::Status(431, "too many header fields\n".into()))
            }
            Err(e) => return Err(Refused::Status(400, format!("malformed request: {e}\n"))),
        }
    }
}

fn checked(req: &httparse::Request<'_, '_>) -> Result<Request, Refused> {
    let method = req.method.unwrap_or("");
    let path = req.path.unwrap_or("/");
    if req.version != Some(1) && req.version != Some(0) {
        return Err(Refused::Status(505, "HTTP/1.x only\n".into()));
    }
    let accept = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("accept"))
        .map(|h| String::from_utf8_lossy(h.value).into_owned());
    Ok(Request {
        method: method.to_string(),
        path: path.split('?').next().unwrap_or("/").to_string(),
        accept,
    })
}

/// Write all of `buf` before `deadline` (each write waits at most the time left).
fn write_by(mut stream: &TcpStream, mut buf: &[u8], deadline: Instant) -> std::io::Result<()> {
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn write_response(
    stream: &TcpStream,
    r: &Response,
    head_only: bool,
    within: Duration,
) -> std::io::Result<()> {
    let deadline = Instant::now() + within;
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    for (k, v) in &r.headers {
        head.push_str(k);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    write_by(stream, head.as_bytes(), deadline)?;
    if !head_only {
        write_by(stream, &r.body, deadline)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(limits: Limits) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let handler: Arc<Handler> = Arc::new(|r: &Request| {
            if r.method != "GET" && r.method != "HEAD" {
                return Response::text(405, "no\n");
            }
            Response::text(200, format!("{} {:?}\n", r.path, r.accept))
        });
        Server::start(
            l,
            handler,
            limits,
            Arc::new(Stats::default()),
            Arc::new(Log::new(Box::new(std::io::sink()))),
        )
        .unwrap()
    }

    fn exchange(addr: SocketAddr, bytes: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(bytes).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn get_with_query_and_accept() {
        let srv = server(Limits::default());
        let r = exchange(
            srv.addr(),
            b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\n\r\n",
        );
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.ends_with("/metrics Some(\"text/plain\")\n"), "{r}");
        let r = exchange(srv.addr(), b"HEAD / HTTP/1.0\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
        srv.stop();
    }

    #[test]
    fn malformed_oversized_and_slow_requests_get_an_error_status() {
        let srv = server(Limits {
            read_timeout: Duration::from_millis(300),
            max_head: 256,
            ..Limits::default()
        });
        let r = exchange(srv.addr(), b"\x00\x01garbage\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 400 "), "{r}");
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(1000));
        let r = exchange(srv.addr(), big.as_bytes());
        assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
        // Half a request, then silence: 408 after the read deadline.
        let t = Instant::now();
        let r = exchange(srv.addr(), b"GET / HTT");
        assert!(r.starts_with("HTTP/1.1 408 "), "{r}");
        assert!(t.elapsed() < Duration::from_secs(3));
        let r = exchange(srv.addr(), b"GET / HTTP/2.0\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 505 ") || r.starts_with("HTTP/1.1 400 "),
            "{r}"
        );
        srv.stop();
    }

    #[test]
    fn clients_that_vanish_or_stall_mid_response_do_not_hold_the_worker() {
        // One worker and a 4 MiB response: far more than the socket buffers hold, so the
        // worker is still writing when the client goes away or stops reading.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let handler: Arc<Handler> = Arc::new(|r: &Request| {
            let n = if r.path == "/big" { 4 << 20 } else { 3 };
            Response::text(200, "x".repeat(n))
        });
        let stats = Arc::new(Stats::default());
        let srv = Server::start(
            l,
            handler,
            Limits {
                workers: 1,
                write_timeout: Duration::from_millis(300),
                ..Limits::default()
            },
            Arc::clone(&stats),
            Arc::new(Log::new(Box::new(std::io::sink()))),
        )
        .unwrap();
        let addr = srv.addr();
        // Reads a little, then disconnects.
        let mut a = TcpStream::connect(addr).unwrap();
        a.write_all(b"GET /big HTTP/1.1\r\n\r\n").unwrap();
        let mut b = [0u8; 64];
        a.read_exact(&mut b).unwrap();
        drop(a);
        // Asks, then never reads (the connection stays open).
        let mut stalled = TcpStream::connect(addr).unwrap();
        stalled.write_all(b"GET /big HTTP/1.1\r\n\r\n").unwrap();
        let t = Instant::now();
        let r = exchange(addr, b"GET /small HTTP/1.1\r\n\r\n");
        assert!(r.ends_with("\r\n\r\nxxx"), "{r}");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "the worker was held {:?}",
            t.elapsed()
        );
        drop(stalled);
        srv.stop();
    }

    #[test]
    fn stop_releases_the_port() {
        let srv = server(Limits::default());
        let addr = srv.addr();
        srv.stop();
        TcpListener::bind(addr).expect("the port is free again after stop");
    }
}
