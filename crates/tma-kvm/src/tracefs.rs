//! The kvm side of tracefs: reading the kvm tracepoints' `format` files through
//! `tma_perf::tracefs`, naming the KVM vendor module from the host's loaded modules, and telling
//! whether a process is a VMM.

use std::path::Path;

use crate::decode::KVM_EVENTS;
use crate::KvmError;
use tma_host::{Host, HostError};
use tma_perf::tracefs::{EventFormat, FormatError, Tracefs, TracefsError};
use tma_sys::advice::{self, Op};

/// Read and parse `events/kvm/<name>/format` for every event in [`KVM_EVENTS`] that this
/// kernel has. Errors when the kvm system is absent (kvm module not loaded) or unreadable.
pub fn kvm_formats(tracefs: &Tracefs) -> Result<Vec<EventFormat>, KvmError> {
    Ok(tracefs.formats("kvm", KVM_EVENTS)?)
}

impl From<TracefsError> for KvmError {
    fn from(e: TracefsError) -> KvmError {
        match e {
            TracefsError::Read { path, source } => perm(&path, source),
            TracefsError::NoSystem { path } => KvmError::NoKvmEvents(path.display().to_string()),
            TracefsError::Format { path, error } => {
                KvmError::Format(format!("{}: {error}", path.display()))
            }
            e => KvmError::Tracefs(e.to_string()),
        }
    }
}

impl From<FormatError> for KvmError {
    fn from(e: FormatError) -> KvmError {
        KvmError::Format(e.to_string())
    }
}

fn perm(p: &Path, e: std::io::Error) -> KvmError {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        KvmError::Tracefs(format!(
            "no permission to read {}: {}",
            p.display(),
            advice::permission(Op::TracefsRead)
        ))
    } else {
        KvmError::Tracefs(format!(
            "cannot read {}: {}",
            p.display(),
            advice::explain(Op::TracefsRead, &e)
        ))
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

/// Detect the KVM vendor module loaded under `root/sys/module` (`root` is normally `/`).
pub fn detect_backend(root: &Path) -> Backend {
    let host = Host::under(root);
    let known = [("kvm_intel", true), ("kvm_amd", true), ("kvm_pvm", false)];
    if let Some((name, emits)) = known.into_iter().find(|(n, _)| host.module_loaded(n)) {
        return Backend {
            module: name.into(),
            emits_kvm_exit: emits,
        };
    }
    // Another vendor module (`kvm_*` other than kvm itself), else kvm alone.
    let module = match host.kernel_modules("kvm_").into_iter().next() {
        Some(n) => n,
        None if host.module_loaded("kvm") => "kvm".into(),
        None => "none".into(),
    };
    Backend {
        module,
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
