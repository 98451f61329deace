//! One core counter programmed directly through the `msr` driver, the kernel-less method of
//! nanoBench's user-space mode: write the event select register of counter 0 through
//! `/dev/cpu/N/msr` (the file offset is the MSR number, 8 bytes per access) and read the
//! counter with `rdpmc` (index 0). Used by `tma bench --clock msr` on machines where perf has
//! no cycles event but the PMU is there (or perf is not wanted between the two reads).
//!
//! The previous value of the event select register is saved and written back on every exit
//! path: [`ProgrammedCounter`]'s `Drop`, and a signal handler for SIGINT, SIGTERM, SIGHUP and
//! SIGQUIT (`crate::msr_signal`) while it is armed. A counter whose enable bit is already set
//! (perf, the NMI watchdog or another tool has it) is refused unless forced.
//!
//! The device directory and the sysfs/procfs roots are parameters ([`MsrSetup`]), so all of
//! this is tested against a fake MSR file: a sparse regular file whose offset N holds MSR N.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use tma_sys::advice::{advice, permission, Op, NMI_WATCHDOG_OFF};

use tma_host::Host;

/// AMD Zen core counter 0: `PERF_CTL0` (PerfEvtSel0 in the extended core counter range).
pub const AMD_PERF_CTL0: u32 = 0xC001_0200;
/// AMD Zen `LsNotHaltedCyc`: core cycles not halted.
pub const AMD_LS_NOT_HALTED_CYC: u64 = 0x76;
/// Intel `IA32_PERFEVTSEL0`.
pub const INTEL_PERFEVTSEL0: u32 = 0x186;
/// Intel `CPU_CLK_UNHALTED.THREAD_P` (event 0x3c, umask 0).
pub const INTEL_CPU_CLK_UNHALTED_THREAD_P: u64 = 0x3c;
/// Event select bits (same layout on both vendors): count in user mode, in kernel mode, enable.
pub const USR: u64 = 1 << 16;
pub const OS: u64 = 1 << 17;
pub const EN: u64 = 1 << 22;
/// Width of the general-purpose counters read with `rdpmc` (48 bits on both vendors' cores).
pub const COUNTER_MASK: u64 = (1 << 48) - 1;

/// The cycles event to program on a CPU vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleEvent {
    /// The event select MSR of counter 0.
    pub msr: u32,
    /// The value written: event, USR, OS, EN.
    pub value: u64,
    /// Names for messages.
    pub register: &'static str,
    pub event: &'static str,
}

impl CycleEvent {
    /// The event for a `vendor_id` (`AuthenticAMD`, `HygonGenuine`, `GenuineIntel`).
    pub fn for_vendor(vendor: &str) -> Option<CycleEvent> {
        match vendor {
            "AuthenticAMD" | "HygonGenuine" => Some(CycleEvent {
                msr: AMD_PERF_CTL0,
                value: AMD_LS_NOT_HALTED_CYC | USR | OS | EN,
                register: "PerfEvtSel0",
                event: "LsNotHaltedCyc",
            }),
            "GenuineIntel" => Some(CycleEvent {
                msr: INTEL_PERFEVTSEL0,
                value: INTEL_CPU_CLK_UNHALTED_THREAD_P | USR | OS | EN,
                register: "IA32_PERFEVTSEL0",
                event: "CPU_CLK_UNHALTED.THREAD_P",
            }),
            _ => None,
        }
    }
}

/// Why the MSR clock cannot be used; each says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MsrError {
    #[error(
        "the CPU vendor `{0}` has no known cycles event for the MSR clock (AMD and Intel only)"
    )]
    Vendor(String),
    #[error("{} does not exist: {}", .0.display(), advice(Op::MsrOpen, libc::ENOENT).unwrap_or_default())]
    NoDriver(PathBuf),
    #[error("permission denied opening {} for writing: {}", .0.display(), permission(Op::MsrOpen))]
    NotRoot(PathBuf),
    #[error("user-space rdpmc is not allowed for counters perf does not own ({}={}); allow it with `echo 2 | sudo tee /sys/bus/event_source/devices/cpu/rdpmc`", .path.display(), .value)]
    Rdpmc { path: PathBuf, value: String },
    #[error("no core PMU is visible ({} is missing): this machine has no performance counters to program (a VM without PMU passthrough?); use --clock tsc here, or a machine with a PMU", .0.display())]
    NoPmu(PathBuf),
    #[error("{register} (MSR {msr:#x}) on CPU {cpu} is in use (value {value:#x}, enable bit set: perf, the NMI watchdog or another tool owns counter 0); free it (the NMI watchdog: {}) or pass --force to borrow it (its value is restored afterwards)", NMI_WATCHDOG_OFF)]
    InUse {
        register: &'static str,
        msr: u32,
        cpu: usize,
        value: u64,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

/// Where the pieces of the MSR clock live: `dev` holds `N/msr` per CPU (normally `/dev/cpu`),
/// `host` the sysfs and procfs roots.
#[derive(Debug, Clone)]
pub struct MsrSetup {
    pub dev: PathBuf,
    pub host: Host,
}

impl MsrSetup {
    /// The real machine.
    pub fn system() -> MsrSetup {
        MsrSetup {
            dev: PathBuf::from("/dev/cpu"),
            host: Host::system(),
        }
    }

    /// The MSR device of `cpu`.
    pub fn device(&self, cpu: usize) -> PathBuf {
        self.dev.join(cpu.to_string()).join("msr")
    }

    /// Check user-space rdpmc: counters programmed behind perf's back are only readable with
    /// `rdpmc` when `/sys/bus/event_source/devices/cpu/rdpmc` is 2 (CR4.PCE set for every task).
    pub fn check_rdpmc(&self) -> Result<(), MsrError> {
        let rel = "bus/event_source/devices/cpu/rdpmc";
        let path = self.host.sys.join(rel);
        match self.host.sys_text(rel) {
            Ok(v) if v.trim() == "2" => Ok(()),
            Ok(v) => Err(MsrError::Rdpmc {
                path,
                value: v.trim().to_string(),
            }),
            Err(e) if e.is_missing() => Err(MsrError::NoPmu(path)),
            Err(e) => Err(MsrError::Io {
                what: format!("reading {}", path.display()),
                source: e.into_io(),
            }),
        }
    }

    /// Everything the MSR clock needs on `cpu`, checked without writing anything: the vendor's
    /// event, rdpmc permission, the driver, write access, and counter 0 free (unless `force`).
    pub fn check(&self, cpu: usize, vendor: &str, force: bool) -> Result<CycleEvent, MsrError> {
        let ev = CycleEvent::for_vendor(vendor).ok_or_else(|| MsrError::Vendor(vendor.into()))?;
        self.check_rdpmc()?;
        let dev = MsrFile::open(&self.device(cpu))?;
        let value = dev.read(ev.msr)?;
        if value & EN != 0 && !force {
            return Err(MsrError::InUse {
                register: ev.register,
                msr: ev.msr,
                cpu,
                value,
            });
        }
        Ok(ev)
    }
}

/// `/dev/cpu/N/msr` (or a fake of it): 8-byte reads and writes at offset = MSR number.
#[derive(Debug)]
pub struct MsrFile {
    file: File,
    path: PathBuf,
}

impl MsrFile {
    /// Open for reading and writing; each missing piece is its own error.
    pub fn open(path: &Path) -> Result<MsrFile, MsrError> {
        match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => Ok(MsrFile {
                file,
                path: path.to_path_buf(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(MsrError::NoDriver(path.to_path_buf()))
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                Err(MsrError::NotRoot(path.to_path_buf()))
            }
            Err(e) => Err(MsrError::Io {
                what: format!("opening {}", path.display()),
                source: e,
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn read(&self, msr: u32) -> Result<u64, MsrError> {
        let mut b = [0u8; 8];
        self.file
            .read_exact_at(&mut b, u64::from(msr))
            .map_err(|source| MsrError::Io {
                what: format!("reading MSR {msr:#x} from {}", self.path.display()),
                source,
            })?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn write(&self, msr: u32, value: u64) -> Result<(), MsrError> {
        self.file
            .write_all_at(&value.to_le_bytes(), u64::from(msr))
            .map_err(|source| MsrError::Io {
                what: format!("writing MSR {msr:#x} of {}", self.path.display()),
                source,
            })
    }
}

/// Counter 0 of one CPU programmed with a cycles event. The previous event select value is
/// written back by [`ProgrammedCounter::restore`], on drop, and by the signal handler armed
/// while this exists.
#[derive(Debug)]
pub struct ProgrammedCounter {
    dev: MsrFile,
    event: CycleEvent,
    saved: u64,
    restored: bool,
}

impl ProgrammedCounter {
    /// Save the event select register of counter 0 on `cpu`, refuse when it is enabled (unless
    /// `force`), write the cycles event and arm the signal-path restore.
    pub fn program(
        setup: &MsrSetup,
        cpu: usize,
        vendor: &str,
        force: bool,
    ) -> Result<ProgrammedCounter, MsrError> {
        let event = setup.check(cpu, vendor, force)?;
        let dev = MsrFile::open(&setup.device(cpu))?;
        let saved = dev.read(event.msr)?;
        // Arm first: a signal between the write and the arming would leave the counter set.
        crate::msr_signal::arm(&dev.file, event.msr, saved);
        if let Err(e) = dev.write(event.msr, event.value) {
            crate::msr_signal::disarm();
            return Err(e);
        }
        Ok(ProgrammedCounter {
            dev,
            event,
            saved,
            restored: false,
        })
    }

    pub fn event(&self) -> CycleEvent {
        self.event
    }

    /// The value found before programming (written back on restore).
    pub fn saved(&self) -> u64 {
        self.saved
    }

    /// Write the saved value back (once) and disarm the signal path.
    pub fn restore(&mut self) -> Result<(), MsrError> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        crate::msr_signal::disarm();
        self.dev.write(self.event.msr, self.saved)
    }
}

impl Drop for ProgrammedCounter {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "tma: could not restore {} (MSR {:#x}) to {:#x}: {e}",
                self.event.register, self.event.msr, self.saved
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `/dev/cpu` with `0/msr` (a sparse file: offset N is MSR N) and a fake sysfs.
    struct Fake {
        _dir: tempfile::TempDir,
        setup: MsrSetup,
    }

    fn fake(rdpmc: Option<&str>, msr0: Option<(u32, u64)>) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev");
        std::fs::create_dir_all(dev.join("0")).unwrap();
        let f = File::create(dev.join("0/msr")).unwrap();
        if let Some((msr, v)) = msr0 {
            f.write_all_at(&v.to_le_bytes(), u64::from(msr)).unwrap();
        }
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(sys.join("bus/event_source/devices/cpu")).unwrap();
        if let Some(v) = rdpmc {
            std::fs::write(sys.join("bus/event_source/devices/cpu/rdpmc"), v).unwrap();
        }
        let setup = MsrSetup {
            dev,
            host: Host::new(sys, dir.path().join("proc")),
        };
        Fake { _dir: dir, setup }
    }

    /// The signal path holds one registration per process: tests that program a counter take
    /// turns.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn turn() -> std::sync::MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_msr(setup: &MsrSetup, msr: u32) -> u64 {
        MsrFile::open(&setup.device(0)).unwrap().read(msr).unwrap()
    }

    #[test]
    fn events_per_vendor() {
        let a = CycleEvent::for_vendor("AuthenticAMD").unwrap();
        assert_eq!((a.msr, a.value), (0xC001_0200, 0x0043_0076));
        let i = CycleEvent::for_vendor("GenuineIntel").unwrap();
        assert_eq!((i.msr, i.value), (0x186, 0x0043_003c));
        assert!(CycleEvent::for_vendor("Other").is_none());
    }

    #[test]
    fn programs_then_restores_on_drop_and_on_restore() {
        let _turn = turn();
        let previous = 0x1234_0000_0011; // an old value without the enable bit
        let f = fake(Some("2\n"), Some((AMD_PERF_CTL0, previous)));
        {
            let c = ProgrammedCounter::program(&f.setup, 0, "AuthenticAMD", false).unwrap();
            assert_eq!(c.saved(), previous);
            assert_eq!(read_msr(&f.setup, AMD_PERF_CTL0), 0x0043_0076);
            assert!(crate::msr_signal::armed());
        }
        assert_eq!(
            read_msr(&f.setup, AMD_PERF_CTL0),
            previous,
            "restored on drop"
        );
        assert!(!crate::msr_signal::armed());
        // Explicit restore, then drop: written back once, still the old value.
        let mut c = ProgrammedCounter::program(&f.setup, 0, "GenuineIntel", false).unwrap();
        assert_eq!(read_msr(&f.setup, INTEL_PERFEVTSEL0), 0x0043_003c);
        c.restore().unwrap();
        assert_eq!(read_msr(&f.setup, INTEL_PERFEVTSEL0), 0);
        drop(c);
        assert_eq!(read_msr(&f.setup, INTEL_PERFEVTSEL0), 0);
        // The AMD register was not touched by the Intel run.
        assert_eq!(read_msr(&f.setup, AMD_PERF_CTL0), previous);
    }

    #[test]
    fn the_signal_path_restores_too() {
        let _turn = turn();
        let f = fake(Some("2"), Some((AMD_PERF_CTL0, 0x42)));
        let c = ProgrammedCounter::program(&f.setup, 0, "AuthenticAMD", false).unwrap();
        assert_eq!(read_msr(&f.setup, AMD_PERF_CTL0), 0x0043_0076);
        // What the handler does first on SIGINT/SIGTERM/SIGHUP/SIGQUIT (before re-raising).
        crate::msr_signal::restore_now();
        assert_eq!(read_msr(&f.setup, AMD_PERF_CTL0), 0x42);
        assert!(!crate::msr_signal::armed());
        // The Drop afterwards writes the same value again: harmless.
        drop(c);
        assert_eq!(read_msr(&f.setup, AMD_PERF_CTL0), 0x42);
    }

    #[test]
    fn a_counter_in_use_is_refused_unless_forced() {
        let _turn = turn();
        let busy = AMD_LS_NOT_HALTED_CYC | USR | EN | 0x300;
        let f = fake(Some("2"), Some((AMD_PERF_CTL0, busy)));
        let e = ProgrammedCounter::program(&f.setup, 0, "AuthenticAMD", false).unwrap_err();
        assert!(
            matches!(e, MsrError::InUse { value, .. } if value == busy),
            "{e}"
        );
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(read_msr(&f.setup, AMD_PERF_CTL0), busy, "nothing written");
        let c = ProgrammedCounter::program(&f.setup, 0, "AuthenticAMD", true).unwrap();
        assert_eq!(read_msr(&f.setup, AMD_PERF_CTL0), 0x0043_0076);
        drop(c);
        assert_eq!(
            read_msr(&f.setup, AMD_PERF_CTL0),
            busy,
            "the other owner's value is back"
        );
    }

    #[test]
    fn each_missing_piece_has_its_own_error() {
        // No msr driver: the device file is missing.
        let f = fake(Some("2"), None);
        let e = f.setup.check(1, "AuthenticAMD", false).unwrap_err();
        assert!(matches!(e, MsrError::NoDriver(_)), "{e}");
        assert!(e.to_string().contains("modprobe msr"), "{e}");
        // rdpmc not allowed for counters outside perf.
        let f = fake(Some("1\n"), None);
        let e = f.setup.check(0, "AuthenticAMD", false).unwrap_err();
        assert!(e.to_string().contains("echo 2 | sudo tee"), "{e}");
        // No PMU at all (no rdpmc file).
        let f = fake(None, None);
        let e = f.setup.check(0, "AuthenticAMD", false).unwrap_err();
        assert!(matches!(e, MsrError::NoPmu(_)), "{e}");
        // Unknown vendor.
        let e = f.setup.check(0, "Other", false).unwrap_err();
        assert!(matches!(e, MsrError::Vendor(_)), "{e}");
        // Not root: the device is not writable (skipped when running as root, which may
        // write anything).
        let f = fake(Some("2"), None);
        let dev = f.setup.device(0);
        std::fs::set_permissions(&dev, std::os::unix::fs::PermissionsExt::from_mode(0o400))
            .unwrap();
        if OpenOptions::new().write(true).open(&dev).is_ok() {
            eprintln!("SKIP the not-root case: running as root, a read-only file is writable");
        } else {
            let e = f.setup.check(0, "AuthenticAMD", false).unwrap_err();
            assert!(matches!(e, MsrError::NotRoot(_)), "{e}");
            assert!(e.to_string().contains("sudo"), "{e}");
        }
    }
}
