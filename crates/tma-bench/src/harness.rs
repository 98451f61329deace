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
//!
//! The scratch mapping is one page holding the vector constant pool, then the memory buffer
//! (`--mem`, 1 MiB by default, page-aligned); r14 points at the start of the buffer, the pool
//! sits just below it (`[r14 - 4096 + 64 n]`). The base registers of the body's memory
//! operands are set to r14 too ("GPR init" below), so `add rax, [rbx]` reads the buffer.

use iced_x86::code_asm::*;
use iced_x86::Register;

use crate::asm::RegClass;

/// The page before the memory buffer holding the vector constant pool: one 64-byte slot per
/// vector register (zmm0..zmm31; xmm/ymm N load the low bytes of slot N), then one slot for
/// the mm registers.
pub const POOL_PAGE: usize = 4096;
pub const POOL_SLOTS: usize = 33;
pub const POOL_LEN: usize = 64 * POOL_SLOTS;
/// The pointer chase's cursor: the last qword of the pool page (`[r14 - 8]`). A chase image
/// loads the chased register from it and stores it back after the loop, so consecutive runs
/// continue around the ring instead of revisiting its first lines (which would then be cached).
pub const CHASE_CURSOR: i32 = -8;
/// The default size of the memory buffer r14 points at (`--mem`).
pub const DEFAULT_MEM: usize = 1 << 20;
/// The largest `--mem` (displacements and the pointer-chase ring stay within i32 range).
pub const MAX_MEM: usize = 1 << 30;
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

/// The displacement from r14 of vector register n's pool slot (below the buffer).
fn slot(n: usize) -> i32 {
    (64 * n) as i32 - POOL_PAGE as i32
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
    regs: &Regs<'_>,
    vec: VecInit,
    mm: bool,
) -> Result<(), IcedError> {
    let Regs { gprs, addr, chase } = *regs;
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
    for &r in addr {
        if let Some(g) = gpr64(r) {
            a.mov(g, r14)?;
        }
    }
    if let Some(g) = chase.and_then(gpr64) {
        a.mov(g, qword_ptr(r14 + CHASE_CURSOR))?;
    }
    Ok(())
}

/// The initial general-purpose registers of an image: `gprs` values, then every register of
/// `addr` set to the buffer address (r14), then `chase` (a pointer-chase image) loaded from the
/// chase cursor and stored back to it after the loop.
#[derive(Debug, Clone, Copy)]
pub struct Regs<'a> {
    pub gprs: &'a [(Register, u64)],
    pub addr: &'a [Register],
    pub chase: Option<Register>,
}

impl<'a> Regs<'a> {
    /// Values only: no memory base registers, no chase.
    pub fn values(gprs: &'a [(Register, u64)]) -> Regs<'a> {
        Regs {
            gprs,
            addr: &[],
            chase: None,
        }
    }
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
/// boundaries of the page-aligned code buffer). `regs`: the initial registers ([`Regs`]).
pub fn build_image(
    copies: &[Copy],
    unroll: usize,
    regs: &Regs<'_>,
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
    init_code(&mut a, regs, VecInit::None, false)?;
    read_tsc(&mut a)?;
    a.mov(qword_ptr(rsp), rax)?;
    init_code(&mut a, regs, vec, mm)?;
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
    if let Some(g) = regs.chase.and_then(gpr64) {
        e.mov(qword_ptr(r14 + CHASE_CURSOR), g)?;
    }
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

/// The pointer-chase ring over the first `len` bytes of the buffer at `base`: one pointer per
/// 64-byte line, at `offset` within the line, each pointing at the next line of one cycle
/// through every line in a pseudo-random order (fixed seed: the same layout every run), so
/// `mov rax, [rax+offset]` started at `base` visits every line before it repeats and hardware
/// prefetchers cannot guess the next one. A single line points at itself. Returns
/// (offset in the buffer, value) pairs.
pub fn chase_ring(len: usize, offset: usize, base: u64) -> Vec<(usize, u64)> {
    let lines = (len / 64).max(1);
    // Sattolo's algorithm: a uniformly random single cycle.
    let mut order: Vec<usize> = (0..lines).collect();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..lines).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize;
        order.swap(i, j);
    }
    // Start at line 0 (where the chased register points first).
    let start = order.iter().position(|&l| l == 0).unwrap_or(0);
    order.rotate_left(start);
    (0..lines)
        .map(|k| {
            let here = order[k];
            let next = order[(k + 1) % lines];
            (here * 64 + offset, base + (next * 64) as u64)
        })
        .collect()
}

/// The pointer-chase ring of an image's memory buffer ([`chase_ring`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chase {
    /// Bytes of the buffer the ring covers (a multiple of 64, at least 64).
    pub len: usize,
    /// Offset within each line of the pointer (the load's displacement).
    pub offset: usize,
}

/// Prepare a scratch area (the pool page, then the memory buffer r14 points at) before the
/// first call: the vector `pool` at its start and, for a pointer chase, the ring over the
/// buffer with the chase cursor at the buffer's first line. Returns the buffer's address.
pub fn fill_scratch(scratch: &mut [u8], pool: &[u8], chase: Option<Chase>) -> *mut u8 {
    assert!(scratch.len() >= POOL_PAGE && pool.len() <= POOL_PAGE);
    scratch[..pool.len()].copy_from_slice(pool);
    let base = scratch[POOL_PAGE..].as_ptr() as u64;
    if let Some(c) = chase {
        for (at, ptr) in chase_ring(c.len, c.offset, base) {
            scratch[POOL_PAGE + at..POOL_PAGE + at + 8].copy_from_slice(&ptr.to_le_bytes());
        }
        let cursor = (POOL_PAGE as i64 + i64::from(CHASE_CURSOR)) as usize;
        scratch[cursor..cursor + 8].copy_from_slice(&base.to_le_bytes());
    }
    scratch[POOL_PAGE..].as_mut_ptr()
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
        let img = build_image(&[c], 4, &Regs::values(&GPR_DEFAULTS), VecInit::Sse, false).unwrap();
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
    fn chase_ring_is_one_cycle_through_every_line() {
        let base = 0x10_0000u64;
        for (len, off) in [(64, 0), (4096, 8), (1 << 16, 0)] {
            let ring = chase_ring(len, off, base);
            assert_eq!(ring.len(), len / 64);
            let next: std::collections::HashMap<usize, u64> = ring.iter().copied().collect();
            // Follow the chain as `mov rax, [rax+off]` would, from the buffer start.
            let mut reg = base;
            let mut seen = std::collections::HashSet::new();
            for _ in 0..len / 64 {
                let at = (reg - base) as usize + off;
                assert!(seen.insert(at), "line revisited early");
                reg = next[&at];
                assert_eq!((reg - base) % 64, 0);
            }
            assert_eq!(reg, base, "the ring closes after every line");
        }
        // Not sequential: prefetchers cannot follow it.
        let ring = chase_ring(1 << 16, 0, 0);
        let seq = ring
            .iter()
            .filter(|(at, v)| *v == (*at as u64) + 64)
            .count();
        assert!(seq < ring.len() / 8, "{seq}");
    }

    #[test]
    fn memory_base_registers_point_at_the_buffer() {
        let c = Copy {
            insns: vec![vec![0x90]],
        };
        let regs = Regs {
            gprs: &GPR_DEFAULTS,
            addr: &[Register::RBX],
            chase: None,
        };
        let img = build_image(&[c], 2, &regs, VecInit::None, false).unwrap();
        let d = Decoder::new(64, &img.bytes[..img.body_start], DecoderOptions::NONE);
        let movs: Vec<_> = d
            .into_iter()
            .filter(|i| i.mnemonic() == Mnemonic::Mov && i.op0_register() == Register::RBX)
            .collect();
        // Twice (before and after rdtsc), the last write of rbx each time is `mov rbx, r14`.
        let from_r14 = movs
            .iter()
            .filter(|i| {
                i.op1_kind() == iced_x86::OpKind::Register && i.op1_register() == Register::R14
            })
            .count();
        assert_eq!(from_r14, 2);
        assert_eq!(movs.last().unwrap().op1_register(), Register::R14);
    }

    /// A chase image starts from the cursor and leaves its position there for the next run.
    #[test]
    fn chase_images_continue_from_the_cursor() {
        let c = Copy {
            insns: vec![vec![0x48, 0x8b, 0x00]], // mov rax, [rax]
        };
        let regs = Regs {
            gprs: &GPR_DEFAULTS,
            addr: &[Register::RAX],
            chase: Some(Register::RAX),
        };
        let img = build_image(&[c], 2, &regs, VecInit::None, false).unwrap();
        let cursor = |i: &iced_x86::Instruction| {
            i.memory_base() == Register::R14 && i.memory_displacement64() as i64 == -8
        };
        let d = Decoder::new(64, &img.bytes[..img.body_start], DecoderOptions::NONE);
        let pre: Vec<_> = d.into_iter().filter(|i| cursor(i)).collect();
        assert_eq!(pre.len(), 2, "loaded before and after rdtsc");
        assert!(pre.iter().all(|i| i.op0_register() == Register::RAX));
        let d = Decoder::new(64, &img.bytes[img.body_end..], DecoderOptions::NONE);
        let post: Vec<_> = d.into_iter().take(8).filter(|i| cursor(i)).collect();
        assert_eq!(post.len(), 1, "stored back after the loop");
        assert_eq!(post[0].op1_register(), Register::RAX);
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
            let img = build_image(
                std::slice::from_ref(&c),
                2,
                &Regs::values(&GPR_DEFAULTS),
                vec,
                true,
            )
            .unwrap();
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
            // The pool is the page below the buffer r14 points at.
            let at = |k: usize| (64 * k).wrapping_sub(POOL_PAGE) as u64 as usize;
            for (r, disp) in &loads[..n] {
                let num = r.number();
                assert_eq!(*disp, at(num), "{r:?}");
            }
            // mm0-7 share the last slot.
            assert!(loads[n..].iter().all(|(_, d)| *d == at(32)));
        }
    }
}
