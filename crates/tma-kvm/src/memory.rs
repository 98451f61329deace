//! `tma kvm --memory`: is a VM's guest memory on huge pages? KVM has no interface to ask, so
//! the answer comes from the host side: the VMM process's mappings (`/proc/PID/smaps`), the
//! THP settings that apply to it, and the guest_memfd files it holds. Everything is read
//! through [`tma_host::Host`], whose roots are parameters (fixture trees in the tests).
//!
//! Which mappings are guest memory is a judgement from the outside: hugetlbfs mappings, memfd
//! and shared-memory files and guest_memfd mappings of at least [`MIN_FILE_MAPPING`], and
//! writable anonymous mappings of at least [`MIN_ANON_MAPPING`] (QEMU, Firecracker, Cloud
//! Hypervisor and crosvm all map guest RAM as one or a few such regions).

use serde::{Deserialize, Serialize};
use tma_host::{Host, HostError, SmapsEntry, ThpMode};

use crate::tracefs::is_vmm;
use crate::KvmError;

/// Writable anonymous mappings at least this large count as guest memory.
pub const MIN_ANON_MAPPING: u64 = 32 << 20;
/// hugetlbfs, memfd, shared-memory and guest_memfd mappings at least this large count.
pub const MIN_FILE_MAPPING: u64 = 2 << 20;
/// At least this share on huge pages is "backed by huge pages".
pub const GOOD_SHARE: f64 = 0.9;

/// Which processes to inspect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryTarget {
    /// One VMM process.
    Pid(u32),
    /// Every VMM process found under the procfs root.
    All,
}

/// What `tma kvm --memory` inspects and where it reads from.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    pub target: MemoryTarget,
    pub host: Host,
}

/// The kind of a guest-memory mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backing {
    /// Private anonymous memory (THP-eligible: AnonHugePages).
    Anonymous,
    /// Shared anonymous or `/dev/shm` memory (ShmemPmdMapped).
    Shared,
    /// A `memfd:` file (ShmemPmdMapped).
    Memfd,
    /// hugetlbfs (`KernelPageSize` is the page size).
    Hugetlbfs,
    /// A guest_memfd file mapped into the VMM (shared pages of a guest_memfd).
    GuestMemfd,
}

impl Backing {
    pub fn name(self) -> &'static str {
        match self {
            Backing::Anonymous => "anonymous",
            Backing::Shared => "shared",
            Backing::Memfd => "memfd",
            Backing::Hugetlbfs => "hugetlbfs",
            Backing::GuestMemfd => "guest_memfd",
        }
    }
}

/// The THP advice on a mapping (`VmFlags` `hg` / `nh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Advice {
    Hugepage,
    NoHugepage,
    None,
}

/// One guest-memory mapping of a VMM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestMapping {
    pub start: u64,
    pub end: u64,
    pub backing: Backing,
    /// The mapped file or pseudo-name, empty for anonymous memory.
    pub path: String,
    /// `KernelPageSize` in bytes.
    pub page_size: u64,
    pub size: u64,
    /// Resident bytes (Rss plus hugetlbfs pages).
    pub resident: u64,
    /// Resident bytes on 2 MiB or 1 GiB pages.
    pub huge_bytes: u64,
    pub advice: Advice,
}

/// The THP settings that apply to one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThpSettings {
    /// The system mode (`None`: the kernel has no THP).
    pub system: Option<ThpMode>,
    /// `THP_enabled` of `/proc/PID/status`: false after `prctl(PR_SET_THP_DISABLE)`
    /// (`None`: the kernel does not show it).
    pub process_enabled: Option<bool>,
}

/// guest_memfd files (private memory of TDX / SEV-SNP guests) a VMM holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestMemfd {
    /// Open guest_memfd file descriptors.
    pub fds: usize,
    /// Of the guest mappings, those of guest_memfd files (their shared pages).
    pub mapped_bytes: u64,
}

/// The guest-memory report of one VMM process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmMemory {
    pub pid: u32,
    /// `comm`.
    pub name: String,
    pub mappings: Vec<GuestMapping>,
    /// Sum of the mappings' sizes.
    pub bytes: u64,
    /// Sum of their resident bytes.
    pub resident: u64,
    /// Sum of their resident bytes on huge pages.
    pub huge_bytes: u64,
    /// `huge_bytes / resident` (0 when nothing is resident).
    pub huge_share: f64,
    pub thp: ThpSettings,
    /// Present when the VMM holds guest_memfd files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_memfd: Option<GuestMemfd>,
    /// One line: how much is on huge pages and why.
    pub verdict: String,
    /// What to do about it (`None` when nothing needs doing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// `tma kvm --memory`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    pub vms: Vec<VmMemory>,
    /// Processes that looked like VMMs but could not be read.
    pub unreadable: Vec<Unreadable>,
}

/// A VMM process that could not be inspected, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreadable {
    pub pid: u32,
    pub error: String,
}

const VMM_NAMES: [&str; 5] = [
    "qemu-system-",
    "qemu-kvm",
    "firecracker",
    "cloud-hyperviso", // comm is cut at 15 bytes
    "crosvm",
];

/// Whether `comm` names a known VMM (QEMU, Firecracker, Cloud Hypervisor, crosvm).
pub fn is_vmm_name(comm: &str) -> bool {
    VMM_NAMES.iter().any(|n| comm.starts_with(n))
}

fn permission(e: &HostError, pid: u32) -> KvmError {
    KvmError::Permission(format!(
        "cannot read {} of pid {pid}: run as root or as the VMM's user",
        e.path().display()
    ))
}

/// The VMM processes under `host`'s procfs root: known VMM names, or holders of KVM fds.
/// Processes whose fds cannot be listed are skipped unless their name is a VMM's.
pub fn find_vmms(host: &Host) -> Result<Vec<u32>, KvmError> {
    let pids = host
        .pids()
        .map_err(|e| KvmError::Config(format!("cannot list processes: {e}")))?;
    Ok(pids
        .into_iter()
        .filter_map(|p| u32::try_from(p).ok())
        .filter(|&p| {
            let comm = host.proc_text(&format!("{p}/comm")).unwrap_or_default();
            is_vmm_name(&comm) || is_vmm(host, p).unwrap_or(false)
        })
        .collect())
}

fn backing_of(e: &SmapsEntry) -> Option<Backing> {
    let writable = e.perms.contains('w');
    let shared = e.perms.ends_with('s');
    let size = e.end - e.start;
    if !writable {
        return None;
    }
    let p = e.path.as_str();
    let b = if e.is_hugetlb() {
        Backing::Hugetlbfs
    } else if p.contains("kvm-gmem") {
        Backing::GuestMemfd
    } else if p.starts_with("/memfd:") || p.starts_with("memfd:") {
        Backing::Memfd
    } else if p.starts_with("/dev/shm/") || p.starts_with("/SYSV") || (p.is_empty() && shared) {
        Backing::Shared
    } else if p.is_empty() {
        Backing::Anonymous
    } else {
        return None;
    };
    let min = if b == Backing::Anonymous || (b == Backing::Shared && p.is_empty()) {
        MIN_ANON_MAPPING
    } else {
        MIN_FILE_MAPPING
    };
    (size >= min).then_some(b)
}

/// The guest-memory mappings among `entries`, largest first.
pub fn guest_mappings(entries: &[SmapsEntry]) -> Vec<GuestMapping> {
    let mut v: Vec<GuestMapping> = entries
        .iter()
        .filter_map(|e| {
            let backing = backing_of(e)?;
            Some(GuestMapping {
                start: e.start,
                end: e.end,
                backing,
                path: e.path.clone(),
                page_size: e.kernel_page_size,
                size: e.end - e.start,
                resident: e.resident(),
                huge_bytes: e.huge_bytes(),
                advice: if e.has_vm_flag("hg") {
                    Advice::Hugepage
                } else if e.has_vm_flag("nh") {
                    Advice::NoHugepage
                } else {
                    Advice::None
                },
            })
        })
        .collect();
    v.sort_by(|a, b| b.size.cmp(&a.size).then(a.start.cmp(&b.start)));
    v
}

/// The guest-memory report of VMM `pid` (an error when it is not a VMM).
pub fn inspect(host: &Host, pid: u32) -> Result<VmMemory, KvmError> {
    let id = pid as i32;
    let name = host.proc_text(&format!("{pid}/comm")).unwrap_or_default();
    if !host.has_process(id) {
        return Err(KvmError::NoSuchProcess(pid));
    }
    if !is_vmm_name(&name) && !is_vmm(host, pid)? {
        return Err(KvmError::NotAVmm(pid));
    }
    let entries = host.smaps(Some(id)).map_err(|e| match &e {
        HostError::Read { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            permission(&e, pid)
        }
        _ => KvmError::Config(format!("pid {pid}: {e}")),
    })?;
    let mappings = guest_mappings(&entries);
    let gmem_fds = host
        .fd_targets(id)
        .map(|t| {
            t.iter()
                .filter(|t| t.to_string_lossy().contains("kvm-gmem"))
                .count()
        })
        .unwrap_or(0);
    let thp = ThpSettings {
        system: host.thp_mode().ok(),
        process_enabled: host
            .status_field(id, "THP_enabled")
            .ok()
            .flatten()
            .map(|v| v != "0"),
    };
    let bytes = mappings.iter().map(|m| m.size).sum();
    let resident = mappings.iter().map(|m| m.resident).sum();
    let huge_bytes = mappings.iter().map(|m| m.huge_bytes).sum();
    let gmem_mapped: u64 = mappings
        .iter()
        .filter(|m| m.backing == Backing::GuestMemfd)
        .map(|m| m.size)
        .sum();
    let guest_memfd = (gmem_fds > 0 || gmem_mapped > 0).then_some(GuestMemfd {
        fds: gmem_fds,
        mapped_bytes: gmem_mapped,
    });
    let mut vm = VmMemory {
        pid,
        name,
        mappings,
        bytes,
        resident,
        huge_bytes,
        huge_share: if resident == 0 {
            0.0
        } else {
            huge_bytes as f64 / resident as f64
        },
        thp,
        guest_memfd,
        verdict: String::new(),
        fix: None,
    };
    let (verdict, fix) = verdict(&vm);
    vm.verdict = verdict;
    vm.fix = fix;
    Ok(vm)
}

/// A size in binary units (`16 GiB`, `64 MiB`, `512 KiB`).
pub fn size_text(b: u64) -> String {
    let units = [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (u, name) in units {
        if b >= u {
            let v = b as f64 / u as f64;
            return if (v - v.round()).abs() < 0.05 {
                format!("{v:.0} {name}")
            } else {
                format!("{v:.1} {name}")
            };
        }
    }
    format!("{b} B")
}

const HUGETLB_FIX: &str = "or back guest memory with hugetlbfs (QEMU: -object memory-backend-memfd,id=mem,hugetlb=on,size=... -machine memory-backend=mem)";

/// The verdict line and the fix for `vm` (its sums, mappings and THP settings).
pub fn verdict(vm: &VmMemory) -> (String, Option<String>) {
    let pct = (vm.huge_share * 100.0).round();
    let gmem_note = vm.guest_memfd.as_ref().map(|g| {
        format!(
            "; {} guest_memfd file(s): private guest memory is not mapped into the VMM, so its page size cannot be seen from the host's /proc",
            g.fds
        )
    });
    let head = format!(
        "{}guest memory {} ({} resident), {pct:.0}% on huge pages",
        if vm.guest_memfd.is_some() {
            "shared "
        } else {
            ""
        },
        size_text(vm.bytes),
        size_text(vm.resident)
    );
    if vm.mappings.is_empty() {
        let line = match &gmem_note {
            Some(_) => format!(
                "no shared guest memory mapped{}",
                gmem_note.unwrap_or_default()
            ),
            None => "no guest-memory mapping found (no writable anonymous mapping of 32 MiB or more, no memfd or hugetlbfs)".to_string(),
        };
        return (line, None);
    }
    if vm.resident == 0 {
        return (
            format!(
                "guest memory {}, none of it resident yet: nothing to judge{}",
                size_text(vm.bytes),
                gmem_note.unwrap_or_default()
            ),
            None,
        );
    }
    let note = gmem_note.unwrap_or_default();
    if vm.huge_share >= GOOD_SHARE {
        return (format!("{head}: backed by huge pages{note}"), None);
    }
    let thp_backed = vm
        .mappings
        .iter()
        .filter(|m| m.backing != Backing::Hugetlbfs)
        .collect::<Vec<_>>();
    let all_advised =
        !thp_backed.is_empty() && thp_backed.iter().all(|m| m.advice == Advice::Hugepage);
    let any_noadvised = thp_backed.iter().any(|m| m.advice == Advice::NoHugepage);
    let tlb = "expect more TLB misses (and two-dimensional page walks) in the guest";
    let (why, fix) = if vm.thp.system.is_none() || vm.thp.system == Some(ThpMode::Never) {
        (
            "THP is off (never)".to_string(),
            format!("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or always), {HUGETLB_FIX}"),
        )
    } else if vm.thp.process_enabled == Some(false) {
        (
            "THP is disabled for this process (prctl PR_SET_THP_DISABLE)".to_string(),
            format!("start the VMM without PR_SET_THP_DISABLE (check its launcher), {HUGETLB_FIX}"),
        )
    } else if any_noadvised {
        (
            "the VMM advised MADV_NOHUGEPAGE".to_string(),
            format!("let the VMM advise MADV_HUGEPAGE instead, {HUGETLB_FIX}"),
        )
    } else if vm.thp.system == Some(ThpMode::Madvise) && !all_advised {
        (
            "THP is madvise-only and this VMM does not madvise".to_string(),
            format!(
                "echo always > /sys/kernel/mm/transparent_hugepage/enabled, or make the VMM advise MADV_HUGEPAGE, {HUGETLB_FIX}"
            ),
        )
    } else {
        (
            "THP applies but memory was not collapsed (fragmentation, or khugepaged has not caught up)".to_string(),
            format!(
                "echo 1 > /proc/sys/vm/compact_memory before starting the VM, check /sys/kernel/mm/transparent_hugepage/defrag, {HUGETLB_FIX}"
            ),
        )
    };
    (format!("{head}: {why}; {tlb}{note}"), Some(fix))
}

/// Inspect the configured VMM(s).
pub fn run(cfg: &MemoryConfig) -> Result<MemoryReport, KvmError> {
    match cfg.target {
        MemoryTarget::Pid(pid) => Ok(MemoryReport {
            vms: vec![inspect(&cfg.host, pid)?],
            unreadable: Vec::new(),
        }),
        MemoryTarget::All => {
            let mut r = MemoryReport {
                vms: Vec::new(),
                unreadable: Vec::new(),
            };
            for pid in find_vmms(&cfg.host)? {
                match inspect(&cfg.host, pid) {
                    Ok(vm) => r.vms.push(vm),
                    // Gone meanwhile.
                    Err(KvmError::NoSuchProcess(_)) => {}
                    Err(e) => r.unreadable.push(Unreadable {
                        pid,
                        error: e.to_string(),
                    }),
                }
            }
            Ok(r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, perms: &str, mib: u64, huge_mib: u64, flags: &str) -> SmapsEntry {
        SmapsEntry {
            start: 0x7f00_0000_0000,
            end: 0x7f00_0000_0000 + (mib << 20),
            perms: perms.into(),
            path: path.into(),
            size: mib << 20,
            kernel_page_size: 4096,
            rss: mib << 20,
            anon_huge_pages: huge_mib << 20,
            vm_flags: flags.split_whitespace().map(str::to_string).collect(),
            ..SmapsEntry::default()
        }
    }

    #[test]
    fn picks_guest_mappings() {
        let e = vec![
            entry("", "rw-p", 64, 64, "rd wr hg"),
            entry("", "rw-p", 8, 0, "rd wr"), // a thread stack
            entry("/usr/lib/libc.so.6", "rw-p", 64, 0, "rd wr"),
            entry("", "r--p", 64, 0, "rd"),
            entry("/memfd:guest-ram (deleted)", "rw-s", 4, 0, "rd wr sh"),
            entry("anon_inode:[kvm-gmem]", "rw-s", 4, 0, "rd wr sh"),
        ];
        let m = guest_mappings(&e);
        let kinds: Vec<Backing> = m.iter().map(|m| m.backing).collect();
        assert_eq!(
            kinds,
            vec![Backing::Anonymous, Backing::Memfd, Backing::GuestMemfd]
        );
        assert_eq!(m[0].advice, Advice::Hugepage);
    }

    fn vm(entries: &[SmapsEntry], system: ThpMode, enabled: bool) -> VmMemory {
        let mappings = guest_mappings(entries);
        let resident: u64 = mappings.iter().map(|m| m.resident).sum();
        let huge: u64 = mappings.iter().map(|m| m.huge_bytes).sum();
        VmMemory {
            pid: 1,
            name: "qemu-kvm".into(),
            bytes: mappings.iter().map(|m| m.size).sum(),
            resident,
            huge_bytes: huge,
            huge_share: huge as f64 / resident.max(1) as f64,
            mappings,
            thp: ThpSettings {
                system: Some(system),
                process_enabled: Some(enabled),
            },
            guest_memfd: None,
            verdict: String::new(),
            fix: None,
        }
    }

    #[test]
    fn verdicts_name_the_cause() {
        let (v, f) = verdict(&vm(
            &[entry("", "rw-p", 16 << 10, 0, "rd wr")],
            ThpMode::Madvise,
            true,
        ));
        assert_eq!(
            v,
            "guest memory 16 GiB (16 GiB resident), 0% on huge pages: THP is madvise-only and this VMM does not madvise; expect more TLB misses (and two-dimensional page walks) in the guest"
        );
        assert!(f.unwrap().contains("echo always"));
        let (v, f) = verdict(&vm(
            &[entry("", "rw-p", 64, 64, "hg")],
            ThpMode::Madvise,
            true,
        ));
        assert!(
            v.ends_with("100% on huge pages: backed by huge pages"),
            "{v}"
        );
        assert_eq!(f, None);
        let (v, _) = verdict(&vm(
            &[entry("", "rw-p", 64, 0, "nh")],
            ThpMode::Always,
            true,
        ));
        assert!(v.contains("MADV_NOHUGEPAGE"), "{v}");
        let (v, _) = verdict(&vm(&[entry("", "rw-p", 64, 0, "")], ThpMode::Always, false));
        assert!(v.contains("PR_SET_THP_DISABLE"), "{v}");
        let (v, f) = verdict(&vm(&[entry("", "rw-p", 64, 0, "")], ThpMode::Never, true));
        assert!(v.contains("THP is off"), "{v}");
        assert!(f.unwrap().contains("hugetlbfs"));
        let (v, _) = verdict(&vm(
            &[entry("", "rw-p", 64, 10, "hg")],
            ThpMode::Madvise,
            true,
        ));
        assert!(v.contains("not collapsed"), "{v}");
    }

    #[test]
    fn sizes() {
        assert_eq!(size_text(16 << 30), "16 GiB");
        assert_eq!(size_text(3 << 29), "1.5 GiB");
        assert_eq!(size_text(64 << 20), "64 MiB");
        assert_eq!(size_text(100), "100 B");
    }

    #[test]
    fn names() {
        assert!(is_vmm_name("qemu-system-x86"));
        assert!(is_vmm_name("cloud-hyperviso"));
        assert!(!is_vmm_name("bash"));
    }
}
