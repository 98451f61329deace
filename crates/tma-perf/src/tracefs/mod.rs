//! Finding (and if needed mounting) tracefs under a root, and reading the tracepoints'
//! `format` files ([`mod@format`]): where the ids that [`crate::tracepoint`] opens come from.

pub mod format;

use std::path::{Path, PathBuf};

use tma_sys::advice::{advice, explain, Op};

pub use format::{EventFormat, Field, FieldProblem, FormatError};

/// Where tracefs is looked for, in order.
pub const TRACEFS_CANDIDATES: &[&str] = &["sys/kernel/tracing", "sys/kernel/debug/tracing"];

/// Why tracefs or a tracepoint's `format` file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracefsError {
    /// A tracefs file or directory exists but cannot be read (`PermissionDenied`: tracefs is
    /// mode 700 by default).
    #[error("cannot read {}: {}", path.display(), explain(Op::TracefsRead, .source))]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tracefs is not mounted and its mount point {} does not exist: {}", path.display(), advice(Op::TracefsMount, libc::ENOENT).unwrap_or_default())]
    NoMountPoint { path: PathBuf },
    #[error("tracefs is not mounted and mounting it at {} failed: {}", path.display(), explain(Op::TracefsMount, .source))]
    Mount {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mounted tracefs at {} but it has no events/ directory", path.display())]
    NoEventsDir { path: PathBuf },
    /// `events/<system>` is absent, or has none of the asked events.
    #[error("no tracepoints of this system under {}", path.display())]
    NoSystem { path: PathBuf },
    #[error("{}: {error}", path.display())]
    Format { path: PathBuf, error: FormatError },
}

/// A tracefs directory in use. If this process mounted it, dropping the value unmounts it
/// (and only then): a pre-existing mount is never touched.
#[derive(Debug)]
pub struct Tracefs {
    path: PathBuf,
    mounted_by_us: bool,
}

impl Tracefs {
    /// Use an existing tracefs directory (tests: a fake tree).
    pub fn at(path: impl Into<PathBuf>) -> Tracefs {
        Tracefs {
            path: path.into(),
            mounted_by_us: false,
        }
    }

    /// Find tracefs under `root` (normally `/`): `root/sys/kernel/tracing`, then
    /// `root/sys/kernel/debug/tracing`. A directory counts when it has `events/`.
    pub fn find(root: &Path) -> Option<Tracefs> {
        TRACEFS_CANDIDATES
            .iter()
            .map(|c| root.join(c))
            .find(|p| p.join("events").is_dir())
            .map(Tracefs::at)
    }

    /// Find tracefs under `root`, or mount it at `root/sys/kernel/tracing` when absent.
    /// Errors say what failed (no permission, not mountable) and leave nothing mounted.
    pub fn find_or_mount(root: &Path) -> Result<Tracefs, TracefsError> {
        if let Some(t) = Tracefs::find(root) {
            return Ok(t);
        }
        // Mounted but unreadable (tracefs is mode 700 by default): say so, do not try to mount.
        for c in TRACEFS_CANDIDATES {
            let events = root.join(c).join("events");
            if let Err(source) = std::fs::metadata(&events) {
                if source.kind() == std::io::ErrorKind::PermissionDenied {
                    return Err(TracefsError::Read {
                        path: events,
                        source,
                    });
                }
            }
        }
        let target = root.join(TRACEFS_CANDIDATES[0]);
        if !target.is_dir() {
            return Err(TracefsError::NoMountPoint { path: target });
        }
        if let Err(source) = crate::sys::mount_tracefs(&target) {
            return Err(TracefsError::Mount {
                path: target,
                source,
            });
        }
        let t = Tracefs {
            path: target,
            mounted_by_us: true,
        };
        if !t.path.join("events").is_dir() {
            // Dropping `t` unmounts it again.
            return Err(TracefsError::NoEventsDir {
                path: t.path.clone(),
            });
        }
        Ok(t)
    }

    /// The tracefs directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this process mounted it (and will unmount it on drop).
    pub fn mounted_by_us(&self) -> bool {
        self.mounted_by_us
    }

    /// `events/<system>` (`events/kvm`).
    pub fn system_dir(&self, system: &str) -> PathBuf {
        self.path.join("events").join(system)
    }

    /// Read and parse `events/<system>/<name>/format` for every event of `names` that this
    /// kernel has, in the order of `names`. Errors when the system is absent (its module not
    /// loaded) or has none of them ([`TracefsError::NoSystem`]), or a file is unreadable or
    /// malformed.
    pub fn formats(&self, system: &str, names: &[&str]) -> Result<Vec<EventFormat>, TracefsError> {
        let dir = self.system_dir(system);
        match std::fs::metadata(&dir) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TracefsError::NoSystem { path: dir })
            }
            Err(source) => return Err(TracefsError::Read { path: dir, source }),
        }
        let mut out = Vec::new();
        for name in names {
            let path = dir.join(name).join("format");
            match std::fs::read(&path) {
                Ok(b) => match EventFormat::parse(&b) {
                    Ok(f) => out.push(f),
                    Err(error) => return Err(TracefsError::Format { path, error }),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(TracefsError::Read { path, source }),
            }
        }
        if out.is_empty() {
            return Err(TracefsError::NoSystem { path: dir });
        }
        Ok(out)
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us {
            if let Err(e) = crate::sys::unmount(&self.path) {
                eprintln!(
                    "tma: warning: could not unmount the tracefs this run mounted at {}: {e}; unmount it with `umount {}`",
                    self.path.display(),
                    self.path.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        tma_testkit::fixture("kvm/format-6.18").join(name)
    }

    #[test]
    fn formats_of_a_system_in_a_fake_tree() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("sys/kernel/tracing/events/kvm");
        for name in ["kvm_exit", "kvm_entry"] {
            std::fs::create_dir_all(ev.join(name)).unwrap();
            std::fs::copy(fixture(name), ev.join(name).join("format")).unwrap();
        }
        let t = Tracefs::find(dir.path()).unwrap();
        assert!(!t.mounted_by_us());
        let f = t
            .formats("kvm", &["kvm_entry", "kvm_nope", "kvm_exit"])
            .unwrap();
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["kvm_entry", "kvm_exit"]);
        assert!(matches!(
            t.formats("kvm", &["kvm_nope"]),
            Err(TracefsError::NoSystem { path }) if path == ev
        ));
        assert!(matches!(
            t.formats("sched", &["sched_switch"]),
            Err(TracefsError::NoSystem { .. })
        ));
        std::fs::create_dir_all(ev.join("kvm_bad")).unwrap();
        std::fs::write(ev.join("kvm_bad/format"), "name: kvm_bad\n").unwrap();
        let e = t.formats("kvm", &["kvm_bad"]).unwrap_err();
        assert!(matches!(
            &e,
            TracefsError::Format {
                error: FormatError::NoId { .. },
                ..
            }
        ));
        assert!(
            e.to_string()
                .ends_with("kvm_bad/format: kvm_bad: no `ID:` line"),
            "{e}"
        );
    }

    #[test]
    fn missing_mount_point_is_an_error_and_mounts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let e = Tracefs::find_or_mount(dir.path()).unwrap_err();
        assert!(
            matches!(&e, TracefsError::NoMountPoint { path } if path.ends_with("sys/kernel/tracing")),
            "{e}"
        );
        assert!(e.to_string().contains("CONFIG_TRACING"), "{e}");
    }

    #[test]
    fn refusals_say_to_run_as_root() {
        let path = PathBuf::from("/sys/kernel/tracing");
        let e = TracefsError::Mount {
            path: path.clone(),
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        };
        assert!(
            e.to_string()
                .ends_with("run as root (tracefs is readable, and mountable, by root only)"),
            "{e}"
        );
        let e = TracefsError::Read {
            path,
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        assert!(e.to_string().contains("run as root"), "{e}");
    }
}
