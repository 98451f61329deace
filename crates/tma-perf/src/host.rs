//! Facts about the host, read from a `/sys` root and a `/proc` root that are parameters
//! ([`Host`]), so tests and `--root` read fake trees: the online CPU list,
//! `perf_event_paranoid`, the NMI watchdog, `/proc/cpuinfo` (CPU identity and flags), the
//! per-CPU topology and the process's effective capabilities. This is the one place that reads
//! them; the parsers take bytes and return typed errors.
//!
//! Mapping a cpuinfo signature to a CPU model stays in `tma-catalog` (pure); this module only
//! reads the file and hands its bytes over ([`Host::cpuinfo_bytes`]).

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
    #[error("an empty item in the list `{0}`")]
    EmptyItem(String),
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

/// The largest CPU range accepted in a list (guards against `0-4294967295`).
const MAX_RANGE: u32 = 65_536;

/// Parse a CPU list as the kernel and `-C` write it (`0-3,8,10-11`, a trailing newline
/// allowed): sorted, without duplicates.
pub fn parse_cpu_list(bytes: &[u8]) -> Result<Vec<u32>, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    let num = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| ParseError::NotANumber(s.trim().to_string()))
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(ParseError::EmptyItem(text.to_string()));
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(ParseError::BackwardRange(part.to_string()));
                }
                if b - a > MAX_RANGE {
                    return Err(ParseError::RangeTooLarge(part.to_string()));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parse a file holding one decimal integer (`2\n`, `-1`).
pub fn parse_int(bytes: &[u8]) -> Result<i64, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    text.parse()
        .map_err(|_| ParseError::NotANumber(text.to_string()))
}

/// The parts of `/proc/cpuinfo` the tools use: the first processor's vendor, model name and
/// flags, and every processor's `cpu MHz`. Family, model and stepping are identified by
/// `tma_catalog::parse_cpuinfo` from the same bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuInfo {
    /// `vendor_id` (`GenuineIntel`, `AuthenticAMD`).
    pub vendor: Option<String>,
    /// `model name`.
    pub model_name: Option<String>,
    /// `flags` of the first processor (`hypervisor`, `constant_tsc`, `tdx_guest`, ...).
    pub flags: Vec<String>,
    /// `cpu MHz` of every processor that has a readable one.
    pub mhz: Vec<f64>,
}

impl CpuInfo {
    /// Parse `/proc/cpuinfo` bytes (lines `key<tabs>: value`; lines without a colon are
    /// ignored, invalid UTF-8 replaced).
    pub fn parse(bytes: &[u8]) -> CpuInfo {
        let text = String::from_utf8_lossy(bytes);
        let mut c = CpuInfo::default();
        let mut have_flags = false;
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            match k {
                "flags" if !have_flags => {
                    c.flags = v.split_whitespace().map(str::to_string).collect();
                    have_flags = true;
                }
                "vendor_id" if c.vendor.is_none() => c.vendor = Some(v.to_string()),
                "model name" if c.model_name.is_none() => c.model_name = Some(v.to_string()),
                "cpu MHz" => {
                    if let Ok(x) = v.parse() {
                        c.mhz.push(x)
                    }
                }
                _ => {}
            }
        }
        c
    }

    /// Whether the first processor's `flags` name `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// Where one CPU sits, from `devices/system/cpu/cpuN/topology`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopology {
    pub cpu: u32,
    /// `physical_package_id` (-1 on platforms that do not know it).
    pub package: i64,
    /// `core_id`.
    pub core: i64,
    /// `thread_siblings_list`: the hardware threads sharing this core (this one included);
    /// empty when the kernel does not say.
    pub thread_siblings: Vec<u32>,
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

    /// Whether the kernel module `name` is loaded (`<sys>/module/<name>` is a directory).
    pub fn module_loaded(&self, name: &str) -> bool {
        self.sys.join("module").join(name).is_dir()
    }

    /// The loaded kernel modules whose name starts with `prefix`, sorted (empty when
    /// `<sys>/module` cannot be listed).
    pub fn kernel_modules(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = Host::entries(self.sys.join("module"))
            .map(|rd| {
                rd.filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .filter(|n| n.starts_with(prefix))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// `<proc>/cpuinfo`.
    pub fn cpuinfo_path(&self) -> PathBuf {
        self.proc.join("cpuinfo")
    }

    /// The bytes of `<proc>/cpuinfo` (for `tma_catalog::parse_cpuinfo`).
    pub fn cpuinfo_bytes(&self) -> Result<Vec<u8>, HostError> {
        Host::read(self.cpuinfo_path()).map(|(_, b)| b)
    }

    /// `<proc>/cpuinfo`, parsed.
    pub fn cpuinfo(&self) -> Result<CpuInfo, HostError> {
        self.cpuinfo_bytes().map(|b| CpuInfo::parse(&b))
    }

    /// Whether the first processor in `<proc>/cpuinfo` has `flag` (false when unreadable).
    pub fn has_cpu_flag(&self, flag: &str) -> bool {
        self.cpuinfo().is_ok_and(|c| c.has_flag(flag))
    }

    /// The online CPUs, from `<sys>/devices/system/cpu/online`.
    pub fn online_cpus(&self) -> Result<Vec<u32>, HostError> {
        Host::parsed(self.sys.join("devices/system/cpu/online"), parse_cpu_list)
    }

    /// The online CPUs, or CPU 0 alone when the list is missing or malformed (a process can
    /// always run somewhere).
    pub fn online_cpus_or_cpu0(&self) -> Vec<u32> {
        self.online_cpus().unwrap_or_else(|_| vec![0])
    }

    /// `<proc>/sys/kernel/perf_event_paranoid`.
    pub fn perf_event_paranoid(&self) -> Result<i32, HostError> {
        let path = self.proc.join("sys/kernel/perf_event_paranoid");
        Host::parsed(path, |b| {
            let v = parse_int(b)?;
            i32::try_from(v).map_err(|_| ParseError::NotANumber(v.to_string()))
        })
    }

    /// `<proc>/sys/kernel/perf_event_paranoid` as text for messages (`unknown` when
    /// unreadable).
    pub fn paranoid_text(&self) -> String {
        self.perf_event_paranoid()
            .map_or_else(|_| "unknown".to_string(), |p| p.to_string())
    }

    /// `<proc>/sys/kernel/nmi_watchdog`: 0 off, otherwise on. A missing file is an error for
    /// which [`HostError::is_missing`] holds (a kernel without the hard-lockup detector).
    pub fn nmi_watchdog(&self) -> Result<i64, HostError> {
        Host::parsed(self.proc.join("sys/kernel/nmi_watchdog"), parse_int)
    }

    /// Whether the NMI watchdog is on (it takes one general-purpose counter); off when the
    /// control is absent or unreadable.
    pub fn nmi_watchdog_on(&self) -> bool {
        self.nmi_watchdog().is_ok_and(|v| v != 0)
    }

    /// Where `cpu` sits, from `<sys>/devices/system/cpu/cpuN/topology/{physical_package_id,
    /// core_id, thread_siblings_list}`.
    pub fn cpu_topology(&self, cpu: u32) -> Result<CpuTopology, HostError> {
        let dir = self
            .sys
            .join(format!("devices/system/cpu/cpu{cpu}/topology"));
        let siblings = match Host::parsed(dir.join("thread_siblings_list"), parse_cpu_list) {
            Ok(v) => v,
            Err(e) if e.is_missing() => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(CpuTopology {
            cpu,
            package: Host::parsed(dir.join("physical_package_id"), parse_int)?,
            core: Host::parsed(dir.join("core_id"), parse_int)?,
            thread_siblings: siblings,
        })
    }

    /// Whether `<proc>/<pid>` exists (a process, or a thread id, alive or a zombie).
    pub fn has_process(&self, pid: i32) -> bool {
        self.proc.join(pid.to_string()).is_dir()
    }

    /// Where the open file descriptors of process `pid` point (the links in `<proc>/<pid>/fd`:
    /// `/dev/kvm`, `anon_inode:kvm-vm`, ...); links that vanish meanwhile are skipped. Listing
    /// another user's process is an error of kind `PermissionDenied`.
    pub fn fd_targets(&self, pid: i32) -> Result<Vec<PathBuf>, HostError> {
        Ok(Host::entries(self.proc.join(pid.to_string()).join("fd"))?
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .collect())
    }

    /// The thread ids of process `pid`, sorted, from the entries of `<proc>/<pid>/task` (empty
    /// for a zombie). A process that does not exist is an error for which
    /// [`HostError::is_missing`] holds.
    pub fn threads(&self, pid: i32) -> Result<Vec<i32>, HostError> {
        let mut tids: Vec<i32> = Host::entries(self.proc.join(pid.to_string()).join("task"))?
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        tids.sort_unstable();
        Ok(tids)
    }

    /// The effective capability mask of this process (`CapEff` in `<proc>/self/status`).
    pub fn effective_capabilities(&self) -> Result<u64, HostError> {
        let path = self.proc.join("self/status");
        Host::parsed(path, |b| {
            let text = std::str::from_utf8(b).map_err(|_| ParseError::NotUtf8)?;
            let v = text
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .ok_or(ParseError::Empty)?;
            u64::from_str_radix(v.trim(), 16).map_err(|_| ParseError::NotANumber(v.trim().into()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (rel, content) in files {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        d
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list(b"0-3,8\n"), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list(b"5,0-1"), Ok(vec![0, 1, 5]));
        assert_eq!(parse_cpu_list(b"1,1"), Ok(vec![1]));
        assert_eq!(parse_cpu_list(b"7"), Ok(vec![7]));
    }

    #[test]
    fn malformed_cpu_lists_are_typed_errors() {
        assert_eq!(parse_cpu_list(b""), Err(ParseError::Empty));
        assert_eq!(parse_cpu_list(b" \n"), Err(ParseError::Empty));
        assert_eq!(
            parse_cpu_list(b"3-1"),
            Err(ParseError::BackwardRange("3-1".into()))
        );
        assert_eq!(
            parse_cpu_list(b"a"),
            Err(ParseError::NotANumber("a".into()))
        );
        assert_eq!(
            parse_cpu_list(b"0,"),
            Err(ParseError::EmptyItem("0,".into()))
        );
        assert_eq!(
            parse_cpu_list(b"0-4294967295"),
            Err(ParseError::RangeTooLarge("0-4294967295".into()))
        );
        assert_eq!(parse_cpu_list(b"0-\xff"), Err(ParseError::NotUtf8));
        assert_eq!(
            parse_cpu_list(b"-1"),
            Err(ParseError::NotANumber(String::new()))
        );
    }

    #[test]
    fn ints() {
        assert_eq!(parse_int(b"2\n"), Ok(2));
        assert_eq!(parse_int(b"-1"), Ok(-1));
        assert_eq!(parse_int(b""), Err(ParseError::Empty));
        assert_eq!(parse_int(b"on"), Err(ParseError::NotANumber("on".into())));
        assert_eq!(parse_int(b"\xfe"), Err(ParseError::NotUtf8));
    }

    #[test]
    fn cpuinfo_first_processor_and_every_mhz() {
        let c = CpuInfo::parse(
            b"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\n\
              cpu MHz\t\t: 2600.000\nflags\t\t: fpu hypervisor sev\n\n\
              processor\t: 1\nvendor_id\t: Other\ncpu MHz\t\t: 2400.000\nflags\t\t: fpu\n",
        );
        assert_eq!(c.vendor.as_deref(), Some("AuthenticAMD"));
        assert_eq!(c.model_name.as_deref(), Some("AMD EPYC 9R14"));
        assert!(c.has_flag("hypervisor") && c.has_flag("sev") && !c.has_flag("hyper"));
        assert_eq!(c.mhz, vec![2600.0, 2400.0]);
        let garbage = CpuInfo::parse(b"\xff\xfe no colon\n");
        assert_eq!(garbage, CpuInfo::default());
    }

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
    fn threads_of_a_process() {
        let d = tree(&[
            ("proc/42/task/42/comm", "a\n"),
            ("proc/42/task/7/comm", "b\n"),
            ("proc/42/task/notatid/comm", "c\n"),
        ]);
        let h = Host::under(d.path());
        assert_eq!(h.threads(42).unwrap(), vec![7, 42]);
        assert!(h.has_process(42) && !h.has_process(43));
        assert_eq!(h.proc_bytes("42/task/7/comm").unwrap(), b"b\n");
        assert_eq!(h.proc_text("42/task/7/comm").unwrap(), "b");
        let e = h.threads(43).unwrap_err();
        assert!(e.is_missing() && e.path().ends_with("proc/43/task"), "{e}");
        let me = std::process::id() as i32;
        assert!(Host::system().threads(me).unwrap().contains(&me));
        let f = tempfile::tempfile().unwrap();
        let fds = Host::system().fd_targets(me).unwrap();
        assert!(
            fds.iter()
                .any(|t| t.to_string_lossy().contains("(deleted)")),
            "{fds:?}"
        );
        drop(f);
        assert!(h.fd_targets(42).unwrap_err().is_missing());
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

    #[test]
    fn loaded_modules() {
        let d = tree(&[
            ("sys/module/kvm/refcnt", "1\n"),
            ("sys/module/kvm_pvm/refcnt", "1\n"),
            ("sys/module/kvm_amd/refcnt", "1\n"),
            ("sys/module/tun/refcnt", "0\n"),
        ]);
        let h = Host::under(d.path());
        assert!(h.module_loaded("kvm_amd") && !h.module_loaded("kvm_intel"));
        assert_eq!(h.kernel_modules("kvm_"), vec!["kvm_amd", "kvm_pvm"]);
        assert_eq!(h.kernel_modules("kvm").len(), 3);
        let none = Host::under(Path::new("/nonexistent"));
        assert!(!none.module_loaded("kvm") && none.kernel_modules("").is_empty());
    }

    #[test]
    fn nmi_watchdog_from_proc_fixtures() {
        let live = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/live");
        assert!(Host::new("/nonexistent", live.join("proc-nmi-on")).nmi_watchdog_on());
        assert!(!Host::new("/nonexistent", live.join("proc-nmi-off")).nmi_watchdog_on());
    }
}
