//! Writing perf.data files (`tma locate --record FILE`), and synthetic records for mappings
//! that existed before sampling started.
//!
//! The file is perf's own format ("PERFILE2", little-endian): header, one attribute entry
//! (`perf_event_attr` followed by an empty ids section, as perf lays it out), the data
//! section with the kernel's records as they came out of the ring buffer, and no feature
//! sections. `perf report`/`perf script` and `tma locate --import` read it.

/// PERF_RECORD_MMAP / COMM, PERF_RECORD_MISC_USER.
const PERF_RECORD_MMAP: u32 = 1;
const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_MISC_USER: u16 = 2;

/// Size of perf's file header.
const HEADER_SIZE: u64 = 104;

/// Collects records and produces a perf.data image.
#[derive(Debug, Clone)]
pub struct PerfDataWriter {
    attr: Vec<u8>,
    data: Vec<u8>,
}

impl PerfDataWriter {
    /// `attr` is the `perf_event_attr` in file layout (`tma_perf::sampling::attr_bytes`).
    /// A trailing all-zero `config3` (attr size 136) is dropped so that perf versions built
    /// against the 128-byte attr (which reject "a more recent ABI") read the file.
    pub fn new(mut attr: Vec<u8>) -> Self {
        if attr.len() == 136 && attr[128..].iter().all(|&b| b == 0) {
            attr.truncate(128);
            attr[4..8].copy_from_slice(&128u32.to_le_bytes());
        }
        PerfDataWriter {
            attr,
            data: Vec::new(),
        }
    }

    /// Append one record (body without the 8-byte header, possibly in two pieces).
    pub fn push(&mut self, ty: u32, misc: u16, body: &[&[u8]]) {
        let len: usize = body.iter().map(|b| b.len()).sum();
        let size = (8 + len) as u16;
        self.data.extend_from_slice(&ty.to_le_bytes());
        self.data.extend_from_slice(&misc.to_le_bytes());
        self.data.extend_from_slice(&size.to_le_bytes());
        for b in body {
            self.data.extend_from_slice(b);
        }
    }

    /// Bytes of records so far.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// The complete file image.
    pub fn finish(&self) -> Vec<u8> {
        // attr_size in the header covers the attr plus its ids file section (16 bytes).
        let attr_entry = self.attr.len() as u64 + 16;
        let attrs_off = HEADER_SIZE;
        let data_off = attrs_off + attr_entry;
        let mut out = Vec::with_capacity(data_off as usize + self.data.len());
        out.extend_from_slice(b"PERFILE2");
        for v in [
            HEADER_SIZE,
            attr_entry,
            attrs_off,
            attr_entry,
            data_off,
            self.data.len() as u64,
            0, // event_types offset
            0, // event_types size
            0,
            0,
            0,
            0, // feature bitmap
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        debug_assert_eq!(out.len() as u64, HEADER_SIZE);
        out.extend_from_slice(&self.attr);
        out.extend_from_slice(&0u64.to_le_bytes()); // ids offset
        out.extend_from_slice(&0u64.to_le_bytes()); // ids size
        out.extend_from_slice(&self.data);
        out
    }
}

fn push_padded_str(body: &mut Vec<u8>, s: &str) {
    body.extend_from_slice(s.as_bytes());
    body.push(0);
    while !body.len().is_multiple_of(8) {
        body.push(0);
    }
}

/// `sample_id_all` trailer for the sample_type tma uses (TID | TIME | CPU; IP, PERIOD and
/// CALLCHAIN do not appear in the trailer): pid, tid, time, cpu, reserved.
fn push_trailer(body: &mut Vec<u8>, pid: i32) {
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
}

/// A PERF_RECORD_MMAP body (executable mapping) for an existing mapping, as `perf record`
/// synthesizes from `/proc/PID/maps`.
pub fn synthetic_mmap(
    pid: i32,
    start: u64,
    end: u64,
    pgoff: u64,
    path: &str,
) -> (u32, u16, Vec<u8>) {
    let mut b = Vec::with_capacity(64 + path.len());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&start.to_le_bytes());
    b.extend_from_slice(&end.saturating_sub(start).to_le_bytes());
    b.extend_from_slice(&pgoff.to_le_bytes());
    push_padded_str(&mut b, path);
    push_trailer(&mut b, pid);
    (PERF_RECORD_MMAP, PERF_RECORD_MISC_USER, b)
}

/// A PERF_RECORD_COMM body for a process (its main thread).
pub fn synthetic_comm(pid: i32, comm: &str) -> (u32, u16, Vec<u8>) {
    synthetic_thread_comm(pid, pid, comm)
}

/// A PERF_RECORD_COMM body for thread `tid` of process `pid`.
pub fn synthetic_thread_comm(pid: i32, tid: i32, comm: &str) -> (u32, u16, Vec<u8>) {
    let mut b = Vec::with_capacity(32);
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&tid.to_le_bytes());
    push_padded_str(&mut b, comm.trim());
    push_trailer(&mut b, pid);
    (PERF_RECORD_COMM, PERF_RECORD_MISC_USER, b)
}
