//! From resolved instructions to measurement variants: register choice for operand kinds,
//! refusals (branches, rsp, harness registers, missing CPU features), latency chains per
//! input->output operand pair, and throughput bodies with N independent chains.
//! Dependencies come from iced-x86's `InstructionInfoFactory`. Pure.

use std::collections::{BTreeSet, HashMap};

use iced_x86::{
    CpuidFeature, FlowControl, Instruction, InstructionInfoFactory, OpAccess, OpKind, Register,
};

use crate::asm::{self, Operand, ParsedInsn, RegClass, Slot, GPR_POOL};
use crate::harness::{self, VecInit};
use crate::BenchError;

/// Register files (dependencies only link registers of the same file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegFile {
    Gpr,
    Vec,
    Mm,
    K,
    /// The arithmetic flags (modelled only for instructions that read flags).
    Flags,
}

pub fn reg_file(r: Register) -> Option<RegFile> {
    let f = r.full_register();
    Some(if f.is_gpr64() {
        RegFile::Gpr
    } else if f.is_zmm() {
        RegFile::Vec
    } else if f.is_mm() {
        RegFile::Mm
    } else if f.is_k() {
        RegFile::K
    } else {
        return None;
    })
}

/// Number of a full register within its file (rax=0, rcx=1 ..., zmm5=5).
pub fn reg_number(full: Register) -> Option<usize> {
    let class = match reg_file(full)? {
        RegFile::Gpr => RegClass::R64,
        RegFile::Vec => RegClass::Zmm,
        RegFile::Mm => RegClass::Mm,
        RegFile::K => RegClass::K,
        RegFile::Flags => return None,
    };
    (0..32).find(|&n| class.nth(n) == Some(full))
}

/// `like` resized to the register `full` (e.g. like=ecx, full=rdx -> edx).
pub fn same_size(like: Register, full: Register) -> Option<Register> {
    let class = RegClass::of(like)?;
    class.nth(reg_number(full.full_register())?)
}

/// The CPU's answer for one CPUID feature: Some(true/false), or None when tma cannot tell.
pub type FeatureProbe<'a> = &'a dyn Fn(CpuidFeature) -> Option<bool>;

/// Feature probe for the running CPU: off x86-64 there is none.
#[cfg(not(target_arch = "x86_64"))]
pub fn host_has(_f: CpuidFeature) -> Option<bool> {
    None // not an x86 CPU: tma cannot tell (and `tma bench` refuses to run)
}

/// Feature probe for the running CPU (std's runtime detection, which also checks OS support
/// for the AVX/AVX-512 register state).
#[cfg(target_arch = "x86_64")]
pub fn host_has(f: CpuidFeature) -> Option<bool> {
    use CpuidFeature as F;
    macro_rules! d {
        ($s:tt) => {
            Some(std::is_x86_feature_detected!($s))
        };
    }
    match f {
        F::INTEL8086 | F::INTEL186 | F::INTEL286 | F::INTEL386 | F::INTEL486 | F::X64 => Some(true),
        F::CMOV | F::CX8 | F::FPU | F::MMX | F::SSE => Some(true),
        F::SSE2 => d!("sse2"),
        F::SSE3 => d!("sse3"),
        F::SSSE3 => d!("ssse3"),
        F::SSE4_1 => d!("sse4.1"),
        F::SSE4_2 => d!("sse4.2"),
        F::SSE4A => d!("sse4a"),
        F::POPCNT => d!("popcnt"),
        F::LZCNT => d!("lzcnt"),
        F::AVX => d!("avx"),
        F::AVX2 => d!("avx2"),
        F::FMA => d!("fma"),
        F::F16C => d!("f16c"),
        F::BMI1 => d!("bmi1"),
        F::BMI2 => d!("bmi2"),
        F::ADX => d!("adx"),
        F::AES => d!("aes"),
        F::PCLMULQDQ => d!("pclmulqdq"),
        F::SHA => d!("sha"),
        F::MOVBE => d!("movbe"),
        F::RDRAND => d!("rdrand"),
        F::RDSEED => d!("rdseed"),
        F::AVX512F => d!("avx512f"),
        F::AVX512VL => d!("avx512vl"),
        F::AVX512BW => d!("avx512bw"),
        F::AVX512DQ => d!("avx512dq"),
        F::AVX512CD => d!("avx512cd"),
        F::AVX512_IFMA => d!("avx512ifma"),
        F::AVX512_VBMI => d!("avx512vbmi"),
        F::AVX512_VBMI2 => d!("avx512vbmi2"),
        F::AVX512_VNNI => d!("avx512vnni"),
        F::AVX512_BITALG => d!("avx512bitalg"),
        F::AVX512_VPOPCNTDQ => d!("avx512vpopcntdq"),
        F::AVX512_BF16 => d!("avx512bf16"),
        F::GFNI => d!("gfni"),
        F::VAES => d!("vaes"),
        F::VPCLMULQDQ => d!("vpclmulqdq"),
        F::SHA512 => d!("sha512"),
        F::SM3 => d!("sm3"),
        F::SM4 => d!("sm4"),
        F::RTM => d!("rtm"),
        _ => None,
    }
}

/// Refuse instructions the CPU lacks, naming the missing feature.
pub fn check_features(
    ins: &Instruction,
    text: &str,
    probe: FeatureProbe,
) -> Result<(), BenchError> {
    for &f in ins.cpuid_features() {
        if probe(f) == Some(false) {
            return Err(BenchError::MissingFeature {
                text: text.to_string(),
                feature: format!("{f:?}").replace('_', ""),
            });
        }
    }
    Ok(())
}

/// Refuse what the harness cannot run safely.
pub fn check_safe(ins: &Instruction, text: &str) -> Result<(), BenchError> {
    let refuse = |reason: &str| {
        Err(BenchError::Refused {
            text: text.to_string(),
            reason: reason.to_string(),
        })
    };
    let trap = ins.flow_control() == FlowControl::Exception
        || matches!(
            ins.mnemonic(),
            iced_x86::Mnemonic::Int3 | iced_x86::Mnemonic::Int1
        );
    if ins.flow_control() != FlowControl::Next && !trap {
        return refuse(
            "it changes control flow (branch/jump/call/return/interrupt); the harness runs \
             straight-line bodies only",
        );
    }
    if ins.is_ip_rel_memory_operand() {
        return refuse("RIP-relative memory operands are not supported; use [r14+disp]");
    }
    let mut f = InstructionInfoFactory::new();
    let info = f.info(ins);
    for u in info.used_registers() {
        let full = u.register().full_register();
        let writes = matches!(
            u.access(),
            OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
        );
        if full == Register::RSP && (writes || !is_mem_reg(ins, u.register())) {
            return refuse("it uses or writes rsp, the harness's stack pointer");
        }
        if full == Register::R15 {
            return refuse("it uses r15, the harness's loop counter (reserved)");
        }
        if full == Register::R14 && writes {
            return refuse(
                "it writes r14, which holds the scratch-buffer pointer (reserved; read it or \
                 use [r14+disp])",
            );
        }
    }
    if ins.op_kinds().any(|k| k == OpKind::Memory) && ins.memory_base() == Register::R14 {
        let d = ins.memory_displacement64() as i64;
        if !(0..(harness::MAX_MEM as i64 - 64)).contains(&d) {
            return refuse(
                "[r14+disp] must stay inside the memory buffer (0 <= disp < --mem, at most 1 GiB)",
            );
        }
    }
    Ok(())
}

fn is_mem_reg(ins: &Instruction, r: Register) -> bool {
    ins.op_kinds().any(|k| k == OpKind::Memory)
        && (ins.memory_base() == r || ins.memory_index() == r)
}

/// A data operand of one instruction (explicit register operand or implicit register).
#[derive(Debug, Clone)]
pub struct DataOp {
    /// 1-based label: explicit operands first, then implicit registers.
    pub label: usize,
    pub reg: Register,
    /// Operand index when explicit.
    pub explicit: Option<u32>,
    /// LEA address registers: Some(Base) / Some(Index) (LEA reads them as data).
    pub addr: Option<AddrRole>,
    pub read: bool,
    pub written: bool,
    /// The arithmetic flags (`reg` is `Register::None`).
    pub flags: bool,
}

impl DataOp {
    pub fn file(&self) -> Option<RegFile> {
        if self.flags {
            Some(RegFile::Flags)
        } else {
            reg_file(self.reg)
        }
    }
    pub fn name(&self) -> String {
        if self.flags {
            "flags".into()
        } else {
            asm::register_name(self.reg)
        }
    }
    fn same_reg(&self, other: &DataOp) -> bool {
        self.flags == other.flags && self.reg.full_register() == other.reg.full_register()
    }
}

/// Whether the operand's old value reaches the output. A conditional write (cmovcc's
/// destination) keeps the old value when the condition is false, so it is an input too.
fn reads(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Read
            | OpAccess::ReadWrite
            | OpAccess::CondRead
            | OpAccess::ReadCondWrite
            | OpAccess::CondWrite
    )
}
fn writes(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite
    )
}

/// Which address register of a LEA an operand is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrRole {
    Base,
    Index,
}

/// Register data operands of `ins` with their access, explicit ones first.
pub fn data_ops(ins: &Instruction) -> Vec<DataOp> {
    let mut f = InstructionInfoFactory::new();
    let info = f.info(ins);
    let mut out = Vec::new();
    let mut explicit_full = BTreeSet::new();
    for i in 0..ins.op_count() {
        if ins.op_kind(i) != OpKind::Register {
            continue;
        }
        let r = ins.op_register(i);
        let acc = info.op_access(i);
        explicit_full.insert(r.full_register());
        out.push(DataOp {
            label: i as usize + 1,
            reg: r,
            explicit: Some(i),
            addr: None,
            read: reads(acc),
            written: writes(acc),
            flags: false,
        });
    }
    let mut next = ins.op_count() as usize + 1;
    if ins.mnemonic() == iced_x86::Mnemonic::Lea {
        let mem_label = (0..ins.op_count())
            .find(|&i| ins.op_kind(i) == OpKind::Memory)
            .map_or(2, |i| i as usize + 1);
        for (r, role) in [
            (ins.memory_base(), AddrRole::Base),
            (ins.memory_index(), AddrRole::Index),
        ] {
            if r == Register::None || reg_file(r).is_none() {
                continue;
            }
            let label = if role == AddrRole::Base {
                mem_label
            } else {
                let l = next;
                next += 1;
                l
            };
            explicit_full.insert(r.full_register());
            out.push(DataOp {
                label,
                reg: r,
                explicit: None,
                addr: Some(role),
                read: true,
                written: false,
                flags: false,
            });
        }
    }
    let mut implicit: Vec<DataOp> = Vec::new();
    for u in info.used_registers() {
        let r = u.register();
        let full = r.full_register();
        if explicit_full.contains(&full) || is_mem_reg(ins, r) || reg_file(r).is_none() {
            continue;
        }
        if let Some(d) = implicit.iter_mut().find(|d| d.reg.full_register() == full) {
            d.read |= reads(u.access());
            d.written |= writes(u.access());
            continue;
        }
        implicit.push(DataOp {
            label: next,
            reg: r,
            explicit: None,
            addr: None,
            read: reads(u.access()),
            written: writes(u.access()),
            flags: false,
        });
        next += 1;
    }
    out.extend(implicit);
    out
}

/// Register operands plus the arithmetic flags as one more operand (label after the registers)
/// when the instruction reads flags (adc, sbb, rcl, cmovcc, setcc...): then flags inputs and
/// outputs take part in latency pairs. Flags written by an instruction that does not read them
/// are not listed (every ALU instruction writes them; those pairs are not measured).
pub fn latency_ops(ins: &Instruction) -> Vec<DataOp> {
    let mut ops = data_ops(ins);
    if ins.rflags_read() != 0 {
        let label = ops.iter().map(|o| o.label).max().unwrap_or(0) + 1;
        ops.push(DataOp {
            label,
            reg: Register::None,
            explicit: None,
            addr: None,
            read: true,
            written: ins.rflags_modified() != 0,
            flags: true,
        });
    }
    ops
}

/// A body to time: per-chain copies of the instructions.
#[derive(Debug, Clone)]
pub struct Variant {
    /// One entry per independent chain; each is the list of instructions of one body copy.
    pub chains: Vec<Vec<Instruction>>,
    /// Reload registers `(spare, source)`: the harness gives `spare` the initial value of
    /// `source`, and the body copies `mov source, spare` before the instruction that reads or
    /// partly writes the implicit register `source` (throughput of mul, cwd, rdtsc...).
    pub reloads: Vec<(Register, Register)>,
}

impl Variant {
    pub fn encode(&self) -> Result<Vec<harness::Copy>, String> {
        self.chains
            .iter()
            .map(|c| {
                Ok(harness::Copy {
                    insns: c.iter().map(asm::encode).collect::<Result<_, _>>()?,
                })
            })
            .collect()
    }

    pub fn text(&self) -> String {
        self.chains[0]
            .iter()
            .map(asm::format)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One latency pair to measure.
#[derive(Debug, Clone)]
pub struct PairPlan {
    pub pair: String,
    pub from: String,
    pub to: String,
    pub variant: Variant,
    pub note: Option<String>,
    /// Cross-file pairs: the connector instruction that closes the chain (output -> input).
    pub connector: Option<String>,
    /// Cross-file pairs: the connector round trip (input -> output file -> input), measured
    /// separately; latency = chain - connector, bounded using this round trip.
    pub round_trip: Option<Variant>,
}

/// A pair that cannot be measured, with the reason.
#[derive(Debug, Clone)]
pub struct SkippedPair {
    pub pair: String,
    pub reason: String,
}

/// Replace the register of an explicit operand.
fn set_reg(ins: &Instruction, op: u32, full: Register) -> Option<Instruction> {
    let mut n = *ins;
    let r = same_size(ins.op_register(op), full)?;
    n.set_op_register(op, r);
    asm::encode(&n).ok()?;
    Some(n)
}

/// Replace a LEA address register.
fn set_addr(ins: &Instruction, role: Option<AddrRole>, full: Register) -> Option<Instruction> {
    let mut n = *ins;
    match role? {
        AddrRole::Base => n.set_memory_base(same_size(ins.memory_base(), full)?),
        AddrRole::Index => n.set_memory_index(same_size(ins.memory_index(), full)?),
    }
    asm::encode(&n).ok()?;
    Some(n)
}

fn links(ins: &Instruction, broken: &[Register]) -> Vec<String> {
    let ops = latency_ops(ins);
    let mut v = Vec::new();
    for i in ops
        .iter()
        .filter(|o| o.read && (o.flags || !broken.contains(&o.reg.full_register())))
    {
        for o in ops.iter().filter(|o| o.written) {
            if i.same_reg(o) || (i.label == o.label) {
                v.push(format!("{}->{}", i.label, o.label));
            }
        }
    }
    v
}

/// A connector: one instruction moving a value from register file to register file, so a
/// latency chain can cross files. Its latency is not known alone; the round trip of the two
/// directions is measured and the pair's latency is reported as bounds.
#[derive(Debug, Clone)]
pub struct Connector {
    /// The instruction closing the chain (output register -> input register).
    pub back: Instruction,
    /// The opposite direction (input register -> output register).
    pub forth: Instruction,
}

fn with2(code: iced_x86::Code, a: Register, b: Register) -> Option<Instruction> {
    let i = Instruction::with2(code, a, b).ok()?;
    asm::encode(&i).ok()?;
    Some(i)
}

/// A one-instruction move from `from` (an output of the instruction) to `to` (an input).
/// `vex`: the instruction is VEX/EVEX encoded (use vmovq, no SSE/AVX mixing).
fn connector_one(from: &DataOp, to: &DataOp, vex: bool) -> Option<Instruction> {
    use iced_x86::Code as C;
    let num = |r: Register| reg_number(r.full_register());
    let xmm = |r: Register| RegClass::Xmm.nth(num(r)?);
    let r64 = |r: Register| Some(r.full_register());
    match (from.file()?, to.file()?) {
        (RegFile::Gpr, RegFile::Vec) => {
            let x = xmm(to.reg)?;
            let code = if num(to.reg)? >= 16 {
                C::EVEX_Vmovq_xmm_rm64
            } else if vex {
                C::VEX_Vmovq_xmm_rm64
            } else {
                C::Movq_xmm_rm64
            };
            with2(code, x, r64(from.reg)?)
        }
        (RegFile::Vec, RegFile::Gpr) => {
            let x = xmm(from.reg)?;
            let code = if num(from.reg)? >= 16 {
                C::EVEX_Vmovq_rm64_xmm
            } else if vex {
                C::VEX_Vmovq_rm64_xmm
            } else {
                C::Movq_rm64_xmm
            };
            with2(code, r64(to.reg)?, x)
        }
        (RegFile::Gpr, RegFile::Mm) => with2(C::Movq_mm_rm64, to.reg, r64(from.reg)?),
        (RegFile::Mm, RegFile::Gpr) => with2(C::Movq_rm64_mm, r64(to.reg)?, from.reg),
        (RegFile::Gpr, RegFile::K) => with2(
            C::VEX_Kmovw_kr_r32,
            to.reg,
            RegClass::R32.nth(num(from.reg)?)?,
        ),
        (RegFile::K, RegFile::Gpr) => with2(
            C::VEX_Kmovw_r32_kr,
            RegClass::R32.nth(num(to.reg)?)?,
            from.reg,
        ),
        (RegFile::Gpr, RegFile::Flags) => with2(C::Test_rm64_r64, r64(from.reg)?, r64(from.reg)?),
        (RegFile::Flags, RegFile::Gpr) => {
            let i = Instruction::with1(C::Setb_rm8, RegClass::R8.nth(num(to.reg)?)?).ok()?;
            asm::encode(&i).ok()?;
            Some(i)
        }
        _ => None,
    }
}

/// Connectors closing a chain from `o` (output, file B) back to `i` (input, file A).
pub fn connector(i: &DataOp, o: &DataOp, vex: bool) -> Option<Connector> {
    Some(Connector {
        back: connector_one(o, i, vex)?,
        forth: connector_one(i, o, vex)?,
    })
}

/// `mov r64, spare` before the instruction for every general-purpose register it reads and
/// writes that is not the chain's input, so only the selected pair carries the chain.
fn breakers(ins: &Instruction, input: &DataOp, extra_used: &[Register]) -> Vec<Instruction> {
    let ops = latency_ops(ins);
    let mut used: BTreeSet<Register> = ops.iter().map(|o| o.reg.full_register()).collect();
    used.extend(extra_used.iter().map(|r| r.full_register()));
    if ins.op_kinds().any(|k| k == OpKind::Memory) {
        used.insert(ins.memory_base().full_register());
        used.insert(ins.memory_index().full_register());
    }
    let mut spares = [
        Register::R13,
        Register::R12,
        Register::R11,
        Register::R10,
        Register::R9,
        Register::R8,
    ]
    .into_iter()
    .filter(|r| !used.contains(r));
    let mut out = Vec::new();
    for o in &ops {
        if o.flags || !o.read || !o.written || o.explicit.is_none() || o.same_reg(input) {
            continue;
        }
        if reg_file(o.reg) != Some(RegFile::Gpr) {
            continue;
        }
        let Some(sp) = spares.next() else { break };
        if let Some(m) = with2(iced_x86::Code::Mov_rm64_r64, o.reg.full_register(), sp) {
            out.push(m);
        }
    }
    out
}

fn note_links(l: Vec<String>, pair: &str) -> Option<String> {
    let others: Vec<&String> = l.iter().filter(|p| **p != pair).collect();
    (!others.is_empty()).then(|| {
        format!(
            "chain also runs through {}",
            others
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Latency pairs of a single instruction (every register or flags input -> output), as a
/// chain through that pair. Pairs across register files close the chain with a connector
/// instruction and carry the round-trip variant to measure (see [`PairPlan::round_trip`]).
pub fn latency_pairs(ins: &Instruction) -> (Vec<PairPlan>, Vec<SkippedPair>) {
    let ops = latency_ops(ins);
    let vex = matches!(
        ins.code().op_code().encoding(),
        iced_x86::EncodingKind::VEX | iced_x86::EncodingKind::EVEX
    );
    let mut plans = Vec::new();
    let mut skipped = Vec::new();
    for i in ops.iter().filter(|o| o.read) {
        for o in ops.iter().filter(|o| o.written) {
            let pair = format!("{}->{}", i.label, o.label);
            if i.file() != o.file() {
                let Some(c) = connector(i, o, vex) else {
                    skipped.push(SkippedPair {
                        pair,
                        reason: format!(
                            "{} and {} are in register files tma has no connector instruction between",
                            i.name(),
                            o.name()
                        ),
                    });
                    continue;
                };
                let br = breakers(ins, i, &[]);
                let broken: Vec<Register> = br.iter().map(|b| b.op0_register()).collect();
                let mut body = br;
                body.push(*ins);
                body.push(c.back);
                plans.push(PairPlan {
                    pair: pair.clone(),
                    from: i.name(),
                    to: o.name(),
                    variant: Variant {
                        chains: vec![body],
                        reloads: Vec::new(),
                    },
                    // The connector overwrites the input register (setb only its low byte),
                    // so paths that loop through the input alone are cut.
                    note: note_links(
                        links(ins, &broken)
                            .into_iter()
                            .filter(|l| {
                                c.back.mnemonic() == iced_x86::Mnemonic::Setb
                                    || !l.starts_with(&format!("{}->", i.label))
                            })
                            .collect(),
                        "-",
                    ),
                    connector: Some(asm::format(&c.back)),
                    round_trip: Some(Variant {
                        chains: vec![vec![c.forth, c.back]],
                        reloads: Vec::new(),
                    }),
                });
                continue;
            }
            let same = i.same_reg(o);
            if !same
                && matches!(
                    ins.mnemonic(),
                    iced_x86::Mnemonic::Div | iced_x86::Mnemonic::Idiv
                )
            {
                skipped.push(SkippedPair {
                    pair,
                    reason: "the divisor cannot be the dividend/quotient register without faulting"
                        .into(),
                });
                continue;
            }
            let var = if same {
                Some(*ins)
            } else {
                match (i.explicit, o.explicit) {
                    _ if i.addr.is_some() => set_addr(ins, i.addr, o.reg.full_register()),
                    (Some(ie), _) => set_reg(ins, ie, o.reg.full_register()),
                    (None, Some(oe)) => set_reg(ins, oe, i.reg.full_register()),
                    (None, None) => None,
                }
            };
            let Some(var) = var else {
                skipped.push(SkippedPair {
                    pair,
                    reason: "the operands cannot be made the same register in this encoding".into(),
                });
                continue;
            };
            // Flags -> flags: break the other read-write registers so only flags chain.
            let (body, broken) = if i.flags {
                let br = breakers(&var, i, &[]);
                let broken: Vec<Register> = br.iter().map(|b| b.op0_register()).collect();
                let mut body = br;
                body.push(var);
                (body, broken)
            } else {
                (vec![var], Vec::new())
            };
            plans.push(PairPlan {
                pair: pair.clone(),
                from: i.name(),
                to: o.name(),
                variant: Variant {
                    chains: vec![body],
                    reloads: Vec::new(),
                },
                note: note_links(links(&var, &broken), &pair),
                connector: None,
                round_trip: None,
            });
        }
    }
    (plans, skipped)
}

/// A throughput body with `k` independent chains: registers written by the body are renamed
/// per chain; read-only registers stay shared. Err(reason) when not possible.
pub fn throughput_variant(body: &[Instruction], k: usize) -> Result<Variant, String> {
    let mut used: BTreeSet<Register> = BTreeSet::new();
    let mut written: Vec<Register> = Vec::new();
    let mut addr_regs = BTreeSet::new();
    // Per instruction: implicit registers to reload before it.
    let mut reload_before: Vec<Vec<Register>> = Vec::new();
    let mut implicit_writes = false;
    let mut factory = InstructionInfoFactory::new();
    for ins in body {
        if matches!(
            ins.mnemonic(),
            iced_x86::Mnemonic::Cpuid | iced_x86::Mnemonic::Serialize
        ) {
            return Err(format!(
                "{} is serializing (no two copies overlap, so its throughput is its latency; in a VM cpuid also exits to the hypervisor)",
                asm::format(ins)
            ));
        }
        let ops = data_ops(ins);
        let explicit_written: BTreeSet<Register> = ops
            .iter()
            .filter(|d| d.written && d.explicit.is_some())
            .map(|d| d.reg.full_register())
            .collect();
        for d in &ops {
            used.insert(d.reg.full_register());
            if d.written && d.explicit.is_some() {
                let f = d.reg.full_register();
                if !written.contains(&f) {
                    written.push(f);
                }
            }
        }
        let info = factory.info(ins);
        let mut reloads = Vec::new();
        for u in info.used_registers() {
            let r = u.register();
            let full = r.full_register();
            if !writes(u.access()) || explicit_written.contains(&full) || is_mem_reg(ins, r) {
                continue;
            }
            match reg_file(r) {
                None => continue,
                Some(RegFile::Gpr) => {}
                Some(_) => {
                    return Err(format!(
                        "{} writes {} implicitly, so its copies cannot be made independent",
                        asm::format(ins),
                        asm::register_name(r)
                    ))
                }
            }
            used.insert(full);
            implicit_writes = true;
            let read = info
                .used_registers()
                .iter()
                .any(|v| v.register().full_register() == full && reads(v.access()))
                || ops.iter().any(|d| d.reg.full_register() == full && d.read);
            let partial = r.size() < 4;
            if (read || partial) && !reloads.contains(&full) {
                reloads.push(full);
            }
        }
        reload_before.push(reloads);
        if ins.op_kinds().any(|k| k == OpKind::Memory) {
            for r in [ins.memory_base(), ins.memory_index()] {
                if r != Register::None {
                    addr_regs.insert(r.full_register());
                    used.insert(r.full_register());
                }
            }
        }
    }
    if written.is_empty() && !implicit_writes {
        return Err("the body writes no register, so chains are already independent".into());
    }
    let all_reloads: Vec<Register> = {
        let mut v: Vec<Register> = reload_before.iter().flatten().copied().collect();
        v.sort();
        v.dedup();
        v
    };
    if let Some(r) = written
        .iter()
        .chain(&all_reloads)
        .find(|r| addr_regs.contains(r))
    {
        return Err(format!(
            "{} is both written and used as an address register",
            asm::register_name(*r)
        ));
    }
    if written.is_empty() && k > 1 {
        return Err(
            "only implicit registers are written, so one chain of copies is already independent"
                .into(),
        );
    }
    // Spare registers holding the reload values, taken from the end of the pool.
    let mut spare_pool: Vec<Register> = GPR_POOL
        .iter()
        .rev()
        .filter_map(|&n| RegClass::R64.nth(n))
        .filter(|r| !used.contains(r))
        .collect();
    let mut reloads: Vec<(Register, Register)> = Vec::new();
    for &r in &all_reloads {
        let Some(sp) = spare_pool.first().copied() else {
            return Err("no free general-purpose register left to hold reload values".into());
        };
        spare_pool.remove(0);
        used.insert(sp);
        reloads.push((sp, r));
    }
    let with_reloads = |copy: &[Instruction]| -> Result<Vec<Instruction>, String> {
        let mut out = Vec::new();
        for (ins, rl) in copy.iter().zip(&reload_before) {
            for r in rl {
                let sp = reloads
                    .iter()
                    .find(|(_, s)| s == r)
                    .map(|x| x.0)
                    .ok_or("reload register missing")?;
                out.push(
                    with2(iced_x86::Code::Mov_rm64_r64, *r, sp)
                        .ok_or("reload move does not encode")?,
                );
            }
            out.push(*ins);
        }
        Ok(out)
    };
    let mut free: HashMap<RegFile, Vec<Register>> = HashMap::new();
    let gprs: Vec<Register> = GPR_POOL
        .iter()
        .filter_map(|&n| RegClass::R64.nth(n))
        .filter(|r| !used.contains(r))
        .collect();
    free.insert(RegFile::Gpr, gprs);
    let uses_high_or_evex = body
        .iter()
        .any(|i| i.code().op_code().encoding() == iced_x86::EncodingKind::EVEX);
    let nvec = if uses_high_or_evex { 32 } else { 16 };
    free.insert(
        RegFile::Vec,
        (0..nvec)
            .filter_map(|n| RegClass::Zmm.nth(n))
            .filter(|r| !used.contains(r))
            .collect(),
    );
    free.insert(
        RegFile::Mm,
        (0..8)
            .filter_map(|n| RegClass::Mm.nth(n))
            .filter(|r| !used.contains(r))
            .collect(),
    );
    free.insert(
        RegFile::K,
        (1..8)
            .filter_map(|n| RegClass::K.nth(n))
            .filter(|r| !used.contains(r))
            .collect(),
    );
    let mut chains = vec![with_reloads(body)?];
    let mut cursor: HashMap<RegFile, usize> = HashMap::new();
    for _c in 1..k {
        let mut map: HashMap<Register, Register> = HashMap::new();
        for &w in &written {
            let file = reg_file(w).ok_or("unsupported register file")?;
            let pool = &free[&file];
            let cur = cursor.entry(file).or_insert(0);
            let Some(&n) = pool.get(*cur) else {
                return Err(format!(
                    "{k} chains need more free {file:?} registers than the {} available",
                    pool.len()
                ));
            };
            *cur += 1;
            map.insert(w, n);
        }
        let mut copy = Vec::new();
        for ins in body {
            let mut n = *ins;
            for i in 0..ins.op_count() {
                if ins.op_kind(i) == OpKind::Register {
                    let r = ins.op_register(i);
                    if let Some(&to) = map.get(&r.full_register()) {
                        let nr = same_size(r, to).ok_or("cannot rename register")?;
                        n.set_op_register(i, nr);
                    }
                }
            }
            asm::encode(&n).map_err(|e| format!("renamed copy does not encode: {e}"))?;
            copy.push(n);
        }
        chains.push(with_reloads(&copy)?);
    }
    Ok(Variant { chains, reloads })
}

/// Turn operand kinds (`r64`, `xmm`) into concrete registers, avoiding every register named
/// in the body, implicit registers and the harness's own.
pub fn concretize(body: &[ParsedInsn]) -> Result<Vec<ParsedInsn>, BenchError> {
    let mut taken: BTreeSet<Register> = BTreeSet::new();
    for p in body {
        for o in &p.operands {
            match o {
                Operand::Reg(r) => {
                    taken.insert(r.full_register());
                }
                Operand::Mem(m) => {
                    for r in [m.base, m.index].into_iter().flatten() {
                        taken.insert(r.full_register());
                    }
                }
                _ => {}
            }
        }
    }
    // Implicit registers of candidate encodings (e.g. xmm0 of sha256rnds2, rdx of mulx).
    for p in body {
        if p.operands.iter().any(|o| matches!(o, Operand::Kind(_))) {
            if let Some(slots) = asm::slot_classes(p) {
                let mut trial = p.clone();
                for (o, s) in trial.operands.iter_mut().zip(&slots) {
                    if let (Operand::Kind(_), Slot::Reg(c) | Slot::RegOrMem(c)) = (&*o, s) {
                        // A placeholder high register, just to learn the implicit ones.
                        *o = Operand::Reg(
                            c.nth(if *c == RegClass::R64 || *c == RegClass::R32 {
                                12
                            } else {
                                7
                            })
                            .unwrap_or(Register::None),
                        );
                    }
                }
                if let Ok(r) = asm::resolve(&trial) {
                    for d in data_ops(&r.instr) {
                        if d.explicit.is_none() {
                            taken.insert(d.reg.full_register());
                        }
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for p in body {
        let mut q = p.clone();
        if q.operands.iter().any(|o| matches!(o, Operand::Kind(_))) {
            for o in q.operands.iter_mut() {
                if let Operand::Kind(c) = *o {
                    let order: Vec<usize> = match c {
                        RegClass::R8 | RegClass::R16 | RegClass::R32 | RegClass::R64 => {
                            GPR_POOL.to_vec()
                        }
                        RegClass::K => (1..8).collect(),
                        _ => (0..16).collect(),
                    };
                    let pick = order
                        .into_iter()
                        .filter_map(|n| c.nth(n))
                        .find(|r| !taken.contains(&r.full_register()))
                        .ok_or_else(|| BenchError::Resolve {
                            text: p.text.clone(),
                            reason: format!("no free {c:?} register left to choose"),
                        })?;
                    taken.insert(pick.full_register());
                    *o = Operand::Reg(pick);
                }
            }
        }
        out.push(q);
    }
    Ok(out)
}

/// The vector/mm init the harness needs for a set of bodies.
pub fn vec_init(bodies: &[&Instruction]) -> (VecInit, bool) {
    let mut v = VecInit::None;
    let mut mm = false;
    for ins in bodies {
        for d in data_ops(ins) {
            if let Some(c) = RegClass::of(d.reg) {
                let n = reg_number(d.reg.full_register()).unwrap_or(0);
                v = v.max(harness::vec_init_for(c, n >= 16));
                mm |= c == RegClass::Mm;
            }
        }
        if ins.code().op_code().encoding() == iced_x86::EncodingKind::EVEX {
            v = v.max(VecInit::Avx512);
        } else if ins.code().op_code().encoding() == iced_x86::EncodingKind::VEX {
            v = v.max(VecInit::Avx);
        }
    }
    (v, mm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(t: &str) -> Instruction {
        asm::resolve(&asm::parse_insn(t).unwrap()).unwrap().instr
    }

    #[test]
    fn sha256rnds2_has_three_inputs() {
        let (p, _) = latency_pairs(&ins("sha256rnds2 xmm1, xmm2"));
        let pairs: Vec<(&str, String)> = p
            .iter()
            .map(|p| (p.pair.as_str(), p.variant.text()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("1->1", "sha256rnds2 xmm1, xmm2".to_string()),
                ("2->1", "sha256rnds2 xmm1, xmm1".to_string()),
                ("3->1", "sha256rnds2 xmm0, xmm2".to_string()),
            ]
        );
        assert!(p[2].note.as_deref().unwrap().contains("1->1"));
    }

    #[test]
    fn mulx_pairs_match_the_method_note() {
        let (p, _) = latency_pairs(&ins("mulx rax, rbx, rcx"));
        let t: Vec<String> = p
            .iter()
            .map(|p| format!("{} {}", p.pair, p.variant.text()))
            .collect();
        assert!(t.contains(&"3->1 mulx rax, rbx, rax".to_string()), "{t:?}");
        assert!(t.contains(&"3->2 mulx rax, rbx, rbx".to_string()), "{t:?}");
        assert!(t.contains(&"4->1 mulx rdx, rbx, rcx".to_string()), "{t:?}");
    }

    #[test]
    fn lea_address_registers_are_inputs() {
        let (p, _) = latency_pairs(&ins("lea rax, [rbx+rcx*4+8]"));
        let t: Vec<String> = p
            .iter()
            .map(|p| format!("{} {}", p.pair, p.variant.text()))
            .collect();
        assert_eq!(
            t,
            ["2->1 lea rax, [rax+rcx*4+8]", "3->1 lea rax, [rbx+rax*4+8]"]
        );
    }

    #[test]
    fn throughput_renames_written_registers_only() {
        let v = throughput_variant(&[ins("imul rax, rbx")], 4).unwrap();
        let t: Vec<String> = v.chains.iter().map(|c| asm::format(&c[0])).collect();
        assert_eq!(
            t,
            [
                "imul rax, rbx",
                "imul rcx, rbx",
                "imul rdx, rbx",
                "imul rsi, rbx"
            ]
        );
        // Implicit registers: reloaded from a spare before each copy when read (mul reads
        // rax); write-only full-width ones (rdx) are renamed by the core.
        let v = throughput_variant(&[ins("mul rcx")], 1).unwrap();
        assert_eq!(v.text(), "mov rax, r13; mul rcx");
        assert_eq!(v.reloads, [(Register::R13, Register::RAX)]);
        let v = throughput_variant(&[ins("mul rax")], 1).unwrap();
        assert_eq!(v.text(), "mov rax, r13; mul rax");
        let v = throughput_variant(&[ins("rdtsc")], 1).unwrap();
        assert_eq!(v.text(), "rdtsc");
        assert!(v.reloads.is_empty());
        assert!(throughput_variant(&[ins("rdtsc")], 2)
            .unwrap_err()
            .contains("already independent"));
        // A 16-bit implicit write (dx) merges into the old value: reloaded too; ax is only read.
        assert_eq!(
            throughput_variant(&[ins("cwd")], 1).unwrap().text(),
            "mov rdx, r13; cwd"
        );
        // Explicit destinations renamed per chain, implicit ones reloaded in every copy.
        let v = throughput_variant(&[ins("mulx rax, rbx, rcx")], 2).unwrap();
        assert_eq!(v.chains.len(), 2);
        assert!(throughput_variant(&[ins("cpuid")], 1)
            .unwrap_err()
            .contains("serializing"));
    }

    fn pair_texts(t: &str) -> Vec<String> {
        let (p, _) = latency_pairs(&ins(t));
        p.iter()
            .map(|p| {
                format!(
                    "{} {}->{}: {}{}",
                    p.pair,
                    p.from,
                    p.to,
                    p.variant.text(),
                    p.round_trip
                        .as_ref()
                        .map(|r| format!(" | rt {}", r.text()))
                        .unwrap_or_default()
                )
            })
            .collect()
    }

    #[test]
    fn cross_file_pairs_close_the_chain_with_a_connector() {
        assert_eq!(
            pair_texts("movd eax, xmm1"),
            ["2->1 xmm1->eax: movd eax, xmm1; movq xmm1, rax | rt movq rax, xmm1; movq xmm1, rax"]
        );
        assert_eq!(
            pair_texts("vpbroadcastd ymm0, eax"),
            ["2->1 eax->ymm0: vpbroadcastd ymm0, eax; vmovq rax, xmm0 | rt vmovq xmm0, rax; vmovq rax, xmm0"]
        );
        assert_eq!(
            pair_texts("cvtsi2sd xmm0, rax"),
            [
                "1->1 xmm0->xmm0: cvtsi2sd xmm0, rax",
                "2->1 rax->xmm0: cvtsi2sd xmm0, rax; movq rax, xmm0 | rt movq xmm0, rax; movq rax, xmm0"
            ]
        );
        let (p, _) = latency_pairs(&ins("pinsrq xmm1, rax, 1"));
        assert_eq!(p[1].connector.as_deref(), Some("movq rax, xmm1"));
        assert!(p[1].note.as_deref().unwrap().contains("1->1"));
        // High EVEX registers use the EVEX form of the connector.
        assert!(pair_texts("vpbroadcastd zmm17, eax")[0].contains("vmovq rax, xmm17"));
        // Mask registers.
        assert!(pair_texts("kmovq rax, k1")[0].contains("kmovw k1, eax"));
    }

    #[test]
    fn flags_are_an_operand_of_flag_readers() {
        assert_eq!(
            pair_texts("adc rax, rbx"),
            [
                "1->1 rax->rax: adc rax, rbx",
                "1->3 rax->flags: adc rax, rbx; setb al | rt test rax, rax; setb al",
                "2->1 rbx->rax: adc rax, rax",
                "2->3 rbx->flags: mov rax, r13; adc rax, rbx; setb bl | rt test rbx, rbx; setb bl",
                "3->1 flags->rax: mov rax, r13; adc rax, rbx; test rax, rax | rt setb al; test rax, rax",
                "3->3 flags->flags: mov rax, r13; adc rax, rbx",
            ]
        );
        // cmovcc keeps its old destination when the condition is false: 1->1 is a pair.
        assert_eq!(
            pair_texts("cmovc rax, rbx"),
            [
                "1->1 rax->rax: cmovb rax, rbx",
                "2->1 rbx->rax: cmovb rax, rax",
                "3->1 flags->rax: mov rax, r13; cmovb rax, rbx; test rax, rax | rt setb al; test rax, rax",
            ]
        );
        assert_eq!(
            pair_texts("setc al"),
            ["2->1 flags->al: setb al; test rax, rax | rt setb al; test rax, rax"]
        );
        // Flags writers that do not read flags get no flags operand.
        assert!(pair_texts("add rax, rbx")
            .iter()
            .all(|p| !p.contains("flags")));
    }

    #[test]
    fn refusals_say_why() {
        for (t, why) in [
            ("push rax", "rsp"),
            ("mov r15, rax", "r15"),
            ("add r14, 8", "r14"),
            ("ret", "control flow"),
        ] {
            let e = check_safe(&ins(t), t).unwrap_err().to_string();
            assert!(e.contains(why), "{t}: {e}");
        }
        assert!(check_safe(&ins("mov rax, [r14+8]"), "x").is_ok());
    }

    #[test]
    fn missing_features_are_named() {
        let no_avx512 = |f: CpuidFeature| Some(!matches!(f, CpuidFeature::AVX512F));
        let e = check_features(
            &ins("vpaddd zmm0, zmm0, zmm0"),
            "vpaddd zmm0, zmm0, zmm0",
            &no_avx512,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "vpaddd zmm0, zmm0, zmm0 needs AVX512F; this CPU lacks it"
        );
    }

    #[test]
    fn operand_kinds_get_free_registers() {
        let b = concretize(&asm::parse_body("mulx r64, r64, r64").unwrap()).unwrap();
        let r = asm::resolve(&b[0]).unwrap();
        assert_eq!(asm::format(&r.instr), "mulx rax, rbx, rcx");
        let b = concretize(&asm::parse_body("sha256rnds2 xmm, xmm").unwrap()).unwrap();
        assert_eq!(
            asm::format(&asm::resolve(&b[0]).unwrap().instr),
            "sha256rnds2 xmm1, xmm2"
        );
    }
}
