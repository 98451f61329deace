//! Raw tracepoint records -> typed KVM events, driven by the offsets of the parsed `format`
//! files (never by assumed offsets).

use std::collections::HashMap;

use crate::reasons::{ExitReason, Isa};
use crate::KvmError;
use tma_perf::tracefs::{EventFormat, Field};

/// The kvm tracepoints `tma kvm` samples, in the order they are opened.
pub const KVM_EVENTS: &[&str] = &[
    "kvm_exit",
    "kvm_entry",
    "kvm_userspace_exit",
    "kvm_pio",
    "kvm_mmio",
    "kvm_msr",
    "kvm_cpuid",
    "kvm_emulate_insn",
];

/// A decoded `kvm_exit` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub reason: ExitReason,
    /// Raw `exit_reason` as recorded.
    pub raw_reason: u32,
    pub guest_rip: Option<u64>,
    pub info1: Option<u64>,
    pub info2: Option<u64>,
    pub intr_info: Option<u32>,
    pub error_code: Option<u32>,
    pub vcpu_id: Option<u32>,
    pub requests: Option<u64>,
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvmEvent {
    Exit(Exit),
    Entry {
        vcpu_id: Option<u32>,
        rip: Option<u64>,
    },
    UserspaceExit {
        reason: u32,
        errno: i32,
    },
    Pio {
        write: bool,
        port: u32,
        size: u32,
        count: u32,
    },
    Mmio {
        /// 0 unsatisfied-read, 1 read, 2 write.
        kind: u32,
        len: u32,
        gpa: u64,
    },
    Msr {
        write: bool,
        ecx: u32,
        data: u64,
        exception: bool,
    },
    Cpuid {
        function: u32,
        index: u32,
    },
    EmulateInsn {
        failed: bool,
    },
}

/// `kvm_mmio` type names.
pub fn mmio_kind_name(kind: u32) -> String {
    match kind {
        0 => "unsatisfied-read".into(),
        1 => "read".into(),
        2 => "write".into(),
        n => format!("unknown type {n}"),
    }
}

#[derive(Debug, Clone)]
struct Layout {
    kind: Kind,
    fields: Vec<Option<Field>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Exit,
    Entry,
    Uexit,
    Pio,
    Mmio,
    Msr,
    Cpuid,
    Emul,
}

const EXIT_FIELDS: &[&str] = &[
    "exit_reason",
    "isa",
    "guest_rip",
    "info1",
    "info2",
    "intr_info",
    "error_code",
    "vcpu_id",
    "requests",
];

fn spec(name: &str) -> Option<(Kind, &'static [&'static str], &'static [&'static str])> {
    // (kind, all fields looked up, fields that must exist)
    Some(match name {
        "kvm_exit" => (Kind::Exit, EXIT_FIELDS, &["exit_reason"]),
        "kvm_entry" => (Kind::Entry, &["vcpu_id", "rip"], &[]),
        "kvm_userspace_exit" => (Kind::Uexit, &["reason", "errno"], &["reason"]),
        "kvm_pio" => (Kind::Pio, &["rw", "port", "size", "count"], &["rw", "port"]),
        "kvm_mmio" => (Kind::Mmio, &["type", "len", "gpa"], &["type", "gpa"]),
        "kvm_msr" => (
            Kind::Msr,
            &["write", "ecx", "data", "exception"],
            &["write", "ecx"],
        ),
        "kvm_cpuid" => (Kind::Cpuid, &["function", "index"], &["function"]),
        "kvm_emulate_insn" => (Kind::Emul, &["failed"], &[]),
        _ => return None,
    })
}

/// Decoders for the kvm tracepoints of one kernel, keyed by tracepoint id.
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    by_id: HashMap<u64, Layout>,
    common_type: Option<Field>,
    /// `isa` to assume for `kvm_exit` records of kernels without the field (host vendor).
    pub isa_fallback: Option<Isa>,
}

impl Decoder {
    /// Build from parsed format files (other events are ignored). Required fields missing
    /// from a format are an error naming the field.
    pub fn new(formats: &[EventFormat]) -> Result<Decoder, KvmError> {
        let mut d = Decoder::default();
        for f in formats {
            let Some((kind, all, required)) = spec(&f.name) else {
                continue;
            };
            for r in required {
                f.require(r)?;
            }
            if d.common_type.is_none() {
                d.common_type = Some(f.require("common_type")?.clone());
            }
            let fields = all.iter().map(|n| f.field(n).cloned()).collect();
            d.by_id.insert(f.id, Layout { kind, fields });
        }
        Ok(d)
    }

    /// Decode one raw record (the PERF_SAMPLE_RAW payload). `Ok(None)` for a tracepoint id this
    /// decoder does not know; an error for a record too short for its format.
    pub fn decode(&self, raw: &[u8]) -> Result<Option<KvmEvent>, KvmError> {
        let ct = self
            .common_type
            .as_ref()
            .ok_or_else(|| KvmError::Format("no kvm format files were loaded".into()))?;
        let id = ct.read_u64(raw).ok_or_else(|| {
            KvmError::Record(format!("record of {} bytes has no common_type", raw.len()))
        })?;
        let Some(l) = self.by_id.get(&id) else {
            return Ok(None);
        };
        let get = |i: usize| -> Result<Option<u64>, KvmError> {
            match &l.fields[i] {
                None => Ok(None),
                Some(f) => f.read_u64(raw).map(Some).ok_or_else(|| {
                    KvmError::Record(format!(
                        "record of {} bytes too short for field {} (offset {}, size {})",
                        raw.len(),
                        f.name,
                        f.offset,
                        f.size
                    ))
                }),
            }
        };
        let req = |i: usize| -> Result<u64, KvmError> { Ok(get(i)?.unwrap_or(0)) };
        let u32o = |v: Option<u64>| v.map(|x| x as u32);
        Ok(Some(match l.kind {
            Kind::Exit => {
                let raw_reason = req(0)? as u32;
                let isa = match get(1)? {
                    Some(v) => Isa::from_raw(v as u32),
                    None => self.isa_fallback.unwrap_or(Isa::Other(0)),
                };
                KvmEvent::Exit(Exit {
                    reason: ExitReason::decode(isa, raw_reason),
                    raw_reason,
                    guest_rip: get(2)?,
                    info1: get(3)?,
                    info2: get(4)?,
                    intr_info: u32o(get(5)?),
                    error_code: u32o(get(6)?),
                    vcpu_id: u32o(get(7)?),
                    requests: get(8)?,
                })
            }
            Kind::Entry => KvmEvent::Entry {
                vcpu_id: u32o(get(0)?),
                rip: get(1)?,
            },
            Kind::Uexit => KvmEvent::UserspaceExit {
                reason: req(0)? as u32,
                errno: get(1)?.unwrap_or(0) as i32,
            },
            Kind::Pio => KvmEvent::Pio {
                write: req(0)? != 0,
                port: req(1)? as u32,
                size: req(2)? as u32,
                count: req(3)? as u32,
            },
            Kind::Mmio => KvmEvent::Mmio {
                kind: req(0)? as u32,
                len: req(1)? as u32,
                gpa: req(2)?,
            },
            Kind::Msr => KvmEvent::Msr {
                write: req(0)? != 0,
                ecx: req(1)? as u32,
                data: req(2)?,
                exception: req(3)? != 0,
            },
            Kind::Cpuid => KvmEvent::Cpuid {
                function: req(0)? as u32,
                index: req(1)? as u32,
            },
            Kind::Emul => KvmEvent::EmulateInsn {
                failed: req(0)? != 0,
            },
        }))
    }

    /// Tracepoint ids known to this decoder.
    pub fn ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.by_id.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

/// Build a raw record for `format` with the given field values (little endian), zero elsewhere.
/// Used by tests and fixtures to make synthetic records from real offsets. Unknown field names
/// are an error, so a test cannot silently write nothing.
pub fn build_record(format: &EventFormat, values: &[(&str, u64)]) -> Result<Vec<u8>, KvmError> {
    let len = format
        .fields
        .iter()
        .map(|f| f.offset + f.size)
        .max()
        .unwrap_or(0);
    let mut raw = vec![0u8; len.div_ceil(8) * 8];
    let mut put = |name: &str, v: u64| -> Result<(), KvmError> {
        let f = format.require(name)?;
        let b = v.to_le_bytes();
        let n = f.size.min(8);
        raw[f.offset..f.offset + n].copy_from_slice(&b[..n]);
        Ok(())
    };
    put("common_type", format.id)?;
    for (n, v) in values {
        put(n, *v)?;
    }
    Ok(raw)
}
