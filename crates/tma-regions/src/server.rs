//! The control channel: two FIFOs in a private directory, the launched program, and the loop
//! that reads the program's lines (answering acknowledged ones) until it exits.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tma_marker::protocol;
use tma_perf::backend::Ending;
use tma_perf::process::CommandStdout;
use tma_perf::sys::poll_readable;

use crate::placement::{Os, Placement};
use crate::tree::{Answer, Collector, ThreadCounters};
use crate::RegionsError;

/// The FIFOs a program talks to: created in a directory of their own (mode 0700), removed
/// with it. tma holds both ends of each open, so neither side ever blocks opening, and the
/// control FIFO never reads end-of-file while the program runs.
pub(crate) struct Channel {
    _dir: tempfile::TempDir,
    pub ctl_path: PathBuf,
    pub ack_path: PathBuf,
    ctl: File,
    ack: File,
}

impl Channel {
    pub(crate) fn new() -> Result<Channel, RegionsError> {
        let io = RegionsError::Channel;
        let dir = tempfile::Builder::new()
            .prefix("tma-regions-")
            .tempdir()
            .map_err(io)?;
        let ctl_path = dir.path().join("control");
        let ack_path = dir.path().join("ack");
        for p in [&ctl_path, &ack_path] {
            rustix::fs::mkfifoat(rustix::fs::CWD, p, rustix::fs::Mode::from_raw_mode(0o600))
                .map_err(|e| io(e.into()))?;
        }
        let open = |p: &PathBuf, nonblock: bool| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_CLOEXEC | if nonblock { libc::O_NONBLOCK } else { 0 })
                .open(p)
        };
        Ok(Channel {
            // Read without blocking: tma sleeps in poll, and reads first when a line is likely
            // there already (one system call per line instead of two).
            ctl: open(&ctl_path, true).map_err(io)?,
            // Answers never block tma: a program that asks and does not read loses them.
            ack: open(&ack_path, true).map_err(io)?,
            ctl_path,
            ack_path,
            _dir: dir,
        })
    }
}

/// How long tma looks for the program's next line after one before it sleeps in poll (when
/// it is not following the program onto its CPU: see [`crate::placement`]).
const SPIN: Duration = Duration::from_micros(100);

/// Lines a program may send that tma notes as bad, before it stops noting them.
const MAX_BAD_LINES: usize = 20;

/// Split complete lines off `buf` and handle each.
fn handle_lines<O: Os>(
    buf: &mut Vec<u8>,
    ch: &Channel,
    collector: &mut Collector,
    counters: &mut dyn ThreadCounters,
    placement: &mut Placement<O>,
    bad: &mut usize,
) {
    let now = Instant::now();
    let mut start = 0;
    while let Some(nl) = buf[start..].iter().position(|b| *b == b'\n') {
        let line = &buf[start..start + nl];
        start += nl + 1;
        match protocol::parse(line) {
            Ok(m) => {
                let acked = match &m {
                    protocol::Message::Begin { tid, ack: true, .. }
                    | protocol::Message::End { tid, ack: true, .. } => Some(*tid),
                    _ => None,
                };
                let answer = match collector.handle(m, now, counters) {
                    Answer::None => None,
                    Answer::Ok => Some("ok\n".to_string()),
                    Answer::Error(e) => Some(format!("error {}\n", e.replace('\n', " "))),
                };
                if let Some(a) = answer {
                    let _ = (&ch.ack).write_all(a.as_bytes());
                }
                if let Some(tid) = acked {
                    placement.acknowledged(tid, now);
                }
            }
            Err(e) => {
                *bad += 1;
                if *bad <= MAX_BAD_LINES {
                    let shown: String = String::from_utf8_lossy(line).chars().take(80).collect();
                    collector
                        .notes
                        .push(format!("bad control line {shown:?}: {e}"));
                }
                // An acknowledged line that cannot be read still gets its answer.
                if line.first() == Some(&b'!') {
                    let _ = (&ch.ack).write_all(format!("error {e}\n").as_bytes());
                }
            }
        }
    }
    buf.drain(..start);
    if buf.len() > protocol::MAX_LINE {
        *bad += 1;
        collector
            .notes
            .push("a control line longer than 4096 bytes: dropped".into());
        buf.clear();
    }
}

/// Run `argv` with `env`, reading its control lines into `collector` until it exits (or
/// Ctrl-C), this thread placed by `placement`. Returns how it ended.
pub(crate) fn serve<O: Os>(
    argv: &[std::ffi::OsString],
    env: &[(String, String)],
    stdout: CommandStdout,
    ch: &Channel,
    collector: &mut Collector,
    counters: &mut dyn ThreadCounters,
    placement: &mut Placement<O>,
) -> Result<Ending, RegionsError> {
    tma_perf::process::catch_interrupts().map_err(RegionsError::Channel)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if stdout == CommandStdout::Null {
        cmd.stdout(Stdio::null());
    }
    let mut child = cmd.spawn().map_err(|source| RegionsError::Exec {
        cmd: argv[0].to_string_lossy().into_owned(),
        source,
    })?;
    let pidfd =
        File::from(tma_sys::process::pidfd_open(child.id() as i32).map_err(RegionsError::Channel)?);
    placement.program_started(child.id());
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut bad = 0usize;
    // Read what the FIFO holds and handle it: `false` when it held nothing.
    let mut read_ready = |buf: &mut Vec<u8>,
                          collector: &mut Collector,
                          placement: &mut Placement<O>|
     -> Result<bool, RegionsError> {
        let n = match (&ch.ctl).read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(true),
            Err(e) => return Err(RegionsError::Channel(e)),
        };
        buf.extend_from_slice(&chunk[..n]);
        handle_lines(buf, ch, collector, counters, placement, &mut bad);
        Ok(n > 0)
    };
    let ending = loop {
        if tma_perf::process::interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            break Ending::Interrupted;
        }
        // On the program's CPU the program's next line has usually come while this thread
        // waited for the CPU: read it without sleeping first.
        if placement.following() {
            if read_ready(&mut buf, collector, placement)? {
                continue;
            }
            placement.slept();
        }
        let ready = match poll_readable(&[&ch.ctl, &pidfd], 200) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(RegionsError::Channel(e)),
        };
        if ready[0] {
            read_ready(&mut buf, collector, placement)?;
            if placement.following() {
                // On the program's CPU the next line comes while this thread sleeps: the
                // program wakes it there, with no interrupt to another CPU.
                continue;
            }
            // A program that sends a line often sends the next soon (an acknowledged
            // region's end, the next region of a loop): look for it for a while before
            // sleeping in poll, whose wake-up (an interrupt to another CPU) costs tens of
            // microseconds in a virtual machine.
            let mut until = Instant::now() + SPIN;
            while Instant::now() < until {
                if read_ready(&mut buf, collector, placement)? {
                    until = Instant::now() + SPIN;
                }
                if placement.following() {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        if ready[1] {
            // The program has exited: what it wrote before is in the FIFO.
            while read_ready(&mut buf, collector, placement)? {}
            let status = child.wait().map_err(RegionsError::Channel)?;
            break match (status.code(), status.signal()) {
                (Some(c), _) => Ending::Exited(c),
                (None, Some(s)) => Ending::Signaled(s),
                (None, None) => Ending::Exited(0),
            };
        }
    };
    placement.finish();
    if !buf.is_empty() {
        collector
            .notes
            .push("the program's last control line has no newline: dropped".into());
    }
    if bad > MAX_BAD_LINES {
        collector.notes.push(format!(
            "{} more bad control lines not shown",
            bad - MAX_BAD_LINES
        ));
    }
    Ok(ending)
}
