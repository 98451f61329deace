//! The only module with `unsafe` in tma-bench: calling generated code, fork, signal capture,
//! alarm, and the child's pipe. Every block carries a `// SAFETY:` comment. The W^X code
//! buffer, CPUID, rdpmc, kill and waitpid are `tma_sys`'s; pinning, mlockall and the lock
//! file are rustix calls (safe) kept here beside the rest of the child's set-up.
// unsafe allowed: calling generated code, fork, signals, alarm, pipe read/write/poll.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use tma_sys::jit::ExecCode;

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Call the harness image at `offset` of `code` (`harness::build_image`'s ABI:
/// `iters` in rdi, the memory buffer in rsi, TSC ticks back in rax); `buffer` is the start of
/// the memory buffer, with the pool page below it.
///
/// Two callers, each with its reason why the body may run: the measuring child of
/// [`crate::engine`] (bodies refused by `variants::check_safe` when they branch or write
/// rsp/r14/r15, faults caught by [`install_fault_handlers`] in a forked child that then
/// exits), and [`crate::jitloop::JitLoop::run`] (whose `unsafe` constructor's caller vouched
/// for the body).
pub fn call_harness(code: &ExecCode, offset: usize, iters: u64, buffer: *mut u8) -> u64 {
    // SAFETY: the image was built by `harness::build_image`, which pushes and pops every
    // callee-saved register it uses, keeps rsp balanced, clears the vector state it touched
    // and returns in rax; the body's own conduct is vouched for by the callers as described
    // above, and `buffer` is a live mapping of at least the pool page below and the memory
    // buffer above it, owned by the caller for the duration of the call.
    unsafe { code.call(offset, iters, buffer) }
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
    let mut set = rustix::thread::CpuSet::new();
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(None, &set)?)
}

/// CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => vec![0],
    }
}

/// The CPU the caller runs on now.
pub fn current_cpu() -> Option<usize> {
    Some(rustix::thread::sched_getcpu())
}

/// mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT): pages are locked as they are touched, so
/// nothing the measurement uses is paged out, without faulting in the whole binary first
/// (about 4 ms per fork for a 48 MB executable). Every page a timed region touches (code and
/// scratch buffers, stack) is written or run before the first timed call. Kernels older than
/// 4.4 reject MCL_ONFAULT with EINVAL; then plain MCL_CURRENT | MCL_FUTURE is used. Failure
/// is not fatal (the caller notes it).
pub fn mlockall() -> io::Result<()> {
    use rustix::mm::MlockAllFlags as F;
    if rustix::mm::mlockall(F::CURRENT | F::FUTURE | F::ONFAULT).is_ok() {
        return Ok(());
    }
    Ok(rustix::mm::mlockall(F::CURRENT | F::FUTURE)?)
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
        #[cfg(target_arch = "x86_64")]
        let rip = (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
        #[cfg(target_arch = "aarch64")]
        let rip = (*uc).uc_mcontext.pc;
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let rip = {
            let _ = uc;
            0u64
        };
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

/// Read from `fd` into `out` until EOF or until `deadline` passes, or SIGINT/SIGTERM arrives
/// (`tma_sys::signal`). Returns false on timeout or interruption.
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
        if tma_sys::signal::interrupted().is_some() {
            return Ok(false);
        }
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
            match rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => return Ok(FileLock { _fd: fd }),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
