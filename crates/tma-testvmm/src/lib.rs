//! A tiny VMM for tests: its real-mode guest performs known numbers of exit-causing
//! operations, so that `tma kvm` can be checked against exact counts. Dev-only
//! (`publish = false`): the `tma` binary does not link it, nor `kvm-ioctls`.
//!
//! [`runner::run_guest`] runs the guest in this process; the `tma-kvm-runner` binary wraps it
//! for use from the command line. Tests that measure it launch their own test binary with an
//! environment variable that makes one test run the guest (see `tma-kvm/tests/live.rs`).

// The guest is x86-64 code run under KVM's x86 register interface: x86-64 only.
#[cfg(target_arch = "x86_64")]
pub mod runner;
#[cfg(target_arch = "x86_64")]
mod sys;

#[cfg(target_arch = "x86_64")]
pub use runner::{run_guest, run_guest_with, GuestOptions, RunnerCounts, ThpAdvice};

/// The guest could not be run (no /dev/kvm, an ioctl failed, an unexpected exit).
#[derive(Debug, thiserror::Error)]
#[error("guest runner: {0}")]
pub struct RunnerError(pub String);
