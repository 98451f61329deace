//! The C interface (`include/tma_marker.h`).
// unsafe allowed: the C entry points take NUL-terminated strings from the caller.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CStr};

/// The name behind a C string, when it is one (not NULL, UTF-8).
///
/// # Safety
/// `name` is NULL or points to a NUL-terminated string that lives for the call.
unsafe fn name_of<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: not NULL, and the caller promises a NUL-terminated string alive for the call.
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

/// Enter region `name` on the calling thread.
///
/// # Safety
/// `name` is NULL (ignored) or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tma_region_begin(name: *const c_char) {
    if crate::off() {
        return;
    }
    // SAFETY: forwarded from the caller's promise.
    if let Some(n) = unsafe { name_of(name) } {
        crate::begin(n);
    }
}

/// Leave region `name` (the innermost open region of the calling thread).
///
/// # Safety
/// `name` is NULL (ignored) or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tma_region_end(name: *const c_char) {
    if crate::off() {
        return;
    }
    // SAFETY: forwarded from the caller's promise.
    if let Some(n) = unsafe { name_of(name) } {
        crate::end(n);
    }
}

/// Send the calling thread's totals now.
#[no_mangle]
pub extern "C" fn tma_region_flush() {
    crate::flush();
}

/// 1 when the program runs under `tma stat --regions`, else 0.
#[no_mangle]
pub extern "C" fn tma_regions_active() -> c_int {
    c_int::from(crate::active())
}

/// Stop recording regions in every thread until `tma_regions_resume` (regions begun meanwhile
/// are not recorded).
#[no_mangle]
pub extern "C" fn tma_regions_pause() {
    crate::pause();
}

/// Record regions again after `tma_regions_pause`.
#[no_mangle]
pub extern "C" fn tma_regions_resume() {
    crate::resume();
}

/// After `fork`, in the child: its threads start their regions afresh.
extern "C" fn forked() {
    crate::FORKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Have the child of a `fork` start afresh (its one thread is new to tma, and the counters the
/// parent's thread opened count the parent).
pub(crate) fn watch_forks() {
    // SAFETY: registers a handler that only increments an atomic counter (async-signal-safe,
    // as a fork handler must be).
    unsafe {
        libc::pthread_atfork(None, None, Some(forked));
    }
}
