//! A loop of fixed instruction bytes, built by the bench harness and run in this process:
//! for callers that count a known instruction stream with their own counters around
//! [`JitLoop::run`] (`tma doctor --verify`). No fork, no pinning and no fault capture, unlike
//! [`crate::run`]; that is why loading one is `unsafe`.
//!
//! The harness around the body is [`crate::harness`]'s: per iteration, `unroll` copies of the
//! body, then `dec r15; jnz`; r14 points at a memory buffer with the vector pool page below it.
// unsafe allowed: `LoopBody::load` is an unsafe fn (its caller vouches for the body); the call
// itself is `crate::sys::call_harness`.
#![allow(unsafe_code)]

use std::io;

use iced_x86::Register;
use tma_sys::jit::ExecCode;

use crate::harness::{self, Chase, Copy, Regs, VecInit};

/// The default size of the memory buffer r14 points at (1 MiB).
pub const DEFAULT_MEM: usize = harness::DEFAULT_MEM;
/// The largest memory buffer (1 GiB).
pub const MAX_MEM: usize = harness::MAX_MEM;

/// What a [`JitLoop`] runs.
#[derive(Debug, Clone, Copy)]
pub struct LoopBody<'a> {
    /// One copy of the body: the encoded bytes of each instruction.
    pub copy: &'a [&'a [u8]],
    /// Copies per iteration.
    pub unroll: usize,
    /// Initial values of general-purpose registers, by name (`rax`, `rbx`, ...; not rsp,
    /// r14 or r15).
    pub init: &'a [(&'a str, u64)],
    /// Bytes of the memory buffer r14 points at (at most [`MAX_MEM`]).
    pub mem: usize,
    /// A register that chases pointers (`mov rax, [rax]`): it starts at the buffer, which
    /// holds a ring of pointers over all of it, one per 64-byte line in random order, and it
    /// continues around the ring from one run to the next.
    pub chase: Option<&'a str>,
}

fn gpr(name: &str) -> io::Result<Register> {
    crate::asm::register_by_name(name)
        .filter(|r| r.is_gpr64() && !matches!(*r, Register::RSP | Register::R14 | Register::R15))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name} is not a 64-bit register the harness lets a body use"),
            )
        })
}

impl LoopBody<'_> {
    /// The harness image: the bytes [`JitLoop::run`] calls (pure, nothing is mapped).
    pub fn image(&self) -> io::Result<Vec<u8>> {
        if self.mem > MAX_MEM || self.unroll == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a loop needs 1 or more copies and at most {MAX_MEM} bytes of memory (got {} and {})",
                    self.unroll, self.mem
                ),
            ));
        }
        let gprs = self
            .init
            .iter()
            .map(|&(n, v)| Ok((gpr(n)?, v)))
            .collect::<io::Result<Vec<_>>>()?;
        let regs = Regs {
            gprs: &gprs,
            addr: &[],
            chase: self.chase.map(gpr).transpose()?,
        };
        let copy = Copy {
            insns: self.copy.iter().map(|b| b.to_vec()).collect(),
        };
        harness::build_image(&[copy], self.unroll, &regs, VecInit::None, false)
            .map(|i| i.bytes)
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// Build the image, map it read+execute, and map the buffer (with the pointer ring for a
    /// chase).
    ///
    /// # Safety
    ///
    /// [`JitLoop::run`] executes the body in this process, so the body must be code that
    /// cannot break it: it must not write rsp, r14 or r15, may branch only to the next
    /// instruction, and may touch memory only inside the buffer (through r14 or the chased
    /// register), and it must not fault.
    pub unsafe fn load(&self) -> io::Result<JitLoop> {
        let code = ExecCode::new(&self.image()?)?;
        let mut scratch = memmap2::MmapMut::map_anon(harness::POOL_PAGE + self.mem)?;
        let chase = self.chase.map(|_| Chase {
            len: self.mem,
            offset: 0,
        });
        let buffer = harness::fill_scratch(&mut scratch, &harness::pool_bytes(), chase);
        Ok(JitLoop {
            code,
            _scratch: scratch,
            buffer,
        })
    }
}

/// A loaded [`LoopBody`]: its code, mapped read+execute, and its buffer.
pub struct JitLoop {
    code: ExecCode,
    _scratch: memmap2::MmapMut,
    /// The memory buffer inside `_scratch` (r14).
    buffer: *mut u8,
}

impl JitLoop {
    /// Run `iters` iterations (at least one); returns the TSC ticks the loop took.
    pub fn run(&mut self, iters: u64) -> u64 {
        crate::sys::call_harness(&self.code, 0, iters.max(1), self.buffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `add rax, rbx` (48 01 d8).
    const ADD: &[u8] = &[0x48, 0x01, 0xd8];
    /// `mov rax, [rax]` (48 8b 00).
    const LOAD: &[u8] = &[0x48, 0x8b, 0x00];

    #[test]
    fn the_image_holds_unroll_copies() {
        let body = LoopBody {
            copy: &[ADD],
            unroll: 10,
            init: &[("rax", 1), ("rbx", 2)],
            mem: DEFAULT_MEM,
            chase: None,
        };
        let img = body.image().unwrap();
        assert_eq!(img.windows(3).filter(|w| *w == ADD).count(), 10);
    }

    #[test]
    fn loops_run_and_chases_stay_in_the_ring() {
        for (copy, chase, mem) in [(ADD, None, DEFAULT_MEM), (LOAD, Some("rax"), 1 << 16)] {
            let body = LoopBody {
                copy: &[copy],
                unroll: 8,
                init: &[("rax", 3), ("rbx", 5)],
                mem,
                chase,
            };
            // SAFETY: `add rax, rbx` touches no memory; `mov rax, [rax]` with rax the chased
            // register follows the ring inside the buffer.
            let mut l = unsafe { body.load() }.unwrap();
            let t1 = l.run(1000);
            let t2 = l.run(1000);
            assert!(t1 > 0 && t2 > 0);
        }
    }

    #[test]
    fn reserved_and_unknown_registers_are_refused() {
        for bad in ["r14", "rsp", "eax", "xmm0", "nope"] {
            let body = LoopBody {
                copy: &[ADD],
                unroll: 1,
                init: &[(bad, 1)],
                mem: DEFAULT_MEM,
                chase: None,
            };
            assert!(body.image().is_err(), "{bad}");
        }
    }
}
