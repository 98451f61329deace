//! The `unsafe` of the counting path: `perf_event_open(2)`, group `read(2)`, the
//! enable/disable/set-output ioctls, polling descriptors (perf fds and pidfds), and
//! mount/umount of tracefs (for [`crate::tracefs`]). The launched command and the Ctrl-C flag
//! are in [`crate::process`]; kill, waitpid and pidfd_open are `tma_sys::process` (safe).
//! Everything above these modules is safe code.
// unsafe allowed: raw perf_event_open/read/ioctl/poll and mount/umount2 syscalls.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use perf_event_open_sys::bindings as b;

use crate::attr::Attr;

/// Convert our [`Attr`] into the kernel struct (all other fields zero).
fn to_kernel(a: &Attr) -> b::perf_event_attr {
    let mut k = b::perf_event_attr::default();
    k.type_ = a.type_;
    k.size = std::mem::size_of::<b::perf_event_attr>() as u32;
    k.config = a.config;
    k.read_format = a.read_format;
    k.__bindgen_anon_1.sample_period = a.sample_period;
    k.__bindgen_anon_3.config1 = a.config1;
    k.__bindgen_anon_4.config2 = a.config2;
    k.set_disabled(a.disabled as u64);
    k.set_inherit(a.inherit as u64);
    k.set_enable_on_exec(a.enable_on_exec as u64);
    k.set_exclude_kernel(a.exclude_kernel as u64);
    k.set_exclude_user(a.exclude_user as u64);
    k
}

/// `PERF_FLAG_FD_CLOEXEC`: every fd `tma` opens is close-on-exec.
pub const FLAG_FD_CLOEXEC: u64 = b::PERF_FLAG_FD_CLOEXEC as u64;
/// `PERF_FLAG_PID_CGROUP`: `pid` is the fd of a cgroup directory (cgroup v2, or the v1
/// perf_event hierarchy) and the counter counts only while that cgroup's tasks run on `cpu`.
pub const FLAG_PID_CGROUP: u64 = b::PERF_FLAG_PID_CGROUP as u64;

/// Open one counter. `pid` -1 with a `cpu` counts the CPU; `group` is the leader's fd.
pub fn perf_open(attr: &Attr, pid: i32, cpu: i32, group: Option<RawFd>) -> io::Result<OwnedFd> {
    perf_open_flags(attr, pid, cpu, group, FLAG_FD_CLOEXEC)
}

/// [`perf_open`] with explicit `perf_event_open` flags ([`FLAG_FD_CLOEXEC`] is always added):
/// with [`FLAG_PID_CGROUP`], `pid` is a cgroup directory fd and `cpu` must be a CPU.
pub fn perf_open_flags(
    attr: &Attr,
    pid: i32,
    cpu: i32,
    group: Option<RawFd>,
    flags: u64,
) -> io::Result<OwnedFd> {
    let mut k = to_kernel(attr);
    let flags = (flags | FLAG_FD_CLOEXEC) as libc::c_ulong;
    // SAFETY: `k` is a fully initialised perf_event_attr whose `size` matches the struct we
    // pass; the kernel only reads it (and may write `size` back on E2BIG), and it outlives
    // the call. The other arguments are plain integers.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut k, pid, cpu, group.unwrap_or(-1), flags)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel, is valid and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One `read(2)` of a group leader opened with [`crate::attr::READ_FORMAT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRead {
    pub time_enabled: u64,
    pub time_running: u64,
    /// (value, id) per member, in the order the members were opened.
    pub values: Vec<(u64, u64)>,
}

/// Read a whole group through its leader.
pub fn read_group(leader: &OwnedFd, members: usize) -> io::Result<GroupRead> {
    let mut buf = vec![0u64; 3 + 2 * members];
    let n = read_words(leader, &mut buf)?;
    parse_group_read(&buf, n, members)
}

/// One `read(2)` of a group leader into `buf`; the bytes read.
fn read_words(leader: &OwnedFd, buf: &mut [u64]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable buffer of exactly `buf.len() * 8` bytes; `read` writes
    // at most that many and the fd is open for the duration of the call.
    let n = unsafe { libc::read(leader.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len() * 8) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// [`read_group`] without allocating (for readings taken at every region boundary): the
/// members' values go into `values` (cleared first; its capacity is reused), and the result is
/// (time enabled, time running).
pub fn read_group_values(
    leader: &OwnedFd,
    members: usize,
    values: &mut Vec<u64>,
) -> io::Result<(u64, u64)> {
    const STACK_MEMBERS: usize = 32;
    let words = 3 + 2 * members;
    let mut stack = [0u64; 3 + 2 * STACK_MEMBERS];
    let mut heap = Vec::new();
    let buf: &mut [u64] = if members <= STACK_MEMBERS {
        &mut stack[..words]
    } else {
        heap.resize(words, 0);
        &mut heap
    };
    let n = read_words(leader, buf)?;
    check_group_read(buf, n, members)?;
    values.clear();
    values.extend((0..members).map(|i| buf[3 + 2 * i]));
    Ok((buf[1], buf[2]))
}

/// The checks of a group read's header: whole, and holding the expected number of members.
fn check_group_read(buf: &[u64], n_bytes: usize, members: usize) -> io::Result<()> {
    let words = n_bytes / 8;
    if words < 3 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "short perf group read",
        ));
    }
    let nr = buf[0] as usize;
    if nr != members || words < 3 + 2 * nr {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("perf group read returned {nr} members, expected {members}"),
        ));
    }
    Ok(())
}

fn parse_group_read(buf: &[u64], n_bytes: usize, members: usize) -> io::Result<GroupRead> {
    check_group_read(buf, n_bytes, members)?;
    let nr = members;
    Ok(GroupRead {
        time_enabled: buf[1],
        time_running: buf[2],
        values: (0..nr).map(|i| (buf[3 + 2 * i], buf[4 + 2 * i])).collect(),
    })
}

fn group_ioctl(fd: &OwnedFd, which: u32) -> io::Result<()> {
    let arg = b::PERF_IOC_FLAG_GROUP;
    // SAFETY: ENABLE/DISABLE/RESET take an integer flag argument and no pointer.
    let r = unsafe {
        match which {
            0 => perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), arg),
            1 => perf_event_open_sys::ioctls::DISABLE(fd.as_raw_fd(), arg),
            _ => perf_event_open_sys::ioctls::RESET(fd.as_raw_fd(), arg),
        }
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Enable a whole group through its leader.
pub fn enable_group(leader: &OwnedFd) -> io::Result<()> {
    group_ioctl(leader, 0)
}

/// Zero a whole group's counts through its leader.
pub fn reset_group(leader: &OwnedFd) -> io::Result<()> {
    group_ioctl(leader, 2)
}

/// Disable a whole group through its leader.
pub fn disable_group(leader: &OwnedFd) -> io::Result<()> {
    group_ioctl(leader, 1)
}

/// `PERF_EVENT_IOC_SET_OUTPUT`: write `fd`'s records into the ring buffer of `target` (an
/// event on the same CPU whose ring is mapped).
pub fn set_output(fd: &impl AsRawFd, target: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: SET_OUTPUT takes the target fd as a plain integer argument, no pointer; both fds
    // are borrowed, so open for the duration of the call.
    let r = unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Wait until one of `fds` is readable or `timeout_ms` passes (-1 = forever).
/// Returns which fds are readable; an interrupted wait returns all `false`.
pub fn poll_readable<F: AsRawFd>(fds: &[&F], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a live array of `p.len()` pollfd structs for the duration of the call.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents != 0).collect())
}

/// `mount -t tracefs nodev <target>`.
pub fn mount_tracefs(target: &std::path::Path) -> io::Result<()> {
    let t = c_path(target)?;
    // SAFETY: all pointers are valid NUL-terminated strings for the call's duration; data is null.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            t.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `umount <target>`.
pub fn unmount(target: &std::path::Path) -> io::Result<()> {
    let t = c_path(target)?;
    // SAFETY: `t` is a valid NUL-terminated path for the call's duration.
    let r = unsafe { libc::umount2(t.as_ptr(), 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn c_path(p: &std::path::Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_read_layout() {
        let buf = [2, 100, 50, 7, 11, 9, 12];
        let g = parse_group_read(&buf, 56, 2).unwrap();
        assert_eq!((g.time_enabled, g.time_running), (100, 50));
        assert_eq!(g.values, vec![(7, 11), (9, 12)]);
        assert!(parse_group_read(&buf, 56, 3).is_err());
        assert!(parse_group_read(&buf, 16, 2).is_err());
    }

    /// The allocation-free read gives what `read_group` gives, on a live group of two software
    /// counters of this thread (task-clock, page-faults; these work without a PMU).
    #[test]
    fn read_group_values_agrees_with_read_group() {
        use crate::attr::{Attr, READ_FORMAT, TYPE_SOFTWARE};
        let attr = |config| Attr {
            type_: TYPE_SOFTWARE,
            config,
            config1: 0,
            config2: 0,
            read_format: READ_FORMAT,
            sample_period: 0,
            disabled: false,
            inherit: false,
            enable_on_exec: false,
            exclude_kernel: false,
            exclude_user: false,
        };
        let leader = match perf_open(&attr(1), 0, -1, None) {
            Ok(fd) => fd,
            Err(e) => {
                println!("skipped: software counters cannot be opened here ({e})");
                return;
            }
        };
        let _faults = perf_open(&attr(2), 0, -1, Some(leader.as_raw_fd())).unwrap();
        let mut values = vec![99; 7];
        let (enabled, running) = read_group_values(&leader, 2, &mut values).unwrap();
        let full = read_group(&leader, 2).unwrap();
        assert_eq!(values.len(), 2);
        // Read after: every field at least what the first read saw, task-clock running.
        assert!(full.time_enabled >= enabled && full.time_running >= running && running > 0);
        assert!(full.values[0].0 >= values[0] && values[0] > 0);
        assert!(full.values[1].0 >= values[1]);
        assert!(read_group_values(&leader, 3, &mut values).is_err());
    }
}
