//! Counting the calling thread around a stretch of its own code (`tma doctor --verify`):
//! one group of counters on this thread, any CPU, opened disabled, then reset + enable,
//! run, disable, read. Safe code over [`crate::sys`].

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::attr::{Attr, READ_FORMAT, TYPE_HARDWARE, TYPE_SOFTWARE};
use crate::event::SoftwareEvent;
use crate::sys::{self, GroupRead};

/// `PERF_COUNT_HW_INSTRUCTIONS`.
pub const HW_INSTRUCTIONS: u64 = 1;
/// `PERF_COUNT_HW_BRANCH_INSTRUCTIONS`.
pub const HW_BRANCH_INSTRUCTIONS: u64 = 4;

/// A generic hardware event (`PERF_TYPE_HARDWARE`), user space only when `user_only`.
pub fn hardware(config: u64, user_only: bool) -> Attr {
    attr(TYPE_HARDWARE, config, user_only)
}

/// A software event (`task-clock`, `context-switches`, `page-faults`, ...).
pub fn software(ev: SoftwareEvent) -> Attr {
    attr(TYPE_SOFTWARE, ev.config(), false)
}

fn attr(type_: u32, config: u64, user_only: bool) -> Attr {
    Attr {
        type_,
        config,
        config1: 0,
        config2: 0,
        read_format: READ_FORMAT,
        sample_period: 0,
        disabled: true,
        inherit: false,
        enable_on_exec: false,
        exclude_kernel: user_only,
        exclude_user: false,
    }
}

/// A counter group on the calling thread.
#[derive(Debug)]
pub struct SelfGroup {
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    n: usize,
}

impl SelfGroup {
    /// Open `attrs` as one group (the first leads) on this thread, disabled.
    pub fn open(attrs: &[Attr]) -> io::Result<SelfGroup> {
        let (first, rest) = attrs
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no events"))?;
        let leader = sys::perf_open(first, 0, -1, None)?;
        let mut members = Vec::with_capacity(rest.len());
        for a in rest {
            let mut a = *a;
            a.disabled = false;
            members.push(sys::perf_open(&a, 0, -1, Some(leader.as_raw_fd()))?);
        }
        Ok(SelfGroup {
            leader,
            _members: members,
            n: attrs.len(),
        })
    }

    /// Zero the counts and start counting.
    pub fn start(&self) -> io::Result<()> {
        sys::reset_group(&self.leader)?;
        sys::enable_group(&self.leader)
    }

    /// Stop counting.
    pub fn stop(&self) -> io::Result<()> {
        sys::disable_group(&self.leader)
    }

    /// The group's values with its enabled and running times.
    pub fn read(&self) -> io::Result<GroupRead> {
        sys::read_group(&self.leader, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Software events work on every machine that allows counting its own threads: a known
    /// number of page touches gives at least that many page faults.
    #[test]
    fn page_faults_of_fresh_pages_are_counted() {
        let g = match SelfGroup::open(&[software(SoftwareEvent::PageFaults)]) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("SKIP: cannot count this thread here: {e}");
                return;
            }
        };
        let pages = 256;
        g.start().unwrap();
        let mut v = vec![0u8; pages * 4096];
        for p in 0..pages {
            v[p * 4096] = 1;
        }
        g.stop().unwrap();
        std::hint::black_box(&v);
        let r = g.read().unwrap();
        assert!(r.values[0].0 >= pages as u64 / 2, "{r:?}");
        assert!(r.time_enabled > 0);
    }
}
