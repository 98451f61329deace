//! The only `unsafe` of the test VMM: guest RAM (anonymous mappings registered as KVM memory
//! slots, the extra one advised for huge pages or against them) and `KVM_GET_STATS_FD`. Each block has a `// SAFETY:` comment.
// unsafe allowed: mmap of guest RAM, KVM memory slots and KVM_GET_STATS_FD.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

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

    /// Extra guest RAM: `len` bytes (a multiple of 2 MiB) at a 2 MiB-aligned address, advised
    /// with `advice` (`libc::MADV_HUGEPAGE` or `libc::MADV_NOHUGEPAGE`), every page touched,
    /// and registered as memory slot `slot` at guest-physical `gpa`.
    pub fn advised(
        vm: &kvm_ioctls::VmFd,
        slot: u32,
        gpa: u64,
        len: usize,
        advice: libc::c_int,
    ) -> io::Result<GuestMemory> {
        const HUGE: usize = 2 << 20;
        if len == 0 || !len.is_multiple_of(HUGE) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "extra guest memory must be a multiple of 2 MiB",
            ));
        }
        let map_len = len + HUGE;
        // SAFETY: a fresh anonymous private mapping; checked against MAP_FAILED.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mem = GuestMemory {
            base: raw as *mut u8,
            len: map_len,
        };
        let skip = (HUGE - (raw as usize) % HUGE) % HUGE;
        // SAFETY: skip < HUGE, so [skip, skip + len) lies inside the mapping of len + HUGE bytes.
        let guest = unsafe { mem.base.add(skip) };
        // SAFETY: madvise on a range inside the mapping owned by `mem`.
        if unsafe { libc::madvise(guest as *mut libc::c_void, len, advice) } != 0 {
            return Err(io::Error::last_os_error());
        }
        for off in (0..len).step_by(4096) {
            // SAFETY: off < len, inside the mapping; nothing else references it yet.
            unsafe { guest.add(off).write_volatile(1) };
        }
        let region = kvm_bindings::kvm_userspace_memory_region {
            slot,
            flags: 0,
            guest_phys_addr: gpa,
            memory_size: len as u64,
            userspace_addr: guest as u64,
        };
        // SAFETY: the region lies inside the mapping owned by `mem`; the caller keeps `mem`
        // alive for as long as the VM runs.
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
