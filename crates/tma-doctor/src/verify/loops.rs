//! The JIT-built loops whose counts are known exactly ([`LOOPS`]) and the kernels of a known
//! TMA character ([`KERNELS`]), and running one of them in this process.

use std::io;

use tma_bench::jitloop::{JitLoop, LoopBody, DEFAULT_MEM, MAX_MEM};

use crate::verify_sys;

/// A loop: `copy` (encoded instructions, with how many of them are branches) unrolled
/// `UNROLL` times, plus the harness's `dec r15; jnz` per iteration.
pub struct LoopSpec {
    pub name: &'static str,
    pub copy: &'static [&'static [u8]],
    pub branches_per_copy: u64,
}

/// Copies per iteration.
pub const UNROLL: u64 = 100;

/// `add rax, rbx` (48 01 d8).
const ADD_RAX_RBX: &[u8] = &[0x48, 0x01, 0xd8];
/// `jmp short $+2`: a taken branch to the next instruction (eb 00).
const JMP_NEXT: &[u8] = &[0xeb, 0x00];

/// The exact-count loops.
pub const LOOPS: [LoopSpec; 2] = [
    LoopSpec {
        name: "add_loop",
        copy: &[ADD_RAX_RBX],
        branches_per_copy: 0,
    },
    LoopSpec {
        name: "add_jmp_loop",
        copy: &[ADD_RAX_RBX, JMP_NEXT],
        branches_per_copy: 1,
    },
];

impl LoopSpec {
    pub fn per_iter_instructions(&self) -> u64 {
        UNROLL * self.copy.len() as u64 + 2
    }

    pub fn per_iter_branches(&self) -> u64 {
        UNROLL * self.branches_per_copy + 1
    }

    /// What runs: the copy, unrolled [`UNROLL`] times, no register init, the default buffer.
    pub fn body(&self) -> LoopBody<'static> {
        LoopBody {
            copy: self.copy,
            unroll: UNROLL as usize,
            init: &[],
            mem: DEFAULT_MEM,
            chase: None,
        }
    }

    /// The harness image bytes ([`LoopBody::image`]).
    pub fn image(&self) -> io::Result<Vec<u8>> {
        self.body().image()
    }

    pub(super) fn load(&self) -> io::Result<JitLoop> {
        verify_sys::load(&self.body())
    }
}

/// Run one of [`LOOPS`] for `iters` iterations (`tma doctor --run-loop NAME --iters N`: the
/// process `perf stat` counts for the side-by-side check).
pub fn run_loop(name: &str, iters: u64) -> io::Result<()> {
    let spec = LOOPS.iter().find(|l| l.name == name).ok_or_else(|| {
        let names: Vec<&str> = LOOPS.iter().map(|l| l.name).collect();
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no loop {name:?}: choose from {}", names.join(", ")),
        )
    })?;
    spec.load()?.run(iters.max(1));
    Ok(())
}

/// A kernel of known character for the level-1 check.
pub struct KernelSpec {
    pub name: &'static str,
    /// The node that must dominate.
    pub expect: &'static str,
    copy: &'static [&'static [u8]],
    /// Harness iterations for about a second.
    iters: u64,
}

/// `imul rax, rax` (48 0f af c0): each result feeds the next.
const IMUL_RAX_RAX: &[u8] = &[0x48, 0x0f, 0xaf, 0xc0];
/// `mov rax, [rax]` (48 8b 00): each load's address is the previous load's value.
const LOAD_RAX_RAX: &[u8] = &[0x48, 0x8b, 0x00];
/// `imul rax, rbx` (48 0f af c3), `add rax, rcx` (48 01 c8): a 64-bit LCG step.
const LCG_MUL: &[u8] = &[0x48, 0x0f, 0xaf, 0xc3];
const LCG_ADD: &[u8] = &[0x48, 0x01, 0xc8];
/// `bt rax, 63` (48 0f ba e0 3f), `jc $+2` (72 00): a branch taken on a random bit.
const BT_RAX_63: &[u8] = &[0x48, 0x0f, 0xba, 0xe0, 0x3f];
const JC_NEXT: &[u8] = &[0x72, 0x00];

/// Bytes of the pointer-chase buffer (the bench's largest `--mem`).
pub const CHASE_BYTES: usize = MAX_MEM;

pub const KERNELS: [KernelSpec; 3] = [
    KernelSpec {
        name: "imul_chain",
        expect: "Core_Bound",
        copy: &[IMUL_RAX_RAX],
        iters: 10_000_000,
    },
    KernelSpec {
        name: "pointer_chase_1g",
        expect: "Memory_Bound",
        copy: &[LOAD_RAX_RAX],
        // 3e7 dependent loads, a few seconds: longer than building the cycle.
        iters: 300_000,
    },
    KernelSpec {
        name: "random_branch",
        expect: "Bad_Speculation",
        copy: &[LCG_MUL, LCG_ADD, BT_RAX_63, JC_NEXT],
        iters: 1_000_000,
    },
];

/// Run one of [`KERNELS`] for about a second (`tma doctor --run-kernel NAME`: the process
/// `tma stat` counts for the level-1 check).
pub fn run_kernel(name: &str) -> io::Result<()> {
    let spec = KERNELS.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no kernel {name:?}: choose from {}", names.join(", ")),
        )
    })?;
    let (init, mem, chase): (&[(&str, u64)], usize, Option<&str>) = match spec.name {
        "pointer_chase_1g" => (&[], CHASE_BYTES, Some("rax")),
        "random_branch" => (
            &[
                ("rax", 0x1234_5678_9abc_def1),
                ("rbx", 6_364_136_223_846_793_005),
                ("rcx", 1_442_695_040_888_963_407),
            ],
            DEFAULT_MEM,
            None,
        ),
        _ => (&[("rax", 3)], DEFAULT_MEM, None),
    };
    // The pointer chase follows the bench's ring: one pointer per line, a random single cycle
    // from the first line.
    let body = LoopBody {
        copy: spec.copy,
        unroll: UNROLL as usize,
        init,
        mem,
        chase,
    };
    verify_sys::load(&body)?.run(spec.iters);
    Ok(())
}
