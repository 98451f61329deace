//! A oneDNN f32 matmul primitive driven on tma's own buffers: the real library of the
//! TDX/oneDNN investigation, next to tma's reference matmul ([`crate::matmul`]).
//!
//! # Design
//! oneDNN is loaded at run time ([`crate::onednn_ffi`]), so the `tma` binary links none and
//! stays one file: `--dnnl PATH`, or the usual names (`libdnnl.so.3`, then `libdnnl.so.2`)
//! searched the loader's way. Both C API generations are spoken: Debian's oneDNN 2.6 (op
//! descriptors) and 3.x (the PyPI `onednn` wheel).
//!
//! `C[M×N] = A[M×K] · B[K×N]`, row-major (`ab`), on three buffers mapped, aligned and advised
//! exactly as the reference matmul's (`--thp on|off`: `MADV_HUGEPAGE` or `MADV_NOHUGEPAGE`
//! before the first touch) and handed to oneDNN as user memory, so the huge-page share read
//! back from `/proc/self/smaps` is that of the memory the primitive really reads. The
//! primitive is created once and executed `reps` times (each execute waits for its stream);
//! oneDNN's own scratchpad and packed copies are its allocations, not advised here.
//!
//! A library found in a directory of its own (a Python wheel's `lib/`) needs that directory
//! in `LD_LIBRARY_PATH` for its dependencies (the wheel's libraries carry no run path), and a
//! SYCL build of oneDNN (the wheel) needs `OCL_ICD_FILENAMES` naming the wheel's CPU OpenCL
//! runtime (`libintelocl.so`) or its CPU engine cannot be created. [`environment`] says
//! which variables a run needs; `tma workload onednn` re-executes itself with them.

use std::ffi::{OsStr, OsString};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tma_host::ThpMode;

use crate::clock::Stamp;
use crate::matmul::{self, sizes, sys::Buffer, Check, HugePages, MatmulError, Sizes, ThpAdvice};
use crate::onednn_ffi::{minor_faults, process_cpu_seconds, CallError, Dnnl, LoadError};
use crate::rng::SplitMix64;

/// The names searched, in order, when no `--dnnl` is given.
pub const LIBRARY_NAMES: [&str; 2] = ["libdnnl.so.3", "libdnnl.so.2"];

/// How to get a oneDNN, for the error that finds none.
pub const INSTALL_HINT: &str = "install one: `apt-get install libdnnl2` (Debian, Ubuntu: oneDNN \
     2.x), or `python3 -m venv dnnl && dnnl/bin/pip install onednn` (oneDNN 3.x, about 2 GB with \
     its runtime) and pass `--dnnl dnnl/lib/libdnnl.so.3`";

/// Workload parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnednnConfig {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Columns of `A`, rows of `B`.
    pub k: usize,
    /// Columns of `B` and `C`.
    pub n: usize,
    /// Executions of the primitive timed.
    pub reps: usize,
    /// Huge-page advice for the three buffers.
    pub thp: ThpAdvice,
    /// Seed of the matrix contents.
    pub seed: u64,
    /// The library (`--dnnl`); `None` searches [`LIBRARY_NAMES`].
    pub library: Option<PathBuf>,
    /// Where the THP mode and this process's smaps are read.
    pub host: tma_host::Host,
}

impl Default for OnednnConfig {
    fn default() -> Self {
        OnednnConfig {
            m: 1024,
            k: 4096,
            n: 1000,
            reps: 3,
            thp: ThpAdvice::On,
            seed: 1,
            library: None,
            host: tma_host::Host::system(),
        }
    }
}

/// Errors of the oneDNN workload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnednnError {
    #[error("--reps must be at least 1: there is nothing to time otherwise")]
    NoReps,
    /// No library under the usual names.
    #[error("no oneDNN library found (tried {}): {INSTALL_HINT}", tried.join(", "))]
    NotFound { tried: Vec<String> },
    /// The named library could not be loaded.
    #[error("cannot load oneDNN from {path}: {message}{}",
            if message.contains("cannot open shared object file") {
                " (a library it needs is missing: put its directory in LD_LIBRARY_PATH)"
            } else { "" })]
    Load { path: String, message: String },
    /// The library lacks a function of the API.
    #[error("{path} is not a usable oneDNN: it has no `{symbol}`")]
    Symbol { path: String, symbol: String },
    /// An API generation this code does not speak.
    #[error("{path} is oneDNN {major}.x; tma speaks oneDNN 2.x and 3.x")]
    Version { path: String, major: i32 },
    /// A oneDNN call failed.
    #[error("{call} failed with {name} ({status}){hint}")]
    Call {
        call: &'static str,
        status: i32,
        name: &'static str,
        hint: String,
    },
    #[error(transparent)]
    Matmul(#[from] MatmulError),
}

/// The library used.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LibraryInfo {
    /// As loaded (the path given, or the name found).
    pub path: String,
    /// `MAJOR.MINOR.PATCH` from `dnnl_version()`.
    pub version: String,
    /// The build's git hash (`N/A` in distribution builds).
    pub hash: String,
    /// The C API generation spoken.
    pub api: String,
    /// The CPU threading runtime it was built with.
    pub cpu_runtime: String,
}

/// Result of one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OnednnResult {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub reps: usize,
    pub library: LibraryInfo,
    /// The implementation oneDNN chose for the primitive.
    pub implementation: Option<String>,
    /// The advice given.
    pub thp: ThpAdvice,
    /// The system THP mode (`None`: no THP, or unreadable).
    pub thp_mode: Option<ThpMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thp_mode_error: Option<String>,
    /// Huge-page backing of the three buffers (`None` when smaps could not be read).
    pub huge_pages: Option<HugePages>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_pages_error: Option<String>,
    /// Seconds spent mapping and filling the buffers (not timed).
    pub setup_seconds: f64,
    /// Seconds spent creating the engine, the primitive and the memory objects (not timed).
    pub create_seconds: f64,
    /// Minor page faults while the buffers were first touched: about one per 4 KiB page
    /// without huge pages, one per 2 MiB page with them.
    pub setup_page_faults: u64,
    /// Minor page faults during the timed executes (oneDNN's own scratch and packing memory).
    pub timed_page_faults: u64,
    /// CPU seconds of the process over the timed executes, all threads (at the top of
    /// `tma.workload`, so not serialized here).
    #[serde(skip)]
    pub seconds: f64,
    /// Wall-clock seconds of the timed executes (at the top of the document too).
    #[serde(skip)]
    pub wall_seconds: f64,
    /// Wall-clock seconds of each execute (with its stream wait).
    pub rep_wall_seconds: Vec<f64>,
    /// Floating-point operations of all executes (`reps · 2·M·K·N`).
    pub flops: u64,
    /// `flops / wall_seconds / 1e9`: the library's throughput with all its threads.
    pub gflops: f64,
    /// The fastest execute's GFLOP/s.
    pub best_gflops: f64,
    /// The result check.
    pub check: Check,
    /// Sum of all of `C` (as f64).
    pub checksum: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The name of a `dnnl_version_t::cpu_runtime` value (`DNNL_RUNTIME_*`).
pub fn runtime_name(v: u32) -> String {
    match v {
        0 => "none".into(),
        1 => "sequential".into(),
        2 => "OpenMP".into(),
        4 => "TBB".into(),
        8 => "threadpool".into(),
        256 => "OpenCL".into(),
        512 => "SYCL".into(),
        other => format!("runtime {other}"),
    }
}

/// Directories the loader searches without being told (glibc's defaults and the Debian
/// multiarch ones): a library there needs no `LD_LIBRARY_PATH`.
const SYSTEM_DIRS: [&str; 7] = [
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
];

/// The environment a run of `library` needs that `ld_library_path` and `ocl_icd_filenames`
/// (the current values) lack: `LD_LIBRARY_PATH` with the library's directory first when that
/// directory is not a system one and not listed yet, and `OCL_ICD_FILENAMES` naming the
/// `libintelocl.so` beside it (a SYCL build's CPU runtime) when one is there and the variable
/// is unset. Empty when nothing is missing (or `library` is a bare name).
pub fn environment(
    library: &Path,
    ld_library_path: Option<&OsStr>,
    ocl_icd_filenames: Option<&OsStr>,
) -> Vec<(&'static str, OsString)> {
    let mut env = Vec::new();
    let Some(dir) = library.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return env;
    };
    if !library.is_file() {
        // Nothing to load there: the load's own error says so.
        return env;
    }
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let listed = ld_library_path
        .map(|p| std::env::split_paths(p).any(|e| std::fs::canonicalize(&e).unwrap_or(e) == dir))
        .unwrap_or(false);
    if !listed && !SYSTEM_DIRS.iter().any(|s| dir == Path::new(s)) {
        let mut v = dir.clone().into_os_string();
        if let Some(old) = ld_library_path.filter(|p| !p.is_empty()) {
            v.push(":");
            v.push(old);
        }
        env.push(("LD_LIBRARY_PATH", v));
    }
    if ocl_icd_filenames.is_none() {
        if let Some(ocl) = intel_ocl(&dir) {
            env.push(("OCL_ICD_FILENAMES", ocl.into_os_string()));
        }
    }
    env
}

/// The CPU OpenCL runtime of an oneAPI wheel in `dir`: `libintelocl.so`, else the first
/// `libintelocl.so.*` by name.
fn intel_ocl(dir: &Path) -> Option<PathBuf> {
    let plain = dir.join("libintelocl.so");
    if plain.is_file() {
        return Some(plain);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libintelocl.so.") && !n.ends_with(".py"))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Load the library of `cfg`: the path given, else the first of [`LIBRARY_NAMES`] that loads.
fn load(library: Option<&Path>) -> Result<(Dnnl, String), OnednnError> {
    let err = |path: &str, e: LoadError| match e {
        LoadError::Open(message) => OnednnError::Load {
            path: path.to_string(),
            message,
        },
        LoadError::Symbol(s) => OnednnError::Symbol {
            path: path.to_string(),
            symbol: s.to_string(),
        },
        LoadError::Version(major) => OnednnError::Version {
            path: path.to_string(),
            major,
        },
    };
    if let Some(p) = library {
        let shown = p.display().to_string();
        return Dnnl::open(p)
            .map(|d| (d, shown.clone()))
            .map_err(|e| err(&shown, e));
    }
    let mut tried = Vec::new();
    for name in LIBRARY_NAMES {
        match Dnnl::open(Path::new(name)) {
            Ok(d) => return Ok((d, name.to_string())),
            // Found but unusable: say why rather than "not found".
            Err(LoadError::Open(m)) if !m.contains(name) || !m.contains("cannot open") => {
                return Err(err(name, LoadError::Open(m)))
            }
            Err(LoadError::Open(_)) => tried.push(name.to_string()),
            Err(e) => return Err(err(name, e)),
        }
    }
    Err(OnednnError::NotFound { tried })
}

fn call_error(e: CallError, dnnl: &Dnnl) -> OnednnError {
    let hint = if e.call == "dnnl_engine_create" && dnnl.cpu_runtime == 512 {
        " (a SYCL build of oneDNN: its CPU engine needs OCL_ICD_FILENAMES naming the \
         libintelocl.so of the same installation, e.g. the wheel's lib/libintelocl.so)"
            .to_string()
    } else {
        String::new()
    };
    OnednnError::Call {
        call: e.call,
        status: e.status,
        name: e.status_name(),
        hint,
    }
}

fn fill(buf: &mut [f32], rng: &mut SplitMix64) {
    for x in buf {
        *x = (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    }
}

/// Load oneDNN, map and fill the buffers, create the primitive, time `reps` executes, read
/// back the huge-page backing and check the result.
pub fn run(cfg: &OnednnConfig) -> Result<OnednnResult, OnednnError> {
    let (m, k, n) = (cfg.m, cfg.k, cfg.n);
    let Sizes {
        la,
        lb,
        lc,
        flops: one,
    } = sizes(m, k, n)?;
    if cfg.reps == 0 {
        return Err(OnednnError::NoReps);
    }
    let flops = one
        .checked_mul(cfg.reps as u64)
        .ok_or(MatmulError::TooLarge { m, k, n })?;

    let (dnnl, path) = load(cfg.library.as_deref())?;
    let library = LibraryInfo {
        path,
        version: format!("{}.{}.{}", dnnl.major, dnnl.minor, dnnl.patch),
        hash: dnnl.hash.clone(),
        api: dnnl.api().to_string(),
        cpu_runtime: runtime_name(dnnl.cpu_runtime),
    };

    let t0 = Instant::now();
    let faults0 = minor_faults();
    let mut a = Buffer::new(la, cfg.thp)?;
    let mut b = Buffer::new(lb, cfg.thp)?;
    let mut c = Buffer::new(lc, cfg.thp)?;
    let mut rng = SplitMix64::new(cfg.seed);
    fill(a.as_mut_slice(), &mut rng);
    fill(b.as_mut_slice(), &mut rng);
    c.as_mut_slice().fill(0.0);
    let setup_seconds = t0.elapsed().as_secs_f64();
    let setup_page_faults = minor_faults().saturating_sub(faults0);

    let t1 = Instant::now();
    let engine = dnnl.engine().map_err(|e| call_error(e, &dnnl))?;
    let mm = engine
        .matmul(
            (m, k, n),
            a.as_mut_slice(),
            b.as_mut_slice(),
            c.as_mut_slice(),
        )
        .map_err(|e| call_error(e, &dnnl))?;
    let implementation = mm.implementation();
    let create_seconds = t1.elapsed().as_secs_f64();

    let mut rep_wall_seconds = Vec::with_capacity(cfg.reps);
    let faults1 = minor_faults();
    let cpu0 = process_cpu_seconds();
    let t = Stamp::now();
    for _ in 0..cfg.reps {
        let r = Instant::now();
        mm.execute().map_err(|e| call_error(e, &dnnl))?;
        rep_wall_seconds.push(r.elapsed().as_secs_f64());
    }
    let wall_seconds = t.wall_seconds();
    let seconds = (process_cpu_seconds() - cpu0).max(0.0);
    let timed_page_faults = minor_faults().saturating_sub(faults1);
    drop(mm);
    drop(engine);

    let ranges: Vec<Range<u64>> = [&a, &b, &c].iter().map(|x| x.range()).collect();
    let (huge_pages, huge_pages_error) = match cfg.host.huge_page_share(None, &ranges) {
        Ok(s) => (Some(matmul::backing(&s)), None),
        Err(e) => (None, Some(matmul::error_text(&e))),
    };
    let (thp_mode, thp_mode_error) = match cfg.host.thp_mode() {
        Ok(mode) => (Some(mode), None),
        Err(e) => (None, Some(matmul::error_text(&e))),
    };
    let check = matmul::check(
        a.as_slice(),
        b.as_slice(),
        c.as_slice(),
        (m, k, n),
        cfg.seed,
    )?;
    let checksum = c.as_slice().iter().map(|&x| x as f64).sum();
    let note = matmul::note(cfg.thp, thp_mode, huge_pages.as_ref());
    let best = rep_wall_seconds
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    Ok(OnednnResult {
        m,
        k,
        n,
        reps: cfg.reps,
        library,
        implementation,
        thp: cfg.thp,
        thp_mode,
        thp_mode_error,
        huge_pages,
        huge_pages_error,
        setup_seconds,
        create_seconds,
        setup_page_faults,
        timed_page_faults,
        seconds,
        wall_seconds,
        rep_wall_seconds,
        flops,
        gflops: if wall_seconds > 0.0 {
            flops as f64 / wall_seconds / 1e9
        } else {
            0.0
        },
        best_gflops: if best.is_finite() && best > 0.0 {
            one as f64 / best / 1e9
        } else {
            0.0
        },
        check,
        checksum,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_names_what_a_wheel_needs() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libdnnl.so.3");
        std::fs::write(&lib, b"").unwrap();
        let canon = std::fs::canonicalize(dir.path()).unwrap();
        // No OpenCL runtime beside it: only the directory.
        let env = environment(&lib, None, None);
        assert_eq!(env, [("LD_LIBRARY_PATH", canon.clone().into_os_string())]);
        // Listed already, and an old value kept after it otherwise.
        let listed = OsString::from(format!("/x:{}", dir.path().display()));
        assert!(environment(&lib, Some(&listed), None).is_empty());
        let env = environment(&lib, Some(OsStr::new("/x")), None);
        assert_eq!(env[0].1, OsString::from(format!("{}:/x", canon.display())));
        // A SYCL wheel: the versioned runtime is named, unless the variable is set.
        std::fs::write(dir.path().join("libintelocl.so.2026.1"), b"").unwrap();
        std::fs::write(dir.path().join("libintelocl.so-gdb.py"), b"").unwrap();
        let env = environment(&lib, Some(&listed), None);
        assert_eq!(
            env,
            [(
                "OCL_ICD_FILENAMES",
                canon.join("libintelocl.so.2026.1").into_os_string()
            )]
        );
        assert!(environment(&lib, Some(&listed), Some(OsStr::new("x"))).is_empty());
        // System directories and bare names need nothing.
        assert!(environment(
            Path::new("/usr/lib/x86_64-linux-gnu/libdnnl.so.2"),
            None,
            None
        )
        .is_empty());
        assert!(environment(Path::new("libdnnl.so.2"), None, None).is_empty());
        assert!(environment(&dir.path().join("libdnnl.so.9"), None, None).is_empty());
    }

    #[test]
    fn missing_library_says_how_to_install_one() {
        let cfg = OnednnConfig {
            library: Some(PathBuf::from("/nonexistent/libdnnl.so.3")),
            m: 2,
            k: 2,
            n: 2,
            ..OnednnConfig::default()
        };
        let e = run(&cfg).unwrap_err();
        assert!(matches!(e, OnednnError::Load { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/libdnnl.so.3"), "{e}");
        let e = OnednnError::NotFound {
            tried: LIBRARY_NAMES.iter().map(|s| s.to_string()).collect(),
        };
        let text = e.to_string();
        assert!(text.contains("apt-get install libdnnl2"), "{text}");
        assert!(text.contains("pip install onednn"), "{text}");
        assert!(text.contains("libdnnl.so.3, libdnnl.so.2"), "{text}");
        assert!(matches!(
            run(&OnednnConfig {
                reps: 0,
                ..cfg.clone()
            }),
            Err(OnednnError::NoReps)
        ));
        assert!(matches!(
            run(&OnednnConfig { m: 0, ..cfg }),
            Err(OnednnError::Matmul(MatmulError::Empty))
        ));
    }

    #[test]
    fn runtimes_are_named() {
        assert_eq!(runtime_name(2), "OpenMP");
        assert_eq!(runtime_name(512), "SYCL");
        assert_eq!(runtime_name(3), "runtime 3");
    }

    /// The real library where it is installed (Debian's libdnnl2 here): a small product,
    /// checked against f64 dot products, with its buffers' backing read back.
    #[test]
    fn small_product_on_the_installed_onednn() {
        let cfg = OnednnConfig {
            m: 8,
            k: 64,
            n: 100,
            reps: 2,
            thp: ThpAdvice::Off,
            ..OnednnConfig::default()
        };
        let r = match run(&cfg) {
            Ok(r) => r,
            Err(OnednnError::NotFound { .. }) => {
                println!("skipped: no oneDNN installed ({INSTALL_HINT})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(r.flops, 2 * 2 * 8 * 64 * 100);
        assert_eq!(r.rep_wall_seconds.len(), 2);
        assert!(r.check.worst_error_ratio < 1.0);
        assert!(r.library.version.starts_with(['2', '3']), "{:?}", r.library);
        assert_eq!(r.huge_pages.unwrap().bytes, 3 * (2 << 20));
    }
}
