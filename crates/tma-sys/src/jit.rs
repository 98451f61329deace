//! Executable memory for generated code, W^X: the bytes are copied into a private anonymous
//! read-write mapping, which is then made read+execute; no page is ever writable and
//! executable at once. The mapping itself is memmap2's (safe); the only `unsafe` here is the
//! call into the code, whose contract the caller states.
// unsafe allowed: calling into generated code.
#![allow(unsafe_code)]

use std::io;

/// The entry ABI of every image `tma` generates (the bench harness): `iters` in rdi, a data
/// pointer in rsi, the result in rax, SysV callee-saved registers preserved.
#[cfg(target_arch = "x86_64")]
pub type Entry = extern "sysv64" fn(iters: u64, data: *mut u8) -> u64;

/// Generated code, mapped read+execute (never writable again), unmapped on drop.
#[cfg(target_arch = "x86_64")]
pub struct ExecCode {
    map: memmap2::Mmap,
    len: usize,
}

/// Elsewhere than on x86-64 no image can be mapped (the generated code is x86-64): the
/// uninhabited field makes a value, and so a call, impossible.
#[cfg(not(target_arch = "x86_64"))]
pub struct ExecCode {
    never: std::convert::Infallible,
}

#[cfg(not(target_arch = "x86_64"))]
impl ExecCode {
    /// Refuses: the generated code is x86-64 only.
    pub fn new(_bytes: &[u8]) -> io::Result<ExecCode> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "generated code is x86-64 only; this build is for another architecture",
        ))
    }
    pub fn addr(&self) -> u64 {
        match self.never {}
    }
    pub fn len(&self) -> usize {
        match self.never {}
    }
    pub fn is_empty(&self) -> bool {
        match self.never {}
    }
    /// Never called: no `ExecCode` exists off x86-64.
    ///
    /// # Safety
    ///
    /// As on x86-64 (there is no value to call it on).
    pub unsafe fn call(&self, _offset: usize, _iters: u64, _data: *mut u8) -> u64 {
        match self.never {}
    }
}

#[cfg(target_arch = "x86_64")]
impl ExecCode {
    /// Map `bytes` executable: an anonymous read-write mapping (page-aligned, at least one
    /// page), the copy, then `mprotect` to read+execute.
    pub fn new(bytes: &[u8]) -> io::Result<ExecCode> {
        let mut m = memmap2::MmapMut::map_anon(bytes.len().max(1))?;
        m[..bytes.len()].copy_from_slice(bytes);
        Ok(ExecCode {
            map: m.make_exec()?,
            len: bytes.len(),
        })
    }

    /// The address of the first byte (for mapping a faulting instruction pointer back to an
    /// offset in the image).
    pub fn addr(&self) -> u64 {
        self.map.as_ptr() as u64
    }

    /// The number of code bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Call the code at `offset` as an [`Entry`] and return what it returns.
    ///
    /// # Safety
    ///
    /// The bytes at `offset` must be a function of the [`Entry`] ABI that returns normally
    /// (callee-saved registers and rsp restored, direction flag clear), and everything it
    /// does with `data` and other memory must be valid for the caller: it may only touch
    /// memory the caller owns and lends to it through `data`. A fault it raises arrives as a
    /// signal, which the caller must either catch (the bench's forked child) or rule out by
    /// what the code is.
    pub unsafe fn call(&self, offset: usize, iters: u64, data: *mut u8) -> u64 {
        assert!(offset < self.len, "entry offset {offset} outside the code");
        // SAFETY: `offset` is inside the mapping, which is executable and lives as long as
        // `self`; the caller guarantees the bytes there are an `Entry` function that only
        // touches memory it may (see `# Safety`).
        unsafe {
            let f: Entry = std::mem::transmute(self.map.as_ptr().add(offset));
            f(iters, data)
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn code_runs_from_read_execute_memory() {
        // lea rax, [rdi + 1]; ret
        let code = ExecCode::new(&[0x48, 0x8d, 0x47, 0x01, 0xc3]).unwrap();
        assert_eq!(code.len(), 5);
        assert_eq!(code.addr() % 4096, 0);
        // SAFETY: the bytes above are a complete Entry function that reads rdi and returns.
        assert_eq!(unsafe { code.call(0, 41, std::ptr::null_mut()) }, 42);
    }

    #[test]
    fn the_mapping_is_not_writable() {
        let code = ExecCode::new(&[0xc3]).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = format!("{:x}-", code.addr());
        let line = maps.lines().find(|l| l.starts_with(&start)).unwrap();
        assert!(line.contains(" r-xp "), "{line}");
    }
}
