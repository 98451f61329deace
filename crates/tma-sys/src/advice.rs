//! The one table from a failed operation and its errno to what the user should do.
//!
//! Every message that tells a user how to get past a refusal of the host (permissions,
//! limits, a missing driver, device or mount) takes its advice from [`advice`], so one
//! situation gets one fix everywhere. The caller keeps its own lead-in (which event, which
//! path, the current `perf_event_paranoid` level read through `tma_host::Host`) and
//! appends the advice; [`explain`] does that for a bare `io::Error`.
//!
//! The fixes chosen: for `perf_event_paranoid`, `sudo sysctl kernel.perf_event_paranoid=N`
//! with the highest N that allows the operation (2: user code of your own processes, 1: with
//! kernel code, 0: whole CPUs), which lasts until reboot; `setcap cap_perfmon` only for raw
//! tracepoints, where the sysctl would have to go to -1 and open raw tracepoint data to every
//! user.
//!
//! Not in the table: errnos whose fix is a different request rather than a change to the
//! host (EINVAL for an encoding or a precise level, ESRCH for a pid that exited, ENOENT for
//! an event the PMU lacks). Those stay typed errors of the crate that made the request, with
//! the alternative that command offers (software counting, `cpu-clock`, `--clock tsc`).

use std::io;

/// An operation whose failure the table explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `perf_event_open` of an event that counts user code only, of this process or one it
    /// started or attached to (the bench's cycles clock, `doctor --verify`, sampling without
    /// kernel code).
    PerfOpenUser,
    /// `perf_event_open` of an event that also counts kernel code, of one process or thread
    /// (`tma stat -- CMD`, `-p PID`, `-t TID`, sampling with kernel code).
    PerfOpenProcess,
    /// `perf_event_open` of an event for every task on a CPU (`-a`, `-C CPUS`, cgroups).
    PerfOpenCpu,
    /// `perf_event_open` of a tracepoint with raw records on every CPU (`tma kvm`).
    TracepointOpen,
    /// `mmap` of a perf ring buffer (sampling, tracepoint records).
    RingMmap,
    /// Opening `/dev/cpu/N/msr` for reading and writing (the bench's MSR clock).
    MsrOpen,
    /// Opening `/dev/kvm`.
    KvmOpen,
    /// Mounting tracefs at `/sys/kernel/tracing`.
    TracefsMount,
    /// Reading tracefs (mode 700 by default).
    TracefsRead,
}

impl Op {
    /// Every operation, for tests and documentation.
    pub const ALL: [Op; 9] = [
        Op::PerfOpenUser,
        Op::PerfOpenProcess,
        Op::PerfOpenCpu,
        Op::TracepointOpen,
        Op::RingMmap,
        Op::MsrOpen,
        Op::KvmOpen,
        Op::TracefsMount,
        Op::TracefsRead,
    ];
}

/// `perf_event_paranoid` 2: unprivileged users may count their own processes' user code.
const PARANOID_2: &str = "run `sudo sysctl kernel.perf_event_paranoid=2` (lets users count \
    their own processes' user code; lasts until reboot), or run as root";
/// `perf_event_paranoid` 1: kernel code of their own processes too.
const PARANOID_1: &str = "run `sudo sysctl kernel.perf_event_paranoid=1` (lets users count \
    their own processes, kernel code included; lasts until reboot), or run as root (another \
    user's process always needs root)";
/// `perf_event_paranoid` 0: whole CPUs.
const PARANOID_0: &str = "run `sudo sysctl kernel.perf_event_paranoid=0` (lets users count \
    whole CPUs, as -a and -C do; lasts until reboot), or run as root";
/// Raw tracepoints: CAP_PERFMON rather than paranoid -1.
const CAP_PERFMON: &str = "run as root, or grant tma CAP_PERFMON: `sudo setcap cap_perfmon+ep \
    \"$(command -v tma)\"` (better than kernel.perf_event_paranoid=-1, which would open raw \
    tracepoint data to every user)";
const MLOCK: &str = "the perf ring buffers exceed this user's locked-memory allowance: run \
    `sudo sysctl kernel.perf_event_mlock_kb=4096` (lasts until reboot), or run as root";
const MSR_DRIVER: &str = "load the msr driver: `sudo modprobe msr`";
const MSR_ROOT: &str = "run tma with sudo (programming a counter needs CAP_SYS_RAWIO and write \
    access to /dev/cpu/N/msr)";
const KVM_MODULE: &str = "load KVM: `sudo modprobe kvm_intel` (or kvm_amd); in a VM, enable \
    nested virtualization first";
const KVM_GROUP: &str =
    "add yourself to the kvm group: `sudo usermod -aG kvm \"$USER\"`, then log in again";
const TRACEFS_ROOT: &str = "run as root (tracefs is readable, and mountable, by root only)";
const NO_TRACEFS: &str = "this kernel has no tracefs (built without CONFIG_TRACING): \
    tracepoints are not available here";

/// The fix that turns off the NMI watchdog (it holds one general-purpose counter on every
/// CPU); lasts until reboot.
pub const NMI_WATCHDOG_OFF: &str = "`sudo sysctl kernel.nmi_watchdog=0` (lasts until reboot)";

/// What to do when `op` failed with `errno`; `None` when the table has no advice for it (the
/// caller shows the plain error).
pub fn advice(op: Op, errno: i32) -> Option<&'static str> {
    use libc::{EACCES, ENODEV, ENOENT, ENXIO, EPERM};
    use Op::*;
    Some(match (op, errno) {
        (PerfOpenUser, EACCES | EPERM) => PARANOID_2,
        (PerfOpenProcess, EACCES | EPERM) => PARANOID_1,
        (PerfOpenCpu, EACCES | EPERM) => PARANOID_0,
        (TracepointOpen, EACCES | EPERM) => CAP_PERFMON,
        (RingMmap, EPERM) => MLOCK,
        (MsrOpen, ENOENT) => MSR_DRIVER,
        (MsrOpen, EACCES | EPERM) => MSR_ROOT,
        (KvmOpen, ENOENT | ENODEV | ENXIO) => KVM_MODULE,
        (KvmOpen, EACCES | EPERM) => KVM_GROUP,
        (TracefsMount, EPERM | EACCES) => TRACEFS_ROOT,
        (TracefsMount, ENODEV | ENOENT) => NO_TRACEFS,
        (TracefsRead, EACCES | EPERM) => TRACEFS_ROOT,
        _ => return None,
    })
}

/// The advice when the kernel refuses `op` for want of privilege (EACCES or EPERM); every
/// operation has one.
pub fn permission(op: Op) -> &'static str {
    advice(op, libc::EACCES)
        .or_else(|| advice(op, libc::EPERM))
        .unwrap_or("run as root")
}

/// `err`, followed by the table's advice for `op` when it has one (`Permission denied (os
/// error 13): run ...`); a plain `err` otherwise.
pub fn explain(op: Op, err: &io::Error) -> String {
    match err.raw_os_error().and_then(|e| advice(op, e)) {
        Some(a) => format!("{err}: {a}"),
        None => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libc::{EACCES, EBUSY, EINVAL, EMFILE, ENODEV, ENOENT, ENOMEM, ENXIO, EPERM, ESRCH};

    /// Every row of the table, written out: (operation, errno, a piece the advice must hold).
    const EXPECTED: &[(Op, i32, &str)] = &[
        (Op::PerfOpenUser, EACCES, "perf_event_paranoid=2`"),
        (Op::PerfOpenUser, EPERM, "perf_event_paranoid=2`"),
        (Op::PerfOpenProcess, EACCES, "perf_event_paranoid=1`"),
        (Op::PerfOpenProcess, EPERM, "perf_event_paranoid=1`"),
        (Op::PerfOpenCpu, EACCES, "perf_event_paranoid=0`"),
        (Op::PerfOpenCpu, EPERM, "perf_event_paranoid=0`"),
        (Op::TracepointOpen, EACCES, "setcap cap_perfmon+ep"),
        (Op::TracepointOpen, EPERM, "setcap cap_perfmon+ep"),
        (Op::RingMmap, EPERM, "perf_event_mlock_kb=4096"),
        (Op::MsrOpen, ENOENT, "modprobe msr"),
        (Op::MsrOpen, EACCES, "sudo"),
        (Op::MsrOpen, EPERM, "sudo"),
        (Op::KvmOpen, ENOENT, "modprobe kvm_intel"),
        (Op::KvmOpen, ENODEV, "modprobe kvm_intel"),
        (Op::KvmOpen, ENXIO, "modprobe kvm_intel"),
        (Op::KvmOpen, EACCES, "usermod -aG kvm"),
        (Op::KvmOpen, EPERM, "usermod -aG kvm"),
        (Op::TracefsMount, EPERM, "run as root"),
        (Op::TracefsMount, EACCES, "run as root"),
        (Op::TracefsMount, ENODEV, "CONFIG_TRACING"),
        (Op::TracefsMount, ENOENT, "CONFIG_TRACING"),
        (Op::TracefsRead, EACCES, "run as root"),
        (Op::TracefsRead, EPERM, "run as root"),
    ];

    #[test]
    fn each_operation_and_errno_gets_its_advice() {
        for &(op, errno, piece) in EXPECTED {
            let a = advice(op, errno).unwrap_or_else(|| panic!("{op:?} errno {errno}: none"));
            assert!(a.contains(piece), "{op:?} errno {errno}: {a}");
        }
    }

    #[test]
    fn everything_else_has_no_advice() {
        let errnos = [
            EACCES, EPERM, ENOENT, ENODEV, ENXIO, EINVAL, ESRCH, EBUSY, EMFILE, ENOMEM,
        ];
        for op in Op::ALL {
            for errno in errnos {
                let listed = EXPECTED.iter().any(|&(o, e, _)| o == op && e == errno);
                assert_eq!(advice(op, errno).is_some(), listed, "{op:?} errno {errno}");
            }
        }
    }

    #[test]
    fn one_situation_one_fix() {
        // EACCES and EPERM are the same refusal: the same words.
        for op in Op::ALL {
            if let (Some(a), Some(b)) = (advice(op, EACCES), advice(op, EPERM)) {
                assert_eq!(a, b, "{op:?}");
            }
        }
        // The paranoid fix is always the sysctl, and says how long it lasts; setcap appears
        // only for tracepoints.
        for op in Op::ALL {
            let a = permission(op);
            if a.contains("perf_event_paranoid=") && !a.contains("=-1") {
                assert!(a.contains("sudo sysctl kernel.perf_event_paranoid="), "{a}");
                assert!(a.contains("until reboot"), "{a}");
            }
            assert_eq!(
                a.contains("setcap"),
                op == Op::TracepointOpen,
                "{op:?}: {a}"
            );
            assert!(
                !a.contains("sudo tee") && !a.contains("echo "),
                "{op:?}: {a}"
            );
        }
    }

    #[test]
    fn explain_adds_the_advice_or_stays_plain() {
        let e = io::Error::from_raw_os_error(EACCES);
        let m = explain(Op::PerfOpenCpu, &e);
        assert!(m.starts_with(&e.to_string()), "{m}");
        assert!(m.ends_with(PARANOID_0), "{m}");
        let e = io::Error::from_raw_os_error(EINVAL);
        assert_eq!(explain(Op::PerfOpenCpu, &e), e.to_string());
        let e = io::Error::other("not an os error");
        assert_eq!(explain(Op::MsrOpen, &e), "not an os error");
        assert_eq!(permission(Op::RingMmap), MLOCK);
    }
}
