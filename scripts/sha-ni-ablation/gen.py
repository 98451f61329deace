#!/usr/bin/env python3
"""Writes src/generated.rs: variants of tma's 4-stream SHA-NI kernel, each one `asm!` loop over
the blocks, and small instruction-mix bodies for pipe questions. See README.md."""

# Stream j: ABEF, CDGH, newest W. xmm0 is the W+K operand; xmm13, xmm14 temporaries; xmm15 free.
ST = [("xmm1", "xmm2", "xmm9"), ("xmm3", "xmm4", "xmm10"), ("xmm5", "xmm6", "xmm11"), ("xmm7", "xmm8", "xmm12")]


def wb(j, i):
    """W[i] of stream j in the W buffer (16 vectors of 16 bytes per stream)."""
    return f"xmmword ptr [{{wbuf}} + {256 * j + 16 * i}]"


def sched(j, i, o):
    """W[i] of stream j: message bytes for i < 4, else one MSG1/PALIGNR/PADDD/MSG2 step."""
    a, c, w = ST[j]
    if i < 4:
        return [f"movdqu {w}, xmmword ptr [{{m{j}}} + {16 * i}]",
                f"pshufb {w}, xmmword ptr [{{mask}}]", f"movdqa {wb(j, i)}, {w}"]
    pal = {
        "palignr": [f"movdqa xmm14, {w}", f"palignr xmm14, {wb(j, i - 2)}, 4"],
        "vpalignr": [f"vpalignr xmm14, {w}, {wb(j, i - 2)}, 4"],
        "blend": [f"vpblendw xmm14, {w}, {wb(j, i - 2)}, 0xFC", "pshufd xmm14, xmm14, 0x39"],
    }[o.get("palignr", "palignr")]
    r = [f"movdqa xmm13, {wb(j, i - 4)}", f"sha256msg1 xmm13, {wb(j, i - 3)}", *pal,
         "paddd xmm13, xmm14", f"sha256msg2 xmm13, {w}", f"movdqa {w}, xmm13"]
    if o.get("store_all") or i < 14:
        r.append(f"movdqa {wb(j, i)}, {w}")
    return r


def rounds(j, i, o):
    """Rounds 4i..4i+4 of stream j; `upper` says how W+K words 2, 3 reach lanes 0, 1 of xmm0."""
    a, c, w = ST[j]
    k = "xmm15" if o.get("kreg") else f"xmmword ptr [{{k}} + {16 * i}]"
    first = f"movdqa xmm0, {wb(j, i)}" if o.get("wmem") else f"movdqa xmm0, {w}"
    upper = {
        "pshufd": ["pshufd xmm0, xmm0, 0x0E"],
        "none": [],
        "movq": [f"movq xmm0, qword ptr [{{wbuf}} + {256 * j + 16 * i + 8}]", f"paddd xmm0, xmmword ptr [{{khi}} + {16 * i}]"],
        "movq_k": [f"movq xmm0, qword ptr [{{khi}} + {16 * i + 8}]", f"paddd xmm0, xmmword ptr [{{khi}} + {16 * i}]"],
        "pextrq": ["pextrq rax, xmm0, 1", "movq xmm0, rax"],
    }[o.get("upper", "pshufd")]
    return [first, f"paddd xmm0, {k}", f"sha256rnds2 {c}, {a}, xmm0", *upper, f"sha256rnds2 {a}, {c}, xmm0"]


def block(o):
    """One block of the four streams: per group, the schedule steps `ahead` groups on, then the
    rounds (ahead 0: the schedule of the group itself, before its rounds, as in tma)."""
    ahead, drop, out, group_start = o.get("ahead", 0), o.get("drop", ()), [], 0
    keep = lambda ins: [x for x in ins if not any(x.startswith(d) for d in drop)]
    steps = lambda i: [] if ("schedule" in drop and i >= 4) else sum((keep(sched(j, i, o)) for j in range(4)), [])
    for i in range(ahead):
        out += steps(i)
    for i in range(16):
        if ahead == 0:
            out += steps(i)
        if o.get("kreg"):
            out.append(f"movdqa xmm15, xmmword ptr [{{k}} + {16 * i}]")
        for j in range(4):
            out += keep(rounds(j, i, o))
        if ahead and i + ahead < 16:
            out += steps(i + ahead)
        if o.get("fill"):
            out = filler(out, group_start, o["fill"], o.get("fill_loads", 0))
        group_start = len(out)
    return out


FILL = ["rorx rax, {f1}, 3", "rorx {f2}, {f1}, 7", "andn rax, {f1}, {f1}", "shrx {f2}, {f1}, {f1}", "rorx rax, {f1}, 11", "andn {f2}, {f1}, {f1}"]


def filler(out, start, n, loads):
    """Spread n scalar ops (integer pipes only; `loads` of them with a 4-byte load) over out[start:]."""
    grp, res = out[start:], out[:start]
    ops = []
    for t in range(n):
        if loads and t % (n // loads) == 0:
            ops.append(f"mov {{f2:e}}, dword ptr [{{save}} + {4 * (t % 32)}]")
        else:
            ops.append(FILL[t % len(FILL)])
    for i, ins in enumerate(grp):
        res.append(ins)
        lo, hi = i * n // len(grp), (i + 1) * n // len(grp)
        res += ops[lo:hi]
    return res


def lean_block(o):
    """The kernel without register copies: the W registers rotate names (the new W of a step is
    made in the free register, the old W's register becomes the free one), VEX `vpaddd` makes
    W+K and (option) `vpalignr` the shifted pair."""
    free, wr, out = "xmm13", [s[2] for s in ST], []
    for i in range(16):
        for j in range(4):
            a, c, _ = ST[j]
            if i < 4:
                w = wr[j]
                out += [f"movdqu {w}, xmmword ptr [{{m{j}}} + {16 * i}]",
                        f"pshufb {w}, xmmword ptr [{{mask}}]", f"movdqa {wb(j, i)}, {w}"]
                continue
            w, t = wr[j], free
            pal = ([f"vpalignr xmm14, {w}, {wb(j, i - 2)}, 4"] if o.get("vpalignr", True)
                   else [f"movdqa xmm14, {w}", f"palignr xmm14, {wb(j, i - 2)}, 4"])
            out += [f"movdqa {t}, {wb(j, i - 4)}", f"sha256msg1 {t}, {wb(j, i - 3)}", *pal,
                    f"paddd {t}, xmm14", f"sha256msg2 {t}, {w}"]
            if i < 14:
                out.append(f"movdqa {wb(j, i)}, {t}")
            wr[j], free = t, w
        for j in range(4):
            a, c, _ = ST[j]
            k = f"xmmword ptr [{{k}} + {16 * i}]"
            first = ([f"vpaddd xmm0, {wr[j]}, {k}"] if o.get("vpaddd", True)
                     else [f"movdqa xmm0, {wr[j]}", f"paddd xmm0, {k}"])
            out += [*first, f"sha256rnds2 {c}, {a}, xmm0", "pshufd xmm0, xmm0, 0x0E", f"sha256rnds2 {a}, {c}, xmm0"]
    return out


KERNELS = {
    "lean": {"lean": True},
    "lean_sse_palignr": {"lean": True, "vpalignr": False},
    "lean_sse_paddd": {"lean": True, "vpaddd": False},
    "lean_rotation_only": {"lean": True, "vpaddd": False, "vpalignr": False},
    "tma": {},
    "ahead_1": {"ahead": 1},
    "ahead_2_w_from_memory": {"ahead": 2, "wmem": True, "store_all": True},
    "k_in_register": {"kreg": True},
    "vpalignr": {"palignr": "vpalignr"},
    "vpblendw_pshufd": {"palignr": "blend"},
    "upper_movq_of_stored_w": {"upper": "movq", "store_all": True},
    "upper_movq_never_stored": {"upper": "movq_k", "wrong": True},
    "upper_pextrq": {"upper": "pextrq"},
    # Deletions (and upper_movq_never_stored, which reads K instead of W): wrong digests, timing only.
    "fill_8": {"fill": 8}, "fill_16": {"fill": 16}, "fill_24": {"fill": 24}, "fill_32": {"fill": 32},
    "fill_16_2loads": {"fill": 16, "fill_loads": 2}, "fill_32_4loads": {"fill": 32, "fill_loads": 4},
    "without_msg2": {"drop": ("sha256msg2",)},
    "without_rnds2": {"drop": ("sha256rnds2",)},
    "without_msg1": {"drop": ("sha256msg1",)},
    "without_pshufd": {"upper": "none"},
    "without_k_paddd": {"drop": ("paddd xmm0",)},
    "without_palignr": {"drop": ("palignr",)},
    "without_w_stores": {"drop": ("movdqa xmmword ptr",)},
    "without_schedule": {"drop": ("schedule",)},
}


def kernel(name, o):
    body = ["2:"] + [f"movdqa xmmword ptr [{{save}} + {16 * r}], xmm{r + 1}" for r in range(8)] + (lean_block(o) if o.get("lean") else block(o))
    body += [f"paddd xmm{r + 1}, xmmword ptr [{{save}} + {16 * r}]" for r in range(8)]
    body += ["add {m0}, 64", "add {m1}, 64", "add {m2}, 64", "add {m3}, 64", "dec {n}", "jnz 2b",
             "/* {k} {khi} {mask} {f1} {f2} */"]
    text = "\\n".join(body)
    return f"""
#[target_feature(enable = "sha,sse2,ssse3,sse4.1,avx")]
#[inline(never)]
unsafe fn {name}(s: &mut [[__m128i; 2]; 4], blocks: [&[u8]; 4], n: usize) {{
    assert!(n > 0 && blocks.iter().all(|b| b.len() >= n * 64));
    // As in tma's kernel: everything the loop reads and writes besides the message in one
    // 4 KiB-aligned block (no 4K aliasing between K loads and W stores).
    let mut sc = crate::Scratch {{ k: K16.0, khi: KHI.0, mask: MASK.0, wbuf: [[_mm_setzero_si128(); 16]; 4], save: [_mm_setzero_si128(); 8] }};
    core::arch::asm!("{text}",
        wbuf = in(reg) sc.wbuf.as_mut_ptr(), save = in(reg) sc.save.as_mut_ptr(),
        k = in(reg) sc.k.as_ptr(), khi = in(reg) sc.khi.as_ptr(), mask = in(reg) sc.mask.as_ptr(),
        m0 = inout(reg) blocks[0].as_ptr() => _, m1 = inout(reg) blocks[1].as_ptr() => _,
        m2 = inout(reg) blocks[2].as_ptr() => _, m3 = inout(reg) blocks[3].as_ptr() => _,
        n = inout(reg) n => _,
        inout("xmm1") s[0][0], inout("xmm2") s[0][1], inout("xmm3") s[1][0], inout("xmm4") s[1][1],
        inout("xmm5") s[2][0], inout("xmm6") s[2][1], inout("xmm7") s[3][0], inout("xmm8") s[3][1],
        out("xmm9") _, out("xmm10") _, out("xmm11") _, out("xmm12") _,
        out("xmm0") _, out("xmm13") _, out("xmm14") _, out("xmm15") _, out("rax") _, f1 = out(reg) _, f2 = out(reg) _,
        options(nostack));
}}
"""


# Instruction-mix bodies: `count` of each template spread evenly, destinations rotating over 14
# registers, sources xmm2 (never written); {m}: a 16-byte slot of a 4 KiB buffer.
DST = [f"xmm{i}" for i in (1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)]
R, M1, M2 = "sha256rnds2 {d}, xmm2", "sha256msg1 {d}, xmm2", "sha256msg2 {d}, xmm2"
PS, PAL, PA = "pshufd {d}, xmm2, 0x0E", "palignr {d}, xmm2, 4", "paddd {d}, xmm2"
LD, ST16 = "movdqa {d}, xmmword ptr {m}", "movdqa xmmword ptr {m}, xmm2"
MIXES = {
    "16 rnds2": [(16, R)], "8 msg2": [(8, M2)], "16 msg1": [(16, M1)], "16 pshufd": [(16, PS)],
    "32 loads": [(32, LD)], "16 stores": [(16, ST16)],
    "8 msg2 + 8 loads": [(8, M2), (8, LD)], "8 msg2 + 16 loads": [(8, M2), (16, LD)],
    "8 msg2 + 24 loads": [(8, M2), (24, LD)], "8 msg2 + 32 loads": [(8, M2), (32, LD)],
    "8 msg2 + 16 pshufd": [(8, M2), (16, PS)], "8 msg2 + 16 palignr": [(8, M2), (16, PAL)],
    "8 msg2 + 16 msg1": [(8, M2), (16, M1)], "8 msg2 + 32 paddd": [(8, M2), (32, PA)],
    "16 rnds2 + 8 msg2": [(16, R), (8, M2)], "16 rnds2 + 32 pshufd": [(16, R), (32, PS)],
    "16 rnds2 + 32 palignr": [(16, R), (32, PAL)], "16 rnds2 + 32 paddd": [(16, R), (32, PA)],
    "16 rnds2 + 48 paddd": [(16, R), (48, PA)], "16 rnds2 + 32 loads": [(16, R), (32, LD)],
}


def spread(mix):
    total, done, out = sum(n for n, _ in mix), [0] * len(mix), []
    for i in range(total):
        k = max(range(len(mix)), key=lambda k: (i + 1) * mix[k][0] - done[k] * total)
        done[k] += 1
        out.append(mix[k][1].replace("{d}", DST[i % len(DST)]).replace("{m}", f"[{{buf}} + {16 * (i % 16)}]"))
    return out


def mix_fn(idx, mix):
    text = "\\n".join(["2:"] + spread(mix) * 4 + ["dec {n}", "jnz 2b", "/* {buf} */"])
    regs = ", ".join(f'out("{r}") _' for r in ["xmm0"] + DST)
    return f"""
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
#[inline(never)]
unsafe fn mix_{idx}(buf: *const u8, n: usize) {{
    core::arch::asm!("{text}", buf = in(reg) buf, n = inout(reg) n => _, {regs}, options(nostack));
}}
"""


out = ["// Generated by gen.py: do not edit.", "use core::arch::x86_64::*;", "use crate::{K16, KHI, MASK};"]
out += [kernel(n, o) for n, o in KERNELS.items()]
out.append("pub type Kernel = unsafe fn(&mut [[__m128i; 2]; 4], [&[u8]; 4], usize);")
out.append("pub const KERNELS: &[(&str, Kernel, bool)] = &[" + ", ".join(
    f'("{n}", {n}, {str(not ("drop" in o or o.get("upper") == "none" or o.get("wrong"))).lower()})' for n, o in KERNELS.items()) + "];")
out += [mix_fn(i, m) for i, m in enumerate(MIXES.values())]
out.append("pub const MIXES: &[(&str, unsafe fn(*const u8, usize))] = &[" + ", ".join(
    f'("{n}", mix_{i})' for i, n in enumerate(MIXES)) + "];")
open("src/generated.rs", "w").write("\n".join(out) + "\n")
