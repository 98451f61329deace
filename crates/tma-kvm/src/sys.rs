//! The kernel boundary of `tma-kvm`: `perf_event_open` on tracepoints, the mmap ring buffer,
//! `mount`/`umount` of tracefs, the SIGINT flag and the pre-exec hook of a launched command.
//! All `unsafe` of the crate lives here, each block with a `// SAFETY:` comment.
//!
//! Tracepoints are not PMU counters: `PERF_TYPE_TRACEPOINT` events are software events fired
//! by the kernel's static trace points, so they work on machines without a hardware PMU (as
//! this project's VMs are). They need root, or CAP_PERFMON plus read access to tracefs.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

use perf_event_open_sys as pe;

/// How a tracepoint is opened.
#[derive(Debug, Clone, Copy)]
pub struct TpOpen {
    /// Tracepoint id from tracefs.
    pub id: u64,
    /// -1 for all processes (needs a cpu), or a pid.
    pub pid: i32,
    /// CPU, or -1 for any.
    pub cpu: i32,
    /// Follow children (launch mode).
    pub inherit: bool,
    /// Enable when the target execs (launch mode); otherwise enabled by [`enable`].
    pub enable_on_exec: bool,
}

/// Open one sampling tracepoint event: sample_period=1, PERF_SAMPLE_TID|TIME|CPU|RAW, disabled.
pub fn open_tracepoint(o: &TpOpen) -> io::Result<OwnedFd> {
    let mut attr = pe::bindings::perf_event_attr::default();
    attr.type_ = pe::bindings::PERF_TYPE_TRACEPOINT;
    attr.size = std::mem::size_of::<pe::bindings::perf_event_attr>() as u32;
    attr.config = o.id;
    attr.sample_type = (pe::bindings::PERF_SAMPLE_TID
        | pe::bindings::PERF_SAMPLE_TIME
        | pe::bindings::PERF_SAMPLE_CPU
        | pe::bindings::PERF_SAMPLE_RAW) as u64;
    attr.__bindgen_anon_1.sample_period = 1;
    // Wake the reader once a quarter of a 64 KiB ring is used, not per record.
    attr.__bindgen_anon_2.wakeup_watermark = 16 * 1024;
    attr.set_watermark(1);
    attr.set_disabled(1);
    attr.set_inherit(o.inherit as u64);
    attr.set_enable_on_exec(o.enable_on_exec as u64);
    attr.set_sample_id_all(1);
    // SAFETY: `attr` is a fully initialised perf_event_attr whose `size` matches the struct the
    // syscall reads; the other arguments are plain integers.
    let fd = unsafe {
        pe::perf_event_open(
            &mut attr,
            o.pid,
            o.cpu,
            -1,
            pe::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel, is valid and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Route `fd`'s records into the ring buffer of `target` (same CPU).
pub fn set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: both are live perf event fds; the ioctl takes the target fd by value.
    let r = unsafe { pe::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Enable a perf event fd.
pub fn enable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: live perf event fd; ENABLE takes an integer flag argument.
    let r = unsafe { pe::ioctls::ENABLE(fd.as_raw_fd(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Disable a perf event fd.
pub fn disable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: live perf event fd; DISABLE takes an integer flag argument.
    let r = unsafe { pe::ioctls::DISABLE(fd.as_raw_fd(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A perf mmap ring buffer: one metadata page plus 2^n data pages.
pub struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data_off: usize,
    data_size: usize,
}

// The mapping is owned by the Ring and only accessed through &mut self.
// SAFETY: the raw pointer is a private mapping of this fd; moving it between threads is fine.
unsafe impl Send for Ring {}

const HEAD_OFF: usize = 1024; // offsetof(struct perf_event_mmap_page, data_head)
const TAIL_OFF: usize = 1032;
const DOFF_OFF: usize = 1040;
const DSIZE_OFF: usize = 1048;

impl Ring {
    /// Map `data_pages` (a power of two) data pages of `fd`.
    pub fn map(fd: OwnedFd, data_pages: usize) -> io::Result<Ring> {
        if !data_pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring buffer size must be a power of two pages",
            ));
        }
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (data_pages + 1);
        // SAFETY: a fresh shared mapping of a perf fd; the kernel validates the length, and
        // the result is checked against MAP_FAILED before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base as *mut u8;
        // SAFETY: the metadata page is mapped and at least 4 KiB long; data_offset/data_size
        // are naturally aligned u64 fields the kernel fills in at mmap time.
        let (doff, dsize) = unsafe {
            (
                std::ptr::read_volatile(base.add(DOFF_OFF) as *const u64) as usize,
                std::ptr::read_volatile(base.add(DSIZE_OFF) as *const u64) as usize,
            )
        };
        let (data_off, data_size) = if dsize == 0 {
            (page, page * data_pages)
        } else {
            (doff, dsize)
        };
        Ok(Ring {
            fd,
            base,
            len,
            data_off,
            data_size,
        })
    }

    /// The event fd owning the ring.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Copy every complete record now in the ring to `f` (one call per record, header
    /// included), then release the space to the kernel.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) {
        // SAFETY: data_head is an aligned u64 in the mapped metadata page that the kernel
        // updates concurrently; it is read through an atomic.
        let head_ptr = unsafe { &*(self.base.add(HEAD_OFF) as *const AtomicU64) };
        // SAFETY: as above for data_tail, which only this process writes.
        let tail_ptr = unsafe { &*(self.base.add(TAIL_OFF) as *const AtomicU64) };
        // ATOMICS: the acquire load pairs with the kernel's release of data_head, so the
        // record bytes before head are visible.
        let head = head_ptr.load(Ordering::Acquire);
        let mut tail = tail_ptr.load(Ordering::Relaxed);
        // SAFETY: the data area [data_off, data_off + data_size) lies inside the mapping.
        let data =
            unsafe { std::slice::from_raw_parts(self.base.add(self.data_off), self.data_size) };
        let mut buf = Vec::new();
        while tail < head {
            let at = (tail as usize) % self.data_size;
            let mut hdr = [0u8; 8];
            copy_wrapped(data, at, &mut hdr);
            let size = u16::from_le_bytes([hdr[6], hdr[7]]) as usize;
            if size < 8 || (head - tail) < size as u64 {
                break;
            }
            buf.resize(size, 0);
            copy_wrapped(data, at, &mut buf);
            f(&buf);
            tail += size as u64;
        }
        // ATOMICS: all reads of the records happen before the release store of data_tail,
        // which lets the kernel reuse the space.
        fence(Ordering::SeqCst);
        tail_ptr.store(tail, Ordering::Release);
    }
}

fn copy_wrapped(data: &[u8], at: usize, out: &mut [u8]) {
    let n = out.len();
    let first = n.min(data.len() - at);
    out[..first].copy_from_slice(&data[at..at + first]);
    if first < n {
        out[first..].copy_from_slice(&data[..n - first]);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping created in `map`, unmapped once here.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// Wait until one of `fds` is readable or `timeout_ms` passed.
pub fn poll_fds(fds: &[RawFd], timeout_ms: i32) {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of `p.len()` pollfd structs for the call's duration.
    unsafe {
        libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms);
    }
}

/// `mount -t tracefs nodev <target>`.
pub fn mount_tracefs(target: &Path) -> io::Result<()> {
    let t = CString::new(target.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
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
pub fn unmount(target: &Path) -> io::Result<()> {
    let t = CString::new(target.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: `t` is a valid NUL-terminated path for the call's duration.
    let r = unsafe { libc::umount2(t.as_ptr(), 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Install a SIGINT/SIGTERM handler that only sets a flag (so a Ctrl-C ends the measurement
/// normally: report printed, tracefs unmounted if we mounted it).
pub fn catch_interrupts() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler is async-signal-safe (one atomic store); sigaction is given a
        // zeroed, then filled struct.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether SIGINT/SIGTERM arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A child process forked and held before `execvp` until [`HeldChild::release`], so that perf
/// events with `enable_on_exec` can be attached to its pid first.
pub struct HeldChild {
    pub pid: i32,
    go: Option<OwnedFd>,
    exec_err: Option<OwnedFd>,
    reaped: bool,
}

/// Fork; the child waits for [`HeldChild::release`] and then execs `argv` (PATH searched).
pub fn spawn_held(argv: &[String]) -> io::Result<HeldChild> {
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"))?;
    if cargs.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
    }
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let (go_r, go_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    // SAFETY: fork has no memory-safety preconditions; the child below only calls
    // async-signal-safe functions (read, close, execvp, write, _exit) on data prepared before
    // the fork, as required in a possibly multi-threaded parent.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: child side, async-signal-safe calls only; pointers stay valid (copied memory).
        unsafe {
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            let mut b = 0u8;
            loop {
                let r = libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1);
                if r >= 0 || *libc::__errno_location() != libc::EINTR {
                    break;
                }
            }
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let e: i32 = *libc::__errno_location();
            libc::write(
                err_w.as_raw_fd(),
                &e as *const i32 as *const libc::c_void,
                4,
            );
            libc::_exit(127);
        }
    }
    drop(go_r);
    drop(err_w);
    Ok(HeldChild {
        pid,
        go: Some(go_w),
        exec_err: Some(err_r),
        reaped: false,
    })
}

impl HeldChild {
    /// Let the child exec. Returns the exec error if it failed.
    pub fn release(&mut self) -> io::Result<()> {
        drop(self.go.take());
        if let Some(e) = self.exec_err.take() {
            let mut buf = [0u8; 4];
            let mut f = std::fs::File::from(e);
            use std::io::Read;
            if let Ok(4) = f.read(&mut buf) {
                return Err(io::Error::from_raw_os_error(i32::from_le_bytes(buf)));
            }
        }
        Ok(())
    }

    /// Non-blocking wait: the raw wait status once the child has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<i32>> {
        if self.reaped {
            return Ok(None);
        }
        let mut st = 0;
        // SAFETY: `st` is a valid out pointer; pid is our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        Ok(Some(st))
    }

    /// Blocking wait (retrying on EINTR).
    pub fn wait(&mut self) -> io::Result<i32> {
        loop {
            let mut st = 0;
            // SAFETY: as in try_wait.
            let r = unsafe { libc::waitpid(self.pid, &mut st, 0) };
            if r >= 0 {
                self.reaped = true;
                return Ok(st);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// SIGKILL and reap (error paths).
    pub fn kill(&mut self) {
        if !self.reaped {
            // SAFETY: signalling our own unreaped child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
            let _ = self.wait();
        }
    }
}

impl Drop for HeldChild {
    fn drop(&mut self) {
        if self.go.is_some() {
            // Never released (an error path): do not let it run unmeasured.
            self.kill();
        }
    }
}

/// Guest RAM for the runner: an anonymous private mapping registered as memory slot 0 of `vm`
/// at guest-physical address 0. The mapping lives as long as the returned value, which must
/// outlive the VM's use of it (the runner drops the VM first).
pub struct GuestMemory {
    base: *mut u8,
    len: usize,
}

impl GuestMemory {
    /// Map `len` bytes, copy `image` at guest-physical `load_at`, and register the slot.
    pub fn new(
        vm: &kvm_ioctls::VmFd,
        len: usize,
        image: &[u8],
        load_at: usize,
    ) -> io::Result<GuestMemory> {
        if load_at + image.len() > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "guest image too large",
            ));
        }
        // SAFETY: a fresh anonymous private mapping; checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mem = GuestMemory {
            base: base as *mut u8,
            len,
        };
        // SAFETY: [load_at, load_at + image.len()) lies inside the new mapping (checked above),
        // which nothing else references yet.
        unsafe {
            std::ptr::copy_nonoverlapping(image.as_ptr(), mem.base.add(load_at), image.len());
        }
        let region = kvm_bindings::kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: len as u64,
            userspace_addr: mem.base as u64,
        };
        // SAFETY: the region describes exactly the mapping owned by `mem`; the caller keeps
        // `mem` alive for as long as the VM runs.
        unsafe { vm.set_user_memory_region(region) }
            .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
        Ok(mem)
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping created in `new`, unmapped once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// A pipe (read end, write end), both close-on-exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created by pipe2 and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `KVM_GET_STATS_FD` (`_IO(KVMIO, 0xce)`) on a VM or vCPU fd: a file descriptor whose
/// contents are KVM's binary statistics (header, descriptors, data).
pub fn kvm_stats_fd(fd: RawFd) -> io::Result<OwnedFd> {
    const KVM_GET_STATS_FD: libc::c_ulong = 0xAE << 8 | 0xce;
    // SAFETY: a no-argument ioctl on a live KVM fd; the result is checked before use.
    let r = unsafe { libc::ioctl(fd, KVM_GET_STATS_FD as _) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned a new fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}
