//! The measurement harness around a body: pure bytes, built with iced-x86's `code_asm`.
//!
//! ```text
//! push rbx, rbp, r12-r15; sub rsp, 8          ; SysV: rdi = iterations, rsi = scratch
//! mov r15, rdi ; mov r14, rsi                  ; r15 = loop counter, r14 = scratch pointer
//! init GPRs; lfence; rdtsc; [rsp] = start     ; start time kept on the stack, not in a register
//! init vector registers and GPRs again        ; rdtsc clobbered rax/rdx
//! .p2align 6 (multi-byte NOPs)
//! loop: body x U ; dec r15 ; jnz loop
//! lfence; rdtsc; rax = end - [rsp]; restore; ret
//! ```
//! Reserved: rsp, r14 (scratch pointer, may be read and used as a base), r15 (loop counter).

use iced_x86::code_asm::*;
use iced_x86::Register;

use crate::asm::RegClass;

/// Offset in the scratch buffer of the vector constant pool (after the 1 MiB user area).
pub const SCRATCH_USER: usize = 1 << 20;
pub const POOL_OFFSET: usize = SCRATCH_USER;
/// One 64-byte slot per vector register (zmm0..zmm31; xmm/ymm N load the low bytes of slot N),
/// then one slot for the mm registers.
pub const POOL_SLOTS: usize = 33;
pub const POOL_LEN: usize = 64 * POOL_SLOTS;
pub const SCRATCH_LEN: usize = SCRATCH_USER + POOL_LEN + 4096;
/// The default vector lane pattern (f32 1.5).
pub const DEFAULT_LANE: u32 = 0x3FC0_0000;

/// The default vector pool: f32 1.5 in every lane (read as f64 lanes 0x3FC000003FC00000, about
/// 0.125; both are normal numbers, never denormal), so FP instructions run at their normal speed.
pub fn pool_bytes() -> Vec<u8> {
    std::iter::repeat_n(DEFAULT_LANE.to_le_bytes(), POOL_LEN / 4)
        .flatten()
        .collect()
}

/// The pool with some vector registers' initial values replaced: `(n, bytes)` puts `bytes`
/// (little-endian, up to 64) at the start of register n's slot; the rest keep the default.
pub fn pool_with(values: &[(usize, Vec<u8>)]) -> Vec<u8> {
    let mut p = pool_bytes();
    for (n, b) in values {
        if *n < 32 {
            let len = b.len().min(64);
            p[n * 64..n * 64 + len].copy_from_slice(&b[..len]);
        }
    }
    p
}

fn slot(n: usize) -> i32 {
    (POOL_OFFSET + 64 * n) as i32
}

/// The GPRs the harness initialises (everything but rsp, r14, r15) and their defaults:
/// distinct, small, non-zero; rdx < rcx and rdx < rbx so `div rcx`/`div rbx` do not fault.
pub const GPR_DEFAULTS: [(Register, u64); 13] = [
    (Register::RAX, 0x2468_ACE1),
    (Register::RBX, 5),
    (Register::RCX, 3),
    (Register::RDX, 2),
    (Register::RSI, 6),
    (Register::RDI, 7),
    (Register::RBP, 9),
    (Register::R8, 10),
    (Register::R9, 11),
    (Register::R10, 12),
    (Register::R11, 13),
    (Register::R12, 14),
    (Register::R13, 15),
];

/// Which vector register file to initialise, by the widest class the body uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum VecInit {
    None,
    /// movdqu xmm0-15
    Sse,
    /// vmovdqu ymm0-15
    Avx,
    /// vmovdqu64 zmm0-31
    Avx512,
}

/// One unrolled copy: the encoded bytes of each instruction of the body (one chain's variant).
#[derive(Debug, Clone)]
pub struct Copy {
    pub insns: Vec<Vec<u8>>,
}

/// A built harness image.
#[derive(Debug, Clone)]
pub struct Image {
    pub bytes: Vec<u8>,
    pub body_start: usize,
    pub body_end: usize,
    /// (offset from image start, instruction index in the body) for every unrolled instruction.
    pub insn_offsets: Vec<(usize, usize)>,
}

impl Image {
    /// Which body instruction contains `offset` (relative to the image), if any.
    pub fn insn_at(&self, offset: usize) -> Option<usize> {
        if offset < self.body_start || offset >= self.body_end {
            return None;
        }
        let i = self.insn_offsets.partition_point(|(o, _)| *o <= offset);
        i.checked_sub(1).map(|i| self.insn_offsets[i].1)
    }
}

fn gpr64(r: Register) -> Option<AsmRegister64> {
    Some(match r {
        Register::RAX => rax,
        Register::RBX => rbx,
        Register::RCX => rcx,
        Register::RDX => rdx,
        Register::RSI => rsi,
        Register::RDI => rdi,
        Register::RBP => rbp,
        Register::R8 => r8,
        Register::R9 => r9,
        Register::R10 => r10,
        Register::R11 => r11,
        Register::R12 => r12,
        Register::R13 => r13,
        _ => return None,
    })
}

fn init_code(
    a: &mut CodeAssembler,
    gprs: &[(Register, u64)],
    vec: VecInit,
    mm: bool,
) -> Result<(), IcedError> {
    match vec {
        VecInit::None => {}
        VecInit::Sse => {
            for (n, x) in [
                xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12,
                xmm13, xmm14, xmm15,
            ]
            .into_iter()
            .enumerate()
            {
                a.movdqu(x, xmmword_ptr(r14 + slot(n)))?;
            }
        }
        VecInit::Avx => {
            for (n, y) in [
                ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12,
                ymm13, ymm14, ymm15,
            ]
            .into_iter()
            .enumerate()
            {
                a.vmovdqu(y, ymmword_ptr(r14 + slot(n)))?;
            }
        }
        VecInit::Avx512 => {
            for (n, z) in [
                zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12,
                zmm13, zmm14, zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21, zmm22, zmm23, zmm24,
                zmm25, zmm26, zmm27, zmm28, zmm29, zmm30, zmm31,
            ]
            .into_iter()
            .enumerate()
            {
                a.vmovdqu64(z, zmmword_ptr(r14 + slot(n)))?;
            }
        }
    }
    if mm {
        for m in [mm0, mm1, mm2, mm3, mm4, mm5, mm6, mm7] {
            a.movq(m, qword_ptr(r14 + slot(32)))?;
        }
    }
    for &(r, v) in gprs {
        if let Some(g) = gpr64(r) {
            a.mov(g, v)?;
        }
    }
    Ok(())
}

fn read_tsc(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.lfence()?;
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    Ok(())
}

/// Multi-byte NOPs (recommended forms) filling `n` bytes.
fn nops(n: usize) -> Vec<u8> {
    const N: [&[u8]; 9] = [
        &[0x90],
        &[0x66, 0x90],
        &[0x0f, 0x1f, 0x00],
        &[0x0f, 0x1f, 0x40, 0x00],
        &[0x0f, 0x1f, 0x44, 0x00, 0x00],
        &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
        &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
        &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        &[0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    ];
    let mut out = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let k = left.min(9);
        out.extend_from_slice(N[k - 1]);
        left -= k;
    }
    out
}

/// Build the harness for `unroll` copies; copy `j` uses `copies[j % copies.len()]`.
/// The body starts at a 64-byte boundary of the image (images are placed at 64-byte
/// boundaries of the page-aligned code buffer).
pub fn build_image(
    copies: &[Copy],
    unroll: usize,
    gprs: &[(Register, u64)],
    vec: VecInit,
    mm: bool,
) -> Result<Image, IcedError> {
    // Prologue.
    let mut a = CodeAssembler::new(64)?;
    for r in [rbx, rbp, r12, r13, r14, r15] {
        a.push(r)?;
    }
    a.sub(rsp, 8)?;
    a.mov(r15, rdi)?;
    a.mov(r14, rsi)?;
    init_code(&mut a, gprs, VecInit::None, false)?;
    read_tsc(&mut a)?;
    a.mov(qword_ptr(rsp), rax)?;
    init_code(&mut a, gprs, vec, mm)?;
    let mut bytes = a.assemble(0)?;
    let pad = (64 - bytes.len() % 64) % 64;
    bytes.extend(nops(pad));
    let body_start = bytes.len();
    let mut insn_offsets = Vec::new();
    for j in 0..unroll {
        let c = &copies[j % copies.len()];
        for (i, ins) in c.insns.iter().enumerate() {
            insn_offsets.push((bytes.len(), i));
            bytes.extend_from_slice(ins);
        }
    }
    let body_end = bytes.len();
    // Loop tail: dec r15; jnz body_start (rel32), then the epilogue.
    let mut t = CodeAssembler::new(64)?;
    t.dec(r15)?;
    let tail_ip = body_end as u64;
    let dec_len = t.assemble(tail_ip)?.len();
    let jnz_ip = tail_ip + dec_len as u64;
    let mut j = CodeAssembler::new(64)?;
    j.jne(body_start as u64)?;
    let jbytes = j.assemble(jnz_ip)?;
    let mut e = CodeAssembler::new(64)?;
    read_tsc(&mut e)?;
    e.sub(rax, qword_ptr(rsp))?;
    e.add(rsp, 8)?;
    for r in [r15, r14, r13, r12, rbp, rbx] {
        e.pop(r)?;
    }
    if vec >= VecInit::Avx {
        e.vzeroupper()?;
    }
    if mm {
        e.emms()?;
    }
    e.ret()?;
    let ebytes = e.assemble(jnz_ip + jbytes.len() as u64)?;
    bytes.extend(t.assemble(tail_ip)?);
    bytes.extend(jbytes);
    bytes.extend(ebytes);
    Ok(Image {
        bytes,
        body_start,
        body_end,
        insn_offsets,
    })
}

/// Which vector init a register class needs.
pub fn vec_init_for(c: RegClass, high: bool) -> VecInit {
    match c {
        RegClass::Xmm | RegClass::Ymm | RegClass::Zmm if high => VecInit::Avx512,
        RegClass::Xmm => VecInit::Sse,
        RegClass::Ymm => VecInit::Avx,
        RegClass::Zmm | RegClass::K => VecInit::Avx512,
        _ => VecInit::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    #[test]
    fn image_layout_is_aligned_and_loops_back() {
        let c = Copy {
            insns: vec![vec![0x48, 0x01, 0xc0]],
        };
        let img = build_image(&[c], 4, &GPR_DEFAULTS, VecInit::Sse, false).unwrap();
        assert_eq!(img.body_start % 64, 0);
        assert_eq!(img.body_end - img.body_start, 12);
        assert_eq!(img.insn_at(img.body_start + 4), Some(0));
        assert_eq!(img.insn_at(0), None);
        // Decode the tail: dec r15; jne body_start.
        let mut d = Decoder::with_ip(
            64,
            &img.bytes[img.body_end..],
            img.body_end as u64,
            DecoderOptions::NONE,
        );
        let dec = d.decode();
        assert_eq!(dec.mnemonic(), Mnemonic::Dec);
        let j = d.decode();
        assert_eq!(j.mnemonic(), Mnemonic::Jne);
        assert_eq!(j.near_branch64(), img.body_start as u64);
        // The harness never writes r14/r15 between the prologue and the tail except as set up.
        let mut d = Decoder::with_ip(64, &img.bytes[..img.body_start], 0, DecoderOptions::NONE);
        let mut writes_r14 = 0;
        for ins in d.iter() {
            if ins.op_count() > 0
                && ins.op0_kind() == iced_x86::OpKind::Register
                && ins.op0_register() == Register::R14
                && ins.mnemonic() == Mnemonic::Mov
            {
                writes_r14 += 1;
            }
        }
        assert_eq!(writes_r14, 1);
    }

    #[test]
    fn each_vector_register_loads_its_own_pool_slot() {
        let c = Copy {
            insns: vec![vec![0x90]],
        };
        for (vec, n) in [
            (VecInit::Sse, 16),
            (VecInit::Avx, 16),
            (VecInit::Avx512, 32),
        ] {
            let img = build_image(std::slice::from_ref(&c), 2, &GPR_DEFAULTS, vec, true).unwrap();
            let d = Decoder::new(64, &img.bytes[..img.body_start], DecoderOptions::NONE);
            let mut loads = Vec::new();
            for ins in d.into_iter() {
                if ins.op_count() == 2
                    && ins.op1_kind() == iced_x86::OpKind::Memory
                    && ins.memory_base() == Register::R14
                {
                    loads.push((ins.op0_register(), ins.memory_displacement64() as usize));
                }
            }
            assert_eq!(loads.len(), n + 8, "{vec:?}");
            for (r, disp) in &loads[..n] {
                let num = r.number();
                assert_eq!(*disp, POOL_OFFSET + 64 * num, "{r:?}");
            }
            // mm0-7 share the last slot.
            assert!(loads[n..].iter().all(|(_, d)| *d == POOL_OFFSET + 64 * 32));
        }
    }
}
