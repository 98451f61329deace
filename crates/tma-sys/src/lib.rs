//! The processor and process layer: everything `tma` asks of the CPU or of the process
//! machinery that is not a perf counter, in one place, with safe wrappers (rustix, memmap2)
//! wherever they remove `unsafe`.
//!
//! * [`cpu`]: CPUID (vendor, family/model, leaf 0xA), `rdtsc` and `rdpmc` (x86-64 only).
//! * [`jit`]: executable memory for generated code, written while read-write and then made
//!   read+execute, never both (W^X). The images are x86-64 code: on other architectures
//!   [`jit::ExecCode::new`] refuses ("x86-64 only"), so no image can be called there.
//! * [`clock`]: the calling thread's CPU time; [`usage`]: its `getrusage` counts.
//! * [`process`]: kill, waitpid, "is it alive", pidfd.
//! * [`sched`]: the calling thread's policy (`SCHED_IDLE` or normal), affinity and CPU.
//! * [`signal`]: the binary's one SIGINT/SIGTERM handler and the question "interrupted? by
//!   which signal?" that every long loop asks.
//! * [`advice`]: the one table from (operation, errno) to what the user should do.
//!
//! `unsafe` lives only in [`cpu`], [`jit`], [`sched`], [`signal`] and [`usage`] (each opts in with
//! `#![allow(unsafe_code)]`, one `// SAFETY:` comment per block); [`clock`] and [`process`]
//! are safe code over rustix.
//!
//! # What is not here: host facts
//!
//! The readers of `/proc` and `/sys` (`tma_host::Host`: online CPUs, paranoid level, NMI
//! watchdog, cpuinfo, topology, capabilities, smaps) stay in tma-perf. They are plain file
//! reads under roots given as parameters, with no `unsafe` and no syscall wrapper to share, and
//! every crate that reads them already depends on tma-perf; the design keeps "who reads /proc
//! and /sys" to one crate, and moving `Host` here would split that rule across two crates
//! without removing any code. This crate therefore reads no files: [`advice`] does not look
//! up the current paranoid level itself; callers put it in their own message (they have the
//! `Host`) and add the table's advice.
//!
//! Dependencies: libc (constants, getrusage), rustix, memmap2. Nothing in the workspace is
//! below this crate.

pub mod advice;
pub mod clock;
#[cfg(target_arch = "x86_64")]
pub mod cpu;
pub mod jit;
pub mod process;
pub mod sched;
pub mod signal;
pub mod usage;
