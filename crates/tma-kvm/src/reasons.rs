//! Exit-reason names: Intel VMX basic exit reasons (TDX's TDCALL included), AMD SVM exit codes
//! (SEV-ES software codes included), and `KVM_EXIT_*` reasons of `kvm_userspace_exit`.
//!
//! The table is chosen per record from its `isa` field (1 = VMX, 2 = SVM), as the kernel's own
//! print format does, not from the host's CPU vendor: a PVM, TDX or mixed record decodes by what
//! it says. Codes missing from a table are shown as numbers, never dropped.

use std::fmt;

/// `isa` value of VMX records.
pub const ISA_VMX: u32 = 1;
/// `isa` value of SVM records.
pub const ISA_SVM: u32 = 2;
/// VMX: bit 31 of the exit reason marks a failed VM entry.
pub const VMX_FAILED_VMENTRY: u32 = 0x8000_0000;
/// IA32_TSC_DEADLINE: writes to it arm the guest's LAPIC timer.
pub const MSR_IA32_TSC_DEADLINE: u32 = 0x6e0;

const VMX: &[(u32, &str)] = &[
    (0, "EXCEPTION_NMI"),
    (1, "EXTERNAL_INTERRUPT"),
    (2, "TRIPLE_FAULT"),
    (3, "INIT_SIGNAL"),
    (4, "SIPI_SIGNAL"),
    (7, "INTERRUPT_WINDOW"),
    (8, "NMI_WINDOW"),
    (9, "TASK_SWITCH"),
    (10, "CPUID"),
    (12, "HLT"),
    (13, "INVD"),
    (14, "INVLPG"),
    (15, "RDPMC"),
    (16, "RDTSC"),
    (18, "VMCALL"),
    (19, "VMCLEAR"),
    (20, "VMLAUNCH"),
    (21, "VMPTRLD"),
    (22, "VMPTRST"),
    (23, "VMREAD"),
    (24, "VMRESUME"),
    (25, "VMWRITE"),
    (26, "VMOFF"),
    (27, "VMON"),
    (28, "CR_ACCESS"),
    (29, "DR_ACCESS"),
    (30, "IO_INSTRUCTION"),
    (31, "MSR_READ"),
    (32, "MSR_WRITE"),
    (33, "INVALID_STATE"),
    (34, "MSR_LOAD_FAIL"),
    (36, "MWAIT_INSTRUCTION"),
    (37, "MONITOR_TRAP_FLAG"),
    (39, "MONITOR_INSTRUCTION"),
    (40, "PAUSE_INSTRUCTION"),
    (41, "MCE_DURING_VMENTRY"),
    (43, "TPR_BELOW_THRESHOLD"),
    (44, "APIC_ACCESS"),
    (45, "EOI_INDUCED"),
    (46, "GDTR_IDTR"),
    (47, "LDTR_TR"),
    (48, "EPT_VIOLATION"),
    (49, "EPT_MISCONFIG"),
    (50, "INVEPT"),
    (51, "RDTSCP"),
    (52, "PREEMPTION_TIMER"),
    (53, "INVVPID"),
    (54, "WBINVD"),
    (55, "XSETBV"),
    (56, "APIC_WRITE"),
    (57, "RDRAND"),
    (58, "INVPCID"),
    (59, "VMFUNC"),
    (60, "ENCLS"),
    (61, "RDSEED"),
    (62, "PML_FULL"),
    (63, "XSAVES"),
    (64, "XRSTORS"),
    (67, "UMWAIT"),
    (68, "TPAUSE"),
    (74, "BUS_LOCK"),
    (75, "NOTIFY"),
    (77, "TDCALL"),
    (84, "MSR_READ_IMM"),
    (85, "MSR_WRITE_IMM"),
];

const SVM: &[(u32, &str)] = &[
    (0x000, "read_cr0"),
    (0x002, "read_cr2"),
    (0x003, "read_cr3"),
    (0x004, "read_cr4"),
    (0x008, "read_cr8"),
    (0x010, "write_cr0"),
    (0x012, "write_cr2"),
    (0x013, "write_cr3"),
    (0x014, "write_cr4"),
    (0x018, "write_cr8"),
    (0x020, "read_dr0"),
    (0x021, "read_dr1"),
    (0x022, "read_dr2"),
    (0x023, "read_dr3"),
    (0x024, "read_dr4"),
    (0x025, "read_dr5"),
    (0x026, "read_dr6"),
    (0x027, "read_dr7"),
    (0x030, "write_dr0"),
    (0x031, "write_dr1"),
    (0x032, "write_dr2"),
    (0x033, "write_dr3"),
    (0x034, "write_dr4"),
    (0x035, "write_dr5"),
    (0x036, "write_dr6"),
    (0x037, "write_dr7"),
    (0x040, "DE excp"),
    (0x041, "DB excp"),
    (0x043, "BP excp"),
    (0x044, "OF excp"),
    (0x045, "BR excp"),
    (0x046, "UD excp"),
    (0x047, "NM excp"),
    (0x048, "DF excp"),
    (0x04a, "TS excp"),
    (0x04b, "NP excp"),
    (0x04c, "SS excp"),
    (0x04d, "GP excp"),
    (0x04e, "PF excp"),
    (0x050, "MF excp"),
    (0x051, "AC excp"),
    (0x052, "MC excp"),
    (0x053, "XF excp"),
    (0x060, "interrupt"),
    (0x061, "nmi"),
    (0x062, "smi"),
    (0x063, "init"),
    (0x064, "vintr"),
    (0x065, "cr0_sel_write"),
    (0x066, "read_idtr"),
    (0x067, "read_gdtr"),
    (0x068, "read_ldtr"),
    (0x069, "read_rt"),
    (0x06a, "write_idtr"),
    (0x06b, "write_gdtr"),
    (0x06c, "write_ldtr"),
    (0x06d, "write_rt"),
    (0x06e, "rdtsc"),
    (0x06f, "rdpmc"),
    (0x070, "pushf"),
    (0x071, "popf"),
    (0x072, "cpuid"),
    (0x073, "rsm"),
    (0x074, "iret"),
    (0x075, "swint"),
    (0x076, "invd"),
    (0x077, "pause"),
    (0x078, "hlt"),
    (0x079, "invlpg"),
    (0x07a, "invlpga"),
    (0x07b, "io"),
    (0x07c, "msr"),
    (0x07d, "task_switch"),
    (0x07e, "ferr_freeze"),
    (0x07f, "shutdown"),
    (0x080, "vmrun"),
    (0x081, "hypercall"),
    (0x082, "vmload"),
    (0x083, "vmsave"),
    (0x084, "stgi"),
    (0x085, "clgi"),
    (0x086, "skinit"),
    (0x087, "rdtscp"),
    (0x088, "icebp"),
    (0x089, "wbinvd"),
    (0x08a, "monitor"),
    (0x08b, "mwait"),
    (0x08c, "mwait_cond"),
    (0x08d, "xsetbv"),
    (0x08e, "rdpru"),
    (0x08f, "write_efer_trap"),
    (0x090, "write_cr0_trap"),
    (0x094, "write_cr4_trap"),
    (0x098, "write_cr8_trap"),
    (0x0a2, "invpcid"),
    (0x0a5, "buslock"),
    (0x0a6, "idle-halt"),
    (0x400, "npf"),
    (0x401, "avic_incomplete_ipi"),
    (0x402, "avic_unaccelerated_access"),
    (0x403, "vmgexit"),
    (0x8000_0001, "vmgexit_mmio_read"),
    (0x8000_0002, "vmgexit_mmio_write"),
    (0x8000_0003, "vmgexit_nmi_complete"),
    (0x8000_0004, "vmgexit_ap_hlt_loop"),
    (0x8000_0005, "vmgexit_ap_jump_table"),
    (0x8000_0010, "vmgexit_page_state_change"),
    (0x8000_0011, "vmgexit_guest_request"),
    (0x8000_0012, "vmgexit_ext_guest_request"),
    (0x8000_0013, "vmgexit_ap_creation"),
    (0x8000_fffd, "vmgexit_hypervisor_feature"),
    (0xffff_ffff, "invalid_guest_state"),
];

const USERSPACE: &[&str] = &[
    "UNKNOWN",
    "EXCEPTION",
    "IO",
    "HYPERCALL",
    "DEBUG",
    "HLT",
    "MMIO",
    "IRQ_WINDOW_OPEN",
    "SHUTDOWN",
    "FAIL_ENTRY",
    "INTR",
    "SET_TPR",
    "TPR_ACCESS",
    "S390_SIEIC",
    "S390_RESET",
    "DCR",
    "NMI",
    "INTERNAL_ERROR",
    "OSI",
    "PAPR_HCALL",
    "S390_UCONTROL",
    "WATCHDOG",
    "S390_TSCH",
    "EPR",
    "SYSTEM_EVENT",
    "S390_STSI",
    "IOAPIC_EOI",
    "HYPERV",
    "ARM_NISV",
    "X86_RDMSR",
    "X86_WRMSR",
    "DIRTY_RING_FULL",
    "AP_RESET_HOLD",
    "X86_BUS_LOCK",
    "XEN",
    "RISCV_SBI",
    "RISCV_CSR",
    "NOTIFY",
    "LOONGARCH_IOCSR",
    "MEMORY_FAULT",
    "TDX",
];

fn lookup(table: &[(u32, &'static str)], code: u32) -> Option<&'static str> {
    table
        .binary_search_by_key(&code, |&(c, _)| c)
        .ok()
        .map(|i| table[i].1)
}

/// Which name table a `kvm_exit` record uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Isa {
    /// Intel VMX (TDX guests included).
    Vmx,
    /// AMD SVM.
    Svm,
    /// Any other `isa` value: the code is shown as a number.
    Other(u32),
}

impl Isa {
    /// From the record's `isa` field. Kernels without the field are VMX-or-SVM by host vendor;
    /// the caller passes the fallback it determined.
    pub fn from_raw(isa: u32) -> Isa {
        match isa {
            ISA_VMX => Isa::Vmx,
            ISA_SVM => Isa::Svm,
            n => Isa::Other(n),
        }
    }
}

/// A decoded VM-exit reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExitReason {
    /// Name table.
    pub isa: Isa,
    /// VMX: basic exit reason (`exit_reason & 0xffff`); SVM/other: the full code.
    pub code: u32,
    /// VMX: bit 31 (VM entry failed).
    pub failed_vmentry: bool,
}

impl ExitReason {
    /// Decode a raw `exit_reason` field according to `isa`.
    pub fn decode(isa: Isa, exit_reason: u32) -> ExitReason {
        match isa {
            Isa::Vmx => ExitReason {
                isa,
                code: exit_reason & 0xffff,
                failed_vmentry: exit_reason & VMX_FAILED_VMENTRY != 0,
            },
            _ => ExitReason {
                isa,
                code: exit_reason,
                failed_vmentry: false,
            },
        }
    }

    /// The table name, if the code is known.
    pub fn name(&self) -> Option<&'static str> {
        match self.isa {
            Isa::Vmx => lookup(VMX, self.code),
            Isa::Svm => lookup(SVM, self.code),
            Isa::Other(_) => None,
        }
    }

    /// True for the timer-related reasons grouped in the "timer" summary line:
    /// VMX EXTERNAL_INTERRUPT, PREEMPTION_TIMER, TDCALL (TDX guests program their timer through
    /// the TDX module); SVM interrupt. TSC-deadline MSR writes are matched on the MSR number by
    /// the caller ([`ExitReason::is_msr_write`] plus `ecx == 0x6e0`).
    pub fn is_timer(&self) -> bool {
        matches!(
            (self.isa, self.code),
            (Isa::Vmx, 1) | (Isa::Vmx, 52) | (Isa::Vmx, 77) | (Isa::Svm, 0x060)
        )
    }

    /// True when the exit is an MSR write, so that `info1`/`ecx` tell the MSR (VMX MSR_WRITE,
    /// MSR_WRITE_IMM; SVM `msr` with exit_info_1 == 1).
    pub fn is_msr_write(&self, info1: u64) -> bool {
        match self.isa {
            Isa::Vmx => self.code == 32 || self.code == 85,
            Isa::Svm => self.code == 0x07c && info1 == 1,
            Isa::Other(_) => false,
        }
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name(), self.isa) {
            (Some(n), _) => f.write_str(n)?,
            (None, Isa::Vmx) => write!(f, "unknown VMX {}", self.code)?,
            (None, Isa::Svm) => write!(f, "unknown SVM {:#x}", self.code)?,
            (None, Isa::Other(i)) => write!(f, "unknown isa {i} reason {:#x}", self.code)?,
        }
        if self.failed_vmentry {
            f.write_str(" FAILED_VMENTRY")?;
        }
        Ok(())
    }
}

/// Name of a `KVM_EXIT_*` reason (without the prefix), `None` when unknown.
pub fn userspace_exit_name(reason: u32) -> Option<&'static str> {
    USERSPACE.get(reason as usize).copied()
}

/// `KVM_EXIT_IO` etc. for display; unknown codes as `unknown (N)`.
pub fn userspace_exit_label(reason: u32) -> String {
    match userspace_exit_name(reason) {
        Some(n) => format!("KVM_EXIT_{n}"),
        None => format!("unknown KVM_EXIT ({reason})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(VMX.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(SVM.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn vmx_names_and_flags() {
        let r = ExitReason::decode(Isa::Vmx, 48);
        assert_eq!(r.to_string(), "EPT_VIOLATION");
        assert_eq!(ExitReason::decode(Isa::Vmx, 77).to_string(), "TDCALL");
        assert_eq!(ExitReason::decode(Isa::Vmx, 84).to_string(), "MSR_READ_IMM");
        assert_eq!(
            ExitReason::decode(Isa::Vmx, 85).to_string(),
            "MSR_WRITE_IMM"
        );
        assert_eq!(ExitReason::decode(Isa::Vmx, 74).to_string(), "BUS_LOCK");
        assert_eq!(ExitReason::decode(Isa::Vmx, 75).to_string(), "NOTIFY");
        assert_eq!(
            ExitReason::decode(Isa::Vmx, 0x8000_0021).to_string(),
            "INVALID_STATE FAILED_VMENTRY"
        );
        // Bits 16..30 are dropped like the kernel's `& 0xffff`.
        assert_eq!(ExitReason::decode(Isa::Vmx, 0x0800_0030).code, 48);
        assert_eq!(
            ExitReason::decode(Isa::Vmx, 76).to_string(),
            "unknown VMX 76"
        );
    }

    #[test]
    fn svm_names() {
        assert_eq!(ExitReason::decode(Isa::Svm, 0x400).to_string(), "npf");
        assert_eq!(ExitReason::decode(Isa::Svm, 0x04e).to_string(), "PF excp");
        assert_eq!(
            ExitReason::decode(Isa::Svm, 0x8000_0002).to_string(),
            "vmgexit_mmio_write"
        );
        assert_eq!(
            ExitReason::decode(Isa::Svm, 0xffff_ffff).to_string(),
            "invalid_guest_state"
        );
        assert_eq!(ExitReason::decode(Isa::Svm, 0x0a6).to_string(), "idle-halt");
        assert_eq!(ExitReason::decode(Isa::Svm, 0x0a5).to_string(), "buslock");
        assert_eq!(
            ExitReason::decode(Isa::Svm, 0x1234).to_string(),
            "unknown SVM 0x1234"
        );
        // SVM codes keep bit 31 (no FAILED_VMENTRY on SVM).
        assert!(!ExitReason::decode(Isa::Svm, 0x8000_0001).failed_vmentry);
    }

    #[test]
    fn other_isa_is_numeric() {
        assert_eq!(
            ExitReason::decode(Isa::from_raw(3), 12).to_string(),
            "unknown isa 3 reason 0xc"
        );
    }

    #[test]
    fn userspace_names() {
        assert_eq!(userspace_exit_label(2), "KVM_EXIT_IO");
        assert_eq!(userspace_exit_label(6), "KVM_EXIT_MMIO");
        assert_eq!(userspace_exit_label(30), "KVM_EXIT_X86_WRMSR");
        assert_eq!(userspace_exit_label(999), "unknown KVM_EXIT (999)");
    }
}
