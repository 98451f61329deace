//! The `unsafe` of `tma doctor --verify`: the calling thread's CPU time and resource usage,
//! and calling the JIT-built loops. Everything else in [`crate::verify`] is safe code.
// unsafe allowed: clock_gettime/getrusage on this thread, and calling generated code.
#![allow(unsafe_code)]

use std::io;

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
pub fn thread_cpu_ns() -> io::Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call; the clock id is a
    // constant the kernel always accepts.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// What `getrusage(RUSAGE_THREAD)` says about the calling thread.
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

/// An executable copy of a harness image from `tma_bench::harness::build_image`: written
/// while read-write, then made read+execute (never both).
pub struct JitCode {
    map: memmap2::Mmap,
}

impl JitCode {
    pub fn new(bytes: &[u8]) -> io::Result<JitCode> {
        let mut m = memmap2::MmapMut::map_anon(bytes.len().max(1))?;
        m[..bytes.len()].copy_from_slice(bytes);
        Ok(JitCode {
            map: m.make_exec()?,
        })
    }

    /// Run the harness for `iters` iterations (it returns the TSC cycles it took). `scratch`
    /// is the pool page followed by the memory buffer; r14 gets the buffer's address.
    pub fn call(&self, iters: u64, scratch: &mut [u8]) -> u64 {
        let page = tma_bench::harness::POOL_PAGE;
        assert!(scratch.len() >= page + tma_bench::harness::DEFAULT_MEM);
        assert!(iters > 0, "the harness loop runs at least once");
        let buffer = scratch[page..].as_mut_ptr();
        // SAFETY: the mapping holds a complete `build_image` harness starting at offset 0:
        // SysV ABI, callee-saved registers pushed and popped, rsp balanced, result in rax.
        // Its bodies are ours (`crate::verify::LOOPS` and `KERNELS`): register arithmetic,
        // jumps to the next instruction, and (the chase kernel) loads that follow the ring
        // the caller wrote into this buffer, which cannot fault. The mapping is executable
        // and lives as long as `self`; r14 is `buffer`, with the pool page (read by the
        // harness; the chase cursor read and written) below it and at least DEFAULT_MEM
        // bytes (the whole ring, for the chase) above it.
        unsafe {
            let f: extern "sysv64" fn(u64, *mut u8) -> u64 = std::mem::transmute(self.map.as_ptr());
            f(iters, buffer)
        }
    }
}
