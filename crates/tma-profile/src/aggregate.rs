//! Records to sample counts: the one path for live ring-buffer data and perf.data files.
//!
//! [`Aggregator::handle`] takes a `linux_perf_event_reader::RawEventRecord`, whichever way
//! it was obtained: from a perf.data file ([`crate::import`]) or from the ring buffer
//! ([`crate::live`], which wraps the ring's one or two slices in `RawData::Single`/`Split`).
//! It keeps per-process memory maps (mmap/mmap2, fork, exec), and counts samples per call
//! stack, each frame resolved to a module and a file offset. No file is opened here:
//! symbolization happens once per distinct address afterwards ([`crate::symbols`]).

use std::collections::HashMap;

use linux_perf_event_reader::constants::{
    PERF_CONTEXT_GUEST, PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER,
    PERF_RECORD_MISC_MMAP_BUILD_ID,
};
use linux_perf_event_reader::{
    CpuMode, EventRecord, RawData, RawEventRecord, RecordType, SampleFormat,
};
use tma_perf::sampling::group::{self as sample_read, ReadGroup};

/// PERF_RECORD_LOST_SAMPLES (not parsed by linux-perf-event-reader 0.10).
const PERF_RECORD_LOST_SAMPLES: u32 = 13;

/// Index into [`Aggregator::modules`].
pub type ModuleId = u32;

/// Index into [`Aggregator::tasks`].
pub type TaskId = u32;

/// Who a sample ran in: the process id and the command name of the sampled thread (what
/// perf's `pid` and `comm` sort keys show). A thread renamed with `prctl(PR_SET_NAME)` or a
/// process after exec is another task.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Task {
    pub pid: i32,
    /// The thread's command name; `swapper` for pid 0 (the idle task, as perf names it) and
    /// `:PID` when no COMM record named it.
    pub comm: String,
}

/// One resolved stack frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Frame {
    /// User code in a mapped file: module and offset in that file.
    File { module: ModuleId, offset: u64 },
    /// Kernel code at this address.
    Kernel(u64),
    /// An address in no known mapping (JIT code, anonymous memory, missing mmap record).
    Unknown(u64),
}

/// A mapped file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Path as the kernel reported it (`/usr/lib/x86_64-linux-gnu/libc.so.6`).
    pub path: String,
    /// GNU build id, when the mmap2 record carried it.
    pub build_id: Option<Vec<u8>>,
    /// Lowest start address seen for the module (first mapping), for pprof mappings.
    pub start: u64,
    pub end: u64,
}

impl Module {
    /// File name without directories.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

#[derive(Debug, Clone, Copy)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
    module: ModuleId,
}

#[derive(Debug, Clone, Default)]
struct Process {
    comm: String,
    /// Sorted by start, non-overlapping (a new mapping cuts away what it covers).
    maps: Vec<Mapping>,
}

impl Process {
    fn add(&mut self, m: Mapping) {
        let mut out = Vec::with_capacity(self.maps.len() + 2);
        for &old in &self.maps {
            if old.end <= m.start || old.start >= m.end {
                out.push(old);
                continue;
            }
            if old.start < m.start {
                out.push(Mapping {
                    end: m.start,
                    ..old
                });
            }
            if old.end > m.end {
                out.push(Mapping {
                    start: m.end,
                    pgoff: old.pgoff + (m.end - old.start),
                    ..old
                });
            }
        }
        out.push(m);
        out.sort_by_key(|x| x.start);
        self.maps = out;
    }

    fn find(&self, addr: u64) -> Option<&Mapping> {
        let i = self.maps.partition_point(|m| m.start <= addr);
        let m = self.maps.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }
}

/// Counts kept while reading records.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Sample records seen.
    pub samples: u64,
    /// Sum of the samples' periods (events, or nanoseconds for cpu-clock).
    pub period: u64,
    /// Samples the kernel reports it dropped (PERF_RECORD_LOST / LOST_SAMPLES).
    pub lost: u64,
    /// PERF_RECORD_LOST records (ring buffer overflows).
    pub lost_records: u64,
    /// Samples whose leaf is in the kernel.
    pub kernel_samples: u64,
    /// Samples whose leaf is in no known mapping.
    pub unknown_samples: u64,
    /// Records that could not be parsed and were skipped.
    pub bad_records: u64,
    /// Throttle records (the kernel lowered the rate).
    pub throttled: u64,
}

/// What the samples' read groups (`PERF_SAMPLE_READ` with `PERF_FORMAT_GROUP`) add up to:
/// each sample is charged the increase of every group value since the previous sample of
/// the same thread and group (the first sample of a thread: the values themselves, counted
/// from the thread's start).
#[derive(Debug, Default, Clone)]
pub struct GroupCounts {
    /// Per (task, stack): the summed increases, in read-group order.
    pub values: HashMap<(TaskId, Vec<Frame>), Vec<u64>>,
    /// (previous sample's, this sample's) [`attribution_frame`] of the same thread, where
    /// they differ:
    /// samples whose increase covers time spent at another place ("mixed").
    /// Per pair: the samples, and the increases they were charged.
    pub transitions: HashMap<(Frame, Frame), (u64, Vec<u64>)>,
    /// Samples that were the first of their thread (no previous read).
    pub first_reads: u64,
    /// Values that went down between two reads of one thread (charged 0).
    pub backwards: u64,
    /// Reads whose number of values differed from the thread's previous read (skipped).
    pub mismatched: u64,
    /// Values per read (the widest seen).
    pub width: usize,
    /// The ids of the first read seen, in group order (to name imported values).
    pub ids: Vec<Option<u64>>,
    /// Per (tid, group id): the last values and leaf.
    last: HashMap<(i32, u64), (Vec<u64>, Frame)>,
}

impl GroupCounts {
    fn charge(&mut self, task: TaskId, tid: i32, stack: &[Frame], g: &ReadGroup) {
        let Some(&leaf) = attribution_frame(stack) else {
            return;
        };
        let key = (tid, g.values.first().and_then(|v| v.id).unwrap_or(0));
        let vals: Vec<u64> = g.values.iter().map(|v| v.value).collect();
        if self.ids.is_empty() {
            self.ids = g.values.iter().map(|v| v.id).collect();
        }
        let delta: Vec<u64> = match self.last.get(&key) {
            Some((prev, _)) if prev.len() != vals.len() => {
                self.mismatched += 1;
                self.last.insert(key, (vals, leaf));
                return;
            }
            Some((prev, prev_leaf)) => {
                let moved = (*prev_leaf != leaf).then_some(*prev_leaf);
                let mut back = 0;
                let d: Vec<u64> = vals
                    .iter()
                    .zip(prev)
                    .map(|(v, p)| {
                        v.checked_sub(*p).unwrap_or_else(|| {
                            back += 1;
                            0
                        })
                    })
                    .collect();
                self.backwards += back;
                if let Some(prev_leaf) = moved {
                    let t = self
                        .transitions
                        .entry((prev_leaf, leaf))
                        .or_insert_with(|| (0, vec![0; d.len()]));
                    t.0 += 1;
                    if t.1.len() < d.len() {
                        t.1.resize(d.len(), 0);
                    }
                    for (a, x) in t.1.iter_mut().zip(&d) {
                        *a += x;
                    }
                }
                d
            }
            None => {
                self.first_reads += 1;
                vals.clone()
            }
        };
        self.last.insert(key, (vals, leaf));
        self.width = self.width.max(delta.len());
        let e = self
            .values
            .entry((task, stack.to_vec()))
            .or_insert_with(|| vec![0; delta.len()]);
        if e.len() < delta.len() {
            e.resize(delta.len(), 0);
        }
        for (a, d) in e.iter_mut().zip(&delta) {
            *a += d;
        }
    }
}

/// The frame a sample's read-group increase is charged to: the first user frame (kernel
/// work such as page faults and system calls belongs to the user code that caused it),
/// else the leaf.
pub fn attribution_frame(stack: &[Frame]) -> Option<&Frame> {
    stack
        .iter()
        .find(|f| !matches!(f, Frame::Kernel(_)))
        .or(stack.first())
}

/// Sample counts per stack, plus the module table and process names.
#[derive(Debug, Default)]
pub struct Aggregator {
    processes: HashMap<i32, Process>,
    modules: Vec<Module>,
    module_index: HashMap<String, ModuleId>,
    /// Per task: samples per stack. Leaf first. Non-leaf user frames hold
    /// `return address - 1` (inside the call).
    stacks: Vec<HashMap<Vec<Frame>, u64>>,
    tasks: Vec<Task>,
    task_index: HashMap<Task, TaskId>,
    /// The task each thread id belongs to now.
    threads: HashMap<i32, TaskId>,
    /// Some sample carried a call chain (kept, with `keep_callchains`).
    callchains: bool,
    counts: Counts,
    scratch: Vec<Frame>,
    /// Keep whole call chains (`-g`); otherwise only the sampled ip is used.
    pub keep_callchains: bool,
    /// The samples' `read_format` with every bit the file gave (the parse info keeps only
    /// the bits linux-perf-event-reader knows: not `PERF_FORMAT_LOST`).
    pub raw_read_format: Option<u64>,
    /// Sums of the samples' read groups, once a sample carried one.
    group: Option<GroupCounts>,
    /// The read group of the sample being handled (tid, values).
    pending_read: Option<(i32, ReadGroup)>,
}

impl Aggregator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counters.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Modules seen in mmap records.
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// (task, stack with the leaf first, samples), in no particular order.
    pub fn stacks(&self) -> impl Iterator<Item = (TaskId, &Vec<Frame>, u64)> + '_ {
        self.stacks
            .iter()
            .enumerate()
            .flat_map(|(t, m)| m.iter().map(move |(stack, &n)| (t as TaskId, stack, n)))
    }

    /// Number of distinct (task, stack) pairs.
    pub fn stack_count(&self) -> usize {
        self.stacks.iter().map(HashMap::len).sum()
    }

    /// Tasks seen; [`Aggregator::stacks`] refers to them by index.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// Whether samples carried call chains (and they were kept).
    pub fn has_callchains(&self) -> bool {
        self.callchains
    }

    /// The read groups' increases per stack, when samples carried read groups.
    pub fn group(&self) -> Option<&GroupCounts> {
        self.group.as_ref()
    }

    /// A sample with a read group: the group is parsed here (per the kernel ABI, by
    /// `tma_perf`), and the sample without it goes through the ordinary path.
    fn handle_read_sample(&mut self, rec: &RawEventRecord<'_>) {
        let info = rec.parse_info;
        if info.endian != linux_perf_event_reader::Endianness::LittleEndian {
            self.counts.bad_records += 1;
            return;
        }
        let body = rec.data.as_slice();
        let fields = match sample_read::parse_sample(
            &body,
            info.sample_format.bits(),
            self.raw_read_format.unwrap_or(info.read_format.bits()),
        ) {
            Ok(f) => f,
            Err(_) => {
                self.counts.bad_records += 1;
                return;
            }
        };
        let plain_body = sample_read::without_read(&body, &fields);
        let mut plain_info = info;
        plain_info.sample_format.remove(SampleFormat::READ);
        let plain = RawEventRecord::new(
            rec.record_type,
            rec.misc,
            RawData::Single(&plain_body),
            plain_info,
        );
        self.pending_read = fields
            .read
            .map(|g| (fields.tid.or(fields.pid).unwrap_or(-1), g));
        self.handle(&plain);
        self.pending_read = None;
    }

    /// Samples per command name.
    pub fn comms(&self) -> HashMap<String, u64> {
        let mut out: HashMap<String, u64> = HashMap::new();
        for (t, m) in self.stacks.iter().enumerate() {
            let n: u64 = m.values().sum();
            if n > 0 {
                *out.entry(self.tasks[t].comm.clone()).or_default() += n;
            }
        }
        out
    }

    fn intern_task(&mut self, pid: i32, comm: &str) -> TaskId {
        let key = Task {
            pid,
            comm: comm.to_string(),
        };
        if let Some(&t) = self.task_index.get(&key) {
            return t;
        }
        let t = self.tasks.len() as TaskId;
        self.tasks.push(key.clone());
        self.task_index.insert(key, t);
        self.stacks.push(HashMap::new());
        t
    }

    /// The task of a sample of thread `tid` in process `pid`.
    fn task_of(&mut self, pid: i32, tid: i32) -> TaskId {
        if let Some(&t) = self.threads.get(&tid) {
            if self.tasks[t as usize].pid == pid {
                return t;
            }
        }
        let comm = self.process_comm(pid);
        let t = self.intern_task(pid, &comm);
        self.threads.insert(tid, t);
        t
    }

    fn process_comm(&self, pid: i32) -> String {
        match self.processes.get(&pid).map(|p| p.comm.as_str()) {
            Some(c) if !c.is_empty() => c.to_string(),
            _ if pid == 0 => "swapper".to_string(),
            _ => format!(":{pid}"),
        }
    }

    fn module_id(
        &mut self,
        path: &str,
        build_id: Option<Vec<u8>>,
        start: u64,
        end: u64,
    ) -> ModuleId {
        if let Some(&id) = self.module_index.get(path) {
            let m = &mut self.modules[id as usize];
            m.start = m.start.min(start);
            m.end = m.end.max(end);
            if m.build_id.is_none() {
                m.build_id = build_id;
            }
            return id;
        }
        let id = self.modules.len() as ModuleId;
        self.modules.push(Module {
            path: path.to_string(),
            build_id,
            start,
            end,
        });
        self.module_index.insert(path.to_string(), id);
        id
    }

    /// Record an existing mapping (from `/proc/PID/maps` when attaching to a running process).
    pub fn add_mapping(&mut self, pid: i32, start: u64, end: u64, pgoff: u64, path: &str) {
        if end <= start {
            return;
        }
        let module = self.module_id(path, None, start, end);
        self.processes.entry(pid).or_default().add(Mapping {
            start,
            end,
            pgoff,
            module,
        });
    }

    /// Set a process's command name (from `/proc/PID/comm` when attaching).
    pub fn set_comm(&mut self, pid: i32, comm: &str) {
        let comm = comm.trim();
        self.processes.entry(pid).or_default().comm = comm.to_string();
        let t = self.intern_task(pid, comm);
        self.threads.insert(pid, t);
    }

    /// Process one kernel record. Malformed records are counted in `bad_records`, not fatal.
    pub fn handle(&mut self, rec: &RawEventRecord<'_>) {
        if rec.record_type == RecordType::SAMPLE
            && rec.parse_info.sample_format.contains(SampleFormat::READ)
        {
            self.handle_read_sample(rec);
            return;
        }
        if rec.record_type.0 == PERF_RECORD_LOST_SAMPLES {
            // struct { u64 lost; struct sample_id; }
            let mut b = [0u8; 8];
            let mut d = rec.data;
            match d.read_exact(&mut b) {
                Ok(()) => {
                    self.counts.lost += match rec.parse_info.endian {
                        linux_perf_event_reader::Endianness::LittleEndian => u64::from_le_bytes(b),
                        linux_perf_event_reader::Endianness::BigEndian => u64::from_be_bytes(b),
                    }
                }
                Err(_) => self.counts.bad_records += 1,
            }
            return;
        }
        if rec.record_type == RecordType::MMAP2 && !mmap2_build_id_ok(rec) {
            self.counts.bad_records += 1;
            return;
        }
        // linux-perf-event-reader can overflow (debug builds panic) on absurd lengths in a
        // corrupt record: such a record is skipped and counted like any other bad one.
        let parsed = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rec.parse())) {
            Ok(Ok(p)) => p,
            _ => {
                self.counts.bad_records += 1;
                return;
            }
        };
        match parsed {
            EventRecord::Sample(s) => {
                let pid = s.pid.unwrap_or(-1);
                self.counts.samples += 1;
                self.counts.period += s.period.unwrap_or(1);
                self.scratch.clear();
                let mut mode = s.cpu_mode;
                match (&s.callchain, self.keep_callchains) {
                    (Some(cc), true) if !cc.is_empty() => {
                        self.callchains = true;
                        let mut first = true;
                        for i in 0..cc.len() {
                            let Some(a) = cc.get(i) else { break };
                            if a >= PERF_CONTEXT_MAX {
                                mode = match a {
                                    PERF_CONTEXT_KERNEL => CpuMode::Kernel,
                                    PERF_CONTEXT_USER => CpuMode::User,
                                    x if x <= PERF_CONTEXT_GUEST => CpuMode::GuestUser,
                                    _ => CpuMode::Hypervisor,
                                };
                                continue;
                            }
                            let addr = if first { a } else { a.saturating_sub(1) };
                            let f = self.resolve(pid, addr, mode);
                            self.scratch.push(f);
                            first = false;
                        }
                    }
                    _ => {
                        if let Some(ip) = s.ip {
                            let f = self.resolve(pid, ip, mode);
                            self.scratch.push(f);
                        }
                    }
                }
                if self.scratch.is_empty() {
                    self.scratch.push(Frame::Unknown(s.ip.unwrap_or(0)));
                }
                match self.scratch[0] {
                    Frame::Kernel(_) => self.counts.kernel_samples += 1,
                    Frame::Unknown(_) => self.counts.unknown_samples += 1,
                    Frame::File { .. } => {}
                }
                let task = self.task_of(pid, s.tid.unwrap_or(pid));
                if let Some((tid, g)) = self.pending_read.take() {
                    self.group.get_or_insert_with(GroupCounts::default).charge(
                        task,
                        tid,
                        &self.scratch,
                        &g,
                    );
                }
                let map = &mut self.stacks[task as usize];
                if let Some(n) = map.get_mut(&self.scratch) {
                    *n += 1;
                } else {
                    map.insert(self.scratch.clone(), 1);
                }
            }
            EventRecord::Mmap(m)
                if m.is_executable && m.pid != -1 && m.cpu_mode != CpuMode::Kernel =>
            {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                self.map(m.pid, m.address, m.length, m.page_offset, &path, None);
            }
            // PROT_EXEC = 4
            EventRecord::Mmap2(m)
                if m.protection & 4 != 0 && m.pid != -1 && m.cpu_mode != CpuMode::Kernel =>
            {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let bid = match m.file_id {
                    linux_perf_event_reader::Mmap2FileId::BuildId(b) => Some(b),
                    _ => None,
                };
                self.map(m.pid, m.address, m.length, m.page_offset, &path, bid);
            }
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                let p = self.processes.entry(c.pid).or_default();
                if c.is_execve {
                    p.maps.clear();
                }
                // A thread naming itself does not rename its process.
                if c.tid == c.pid || c.is_execve || p.comm.is_empty() {
                    p.comm = name.clone();
                }
                let t = self.intern_task(c.pid, &name);
                self.threads.insert(c.tid, t);
            }
            EventRecord::Fork(f) => {
                // The new thread or process starts with the forking thread's name.
                let comm = match self.threads.get(&f.ptid) {
                    Some(&t) if self.tasks[t as usize].pid == f.ppid => {
                        self.tasks[t as usize].comm.clone()
                    }
                    _ => self.process_comm(f.ppid),
                };
                if f.pid != f.ppid {
                    let child = self.processes.get(&f.ppid).cloned().unwrap_or_default();
                    self.processes.insert(f.pid, child);
                }
                let t = self.intern_task(f.pid, &comm);
                self.threads.insert(f.tid, t);
            }
            EventRecord::Exit(_) => {
                // Keep the maps: samples of the exiting process may still follow in the
                // stream (records of several CPUs are interleaved).
            }
            EventRecord::Lost(l) => {
                self.counts.lost += l.count;
                self.counts.lost_records += 1;
            }
            EventRecord::Throttle(_) => self.counts.throttled += 1,
            _ => {}
        }
    }

    fn map(
        &mut self,
        pid: i32,
        start: u64,
        len: u64,
        pgoff: u64,
        path: &str,
        bid: Option<Vec<u8>>,
    ) {
        let Some(end) = start.checked_add(len) else {
            self.counts.bad_records += 1;
            return;
        };
        if len == 0 {
            return;
        }
        let module = self.module_id(path, bid, start, end);
        self.processes.entry(pid).or_default().add(Mapping {
            start,
            end,
            pgoff,
            module,
        });
    }

    fn resolve(&self, pid: i32, addr: u64, mode: CpuMode) -> Frame {
        if matches!(mode, CpuMode::Kernel | CpuMode::GuestKernel) {
            return Frame::Kernel(addr);
        }
        match self.processes.get(&pid).and_then(|p| p.find(addr)) {
            Some(m) => Frame::File {
                module: m.module,
                offset: addr - m.start + m.pgoff,
            },
            None => Frame::Unknown(addr),
        }
    }
}

/// linux-perf-event-reader asserts (panics) on an mmap2 build id longer than 20 bytes;
/// check that byte before parsing.
fn mmap2_build_id_ok(rec: &RawEventRecord<'_>) -> bool {
    if rec.misc & PERF_RECORD_MISC_MMAP_BUILD_ID == 0 {
        return true;
    }
    // pid, tid (8) + addr, len, pgoff (24) -> build id length byte at 32.
    match rec.data.get(32..33) {
        Some(RawData::Single(b)) => b.first().is_some_and(|&n| n <= 20),
        Some(RawData::Split(a, b)) => a.first().or(b.first()).is_some_and(|&n| n <= 20),
        None => false,
    }
}

/// Parse `/proc/PID/maps` text into (start, end, offset, path) of executable file mappings.
pub fn parse_proc_maps(text: &[u8]) -> Vec<(u64, u64, u64, String)> {
    tma_host::parse_maps(text)
        .into_iter()
        .filter(|m| m.perms.contains('x') && !m.path.is_empty())
        .map(|m| (m.start, m.end, m.offset, m.path))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_maps_keeps_executable_file_mappings() {
        let maps = b"55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /tmp/a.out\n\
55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 123 /tmp/a.out\n\
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n\
7ffd1000000-7ffd1002000 r-xp 00000000 00:00 0 [vdso]\n\
garbage line\n";
        let m = parse_proc_maps(maps);
        assert_eq!(
            m,
            vec![
                (
                    0x55d0c0a01000,
                    0x55d0c0a02000,
                    0x1000,
                    "/tmp/a.out".to_string()
                ),
                (0x7ffd1000000, 0x7ffd1002000, 0, "[vdso]".to_string()),
            ]
        );
    }

    #[test]
    fn overlapping_mapping_cuts_the_old_one() {
        let mut p = Process::default();
        p.add(Mapping {
            start: 0x1000,
            end: 0x5000,
            pgoff: 0,
            module: 0,
        });
        p.add(Mapping {
            start: 0x2000,
            end: 0x3000,
            pgoff: 0,
            module: 1,
        });
        assert_eq!(p.find(0x1800).unwrap().module, 0);
        assert_eq!(p.find(0x2800).unwrap().module, 1);
        let tail = p.find(0x4000).unwrap();
        assert_eq!((tail.module, tail.pgoff, tail.start), (0, 0x2000, 0x3000));
        assert!(p.find(0x5000).is_none());
        assert!(p.find(0x10).is_none());
    }
}
