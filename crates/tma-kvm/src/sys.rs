//! The only `unsafe` of `tma-kvm`: `mount`/`umount` of tracefs, each block with a `// SAFETY:`
//! comment. The tracepoints themselves are opened and read through `tma_perf::tracepoint`, and
//! a launched command is a `tma_perf::process::HeldChild`.
// unsafe allowed: mount(2)/umount2(2) of tracefs.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
