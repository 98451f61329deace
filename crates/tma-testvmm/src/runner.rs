//! A tiny VMM whose real-mode guest performs known numbers of exit-causing operations, so that
//! `tma kvm -- tma-kvm-runner` can be checked against exact counts.
//!
//! Per iteration the guest executes: `OUT 0x10`, `IN 0x11`, an MMIO write and an MMIO read at
//! guest-physical 0x20000 (outside guest RAM), `HLT`, `CPUID` (leaf 0), `RDMSR` and `WRMSR` of
//! IA32_SYSENTER_CS (0x174, writing back the value read). After the loop it does `OUT 0x12`
//! (done). The VMM answers each exit that reaches it and counts them.
//!
//! On VMX/SVM every one of these is a VM exit (IO_INSTRUCTION/io, EPT_MISCONFIG/npf, HLT,
//! CPUID, MSR_READ/MSR_WRITE); CPUID and the MSR accesses are handled in the kernel and show up
//! as `kvm_cpuid` / `kvm_msr` without reaching the VMM.

use kvm_ioctls::{Kvm, VcpuExit};
use serde::Serialize;

use crate::RunnerError;

/// Guest port written each iteration.
pub const PORT_OUT: u16 = 0x10;
/// Guest port read each iteration.
pub const PORT_IN: u16 = 0x11;
/// Guest port written once at the end.
pub const PORT_DONE: u16 = 0x12;
/// Guest-physical MMIO address (no memory slot there).
pub const MMIO_GPA: u64 = 0x20000;
/// MSR read and written each iteration (IA32_SYSENTER_CS).
pub const MSR: u32 = 0x174;
const LOAD_AT: usize = 0x1000;
const MEM_SIZE: usize = 0x10000;

/// Counts the guest was built to perform and the exits the VMM handled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunnerCounts {
    /// Guest loop iterations.
    pub iterations: u32,
    /// Port I/O instructions executed (OUT + IN + final OUT).
    pub io: u64,
    pub io_out: u64,
    pub io_in: u64,
    /// MMIO accesses executed (writes + reads).
    pub mmio: u64,
    pub mmio_write: u64,
    pub mmio_read: u64,
    pub hlt: u64,
    pub cpuid: u64,
    pub rdmsr: u64,
    pub wrmsr: u64,
    /// The vCPU's own KVM statistics (`KVM_GET_STATS_FD`), name -> value (first element of
    /// each stat), when the kernel provides them. Not part of the EXPECT line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kvm_stats: Vec<(String, u64)>,
}

impl RunnerCounts {
    /// What the guest program performs for `n` iterations.
    pub fn expected(n: u32) -> RunnerCounts {
        let n64 = u64::from(n);
        RunnerCounts {
            iterations: n,
            io: 2 * n64 + 1,
            io_out: n64 + 1,
            io_in: n64,
            mmio: 2 * n64,
            mmio_write: n64,
            mmio_read: n64,
            hlt: n64,
            cpuid: n64,
            rdmsr: n64,
            wrmsr: n64,
            kvm_stats: Vec::new(),
        }
    }

    /// The `EXPECT ...` line the runner prints.
    pub fn expect_line(&self) -> String {
        format!(
            "EXPECT io={} mmio={} hlt={} cpuid={} rdmsr={} wrmsr={} io_out={} io_in={} mmio_write={} mmio_read={}",
            self.io, self.mmio, self.hlt, self.cpuid, self.rdmsr, self.wrmsr, self.io_out, self.io_in,
            self.mmio_write, self.mmio_read
        )
    }

    /// Parse an `EXPECT ...` line.
    pub fn parse_expect_line(line: &str) -> Option<RunnerCounts> {
        let rest = line.trim().strip_prefix("EXPECT ")?;
        let mut c = RunnerCounts::default();
        for kv in rest.split_whitespace() {
            let (k, v) = kv.split_once('=')?;
            let v: u64 = v.parse().ok()?;
            match k {
                "io" => c.io = v,
                "mmio" => c.mmio = v,
                "hlt" => c.hlt = v,
                "cpuid" => c.cpuid = v,
                "rdmsr" => c.rdmsr = v,
                "wrmsr" => c.wrmsr = v,
                "io_out" => c.io_out = v,
                "io_in" => c.io_in = v,
                "mmio_write" => c.mmio_write = v,
                "mmio_read" => c.mmio_read = v,
                _ => {}
            }
        }
        Some(c)
    }
}

/// Parse KVM's binary statistics (`struct kvm_stats_header`, descriptors, data; all
/// little-endian u32/u64 as in the KVM API documentation) into (name, first value) pairs.
pub fn parse_kvm_stats(b: &[u8]) -> Option<Vec<(String, u64)>> {
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?)) };
    let name_size = u32_at(4)? as usize;
    let num_desc = u32_at(8)? as usize;
    let desc_offset = u32_at(16)? as usize;
    let data_offset = u32_at(20)? as usize;
    // Descriptor: flags u32, exponent s16, size u16, offset u32, bucket_size u32, name.
    let desc_len = 16 + name_size;
    let mut out = Vec::with_capacity(num_desc.min(1024));
    for i in 0..num_desc.min(4096) {
        let d = desc_offset.checked_add(i.checked_mul(desc_len)?)?;
        let size = u16::from_le_bytes(b.get(d + 6..d + 8)?.try_into().ok()?) as usize;
        let off = u32_at(d + 8)? as usize;
        let name = b.get(d + 16..d + 16 + name_size)?;
        let name = String::from_utf8_lossy(name.split(|&c| c == 0).next()?).into_owned();
        if size == 0 {
            continue;
        }
        let at = data_offset.checked_add(off)?;
        let v = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
        out.push((name, v));
    }
    Some(out)
}

/// The 16-bit real-mode guest program for `n` iterations (loaded at 0x1000, CS=0).
pub fn guest_code(n: u16) -> Vec<u8> {
    let mut c = vec![
        0xB8,
        0x00,
        0x20, // mov ax, 0x2000
        0x8E,
        0xC0, // mov es, ax        (es:0 = gpa 0x20000)
        0xBE,
        (n & 0xff) as u8,
        (n >> 8) as u8, // mov si, n
    ];
    let top = c.len();
    c.extend_from_slice(&[
        0xB0,
        0x41, // mov al, 0x41
        0xE6,
        PORT_OUT as u8, // out PORT_OUT, al
        0xE4,
        PORT_IN as u8, // in al, PORT_IN
        0x26,
        0xA2,
        0x00,
        0x00, // mov es:[0], al   (MMIO write)
        0x26,
        0xA0,
        0x00,
        0x00, // mov al, es:[0]   (MMIO read)
        0xF4, // hlt
        0x66,
        0x31,
        0xC0, // xor eax, eax
        0x0F,
        0xA2, // cpuid
        0x66,
        0xB9,
        (MSR & 0xff) as u8,
        (MSR >> 8) as u8,
        0x00,
        0x00, // mov ecx, MSR
        0x0F,
        0x32, // rdmsr
        0x0F,
        0x30, // wrmsr
        0x4E, // dec si
    ]);
    let rel = top as isize - (c.len() as isize + 2);
    c.extend_from_slice(&[0x75, rel as i8 as u8]); // jnz top
    c.extend_from_slice(&[
        0xB0,
        0x00, // mov al, 0
        0xE6,
        PORT_DONE as u8, // out PORT_DONE, al
        0xF4,            // hlt (not reached: the VMM stops at PORT_DONE)
    ]);
    c
}

/// THP advice for the runner's extra guest memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThpAdvice {
    /// `madvise(MADV_HUGEPAGE)`.
    Hugepage,
    /// `madvise(MADV_NOHUGEPAGE)`.
    NoHugepage,
}

impl ThpAdvice {
    /// `on` (MADV_HUGEPAGE) or `off` (MADV_NOHUGEPAGE).
    pub fn parse(s: &str) -> Option<ThpAdvice> {
        match s {
            "on" => Some(ThpAdvice::Hugepage),
            "off" => Some(ThpAdvice::NoHugepage),
            _ => None,
        }
    }
}

/// Guest-physical address of the extra guest memory (above the program's 64 KiB slot and the
/// MMIO address).
pub const EXTRA_GPA: u64 = 0x100_0000;

/// How [`run_guest_with`] sets the VM up.
#[derive(Debug, Clone, Copy, Default)]
pub struct GuestOptions {
    /// Extra guest RAM (bytes, a multiple of 2 MiB, 2 MiB-aligned in the VMM), advised as
    /// given and touched, as memory slot 1 at [`EXTRA_GPA`].
    pub extra_memory: Option<(usize, ThpAdvice)>,
}

/// Run the guest for `n` iterations (1..=65535); returns the exits the VMM handled.
pub fn run_guest(n: u16) -> Result<RunnerCounts, RunnerError> {
    run_guest_with(n, GuestOptions::default(), || {})
}

/// [`run_guest`] with `opts`; `hold` runs after the guest has finished, while the VM, its
/// vCPU and its memory still exist (a test inspects the VMM process meanwhile).
pub fn run_guest_with(
    n: u16,
    opts: GuestOptions,
    hold: impl FnOnce(),
) -> Result<RunnerCounts, RunnerError> {
    if n == 0 {
        return Err(RunnerError("iterations must be at least 1".into()));
    }
    let err = |what: &str, e: kvm_ioctls::Error| RunnerError(format!("{what}: {e}"));
    let kvm = Kvm::new().map_err(|e| {
        let e = std::io::Error::from_raw_os_error(e.errno());
        RunnerError(format!(
            "cannot open /dev/kvm: {}",
            tma_sys::advice::explain(tma_sys::advice::Op::KvmOpen, &e)
        ))
    })?;
    let vm = kvm.create_vm().map_err(|e| err("KVM_CREATE_VM", e))?;
    // Needed by VMX without unrestricted guest for real mode; harmless elsewhere.
    let _ = vm.set_tss_address(0xfffb_d000);
    let code = guest_code(n);
    let mem = crate::sys::GuestMemory::new(&vm, MEM_SIZE, &code, LOAD_AT)
        .map_err(|e| RunnerError(format!("guest memory: {e}")))?;
    let extra = match opts.extra_memory {
        Some((len, advice)) => {
            let advice = match advice {
                ThpAdvice::Hugepage => libc::MADV_HUGEPAGE,
                ThpAdvice::NoHugepage => libc::MADV_NOHUGEPAGE,
            };
            Some(
                crate::sys::GuestMemory::advised(&vm, 1, EXTRA_GPA, len, advice)
                    .map_err(|e| RunnerError(format!("extra guest memory: {e}")))?,
            )
        }
        None => None,
    };
    let mut vcpu = vm.create_vcpu(0).map_err(|e| err("KVM_CREATE_VCPU", e))?;
    let mut sregs = vcpu.get_sregs().map_err(|e| err("KVM_GET_SREGS", e))?;
    sregs.cs.base = 0;
    sregs.cs.selector = 0;
    vcpu.set_sregs(&sregs)
        .map_err(|e| err("KVM_SET_SREGS", e))?;
    let regs = kvm_bindings::kvm_regs {
        rip: LOAD_AT as u64,
        rflags: 2,
        ..Default::default()
    };
    vcpu.set_regs(&regs).map_err(|e| err("KVM_SET_REGS", e))?;

    let mut got = RunnerCounts {
        iterations: u32::from(n),
        ..Default::default()
    };
    loop {
        match vcpu.run() {
            Ok(VcpuExit::IoOut(port, _)) => {
                got.io_out += 1;
                if port == PORT_DONE {
                    break;
                }
            }
            Ok(VcpuExit::IoIn(_, data)) => {
                got.io_in += 1;
                data.fill(0x5a);
            }
            Ok(VcpuExit::MmioWrite(_, _)) => got.mmio_write += 1,
            Ok(VcpuExit::MmioRead(_, data)) => {
                got.mmio_read += 1;
                data.fill(0xa5);
            }
            Ok(VcpuExit::Hlt) => got.hlt += 1,
            Ok(VcpuExit::Intr) => {}
            Ok(other) => {
                let what = format!("{other:?}");
                let rip = vcpu.get_regs().map_or(0, |r| r.rip);
                return Err(RunnerError(format!(
                    "unexpected exit {what} at rip {rip:#x}"
                )));
            }
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {}
            Err(e) => return Err(err("KVM_RUN", e)),
        }
    }
    got.io = got.io_out + got.io_in;
    {
        use std::os::fd::AsRawFd;
        got.kvm_stats = crate::sys::kvm_stats_fd(vcpu.as_raw_fd())
            .ok()
            .and_then(|fd| {
                let mut f = std::fs::File::from(fd);
                let mut b = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut b).ok()?;
                parse_kvm_stats(&b)
            })
            .unwrap_or_default();
    }
    got.mmio = got.mmio_write + got.mmio_read;
    // CPUID and the MSRs are handled in the kernel: the guest program executed exactly these.
    got.cpuid = u64::from(n);
    got.rdmsr = u64::from(n);
    got.wrmsr = u64::from(n);
    hold();
    drop(vcpu);
    drop(vm);
    drop(mem);
    drop(extra);
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_line_roundtrip() {
        let e = RunnerCounts::expected(1000);
        assert_eq!(e.io, 2001);
        let back = RunnerCounts::parse_expect_line(&e.expect_line()).unwrap();
        assert_eq!(back, RunnerCounts { iterations: 0, ..e });
    }

    #[test]
    fn parses_binary_kvm_stats() {
        // Header (6 x u32), then 2 descriptors with 8-byte names, then data.
        let name_size = 8usize;
        let desc_offset = 24usize;
        let data_offset = desc_offset + 2 * (16 + name_size);
        let mut b = Vec::new();
        for v in [
            0u32,
            name_size as u32,
            2,
            0,
            desc_offset as u32,
            data_offset as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for (i, name) in [b"exits\0\0\0", b"hlt\0\0\0\0\0"].iter().enumerate() {
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&0i16.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&((i * 8) as u32).to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&name[..]);
        }
        b.extend_from_slice(&42u64.to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes());
        assert_eq!(
            parse_kvm_stats(&b).unwrap(),
            vec![("exits".to_string(), 42), ("hlt".to_string(), 7)]
        );
        assert_eq!(parse_kvm_stats(&b[..10]), None);
    }

    #[test]
    fn guest_loop_jumps_back_to_its_top() {
        let c = guest_code(3);
        let jnz = c.iter().position(|&b| b == 0x75).unwrap();
        let target = (jnz as isize + 2) + (c[jnz + 1] as i8 as isize);
        assert_eq!(target, 8);
        assert_eq!(c[target as usize], 0xB0);
    }
}
