//! Process control over rustix (no `unsafe`): send a signal, wait for a child, ask whether a
//! process exists, and get a pidfd that becomes readable when it exits. Pids are the kernel's
//! (`i32`); zero and negative pids (process groups, "any child") are refused with `EINVAL`.

use std::io;
use std::os::fd::OwnedFd;

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

fn pid(raw: i32) -> io::Result<Pid> {
    if raw <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Pid::from_raw(raw).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// How a waited-for process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    fn of(st: WaitStatus) -> Option<Exit> {
        if let Some(c) = st.exit_status() {
            Some(Exit::Code(c))
        } else {
            st.terminating_signal().map(Exit::Signal)
        }
    }
}

/// `waitpid` giving the raw wait status (as `std::os::unix::process::ExitStatusExt::from_raw`
/// takes it); `nohang` returns `Ok(None)` while the child runs. EINTR is returned as an error
/// of kind `Interrupted`.
pub fn wait_status(raw_pid: i32, nohang: bool) -> io::Result<Option<i32>> {
    let opts = if nohang {
        WaitOptions::NOHANG
    } else {
        WaitOptions::empty()
    };
    Ok(rustix::process::waitpid(Some(pid(raw_pid)?), opts)?.map(|(_, st)| st.as_raw()))
}

/// `waitpid` giving how the child ended; `nohang` returns `Ok(None)` while the child runs.
/// EINTR is returned as an error of kind `Interrupted`.
pub fn wait(raw_pid: i32, nohang: bool) -> io::Result<Option<Exit>> {
    let opts = if nohang {
        WaitOptions::NOHANG
    } else {
        WaitOptions::empty()
    };
    Ok(rustix::process::waitpid(Some(pid(raw_pid)?), opts)?.and_then(|(_, st)| Exit::of(st)))
}

/// Block until the child ends (EINTR retried).
pub fn wait_blocking(raw_pid: i32) -> io::Result<Exit> {
    loop {
        match wait(raw_pid, false) {
            Ok(Some(e)) => return Ok(e),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Send signal `sig` (a `libc::SIG*` number; 0 only checks that it could be sent) to a
/// process.
pub fn kill(raw_pid: i32, sig: i32) -> io::Result<()> {
    let p = pid(raw_pid)?;
    if sig == 0 {
        return Ok(rustix::process::test_kill_process(p)?);
    }
    let sig =
        Signal::from_named_raw(sig).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(rustix::process::kill_process(p, sig)?)
}

/// Does a process exist (signal 0)? A process of another user, which we may not signal,
/// exists too.
pub fn pid_alive(raw_pid: i32) -> bool {
    match pid(raw_pid) {
        Ok(p) => match rustix::process::test_kill_process(p) {
            Ok(()) => true,
            Err(e) => e == rustix::io::Errno::PERM,
        },
        Err(_) => false,
    }
}

/// `pidfd_open(2)`: a descriptor that becomes readable when the process exits.
pub fn pidfd_open(raw_pid: i32) -> io::Result<OwnedFd> {
    Ok(rustix::process::pidfd_open(
        pid(raw_pid)?,
        rustix::process::PidfdFlags::empty(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Start `sh -c script`; the tests reap it with this module's own waitpid.
    #[allow(clippy::zombie_processes)]
    fn spawn(script: &str) -> i32 {
        let c = std::process::Command::new("sh")
            .args(["-c", script])
            .spawn();
        c.unwrap().id() as i32
    }

    #[test]
    fn exit_codes_and_signals_come_back() {
        assert_eq!(wait_blocking(spawn("exit 7")).unwrap(), Exit::Code(7));

        let p = spawn("exec sleep 10");
        assert!(pid_alive(p));
        assert_eq!(wait(p, true).unwrap(), None);
        let fd = pidfd_open(p).unwrap();
        kill(p, libc::SIGKILL).unwrap();
        assert_eq!(wait_blocking(p).unwrap(), Exit::Signal(libc::SIGKILL));
        drop(fd);
    }

    #[test]
    fn raw_status_is_what_exit_status_takes() {
        use std::os::unix::process::ExitStatusExt;
        let p = spawn("exit 3");
        let st = loop {
            if let Some(st) = wait_status(p, false).unwrap() {
                break st;
            }
        };
        assert_eq!(std::process::ExitStatus::from_raw(st).code(), Some(3));
    }

    #[test]
    fn odd_pids_and_signals_are_refused() {
        assert!(!pid_alive(0));
        assert!(!pid_alive(-1));
        assert!(pid_alive(1) || !std::path::Path::new("/proc/1").exists());
        assert_eq!(
            kill(0, libc::SIGTERM).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        let me = std::process::id() as i32;
        kill(me, 0).unwrap();
        assert_eq!(
            kill(me, 1000).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            wait(-1, true).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
    }
}
