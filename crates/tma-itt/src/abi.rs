//! The ITT ABI as the static part (`ittnotify_static.c`, ittapi 3.x) defines it: the global
//! structure handed to `__itt_api_init` and the objects the API passes around. Layouts are
//! taken from `ittnotify_config.h` (`__itt_global`, `__itt_api_info`, under `#pragma pack(8)`,
//! which changes nothing on x86-64 where no member needs more) and `ittnotify.h`
//! (`__itt_domain`, `__itt_string_handle`, `__itt_id`).
//!
//! Checked against the static parts that load it: the `ittapi-sys` 0.5 crate carries
//! ittnotify 3.26.3, the version the PyPI `onednn` wheel's `libdnnl.so.3` (oneDNN 3.13) and
//! its `libtbb.so.12` were built with (`ITT-API-Version 3.26.3` in their strings); Debian's
//! `libdnnl.so.2.6` has 3.22.5. Later versions only appended members after `api_list_ptr`
//! (`counter_list`, `ipt_collect_events`, `histogram_list`, `counter_metadata_list`), so the
//! prefix read here is the same in all of them; `__itt_api_init` checks the structure's
//! `ITT_MAGIC` before reading further.
// unsafe allowed: C entry points called by the ITT static part with its pointers.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void, CStr, CString};
use std::sync::Mutex;

/// `ITT_MAGIC` of `ittnotify_config.h`: the first bytes of every `__itt_global`.
pub const ITT_MAGIC: [u8; 8] = [0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30];

/// `__itt_api_info`: one entry of the static part's function table (ends at a NULL name).
#[repr(C)]
pub struct ApiInfo {
    pub name: *const c_char,
    pub func_ptr: *mut *mut c_void,
    pub init_func: *mut c_void,
    pub null_func: *mut c_void,
    /// `__itt_group_id` (an enum: int).
    pub group: c_int,
}

/// The leading members of `__itt_global`, up to the function table (the collector reads
/// nothing after it).
#[repr(C)]
pub struct Global {
    pub magic: [u8; 8],
    pub version_major: c_ulong,
    pub version_minor: c_ulong,
    pub version_build: c_ulong,
    pub api_initialized: c_long,
    pub mutex_initialized: c_long,
    pub atomic_counter: c_long,
    pub mutex: libc::pthread_mutex_t,
    pub lib: *mut c_void,
    pub error_handler: *mut c_void,
    pub dll_path_ptr: *mut *const c_char,
    pub api_list_ptr: *mut ApiInfo,
}

/// `__itt_domain`: `flags` non-zero means enabled (the API's macros test it before calling).
#[repr(C)]
pub struct Domain {
    pub flags: c_int,
    pub name_a: *const c_char,
    pub name_w: *mut c_void,
    pub extra1: c_int,
    pub extra2: *mut c_void,
    pub next: *mut Domain,
}

/// `__itt_string_handle`.
#[repr(C)]
pub struct StringHandle {
    pub str_a: *const c_char,
    pub str_w: *mut c_void,
    pub extra1: c_int,
    pub extra2: *mut c_void,
    pub next: *mut StringHandle,
}

/// `__itt_id`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Id {
    pub d1: u64,
    pub d2: u64,
    pub d3: u64,
}

/// Domains and string handles made here, by name: created once, never freed (the program
/// keeps the pointers for its whole life). Addresses are kept as integers.
static DOMAINS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
static STRINGS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

/// A C string's text (`None` for NULL or non-UTF-8).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string alive for the call.
unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: not NULL; NUL-terminated and alive by the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

fn intern(
    table: &Mutex<Vec<(String, usize)>>,
    name: &str,
    make: impl FnOnce(*const c_char) -> usize,
) -> usize {
    let mut t = table.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = t.iter().find(|(n, _)| n == name) {
        return *p;
    }
    let c = CString::new(name).unwrap_or_default().into_raw();
    let p = make(c);
    t.push((name.to_string(), p));
    p
}

/// `__itt_domain* __itt_domain_create(const char* name)`.
unsafe extern "C" fn domain_create(name: *const c_char) -> *mut Domain {
    // SAFETY: the API passes a NUL-terminated name (or NULL).
    let Some(n) = (unsafe { text(name) }) else {
        return std::ptr::null_mut();
    };
    intern(&DOMAINS, n, |c| {
        Box::into_raw(Box::new(Domain {
            flags: 1,
            name_a: c,
            name_w: std::ptr::null_mut(),
            extra1: 0,
            extra2: std::ptr::null_mut(),
            next: std::ptr::null_mut(),
        })) as usize
    }) as *mut Domain
}

/// `__itt_string_handle* __itt_string_handle_create(const char* name)`.
unsafe extern "C" fn string_handle_create(name: *const c_char) -> *mut StringHandle {
    // SAFETY: the API passes a NUL-terminated name (or NULL).
    let Some(n) = (unsafe { text(name) }) else {
        return std::ptr::null_mut();
    };
    intern(&STRINGS, n, |c| {
        Box::into_raw(Box::new(StringHandle {
            str_a: c,
            str_w: std::ptr::null_mut(),
            extra1: 0,
            extra2: std::ptr::null_mut(),
            next: std::ptr::null_mut(),
        })) as usize
    }) as *mut StringHandle
}

/// `void __itt_task_begin(const __itt_domain*, __itt_id, __itt_id, __itt_string_handle*)`.
unsafe extern "C" fn task_begin(
    _d: *const Domain,
    _id: Id,
    _parent: Id,
    name: *const StringHandle,
) {
    let n = if name.is_null() {
        None
    } else {
        // SAFETY: a handle from `__itt_string_handle_create` (ours or the static part's, same
        // layout), alive for the program's life; its string is NUL-terminated.
        unsafe { text((*name).str_a) }
    };
    crate::task_begin(n.unwrap_or("(unnamed task)"));
}

/// `void __itt_task_end(const __itt_domain*)`.
extern "C" fn task_end(_d: *const Domain) {
    crate::task_end();
}

/// The name of a domain (its ASCII copy).
///
/// # Safety
/// `d` is NULL or a domain of the API, alive for the program's life.
unsafe fn domain_name<'a>(d: *const Domain) -> &'a str {
    if d.is_null() {
        return "(no domain)";
    }
    // SAFETY: a live domain by the caller's promise; `name_a` is NULL or NUL-terminated.
    unsafe { text((*d).name_a) }.unwrap_or("(unnamed domain)")
}

/// `void __itt_frame_begin_v3(const __itt_domain*, __itt_id*)`.
unsafe extern "C" fn frame_begin_v3(d: *const Domain, _id: *mut Id) {
    // SAFETY: the API passes one of its domains.
    crate::region_begin(&crate::frame_name(unsafe { domain_name(d) }));
}

/// `void __itt_frame_end_v3(const __itt_domain*, __itt_id*)`.
unsafe extern "C" fn frame_end_v3(d: *const Domain, _id: *mut Id) {
    // SAFETY: the API passes one of its domains.
    crate::region_end(&crate::frame_name(unsafe { domain_name(d) }));
}

extern "C" fn pause() {
    crate::pause();
}

extern "C" fn resume() {
    crate::resume();
}

type NameFn = unsafe extern "C" fn(*const c_char);
type VoidFn = extern "C" fn();

/// The program's own marker library: `tma_region_begin`, `_end`, `tma_regions_pause`,
/// `_resume` found in the global scope (a `libtma_marker.so` the program links).
#[derive(Clone, Copy)]
pub struct ProgramMarker {
    begin: NameFn,
    end: NameFn,
    pause: VoidFn,
    resume: VoidFn,
}

impl ProgramMarker {
    pub fn begin(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: the library's `tma_region_begin` takes a NUL-terminated string.
            unsafe { (self.begin)(c.as_ptr()) }
        }
    }
    pub fn end(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: the library's `tma_region_end` takes a NUL-terminated string.
            unsafe { (self.end)(c.as_ptr()) }
        }
    }
    pub fn pause(&self) {
        (self.pause)()
    }
    pub fn resume(&self) {
        (self.resume)()
    }
}

static PROGRAM_MARKER: std::sync::OnceLock<Option<ProgramMarker>> = std::sync::OnceLock::new();

/// The program's marker library, looked up once.
pub fn program_marker() -> Option<ProgramMarker> {
    *PROGRAM_MARKER.get_or_init(|| {
        let find = |name: &std::ffi::CStr| {
            // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        let begin = find(c"tma_region_begin")?;
        // The collector's own copy, should it be in the global scope: no need to go round.
        if object_of(begin)
            == object_of(program_marker as fn() -> Option<ProgramMarker> as *mut c_void)
        {
            return None;
        }
        let (end, pause, resume) = (
            find(c"tma_region_end")?,
            find(c"tma_regions_pause")?,
            find(c"tma_regions_resume")?,
        );
        // SAFETY: the symbols of the marker library's C interface, with these signatures
        // (tma_marker.h).
        unsafe {
            Some(ProgramMarker {
                begin: std::mem::transmute::<*mut c_void, NameFn>(begin),
                end: std::mem::transmute::<*mut c_void, NameFn>(end),
                pause: std::mem::transmute::<*mut c_void, VoidFn>(pause),
                resume: std::mem::transmute::<*mut c_void, VoidFn>(resume),
            })
        }
    })
}

/// The base address of the loaded object (program or library) that holds `addr`.
fn object_of(addr: *mut c_void) -> usize {
    // SAFETY: an all-zero Dl_info is a valid value (pointers); dladdr only fills it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr reads the loader's tables for `addr` and writes `info`.
    if unsafe { libc::dladdr(addr.cast_const(), &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

/// This collector's function for a table entry name.
fn function_for(name: &str) -> Option<*mut c_void> {
    type DomainCreate = unsafe extern "C" fn(*const c_char) -> *mut Domain;
    type StringCreate = unsafe extern "C" fn(*const c_char) -> *mut StringHandle;
    type TaskBegin = unsafe extern "C" fn(*const Domain, Id, Id, *const StringHandle);
    type TaskEnd = extern "C" fn(*const Domain);
    type Frame = unsafe extern "C" fn(*const Domain, *mut Id);
    type Control = extern "C" fn();
    Some(match name {
        "__itt_domain_create" => domain_create as DomainCreate as *mut c_void,
        "__itt_string_handle_create" => string_handle_create as StringCreate as *mut c_void,
        "__itt_task_begin" => task_begin as TaskBegin as *mut c_void,
        "__itt_task_end" => task_end as TaskEnd as *mut c_void,
        "__itt_frame_begin_v3" => frame_begin_v3 as Frame as *mut c_void,
        "__itt_frame_end_v3" => frame_end_v3 as Frame as *mut c_void,
        "__itt_pause" => pause as Control as *mut c_void,
        "__itt_resume" => resume as Control as *mut c_void,
        _ => return None,
    })
}

/// `void __itt_api_init(__itt_global*, __itt_group_id)`: called once by the static part
/// that loaded the collector, under its lock. Points every entry this collector implements
/// at it and leaves the others to the static part's null functions.
///
/// # Safety
/// `global` is the static part's `__itt_global`, whose `api_list_ptr` ends at a NULL name.
#[no_mangle]
pub unsafe extern "C" fn __itt_api_init(global: *mut Global, _groups: c_int) {
    if global.is_null() {
        return;
    }
    // SAFETY: the static part passes its own global structure, valid for the call; its
    // first 8 bytes are the magic in every version of the layout.
    let magic = unsafe { (*global).magic };
    if magic != ITT_MAGIC {
        // Not the layout read here: leave the table to the static part's null functions.
        if tma_marker::active() {
            eprintln!(
                "tma-itt: the ITT static part that loaded this collector has an unknown global \
                 structure (magic {magic:02x?}, expected {ITT_MAGIC:02x?}): its tasks are not \
                 recorded"
            );
        }
        return;
    }
    // SAFETY: the static part passes its own global structure, valid for the call.
    let mut entry = unsafe { (*global).api_list_ptr };
    if entry.is_null() {
        return;
    }
    loop {
        // SAFETY: `entry` walks the table, which ends at an entry whose name is NULL.
        let info = unsafe { &*entry };
        if info.name.is_null() {
            break;
        }
        // SAFETY: table names are NUL-terminated string literals.
        let name = unsafe { text(info.name) }.unwrap_or("");
        if !info.func_ptr.is_null() {
            let f = function_for(name).unwrap_or(info.null_func);
            // SAFETY: `func_ptr` points at the static part's pointer for this entry, which
            // it reads only after init returns (it holds its lock meanwhile).
            unsafe { *info.func_ptr = f };
        }
        // SAFETY: still inside the table (this entry's name was not NULL).
        entry = unsafe { entry.add(1) };
    }
}

/// `void __itt_api_fini(__itt_global*)`: send this thread's totals.
///
/// # Safety
/// Called by the static part with its global structure (unused).
#[no_mangle]
pub unsafe extern "C" fn __itt_api_fini(_global: *mut Global) {
    tma_marker::flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The collector fills a table laid out as the static part lays it out: its own entries
    /// get its functions, the others their null function, and the end marker stops it.
    #[test]
    fn api_init_fills_the_table_by_name() {
        let names: Vec<CString> = ["__itt_task_begin", "__itt_counter_create", "__itt_pause"]
            .iter()
            .map(|n| CString::new(*n).unwrap())
            .collect();
        let mut slots: Vec<*mut c_void> = vec![std::ptr::null_mut(); 3];
        let null_marker = 0x1234usize as *mut c_void;
        let base = slots.as_mut_ptr();
        let mut table: Vec<ApiInfo> = names
            .iter()
            .enumerate()
            .map(|(i, n)| ApiInfo {
                name: n.as_ptr(),
                // SAFETY: i < 3 = slots.len().
                func_ptr: unsafe { base.add(i) },
                init_func: std::ptr::null_mut(),
                null_func: null_marker,
                group: 0,
            })
            .collect();
        table.push(ApiInfo {
            name: std::ptr::null(),
            func_ptr: std::ptr::null_mut(),
            init_func: std::ptr::null_mut(),
            null_func: std::ptr::null_mut(),
            group: 0,
        });
        // SAFETY: an all-zero __itt_global prefix is a valid value (integers and pointers).
        let mut g: Global = unsafe { std::mem::zeroed() };
        g.api_list_ptr = table.as_mut_ptr();
        // A structure without the magic is not read.
        // SAFETY: `g` and its table are valid and end at a NULL name.
        unsafe { __itt_api_init(&mut g, 0) };
        assert!(slots.iter().all(|s| s.is_null()));
        g.magic = ITT_MAGIC;
        // SAFETY: `g` and its table are valid and end at a NULL name.
        unsafe { __itt_api_init(&mut g, 0) };
        assert_eq!(slots[0], function_for("__itt_task_begin").unwrap());
        assert_eq!(slots[1], null_marker);
        assert_eq!(slots[2], function_for("__itt_pause").unwrap());
        // The layout: the table pointer sits after three counters and the pthread mutex.
        assert_eq!(
            std::mem::offset_of!(Global, api_list_ptr),
            8 + 3 * 8 + 3 * 8 + std::mem::size_of::<libc::pthread_mutex_t>() + 3 * 8
        );
        assert_eq!(std::mem::size_of::<ApiInfo>(), 40);
        assert_eq!(std::mem::size_of::<Id>(), 24);
    }

    #[test]
    fn domains_and_strings_are_made_once_per_name() {
        let a = CString::new("dnnl").unwrap();
        // SAFETY: NUL-terminated names.
        let (d1, d2) = unsafe { (domain_create(a.as_ptr()), domain_create(a.as_ptr())) };
        assert_eq!(d1, d2);
        // SAFETY: a domain just made.
        unsafe {
            assert_eq!((*d1).flags, 1);
            assert_eq!(domain_name(d1), "dnnl");
        }
        // SAFETY: NUL-terminated name; NULL is refused.
        let s = unsafe { string_handle_create(a.as_ptr()) };
        // SAFETY: a handle just made.
        assert_eq!(unsafe { text((*s).str_a) }, Some("dnnl"));
        // SAFETY: NULL is allowed.
        assert!(unsafe { domain_create(std::ptr::null()) }.is_null());
    }
}
