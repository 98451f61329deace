//! SIGINT and SIGTERM, for the whole `tma` binary: [`catch`] installs the one handler,
//! [`interrupted`] says whether (and by which of the two) the process was asked to stop.
//!
//! The handler only records the first signal's number in an atomic. It is installed without
//! `SA_RESTART`, so a blocking `poll`, `read` or `waitpid` returns `EINTR` and the loop around
//! it can look at [`interrupted`] promptly. Each long loop of a command checks it, stops, hands
//! back what it has (marked as interrupted) and the binary exits with [`Interrupt::exit_code`]
//! (130 for SIGINT, 143 for SIGTERM, as a shell reports a process the signal killed).
//!
//! Why not signal-hook: its handlers are installed with `SA_RESTART`, which would leave a
//! blocking `waitpid` or pipe read waiting after a SIGTERM sent to `tma` alone; the two
//! `sigaction` calls here are the whole of the `unsafe`.
// unsafe allowed: sigaction(2) with a handler that stores to an atomic.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// 0 until the first SIGINT/SIGTERM; then that signal's number.
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Whether [`catch`] installed the handler.
static CAUGHT: AtomicBool = AtomicBool::new(false);

/// Which request to stop arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM (`kill`, systemd, a container runtime).
    Term,
}

impl Interrupt {
    /// The signal's number.
    pub fn number(self) -> i32 {
        match self {
            Interrupt::Int => libc::SIGINT,
            Interrupt::Term => libc::SIGTERM,
        }
    }

    /// `SIGINT` or `SIGTERM`, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Interrupt::Int => "SIGINT",
            Interrupt::Term => "SIGTERM",
        }
    }

    /// The exit status of an interrupted run: 128 + the signal (130, 143).
    pub fn exit_code(self) -> u8 {
        128 + self.number() as u8
    }

    /// The interrupt a signal number stands for (SIGINT, SIGTERM), else `None`.
    pub fn from_number(sig: i32) -> Option<Interrupt> {
        match sig {
            libc::SIGINT => Some(Interrupt::Int),
            libc::SIGTERM => Some(Interrupt::Term),
            _ => None,
        }
    }
}

impl std::fmt::Display for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // The first one counts: a SIGTERM after a Ctrl-C does not change the exit status.
    let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// Catch SIGINT and SIGTERM for the rest of the process's life (no `SA_RESTART`; see the
/// module). Calling it again is harmless. A forked child keeps the handler until it execs; an
/// exec'd command gets the default actions back.
pub fn catch() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler is
        // an `extern "C" fn(c_int)` (no SA_SIGINFO) that only does an atomic
        // compare-exchange, which is async-signal-safe; the old-action pointer may be null.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    CAUGHT.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether [`catch`] was called: a handler that takes SIGINT/SIGTERM over for a while (the MSR
/// clock's restore path) then records the signal with [`set`] instead of ending the process.
/// Async-signal-safe.
pub fn caught() -> bool {
    CAUGHT.load(Ordering::SeqCst)
}

/// The SIGINT or SIGTERM received since [`catch`], if any.
pub fn interrupted() -> Option<Interrupt> {
    Interrupt::from_number(RECEIVED.load(Ordering::SeqCst))
}

/// Record `which` as if the signal had arrived (a handler that replaced this one for a while,
/// tests). Async-signal-safe.
pub fn set(which: Interrupt) {
    on_signal(which.number());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_and_names() {
        assert_eq!(Interrupt::Int.exit_code(), 130);
        assert_eq!(Interrupt::Term.exit_code(), 143);
        assert_eq!(Interrupt::Term.to_string(), "SIGTERM");
        assert_eq!(Interrupt::from_number(libc::SIGHUP), None);
    }

    #[test]
    fn a_caught_signal_is_recorded_and_the_first_one_counts() {
        catch().unwrap();
        assert!(caught());
        assert_eq!(interrupted(), None);
        crate::process::kill(std::process::id() as i32, libc::SIGTERM).unwrap();
        // Delivered to some thread of this process before kill returns or soon after.
        let t0 = std::time::Instant::now();
        while interrupted().is_none() && t0.elapsed().as_secs() < 5 {
            std::thread::yield_now();
        }
        assert_eq!(interrupted(), Some(Interrupt::Term));
        set(Interrupt::Int);
        assert_eq!(interrupted(), Some(Interrupt::Term));
    }
}
