//! What `getrusage(RUSAGE_THREAD)` says about the calling thread (rustix has no wrapper).
// unsafe allowed: getrusage(2).
#![allow(unsafe_code)]

use std::io;

/// Context switches and minor page faults of the calling thread so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadUsage {
    /// Voluntary plus involuntary context switches.
    pub switches: u64,
    /// Minor (no I/O) page faults.
    pub minor_faults: u64,
}

/// `getrusage(RUSAGE_THREAD)`.
pub fn thread_usage() -> io::Result<ThreadUsage> {
    // SAFETY: rusage is a plain C struct of integers and timevals: all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable for the duration of the call.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ThreadUsage {
        switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
        minor_faults: ru.ru_minflt as u64,
    })
}

/// The peak resident set, in KiB, of the largest child this process has waited for
/// (`getrusage(RUSAGE_CHILDREN).ru_maxrss`): what a test or benchmark reads after running a
/// command to bound its memory.
pub fn children_peak_rss_kib() -> io::Result<u64> {
    // SAFETY: as in `thread_usage`: all-zero is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable for the duration of the call.
    let r = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ru.ru_maxrss as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_sleep_is_a_context_switch() {
        let u0 = super::thread_usage().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let u1 = super::thread_usage().unwrap();
        assert!(u1.switches > u0.switches, "{u0:?} -> {u1:?}");
    }
}
