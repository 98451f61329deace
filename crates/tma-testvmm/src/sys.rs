//! The only `unsafe` of the test VMM: guest RAM (an anonymous mapping registered as a KVM
//! memory slot) and `KVM_GET_STATS_FD`. Each block has a `// SAFETY:` comment.
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
