//! Case-study workloads for `tma`: SHA-256 (portable and SHA-NI), a DRAM-bound
//! random-access kernel with an optional software prefetch, and a reference matmul whose
//! speed depends on transparent huge pages.
//!
//! These are real workloads, not mocks: `tma workload` runs them as ordinary processes so the
//! analysis commands (`tma stat`, `tma locate`) can be pointed at them, `tma sha256sum` uses
//! the SHA-256 code as a drop-in for coreutils, and `tma demo` (crate `tma-demo`) walks
//! through the method on them.
//!
//! * [`workload`]: the `tma workload` run (config, `tma.workload` report, [`workload::render`]).
//! * [`sha256sum`]: the coreutils-compatible `sha256sum` (config, run over given streams).
//! * [`sha256`], [`dram`], [`matmul`], [`clock`], [`rng`]: the kernels and their timing.
//! * [`onednn`]: oneDNN's matmul primitive on the reference matmul's buffers, the library
//!   loaded at run time through [`onednn_ffi`].

pub mod clock;
pub mod dram;
pub mod matmul;
pub mod onednn;
pub mod onednn_ffi;
pub mod rng;
pub mod sha256;
pub mod sha256sum;
pub mod workload;
