//! Facts about the host, read from a `/sys` root and a `/proc` root that are parameters
//! ([`Host`]), so tests and `--root` read fake trees: the online CPU list,
//! `perf_event_paranoid`, the NMI watchdog, `/proc/cpuinfo` (CPU identity and flags), the
//! per-CPU topology, the process's effective capabilities, the transparent-huge-page mode and
//! the huge-page backing of a process's mappings (`/proc/PID/smaps`). This is the one place that
//! reads them; the parsers take bytes and return typed errors.
//!
//! Mapping a cpuinfo signature to a CPU model stays in `tma-catalog` (pure); this module only
//! reads the file and hands its bytes over ([`Host::cpuinfo_bytes`]).

mod cpuinfo;
mod cpus;
mod kernel;
mod maps;
mod mounts;
mod process;
mod smaps;

pub use cpuinfo::CpuInfo;
pub use cpus::{parse_cpu_list, CpuTopology};
pub use kernel::{parse_int, parse_selected, parse_thp_mode, ThpMode};
pub use maps::{parse_maps, parse_maps_header, MapsLine};
pub use mounts::parse_cgroup2_mount;
pub use process::{parse_schedstat, parse_stat_processor, stat_fields};
pub use smaps::{parse_smaps, HugePageShare, SmapsEntry};

use std::path::{Path, PathBuf};

/// What is wrong with the content of a host file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the content is empty")]
    Empty,
    #[error("the content is not UTF-8")]
    NotUtf8,
    #[error("`{0}` is not a decimal number")]
    NotANumber(String),
    #[error("the range `{0}` ends before it starts")]
    BackwardRange(String),
    #[error("the range `{0}` is implausibly large")]
    RangeTooLarge(String),
    #[error("the list names over {0} CPUs (repeats counted): implausibly many")]
    ListTooLong(usize),
    #[error("an empty item in the list `{0}`")]
    EmptyItem(String),
    #[error("no choice is marked `[selected]` in `{0}`")]
    NoSelection(String),
    #[error("line {line}: {what}")]
    BadLine { line: usize, what: String },
}

/// A host fact that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bad content in {}: {error}", path.display())]
    Parse { path: PathBuf, error: ParseError },
}

impl HostError {
    /// The file the fact was read from.
    pub fn path(&self) -> &Path {
        match self {
            HostError::Read { path, .. } | HostError::Parse { path, .. } => path,
        }
    }

    /// As an I/O error (a malformed content becomes `InvalidData`), for callers whose error
    /// type already has a `path` + `io::Error` variant.
    pub fn into_io(self) -> std::io::Error {
        match self {
            HostError::Read { source, .. } => source,
            HostError::Parse { error, .. } => {
                std::io::Error::new(std::io::ErrorKind::InvalidData, error)
            }
        }
    }

    /// The file does not exist (the kernel lacks the feature), as opposed to unreadable or
    /// malformed.
    pub fn is_missing(&self) -> bool {
        matches!(self, HostError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// The `/sys` and `/proc` roots the host facts are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub sys: PathBuf,
    pub proc: PathBuf,
}

impl Default for Host {
    fn default() -> Self {
        Host::system()
    }
}

impl Host {
    /// The running system: `/sys` and `/proc`.
    pub fn system() -> Host {
        Host::new("/sys", "/proc")
    }

    pub fn new(sys: impl Into<PathBuf>, proc: impl Into<PathBuf>) -> Host {
        Host {
            sys: sys.into(),
            proc: proc.into(),
        }
    }

    /// `<base>/sys` and `<base>/proc` (a fake tree, `--root DIR`).
    pub fn under(base: &Path) -> Host {
        Host::new(base.join("sys"), base.join("proc"))
    }

    fn read(path: PathBuf) -> Result<(PathBuf, Vec<u8>), HostError> {
        match std::fs::read(&path) {
            Ok(b) => Ok((path, b)),
            Err(source) => Err(HostError::Read { path, source }),
        }
    }

    /// The entries of the directory `path` (those that cannot be read are skipped).
    fn entries(path: PathBuf) -> Result<impl Iterator<Item = std::fs::DirEntry>, HostError> {
        match std::fs::read_dir(&path) {
            Ok(rd) => Ok(rd.filter_map(|e| e.ok())),
            Err(source) => Err(HostError::Read { path, source }),
        }
    }

    fn parsed<T>(
        path: PathBuf,
        parse: impl FnOnce(&[u8]) -> Result<T, ParseError>,
    ) -> Result<T, HostError> {
        let (path, bytes) = Host::read(path)?;
        parse(&bytes).map_err(|error| HostError::Parse { path, error })
    }

    /// The text of `<sys>/<rel>`, trimmed (for the facts only one tool looks at, such as the
    /// THP mode or the cpufreq governor).
    pub fn sys_text(&self, rel: &str) -> Result<String, HostError> {
        let (_, b) = Host::read(self.sys.join(rel))?;
        Ok(String::from_utf8_lossy(&b).trim().to_string())
    }

    /// The text of `<proc>/<rel>`, trimmed.
    pub fn proc_text(&self, rel: &str) -> Result<String, HostError> {
        let (_, b) = Host::read(self.proc.join(rel))?;
        Ok(String::from_utf8_lossy(&b).trim().to_string())
    }

    /// The bytes of `<proc>/<rel>` (`kallsyms`, `<pid>/maps`).
    pub fn proc_bytes(&self, rel: &str) -> Result<Vec<u8>, HostError> {
        Host::read(self.proc.join(rel)).map(|(_, b)| b)
    }

    /// Whether `<sys>/<rel>` exists.
    pub fn sys_exists(&self, rel: &str) -> bool {
        self.sys.join(rel).exists()
    }
}

/// A temporary tree of `files` (path relative to the root, content), for the tests of the
/// host facts.
#[cfg(test)]
pub(crate) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (rel, content) in files {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_from_a_fake_tree() {
        let d = tree(&[
            ("sys/devices/system/cpu/online", "0-1\n"),
            (
                "sys/devices/system/cpu/cpu1/topology/physical_package_id",
                "0\n",
            ),
            ("sys/devices/system/cpu/cpu1/topology/core_id", "3\n"),
            (
                "sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
                "0-1\n",
            ),
            (
                "sys/devices/system/cpu/cpu0/topology/physical_package_id",
                "0\n",
            ),
            ("sys/devices/system/cpu/cpu0/topology/core_id", "x\n"),
            ("proc/sys/kernel/perf_event_paranoid", "2\n"),
            ("proc/sys/kernel/nmi_watchdog", "1\n"),
            ("proc/self/status", "Name:\tx\nCapEff:\t0000004000200000\n"),
            (
                "proc/cpuinfo",
                "vendor_id\t: GenuineIntel\nflags\t\t: fpu hypervisor\n",
            ),
        ]);
        let h = Host::under(d.path());
        assert_eq!(h.online_cpus().unwrap(), vec![0, 1]);
        assert_eq!(h.online_cpus_or_cpu0(), vec![0, 1]);
        assert_eq!(h.perf_event_paranoid().unwrap(), 2);
        assert_eq!(h.paranoid_text(), "2");
        assert!(h.nmi_watchdog_on());
        assert_eq!(h.effective_capabilities().unwrap(), 0x4000200000);
        assert!(h.has_cpu_flag("hypervisor"));
        assert_eq!(
            h.cpu_topology(1).unwrap(),
            CpuTopology {
                cpu: 1,
                package: 0,
                core: 3,
                thread_siblings: vec![0, 1]
            }
        );
        let e = h.cpu_topology(0).unwrap_err();
        assert!(matches!(
            &e,
            HostError::Parse { error: ParseError::NotANumber(s), .. } if s == "x"
        ));
        assert!(e.path().ends_with("cpu0/topology/core_id"));
        assert!(h.cpu_topology(2).unwrap_err().is_missing());
    }
    #[test]
    fn missing_facts() {
        let h = Host::under(Path::new("/nonexistent"));
        assert!(h.online_cpus().unwrap_err().is_missing());
        assert_eq!(h.online_cpus_or_cpu0(), vec![0]);
        assert!(h.nmi_watchdog().unwrap_err().is_missing());
        assert!(!h.nmi_watchdog_on());
        assert_eq!(h.paranoid_text(), "unknown");
        assert!(!h.has_cpu_flag("hypervisor"));
        let e = h.perf_event_paranoid().unwrap_err();
        assert!(e
            .to_string()
            .starts_with("cannot read /nonexistent/proc/sys/kernel/perf_event_paranoid"));
    }
}
