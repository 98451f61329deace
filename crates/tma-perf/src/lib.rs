//! The kernel boundary for counters: perf_event_attr encoding, group planning, multiplex
//! scaling and sampling; Live, Replay (snapshots) and Software backends. Every backend
//! produces [`Reading`]s, the one currency between counting and the formula engine.
//!
//! Layers: [`event`] (what to count) -> [`attr`] (perf_event_attr, with the PMUs
//! `tma_host::sysfs` lists) -> [`plan`] (groups that fit the counters) -> [`backend`] (Live /
//! Replay run a plan on a target) -> [`snapshot`] (record and replay); [`sampling`] opens
//! sampling events and hands the ring-buffer records to the profile crate; [`tracefs`] finds
//! (or mounts) tracefs and parses the tracepoints' `format` files, and [`tracepoint`] opens
//! them into shared per-CPU rings (for `tma-kvm`); [`cycles`] is the cycles counter of the
//! bench clocks, and [`msr`] programs core counter 0 through `/dev/cpu/N/msr` for the bench's
//! MSR clock (restored on drop and on signals); [`process`] holds a launched command before
//! exec and catches Ctrl-C. Host facts are read by `tma-host`, recorded `perf stat` output by
//! `tma-perfstat`. `unsafe` lives only in [`sys`], [`process`] and `msr_signal` (the MSR
//! restore on signals).

pub mod attr;
pub mod backend;
pub mod cgroup_counters;
pub mod cycles;
pub mod event;
pub mod msr;
mod msr_signal;
pub mod plan;
pub mod process;
pub mod readings;
pub mod sampling;
pub mod selfcount;
pub mod snapshot;
pub mod sys;
pub mod tracefs;
pub mod tracepoint;
pub use readings::*;
