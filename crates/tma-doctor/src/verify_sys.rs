//! The one `unsafe` of `tma doctor --verify`: loading the JIT-built loops of
//! [`crate::verify`] to run them in this process. The thread clock and `getrusage` are
//! `tma_sys`'s; the harness, its mapping and the call are `tma_bench::jitloop`'s.
// unsafe allowed: `LoopBody::load`, for this crate's own constant bodies.
#![allow(unsafe_code)]

use std::io;

use tma_bench::jitloop::{JitLoop, LoopBody};

/// Load one of the bodies of [`crate::verify::LOOPS`] or [`crate::verify::KERNELS`] (only
/// those: see the SAFETY comment).
pub(crate) fn load(body: &LoopBody<'_>) -> io::Result<JitLoop> {
    // SAFETY: every body given here is a constant of `crate::verify`: register arithmetic
    // (add, imul, bt), jumps to the next instruction (`jmp $+2`, `jc $+2`), and the chase
    // kernel's `mov rax, [rax]` with rax as the chased register, which starts at the buffer
    // and follows the ring inside it. None writes rsp, r14 or r15, and none can fault.
    unsafe { body.load() }
}
