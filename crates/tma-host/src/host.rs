//! Facts about the host, read from a `/sys` root and a `/proc` root that are parameters
//! ([`Host`]), so tests and `--root` read fake trees: the online CPU list,
//! `perf_event_paranoid`, the NMI watchdog, `/proc/cpuinfo` (CPU identity and flags), the
//! per-CPU topology, the process's effective capabilities, the transparent-huge-page mode and
//! the huge-page backing of a process's mappings (`/proc/PID/smaps`). This is the one place that
//! reads them; the parsers take bytes and return typed errors.
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

/// The mount point of the first `cgroup2` file system in a `/proc/self/mounts` text (octal
/// escapes such as `\040` for a space decoded).
pub fn parse_cgroup2_mount(bytes: &[u8]) -> Option<PathBuf> {
    let text = String::from_utf8_lossy(bytes);
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_, dir, fstype) = (f.next()?, f.next()?, f.next()?);
        (fstype == "cgroup2").then(|| PathBuf::from(unescape_mount(dir)))
    })
}

fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) if b[i] == b'\\' => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
                // Many plausible ranges still make an implausible list (the kernel's most is
                // 8192 CPUs): the list, repeats included, is held to MAX_RANGE + 1 entries.
                if out.len() + (b - a) as usize >= MAX_RANGE as usize {
                    return Err(ParseError::ListTooLong(MAX_RANGE as usize));
                }
                out.extend(a..=b);
            }
            None => {
                if out.len() >= MAX_RANGE as usize {
                    return Err(ParseError::ListTooLong(MAX_RANGE as usize));
                }
                out.push(num(part)?)
            }
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

/// The fields of a `/proc/<pid>/stat` line after the command name, from field 3 (the state)
/// on. The name (field 2, in parentheses) may hold spaces, parentheses and bytes that are not
/// UTF-8, so the fields start after its last `)`; `None` when there is no `)`.
pub fn stat_fields(bytes: &[u8]) -> Option<impl Iterator<Item = &[u8]>> {
    let close = bytes.iter().rposition(|&b| b == b')')?;
    Some(
        bytes[close + 1..]
            .split(u8::is_ascii_whitespace)
            .filter(|f| !f.is_empty()),
    )
}

/// The CPU a thread last ran on: field 39 (`processor`) of a `/proc/<tid>/stat` line.
pub fn parse_stat_processor(bytes: &[u8]) -> Result<u32, ParseError> {
    let field = stat_fields(bytes)
        .ok_or_else(|| ParseError::BadLine {
            line: 1,
            what: "no `)` closing the command name".into(),
        })?
        .nth(39 - 3)
        .ok_or_else(|| ParseError::BadLine {
            line: 1,
            what: "fewer than 39 fields".into(),
        })?;
    let text = std::str::from_utf8(field).map_err(|_| ParseError::NotUtf8)?;
    text.parse()
        .map_err(|_| ParseError::NotANumber(text.chars().take(40).collect()))
}

/// A thread's time on a CPU and its time runnable but waiting for one (ns): the first two
/// fields of `/proc/<tid>/schedstat` (`run time`, `run delay`, `timeslices`).
pub fn parse_schedstat(bytes: &[u8]) -> Result<(u64, u64), ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let mut fields = text.split_ascii_whitespace();
    let mut next = || -> Result<u64, ParseError> {
        let field = fields.next().ok_or(ParseError::Empty)?;
        field
            .parse()
            .map_err(|_| ParseError::NotANumber(field.chars().take(40).collect()))
    };
    Ok((next()?, next()?))
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

/// The system-wide transparent-huge-page mode (`kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpMode {
    /// Every large enough anonymous mapping may get huge pages.
    Always,
    /// Only mappings advised with `madvise(MADV_HUGEPAGE)` get huge pages.
    Madvise,
    /// No transparent huge pages.
    Never,
}

impl ThpMode {
    /// The name the kernel uses.
    pub fn name(self) -> &'static str {
        match self {
            ThpMode::Always => "always",
            ThpMode::Madvise => "madvise",
            ThpMode::Never => "never",
        }
    }
}

impl std::fmt::Display for ThpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The selected word of a kernel choice file (`always [madvise] never` gives `madvise`; a file
/// holding one bare word is that word).
pub fn parse_selected(bytes: &[u8]) -> Result<String, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    // A file holding one bare word (no choices offered) is that word.
    if !text.contains('[') && !text.contains(char::is_whitespace) {
        return Ok(text.to_string());
    }
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .map(str::to_string)
        .ok_or_else(|| ParseError::NoSelection(text.to_string()))
}

/// Parse `transparent_hugepage/enabled` (`always [madvise] never`).
pub fn parse_thp_mode(bytes: &[u8]) -> Result<ThpMode, ParseError> {
    let sel = parse_selected(bytes)?;
    match sel.as_str() {
        "always" => Ok(ThpMode::Always),
        "madvise" => Ok(ThpMode::Madvise),
        "never" => Ok(ThpMode::Never),
        _ => Err(ParseError::NoSelection(
            String::from_utf8_lossy(bytes).trim().to_string(),
        )),
    }
}

/// One mapping of `/proc/PID/smaps`: its address range and the page counts the huge-page
/// questions need (sizes in bytes; the file gives them in kB).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SmapsEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Permissions (`rw-p`).
    pub perms: String,
    /// The mapped file or pseudo-name (`[heap]`), empty for anonymous memory.
    pub path: String,
    /// `Size`.
    pub size: u64,
    /// `KernelPageSize` (4096 for ordinary memory, 2 MiB or 1 GiB for hugetlbfs).
    pub kernel_page_size: u64,
    /// `Rss`.
    pub rss: u64,
    /// `Anonymous`.
    pub anonymous: u64,
    /// `AnonHugePages`: anonymous memory mapped by transparent huge pages.
    pub anon_huge_pages: u64,
    /// `ShmemPmdMapped`: shared memory mapped by huge pages.
    pub shmem_pmd_mapped: u64,
    /// `FilePmdMapped`: file memory mapped by huge pages.
    pub file_pmd_mapped: u64,
    /// `Shared_Hugetlb`: hugetlbfs pages shared with another process (not counted in `Rss`).
    pub shared_hugetlb: u64,
    /// `Private_Hugetlb`: hugetlbfs pages private to this process (not counted in `Rss`).
    pub private_hugetlb: u64,
    /// `VmFlags` (`hg` = advised MADV_HUGEPAGE, `nh` = MADV_NOHUGEPAGE, `ht` = hugetlbfs).
    pub vm_flags: Vec<String>,
}

impl SmapsEntry {
    /// Bytes of the mapping mapped by huge pages of any kind (transparent anonymous, shared
    /// memory, file; a hugetlbfs mapping counts whole when resident).
    pub fn huge_bytes(&self) -> u64 {
        if self.kernel_page_size > 4096 {
            return self.resident();
        }
        self.anon_huge_pages + self.shmem_pmd_mapped + self.file_pmd_mapped
    }

    /// Resident bytes: `Rss` plus the hugetlbfs pages, which smaps keeps out of `Rss`.
    pub fn resident(&self) -> u64 {
        self.rss + self.shared_hugetlb + self.private_hugetlb
    }

    /// Whether this is a hugetlbfs mapping (`ht` flag or a page size above 4 KiB).
    pub fn is_hugetlb(&self) -> bool {
        self.kernel_page_size > 4096 || self.has_vm_flag("ht")
    }

    /// Whether `VmFlags` holds `flag`.
    pub fn has_vm_flag(&self, flag: &str) -> bool {
        self.vm_flags.iter().any(|f| f == flag)
    }
}

/// Parse `/proc/PID/smaps` bytes: a header line per mapping (`start-end perms offset dev inode
/// [path]`) followed by `Field:  N kB` lines and `VmFlags:`. Fields not listed in
/// [`SmapsEntry`] are skipped; a malformed header or size is an error naming the line.
pub fn parse_smaps(bytes: &[u8]) -> Result<Vec<SmapsEntry>, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let mut out: Vec<SmapsEntry> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let bad = |what: &str| ParseError::BadLine {
            line: line_no,
            what: what.to_string(),
        };
        if line.trim().is_empty() {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some(field) = first.strip_suffix(':') {
            let Some(entry) = out.last_mut() else {
                return Err(bad("a field before the first mapping header"));
            };
            let rest = line[first.len()..].trim();
            if field == "VmFlags" {
                entry.vm_flags = rest.split_whitespace().map(str::to_string).collect();
                continue;
            }
            let slot = match field {
                "Size" => &mut entry.size,
                "KernelPageSize" => &mut entry.kernel_page_size,
                "Rss" => &mut entry.rss,
                "Anonymous" => &mut entry.anonymous,
                "AnonHugePages" => &mut entry.anon_huge_pages,
                "ShmemPmdMapped" => &mut entry.shmem_pmd_mapped,
                "FilePmdMapped" => &mut entry.file_pmd_mapped,
                "Shared_Hugetlb" => &mut entry.shared_hugetlb,
                "Private_Hugetlb" => &mut entry.private_hugetlb,
                _ => continue,
            };
            let kb = rest
                .strip_suffix("kB")
                .map(str::trim)
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| bad(&format!("`{field}` is not a size in kB: `{rest}`")))?;
            *slot = kb.checked_mul(1024).ok_or_else(|| {
                bad(&format!(
                    "`{field}` is too large to be a size in bytes: `{rest}`"
                ))
            })?;
            continue;
        }
        let MapsLine {
            start,
            end,
            perms,
            path,
            ..
        } = parse_maps_header(line).map_err(|e| bad(&e))?;
        out.push(SmapsEntry {
            start,
            end,
            perms,
            path,
            ..SmapsEntry::default()
        });
    }
    Ok(out)
}

/// One mapping header of `/proc/PID/maps` (and of each `smaps` entry):
/// `start-end perms offset dev inode [path]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapsLine {
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `r-xp`.
    pub perms: String,
    /// File offset of `start`.
    pub offset: u64,
    /// The mapped file or pseudo-name (`[vdso]`), empty for anonymous memory; spaces inside
    /// the path are kept.
    pub path: String,
}

/// Parse one mapping header; the error says what was wrong with it.
pub fn parse_maps_header(line: &str) -> Result<MapsLine, String> {
    let mut words = line.split_whitespace();
    let range = words.next().unwrap_or("");
    let (start, end) = range
        .split_once('-')
        .and_then(|(a, b)| {
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .filter(|(a, b)| a <= b)
        .ok_or_else(|| format!("`{range}` is not an address range"))?;
    let perms = words
        .next()
        .ok_or("a mapping header without permissions")?
        .to_string();
    let offset = words
        .next()
        .and_then(|o| u64::from_str_radix(o, 16).ok())
        .ok_or("a mapping header without a hexadecimal offset")?;
    // device, inode, then the path (which may contain spaces).
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
    }
    Ok(MapsLine {
        start,
        end,
        perms,
        offset,
        path: rest.trim().to_string(),
    })
}

/// Every mapping of a `/proc/PID/maps` file; lines that are not mapping headers are skipped
/// (the file can change while it is read, and a truncated last line is not an error).
pub fn parse_maps(bytes: &[u8]) -> Vec<MapsLine> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| parse_maps_header(l).ok())
        .collect()
}

/// How much of some address ranges is backed by huge pages, from smaps
/// ([`Host::huge_page_share`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HugePageShare {
    /// Bytes of the ranges that lie in some mapping.
    pub bytes: u64,
    /// Of those, bytes on huge pages.
    pub huge_bytes: u64,
    /// Mappings overlapping the ranges.
    pub mappings: usize,
    /// Every such mapping lies wholly inside the ranges, so its huge-page count belongs to
    /// them. When a mapping also extends outside, smaps cannot say where its huge pages are
    /// and its count (capped at the overlap) is an upper bound.
    pub exact: bool,
}

impl HugePageShare {
    /// `huge_bytes / bytes` (0 when nothing is mapped).
    pub fn share(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.huge_bytes as f64 / self.bytes as f64
        }
    }

    /// Sum over the `entries` overlapping `ranges` (half-open, not overlapping each other).
    pub fn of(entries: &[SmapsEntry], ranges: &[std::ops::Range<u64>]) -> HugePageShare {
        let mut s = HugePageShare {
            exact: true,
            ..HugePageShare::default()
        };
        for e in entries {
            let overlap: u64 = ranges
                .iter()
                .map(|r| e.end.min(r.end).saturating_sub(e.start.max(r.start)))
                .sum();
            if overlap == 0 {
                continue;
            }
            s.mappings += 1;
            s.bytes += overlap;
            s.huge_bytes += e.huge_bytes().min(overlap);
            if overlap < e.end - e.start {
                s.exact = false;
            }
        }
        s
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

    /// Where the cgroup v2 hierarchy is mounted, from `<proc>/self/mounts` (the first
    /// `cgroup2` mount: `/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid set-up).
    /// A mount point under `/sys` is given under this host's sys root, so fake trees work.
    pub fn cgroup2_mount(&self) -> Result<Option<PathBuf>, HostError> {
        let (_, bytes) = Host::read(self.proc.join("self/mounts"))?;
        Ok(
            parse_cgroup2_mount(&bytes).map(|m| match m.strip_prefix("/sys") {
                Ok(rest) => self.sys.join(rest),
                Err(_) => m,
            }),
        )
    }

    /// The directory of the cgroup `name`: an absolute path as is, else a path relative to
    /// the cgroup v2 mount (`system.slice/nginx.service`, or the `0::/...` line of
    /// `/proc/PID/cgroup`). An error when a relative name is given and no cgroup v2
    /// hierarchy is mounted.
    pub fn cgroup_dir(&self, name: impl AsRef<Path>) -> Result<PathBuf, String> {
        let p = name.as_ref();
        if p.is_absolute() && p.exists() {
            return Ok(p.to_path_buf());
        }
        let mount = self
            .cgroup2_mount()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!(
                    "no cgroup v2 hierarchy is mounted (no cgroup2 line in {}/self/mounts), so \
                     cgroup {:?} cannot be found",
                    self.proc.display(),
                    p.display().to_string()
                )
            })?;
        // Relative to the mount, with or without leading slashes.
        let rel: PathBuf = p
            .components()
            .filter(|c| !matches!(c, std::path::Component::RootDir))
            .collect();
        Ok(if rel.as_os_str().is_empty() {
            mount
        } else {
            mount.join(rel)
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

    /// The process ids under `<proc>` (its numeric entries), sorted.
    pub fn pids(&self) -> Result<Vec<i32>, HostError> {
        let mut pids: Vec<i32> = Host::entries(self.proc.clone())?
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        pids.sort_unstable();
        Ok(pids)
    }

    /// The value of the field `name` in `<proc>/<pid>/status` (`THP_enabled`, `Name`),
    /// trimmed; `None` when the kernel does not show that field.
    pub fn status_field(&self, pid: i32, name: &str) -> Result<Option<String>, HostError> {
        let text = self.proc_text(&format!("{pid}/status"))?;
        Ok(text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k == name).then(|| v.trim().to_string())
        }))
    }

    /// The CPU thread `tid` last ran on (`<proc>/<tid>/stat`; any thread id, listed or not).
    pub fn thread_cpu(&self, tid: i32) -> Result<u32, HostError> {
        Host::parsed(
            self.proc.join(tid.to_string()).join("stat"),
            parse_stat_processor,
        )
    }

    /// Thread `tid`'s time on a CPU and time waiting, runnable, for one, in ns
    /// (`<proc>/<tid>/schedstat`; missing on a kernel built without it).
    pub fn thread_schedstat(&self, tid: i32) -> Result<(u64, u64), HostError> {
        Host::parsed(
            self.proc.join(tid.to_string()).join("schedstat"),
            parse_schedstat,
        )
    }

    /// The system THP mode, from `<sys>/kernel/mm/transparent_hugepage/enabled` (missing when
    /// the kernel is built without THP).
    pub fn thp_mode(&self) -> Result<ThpMode, HostError> {
        Host::parsed(
            self.sys.join("kernel/mm/transparent_hugepage/enabled"),
            parse_thp_mode,
        )
    }

    /// The mappings of process `pid` (`None`: this process, `<proc>/self`), from
    /// `<proc>/PID/smaps`.
    pub fn smaps(&self, pid: Option<i32>) -> Result<Vec<SmapsEntry>, HostError> {
        let who = pid.map_or_else(|| "self".to_string(), |p| p.to_string());
        Host::parsed(self.proc.join(who).join("smaps"), parse_smaps)
    }

    /// How much of `ranges` (half-open address ranges, not overlapping each other) of process
    /// `pid` (`None`: this process) is on huge pages, from the smaps entries covering them.
    pub fn huge_page_share(
        &self,
        pid: Option<i32>,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<HugePageShare, HostError> {
        Ok(HugePageShare::of(&self.smaps(pid)?, ranges))
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

    #[test]
    fn cgroup2_mount_of_hybrid_and_unified_layouts() {
        let hybrid =
            b"tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n\
                       cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(
            parse_cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let unified = b"cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(
            parse_cgroup2_mount(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        let spaced = b"none /mnt/my\\040cg cgroup2 rw 0 0\n";
        assert_eq!(
            parse_cgroup2_mount(spaced),
            Some(PathBuf::from("/mnt/my cg"))
        );
        assert_eq!(parse_cgroup2_mount(b"proc /proc proc rw 0 0\n"), None);
    }

    #[test]
    fn cgroup_names_resolve_under_the_mount_of_the_host_root() {
        let d = tree(&[(
            "proc/self/mounts",
            "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
        )]);
        let host = Host::under(d.path());
        let want = d.path().join("sys/fs/cgroup/system.slice/x.service");
        assert_eq!(host.cgroup_dir("system.slice/x.service").unwrap(), want);
        assert_eq!(host.cgroup_dir("/system.slice/x.service").unwrap(), want);
        let none = tree(&[("proc/self/mounts", "proc /proc proc rw 0 0\n")]);
        let e = Host::under(none.path()).cgroup_dir("a.slice").unwrap_err();
        assert!(e.contains("no cgroup v2 hierarchy"), "{e}");
    }

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
        // Plausible ranges that add up to an implausible list (found by the proc fuzz target:
        // 8 KB of them asked for over a megabyte); a long list of single CPUs too.
        let many = vec!["0-4095"; 17].join(",");
        assert_eq!(
            parse_cpu_list(many.as_bytes()),
            Err(ParseError::ListTooLong(65_536))
        );
        let singles = vec!["1"; 65_537].join(",");
        assert_eq!(
            parse_cpu_list(singles.as_bytes()),
            Err(ParseError::ListTooLong(65_536))
        );
        assert_eq!(
            parse_cpu_list(vec!["0-4095"; 15].join(",").as_bytes()).map(|v| v.len()),
            Ok(4096)
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

    /// Three mappings as a 6.x kernel writes them: a file mapping, an anonymous one advised
    /// MADV_HUGEPAGE with two 2 MiB pages, and one advised MADV_NOHUGEPAGE.
    const SMAPS: &[u8] = b"\
55d0c0a00000-55d0c0a21000 r-xp 00000000 fd:01 1234567                    /usr/bin/tma workload
Size:                132 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                 128 kB
Pss:                 128 kB
Anonymous:             0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
THPeligible:    0
VmFlags: rd ex mr mw me sd
7f3a00000000-7f3a00600000 rw-p 00000000 00:00 0 
Size:               6144 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                6144 kB
Anonymous:          6144 kB
AnonHugePages:      4096 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
THPeligible:    1
VmFlags: rd wr mr mw me ac sd hg
7f3a00600000-7f3a00800000 rw-p 00000000 00:00 0 
Size:               2048 kB
KernelPageSize:        4 kB
Rss:                2048 kB
Anonymous:          2048 kB
AnonHugePages:         0 kB
VmFlags: rd wr mr mw me ac sd nh
";

    #[test]
    fn smaps_entries_from_fixture_bytes() {
        let e = parse_smaps(SMAPS).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[0].start, e[0].end, e[0].perms.as_str()),
            (0x55d0c0a00000, 0x55d0c0a21000, "r-xp")
        );
        assert_eq!(
            e[0].path, "/usr/bin/tma workload",
            "paths keep their spaces"
        );
        assert_eq!(e[0].size, 132 << 10);
        assert_eq!(e[0].kernel_page_size, 4096);
        assert_eq!(e[1].path, "");
        assert_eq!(e[1].anon_huge_pages, 4 << 20);
        assert_eq!(e[1].huge_bytes(), 4 << 20);
        assert!(e[1].has_vm_flag("hg") && !e[1].has_vm_flag("nh"));
        assert!(e[2].has_vm_flag("nh"));
        assert_eq!(
            (e[2].rss, e[2].anonymous, e[2].huge_bytes()),
            (2 << 20, 2 << 20, 0)
        );
        let huge_tlb = parse_smaps(
            b"7f0000000000-7f0040000000 rw-s 00000000 00:10 9 /dev/hugepages/guest\n\
              Size:            1048576 kB\nKernelPageSize:  1048576 kB\nRss:  1048576 kB\n",
        )
        .unwrap();
        assert_eq!(huge_tlb[0].huge_bytes(), 1 << 30);
        assert_eq!(huge_tlb[0].path, "/dev/hugepages/guest");
        // As the kernel writes hugetlbfs mappings: Rss 0, the pages in *_Hugetlb.
        let huge_tlb = parse_smaps(
            b"7f0000000000-7f0040000000 rw-s 00000000 00:10 9 /dev/hugepages/guest\n\
              Size:            1048576 kB\nKernelPageSize:  2048 kB\nRss:  0 kB\n\
              Shared_Hugetlb:  0 kB\nPrivate_Hugetlb:  524288 kB\nVmFlags: rd wr sh ht\n",
        )
        .unwrap();
        assert_eq!(huge_tlb[0].private_hugetlb, 512 << 20);
        assert_eq!(huge_tlb[0].resident(), 512 << 20);
        assert_eq!(huge_tlb[0].huge_bytes(), 512 << 20);
        assert!(huge_tlb[0].is_hugetlb());
        assert_eq!(parse_smaps(b"").unwrap(), vec![]);
    }

    #[test]
    fn maps_headers_keep_offsets_and_paths_with_spaces() {
        let maps = b"55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 123   /tmp/my prog (deleted)\n\
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n\
not-a-range r-xp 0 0 0 /x\n\
7f00-7f10\n";
        let m = parse_maps(maps);
        assert_eq!(
            m,
            vec![
                MapsLine {
                    start: 0x55d0c0a01000,
                    end: 0x55d0c0a02000,
                    perms: "r-xp".into(),
                    offset: 0x1000,
                    path: "/tmp/my prog (deleted)".into(),
                },
                MapsLine {
                    start: 0x7f0000000000,
                    end: 0x7f0000021000,
                    perms: "rw-p".into(),
                    offset: 0,
                    path: String::new(),
                },
            ]
        );
        assert_eq!(
            parse_maps_header("not-a-range r-xp 0 0 0 /x").unwrap_err(),
            "`not-a-range` is not an address range"
        );
        assert_eq!(
            parse_maps_header("7f00-7f10").unwrap_err(),
            "a mapping header without permissions"
        );
    }

    #[test]
    fn malformed_smaps_are_typed_errors() {
        assert!(matches!(
            parse_smaps(b"Size: 4 kB\n"),
            Err(ParseError::BadLine { line: 1, .. })
        ));
        assert!(matches!(
            parse_smaps(b"zz-10 rw-p 0 0:0 0\n"),
            Err(ParseError::BadLine { line: 1, .. })
        ));
        assert!(matches!(
            parse_smaps(b"10-20 rw-p 0 0:0 0\nRss: lots\n"),
            Err(ParseError::BadLine { line: 2, what }) if what.contains("Rss")
        ));
        // A size in kB whose bytes do not fit in 64 bits (found by the proc fuzz target: an
        // overflow panic in debug builds, a wrapped size in release).
        assert!(matches!(
            parse_smaps(b"10-20 rw-p 0 0:0 0\nRss: 18014398509481984 kB\n"),
            Err(ParseError::BadLine { line: 2, what }) if what.contains("too large")
        ));
        assert_eq!(
            parse_smaps(b"10-20 rw-p 0 0:0 0\nRss: 18014398509481983 kB\n").unwrap()[0].rss,
            18014398509481983 * 1024
        );
        assert!(matches!(
            parse_smaps(b"20-10 rw-p 0 0:0 0\n"),
            Err(ParseError::BadLine { .. })
        ));
        assert_eq!(parse_smaps(b"\xff"), Err(ParseError::NotUtf8));
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one range is a list of ranges here
    fn huge_page_share_of_ranges() {
        let e = parse_smaps(SMAPS).unwrap();
        // The advised mapping exactly: 4 of its 6 MiB on huge pages.
        let s = HugePageShare::of(&e, &[0x7f3a00000000..0x7f3a00600000]);
        assert_eq!(
            (s.bytes, s.huge_bytes, s.mappings, s.exact),
            (6 << 20, 4 << 20, 1, true)
        );
        assert!((s.share() - 2.0 / 3.0).abs() < 1e-9);
        // Both anonymous mappings as two ranges: 4 of 8 MiB.
        let s = HugePageShare::of(
            &e,
            &[
                0x7f3a00000000..0x7f3a00600000,
                0x7f3a00600000..0x7f3a00800000,
            ],
        );
        assert_eq!(
            (s.bytes, s.huge_bytes, s.mappings, s.exact),
            (8 << 20, 4 << 20, 2, true)
        );
        // Part of a mapping: the count is capped at the overlap and marked inexact.
        let s = HugePageShare::of(&e, &[0x7f3a00000000..0x7f3a00200000]);
        assert_eq!((s.bytes, s.huge_bytes, s.exact), (2 << 20, 2 << 20, false));
        // Unmapped addresses count for nothing.
        let s = HugePageShare::of(&e, &[0x1000..0x2000]);
        assert_eq!((s.bytes, s.mappings, s.share()), (0, 0, 0.0));
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one range is a list of ranges here
    fn thp_mode_and_smaps_from_a_tree() {
        assert_eq!(
            parse_thp_mode(b"always [madvise] never\n"),
            Ok(ThpMode::Madvise)
        );
        assert_eq!(
            parse_thp_mode(b"[always] madvise never"),
            Ok(ThpMode::Always)
        );
        assert_eq!(
            parse_selected(b"always defer [defer+madvise] madvise never").unwrap(),
            "defer+madvise"
        );
        assert!(matches!(
            parse_thp_mode(b"always madvise never"),
            Err(ParseError::NoSelection(_))
        ));
        assert_eq!(parse_thp_mode(b""), Err(ParseError::Empty));
        assert_eq!(parse_selected(b"madvise\n").unwrap(), "madvise");
        let d = tree(&[
            (
                "sys/kernel/mm/transparent_hugepage/enabled",
                "always madvise [never]\n",
            ),
            ("proc/self/smaps", std::str::from_utf8(SMAPS).unwrap()),
            ("proc/42/smaps", ""),
            ("proc/42/status", "Name:\tqemu-kvm\nTHP_enabled:\t0\n"),
        ]);
        let h = Host::under(d.path());
        assert_eq!(h.thp_mode().unwrap(), ThpMode::Never);
        assert_eq!(ThpMode::Never.to_string(), "never");
        assert_eq!(h.smaps(None).unwrap().len(), 3);
        assert!(h.smaps(Some(42)).unwrap().is_empty());
        assert!(h.smaps(Some(43)).unwrap_err().is_missing());
        assert_eq!(
            h.status_field(42, "THP_enabled").unwrap().as_deref(),
            Some("0")
        );
        assert_eq!(h.status_field(42, "Nope").unwrap(), None);
        let s = h
            .huge_page_share(None, &[0x7f3a00000000..0x7f3a00800000])
            .unwrap();
        assert_eq!((s.bytes, s.huge_bytes), (8 << 20, 4 << 20));
        assert!(Host::under(Path::new("/nonexistent"))
            .thp_mode()
            .unwrap_err()
            .is_missing());
        assert_eq!(h.pids().unwrap(), vec![42]);
        // This process's own smaps parses (whatever the kernel writes).
        assert!(!Host::system().smaps(None).unwrap().is_empty());
    }

    #[test]
    fn stat_processor_after_a_tricky_name() {
        // A command name with spaces and a `)`; field 39 is the 37th after it.
        // (A name that is not UTF-8 too: threads name themselves with any bytes.)
        let mut line = b"4242 (a b) \xff c) S".to_vec();
        for f in 4..=38 {
            line.extend_from_slice(format!(" {f}").as_bytes());
        }
        line.extend_from_slice(b" 7 0 0 0\n");
        assert_eq!(parse_stat_processor(&line).unwrap(), 7);
        assert!(parse_stat_processor(b"1 (x) S 0 0").is_err());
        assert!(parse_stat_processor(b"no name here").is_err());
        let real = std::fs::read("/proc/self/stat").unwrap();
        let cpu = parse_stat_processor(&real).unwrap();
        assert!(
            Host::system().online_cpus_or_cpu0().contains(&cpu),
            "cpu {cpu}"
        );
    }

    #[test]
    fn schedstat_times() {
        assert_eq!(parse_schedstat(b"123 456 7\n").unwrap(), (123, 456));
        assert!(parse_schedstat(b"123").is_err());
        assert!(parse_schedstat(b"1 x 2").is_err());
        let me = std::process::id() as i32;
        match Host::system().thread_schedstat(me) {
            Ok((run, _)) => assert!(run > 0),
            Err(e) => assert!(e.is_missing(), "{e}"),
        }
    }
}
