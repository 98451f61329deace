//! The HTTP request reader of `tma serve` (`tma_serve::http`): each input is sent as the
//! bytes of one connection to a server on the loopback interface (started once per process,
//! with the exporter's limits), and the answer is read back; the server must answer every
//! connection with a status line. The reader is private to the server, so the fuzzer reaches
//! it the way a client does.
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::{Bound, Target};
use tma_serve::http::{Limits, Response, Server, Stats};

fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the loopback");
        let handler: Arc<tma_serve::http::Handler> = Arc::new(|req| {
            Response::text(
                200,
                format!("{} {} {:?}\n", req.method, req.path, req.accept),
            )
        });
        let limits = Limits {
            workers: 1,
            read_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_millis(500),
            ..Limits::default()
        };
        let log = Arc::new(tma_serve::log::Log::new(Box::new(std::io::sink())));
        let server = Server::start(listener, handler, limits, Arc::new(Stats::default()), log)
            .expect("start the server");
        let addr = server.addr();
        // The server lives as long as the process.
        std::mem::forget(server);
        addr
    })
}

pub const TARGET: Target = Target {
    name: "http",
    setup: crate::no_setup,
    bound: |_| {
        // The server is started here, outside the measured region, by the process that
        // runs the inputs: afl forks that process from the one that calls main (and runs
        // `setup`), and threads do not survive a fork.
        let _ = server();
        Bound {
            per_byte: 16,
            fixed: 1 << 20,
        }
    },
    run: http,
};

fn http(data: &[u8]) {
    let mut s = TcpStream::connect(server()).expect("connect to the loopback server");
    s.set_read_timeout(Some(Duration::from_secs(1))).ok();
    // The server may answer and close before it read everything (431, 400): a failed
    // write is then expected.
    let _ = s.write_all(data);
    let _ = s.shutdown(Shutdown::Write);
    let mut answer = [0u8; 16];
    let mut got = 0;
    while got < answer.len() {
        match s.read(&mut answer[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(_) => break,
        }
    }
    // A connection that sent nothing is dropped without an answer; any other gets one (a
    // client that sent more than the server drains after answering may get a reset
    // instead, so only shorter ones are held to it).
    if !data.is_empty() && data.len() < 64 * 1024 && (got == 0 || !answer.starts_with(b"HTTP/1.1 "))
    {
        panic!("no status line: {:?}", &answer[..got]);
    }
}
