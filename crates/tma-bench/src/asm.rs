//! Intel-syntax text -> `iced_x86::Instruction`.
//!
//! A small operand parser (registers, operand kinds such as `r64`/`xmm`, memory operands with
//! an optional `qword ptr` size, immediates) and a resolver that finds the iced-x86 [`Code`]
//! whose mnemonic and operand kinds fit, by enumerating `Code::values()` with its
//! [`OpCodeInfo`](iced_x86::OpCodeInfo). When several encodings fit, the shortest wins (first in
//! iced's order on a tie), which is what GNU as and NASM emit for the forms we test.
//! Pure: no unsafe, no I/O.

use std::collections::HashMap;
use std::sync::OnceLock;

use iced_x86::{
    Code, Encoder, EncodingKind, Instruction, MemoryOperand, OpCodeOperandKind, OpKind, Register,
};

use crate::BenchError;

/// Register classes that operand slots and operand kinds talk about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegClass {
    R8,
    R16,
    R32,
    R64,
    Mm,
    Xmm,
    Ymm,
    Zmm,
    K,
}

impl RegClass {
    pub fn of(r: Register) -> Option<RegClass> {
        Some(if r.is_gpr8() {
            RegClass::R8
        } else if r.is_gpr16() {
            RegClass::R16
        } else if r.is_gpr32() {
            RegClass::R32
        } else if r.is_gpr64() {
            RegClass::R64
        } else if r.is_mm() {
            RegClass::Mm
        } else if r.is_xmm() {
            RegClass::Xmm
        } else if r.is_ymm() {
            RegClass::Ymm
        } else if r.is_zmm() {
            RegClass::Zmm
        } else if r.is_k() {
            RegClass::K
        } else {
            return None;
        })
    }

    fn from_name(s: &str) -> Option<RegClass> {
        Some(match s {
            "r8" => RegClass::R8,
            "r16" => RegClass::R16,
            "r32" => RegClass::R32,
            "r64" => RegClass::R64,
            "mm" => RegClass::Mm,
            "xmm" | "xmmp3" => RegClass::Xmm,
            "ymm" => RegClass::Ymm,
            "zmm" | "zmmp3" => RegClass::Zmm,
            "k" | "kp1" => RegClass::K,
            _ => return None,
        })
    }

    /// The register of this class with the given number (0 = rax/xmm0...), using iced's
    /// register numbering order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8...).
    pub fn nth(self, n: usize) -> Option<Register> {
        let (base, count) = match self {
            RegClass::R8 => (Register::AL, 16),
            RegClass::R16 => (Register::AX, 16),
            RegClass::R32 => (Register::EAX, 16),
            RegClass::R64 => (Register::RAX, 16),
            RegClass::Mm => (Register::MM0, 8),
            RegClass::Xmm => (Register::XMM0, 32),
            RegClass::Ymm => (Register::YMM0, 32),
            RegClass::Zmm => (Register::ZMM0, 32),
            RegClass::K => (Register::K0, 8),
        };
        if n >= count {
            return None;
        }
        // 8-bit registers: iced orders AL..BL, AH..BH, SPL.., R8L..; use the REX forms.
        if self == RegClass::R8 {
            let names = [
                Register::AL,
                Register::CL,
                Register::DL,
                Register::BL,
                Register::SPL,
                Register::BPL,
                Register::SIL,
                Register::DIL,
                Register::R8L,
                Register::R9L,
                Register::R10L,
                Register::R11L,
                Register::R12L,
                Register::R13L,
                Register::R14L,
                Register::R15L,
            ];
            return Some(names[n]);
        }
        Register::values().nth(base as usize + n)
    }
}

/// One parsed operand.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A concrete register (`rax`, `xmm2`).
    Reg(Register),
    /// "Choose a register of this class for me" (`r64`, `ymm`).
    Kind(RegClass),
    /// A memory operand.
    Mem(MemOperand),
    /// An immediate value.
    Imm(i64),
}

/// `size ptr [base + index*scale + disp]`
#[derive(Debug, Clone, PartialEq)]
pub struct MemOperand {
    pub size: Option<usize>,
    pub base: Option<Register>,
    pub index: Option<Register>,
    pub scale: u32,
    pub disp: i64,
    /// `m64`-style operand kind: tma picks the address.
    pub chosen: bool,
}

/// One parsed instruction (mnemonic plus operands) before resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedInsn {
    pub text: String,
    pub mnemonic: String,
    pub operands: Vec<Operand>,
}

fn register_names() -> &'static HashMap<String, Register> {
    static MAP: OnceLock<HashMap<String, Register>> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut m = HashMap::new();
        for r in Register::values() {
            if r == Register::None {
                continue;
            }
            m.insert(format!("{r:?}").to_ascii_lowercase(), r);
        }
        // Common aliases.
        for (alias, r) in [
            ("r8b", Register::R8L),
            ("r9b", Register::R9L),
            ("r10b", Register::R10L),
            ("r11b", Register::R11L),
            ("r12b", Register::R12L),
            ("r13b", Register::R13L),
            ("r14b", Register::R14L),
            ("r15b", Register::R15L),
        ] {
            m.insert(alias.to_string(), r);
        }
        m
    })
}

/// Look a register up by its Intel name (`rax`, `r8d`, `xmm12`, `k1`).
pub fn register_by_name(name: &str) -> Option<Register> {
    register_names()
        .get(&name.trim().to_ascii_lowercase())
        .copied()
}

/// The lower-case Intel name of a register.
pub fn register_name(r: Register) -> String {
    format!("{r:?}").to_ascii_lowercase()
}

fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b.trim()),
        None => (false, s.strip_prefix('+').unwrap_or(s).trim()),
    };
    let v: u64 = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        u64::from_str_radix(&h.replace('_', ""), 16).ok()?
    } else if let Some(h) = body.strip_suffix('h').or_else(|| body.strip_suffix('H')) {
        u64::from_str_radix(h, 16).ok()?
    } else {
        body.replace('_', "").parse().ok()?
    };
    Some(if neg {
        (v as i64).wrapping_neg()
    } else {
        v as i64
    })
}

/// Parse an immediate or register value given on the command line (`--init rcx=3`).
pub fn parse_value(s: &str) -> Option<u64> {
    parse_int(s).map(|v| v as u64)
}

fn size_keyword(s: &str) -> Option<usize> {
    Some(match s {
        "byte" => 1,
        "word" => 2,
        "dword" => 4,
        "qword" => 8,
        "tbyte" | "tword" => 10,
        "xmmword" | "oword" => 16,
        "ymmword" => 32,
        "zmmword" => 64,
        _ => return None,
    })
}

fn parse_mem(text: &str, size: Option<usize>) -> Result<MemOperand, String> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| format!("bad memory operand `{text}`: expected `[base+disp]`"))?;
    let mut m = MemOperand {
        size,
        base: None,
        index: None,
        scale: 1,
        disp: 0,
        chosen: false,
    };
    // Split into signed terms.
    let mut terms: Vec<(bool, String)> = Vec::new();
    let mut cur = String::new();
    let mut neg = false;
    for ch in inner.chars() {
        if ch == '+' || ch == '-' {
            if !cur.trim().is_empty() {
                terms.push((neg, cur.trim().to_string()));
            }
            cur.clear();
            neg = ch == '-';
        } else {
            cur.push(ch);
        }
    }
    if !cur.trim().is_empty() {
        terms.push((neg, cur.trim().to_string()));
    }
    if terms.is_empty() {
        return Err(format!("empty memory operand `{text}`"));
    }
    for (neg, t) in terms {
        if let Some((a, b)) = t.split_once('*') {
            let (reg, sc) = match (register_by_name(a), register_by_name(b)) {
                (Some(r), None) => (r, b),
                (None, Some(r)) => (r, a),
                _ => return Err(format!("bad scaled index `{t}` in `{text}`")),
            };
            let scale = parse_int(sc)
                .filter(|s| [1, 2, 4, 8].contains(s))
                .ok_or_else(|| format!("bad scale `{sc}` in `{text}`: use 1, 2, 4 or 8"))?;
            if neg || m.index.is_some() {
                return Err(format!("bad index term `{t}` in `{text}`"));
            }
            m.index = Some(reg);
            m.scale = scale as u32;
        } else if let Some(r) = register_by_name(&t) {
            if neg {
                return Err(format!("a register cannot be subtracted in `{text}`"));
            }
            if m.base.is_none() {
                m.base = Some(r);
            } else if m.index.is_none() {
                m.index = Some(r);
            } else {
                return Err(format!("too many registers in `{text}`"));
            }
        } else if let Some(v) = parse_int(&t) {
            m.disp = m.disp.wrapping_add(if neg { v.wrapping_neg() } else { v });
        } else {
            return Err(format!("cannot parse `{t}` in memory operand `{text}`"));
        }
    }
    Ok(m)
}

fn parse_operand(text: &str) -> Result<Operand, String> {
    let lower = text.trim().to_ascii_lowercase();
    let mut t = lower.as_str();
    // Size prefix: `qword ptr [..]`.
    let mut size = None;
    if let Some((kw, rest)) = t.split_once(' ') {
        if let Some(sz) = size_keyword(kw) {
            size = Some(sz);
            t = rest.trim();
            t = t.strip_prefix("ptr").map(str::trim).unwrap_or(t);
        }
    }
    if t.starts_with('[') {
        return parse_mem(t, size).map(Operand::Mem);
    }
    if size.is_some() {
        return Err(format!("`{text}`: a size keyword needs a memory operand"));
    }
    if let Some(r) = register_by_name(t) {
        return Ok(Operand::Reg(r));
    }
    if let Some(c) = RegClass::from_name(t) {
        return Ok(Operand::Kind(c));
    }
    // Memory operand kinds: m8, m16, m32, m64, m128, m256, m512, m.
    if let Some(bits) = t.strip_prefix('m') {
        let size = if bits.is_empty() {
            Some(None)
        } else {
            bits.parse::<usize>()
                .ok()
                .filter(|b| [8, 16, 32, 64, 80, 128, 256, 512].contains(b))
                .map(|b| Some(b / 8))
        };
        if let Some(size) = size {
            return Ok(Operand::Mem(MemOperand {
                size,
                base: Some(Register::R14),
                index: None,
                scale: 1,
                disp: 0x100,
                chosen: true,
            }));
        }
    }
    if matches!(t, "imm" | "imm8" | "imm16" | "imm32" | "imm64") {
        return Ok(Operand::Imm(1));
    }
    if let Some(v) = parse_int(t) {
        return Ok(Operand::Imm(v));
    }
    Err(format!(
        "cannot parse operand `{}`: expected a register (rax, xmm1), an operand kind (r64, xmm, ymm), \
         a memory operand ([r14+8]) or an immediate",
        text.trim()
    ))
}

fn split_operands(s: &str) -> Vec<&str> {
    // Commas inside brackets do not occur in Intel syntax, so a plain split is enough.
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// Parse `mnemonic op, op, ...` (one instruction).
pub fn parse_insn(text: &str) -> Result<ParsedInsn, BenchError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(BenchError::Parse {
            text: text.to_string(),
            reason: "empty instruction".into(),
        });
    }
    let (mn, rest) = match t.split_once(char::is_whitespace) {
        Some((m, r)) => (m, r),
        None => (t, ""),
    };
    let operands = split_operands(rest)
        .into_iter()
        .map(parse_operand)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|reason| BenchError::Parse {
            text: t.to_string(),
            reason,
        })?;
    Ok(ParsedInsn {
        text: t.to_string(),
        mnemonic: mn.to_ascii_lowercase(),
        operands,
    })
}

/// Parse a `;`-separated list of instructions.
pub fn parse_body(text: &str) -> Result<Vec<ParsedInsn>, BenchError> {
    let parts: Vec<&str> = text
        .split([';', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.starts_with('#'))
        .collect();
    if parts.is_empty() {
        return Err(BenchError::Parse {
            text: text.to_string(),
            reason: "no instruction given".into(),
        });
    }
    parts.into_iter().map(parse_insn).collect()
}

/// What an operand slot of an iced `OpCodeInfo` accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Slot {
    Reg(RegClass),
    Fixed(Register),
    RegOrMem(RegClass),
    Mem,
    Imm(ImmKind),
    Unsupported,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ImmKind {
    U8,
    Sx8,
    U16,
    U32,
    Sx32,
    U64,
    One,
}

impl ImmKind {
    fn fits(self, v: i64) -> bool {
        match self {
            ImmKind::U8 => (-128..=255).contains(&v),
            ImmKind::Sx8 => (-128..=127).contains(&v),
            ImmKind::U16 => (-32768..=65535).contains(&v),
            ImmKind::U32 => (i32::MIN as i64..=u32::MAX as i64).contains(&v),
            ImmKind::Sx32 => (i32::MIN as i64..=i32::MAX as i64).contains(&v),
            ImmKind::U64 => true,
            ImmKind::One => v == 1,
        }
    }
}

/// Classify an operand kind by its iced name (`r64_rm`, `xmm_or_mem`, `imm8sex64`, `rax`...).
pub fn classify(kind: OpCodeOperandKind) -> Slot {
    let name = format!("{kind:?}");
    match name.as_str() {
        "mem" => return Slot::Mem,
        "al" => return Slot::Fixed(Register::AL),
        "cl" => return Slot::Fixed(Register::CL),
        "ax" => return Slot::Fixed(Register::AX),
        "dx" => return Slot::Fixed(Register::DX),
        "eax" => return Slot::Fixed(Register::EAX),
        "rax" => return Slot::Fixed(Register::RAX),
        "imm8" => return Slot::Imm(ImmKind::U8),
        "imm8sex16" | "imm8sex32" | "imm8sex64" => return Slot::Imm(ImmKind::Sx8),
        "imm16" => return Slot::Imm(ImmKind::U16),
        "imm32" => return Slot::Imm(ImmKind::U32),
        "imm32sex64" => return Slot::Imm(ImmKind::Sx32),
        "imm64" => return Slot::Imm(ImmKind::U64),
        "imm8_const_1" => return Slot::Imm(ImmKind::One),
        _ => {}
    }
    if let Some(cls) = name.strip_suffix("_or_mem") {
        return RegClass::from_name(cls).map_or(Slot::Unsupported, Slot::RegOrMem);
    }
    if let Some((cls, how)) = name.split_once('_') {
        if matches!(
            how,
            "reg" | "rm" | "opcode" | "vvvv" | "reg_mem" | "is4" | "is5"
        ) {
            return RegClass::from_name(cls).map_or(Slot::Unsupported, Slot::Reg);
        }
    }
    Slot::Unsupported
}

fn mnemonic_index() -> &'static HashMap<String, Vec<Code>> {
    static MAP: OnceLock<HashMap<String, Vec<Code>>> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut m: HashMap<String, Vec<Code>> = HashMap::new();
        for code in Code::values() {
            let op = code.op_code();
            if !op.is_instruction() || !op.mode64() || op.encoding() == EncodingKind::MVEX {
                continue;
            }
            m.entry(format!("{:?}", code.mnemonic()).to_ascii_lowercase())
                .or_default()
                .push(code);
        }
        m
    })
}

/// Default register picks for operand kinds (`r64` -> rax, rbx...). Harness registers (r14,
/// r15, rsp) are never picked.
pub const GPR_POOL: [usize; 13] = [0, 3, 1, 2, 6, 7, 5, 8, 9, 10, 11, 12, 13];

/// A resolved instruction: the iced instruction and its encoding.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub instr: Instruction,
    pub bytes: Vec<u8>,
}

fn operand_matches(op: &Operand, slot: Slot) -> bool {
    match (op, slot) {
        (Operand::Reg(r), Slot::Reg(c)) | (Operand::Reg(r), Slot::RegOrMem(c)) => {
            RegClass::of(*r) == Some(c)
        }
        (Operand::Reg(r), Slot::Fixed(f)) => *r == f,
        (Operand::Kind(k), Slot::Reg(c)) | (Operand::Kind(k), Slot::RegOrMem(c)) => *k == c,
        (Operand::Mem(_), Slot::Mem) | (Operand::Mem(_), Slot::RegOrMem(_)) => true,
        (Operand::Imm(v), Slot::Imm(k)) => k.fits(*v),
        _ => false,
    }
}

fn build(code: Code, ops: &[Operand]) -> Option<Instruction> {
    let mut ins = Instruction::default();
    ins.set_code(code);
    let info = code.op_code();
    for (i, (op, kind)) in ops.iter().zip(info.op_kinds()).enumerate() {
        let i = i as u32;
        match op {
            Operand::Reg(r) => {
                ins.set_op_kind(i, OpKind::Register);
                ins.set_op_register(i, *r);
            }
            Operand::Kind(_) => return None,
            Operand::Mem(m) => {
                let mo = MemoryOperand::new(
                    m.base.unwrap_or(Register::None),
                    m.index.unwrap_or(Register::None),
                    m.scale,
                    m.disp,
                    if m.disp == 0 { 0 } else { 1 },
                    false,
                    Register::None,
                );
                ins.set_op_kind(i, OpKind::Memory);
                ins.set_memory_base(mo.base);
                ins.set_memory_index(mo.index);
                ins.set_memory_index_scale(mo.scale);
                ins.set_memory_displacement64(mo.displacement as u64);
                ins.set_memory_displ_size(mo.displ_size);
            }
            Operand::Imm(v) => {
                let k = match classify(*kind) {
                    Slot::Imm(k) => k,
                    _ => return None,
                };
                let name = format!("{kind:?}");
                let ok = match name.as_str() {
                    "imm8sex16" => OpKind::Immediate8to16,
                    "imm8sex32" => OpKind::Immediate8to32,
                    "imm8sex64" => OpKind::Immediate8to64,
                    "imm16" => OpKind::Immediate16,
                    "imm32" => OpKind::Immediate32,
                    "imm32sex64" => OpKind::Immediate32to64,
                    "imm64" => OpKind::Immediate64,
                    _ => OpKind::Immediate8,
                };
                let _ = k;
                ins.set_op_kind(i, ok);
                ins.try_set_immediate_i64(i, *v).ok()?;
            }
        }
    }
    Some(ins)
}

/// Encode one instruction at address 0 (the harness never uses RIP-relative operands).
pub fn encode(ins: &Instruction) -> Result<Vec<u8>, String> {
    let mut enc = Encoder::new(64);
    enc.encode(ins, 0).map_err(|e| e.to_string())?;
    Ok(enc.take_buffer())
}

/// Resolve a parsed instruction whose operands are all concrete (no operand kinds left).
pub fn resolve(p: &ParsedInsn) -> Result<Resolved, BenchError> {
    let err = |reason: String| BenchError::Resolve {
        text: p.text.clone(),
        reason,
    };
    let mnemonic = canonical_mnemonic(&p.mnemonic);
    let codes = mnemonic_index().get(&mnemonic).ok_or_else(|| {
        err(format!(
            "unknown mnemonic `{}` (64-bit mode, iced-x86 {})",
            p.mnemonic, "1.22"
        ))
    })?;
    let mut best: Option<Resolved> = None;
    let mut mem_sizes: Vec<usize> = Vec::new();
    let mut arity_seen = Vec::new();
    for &code in codes {
        let info = code.op_code();
        arity_seen.push(info.op_count() as usize);
        if info.op_count() as usize != p.operands.len() {
            continue;
        }
        let fits = p
            .operands
            .iter()
            .zip(info.op_kinds())
            .all(|(o, k)| operand_matches(o, classify(*k)));
        if !fits {
            continue;
        }
        let Some(ins) = build(code, &p.operands) else {
            continue;
        };
        // Memory size must agree with an explicit `qword ptr`.
        let msize = ins.memory_size().size();
        let want = p.operands.iter().find_map(|o| match o {
            Operand::Mem(m) => Some(m.size),
            _ => None,
        });
        if let Some(want) = want {
            if let Some(w) = want {
                if msize != w {
                    continue;
                }
            } else if !mem_sizes.contains(&msize) {
                mem_sizes.push(msize);
            }
        }
        // Avoid EVEX when VEX/legacy fits (as assemblers do), then prefer the shortest.
        let Ok(bytes) = encode(&ins) else { continue };
        let rank = |r: &Resolved| {
            (
                (r.instr.code().op_code().encoding() == EncodingKind::EVEX) as u8,
                r.bytes.len(),
            )
        };
        let cand = Resolved { instr: ins, bytes };
        if best.as_ref().is_none_or(|b| rank(&cand) < rank(b)) {
            best = Some(cand);
        }
    }
    if mem_sizes.len() > 1 {
        return Err(err(
            "ambiguous memory operand size: write e.g. `qword ptr [r14+8]`".into(),
        ));
    }
    best.ok_or_else(|| {
        arity_seen.sort_unstable();
        arity_seen.dedup();
        if !arity_seen.contains(&p.operands.len()) {
            err(format!(
                "`{}` takes {} operand(s) (iced-x86 forms), not {}",
                p.mnemonic,
                arity_seen
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
                p.operands.len()
            ))
        } else {
            err("no encoding of this mnemonic takes these operand kinds".into())
        }
    })
}

/// Condition-code and shift aliases that assemblers accept (`cmovz` = `cmove`, `sal` = `shl`).
fn canonical_mnemonic(m: &str) -> String {
    const CC: [(&str, &str); 14] = [
        ("z", "e"),
        ("nz", "ne"),
        ("c", "b"),
        ("nc", "ae"),
        ("nae", "b"),
        ("nb", "ae"),
        ("na", "be"),
        ("nbe", "a"),
        ("pe", "p"),
        ("po", "np"),
        ("nge", "l"),
        ("nl", "ge"),
        ("ng", "le"),
        ("nle", "g"),
    ];
    if m == "sal" {
        return "shl".into();
    }
    for prefix in ["cmov", "set", "j"] {
        if let Some(cc) = m.strip_prefix(prefix) {
            if let Some((_, to)) = CC.iter().find(|(from, _)| *from == cc) {
                return format!("{prefix}{to}");
            }
        }
    }
    m.to_string()
}

/// Find the operand classes of the first encoding that accepts `p`'s operands (with operand
/// kinds still open), so kinds can be turned into registers.
pub fn slot_classes(p: &ParsedInsn) -> Option<Vec<Slot>> {
    let codes = mnemonic_index().get(&canonical_mnemonic(&p.mnemonic))?;
    codes.iter().find_map(|&code| {
        let info = code.op_code();
        if info.op_count() as usize != p.operands.len() {
            return None;
        }
        let slots: Vec<Slot> = info.op_kinds().iter().map(|k| classify(*k)).collect();
        p.operands
            .iter()
            .zip(&slots)
            .all(|(o, s)| operand_matches(o, *s))
            .then_some(slots)
    })
}

/// Format an instruction in Intel syntax, lower case (`sha256rnds2 xmm1, xmm2`).
pub fn format(ins: &Instruction) -> String {
    use iced_x86::{Formatter, IntelFormatter};
    let mut f = IntelFormatter::new();
    f.options_mut().set_hex_prefix("0x");
    f.options_mut().set_hex_suffix("");
    f.options_mut().set_uppercase_hex(false);
    f.options_mut().set_space_after_operand_separator(true);
    let mut s = String::new();
    f.format(ins, &mut s);
    s
}

/// Parse a hex byte string (`0f0b`, `0f 0b`, `0x0f,0x0b`).
pub fn parse_hex(s: &str) -> Result<Vec<u8>, BenchError> {
    let clean: String = s
        .replace("0x", "")
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ',')
        .collect();
    if clean.is_empty() || !clean.len().is_multiple_of(2) {
        return Err(BenchError::Parse {
            text: s.to_string(),
            reason: "--bytes needs an even number of hex digits (e.g. 0f38cbca)".into(),
        });
    }
    (0..clean.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&clean[i..i + 2], 16).map_err(|_| BenchError::Parse {
                text: s.to_string(),
                reason: format!("`{}` is not a hex byte", &clean[i..i + 2]),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> String {
        let p = parse_insn(text).unwrap();
        let r = resolve(&p).unwrap();
        r.bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn parses_memory_forms() {
        let p = parse_insn("mov rax, qword ptr [r14 + rcx*8 - 16]").unwrap();
        let Operand::Mem(m) = &p.operands[1] else {
            panic!("not memory")
        };
        assert_eq!(m.base, Some(Register::R14));
        assert_eq!(m.index, Some(Register::RCX));
        assert_eq!(m.scale, 8);
        assert_eq!(m.disp, -16);
        assert_eq!(m.size, Some(8));
    }

    #[test]
    fn resolves_common_forms() {
        assert_eq!(hex("add rax, rcx"), "4801c8");
        assert_eq!(hex("imul rax, rbx"), "480fafc3");
        assert_eq!(hex("sha256rnds2 xmm1, xmm2"), "0f38cbca");
        assert_eq!(hex("vpaddd ymm1, ymm2, ymm3"), "c5edfecb");
    }

    #[test]
    fn errors_name_the_problem() {
        let e = resolve(&parse_insn("frobnicate rax").unwrap()).unwrap_err();
        assert!(e.to_string().contains("unknown mnemonic"), "{e}");
        let e = resolve(&parse_insn("add rax").unwrap()).unwrap_err();
        assert!(e.to_string().contains("takes 2 operand"), "{e}");
        assert!(parse_insn("add rax, [r14+").is_err());
        assert!(parse_hex("0f0").is_err());
    }
}
