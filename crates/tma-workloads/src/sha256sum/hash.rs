//! Reading and hashing the inputs of `sha256sum`: one input alone (on two threads when it is
//! large or a stream), or several regular files at once with interleaved SHA-NI streams.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;

use crate::sha256::{self, Sha256, Sha256Impl};

/// An opened input: standard input (`-`) or a file.
pub(crate) enum Input {
    Stdin,
    File(File),
}

/// Open `name` (`-` is standard input, read later through the caller's stream).
pub(crate) fn open_input(name: &OsStr) -> io::Result<Input> {
    if name.as_bytes() == b"-" {
        return Ok(Input::Stdin);
    }
    Ok(Input::File(File::open(name)?))
}

fn is_regular(f: &File) -> bool {
    f.metadata().map(|m| m.is_file()).unwrap_or(false)
}

/// Hash one input to the end, on two threads when it is large or a stream.
pub(crate) fn hash_input(
    imp: Sha256Impl,
    input: Input,
    stdin: &mut (dyn Read + Send),
) -> io::Result<[u8; 32]> {
    match input {
        Input::Stdin => hash_one_pipelined(imp, stdin),
        Input::File(mut f) => {
            let big = f
                .metadata()
                .map(|m| m.len() >= PIPELINE_MIN)
                .unwrap_or(false);
            if big {
                hash_one_pipelined(imp, &mut f)
            } else {
                hash_one(imp, &mut f)
            }
        }
    }
}

/// Read until `buf` is full or EOF; returns bytes read. After SIGINT/SIGTERM
/// (`tma_sys::signal`) it reads nothing more: [`super::interrupted_error`].
fn read_full(r: &mut (impl Read + ?Sized), buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        if tma_sys::signal::interrupted().is_some() {
            return Err(super::interrupted_error());
        }
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Bytes read per `read` call and buffer. Small enough that the buffers being filled and hashed
/// stay in the core's L2 cache (three per input pipelined, one per file in a batch): with 256 KiB
/// buffers a 256 MiB file took 0.39 s of CPU with SHA-NI against 0.24 s at 64 KiB on a Zen 3
/// (more sizes in `docs/measurements.md`).
const CHUNK: usize = 64 * 1024;

/// Hash one input to the end.
fn hash_one(imp: Sha256Impl, input: &mut (impl Read + ?Sized)) -> io::Result<[u8; 32]> {
    let mut h = Sha256::with_impl(imp).map_err(io::Error::other)?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = read_full(input, &mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize())
}

/// Inputs at least this large (and standard input) are read by a second thread while this
/// one hashes, so the copy out of the page cache overlaps the hashing on another core.
const PIPELINE_MIN: u64 = 8 << 20;

/// [`hash_one`] with reading and hashing on two threads (three rotating buffers).
fn hash_one_pipelined(
    imp: Sha256Impl,
    input: &mut (impl Read + Send + ?Sized),
) -> io::Result<[u8; 32]> {
    use std::sync::mpsc::{channel, sync_channel};
    let mut h = Sha256::with_impl(imp).map_err(io::Error::other)?;
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = sync_channel::<io::Result<(Vec<u8>, usize)>>(2);
        let (empty_tx, empty_rx) = channel::<Vec<u8>>();
        for _ in 0..3 {
            let _ = empty_tx.send(vec![0u8; CHUNK]);
        }
        scope.spawn(move || {
            // Ends when the hashing side hangs up (both channels then fail) or at EOF/error.
            while let Ok(mut buf) = empty_rx.recv() {
                match read_full(input, &mut buf) {
                    Ok(n) => {
                        if full_tx.send(Ok((buf, n))).is_err() || n == 0 {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        let result = loop {
            match full_rx.recv() {
                Ok(Ok((_, 0))) => break Ok(()),
                Ok(Ok((buf, n))) => {
                    h.update(&buf[..n]);
                    let _ = empty_tx.send(buf);
                }
                Ok(Err(e)) => break Err(e),
                Err(_) => break Err(io::Error::other("the reader thread stopped early")),
            }
        };
        // Hang up so the reader thread ends before the scope joins it.
        drop(empty_tx);
        drop(full_rx);
        result
    })?;
    Ok(h.finalize())
}

/// How many files past the oldest unfinished one the batch may open. Files that finish out of
/// order wait for it with their digest (a few dozen bytes each): this bounds that memory when
/// one huge file shares the lanes with a great many small ones.
const LOOKAHEAD: usize = 4096;

/// How [`hash_files_batched`] runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rolling {
    /// Lanes (files hashed at once).
    pub width: usize,
    /// Files that may be opened past the oldest unfinished one.
    pub lookahead: usize,
    /// Read on a second thread.
    pub threaded: bool,
}

impl Rolling {
    /// `width` lanes, the [`LOOKAHEAD`] bound, and the reading on a second thread when this
    /// process may run on more than one CPU.
    pub(crate) fn for_this_host(width: usize) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Rolling {
            width,
            lookahead: LOOKAHEAD,
            threaded: cpus >= 2,
        }
    }
}

/// What the reading side hands the hashing side, in the order of the files.
enum Event {
    /// One chunk of every lane's file.
    Round(Vec<Chunk>),
    /// An input that is not a regular file, opened: hashed on its own.
    Alone(usize, Input),
    /// The file could not be opened.
    Failed(usize, io::Error),
}

/// One chunk of one lane's file.
struct Chunk {
    /// Index of the file in the argument list.
    idx: usize,
    buf: Vec<u8>,
    /// Bytes of `buf` read.
    len: usize,
    /// The file ended with this chunk (a short read) or failed.
    end: Option<io::Result<()>>,
}

/// The reading side: the open files of the lanes, and the next file to open.
struct LaneReader<'a> {
    files: &'a [OsString],
    width: usize,
    lookahead: usize,
    lanes: Vec<(usize, File)>,
    next_open: usize,
}

impl LaneReader<'_> {
    fn done(&self) -> bool {
        self.lanes.is_empty() && self.next_open == self.files.len()
    }

    /// May another file be opened before the hashing side emits more (`next_emit`)?
    fn can_open(&self, next_emit: usize) -> bool {
        self.next_open < self.files.len() && self.next_open < next_emit + self.lookahead
    }

    /// Can [`Self::step`] do anything before the hashing side emits more?
    fn can_step(&self, next_emit: usize) -> bool {
        !self.lanes.is_empty() || self.can_open(next_emit)
    }

    /// Open files for the free lanes (`send`ing what is hashed alone or failed), then read one
    /// chunk of every lane into buffers from `take_buf` and `send` the round. Returns false
    /// when `send` refused an event (the hashing side stopped).
    fn step(
        &mut self,
        next_emit: usize,
        take_buf: &mut dyn FnMut() -> Vec<u8>,
        send: &mut dyn FnMut(Event) -> bool,
    ) -> bool {
        while self.lanes.len() < self.width && self.can_open(next_emit) {
            let idx = self.next_open;
            self.next_open += 1;
            let ev = match open_input(&self.files[idx]) {
                Ok(Input::File(file)) if is_regular(&file) => {
                    self.lanes.push((idx, file));
                    continue;
                }
                Ok(input) => Event::Alone(idx, input),
                Err(e) => Event::Failed(idx, e),
            };
            if !send(ev) {
                return false;
            }
        }
        if self.lanes.is_empty() {
            return true;
        }
        let mut round = Vec::with_capacity(self.lanes.len());
        let mut k = 0;
        while k < self.lanes.len() {
            let mut buf = take_buf();
            let (idx, file) = &mut self.lanes[k];
            let idx = *idx;
            let (len, end) = match read_full(file, &mut buf) {
                // A short read is the end of the file.
                Ok(n) => (n, (n < buf.len()).then_some(Ok(()))),
                Err(e) => (0, Some(Err(e))),
            };
            if end.is_some() {
                self.lanes.swap_remove(k);
            } else {
                k += 1;
            }
            round.push(Chunk { idx, buf, len, end });
        }
        send(Event::Round(round))
    }
}

/// The hashing side: the hashers of the files in the lanes, and the digests waiting for an
/// earlier file to be emitted.
struct LaneHasher {
    imp: Sha256Impl,
    width: usize,
    hashers: Vec<(usize, Sha256)>,
    finished: BTreeMap<usize, io::Result<[u8; 32]>>,
    next_emit: usize,
}

impl LaneHasher {
    /// Hash one event; its buffers go to `give_back`. Then emit what is finished, in order.
    fn take(
        &mut self,
        ev: Event,
        stdin: &mut (dyn Read + Send),
        give_back: &mut dyn FnMut(Vec<u8>),
        emit: &mut dyn FnMut(usize, io::Result<[u8; 32]>) -> io::Result<()>,
    ) -> io::Result<()> {
        match ev {
            Event::Failed(idx, e) => {
                self.finished.insert(idx, Err(e));
            }
            Event::Alone(idx, input) => {
                self.finished
                    .insert(idx, hash_input(self.imp, input, &mut *stdin));
            }
            Event::Round(chunks) => {
                let mut hs = Vec::with_capacity(chunks.len());
                for c in &chunks {
                    let h = match self.hashers.iter().position(|(i, _)| *i == c.idx) {
                        Some(k) => self.hashers.swap_remove(k).1,
                        None => Sha256::with_impl(self.imp).map_err(io::Error::other)?,
                    };
                    hs.push(h);
                }
                let data: Vec<&[u8]> = chunks.iter().map(|c| &c.buf[..c.len]).collect();
                sha256::update_many_lanes(&mut hs, &data, self.width);
                for (c, h) in chunks.into_iter().zip(hs) {
                    match c.end {
                        None => self.hashers.push((c.idx, h)),
                        Some(end) => {
                            self.finished.insert(c.idx, end.map(|()| h.finalize()));
                        }
                    }
                    give_back(c.buf);
                }
            }
        }
        while let Some(entry) = self.finished.first_entry() {
            if *entry.key() != self.next_emit {
                break;
            }
            emit(self.next_emit, entry.remove())?;
            self.next_emit += 1;
        }
        Ok(())
    }
}

/// Hash `files` up to `how.width` regular files at once, each in its own interleaved SHA-NI
/// stream; `emit` gets each file's index and digest (or the error opening or reading it), in
/// the order of `files`.
///
/// The lanes roll: when a file ends, the next regular file takes its lane at the next chunk,
/// so one large file among small ones keeps being hashed beside them instead of alone once its
/// first companions have ended. Anything that is not a regular file (standard input, a pipe, a
/// device) is hashed on its own when its turn comes. With `how.threaded` the files are read on
/// a second thread while this one hashes the previous chunks. With `width` 1, or one file,
/// each input is hashed alone (a large one with reading on a second thread).
pub(crate) fn hash_files_batched(
    imp: Sha256Impl,
    files: &[OsString],
    how: Rolling,
    stdin: &mut (dyn Read + Send),
    emit: &mut dyn FnMut(usize, io::Result<[u8; 32]>) -> io::Result<()>,
) -> io::Result<()> {
    if how.width <= 1 || files.len() <= 1 {
        for (i, name) in files.iter().enumerate() {
            let r = open_input(name).and_then(|input| hash_input(imp, input, &mut *stdin));
            emit(i, r)?;
        }
        return Ok(());
    }
    let mut reader = LaneReader {
        files,
        width: how.width,
        lookahead: how.lookahead.max(1),
        lanes: Vec::with_capacity(how.width),
        next_open: 0,
    };
    let mut hasher = LaneHasher {
        imp,
        width: how.width,
        hashers: Vec::with_capacity(how.width),
        finished: BTreeMap::new(),
        next_emit: 0,
    };
    if !how.threaded {
        let mut spare: Vec<Vec<u8>> = Vec::new();
        let mut events = Vec::new();
        while !reader.done() {
            reader.step(
                hasher.next_emit,
                &mut || spare.pop().unwrap_or_else(|| vec![0u8; CHUNK]),
                &mut |ev| {
                    events.push(ev);
                    true
                },
            );
            for ev in events.drain(..) {
                hasher.take(ev, stdin, &mut |b| spare.push(b), emit)?;
            }
        }
    } else {
        hash_rolling_threaded(reader, &mut hasher, stdin, emit)?;
    }
    if hasher.next_emit != files.len() {
        return Err(io::Error::other(format!(
            "internal: {} of {} files were hashed",
            hasher.next_emit,
            files.len()
        )));
    }
    Ok(())
}

/// The rolling lanes with the reading on a second thread: rounds go one way (at most one
/// waiting), buffers and the hashing side's progress come back.
fn hash_rolling_threaded(
    mut reader: LaneReader<'_>,
    hasher: &mut LaneHasher,
    stdin: &mut (dyn Read + Send),
    emit: &mut dyn FnMut(usize, io::Result<[u8; 32]>) -> io::Result<()>,
) -> io::Result<()> {
    use std::sync::mpsc::{channel, sync_channel, TryRecvError};
    // Buffers: a round being read, one waiting, one being hashed.
    let nbufs = 3 * reader.width;
    std::thread::scope(|scope| {
        let (event_tx, event_rx) = sync_channel::<Event>(1);
        // Back: an event's buffers and the hashing side's progress after it.
        let (back_tx, back_rx) = channel::<(Vec<Vec<u8>>, usize)>();
        scope.spawn(move || {
            let mut pool: Vec<Vec<u8>> = (0..nbufs).map(|_| vec![0u8; CHUNK]).collect();
            let mut next_emit = 0;
            let absorb = |msg: (Vec<Vec<u8>>, usize), pool: &mut Vec<Vec<u8>>, e: &mut usize| {
                pool.extend(msg.0);
                *e = (*e).max(msg.1);
            };
            while !reader.done() {
                loop {
                    match back_rx.try_recv() {
                        Ok(msg) => absorb(msg, &mut pool, &mut next_emit),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => return,
                    }
                }
                // Wait for the hashing side when a round's buffers are not there yet or the
                // look-ahead is used up.
                while pool.len() < reader.lanes.len().max(1) || !reader.can_step(next_emit) {
                    match back_rx.recv() {
                        Ok(msg) => absorb(msg, &mut pool, &mut next_emit),
                        Err(_) => return,
                    }
                }
                let ok = reader.step(
                    next_emit,
                    &mut || pool.pop().unwrap_or_else(|| vec![0u8; CHUNK]),
                    &mut |ev| event_tx.send(ev).is_ok(),
                );
                if !ok {
                    return;
                }
            }
        });
        let result = (|| {
            for ev in event_rx.iter() {
                let mut back = Vec::new();
                hasher.take(ev, stdin, &mut |b| back.push(b), emit)?;
                let _ = back_tx.send((back, hasher.next_emit));
            }
            Ok(())
        })();
        // Hang up so the reader thread ends before the scope joins it.
        drop(back_tx);
        drop(event_rx);
        result
    })
}
