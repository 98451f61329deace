//! KVM VM-exit accounting from the `kvm:*` tracepoints, in the manner of `perf kvm stat`.
//!
//! # How it works
//! * `tma_perf::tracefs::Tracefs` finds tracefs (`/sys/kernel/tracing`, then
//!   `/sys/kernel/debug/tracing`; the root is a parameter) and mounts it when absent; what this
//!   process mounted, and only that, is unmounted on drop, also after an error or Ctrl-C.
//! * [`tracefs::kvm_formats`] reads the kvm tracepoints' `format` files, parsed by
//!   `tma_perf::tracefs::EventFormat`: ids and field offsets are read, never assumed, because
//!   field sets differ between kernels.
//! * [`decode::Decoder`] turns raw records into [`decode::KvmEvent`]s using those offsets.
//!   `kvm_exit` reasons are named per record from its `isa` field ([`reasons`]: VMX incl. TDX's
//!   TDCALL, SVM incl. SEV-ES codes); unknown codes keep their number.
//! * [`stats::Aggregator`] counts exits by reason, pairs each `kvm_exit` with the next
//!   `kvm_entry` of the same thread for the handling time, and summarises the VMM-level events
//!   (`kvm_userspace_exit`, `kvm_pio`, `kvm_mmio`, `kvm_msr`, `kvm_cpuid`, `kvm_emulate_insn`).
//! * [`session::run`] samples every kvm tracepoint with `sample_period = 1` and
//!   `PERF_SAMPLE_RAW | TID | TIME | CPU` from per-CPU ring buffers, opened and read through
//!   `tma_perf::tracepoint` (the launched command is a `tma_perf::process::HeldChild`).
//!
//! # Tracepoints are not PMU counters
//! `PERF_TYPE_TRACEPOINT` events are software events fired by static trace points in the
//! kernel, so this crate works on hosts and VMs without a hardware PMU. Opening them needs
//! root, or CAP_PERFMON plus read access to tracefs. This crate has no `unsafe` code: the
//! syscalls (perf_event_open, the rings, mount/umount of tracefs) are in `tma-perf`.
//!
//! # Backends that emit no `kvm_exit`
//! Some KVM vendor modules (the software `kvm_pvm`, for one) never fire `kvm_exit`/`kvm_entry`
//! while the VMM-level events fire exactly. [`tracefs::detect_backend`] names the module (from
//! `tma_host::Host`'s loaded modules), and the report then says in one line that this
//! backend does not emit `kvm_exit` and shows the VMM-level breakdown instead of an empty table.
//!
//! # Guest memory on huge pages
//! [`memory`] answers from the host side whether a VM's memory is on huge pages (KVM has no
//! interface for it): the VMM's guest-memory mappings from smaps, the THP settings that apply,
//! the guest_memfd files it holds, and a verdict with the fix (`tma kvm --memory`).
//!
//! The tests measure a tiny VMM whose guest performs known numbers of exit-causing operations:
//! the dev-only `tma-testvmm` crate.

pub mod decode;
pub mod doc;
pub mod memory;
pub mod reasons;
pub mod render;
pub mod session;
pub mod stats;
pub mod tracefs;

pub use decode::{Decoder, KvmEvent};
pub use memory::{MemoryConfig, MemoryReport, MemoryTarget, VmMemory};
pub use reasons::{ExitReason, Isa};
pub use render::{render, RenderOptions};
pub use session::{run, SessionConfig, Target};
pub use stats::{Aggregator, KvmReport, Sample};
pub use tma_perf::tracefs::{EventFormat, Tracefs};
pub use tracefs::{detect_backend, kvm_formats, Backend};

impl SessionConfig {
    /// An error naming the flag when a setting cannot work.
    pub fn check(&self) -> Result<(), KvmError> {
        if let Some(d) = self.duration {
            if d.is_zero() {
                return Err(KvmError::Config(
                    "--duration must be a positive number of seconds".into(),
                ));
            }
        }
        if self.interval.is_some_and(|i| i.is_zero()) {
            return Err(KvmError::Config("-I must be at least 1 ms".into()));
        }
        if !self.mmap_pages.is_power_of_two() {
            return Err(KvmError::Config(format!(
                "--mmap-pages must be a power of two, got {}",
                self.mmap_pages
            )));
        }
        Ok(())
    }
}

/// Errors of this crate. Messages say what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvmError {
    #[error("tracepoint format: {0}")]
    Format(String),
    #[error("bad trace record: {0}")]
    Record(String),
    #[error("{0}")]
    Tracefs(String),
    #[error("no kvm tracepoints under {0}: the kvm module is not loaded (load kvm_intel or kvm_amd) or this kernel lacks them")]
    NoKvmEvents(String),
    #[error("{0}")]
    Permission(String),
    #[error("{0}")]
    Perf(String),
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    #[error("pid {0} is not a VMM: it has no /dev/kvm or kvm-vm/kvm-vcpu file descriptor and no kvm-vcpu thread; pass the pid of the QEMU/Firecracker/cloud-hypervisor process")]
    NotAVmm(u32),
    #[error("{0}")]
    Launch(String),
    #[error("{0}")]
    Config(String),
}
