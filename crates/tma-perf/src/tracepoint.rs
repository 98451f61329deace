//! Kernel tracepoints (`PERF_TYPE_TRACEPOINT`) sampled on every hit, with the raw record, into
//! one ring buffer per CPU: what `tma kvm` reads the `kvm:*` events with.
//!
//! Tracepoints are not PMU counters: they are software events fired by the kernel's static
//! trace points, so they work on machines without a hardware PMU. They need root, or
//! CAP_PERFMON plus read access to tracefs (where the ids come from; see [`crate::tracefs`]).
//!
//! Every event is opened with `sample_period = 1` and
//! `PERF_SAMPLE_TID | TIME | CPU | RAW`; the first event of a CPU owns the ring and the others
//! write into it (`PERF_EVENT_IOC_SET_OUTPUT`), so one ring per CPU holds all of them in time
//! order. Records are parsed by [`parse_record`] from bytes, so the decoding is testable
//! without a kernel.

use std::io;

use perf_event::events::Tracepoint;
use perf_event::{Builder, Counter, SampleFlag, Sampler};

use crate::sys;
use tma_sys::advice::{explain, Op};

/// `PERF_RECORD_LOST`.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_THROTTLE`.
pub const PERF_RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_UNTHROTTLE`.
pub const PERF_RECORD_UNTHROTTLE: u32 = 6;
/// `PERF_RECORD_SAMPLE`.
pub const PERF_RECORD_SAMPLE: u32 = 9;

/// Bytes written to a ring before the reader is woken (a quarter of a 64 KiB ring), so a busy
/// tracepoint does not wake us per record.
const WAKEUP_BYTES: usize = 16 * 1024;

/// One tracepoint to open: its id from tracefs (`events/<system>/<name>/id`) and its name for
/// messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracepointId {
    pub id: u64,
    pub name: String,
}

/// Whose tracepoint hits to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TracepointTarget {
    /// Every process (per CPU); the events start disabled until [`TracepointRings::enable`].
    AllProcesses,
    /// A launched command held before exec ([`crate::process::HeldChild`]) and its children:
    /// the events are inherited and enabled when it execs.
    Launched(i32),
}

/// Why the tracepoints could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracepointError {
    #[error("perf_event_open of tracepoint {name} failed: {err}")]
    Open { name: String, err: io::Error },
    #[error("cannot map the ring buffer of {name}: {}", explain(Op::RingMmap, .err))]
    Mmap { name: String, err: io::Error },
    #[error("cannot share the ring buffer for {name}: {err}")]
    SetOutput { name: String, err: io::Error },
}

/// One record of a tracepoint ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceRecord<'a> {
    /// A tracepoint hit: who, when, where, and the raw tracepoint data (laid out as the
    /// tracepoint's tracefs `format` file says).
    Sample {
        pid: u32,
        tid: u32,
        time_ns: u64,
        cpu: u32,
        raw: &'a [u8],
    },
    /// The kernel dropped `lost` records because the ring was full.
    Lost { lost: u64 },
    /// Sampling was throttled (`true`) or unthrottled.
    Throttle(bool),
    /// Another record type.
    Other(u32),
    /// A record too short for its type.
    Truncated,
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// Parse a record body (the bytes after the 8-byte `perf_event_header`) of type `ty`, for
/// events opened with `PERF_SAMPLE_TID | TIME | CPU | RAW`.
pub fn parse_record(ty: u32, body: &[u8]) -> TraceRecord<'_> {
    let parsed = match ty {
        PERF_RECORD_SAMPLE => (|| {
            let size = u32_at(body, 24)? as usize;
            Some(TraceRecord::Sample {
                pid: u32_at(body, 0)?,
                tid: u32_at(body, 4)?,
                time_ns: u64_at(body, 8)?,
                cpu: u32_at(body, 16)?,
                raw: body.get(28..28 + size)?,
            })
        })(),
        // { u64 id; u64 lost; }
        PERF_RECORD_LOST => u64_at(body, 8).map(|lost| TraceRecord::Lost { lost }),
        PERF_RECORD_THROTTLE => Some(TraceRecord::Throttle(true)),
        PERF_RECORD_UNTHROTTLE => Some(TraceRecord::Throttle(false)),
        n => Some(TraceRecord::Other(n)),
    };
    parsed.unwrap_or(TraceRecord::Truncated)
}

/// The body of a `PERF_RECORD_SAMPLE` as [`parse_record`] reads it (tests and replays).
pub fn sample_body(pid: u32, tid: u32, time_ns: u64, cpu: u32, raw: &[u8]) -> Vec<u8> {
    // The whole record (8-byte header included) is a multiple of 8 bytes.
    let size = (8 + 28 + raw.len()).div_ceil(8) * 8 - 8;
    let mut v = Vec::with_capacity(size);
    v.extend_from_slice(&pid.to_le_bytes());
    v.extend_from_slice(&tid.to_le_bytes());
    v.extend_from_slice(&time_ns.to_le_bytes());
    v.extend_from_slice(&cpu.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    v.extend_from_slice(raw);
    v.resize(size, 0);
    v
}

/// Open tracepoints: one ring per CPU, all events of that CPU writing into it.
pub struct TracepointRings {
    rings: Vec<Sampler>,
    /// The events writing into another event's ring (kept open for as long as the rings).
    members: Vec<Counter>,
}

impl std::fmt::Debug for TracepointRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracepointRings")
            .field("rings", &self.rings.len())
            .field("members", &self.members.len())
            .finish()
    }
}

fn builder(id: u64, cpu: u32, target: TracepointTarget) -> Builder<'static> {
    let mut b = Builder::new(Tracepoint::with_id(id));
    let launched = matches!(target, TracepointTarget::Launched(_));
    match target {
        TracepointTarget::AllProcesses => b.any_pid(),
        TracepointTarget::Launched(pid) => b.observe_pid(pid),
    };
    b.one_cpu(cpu as usize)
        .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::RAW)
        .sample_period(1)
        .wakeup_watermark(WAKEUP_BYTES)
        .sample_id_all(true)
        // Tracepoints fire in kernel context: excluding the kernel would drop every hit.
        .exclude_kernel(false)
        .exclude_hv(false)
        .enabled(false)
        .inherit(launched)
        .enable_on_exec(launched);
    b
}

impl TracepointRings {
    /// Open every event in `events` on every CPU in `cpus`, with rings of `data_pages` data
    /// pages (a power of two) per CPU.
    pub fn open(
        events: &[TracepointId],
        cpus: &[u32],
        target: TracepointTarget,
        data_pages: usize,
    ) -> Result<TracepointRings, TracepointError> {
        let mut out = TracepointRings {
            rings: Vec::new(),
            members: Vec::new(),
        };
        for &cpu in cpus {
            let mut ring: Option<usize> = None;
            for ev in events {
                let counter =
                    builder(ev.id, cpu, target)
                        .build()
                        .map_err(|err| TracepointError::Open {
                            name: ev.name.clone(),
                            err,
                        })?;
                match ring {
                    None => {
                        let mmap_err = |err| TracepointError::Mmap {
                            name: ev.name.clone(),
                            err,
                        };
                        if !data_pages.is_power_of_two() {
                            return Err(mmap_err(io::Error::new(
                                io::ErrorKind::InvalidInput,
                                "ring buffer size must be a power of two pages",
                            )));
                        }
                        let sampler = counter
                            .sampled(data_pages * page_size())
                            .map_err(mmap_err)?;
                        out.rings.push(sampler);
                        ring = Some(out.rings.len() - 1);
                    }
                    Some(r) => {
                        sys::set_output(&counter, &out.rings[r]).map_err(|err| {
                            TracepointError::SetOutput {
                                name: ev.name.clone(),
                                err,
                            }
                        })?;
                        out.members.push(counter);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Enable every event (for [`TracepointTarget::AllProcesses`]; a launched command's events
    /// enable themselves at exec).
    pub fn enable(&mut self) -> io::Result<()> {
        for r in &mut self.rings {
            r.as_counter_mut().enable()?;
        }
        for c in &mut self.members {
            c.enable()?;
        }
        Ok(())
    }

    /// Disable every event (what is in the rings can still be drained).
    pub fn disable(&mut self) {
        for r in &mut self.rings {
            let _ = r.as_counter_mut().disable();
        }
        for c in &mut self.members {
            let _ = c.disable();
        }
    }

    /// Hand every record now in the rings to `f`, ring by ring (each ring in time order), and
    /// release the space to the kernel.
    pub fn drain(&mut self, mut f: impl FnMut(TraceRecord<'_>)) {
        for r in &mut self.rings {
            while let Some(rec) = r.next_record() {
                let body = rec.to_contiguous();
                f(parse_record(rec.ty(), &body));
            }
        }
    }

    /// Wait until a ring has passed its wakeup mark or `timeout_ms` passed (or a signal came).
    pub fn wait(&self, timeout_ms: i32) {
        let fds: Vec<&Sampler> = self.rings.iter().collect();
        let _ = sys::poll_readable(&fds, timeout_ms);
    }
}

fn page_size() -> usize {
    4096
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_roundtrip_lost_and_truncated() {
        let b = sample_body(10, 11, 12345, 1, &[1, 2, 3, 4, 5]);
        assert_eq!((b.len() + 8) % 8, 0);
        assert_eq!(
            parse_record(PERF_RECORD_SAMPLE, &b),
            TraceRecord::Sample {
                pid: 10,
                tid: 11,
                time_ns: 12345,
                cpu: 1,
                raw: &[1, 2, 3, 4, 5]
            }
        );
        assert_eq!(
            parse_record(PERF_RECORD_SAMPLE, &b[..12]),
            TraceRecord::Truncated
        );
        let mut lost = vec![0u8; 16];
        lost[8] = 7;
        assert_eq!(
            parse_record(PERF_RECORD_LOST, &lost),
            TraceRecord::Lost { lost: 7 }
        );
        assert_eq!(
            parse_record(PERF_RECORD_THROTTLE, &[]),
            TraceRecord::Throttle(true)
        );
        assert_eq!(parse_record(3, &[]), TraceRecord::Other(3));
    }

    #[test]
    fn bad_ids_are_open_errors() {
        let ev = [TracepointId {
            id: u64::MAX,
            name: "nope".into(),
        }];
        let e = TracepointRings::open(&ev, &[0], TracepointTarget::AllProcesses, 1).unwrap_err();
        assert!(matches!(e, TracepointError::Open { .. }), "{e}");
    }
}
