//! The core-cycles counter behind the bench clocks: `PERF_COUNT_HW_CPU_CYCLES` of the calling
//! thread, user space only, read with `read(2)` ([`Cycles`]) or from user space with `rdpmc`
//! through the event's mmap page ([`UserCycles`]).

use std::io;

use perf_event::events::Hardware;
use perf_event::{Builder, Counter, Sampler};

/// A user-space-only cycles counter on the calling thread, created disabled.
#[derive(Debug)]
pub struct Cycles(Counter);

impl Cycles {
    /// Open the counter (fails without a hardware PMU, or when perf_event_paranoid forbids it).
    pub fn open() -> io::Result<Cycles> {
        Builder::new(Hardware::CPU_CYCLES)
            .exclude_kernel(true)
            .exclude_hv(true)
            .build()
            .map(Cycles)
    }

    /// Start counting.
    pub fn enable(&mut self) -> io::Result<()> {
        self.0.enable()
    }

    /// The count so far, by `read(2)`.
    pub fn read(&mut self) -> io::Result<u64> {
        self.0.read()
    }

    /// Map the event's metadata page so that [`UserCycles::read`] needs no system call.
    pub fn into_user_reads(self) -> io::Result<UserCycles> {
        self.0.sampled(0).map(UserCycles)
    }
}

/// A cycles counter read from user space (`rdpmc`).
pub struct UserCycles(Sampler);

impl std::fmt::Debug for UserCycles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UserCycles")
    }
}

impl UserCycles {
    /// Start counting.
    pub fn enable(&mut self) -> io::Result<()> {
        self.0.enable()
    }

    /// The count so far; `None` when the kernel does not allow user-space reads
    /// (`cap_user_rdpmc` = 0).
    pub fn read(&self) -> Option<u64> {
        self.0.read_user().count()
    }
}
