//! Facts of the host, read under injectable roots (`/sys`, `/proc`; never environment
//! variables): CPU lists, cpuinfo, topology, `perf_event_paranoid`, the NMI watchdog, loaded
//! modules and the other host facts ([`Host`]); the PMUs the kernel lists in sysfs, with
//! their `format/` bit ranges and capabilities ([`sysfs`]); cgroup v2 ([`cgroupfs`]).
//!
//! Nothing here opens a counter: `tma-perf` (the perf_event boundary) reads the PMUs from
//! here, and crates that only need host facts (the workloads, the demos) depend on this crate
//! alone.

pub mod cgroupfs;
mod host;
pub mod sysfs;

pub use host::*;
