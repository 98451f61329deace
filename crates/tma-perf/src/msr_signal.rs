//! The signal path of [`crate::msr::ProgrammedCounter`]: while a counter is programmed, SIGINT,
//! SIGTERM, SIGHUP and SIGQUIT first write the saved event select value back (one `pwrite`,
//! async-signal-safe, from values kept in atomics), then kill the process as the default action
//! does; SIGINT/SIGTERM, when the binary catches them (`tma_sys::signal::caught`), are recorded
//! there instead and the run stops at its next check. One counter at a time per process.
// unsafe allowed: sigaction and pwrite in a signal handler.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

static ARMED: AtomicBool = AtomicBool::new(false);
static FD: AtomicI32 = AtomicI32::new(-1);
static MSR: AtomicU64 = AtomicU64::new(0);
static SAVED: AtomicU64 = AtomicU64::new(0);

const SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The actions replaced while armed, put back on disarm.
static PREVIOUS: Mutex<Vec<(libc::c_int, libc::sigaction)>> = Mutex::new(Vec::new());

/// Write the saved value back if armed, and disarm. Async-signal-safe (atomics and pwrite).
pub(crate) fn restore_now() {
    if ARMED.swap(false, Ordering::SeqCst) {
        let fd = FD.load(Ordering::SeqCst);
        let v = SAVED.load(Ordering::SeqCst).to_le_bytes();
        let off = MSR.load(Ordering::SeqCst) as libc::off_t;
        // SAFETY: `v` is a valid 8-byte buffer; a stale or closed fd makes pwrite fail with
        // EBADF, never touch memory.
        unsafe {
            libc::pwrite(fd, v.as_ptr().cast(), v.len(), off);
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    restore_now();
    // The binary catches SIGINT/SIGTERM (tma_sys::signal): record it and return, so the
    // measurement stops at its next check and prints what it has.
    if let Some(which) = tma_sys::signal::Interrupt::from_number(sig) {
        if tma_sys::signal::caught() {
            tma_sys::signal::set(which);
            return;
        }
    }
    // SAFETY: the previous action is put back with a zeroed sigaction set to SIG_DFL (we are
    // exiting through the signal, as without the handler), then the signal is raised again.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Whether a restore is pending (a counter is programmed).
#[cfg(test)]
pub(crate) fn armed() -> bool {
    ARMED.load(Ordering::SeqCst)
}

/// Remember what to restore and install the handlers (the file must outlive the arming:
/// [`crate::msr::ProgrammedCounter`] owns it and disarms before it is dropped).
pub(crate) fn arm(file: &File, msr: u32, saved: u64) {
    FD.store(file.as_raw_fd(), Ordering::SeqCst);
    MSR.store(u64::from(msr), Ordering::SeqCst);
    SAVED.store(saved, Ordering::SeqCst);
    ARMED.store(true, Ordering::SeqCst);
    let mut prev = PREVIOUS.lock().unwrap_or_else(|e| e.into_inner());
    if !prev.is_empty() {
        return;
    }
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction with a valid `extern "C" fn(c_int)` handler (no
        // SA_SIGINFO) and an empty mask; `old` is a valid out pointer.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, &sa, &mut old) == 0 {
                prev.push((sig, old));
            }
        }
    }
}

/// Stop restoring on signals and put the previous handlers back.
pub(crate) fn disarm() {
    ARMED.store(false, Ordering::SeqCst);
    let mut prev = PREVIOUS.lock().unwrap_or_else(|e| e.into_inner());
    for (sig, old) in prev.drain(..) {
        // SAFETY: `old` is the action sigaction returned for this signal.
        unsafe {
            libc::sigaction(sig, &old, std::ptr::null_mut());
        }
    }
}
