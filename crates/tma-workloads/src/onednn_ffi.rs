//! oneDNN's C API, loaded at run time (`dlopen` through `libloading`): tma links no oneDNN,
//! it finds `libdnnl.so.3` or `libdnnl.so.2` when `tma workload onednn` runs.
//!
//! Two generations of the API are spoken, told apart by `dnnl_version()` (both have it):
//!
//! * **2.x** (Debian's `libdnnl2`, oneDNN 2.6): operation descriptors. A memory descriptor is a
//!   struct the caller owns (`dnnl_memory_desc_init_by_tag`), the matmul is described by
//!   `dnnl_matmul_desc_init` into another struct, and `dnnl_primitive_desc_create` takes that
//!   op descriptor. Both structs are only ever passed by pointer, so they are held here in
//!   buffers larger than any 2.x release makes them (2.6: 696 and 2800 bytes, measured with
//!   `sizeof` against `/usr/include/oneapi/dnnl/dnnl_types.h`).
//! * **3.x** (the PyPI `onednn` wheel, oneDNN 3.13): memory descriptors are opaque handles
//!   (`dnnl_memory_desc_create_with_tag`, `dnnl_memory_desc_destroy`) and each primitive has
//!   its own descriptor constructor (`dnnl_matmul_primitive_desc_create`).
//!
//! Shared by both: engines, streams, `dnnl_memory_create` with a user pointer (the memory
//! descriptor by pointer in 2.x, by handle in 3.x: a pointer either way),
//! `dnnl_primitive_create`, `dnnl_primitive_execute`, `dnnl_stream_wait`, the implementation
//! name query and the destructors. Enum values used, the same in 2.x and 3.x headers:
//! `dnnl_f32` = 3, `dnnl_ab` = 3, `dnnl_cpu` = 1, `dnnl_stream_default_flags` = 1,
//! `DNNL_ARG_SRC` = 1, `DNNL_ARG_WEIGHTS` = 33, `DNNL_ARG_DST` = 17,
//! `dnnl_query_impl_info_str` = 8, `dnnl_success` = 0.
// unsafe allowed: calls into a C library loaded at run time, through function pointers read
// from its symbol table, with the signatures of its headers.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::Path;

type Status = c_int;
type Handle = *mut c_void;

const F32: c_int = 3;
const TAG_AB: c_int = 3;
const ENGINE_CPU: c_int = 1;
const STREAM_DEFAULT_FLAGS: c_uint = 1;
const ARG_SRC: c_int = 1;
const ARG_WEIGHTS: c_int = 33;
const ARG_DST: c_int = 17;
const QUERY_IMPL_INFO_STR: c_int = 8;
const SUCCESS: Status = 0;

/// `dnnl_exec_arg_t`.
#[repr(C)]
struct ExecArg {
    arg: c_int,
    memory: Handle,
}

/// `dnnl_version_t`.
#[repr(C)]
struct Version {
    major: c_int,
    minor: c_int,
    patch: c_int,
    hash: *const c_char,
    cpu_runtime: c_uint,
    gpu_runtime: c_uint,
}

/// A 2.x `dnnl_memory_desc_t` or `dnnl_matmul_desc_t`, which the library fills and reads
/// through pointers: room for more than any 2.x release uses.
#[repr(C, align(16))]
struct Desc2([u8; 8192]);

impl Desc2 {
    fn new() -> Box<Desc2> {
        Box::new(Desc2([0; 8192]))
    }
    fn ptr(&mut self) -> *mut c_void {
        (self as *mut Desc2).cast()
    }
}

/// A oneDNN call that did not return `dnnl_success`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub call: &'static str,
    pub status: i32,
}

impl CallError {
    /// The status's name in `dnnl_types.h`.
    pub fn status_name(&self) -> &'static str {
        match self.status {
            1 => "dnnl_out_of_memory",
            2 => "dnnl_invalid_arguments",
            3 => "dnnl_unimplemented",
            4 => "dnnl_last_impl_reached",
            5 => "dnnl_runtime_error",
            6 => "dnnl_not_required",
            _ => "an unknown status",
        }
    }
}

fn ok(call: &'static str, status: Status) -> Result<(), CallError> {
    if status == SUCCESS {
        Ok(())
    } else {
        Err(CallError { call, status })
    }
}

/// Why the library could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` failed (the loader's message).
    Open(String),
    /// A function of the API is missing.
    Symbol(&'static str),
    /// `dnnl_version()` names a major version this code does not speak.
    Version(i32),
}

type VersionFn = unsafe extern "C" fn() -> *const Version;
type EngineCreate = unsafe extern "C" fn(*mut Handle, c_int, usize) -> Status;
type StreamCreate = unsafe extern "C" fn(*mut Handle, Handle, c_uint) -> Status;
type OneHandle = unsafe extern "C" fn(Handle) -> Status;
type MemoryCreate = unsafe extern "C" fn(*mut Handle, *const c_void, Handle, *mut c_void) -> Status;
type PrimitiveCreate = unsafe extern "C" fn(*mut Handle, Handle) -> Status;
type Execute = unsafe extern "C" fn(Handle, Handle, c_int, *const ExecArg) -> Status;
type Query = unsafe extern "C" fn(Handle, c_int, c_int, *mut c_void) -> Status;
// 2.x
type MdInitByTag = unsafe extern "C" fn(*mut c_void, c_int, *const i64, c_int, c_int) -> Status;
type MatmulDescInit = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    *const c_void,
    *const c_void,
    *const c_void,
) -> Status;
type PdCreate2 = unsafe extern "C" fn(*mut Handle, *const c_void, Handle, Handle, Handle) -> Status;
// 3.x
type MdCreateWithTag = unsafe extern "C" fn(*mut Handle, c_int, *const i64, c_int, c_int) -> Status;
type MatmulPdCreate3 =
    unsafe extern "C" fn(*mut Handle, Handle, Handle, Handle, Handle, Handle, Handle) -> Status;

/// The functions of one API generation.
#[derive(Clone, Copy)]
enum Gen {
    V2 {
        md_init_by_tag: MdInitByTag,
        matmul_desc_init: MatmulDescInit,
        pd_create: PdCreate2,
    },
    V3 {
        md_create_with_tag: MdCreateWithTag,
        md_destroy: OneHandle,
        matmul_pd_create: MatmulPdCreate3,
    },
}

/// A loaded oneDNN. The library is never unloaded (its thread pools outlive any handle).
pub struct Dnnl {
    pub major: i32,
    pub minor: i32,
    pub patch: i32,
    pub hash: String,
    pub cpu_runtime: u32,
    engine_create: EngineCreate,
    engine_destroy: OneHandle,
    stream_create: StreamCreate,
    stream_wait: OneHandle,
    stream_destroy: OneHandle,
    memory_create: MemoryCreate,
    memory_destroy: OneHandle,
    primitive_create: PrimitiveCreate,
    primitive_destroy: OneHandle,
    pd_destroy: OneHandle,
    pd_query: Query,
    execute: Execute,
    gen: Gen,
}

/// Read a function pointer of type `T` from `lib`.
///
/// # Safety
/// `T` is the function's type as the library's headers declare it.
unsafe fn sym<T: Copy>(
    lib: &'static libloading::Library,
    name: &'static str,
) -> Result<T, LoadError> {
    let cname = format!("{name}\0");
    // SAFETY: the caller names the symbol's true type; the library is never unloaded
    // ('static), so the pointer copied out stays valid.
    unsafe { lib.get::<T>(cname.as_bytes()) }
        .map(|s| *s)
        .map_err(|_| LoadError::Symbol(name))
}

impl Dnnl {
    /// `dlopen` `path` (a file name alone is searched the loader's way) and read the API.
    pub fn open(path: &Path) -> Result<Dnnl, LoadError> {
        // SAFETY: loading oneDNN runs its initialisers, which only set up its own state.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| LoadError::Open(e.to_string()))?;
        let lib: &'static libloading::Library = Box::leak(Box::new(lib));
        // SAFETY: each type below is the function's signature in oneDNN's C headers
        // (dnnl.h, dnnl_types.h of 2.6 and 3.x; see the module documentation).
        unsafe {
            let version: VersionFn = sym(lib, "dnnl_version")?;
            let v = &*version();
            let major = v.major;
            let gen = match major {
                2 => Gen::V2 {
                    md_init_by_tag: sym(lib, "dnnl_memory_desc_init_by_tag")?,
                    matmul_desc_init: sym(lib, "dnnl_matmul_desc_init")?,
                    pd_create: sym(lib, "dnnl_primitive_desc_create")?,
                },
                3 => Gen::V3 {
                    md_create_with_tag: sym(lib, "dnnl_memory_desc_create_with_tag")?,
                    md_destroy: sym(lib, "dnnl_memory_desc_destroy")?,
                    matmul_pd_create: sym(lib, "dnnl_matmul_primitive_desc_create")?,
                },
                other => return Err(LoadError::Version(other)),
            };
            let hash = if v.hash.is_null() {
                String::new()
            } else {
                CStr::from_ptr(v.hash).to_string_lossy().into_owned()
            };
            Ok(Dnnl {
                major,
                minor: v.minor,
                patch: v.patch,
                hash,
                cpu_runtime: v.cpu_runtime,
                engine_create: sym(lib, "dnnl_engine_create")?,
                engine_destroy: sym(lib, "dnnl_engine_destroy")?,
                stream_create: sym(lib, "dnnl_stream_create")?,
                stream_wait: sym(lib, "dnnl_stream_wait")?,
                stream_destroy: sym(lib, "dnnl_stream_destroy")?,
                memory_create: sym(lib, "dnnl_memory_create")?,
                memory_destroy: sym(lib, "dnnl_memory_destroy")?,
                primitive_create: sym(lib, "dnnl_primitive_create")?,
                primitive_destroy: sym(lib, "dnnl_primitive_destroy")?,
                pd_destroy: sym(lib, "dnnl_primitive_desc_destroy")?,
                pd_query: sym(lib, "dnnl_primitive_desc_query")?,
                execute: sym(lib, "dnnl_primitive_execute")?,
                gen,
            })
        }
    }

    /// The C API generation: `2.x (op descriptors)` or `3.x`.
    pub fn api(&self) -> &'static str {
        match self.gen {
            Gen::V2 { .. } => "2.x (op descriptors)",
            Gen::V3 { .. } => "3.x (primitive descriptor constructors)",
        }
    }

    /// A CPU engine and a stream on it.
    pub fn engine(&self) -> Result<Engine<'_>, CallError> {
        let mut engine: Handle = std::ptr::null_mut();
        // SAFETY: an out-pointer and the engine kind and index the API takes.
        ok("dnnl_engine_create", unsafe {
            (self.engine_create)(&mut engine, ENGINE_CPU, 0)
        })?;
        let mut stream: Handle = std::ptr::null_mut();
        // SAFETY: the engine just made; an out-pointer.
        let made = ok("dnnl_stream_create", unsafe {
            (self.stream_create)(&mut stream, engine, STREAM_DEFAULT_FLAGS)
        });
        if let Err(e) = made {
            // SAFETY: the engine just made, used by nothing else.
            unsafe { (self.engine_destroy)(engine) };
            return Err(e);
        }
        Ok(Engine {
            dnnl: self,
            engine,
            stream,
        })
    }
}

/// A CPU engine and its stream.
pub struct Engine<'a> {
    dnnl: &'a Dnnl,
    engine: Handle,
    stream: Handle,
}

impl Drop for Engine<'_> {
    fn drop(&mut self) {
        // SAFETY: handles made by `Dnnl::engine`; every matmul borrowing this engine is gone.
        unsafe {
            (self.dnnl.stream_destroy)(self.stream);
            (self.dnnl.engine_destroy)(self.engine);
        }
    }
}

/// Memory descriptors of one generation, destroyed with it.
enum Md {
    V2(Box<Desc2>),
    V3(Handle, OneHandle),
}

impl Md {
    fn ptr(&mut self) -> *mut c_void {
        match self {
            Md::V2(d) => d.ptr(),
            Md::V3(h, _) => *h,
        }
    }
}

impl Drop for Md {
    fn drop(&mut self) {
        if let Md::V3(h, destroy) = self {
            if !h.is_null() {
                // SAFETY: a descriptor made by dnnl_memory_desc_create_with_tag, destroyed once.
                unsafe { destroy(*h) };
            }
        }
    }
}

/// A matmul primitive `C = A · B` (f32, row-major `ab`) over the caller's buffers.
pub struct Matmul<'e> {
    engine: &'e Engine<'e>,
    /// The three buffers, borrowed exclusively while the primitive may write them.
    _buffers: std::marker::PhantomData<&'e mut [f32]>,
    pd: Handle,
    primitive: Handle,
    memories: [Handle; 3],
}

impl<'e> Engine<'e> {
    fn md(&self, rows: usize, cols: usize) -> Result<Md, CallError> {
        let dims = [rows as i64, cols as i64];
        match self.dnnl.gen {
            Gen::V2 { md_init_by_tag, .. } => {
                let mut d = Desc2::new();
                // SAFETY: a zeroed buffer larger than a 2.x dnnl_memory_desc_t; two dims.
                ok("dnnl_memory_desc_init_by_tag", unsafe {
                    md_init_by_tag(d.ptr(), 2, dims.as_ptr(), F32, TAG_AB)
                })?;
                Ok(Md::V2(d))
            }
            Gen::V3 {
                md_create_with_tag,
                md_destroy,
                ..
            } => {
                let mut h: Handle = std::ptr::null_mut();
                // SAFETY: an out-pointer; two dims.
                ok("dnnl_memory_desc_create_with_tag", unsafe {
                    md_create_with_tag(&mut h, 2, dims.as_ptr(), F32, TAG_AB)
                })?;
                Ok(Md::V3(h, md_destroy))
            }
        }
    }

    /// The matmul of an `m×k` by a `k×n` matrix into an `m×n` one, over the caller's
    /// buffers (user memory), which the primitive borrows for its life.
    pub fn matmul(
        &'e self,
        (m, k, n): (usize, usize, usize),
        a: &'e mut [f32],
        b: &'e mut [f32],
        c: &'e mut [f32],
    ) -> Result<Matmul<'e>, CallError> {
        let short =
            |have: usize, r: usize, cl: usize| r.checked_mul(cl).is_none_or(|need| have < need);
        if short(a.len(), m, k) || short(b.len(), k, n) || short(c.len(), m, n) {
            return Err(CallError {
                call: "tma: a buffer is shorter than its matrix",
                status: 2,
            });
        }
        let (a, b, c) = (a.as_mut_ptr(), b.as_mut_ptr(), c.as_mut_ptr());
        let d = self.dnnl;
        let mut mds = [self.md(m, k)?, self.md(k, n)?, self.md(m, n)?];
        let mut pd: Handle = std::ptr::null_mut();
        match d.gen {
            Gen::V2 {
                matmul_desc_init,
                pd_create,
                ..
            } => {
                let mut op = Desc2::new();
                // SAFETY: a buffer larger than a 2.x dnnl_matmul_desc_t and three initialised
                // memory descriptors; no bias.
                ok("dnnl_matmul_desc_init", unsafe {
                    matmul_desc_init(
                        op.ptr(),
                        mds[0].ptr(),
                        mds[1].ptr(),
                        std::ptr::null(),
                        mds[2].ptr(),
                    )
                })?;
                // SAFETY: the op descriptor just made, default attributes, this engine, no
                // hint.
                ok("dnnl_primitive_desc_create", unsafe {
                    pd_create(
                        &mut pd,
                        op.ptr(),
                        std::ptr::null_mut(),
                        self.engine,
                        std::ptr::null_mut(),
                    )
                })?;
            }
            Gen::V3 {
                matmul_pd_create, ..
            } => {
                // SAFETY: this engine, three memory descriptors, no bias, default attributes.
                ok("dnnl_matmul_primitive_desc_create", unsafe {
                    matmul_pd_create(
                        &mut pd,
                        self.engine,
                        mds[0].ptr(),
                        mds[1].ptr(),
                        std::ptr::null_mut(),
                        mds[2].ptr(),
                        std::ptr::null_mut(),
                    )
                })?;
            }
        }
        // From here the result owns what is made, and its drop releases it on any error.
        let mut mm = Matmul {
            engine: self,
            _buffers: std::marker::PhantomData,
            pd,
            primitive: std::ptr::null_mut(),
            memories: [std::ptr::null_mut(); 3],
        };
        // SAFETY: the primitive descriptor just made; an out-pointer.
        ok("dnnl_primitive_create", unsafe {
            (d.primitive_create)(&mut mm.primitive, pd)
        })?;
        for (i, ptr) in [a, b, c].into_iter().enumerate() {
            // SAFETY: a memory descriptor of this matrix's shape, this engine, and the
            // caller's buffer of at least that many f32 (checked above), borrowed exclusively
            // for the life of the result, which the memory object does not outlive.
            ok("dnnl_memory_create", unsafe {
                (d.memory_create)(&mut mm.memories[i], mds[i].ptr(), self.engine, ptr.cast())
            })?;
        }
        Ok(mm)
    }
}

impl Matmul<'_> {
    /// The implementation oneDNN chose (`brg:avx2`, `gemm:jit`, ...).
    pub fn implementation(&self) -> Option<String> {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: the impl_info_str query writes a `const char *` owned by the descriptor.
        let status = unsafe {
            (self.engine.dnnl.pd_query)(
                self.pd,
                QUERY_IMPL_INFO_STR,
                0,
                (&mut s as *mut *const c_char).cast(),
            )
        };
        if status != SUCCESS || s.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string alive as long as the descriptor.
        Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }

    /// Execute the primitive on the engine's stream and wait for it.
    pub fn execute(&self) -> Result<(), CallError> {
        let d = self.engine.dnnl;
        let args = [
            ExecArg {
                arg: ARG_SRC,
                memory: self.memories[0],
            },
            ExecArg {
                arg: ARG_WEIGHTS,
                memory: self.memories[1],
            },
            ExecArg {
                arg: ARG_DST,
                memory: self.memories[2],
            },
        ];
        // SAFETY: the primitive and memories made by `Engine::matmul` over buffers that are
        // valid by its contract; three arguments.
        ok("dnnl_primitive_execute", unsafe {
            (d.execute)(self.primitive, self.engine.stream, 3, args.as_ptr())
        })?;
        // SAFETY: the engine's stream.
        ok("dnnl_stream_wait", unsafe {
            (d.stream_wait)(self.engine.stream)
        })
    }
}

impl Drop for Matmul<'_> {
    fn drop(&mut self) {
        let d = self.engine.dnnl;
        // SAFETY: handles made by `Engine::matmul` (NULL when not made), destroyed once.
        unsafe {
            for m in self.memories {
                if !m.is_null() {
                    (d.memory_destroy)(m);
                }
            }
            if !self.primitive.is_null() {
                (d.primitive_destroy)(self.primitive);
            }
            if !self.pd.is_null() {
                (d.pd_destroy)(self.pd);
            }
        }
    }
}

/// CPU time of the whole process, all threads (oneDNN runs on a pool of its own), in seconds.
pub fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Minor page faults of the process so far (`getrusage(RUSAGE_SELF)`, all threads): one per
/// 4 KiB page first touched, or one per 2 MiB huge page.
pub fn minor_faults() -> u64 {
    // SAFETY: an all-zero rusage is a valid value (integers); getrusage only writes it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the rusage it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_minflt.max(0) as u64
}
