//! The kernel boundary for counters: perf_event_attr encoding, sysfs PMU discovery, group
//! planning, multiplex scaling and sampling; Live, Replay (snapshots, imported `perf stat`
//! output) and Software backends. Every backend produces [`Reading`]s, the one currency
//! between counting and the formula engine.

pub mod readings;
pub mod sampling;
pub use readings::*;
