//! The cgroup v2 mount (`/proc/self/mounts`) and the directories of cgroups under it.

use std::path::{Path, PathBuf};

use super::{Host, HostError};

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

impl Host {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tree;

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
}
