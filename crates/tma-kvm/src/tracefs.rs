//! Finding (and if needed mounting) tracefs, and reading the kvm tracepoints' `format` files.

use std::path::{Path, PathBuf};

use crate::decode::KVM_EVENTS;
use crate::format::EventFormat;
use crate::KvmError;
use tma_perf::host::{Host, HostError};

/// Where tracefs is looked for, in order.
pub const TRACEFS_CANDIDATES: &[&str] = &["sys/kernel/tracing", "sys/kernel/debug/tracing"];

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
    pub fn find_or_mount(root: &Path) -> Result<Tracefs, KvmError> {
        if let Some(t) = Tracefs::find(root) {
            return Ok(t);
        }
        // Mounted but unreadable (tracefs is mode 700 by default): say so, do not try to mount.
        for c in TRACEFS_CANDIDATES {
            let events = root.join(c).join("events");
            if let Err(e) = std::fs::metadata(&events) {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    return Err(perm(&events, e));
                }
            }
        }
        let target = root.join(TRACEFS_CANDIDATES[0]);
        if !target.is_dir() {
            return Err(KvmError::Tracefs(format!(
                "tracefs is not mounted and its mount point {} does not exist; mount it with `mount -t tracefs nodev /sys/kernel/tracing` (kernel needs CONFIG_TRACING)",
                target.display()
            )));
        }
        crate::sys::mount_tracefs(&target).map_err(|e| {
            KvmError::Tracefs(format!(
                "tracefs is not mounted and mounting it at {} failed: {e}; run as root (or mount it: `mount -t tracefs nodev /sys/kernel/tracing`)",
                target.display()
            ))
        })?;
        let t = Tracefs {
            path: target,
            mounted_by_us: true,
        };
        if !t.path.join("events").is_dir() {
            // Dropping `t` unmounts it again.
            return Err(KvmError::Tracefs(format!(
                "mounted tracefs at {} but it has no events/ directory",
                t.path.display()
            )));
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

    /// Read and parse `events/kvm/<name>/format` for every event in [`KVM_EVENTS`] that this
    /// kernel has. Errors when the kvm system is absent (kvm module not loaded) or unreadable.
    pub fn kvm_formats(&self) -> Result<Vec<EventFormat>, KvmError> {
        let dir = self.path.join("events/kvm");
        match std::fs::metadata(&dir) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(KvmError::NoKvmEvents(dir.display().to_string()))
            }
            Err(e) => return Err(perm(&dir, e)),
        }
        let mut out = Vec::new();
        for name in KVM_EVENTS {
            let p = dir.join(name).join("format");
            match std::fs::read(&p) {
                Ok(b) => out.push(
                    EventFormat::parse(&b)
                        .map_err(|e| KvmError::Format(format!("{}: {e}", p.display())))?,
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(perm(&p, e)),
            }
        }
        if out.is_empty() {
            return Err(KvmError::NoKvmEvents(dir.display().to_string()));
        }
        Ok(out)
    }
}

fn perm(p: &Path, e: std::io::Error) -> KvmError {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        KvmError::Tracefs(format!(
            "no permission to read {}: run as root, or give this user read access to tracefs (e.g. `chmod -R o+rX /sys/kernel/tracing/events/kvm`) plus CAP_PERFMON",
            p.display()
        ))
    } else {
        KvmError::Tracefs(format!("cannot read {}: {e}", p.display()))
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

/// The KVM module in use, from `root/sys/module`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Backend {
    /// `kvm_intel`, `kvm_amd`, `kvm_pvm`, another `kvm_*` vendor module, or `none`.
    pub module: String,
    /// Whether `kvm:kvm_exit` is expected to fire with this module.
    pub emits_kvm_exit: bool,
}

/// Detect the KVM vendor module under `root/sys/module` (`root` is normally `/`).
pub fn detect_backend(root: &Path) -> Backend {
    let m = root.join("sys/module");
    for (name, emits) in [("kvm_intel", true), ("kvm_amd", true), ("kvm_pvm", false)] {
        if m.join(name).is_dir() {
            return Backend {
                module: name.into(),
                emits_kvm_exit: emits,
            };
        }
    }
    // Another vendor module (`kvm_*` other than kvm itself).
    if let Ok(rd) = std::fs::read_dir(&m) {
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("kvm_"))
            .collect();
        names.sort();
        if let Some(n) = names.into_iter().next() {
            return Backend {
                module: n,
                emits_kvm_exit: false,
            };
        }
        if m.join("kvm").is_dir() {
            return Backend {
                module: "kvm".into(),
                emits_kvm_exit: false,
            };
        }
    }
    Backend {
        module: "none".into(),
        emits_kvm_exit: false,
    }
}

/// Whether `pid` looks like a VMM: it holds an fd on `/dev/kvm` or a `kvm-vm`/`kvm-vcpu`
/// anon inode, or has a thread whose comm starts with `kvm-vcpu` (read through `host`'s
/// procfs root).
pub fn is_vmm(host: &Host, pid: u32) -> Result<bool, KvmError> {
    let id = pid as i32;
    if !host.has_process(id) {
        return Err(KvmError::NoSuchProcess(pid));
    }
    match host.fd_targets(id) {
        Ok(targets) => {
            if targets.iter().any(|t| {
                let t = t.to_string_lossy();
                t == "/dev/kvm" || t.starts_with("anon_inode:kvm-")
            }) {
                return Ok(true);
            }
        }
        Err(HostError::Read { path, source })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            return Err(KvmError::Permission(format!(
                "cannot list {} to check that pid {pid} is a VMM: run as root or as the VMM's user",
                path.display()
            )))
        }
        Err(_) => {}
    }
    let tids = host.threads(id).unwrap_or_default();
    Ok(tids.iter().any(|tid| {
        host.proc_text(&format!("{pid}/task/{tid}/comm"))
            .is_ok_and(|c| c.starts_with("kvm-vcpu"))
    }))
}
