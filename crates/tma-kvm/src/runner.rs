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

use crate::KvmError;

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
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

/// Run the guest for `n` iterations (1..=65535); returns the exits the VMM handled.
pub fn run_guest(n: u16) -> Result<RunnerCounts, KvmError> {
    if n == 0 {
        return Err(KvmError::Runner("iterations must be at least 1".into()));
    }
    let err = |what: &str, e: kvm_ioctls::Error| KvmError::Runner(format!("{what}: {e}"));
    let kvm = Kvm::new().map_err(|e| err("cannot open /dev/kvm", e))?;
    let vm = kvm.create_vm().map_err(|e| err("KVM_CREATE_VM", e))?;
    // Needed by VMX without unrestricted guest for real mode; harmless elsewhere.
    let _ = vm.set_tss_address(0xfffb_d000);
    let code = guest_code(n);
    let mem = crate::sys::GuestMemory::new(&vm, MEM_SIZE, &code, LOAD_AT)
        .map_err(|e| KvmError::Runner(format!("guest memory: {e}")))?;
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
                return Err(KvmError::Runner(format!(
                    "unexpected exit {what} at rip {rip:#x}"
                )));
            }
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {}
            Err(e) => return Err(err("KVM_RUN", e)),
        }
    }
    got.io = got.io_out + got.io_in;
    got.mmio = got.mmio_write + got.mmio_read;
    // CPUID and the MSRs are handled in the kernel: the guest program executed exactly these.
    got.cpuid = u64::from(n);
    got.rdmsr = u64::from(n);
    got.wrmsr = u64::from(n);
    drop(vcpu);
    drop(vm);
    drop(mem);
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
    fn guest_loop_jumps_back_to_its_top() {
        let c = guest_code(3);
        let jnz = c.iter().position(|&b| b == 0x75).unwrap();
        let target = (jnz as isize + 2) + (c[jnz + 1] as i8 as isize);
        assert_eq!(target, 8);
        assert_eq!(c[target as usize], 0xB0);
    }
}
