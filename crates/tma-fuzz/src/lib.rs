//! The fuzz targets of tma's parsers and the harness they run in (see fuzz/README.md).
//!
//! Each [`Target`] is a plain function of one input. fuzz/ (its own workspace, built with
//! cargo-afl by scripts/fuzz.sh) runs each under afl; this crate's tests replay every
//! target's seeds ([`seeds::gather`]) and saved crashes (`tests/fixtures/fuzz/<target>/`)
//! through the same functions under the same bounds, as ordinary tests.
//!
//! Besides the panics (a crash to afl, a failed test here), each input is held to two bounds
//! of its own, so that a slow path or an allocation that grows with a number read from the
//! input, rather than with the input's length, is a crash:
//! * **allocation**: the bytes live at once while the parser runs may exceed what was live
//!   before it by at most `per_byte × input length + fixed` (a counting global allocator
//!   tracks them; the allocation that would pass the bound aborts before it is made, saying
//!   which input when [`set_label`] named it);
//! * **time**: one input takes under [`TIME_LIMIT`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub mod seeds;
pub mod targets;

/// The longest one input may take.
pub const TIME_LIMIT: Duration = Duration::from_secs(1);

/// How much a parser may allocate for an input of `len` bytes: `per_byte * len + fixed`.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub per_byte: usize,
    pub fixed: usize,
}

impl Bound {
    pub const fn limit(self, len: usize) -> usize {
        self.per_byte.saturating_mul(len).saturating_add(self.fixed)
    }
}

/// One fuzz target: its name (the binary's in fuzz/, the directory's under fuzz/seeds and
/// tests/fixtures/fuzz), what it builds once before the first input, the allocation bound of
/// an input (called before the input runs, outside the measured region), and the function
/// of one input.
#[derive(Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub setup: fn(),
    pub bound: fn(&[u8]) -> Bound,
    pub run: fn(&[u8]),
}

/// Counts the bytes live; aborts an allocation that would pass the armed limit.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static BASE: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static ARMED: AtomicBool = AtomicBool::new(false);
/// What the input being run is called (a seed's file name), said when a bound aborts.
static LABEL: Mutex<String> = Mutex::new(String::new());

impl Counting {
    fn grow(size: usize) {
        let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
        PEAK.fetch_max(live, Ordering::Relaxed);
        if ARMED.load(Ordering::Relaxed) {
            let used = live.saturating_sub(BASE.load(Ordering::Relaxed));
            let limit = LIMIT.load(Ordering::Relaxed);
            if used > limit {
                over_limit(size, used, limit);
            }
        }
    }
}

/// Name the input the next [`check`] runs (call it outside the measured region: it may
/// allocate).
pub fn set_label(label: &str) {
    let mut l = LABEL.lock().unwrap_or_else(|e| e.into_inner());
    l.clear();
    l.push_str(label);
}

/// Say why, without allocating, and abort (afl records the input as a crash).
fn over_limit(size: usize, used: usize, limit: usize) -> ! {
    ARMED.store(false, Ordering::Relaxed);
    let mut buf = [0u8; 200];
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    let _ = writeln!(
        cur,
        "tma-fuzz: allocation bound exceeded: {used} bytes live (an allocation of {size}), \
         bound {limit}"
    );
    let n = cur.position() as usize;
    let mut err = std::io::stderr();
    let _ = err.write_all(&buf[..n]);
    if let Ok(label) = LABEL.try_lock() {
        if !label.is_empty() {
            let _ = err.write_all(b"tma-fuzz: the input: ");
            let _ = err.write_all(label.as_bytes());
            let _ = err.write_all(b"\n");
        }
    }
    std::process::abort();
}

// SAFETY: every call forwards to the system allocator with the same arguments; the counters
// are atomics and never allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Counting::grow(layout.size());
        // SAFETY: the caller's layout contract is passed through unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Counting::grow(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            Counting::grow(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Run `f` on one input under the bounds: an allocation past the bound aborts; a run longer
/// than [`TIME_LIMIT`] is an `Err` saying so. Returns how long the input took.
pub fn run_bounded(
    name: &str,
    bound: Bound,
    data: &[u8],
    f: fn(&[u8]),
) -> Result<Duration, String> {
    let live = LIVE.load(Ordering::Relaxed);
    BASE.store(live, Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    LIMIT.store(bound.limit(data.len()), Ordering::Relaxed);
    ARMED.store(true, Ordering::Relaxed);
    let start = Instant::now();
    f(data);
    let took = start.elapsed();
    ARMED.store(false, Ordering::Relaxed);
    if took > TIME_LIMIT {
        return Err(format!(
            "tma-fuzz {name}: one input of {} bytes took {took:?} (limit {TIME_LIMIT:?})",
            data.len()
        ));
    }
    Ok(took)
}

/// [`run_bounded`] that aborts (a crash to afl) when the time bound is passed too.
pub fn check(name: &str, bound: Bound, data: &[u8], f: fn(&[u8])) {
    if let Err(why) = run_bounded(name, bound, data, f) {
        eprintln!("{why}");
        std::process::abort();
    }
}

/// The peak bytes live above the base during the last [`check`] (for the reproduction line).
pub fn last_peak() -> usize {
    PEAK.load(Ordering::Relaxed)
        .saturating_sub(BASE.load(Ordering::Relaxed))
}

/// A scratch file for targets whose entry point takes a path (a per-process directory
/// under the temporary directory, created once).
pub fn scratch_file(name: &str, data: &[u8]) -> std::path::PathBuf {
    use std::sync::OnceLock;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("tma-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create the scratch directory");
        d
    });
    let path = dir.join(name);
    std::fs::write(&path, data).expect("write the scratch file");
    path
}

/// The repository root (fixture roots are given to the parsers that take a host).
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/tma-fuzz is two levels down")
        .to_path_buf()
}

/// Build, before the first measured input, what the evaluators cache for the life of the
/// process (every catalog model's compiled form), so that the first input that names a
/// model is not charged for the cache.
pub fn warm_models() {
    for m in tma_catalog::models() {
        let _ = tma_metrics::CompiledModel::get(m);
    }
}

/// Nothing to build before the first input.
pub fn no_setup() {}

/// The allocation bound of a perf.data input (targets `perf_data` and `perf_data_z`): 64 bytes
/// per input byte and 8 MiB. An input that may hold compressed records (the bytes of record
/// type 81 or 83 somewhere in it) may also inflate them as far as
/// `tma_profile::import::compressed` allows (`MAX_RATIO` times the input plus `SLACK`), and the
/// reader holds what they inflate to about three times over (linux-perf-data's output
/// buffer, the inflated stream, and the records cut from it): that is added.
pub fn perf_data_bound(data: &[u8]) -> Bound {
    use tma_profile::import::compressed::{MAX_RATIO, SLACK};
    let plain = Bound {
        per_byte: 64,
        fixed: 8 << 20,
    };
    let maybe_compressed = data.windows(4).any(|w| {
        w == [81, 0, 0, 0] || w == [83, 0, 0, 0] || w == [0, 0, 0, 81] || w == [0, 0, 0, 83]
    });
    if !maybe_compressed {
        return plain;
    }
    Bound {
        per_byte: plain.per_byte + 3 * MAX_RATIO as usize,
        fixed: plain.fixed + 3 * SLACK as usize + (1 << 20),
    }
}

/// The request the `evaluate` target evaluates a model's tree for (every level, the
/// default helper metrics and the `Bottleneck_*` costs where the model has them), with
/// `topology`; and the events that tree reads, in the order its inputs give their counts.
pub fn evaluate_request(
    model: &tma_catalog::Model,
    topology: Option<tma_perf::snapshot::Topology>,
) -> (tma_stat::Request, Vec<String>) {
    let choice = tma_stat::MetricChoice::resolve_with(Some(&[]), &[], true, model)
        .or_else(|_| tma_stat::MetricChoice::resolve_with(Some(&[]), &[], false, model))
        .expect("the default metrics of a bundled model");
    let request = tma_stat::Request {
        level: 6,
        nodes: Vec::new(),
        topology,
        metrics: choice.metrics,
        bottlenecks: choice.bottlenecks,
    };
    let events = tma_metrics::required_events(model, &request.selection())
        .expect("a bundled model's events")
        .into_iter()
        .collect();
    (request, events)
}

#[cfg(test)]
mod replay;
