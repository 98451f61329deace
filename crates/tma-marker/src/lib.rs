//! Mark named regions of a program for `tma stat --regions`.
//!
//! ```no_run
//! tma_marker::begin("solve");
//! // ... the work ...
//! tma_marker::end("solve");
//! // or, ended when the guard drops:
//! let _r = tma_marker::region("solve");
//! ```
//!
//! Not run under tma ([`protocol::ENV_FIFO`] unset), every call returns at once. Under tma,
//! each thread counts its regions itself when tma names counter groups
//! ([`protocol::ENV_EVENTS`]) and the kernel lets the thread open them: two group reads per
//! region, no message until the totals are sent (when a thread's outermost region ends and
//! 20 ms have passed since its last report, at [`flush`], and when the thread exits).
//! Otherwise (or with `TMA_MARKER_MODE=fifo`) every begin and end is an acknowledged line of
//! the protocol, and tma reads the counters. Regions nest per thread; threads are kept apart.
//!
//! The C interface (`include/tma_marker.h`, in the shared and static libraries) is
//! `tma_region_begin`, `tma_region_end`, `tma_region_flush` and `tma_regions_active`.

mod counters;
mod ffi;
pub mod protocol;
mod rdpmc;

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use counters::ThreadGroups;
use protocol::{EventAttr, GroupCount, Message};

/// How often at most a thread sends its totals while it runs.
const FLUSH_EVERY: Duration = Duration::from_millis(20);

/// How this process talks to tma.
enum Mode {
    /// Count in process with these groups (per thread; following the threads it starts
    /// unless `false`), send totals.
    InProcess(Vec<Vec<EventAttr>>, bool),
    /// Acknowledged begin/end lines.
    Fifo,
}

/// The connection to tma, opened at the first call.
struct Shared {
    fifo: File,
    /// The acknowledgement FIFO, taken in turns.
    ack: Option<Mutex<File>>,
    mode: Mode,
}

static SHARED: OnceLock<Option<Shared>> = OnceLock::new();
static PAUSED: AtomicBool = AtomicBool::new(false);
/// How many times this process was forked from its parent's image (see [`ffi::watch_forks`]).
static FORKS: AtomicU32 = AtomicU32::new(0);

/// Open a FIFO without waiting for the other end (tma holds both ends open), then make it
/// blocking.
fn open_fifo(path: &str, write: bool) -> Option<File> {
    let f = OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let flags = rustix::fs::fcntl_getfl(&f).ok()?;
    rustix::fs::fcntl_setfl(&f, flags - rustix::fs::OFlags::NONBLOCK).ok()?;
    Some(f)
}

fn connect() -> Option<Shared> {
    let fifo_path = std::env::var(protocol::ENV_FIFO).ok()?;
    let fifo = open_fifo(&fifo_path, true)?;
    let ack = std::env::var(protocol::ENV_ACK)
        .ok()
        .and_then(|p| open_fifo(&p, false))
        .map(Mutex::new);
    let forced_fifo = std::env::var(protocol::ENV_MODE).is_ok_and(|m| m == "fifo");
    let events = std::env::var(protocol::ENV_EVENTS)
        .ok()
        .and_then(|e| protocol::parse_events(&e).ok())
        .filter(|e| !e.is_empty());
    let mode = match events {
        Some(e) if !forced_fifo => Mode::InProcess(
            e,
            !std::env::var(protocol::ENV_OWN_THREAD).is_ok_and(|v| v == "1"),
        ),
        _ => Mode::Fifo,
    };
    ffi::watch_forks();
    Some(Shared { fifo, ack, mode })
}

/// Set once the connection is known to be absent: the calls of a program not run under tma
/// cost one relaxed load.
static OFF: AtomicBool = AtomicBool::new(false);

fn shared() -> Option<&'static Shared> {
    if OFF.load(Ordering::Relaxed) {
        return None;
    }
    let s = SHARED.get_or_init(connect).as_ref();
    if s.is_none() {
        OFF.store(true, Ordering::Relaxed);
    }
    s
}

/// Whether the calls are no-ops (known not to run under tma).
pub(crate) fn off() -> bool {
    OFF.load(Ordering::Relaxed)
}

/// Whether this process runs under `tma stat --regions` (or `--itt`).
pub fn active() -> bool {
    shared().is_some()
}

impl Shared {
    /// One line, one write (atomic on a pipe).
    fn send(&self, m: &Message) {
        let line = m.to_string();
        if line.len() <= protocol::MAX_LINE {
            let _ = (&self.fifo).write_all(line.as_bytes());
        }
    }

    /// One line, then wait for tma's answer.
    fn send_acked(&self, m: &Message) {
        let Some(ack) = &self.ack else {
            return self.send(m);
        };
        let mut ack = ack.lock().unwrap_or_else(|e| e.into_inner());
        self.send(m);
        let mut buf = [0u8; 64];
        loop {
            match ack.read(&mut buf) {
                Ok(n) if n > 0 && buf[..n].contains(&b'\n') => break,
                Ok(n) if n > 0 => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => break,
            }
        }
    }
}

/// A region of the thread's tree (in-process counting).
struct Node {
    name: String,
    parent: usize,
    children: Vec<usize>,
    calls: u64,
    wall_ns: u64,
    counts: Vec<GroupCount>,
}

/// An open region: its node (in-process) or name (FIFO), whether it is recorded (not begun
/// while paused), and its start.
struct Open {
    node: usize,
    name: String,
    recorded: bool,
    t0: Instant,
    start: Vec<GroupCount>,
}

/// One thread's state.
struct ThreadState {
    tid: u32,
    /// [`FORKS`] when this state was made: a forked child starts afresh.
    forks: u32,
    /// `None` until the first region; `Some(None)` when the counters could not be opened
    /// (the thread then speaks the acknowledged protocol).
    groups: Option<Option<ThreadGroups>>,
    /// Node 0 is the root (no name).
    nodes: Vec<Node>,
    stack: Vec<Open>,
    errors: Vec<String>,
    last_flush: Instant,
    /// The last reading of the counters (at an `end`) and when it was taken.
    last: Option<(Instant, Vec<GroupCount>)>,
    /// A reading's vectors to fill next (recycled from a region's start, so that readings
    /// allocate nothing in a loop of regions).
    spare: Vec<GroupCount>,
    /// Regions ended and not yet reported for the timeline: (node, begin, end).
    spans: Vec<(usize, Instant, Instant)>,
    /// Regions kept for the timeline so far (at most [`protocol::MAX_SPANS`]).
    spans_kept: usize,
}

impl ThreadState {
    fn new() -> Self {
        ThreadState {
            tid: rustix::thread::gettid().as_raw_nonzero().get() as u32,
            forks: FORKS.load(Ordering::Relaxed),
            groups: None,
            nodes: vec![Node {
                name: String::new(),
                parent: 0,
                children: Vec::new(),
                calls: 0,
                wall_ns: 0,
                counts: Vec::new(),
            }],
            stack: Vec::new(),
            errors: Vec::new(),
            last_flush: Instant::now(),
            last: None,
            spare: Vec::new(),
            spans: Vec::new(),
            spans_kept: 0,
        }
    }

    fn counters(&mut self, sh: &Shared) -> Option<&ThreadGroups> {
        if self.groups.is_none() {
            self.groups = Some(match &sh.mode {
                Mode::InProcess(ev, inherit) => ThreadGroups::open(ev, *inherit).ok(),
                Mode::Fifo => None,
            });
        }
        self.groups.as_ref().and_then(Option::as_ref)
    }

    fn begin(&mut self, sh: &Shared, name: &str) {
        let recorded = !PAUSED.load(Ordering::Relaxed) && protocol::check_name(name).is_ok();
        if !recorded {
            return self.stack.push(Open {
                node: 0,
                name: String::new(),
                recorded,
                t0: Instant::now(),
                start: Vec::new(),
            });
        }
        if self.counters(sh).is_none() {
            self.stack.push(Open {
                node: 0,
                name: name.to_string(),
                recorded,
                t0: Instant::now(),
                start: Vec::new(),
            });
            return sh.send_acked(&Message::Begin {
                tid: self.tid,
                name: name.to_string(),
                ack: true,
            });
        }
        let parent = self.stack.last().map_or(0, |o| o.node);
        let node = match self.nodes[parent]
            .children
            .iter()
            .copied()
            .find(|&c| self.nodes[c].name == name)
        {
            Some(c) => c,
            None => {
                self.nodes.push(Node {
                    name: name.to_string(),
                    parent,
                    children: Vec::new(),
                    calls: 0,
                    wall_ns: 0,
                    counts: Vec::new(),
                });
                let c = self.nodes.len() - 1;
                self.nodes[parent].children.push(c);
                c
            }
        };
        let t0 = Instant::now();
        // A region that begins right after another ended (a loop of regions) starts from
        // that end's reading when it is less than one reading's time old: a new reading
        // could not be closer to the boundary than that (what ran in between, less than
        // the read itself, is charged to this region). One reading per pair instead of two.
        let cost = self.counters(sh).map_or(Duration::ZERO, |g| g.read_cost());
        let start = match self.last.take() {
            Some((at, counts)) if t0.saturating_duration_since(at) < cost => counts,
            stale => {
                let mut buf = stale.map_or_else(|| std::mem::take(&mut self.spare), |(_, c)| c);
                self.read_counters(sh, &mut buf);
                buf
            }
        };
        self.stack.push(Open {
            node,
            name: String::new(),
            recorded,
            t0,
            start,
        });
    }

    fn end(&mut self, sh: &Shared, name: &str) {
        let Some(top) = self.stack.last() else {
            self.errors
                .push(format!("end {name:?} with no region open: ignored"));
            return;
        };
        if !top.recorded {
            self.stack.pop();
            return;
        }
        let in_process = top.node != 0;
        let top_name = if in_process {
            self.nodes[top.node].name.as_str()
        } else {
            top.name.as_str()
        };
        if top_name != name {
            self.errors.push(format!(
                "end {name:?} while {top_name:?} is the innermost open region: ignored"
            ));
            return;
        }
        if !in_process {
            self.stack.pop();
            return sh.send_acked(&Message::End {
                tid: self.tid,
                name: name.to_string(),
                ack: true,
            });
        }
        let mut now = std::mem::take(&mut self.spare);
        self.read_counters(sh, &mut now);
        let Some(open) = self.stack.pop() else {
            return;
        };
        let read_at = Instant::now();
        let wall = read_at.saturating_duration_since(open.t0).as_nanos() as u64;
        let node = &mut self.nodes[open.node];
        node.calls += 1;
        node.wall_ns += wall;
        protocol::add_deltas(&mut node.counts, &now, &open.start);
        // The start's vectors hold the next reading (an older unused reading is dropped).
        self.spare = open.start;
        self.last = Some((read_at, now));
        if self.spans_kept < protocol::MAX_SPANS {
            self.spans_kept += 1;
            self.spans.push((open.node, open.t0, read_at));
        }
        if self.stack.is_empty()
            && read_at.saturating_duration_since(self.last_flush) >= FLUSH_EVERY
        {
            self.flush(sh);
        }
    }

    /// Read the counters into `buf` (emptied when they cannot be read: the region then
    /// carries its time and calls only, as before the reading failed).
    fn read_counters(&mut self, sh: &Shared, buf: &mut Vec<GroupCount>) {
        let ok = self.counters(sh).is_some_and(|g| g.read_into(buf).is_ok());
        if !ok {
            buf.clear();
        }
    }

    /// Send the totals gathered since the last flush, and the errors.
    fn flush(&mut self, sh: &Shared) {
        self.last_flush = Instant::now();
        let mut path: Vec<String> = Vec::new();
        self.flush_node(sh, 0, &mut path);
        for (node, b, e) in std::mem::take(&mut self.spans) {
            let mut path = Vec::new();
            let mut i = node;
            while i != 0 {
                path.push(self.nodes[i].name.clone());
                i = self.nodes[i].parent;
            }
            path.reverse();
            let m = Message::Span {
                tid: self.tid,
                path,
                begin_ns: protocol::monotonic_ns(b),
                end_ns: protocol::monotonic_ns(e),
            };
            if m.to_string().len() <= protocol::MAX_LINE {
                sh.send(&m);
            }
        }
        for text in self.errors.drain(..) {
            sh.send(&Message::Error {
                tid: self.tid,
                text,
            });
        }
    }

    fn flush_node(&mut self, sh: &Shared, i: usize, path: &mut Vec<String>) {
        if i != 0 {
            path.push(self.nodes[i].name.clone());
            let n = &mut self.nodes[i];
            if n.calls > 0 {
                let m = Message::Total {
                    tid: self.tid,
                    path: path.clone(),
                    calls: n.calls,
                    wall_ns: n.wall_ns,
                    counts: std::mem::take(&mut n.counts),
                };
                n.calls = 0;
                n.wall_ns = 0;
                if m.to_string().len() <= protocol::MAX_LINE {
                    sh.send(&m);
                } else {
                    self.errors
                        .push("a region path is too long to report (over 4096 bytes)".into());
                }
            }
        }
        for c in self.nodes[i].children.clone() {
            self.flush_node(sh, c, path);
        }
        if i != 0 {
            path.pop();
        }
    }
}

impl Drop for ThreadState {
    /// A thread that ends sends what it has not sent yet.
    fn drop(&mut self) {
        if let Some(Some(sh)) = SHARED.get() {
            self.flush(sh);
        }
    }
}

thread_local! {
    static THREAD: RefCell<ThreadState> = RefCell::new(ThreadState::new());
}

/// This thread's state, made afresh in the child of a fork (the parent's open regions and
/// counters are not the child's; what the parent had not sent is the parent's to send).
fn with_thread(f: impl FnOnce(&mut ThreadState)) {
    let _ = THREAD.try_with(|t| {
        let mut t = t.borrow_mut();
        if t.forks != FORKS.load(Ordering::Relaxed) {
            let fresh = ThreadState::new();
            // The old state must not send the parent's totals from here.
            std::mem::forget(std::mem::replace(&mut *t, fresh));
        }
        f(&mut t)
    });
}

/// Enter region `name` on this thread (1 to 200 bytes, no control characters; another name
/// is not recorded).
pub fn begin(name: &str) {
    if let Some(sh) = shared() {
        with_thread(|t| t.begin(sh, name));
    }
}

/// Leave region `name`: the innermost open region of this thread (another name is reported to
/// tma as an error and ignored).
pub fn end(name: &str) {
    if let Some(sh) = shared() {
        with_thread(|t| t.end(sh, name));
    }
}

/// Send this thread's totals now (they are also sent when the thread exits, and every 20 ms
/// at most as outermost regions end).
pub fn flush() {
    if let Some(sh) = shared() {
        with_thread(|t| t.flush(sh));
    }
}

/// Stop recording regions in every thread (regions begun from now on are not recorded) until
/// [`resume`] (ITT's `__itt_pause`).
pub fn pause() {
    PAUSED.store(true, Ordering::Relaxed);
}

/// Record regions again after [`pause`].
pub fn resume() {
    PAUSED.store(false, Ordering::Relaxed);
}

/// A region that ends when dropped.
#[must_use = "the region ends when this guard is dropped"]
pub struct Region {
    name: String,
}

impl Drop for Region {
    fn drop(&mut self) {
        end(&self.name);
    }
}

/// Begin region `name`; it ends when the returned guard drops.
pub fn region(name: &str) -> Region {
    begin(name);
    Region {
        name: name.to_string(),
    }
}
