//! The only module with `unsafe` in tma-bench: W^X code buffer, scratch memory, fork, CPU
//! pinning, mlockall, signal capture, alarm, calling generated code, and the TSC.
//! Every block carries a `// SAFETY:` comment.
// unsafe allowed: mmap/mprotect, fork, pinning, mlockall, signals, calling generated code.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Anonymous memory mapping, unmapped on drop.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// Map `len` bytes read+write, zero-filled.
    pub fn rw(len: usize) -> io::Result<Mapping> {
        let len = len.max(1).div_ceil(4096) * 4096;
        // SAFETY: anonymous private mapping with no address hint; the kernel picks the address
        // and we check for MAP_FAILED before using it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_err());
        }
        Ok(Mapping {
            ptr: p as *mut u8,
            len,
        })
    }

    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Copy `data` to `offset`. Only valid while the mapping is writable.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> io::Result<()> {
        if offset.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "write past mapping",
            ));
        }
        // SAFETY: bounds checked above; the mapping is ours and RW until `seal_exec` (the
        // caller only writes before sealing; after sealing the write would fault, never UB in
        // Rust terms since the memory is not aliased by any Rust reference).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(offset), data.len()) };
        Ok(())
    }

    /// W^X: turn the mapping read+execute (no longer writable).
    pub fn seal_exec(&mut self) -> io::Result<()> {
        // SAFETY: ptr/len describe exactly the mapping we created.
        let r = unsafe {
            libc::mprotect(
                self.ptr as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_EXEC,
            )
        };
        if r != 0 {
            return Err(last_err());
        }
        Ok(())
    }

    /// Call generated code at `offset` with the harness ABI
    /// `extern "sysv64" fn(iters: u64, scratch: *mut u8) -> u64`.
    ///
    /// The caller guarantees the mapping is sealed executable and that `offset` is the entry
    /// of a harness produced by `harness::build_image` (which saves and restores all
    /// callee-saved registers and the stack pointer).
    pub fn call(&self, offset: usize, iters: u64, scratch: *mut u8) -> u64 {
        assert!(offset < self.len);
        // SAFETY: the harness follows the SysV ABI (callee-saved registers pushed/popped,
        // rsp balanced, returns in rax); its body was validated not to branch, not to write
        // rsp/r14/r15. Faults inside it are delivered as signals to the forked child, whose
        // handler reports them and exits; the parent process never calls this.
        unsafe {
            let f: extern "sysv64" fn(u64, *mut u8) -> u64 =
                std::mem::transmute(self.ptr.add(offset));
            f(iters, scratch)
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mmap returned.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Result of fork from the caller's point of view.
pub enum Forked {
    Child,
    Parent(libc::pid_t),
}

/// fork(2). In the child, only async-signal-safe work plus our own single-threaded code runs
/// (glibc's malloc is fork-safe, so allocation in the child is fine).
pub fn fork() -> io::Result<Forked> {
    // SAFETY: fork has no memory-safety preconditions; the child only runs our measurement
    // code and leaves with `exit_now`, never returning into the caller's stack frames.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(last_err()),
        0 => Ok(Forked::Child),
        p => Ok(Forked::Parent(p)),
    }
}

/// _exit(2): leave the child without running atexit handlers or destructors of the parent's state.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is always safe to call.
    unsafe { libc::_exit(code) }
}

/// Pin the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET operate on our local copy.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(last_err());
        }
    }
    Ok(())
}

/// CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as above, plain data and a valid pointer/size pair.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The CPU the caller runs on now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT): pages are locked as they are touched, so
/// nothing the measurement uses is paged out, without faulting in the whole binary first
/// (about 4 ms per fork for a 48 MB executable). Every page a timed region touches (code and
/// scratch buffers, stack) is written or run before the first timed call. Kernels older than
/// 4.4 reject MCL_ONFAULT with EINVAL; then plain MCL_CURRENT | MCL_FUTURE is used. Failure
/// is not fatal (the caller notes it).
pub fn mlockall() -> io::Result<()> {
    // SAFETY: no memory-safety preconditions.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) } == 0 {
        return Ok(());
    }
    // SAFETY: as above.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(last_err());
    }
    Ok(())
}

/// alarm(2) in the child: SIGALRM is caught by the fault handler and reported as a timeout.
pub fn alarm(secs: u32) {
    // SAFETY: no preconditions.
    unsafe { libc::alarm(secs) };
}

/// Where the fault handler writes its report, and what it needs to map the faulting address.
static REPORT_FD: AtomicI32 = AtomicI32::new(-1);
static CODE_BASE: AtomicU64 = AtomicU64::new(0);
static CURRENT_JOB: AtomicU64 = AtomicU64::new(u64::MAX);

/// Frame tag of a fault report on the child's pipe.
pub const TAG_FAULT: u64 = 0xFA17;

/// Tell the fault handler which code buffer and job are running.
pub fn set_fault_context(fd: RawFd, code_base: u64) {
    REPORT_FD.store(fd, Ordering::SeqCst);
    set_fault_context_base(code_base);
}

/// Where faults are mapped from after switching to another copy of the code buffer.
pub fn set_fault_context_base(code_base: u64) {
    CODE_BASE.store(code_base, Ordering::SeqCst);
}

pub fn set_current_job(job: u64) {
    CURRENT_JOB.store(job, Ordering::Relaxed);
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes valid siginfo/ucontext pointers to an SA_SIGINFO handler; we
    // only read plain fields and call async-signal-safe write(2) and _exit(2).
    unsafe {
        let code = (*info).si_code as i64 as u64;
        let addr = if sig == libc::SIGALRM {
            0
        } else {
            (*info).si_addr() as u64
        };
        let uc = ctx as *const libc::ucontext_t;
        let rip = (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
        let base = CODE_BASE.load(Ordering::SeqCst);
        let frame: [u64; 6] = [
            TAG_FAULT,
            sig as u64,
            code,
            rip.wrapping_sub(base),
            addr,
            CURRENT_JOB.load(Ordering::Relaxed),
        ];
        let fd = REPORT_FD.load(Ordering::SeqCst);
        if fd >= 0 {
            libc::write(fd, frame.as_ptr() as *const libc::c_void, 48);
        }
        libc::_exit(3);
    }
}

/// Install the fault handler for SIGILL, SIGFPE, SIGSEGV, SIGBUS, SIGTRAP and SIGALRM, on an
/// alternate stack (so a body that corrupted nothing but faults still reports cleanly).
pub fn install_fault_handlers() -> io::Result<()> {
    // SAFETY: sigaction with a zeroed struct and a valid extern "C" handler of the SA_SIGINFO
    // signature; the alternate stack is leaked on purpose (the child exits with _exit).
    unsafe {
        let stack_size = 64 * 1024;
        let stack = libc::mmap(
            std::ptr::null_mut(),
            stack_size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if stack != libc::MAP_FAILED {
            let ss = libc::stack_t {
                ss_sp: stack,
                ss_flags: 0,
                ss_size: stack_size,
            };
            libc::sigaltstack(&ss, std::ptr::null_mut());
        }
        for sig in [
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGTRAP,
            libc::SIGALRM,
        ] {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(last_err());
            }
        }
    }
    Ok(())
}

/// write(2) all of `buf` to `fd`.
pub fn write_all(fd: &OwnedFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: buf is a valid slice; fd is open.
        let n = unsafe {
            libc::write(
                fd.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
            )
        };
        if n < 0 {
            let e = last_err();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// Read from `fd` into `out` until EOF or until `deadline` passes. Returns false on timeout.
pub fn read_until_eof(
    fd: &OwnedFd,
    out: &mut Vec<u8>,
    deadline: std::time::Instant,
) -> io::Result<bool> {
    let mut buf = [0u8; 8192];
    loop {
        let now = std::time::Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        let ms = (deadline - now).as_millis().min(i32::MAX as u128) as i32;
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms.max(1)) };
        if r < 0 {
            let e = last_err();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            continue;
        }
        // SAFETY: buf is a valid writable buffer of the given length.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if n < 0 {
            let e = last_err();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(true);
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
}

/// SIGKILL a child we forked.
pub fn kill_child(pid: libc::pid_t) {
    // SAFETY: pid is our own child (not yet reaped), so it cannot have been reused.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// How a child ended.
#[derive(Debug, Clone, Copy)]
pub enum ChildExit {
    Code(i32),
    Signal(i32),
}

/// waitpid(2) blocking for our child.
pub fn wait_child(pid: libc::pid_t) -> io::Result<ChildExit> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r < 0 {
            let e = last_err();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        break;
    }
    if libc::WIFEXITED(status) {
        Ok(ChildExit::Code(libc::WEXITSTATUS(status)))
    } else {
        Ok(ChildExit::Signal(libc::WTERMSIG(status)))
    }
}

/// Signal name for messages.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGALRM => "SIGALRM",
        libc::SIGKILL => "SIGKILL",
        _ => "signal",
    }
}

/// An exclusive advisory lock (flock) held until drop: concurrent `tma bench` runs on one
/// machine take turns instead of timing each other.
pub struct FileLock {
    _fd: OwnedFd,
}

impl FileLock {
    pub fn acquire(path: &std::path::Path) -> io::Result<FileLock> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o666)
            .open(path)?;
        let fd: OwnedFd = f.into();
        loop {
            // SAFETY: fd is a valid open file descriptor we own.
            let r = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(FileLock { _fd: fd });
            }
            let e = last_err();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// The CPU's vendor string (`AuthenticAMD`, `GenuineIntel`) and display family and model
/// (CPUID leaf 0 and leaf 1, with the extended family/model fields folded in).
#[allow(unused_unsafe)] // `__cpuid` is a safe fn on newer toolchains, unsafe on older ones.
pub fn cpu_signature() -> (String, u32, u32) {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID is available on every x86-64 CPU; leaf 0 is always valid.
    let l0 = unsafe { __cpuid(0) };
    let mut v = Vec::with_capacity(12);
    for r in [l0.ebx, l0.edx, l0.ecx] {
        v.extend_from_slice(&r.to_le_bytes());
    }
    // SAFETY: leaf 1 exists on every x86-64 CPU (the maximum basic leaf is at least 1).
    let l1 = unsafe { __cpuid(1) };
    let base_family = (l1.eax >> 8) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((l1.eax >> 20) & 0xff)
    } else {
        base_family
    };
    let mut model = (l1.eax >> 4) & 0xf;
    if base_family == 0x6 || base_family == 0xf {
        model |= ((l1.eax >> 16) & 0xf) << 4;
    }
    (String::from_utf8_lossy(&v).into_owned(), family, model)
}

/// `rdpmc` of general-purpose counter `idx` (after an lfence, so earlier instructions have
/// completed). Raises #GP (SIGSEGV) unless user-space rdpmc is enabled (CR4.PCE); callers check
/// `/sys/bus/event_source/devices/cpu/rdpmc` = 2 first ([`tma_perf::msr::MsrSetup::check`]).
pub fn rdpmc(idx: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: lfence and rdpmc touch no memory and only the named registers (ecx in, edx:eax
    // out); a fault is a signal handled by the measuring child, not undefined behaviour.
    unsafe {
        std::arch::asm!(
            "lfence",
            "rdpmc",
            in("ecx") idx,
            out("eax") lo,
            out("edx") hi,
            options(nostack, nomem, preserves_flags)
        );
    }
    (u64::from(hi) << 32) | u64::from(lo)
}
