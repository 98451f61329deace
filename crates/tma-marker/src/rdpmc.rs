//! Reading a hardware counter of the calling thread in user space: the counter's first page
//! mapped (`perf_event_mmap_page`, the kernel's ABI), read under its sequence lock with
//! `rdpmc` and the time-stamp counter, with no system call. Only where the kernel allows it
//! (`cap_user_rdpmc`: a PMU, and `/sys/bus/event_source/devices/cpu/rdpmc` not 0) and while
//! the counter is on the PMU (`index` non-zero); otherwise the caller reads through the kernel.
//!
//! [`compute`] is the arithmetic (sign extension to the counter's width, the time
//! extrapolation), tested with chosen page contents; [`Page`] is the `unsafe` part.
// unsafe allowed: mmap/munmap of a perf fd, volatile reads of the shared page, rdpmc/rdtsc.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{compiler_fence, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

/// `cap_user_rdpmc` in `capabilities`.
const CAP_USER_RDPMC: u64 = 1 << 2;
/// `cap_user_time`.
const CAP_USER_TIME: u64 = 1 << 3;

/// The fields of the page one read needs, copied under the lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub index: u32,
    pub offset: i64,
    pub time_enabled: u64,
    pub time_running: u64,
    pub capabilities: u64,
    pub pmc_width: u16,
    pub time_shift: u16,
    pub time_mult: u32,
    pub time_offset: u64,
}

/// The count, enabled and running nanoseconds from a snapshot, the raw counter value `pmc`
/// (`rdpmc` of `index - 1`) and the time-stamp counter `tsc` read with it; `None` when the
/// counter cannot be read in user space now.
pub(crate) fn compute(s: &Snapshot, pmc: u64, tsc: u64) -> Option<(u64, u64, u64)> {
    if s.capabilities & CAP_USER_RDPMC == 0 || s.index == 0 || s.pmc_width == 0 {
        return None;
    }
    let shift = 64 - u32::from(s.pmc_width.min(64));
    // The counter is `pmc_width` bits wide: sign-extend it before adding the kernel's offset.
    let value = ((pmc << shift) as i64) >> shift;
    let count = s.offset.wrapping_add(value) as u64;
    let (mut enabled, mut running) = (s.time_enabled, s.time_running);
    if s.capabilities & CAP_USER_TIME != 0 && s.time_shift < 64 {
        let mult = u64::from(s.time_mult);
        let quot = tsc >> s.time_shift;
        let rem = tsc & ((1u64 << s.time_shift) - 1);
        let delta = s
            .time_offset
            .wrapping_add(quot.wrapping_mul(mult))
            .wrapping_add(rem.wrapping_mul(mult) >> s.time_shift);
        // The counter is on the PMU (index non-zero): it has been enabled and running since.
        enabled = enabled.wrapping_add(delta);
        running = running.wrapping_add(delta);
    }
    Some((count, enabled, running))
}

/// The mapped first page of one counter.
pub(crate) struct Page {
    page: NonNull<perf_event_mmap_page>,
    len: usize,
}

impl Page {
    /// Map `fd`'s first page, read-only.
    pub(crate) fn map(fd: &OwnedFd) -> io::Result<Page> {
        // SAFETY: sysconf only reads a system constant.
        let len = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::other("no page size"))?;
        // SAFETY: a fresh read-only shared mapping of a perf event fd's first page (the
        // metadata page); the kernel checks the fd and the length.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let page = NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Page { page, len })
    }

    /// Whether the kernel lets this thread read the counter with `rdpmc`.
    pub(crate) fn user_readable(&self) -> bool {
        self.snapshot().capabilities & CAP_USER_RDPMC != 0
    }

    fn snapshot(&self) -> Snapshot {
        let p = self.page.as_ptr();
        // SAFETY: `p` is the live mapping of a perf_event_mmap_page; the kernel updates it
        // concurrently, hence volatile reads (consistency is the caller's lock loop).
        unsafe {
            Snapshot {
                index: std::ptr::addr_of!((*p).index).read_volatile(),
                offset: std::ptr::addr_of!((*p).offset).read_volatile(),
                time_enabled: std::ptr::addr_of!((*p).time_enabled).read_volatile(),
                time_running: std::ptr::addr_of!((*p).time_running).read_volatile(),
                capabilities: std::ptr::addr_of!((*p).__bindgen_anon_1.capabilities)
                    .read_volatile(),
                pmc_width: std::ptr::addr_of!((*p).pmc_width).read_volatile(),
                time_shift: std::ptr::addr_of!((*p).time_shift).read_volatile(),
                time_mult: std::ptr::addr_of!((*p).time_mult).read_volatile(),
                time_offset: std::ptr::addr_of!((*p).time_offset).read_volatile(),
            }
        }
    }

    fn lock(&self) -> u32 {
        // SAFETY: as in `snapshot`: a volatile read of the live page's sequence count.
        unsafe { std::ptr::addr_of!((*self.page.as_ptr()).lock).read_volatile() }
    }

    /// The counter's count, enabled and running time now; `None` when it must be read through
    /// the kernel.
    pub(crate) fn read(&self) -> Option<(u64, u64, u64)> {
        loop {
            let seq = self.lock();
            compiler_fence(Ordering::SeqCst);
            let s = self.snapshot();
            if s.capabilities & CAP_USER_RDPMC == 0 || s.index == 0 {
                return None;
            }
            let (pmc, tsc) = read_pmc(s.index - 1);
            compiler_fence(Ordering::SeqCst);
            if self.lock() == seq {
                return compute(&s, pmc, tsc);
            }
        }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of `len` bytes, unmapped once.
        unsafe {
            libc::munmap(self.page.as_ptr().cast(), self.len);
        }
    }
}

/// `rdpmc` of counter `counter` and `rdtsc`.
#[cfg(target_arch = "x86_64")]
fn read_pmc(counter: u32) -> (u64, u64) {
    let (lo, hi): (u32, u32);
    // SAFETY: only called when the kernel set `cap_user_rdpmc` for this counter, so CR4.PCE is
    // set for this task and `rdpmc` of the index it published does not fault; the instruction
    // reads registers only.
    unsafe {
        std::arch::asm!("rdpmc", in("ecx") counter, out("eax") lo, out("edx") hi,
                        options(nomem, nostack, preserves_flags));
    }
    // SAFETY: `rdtsc` is always allowed in user space on Linux x86-64.
    let tsc = unsafe { std::arch::x86_64::_rdtsc() };
    ((u64::from(hi) << 32) | u64::from(lo), tsc)
}

#[cfg(not(target_arch = "x86_64"))]
fn read_pmc(_counter: u32) -> (u64, u64) {
    (0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Snapshot {
        Snapshot {
            index: 3,
            offset: -100,
            time_enabled: 1000,
            time_running: 800,
            capabilities: CAP_USER_RDPMC | CAP_USER_TIME,
            pmc_width: 48,
            time_shift: 10,
            time_mult: 512,
            time_offset: 7,
        }
    }

    #[test]
    fn the_counter_is_sign_extended_to_its_width_and_offset() {
        let s = page();
        // A 48-bit counter just below wrapping reads as negative (-5).
        let raw = (1u64 << 48) - 5;
        let (count, _, _) = compute(&s, raw, 0).unwrap();
        assert_eq!(count as i64, -105);
        let (count, _, _) = compute(&s, 250, 0).unwrap();
        assert_eq!(count, 150);
        // Bits above the width are ignored.
        let (count, _, _) = compute(&s, (0xffff << 48) | 250, 0).unwrap();
        assert_eq!(count, 150);
    }

    #[test]
    fn times_run_on_with_the_time_stamp_counter() {
        let s = page();
        // tsc = 3 * 1024 + 512: quot 3, rem 512 -> 7 + 3*512 + (512*512 >> 10) = 7 + 1536 + 256.
        let (_, e, r) = compute(&s, 0, 3 * 1024 + 512).unwrap();
        assert_eq!((e, r), (1000 + 1799, 800 + 1799));
        let no_time = Snapshot {
            capabilities: CAP_USER_RDPMC,
            ..s
        };
        assert_eq!(compute(&no_time, 0, 1 << 40).unwrap().1, 1000);
    }

    #[test]
    fn not_readable_in_user_space_falls_back() {
        let s = page();
        assert_eq!(compute(&Snapshot { index: 0, ..s }, 1, 1), None);
        assert_eq!(
            compute(
                &Snapshot {
                    capabilities: 0,
                    ..s
                },
                1,
                1
            ),
            None
        );
    }
}
