//! Launched commands and Ctrl-C, for every tool that measures a command it starts (counting,
//! sampling, kvm tracepoints): one [`HeldChild`], held between fork and exec until the events
//! are attached to its pid. SIGINT/SIGTERM are caught and asked about through
//! `tma_sys::signal`, the binary's one handler.
//!
//! The `unsafe` here is fork/exec; each block has a `// SAFETY:`
//! comment. The pipes are `std::io::pipe` (close-on-exec).
// unsafe allowed: fork/exec of the measured command.
#![allow(unsafe_code)]

use std::ffi::{CString, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// The exit status a tool that ran a command ends with, as a shell reports it: the command's
/// exit code, or 128+N when signal N killed it.
pub fn shell_status(code: Option<i32>, signal: Option<i32>) -> u8 {
    match (code, signal) {
        (_, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (Some(c), None) => c.clamp(0, 255) as u8,
        (None, None) => 0,
    }
}

/// [`shell_status`] of a reaped child.
pub fn shell_status_of(status: &ExitStatus) -> u8 {
    shell_status(status.code(), status.signal())
}

/// Byte that lets the held child exec; EOF or any other byte makes it `_exit(127)` unexecuted.
const GO: u8 = b'g';

/// Where a launched command's standard output goes (its stdin and stderr are always
/// inherited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CommandStdout {
    /// This process's stdout.
    #[default]
    Inherit,
    /// `/dev/null`: the command runs silently (a preliminary measurement pass).
    Null,
}

/// A command's arguments in a snapshot: JSON strings, as they always were; an argument that
/// is not UTF-8 is recorded with U+FFFD in place of its bad bytes (the record describes the
/// run, a replay does not run it again).
pub mod os_args {
    use std::ffi::OsString;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(args: &[OsString], s: S) -> Result<S::Ok, S::Error> {
        let text: Vec<std::borrow::Cow<'_, str>> =
            args.iter().map(|a| a.to_string_lossy()).collect();
        text.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<OsString>, D::Error> {
        Ok(Vec::<String>::deserialize(d)?
            .into_iter()
            .map(OsString::from)
            .collect())
    }
}

/// A forked child held before `execvp` until [`HeldChild::release`], so that perf events with
/// `enable_on_exec` can be attached to its pid first.
///
/// The child inherits stdin/stdout/stderr (stdout unless [`CommandStdout::Null`]) and the
/// environment, gets SIGTERM if this process
/// dies (`PR_SET_PDEATHSIG`), and has SIGPIPE at its default action (as `std::process` does).
/// Dropped before release, it exits without running the command and is reaped.
#[derive(Debug)]
pub struct HeldChild {
    pid: i32,
    go: Option<io::PipeWriter>,
    exec_err: io::PipeReader,
    /// Set once the child was reaped.
    status: Option<ExitStatus>,
}

impl HeldChild {
    /// Fork; the child waits for [`HeldChild::release`] and then execs `argv` (`argv[0]` is
    /// looked up in `PATH` unless it contains a `/`).
    pub fn spawn(argv: &[OsString]) -> io::Result<HeldChild> {
        let cargs = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"))?;
        let program = cargs
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
        Self::spawn_program(program, &cargs, CommandStdout::Inherit)
    }

    /// As [`HeldChild::spawn`], executing `program` (a path, or a name looked up in `PATH`)
    /// with `argv` (whose first element is the command's `argv[0]`), its stdout as `stdout`
    /// says.
    pub fn spawn_program(
        program: &CString,
        argv: &[CString],
        stdout: CommandStdout,
    ) -> io::Result<HeldChild> {
        let (go_r, go_w) = io::pipe()?;
        let (err_r, err_w) = io::pipe()?;
        // Opened close-on-exec before the fork; the child dup2s it onto fd 1.
        let null = match stdout {
            CommandStdout::Inherit => None,
            CommandStdout::Null => Some(std::fs::File::options().write(true).open("/dev/null")?),
        };
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork has no memory-safety preconditions. The child only calls
        // async-signal-safe functions on memory prepared before the fork (see `held_exec`),
        // and leaves by exec or `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let fds = ChildFds {
                go: go_r.as_raw_fd(),
                err: err_w.as_raw_fd(),
                parent_ends: [go_w.as_raw_fd(), err_r.as_raw_fd()],
                stdout: null.as_ref().map(|f| f.as_raw_fd()),
            };
            held_exec(parent, fds, program, &ptrs);
        }
        drop(go_r);
        drop(err_w);
        Ok(HeldChild {
            pid,
            go: Some(go_w),
            exec_err: err_r,
            status: None,
        })
    }

    /// The child's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Let the child exec. Returns the exec error if `execvp` failed (the child has exited
    /// with 127 and is reaped here).
    pub fn release(&mut self) -> io::Result<()> {
        let Some(mut go) = self.go.take() else {
            return Ok(());
        };
        let sent = go.write_all(&[GO]);
        drop(go);
        sent?;
        // EOF (the close-on-exec write end closed by a successful exec) means the command runs.
        let mut buf = Vec::with_capacity(4);
        (&self.exec_err).read_to_end(&mut buf)?;
        if let Ok(errno) = <[u8; 4]>::try_from(buf.as_slice()) {
            let _ = self.wait();
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
        }
        Ok(())
    }

    /// Non-blocking wait: the exit status once the child has ended, `None` while it runs
    /// (as `std::process::Child::try_wait`, the status is kept once reaped).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = tma_sys::process::wait_status(self.pid, true)?.map(ExitStatus::from_raw);
        }
        Ok(self.status)
    }

    /// Blocking wait, retried on EINTR.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(st) = self.status {
            return Ok(st);
        }
        loop {
            match tma_sys::process::wait_status(self.pid, false) {
                Ok(Some(st)) => {
                    let st = ExitStatus::from_raw(st);
                    self.status = Some(st);
                    return Ok(st);
                }
                Ok(None) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Send `sig` to the child unless it was reaped (then its pid may be someone else's).
    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            let _ = tma_sys::process::kill(self.pid, sig);
        }
    }

    /// Give up before exec: the child sees the closed pipe and exits; it is reaped here.
    pub fn abort(mut self) {
        self.abort_in_place();
    }

    fn abort_in_place(&mut self) {
        if self.go.take().is_some() && self.status.is_none() {
            let _ = self.wait();
        }
    }
}

impl Drop for HeldChild {
    fn drop(&mut self) {
        // Never released (an error path): the command must not run unmeasured.
        self.abort_in_place();
    }
}

/// The pipe ends as the held child sees them.
struct ChildFds {
    /// Read end of the go pipe.
    go: RawFd,
    /// Write end of the exec-error pipe (closed by a successful exec).
    err: RawFd,
    /// The parent's ends, closed in the child: while the child held the go pipe's write end,
    /// closing the parent's would not give it EOF.
    parent_ends: [RawFd; 2],
    /// Duplicated onto fd 1 when set (`/dev/null`).
    stdout: Option<RawFd>,
}

/// The child side of [`HeldChild::spawn_program`]: wait for the go byte, exec, or report the
/// exec errno on the error pipe and `_exit(127)`. Never returns.
fn held_exec(
    parent: libc::pid_t,
    fds: ChildFds,
    program: &CString,
    argv: &[*const libc::c_char],
) -> ! {
    // SAFETY: runs in the freshly forked child. Only async-signal-safe calls (close, dup2, prctl,
    // getppid, signal, read, execvp, write, _exit) on memory prepared before the fork: `program` and
    // `argv` (a NULL-terminated array of pointers into live CStrings); nothing allocates.
    unsafe {
        for fd in fds.parent_ends {
            libc::close(fd);
        }
        // The duplicate on fd 1 is not close-on-exec; the original is.
        if let Some(fd) = fds.stdout {
            if libc::dup2(fd, libc::STDOUT_FILENO) < 0 {
                let errno = (*libc::__errno_location()).to_ne_bytes();
                libc::write(fds.err, errno.as_ptr().cast(), errno.len());
                libc::_exit(127);
            }
        }
        // If the parent dies (even by SIGKILL) the command gets SIGTERM: no orphan keeps running.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        if libc::getppid() != parent {
            libc::_exit(127);
        }
        // Rust ignores SIGPIPE in its own process; the command gets the usual default.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut byte = 0u8;
        loop {
            let n = libc::read(fds.go, (&mut byte as *mut u8).cast(), 1);
            if n == 1 && byte == GO {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            libc::_exit(127);
        }
        libc::execvp(program.as_ptr(), argv.as_ptr());
        let errno = (*libc::__errno_location()).to_ne_bytes();
        libc::write(fds.err, errno.as_ptr().cast(), errno.len());
        libc::_exit(127)
    }
}

/// Catch SIGINT and SIGTERM: `tma_sys::signal::catch`, the binary's one handler (no
/// SA_RESTART, so blocking waits return EINTR and loops notice [`interrupted`] promptly).
pub fn catch_interrupts() -> io::Result<()> {
    tma_sys::signal::catch()
}

/// Was SIGINT / SIGTERM received since [`catch_interrupts`]? (`tma_sys::signal::interrupted`
/// says which.)
pub fn interrupted() -> bool {
    tma_sys::signal::interrupted().is_some()
}

#[cfg(test)]
mod shell_status_tests {
    use super::*;

    #[test]
    fn codes_and_signals_as_a_shell_reports_them() {
        assert_eq!(shell_status(Some(3), None), 3);
        assert_eq!(shell_status(Some(300), None), 255);
        assert_eq!(shell_status(None, Some(9)), 137);
        assert_eq!(shell_status(None, None), 0);
        assert_eq!(shell_status_of(&ExitStatus::from_raw(2 << 8)), 2);
        assert_eq!(shell_status_of(&ExitStatus::from_raw(15)), 143);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_child_runs_and_reports_its_status() {
        let mut c = HeldChild::spawn(&["sh".into(), "-c".into(), "exit 7".into()]).unwrap();
        assert!(c.pid() > 0);
        c.release().unwrap();
        assert_eq!(c.wait().unwrap().code(), Some(7));
        assert_eq!(c.try_wait().unwrap().and_then(|s| s.code()), Some(7));
        assert_eq!(c.wait().unwrap().code(), Some(7));
    }

    #[test]
    fn exec_errors_come_back_from_release() {
        let mut c = HeldChild::spawn(&["/nonexistent/tma-cmd".into()]).unwrap();
        let e = c.release().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        let mut c = HeldChild::spawn(&["definitely-not-a-command-xyz".into()]).unwrap();
        assert_eq!(c.release().unwrap_err().raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn arguments_that_are_not_utf8_run_and_are_recorded_as_text() {
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(b"bad\xff".to_vec());
        let target = crate::backend::Target::Command(vec!["ls".into(), bad]);
        let json = serde_json::to_string(&target).unwrap();
        assert_eq!(json, "{\"command\":[\"ls\",\"bad\u{fffd}\"]}");
        let back: crate::backend::Target =
            serde_json::from_str(r#"{"command":["true","x"]}"#).unwrap();
        assert_eq!(
            back,
            crate::backend::Target::Command(vec!["true".into(), "x".into()])
        );
        // exec gets the bytes: `test -e` of a missing name that is not UTF-8 fails with 1.
        let mut c = HeldChild::spawn(&[
            "test".into(),
            "-e".into(),
            OsString::from_vec(b"/nonexistent/\xfe".to_vec()),
        ])
        .unwrap();
        c.release().unwrap();
        assert_eq!(c.wait().unwrap().code(), Some(1));
    }

    #[test]
    fn dropped_before_release_never_execs() {
        let dir = std::env::temp_dir().join(format!("tma-held-{}", std::process::id()));
        let c = HeldChild::spawn(&["touch".into(), dir.clone().into()]).unwrap();
        drop(c);
        assert!(!dir.exists());
        assert!(HeldChild::spawn(&[]).is_err());
    }
}
