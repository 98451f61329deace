//! The CPU time of every cgroup of a cgroup v2 hierarchy, from `cpu.stat`, for `tma serve
//! --cgroup-top`: the cheap way to rank thousands of cgroups (no counter is opened) and to
//! account for all of them, the busiest by name and the rest together.
//!
//! The root is a parameter (the cgroup2 mount, `/sys/fs/cgroup` on most systems, or a fake
//! tree in tests). [`CgroupFs::scan`] walks it and reads each directory's `cpu.stat`;
//! [`Accounting`] turns successive scans into CPU time *charged* to each cgroup between two
//! scans, so that the charges of one refresh always add up to the growth of the whole tree:
//!
//! * a cgroup's own charge is its `usage_usec` growth minus the growth of its children (a
//!   parent's `cpu.stat` counts its descendants), so nothing is counted twice;
//! * a child that appeared since the last scan is charged its whole usage (it was born in
//!   between), and its parent's charge is reduced by as much;
//! * a child that vanished took its last moments with it, but its parent's `usage_usec`
//!   keeps them (the kernel folds a removed cgroup into its parent): they are charged to the
//!   parent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The most cgroups one scan reads (a larger tree is read in part, and says so).
pub const MAX_CGROUPS: usize = 100_000;
/// The deepest nesting followed below the root.
pub const MAX_DEPTH: usize = 32;

/// Errors reading a cgroup tree.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupFsError {
    #[error(
        "cannot read the cgroup tree at {}: {source} (give the cgroup2 mount, usually \
         /sys/fs/cgroup)",
        path.display()
    )]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a cgroup v2 directory: it has no cgroup.controllers file", path.display())]
    NotCgroup2 { path: PathBuf },
}

/// The `cpu.stat` fields tma reads (microseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    pub usage_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
}

/// Parse a cgroup v2 `cpu.stat` file: `key value` lines; unknown keys are ignored. `None`
/// when `usage_usec` is missing or a value is not a number.
pub fn parse_cpu_stat(bytes: &[u8]) -> Option<CpuStat> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut out = CpuStat::default();
    let mut usage = false;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let slot = match k {
            "usage_usec" => {
                usage = true;
                &mut out.usage_usec
            }
            "user_usec" => &mut out.user_usec,
            "system_usec" => &mut out.system_usec,
            _ => continue,
        };
        *slot = v.parse().ok()?;
    }
    usage.then_some(out)
}

/// One cgroup of a scan: its path relative to the root (`""` for the root itself) and its
/// cumulative usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupUsage {
    pub path: String,
    /// The parent's index in the scan (`None` for the root).
    pub parent: Option<usize>,
    pub usage_usec: u64,
}

/// One walk of the tree, parents before their children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub cgroups: Vec<CgroupUsage>,
    /// The walk stopped at [`MAX_CGROUPS`] or [`MAX_DEPTH`].
    pub truncated: bool,
}

/// A cgroup v2 hierarchy under a root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFs {
    root: PathBuf,
}

impl CgroupFs {
    pub fn new(root: impl Into<PathBuf>) -> CgroupFs {
        CgroupFs { root: root.into() }
    }

    /// The hierarchy mounted on this host (from `<proc>/self/mounts`), or `<sys>/fs/cgroup`.
    pub fn of_host(host: &crate::Host) -> CgroupFs {
        let mounted = std::fs::read(host.proc.join("self/mounts"))
            .ok()
            .and_then(|b| crate::parse_cgroup2_mount(&b));
        CgroupFs::new(mounted.unwrap_or_else(|| host.sys.join("fs/cgroup")))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Check that the root is a readable cgroup v2 directory.
    pub fn check(&self) -> Result<(), CgroupFsError> {
        std::fs::read_dir(&self.root).map_err(|source| CgroupFsError::Root {
            path: self.root.clone(),
            source,
        })?;
        if !self.root.join("cgroup.controllers").is_file() {
            return Err(CgroupFsError::NotCgroup2 {
                path: self.root.clone(),
            });
        }
        Ok(())
    }

    /// Walk the tree and read each cgroup's `cpu.stat`. Cgroups that vanish during the walk,
    /// or whose `cpu.stat` cannot be read (the `cpu` controller is not enabled there), are
    /// left out with their subtree; the root's own `cpu.stat` is optional (older kernels
    /// lack it), its usage is then the sum of its children.
    pub fn scan(&self) -> Result<Scan, CgroupFsError> {
        self.check()?;
        let mut scan = Scan::default();
        let root_usage = read_usage(&self.root);
        scan.cgroups.push(CgroupUsage {
            path: String::new(),
            parent: None,
            usage_usec: root_usage.unwrap_or(0),
        });
        // (index in scan, directory, depth)
        let mut stack = vec![(0usize, self.root.clone(), 0usize)];
        while let Some((at, dir, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut children: Vec<(String, PathBuf)> = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
                .collect();
            children.sort();
            for (name, path) in children {
                if depth + 1 > MAX_DEPTH || scan.cgroups.len() >= MAX_CGROUPS {
                    scan.truncated = true;
                    break;
                }
                let Some(usage) = read_usage(&path) else {
                    continue;
                };
                let rel = if scan.cgroups[at].path.is_empty() {
                    name
                } else {
                    format!("{}/{name}", scan.cgroups[at].path)
                };
                scan.cgroups.push(CgroupUsage {
                    path: rel,
                    parent: Some(at),
                    usage_usec: usage,
                });
                stack.push((scan.cgroups.len() - 1, path, depth + 1));
            }
        }
        if root_usage.is_none() {
            let top: u64 = scan
                .cgroups
                .iter()
                .filter(|c| c.parent == Some(0))
                .map(|c| c.usage_usec)
                .sum();
            scan.cgroups[0].usage_usec = top;
        }
        Ok(scan)
    }
}

fn read_usage(dir: &Path) -> Option<u64> {
    let bytes = std::fs::read(dir.join("cpu.stat")).ok()?;
    parse_cpu_stat(&bytes).map(|s| s.usage_usec)
}

/// CPU time charged to each cgroup between successive scans (see the module text).
#[derive(Debug, Clone, Default)]
pub struct Accounting {
    /// Usage of each cgroup at the last scan.
    last: HashMap<String, u64>,
    scanned: bool,
}

/// The charges of one refresh, microseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charges {
    /// (cgroup path, CPU time charged since the last scan), every cgroup of the scan, the
    /// root (`""`, its own tasks and vanished children) included.
    pub charged: Vec<(String, u64)>,
    /// The growth of the whole tree: the sum of `charged`.
    pub total: u64,
}

impl Accounting {
    /// Charge `scan` against the previous one. The first scan only sets the baseline (all
    /// charges 0: time used before tma started is nobody's business here).
    pub fn charge(&mut self, scan: &Scan) -> Charges {
        let n = scan.cgroups.len();
        // Each cgroup's growth (all of it for a new cgroup; 0 on the first scan; a counter
        // that went back, which the kernel does not do, grows by 0).
        let growth: Vec<u64> = scan
            .cgroups
            .iter()
            .map(|c| match self.last.get(&c.path) {
                _ if !self.scanned => 0,
                Some(&prev) => c.usage_usec.saturating_sub(prev),
                None => c.usage_usec,
            })
            .collect();
        let mut children_growth = vec![0u64; n];
        for (i, c) in scan.cgroups.iter().enumerate() {
            if let Some(p) = c.parent {
                children_growth[p] = children_growth[p].saturating_add(growth[i]);
            }
        }
        let charged: Vec<(String, u64)> = scan
            .cgroups
            .iter()
            .enumerate()
            .map(|(i, c)| (c.path.clone(), growth[i].saturating_sub(children_growth[i])))
            .collect();
        let total = charged.iter().map(|(_, v)| v).sum();
        self.last = scan
            .cgroups
            .iter()
            .map(|c| (c.path.clone(), c.usage_usec))
            .collect();
        self.scanned = true;
        Charges { charged, total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stat_parses_and_refuses() {
        let s = parse_cpu_stat(
            b"usage_usec 1234\nuser_usec 1000\nsystem_usec 234\nnr_periods 0\ncore_sched.force_idle_usec 0\n",
        )
        .unwrap();
        assert_eq!(s.usage_usec, 1234);
        assert_eq!(s.user_usec, 1000);
        assert_eq!(parse_cpu_stat(b"user_usec 5\n"), None);
        assert_eq!(parse_cpu_stat(b"usage_usec x\n"), None);
        assert_eq!(parse_cpu_stat(b"\xff\xfe"), None);
        assert_eq!(parse_cpu_stat(b""), None);
    }

    fn tree(dir: &Path, cgroups: &[(&str, u64)]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), "cpu memory\n").unwrap();
        for (p, u) in cgroups {
            let d = dir.join(p);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("cpu.stat"),
                format!("usage_usec {u}\nuser_usec {u}\n"),
            )
            .unwrap();
        }
    }

    #[test]
    fn charges_add_up_through_births_and_deaths() {
        let dir = tma_tmpdir("charges");
        tree(&dir, &[("", 1000), ("a", 600), ("a/x", 500), ("b", 300)]);
        let fs = CgroupFs::new(&dir);
        let mut acc = Accounting::default();
        let first = acc.charge(&fs.scan().unwrap());
        assert_eq!(first.total, 0);
        // x grows 100, b grows 50, a's own tasks 10, the root's 5; y is born with 40.
        tree(
            &dir,
            &[
                ("", 1205),
                ("a", 750),
                ("a/x", 600),
                ("a/y", 40),
                ("b", 350),
            ],
        );
        let c = acc.charge(&fs.scan().unwrap());
        let get = |c: &Charges, p: &str| c.charged.iter().find(|(q, _)| q == p).unwrap().1;
        assert_eq!(get(&c, "a/x"), 100);
        assert_eq!(get(&c, "a/y"), 40);
        assert_eq!(get(&c, "a"), 10);
        assert_eq!(get(&c, "b"), 50);
        assert_eq!(get(&c, ""), 5);
        assert_eq!(c.total, 205);
        // x dies after 7 more; the parent keeps them.
        std::fs::remove_dir_all(dir.join("a/x")).unwrap();
        tree(&dir, &[("", 1212), ("a", 757), ("a/y", 40), ("b", 350)]);
        let c = acc.charge(&fs.scan().unwrap());
        assert_eq!(get(&c, "a"), 7);
        assert_eq!(c.total, 7);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_root_without_cpu_stat_sums_its_children_and_a_bad_root_is_refused() {
        let dir = tma_tmpdir("noroot");
        tree(&dir, &[("a", 10), ("b", 20)]);
        std::fs::remove_file(dir.join("cpu.stat")).ok();
        let scan = CgroupFs::new(&dir).scan().unwrap();
        assert_eq!(scan.cgroups[0].usage_usec, 30);
        assert_eq!(scan.cgroups.len(), 3);
        let err = CgroupFs::new(dir.join("a")).scan().unwrap_err();
        assert!(err.to_string().contains("cgroup.controllers"), "{err}");
        let err = CgroupFs::new(dir.join("nope")).scan().unwrap_err();
        assert!(err.to_string().contains("/sys/fs/cgroup"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tma_tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tma-cgroupfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }
}
