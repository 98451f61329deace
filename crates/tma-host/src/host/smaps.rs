//! `/proc/PID/smaps`: the huge-page backing of a process's mappings.

use super::maps::{parse_maps_header, MapsLine};
use super::{Host, HostError, ParseError};

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

impl Host {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{parse_selected, parse_thp_mode, tree, ThpMode};
    use std::path::Path;

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
}
