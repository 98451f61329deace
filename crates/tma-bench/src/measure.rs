//! One measurement of one source, stage by stage: check the operand values, plan the timed
//! variants (calibration, latency pairs, throughput chains), set the initial registers, build
//! the harness images, run them in the forked child, collect the figures, check the clocks
//! and assemble the [`FormReport`].

use std::collections::HashMap;

use iced_x86::{Instruction, Register};

use crate::{
    asm, clock, derive, engine, harness, hex, prepare, stats, sys, variants, BenchError,
    ChainResult, ClockChoice, ClockKind, ClockStatus, DivPreset, Figure, FormReport, FpPreset,
    Method, Options, PairResult, Source, ThroughputResult,
};

/// Measure `src` once (no retry after a failed self-check; see `bench_inner`).
pub(crate) fn measure_once(
    src: &Source,
    opts: &Options,
    probe: variants::FeatureProbe,
    div: Option<&DivPreset>,
    fp: Option<&FpPreset>,
) -> Result<FormReport, BenchError> {
    let (input, instrs) = prepare(src, probe)?;
    let vec_vals = vector_values(opts, fp, &instrs)?;
    let mut planned = Planned::calibration();
    if opts.latency {
        plan_latency(&mut planned, &instrs, opts)?;
    }
    if opts.throughput {
        match div {
            Some(p) => plan_div_throughput(&mut planned, instrs[0], p)?,
            None => plan_throughput(&mut planned, &instrs, &opts.chains)?,
        }
    }
    let sentinel = if tp_jobs_exist(&planned) {
        planned.tp_check = plan_tp_check(&mut planned);
        plan_sentinel(&mut planned, &instrs)
    } else {
        None
    };
    let mut gprs = initial_gprs(opts, &planned, &instrs, div);
    let mem = plan_memory(&planned.variants, &opts.method, &opts.init)?;
    for r in &mem.zero {
        if let Some(slot) = gprs.iter_mut().find(|(g, _)| g == r) {
            slot.1 = 0;
        }
    }
    let (mut layout, jobs) = build_layout(&planned.variants, &gprs, &mem, &vec_vals, &opts.method)?;
    layout.mem = mem.size;
    layout.chase = mem.chase;
    planned.notes.extend(mem.note);
    let wanted = planned.wanted_jobs();
    // Throughput chain counts may stop early when clearly not the best; a job that is also a
    // latency figure (the same body, e.g. chain count 1) never does.
    let lat_jobs: Vec<usize> = planned
        .latency
        .iter()
        .flat_map(|(_, j, rt)| std::iter::once(*j).chain(*rt))
        .collect();
    let tp_jobs: Vec<usize> = planned
        .tp
        .iter()
        .map(|t| t.2)
        .filter(|j| !lat_jobs.contains(j))
        .collect();
    let out = engine::run(
        &layout,
        &jobs,
        &wanted,
        &tp_jobs,
        sentinel,
        &clocks_for(opts.clock),
        &opts.method,
    )?;
    check_finished(&out, &layout, &planned.variants, &jobs, &gprs, &opts.method)?;
    let (statuses, figs) = collect(&out, &mut planned.notes)?;
    let good = good_clocks(&statuses, opts.clock)?;
    check_complete(&good, &wanted, &figs, &planned.variants)?;
    let figures_of = |j: usize| -> Vec<Figure> {
        good.iter()
            .filter_map(|c| figs.get(&(j, *c)).cloned())
            .collect()
    };
    let latency = latency_results(&mut planned, &figures_of);
    let mut throughput = throughput_result(&planned, &good, &figures_of);
    if let (Some(j), Some(t)) = (planned.tp_check, throughput.as_mut()) {
        if let Some(note) = check_independent_work(&figures_of(j), t) {
            planned.notes.push(note);
        }
    }
    Ok(FormReport {
        input,
        preset: div
            .map(|d| d.describe(&instrs[0]))
            .or_else(|| fp.map(|p| p.describe(&instrs[0]))),
        instructions: instrs.iter().map(asm::format).collect(),
        bytes: hex(&instrs
            .iter()
            .filter_map(|i| asm::encode(i).ok())
            .flatten()
            .collect::<Vec<u8>>()),
        cpu: opts.method.cpu.or_else(sys::current_cpu).unwrap_or(0),
        clocks: statuses,
        latency,
        latency_skipped: planned.skipped_pairs,
        throughput,
        throughput_note: planned.tp_note,
        notes: planned.notes,
    })
}

/// What is timed: the variants (each one job) and what each result stands for.
struct Planned {
    /// Timed bodies, without duplicates; jobs 0 and 1 are the add and imul calibration chains.
    variants: Vec<variants::Variant>,
    /// (pair, job index of its chain, job index of its connector round trip)
    latency: Vec<(variants::PairPlan, usize, Option<usize>)>,
    /// (chain count, variant, job index)
    tp: Vec<(usize, variants::Variant, usize)>,
    skipped_pairs: Vec<(String, String)>,
    skipped_chains: Vec<(usize, String)>,
    tp_note: Option<String>,
    /// Spare registers holding the preset dividend for the division throughput body.
    div_spares: Vec<(Register, u64)>,
    /// The throughput check's job ([`plan_tp_check`]).
    tp_check: Option<usize>,
    notes: Vec<String>,
}

impl Planned {
    /// Only the two calibration chains.
    fn calibration() -> Planned {
        let chain = |code| variants::Variant {
            chains: vec![vec![calib_ins(code)]],
            reloads: Vec::new(),
        };
        Planned {
            variants: vec![
                chain(iced_x86::Code::Add_rm64_r64),
                chain(iced_x86::Code::Imul_r64_rm64),
            ],
            latency: Vec::new(),
            tp: Vec::new(),
            skipped_pairs: Vec::new(),
            skipped_chains: Vec::new(),
            tp_note: None,
            div_spares: Vec::new(),
            tp_check: None,
            notes: Vec::new(),
        }
    }

    /// The job index of `v`: an existing variant with the same instructions, else a new one.
    fn add_variant(&mut self, v: variants::Variant) -> usize {
        let text = |v: &variants::Variant| -> Vec<String> {
            v.chains.iter().flatten().map(asm::format).collect()
        };
        let t = text(&v);
        if let Some(i) = self.variants.iter().position(|w| text(w) == t) {
            return i;
        }
        self.variants.push(v);
        self.variants.len() - 1
    }

    /// The jobs whose figures are reported, sorted.
    fn wanted_jobs(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self
            .latency
            .iter()
            .flat_map(|(_, j, rt)| std::iter::once(*j).chain(*rt))
            .chain(self.tp.iter().map(|t| t.2))
            .chain(self.tp_check)
            .collect();
        w.sort_unstable();
        w.dedup();
        w
    }
}

/// The calibration instruction `code rax, rax`.
pub(crate) fn calib_ins(code: iced_x86::Code) -> Instruction {
    // Both are fixed two-register forms; construction cannot fail for these codes.
    Instruction::with2(code, Register::RAX, Register::RAX).unwrap_or_default()
}

fn clocks_for(choice: ClockChoice) -> Vec<ClockKind> {
    match choice {
        ClockChoice::One(c) => vec![c],
        ClockChoice::All => vec![
            ClockKind::Tsc,
            ClockKind::Perf,
            ClockKind::Rdpmc,
            ClockKind::Msr,
        ],
        ClockChoice::Auto => {
            if clock::available(ClockKind::Perf).is_ok() {
                vec![ClockKind::Perf]
            } else {
                vec![ClockKind::Tsc]
            }
        }
    }
}

/// Check `--init` and give the initial vector register values by register number (the FP
/// preset's lanes in every register when one applies).
fn vector_values(
    opts: &Options,
    fp: Option<&FpPreset>,
    instrs: &[Instruction],
) -> Result<Vec<(usize, Vec<u8>)>, BenchError> {
    for (r, _) in &opts.init {
        if !r.is_gpr64() || matches!(*r, Register::RSP | Register::R14 | Register::R15) {
            return Err(BenchError::BadOption(format!(
                "--init {}: only general-purpose registers other than rsp, r14 and r15 can be initialised",
                asm::register_name(*r)
            )));
        }
    }
    let mut vec_vals: Vec<(usize, Vec<u8>)> = Vec::new();
    for (r, b) in &opts.vec_init {
        let n = variants::reg_number(r.full_register())
            .filter(|_| r.is_xmm() || r.is_ymm() || r.is_zmm())
            .ok_or_else(|| {
                BenchError::BadOption(format!(
                    "--init {}: not a vector register",
                    asm::register_name(*r)
                ))
            })?;
        vec_vals.push((n, b.clone()));
    }
    if let Some(p) = fp {
        let lanes = p.lanes(&instrs[0]);
        vec_vals = (0..32).map(|n| (n, lanes.clone())).collect();
    }
    Ok(vec_vals)
}

/// The latency pairs to time (all, or those `--pair`/`--from`/`--to` select); the body as
/// written when there is no pair.
fn plan_latency(
    planned: &mut Planned,
    instrs: &[Instruction],
    opts: &Options,
) -> Result<(), BenchError> {
    let (pairs, skipped) = if instrs.len() == 1 {
        variants::latency_pairs(&instrs[0])
    } else {
        (Vec::new(), Vec::new())
    };
    planned.skipped_pairs = skipped.into_iter().map(|s| (s.pair, s.reason)).collect();
    let pairs = if pairs.is_empty() {
        planned.notes.push(if instrs.len() == 1 {
            "no register input->output pair: latency row is the body repeated as written".into()
        } else {
            "several instructions: latency is per body copy, repeated as written".into()
        });
        vec![body_pair(instrs)]
    } else {
        pairs
    };
    for p in select_pairs(pairs, &opts.pairs)? {
        let j = planned.add_variant(p.variant.clone());
        let rt = p.round_trip.clone().map(|v| planned.add_variant(v));
        planned.latency.push((p, j, rt));
    }
    Ok(())
}

/// The whole body as one latency "pair".
fn body_pair(instrs: &[Instruction]) -> variants::PairPlan {
    variants::PairPlan {
        pair: "body".into(),
        from: "-".into(),
        to: "-".into(),
        variant: variants::Variant {
            chains: vec![instrs.to_vec()],
            reloads: Vec::new(),
        },
        note: None,
        connector: None,
        round_trip: None,
    }
}

/// The pairs the filter selects; an error naming the available ones when none matches.
fn select_pairs(
    mut pairs: Vec<variants::PairPlan>,
    f: &crate::PairFilter,
) -> Result<Vec<variants::PairPlan>, BenchError> {
    if f.pair.is_none() && f.from.is_none() && f.to.is_none() {
        return Ok(pairs);
    }
    let all: Vec<String> = pairs
        .iter()
        .map(|p| format!("{} ({}->{})", p.pair, p.from, p.to))
        .collect();
    pairs.retain(|p| {
        f.pair.as_ref().is_none_or(|x| x.replace(' ', "") == p.pair)
            && f.from
                .as_ref()
                .is_none_or(|x| x.eq_ignore_ascii_case(&p.from))
            && f.to.as_ref().is_none_or(|x| x.eq_ignore_ascii_case(&p.to))
    });
    if pairs.is_empty() {
        return Err(BenchError::BadOption(format!(
            "no operand pair matches the selection; available: {}",
            all.join(", ")
        )));
    }
    Ok(pairs)
}

/// Division throughput with an operand preset: rax and rdx are reloaded from spares before
/// each copy, so copies are independent.
fn plan_div_throughput(
    planned: &mut Planned,
    ins: Instruction,
    p: &DivPreset,
) -> Result<(), BenchError> {
    let d = DivPreset::divisor(&ins).map(|r| r.full_register());
    let (a, dx, _) = p.values(&ins);
    let spares: Vec<Register> = [Register::R8, Register::R9, Register::R10, Register::R11]
        .into_iter()
        .filter(|r| Some(*r) != d)
        .take(2)
        .collect();
    let mov = |dst: Register, src: Register| {
        Instruction::with2(iced_x86::Code::Mov_rm64_r64, dst, src)
            .map_err(|e| BenchError::Measurement(e.to_string()))
    };
    let body = vec![
        mov(Register::RAX, spares[0])?,
        mov(Register::RDX, spares[1])?,
        ins,
    ];
    planned.div_spares = vec![(spares[0], a), (spares[1], dx)];
    let v = variants::Variant {
        chains: vec![body],
        reloads: Vec::new(),
    };
    let j = planned.add_variant(v.clone());
    planned.tp.push((1, v, j));
    planned.notes.push(format!(
        "throughput body reloads rax and rdx before each {} (the moves are part of the timed body) so copies are independent",
        asm::format(&ins)
    ));
    Ok(())
}

/// Throughput over the swept chain counts, with the notes on what the figure means.
fn plan_throughput(
    planned: &mut Planned,
    instrs: &[Instruction],
    chains: &[usize],
) -> Result<(), BenchError> {
    for &k in chains {
        if k == 0 {
            return Err(BenchError::BadOption("--chains values must be >= 1".into()));
        }
        match variants::throughput_variant(instrs, k) {
            Ok(v) => {
                let j = planned.add_variant(v.clone());
                planned.tp.push((k, v, j));
            }
            Err(reason) => {
                if k == 1 || planned.tp_note.is_some() {
                    planned.tp_note.get_or_insert(reason.clone());
                }
                planned.skipped_chains.push((k, reason));
            }
        }
    }
    throughput_notes(planned, instrs);
    Ok(())
}

fn throughput_notes(planned: &mut Planned, instrs: &[Instruction]) {
    if !planned.tp.is_empty()
        && instrs
            .iter()
            .any(|i| i.rflags_read() != 0 && i.rflags_modified() & i.rflags_read() != 0)
    {
        planned.notes.push(
            "throughput copies also chain through the flags (each reads flags the previous copy wrote), so the throughput is at best the flags latency"
                .into(),
        );
    }
    if let Some((_, v, _)) = planned.tp.iter().find(|t| !t.1.reloads.is_empty()) {
        let moves: Vec<String> = v
            .reloads
            .iter()
            .map(|(sp, r)| {
                format!(
                    "mov {}, {}",
                    asm::register_name(*r),
                    asm::register_name(*sp)
                )
            })
            .collect();
        planned.notes.push(format!(
            "throughput copies reload implicit registers before each instruction ({}; the spare holds the register's initial value) so copies are independent; the moves are timed with it, so the throughput is an upper bound for the instruction alone",
            moves.join(", ")
        ));
    }
    if planned.tp.is_empty() {
        let reason = planned
            .skipped_chains
            .first()
            .map(|s| s.1.clone())
            .unwrap_or_default();
        planned.tp_note = Some(format!("throughput not measured: {reason}"));
    } else if let Some(first) = planned.skipped_chains.iter().find(|(k, _)| *k > 1) {
        planned.tp_note = Some(format!("chain count {} skipped: {}", first.0, first.1));
    }
}

/// Initial general-purpose register values: the harness defaults, `--init`, the division
/// preset, and reload spares holding the value of the register they reload.
fn initial_gprs(
    opts: &Options,
    planned: &Planned,
    instrs: &[Instruction],
    div: Option<&DivPreset>,
) -> Vec<(Register, u64)> {
    let mut gprs: Vec<(Register, u64)> = harness::GPR_DEFAULTS.to_vec();
    let mut inits = opts.init.clone();
    if let Some(p) = div {
        let ins = instrs[0];
        let (a, dx, v) = p.values(&ins);
        inits.push((Register::RAX, a));
        inits.push((Register::RDX, dx));
        if let Some(d) = DivPreset::divisor(&ins) {
            inits.push((d.full_register(), v));
        }
        inits.extend(planned.div_spares.iter().copied());
    }
    for (r, v) in &inits {
        if let Some(slot) = gprs.iter_mut().find(|(g, _)| g == r) {
            slot.1 = *v;
        }
    }
    for (_, v, _) in &planned.tp {
        for (sp, src) in &v.reloads {
            if let Some(val) = gprs.iter().find(|(g, _)| g == src).map(|x| x.1) {
                if let Some(slot) = gprs.iter_mut().find(|(g, _)| g == sp) {
                    slot.1 = val;
                }
            }
        }
    }
    gprs
}

/// Two harness images per variant (the two unroll counts), laid out in one buffer, and the
/// job of each variant.
fn build_layout(
    variants: &[variants::Variant],
    gprs: &[(Register, u64)],
    mem: &MemPlan,
    vec_vals: &[(usize, Vec<u8>)],
    method: &Method,
) -> Result<(engine::Layout, Vec<engine::Job>), BenchError> {
    let (u1, u2) = method.unroll;
    if u1 == 0 || u2 <= u1 {
        return Err(BenchError::BadOption("--unroll A,B needs 0 < A < B".into()));
    }
    let bodies: Vec<&Instruction> = variants
        .iter()
        .flat_map(|v| v.chains.iter().flatten())
        .collect();
    let (vec_init, mm) = variants::vec_init(&bodies);
    let mut images = Vec::new();
    let mut jobs = Vec::new();
    for v in variants {
        let copies = v.encode().map_err(BenchError::Measurement)?;
        // Only the images of the chase itself keep their place in the ring between runs.
        let chase = mem.chase_reg.filter(|r| {
            v.chains
                .iter()
                .flatten()
                .any(|i| i.memory_base().full_register() == *r)
        });
        let regs = harness::Regs {
            gprs,
            addr: &mem.addr,
            chase,
        };
        let unroll = engine::job_unroll((u1, u2), copies.len());
        for u in [unroll.0, unroll.1] {
            images.push(
                harness::build_image(&copies, u, &regs, vec_init, mm)
                    .map_err(|e| BenchError::Measurement(format!("harness: {e}")))?,
            );
        }
        jobs.push(engine::Job {
            small: images.len() - 2,
            large: images.len() - 1,
            unroll,
        });
    }
    let mut layout = engine::Layout::new(images);
    layout.pool = harness::pool_with(vec_vals);
    Ok((layout, jobs))
}

fn tp_jobs_exist(planned: &Planned) -> bool {
    planned.tp.iter().any(|t| {
        !planned
            .latency
            .iter()
            .any(|(_, j, rt)| *j == t.2 || *rt == Some(t.2))
    })
}

/// The throughput check: 3 independent `imul r64, r64` chains run at exactly one imul per
/// cycle on every x86 core (latency 3, at least one multiplier), so their figure checks the
/// clock calibration for independent work. The calibration times dependent chains; on a shared
/// host they have been seen to run ~3% slower than their latency while independent work does
/// not (every throughput figure then reads ~3% low, imul/add still 3.00).
fn plan_tp_check(planned: &mut Planned) -> Option<usize> {
    let ins =
        Instruction::with2(iced_x86::Code::Imul_r64_rm64, Register::RAX, Register::RBX).ok()?;
    let v = variants::throughput_variant(&[ins], 3).ok()?;
    Some(planned.add_variant(v))
}

/// When the throughput check converged away from 1.00 (more than 1%), every throughput figure
/// is unconfirmed: marked unconverged, with the note saying why.
fn check_independent_work(check: &[Figure], t: &mut ThroughputResult) -> Option<String> {
    let c = check.first().filter(|c| c.converged)?;
    if (c.median - 1.0).abs() <= 0.01 {
        return None;
    }
    for f in t
        .best
        .iter_mut()
        .chain(t.per_chains.iter_mut().flat_map(|c| c.figures.iter_mut()))
    {
        f.converged = false;
    }
    Some(format!(
        "throughput not confirmed: 3 independent imul chains ran at {:.3} cycles per imul instead of 1.000 (every x86 core), so the clock calibration is off for independent work right now (shared host); throughput figures are marked unconverged, latencies are not affected",
        c.median
    ))
}

/// The contention sentinel for the body's throughput: 8 independent chains of `add r64, r64`,
/// or of `vpaddd xmm` when the body uses vector registers, as one more job, with its expected
/// cost on this core ([`stats::sentinel_expect`]); None on cores not in the table.
#[cfg(not(target_arch = "x86_64"))]
fn plan_sentinel(_planned: &mut Planned, _instrs: &[Instruction]) -> Option<(usize, f64)> {
    None // x86-64 only: no x86 core to expect a cost of
}

#[cfg(target_arch = "x86_64")]
fn plan_sentinel(planned: &mut Planned, instrs: &[Instruction]) -> Option<(usize, f64)> {
    use iced_x86::Code;
    let vector = instrs.iter().any(|i| {
        variants::data_ops(i)
            .iter()
            .any(|d| variants::reg_file(d.reg) == Some(variants::RegFile::Vec))
    });
    let cpu = tma_sys::cpu::signature();
    let expect = stats::sentinel_expect(&cpu.vendor, cpu.family, cpu.model, vector)?;
    let ins = if vector {
        Instruction::with3(
            Code::VEX_Vpaddd_xmm_xmm_xmmm128,
            Register::XMM1,
            Register::XMM1,
            Register::XMM2,
        )
        .ok()?
    } else {
        Instruction::with2(Code::Add_rm64_r64, Register::RAX, Register::RBX).ok()?
    };
    if vector && !std::is_x86_feature_detected!("avx") {
        return None;
    }
    let v = variants::throughput_variant(&[ins], 8).ok()?;
    let j = planned.add_variant(v);
    Some((j, expect))
}

/// How the body's memory operands are set up.
#[derive(Debug, Default)]
struct MemPlan {
    /// Buffer size in bytes.
    size: usize,
    /// Base registers of memory operands: set to the buffer address (r14).
    addr: Vec<Register>,
    /// Index registers of memory operands: set to 0.
    zero: Vec<Register>,
    chase: Option<engine::Chase>,
    /// The chased register (`rax` of `mov rax, [rax]`).
    chase_reg: Option<Register>,
    note: Option<String>,
}

/// Memory operands as uops.info measures them: every base register (other than r14, which
/// already points there) is set to the start of the buffer and every index register to 0, so
/// `add rax, [rbx]` reads the buffer; displacements must stay inside it. A load into its own
/// base register (`mov rax, [rax+d]`) is a pointer chase: the buffer holds a ring of pointers
/// ([`harness::chase_ring`]) over `--mem` bytes when given, else over one line (the L1 latency).
/// Registers set with `--init` keep their value (an address the user chose).
fn plan_memory(
    variants: &[variants::Variant],
    method: &Method,
    init: &[(Register, u64)],
) -> Result<MemPlan, BenchError> {
    use iced_x86::{Mnemonic, OpKind};
    let size = method.mem.unwrap_or(harness::DEFAULT_MEM);
    if !(64..=harness::MAX_MEM).contains(&size) {
        return Err(BenchError::BadOption(format!(
            "--mem {size}: the buffer must be between 64 bytes and {} MiB",
            harness::MAX_MEM >> 20
        )));
    }
    let mut mp = MemPlan {
        size,
        ..MemPlan::default()
    };
    let mut chase_insn = None;
    for ins in variants.iter().flat_map(|v| v.chains.iter().flatten()) {
        if !ins.op_kinds().any(|k| k == OpKind::Memory) || ins.mnemonic() == Mnemonic::Lea {
            continue;
        }
        let text = asm::format(ins);
        let base = ins.memory_base().full_register();
        let index = ins.memory_index().full_register();
        let user_set = |r: Register| init.iter().any(|(g, _)| *g == r);
        if user_set(base) || user_set(index) {
            continue;
        }
        let disp = ins.memory_displacement64() as i64;
        let width = ins.memory_size().size().max(1) as i64;
        if !(0..=size as i64 - width).contains(&disp) {
            return Err(BenchError::BadOption(format!(
                "{text}: the displacement {disp:#x} is outside the {size}-byte memory buffer the base register points at; use a displacement below {size:#x} or a larger --mem"
            )));
        }
        if base.is_gpr64()
            && !matches!(base, Register::R14 | Register::RSP)
            && !mp.addr.contains(&base)
        {
            mp.addr.push(base);
        }
        if index.is_gpr64() && !mp.zero.contains(&index) {
            mp.zero.push(index);
        }
        let writes_base = variants::data_ops(ins)
            .iter()
            .any(|d| d.written && d.reg.full_register() == base);
        if writes_base {
            let chase = ins.mnemonic() == Mnemonic::Mov
                && ins.op0_kind() == OpKind::Register
                && ins.op0_register().is_gpr64()
                && index != base;
            if !chase {
                return Err(BenchError::Refused {
                    text,
                    reason: "it writes its own address register; only a pointer chase `mov r64, [r64+disp]` may (the buffer then holds the next address)".into(),
                });
            }
            if disp > 56 {
                return Err(BenchError::BadOption(format!(
                    "{text}: a pointer chase needs a displacement of 0 to 56 (the pointer sits at that offset of each 64-byte line)"
                )));
            }
            chase_insn = Some((text, disp as usize));
            mp.chase_reg = Some(base);
        }
    }
    if let Some((text, offset)) = chase_insn {
        let len = method.mem.map_or(64, |m| m / 64 * 64);
        mp.chase = Some(engine::Chase { len, offset });
        mp.note = Some(if len <= 64 {
            format!("{text} is a pointer chase over one cache line (L1 load-to-use latency); --mem SIZE walks SIZE bytes in random line order")
        } else {
            format!(
                "{text} is a pointer chase over {len} bytes ({} lines in random order)",
                len / 64
            )
        });
    }
    for r in &mp.addr {
        if mp.zero.contains(r) {
            return Err(BenchError::BadOption(format!(
                "{} is both a base and an index register of memory operands; the harness points bases at the buffer and sets indexes to 0, it cannot do both",
                asm::register_name(*r)
            )));
        }
    }
    Ok(mp)
}

/// A fault or a timeout of the child is the error of the whole measurement.
fn check_finished(
    out: &engine::Outcome,
    layout: &engine::Layout,
    variants: &[variants::Variant],
    jobs: &[engine::Job],
    gprs: &[(Register, u64)],
    method: &Method,
) -> Result<(), BenchError> {
    if let Some(f) = &out.fault {
        return Err(BenchError::Fault(fault_message(
            f, layout, variants, jobs, gprs, method,
        )));
    }
    if out.timed_out {
        return Err(BenchError::Fault(format!(
            "the measurement did not finish within {} s and was killed; the body may be very slow (try --chains 1 or a smaller --unroll)",
            method.timeout.as_secs()
        )));
    }
    Ok(())
}

/// Figures by (job, clock).
type Figures = HashMap<(usize, ClockKind), Figure>;

/// The clock statuses and the figures the child sent; its notes go to `notes`.
fn collect(
    out: &engine::Outcome,
    notes: &mut Vec<String>,
) -> Result<(Vec<ClockStatus>, Figures), BenchError> {
    let mut statuses: Vec<ClockStatus> = Vec::new();
    let mut figs = Figures::new();
    for m in &out.msgs {
        match m {
            engine::Msg::Clock { clock, error } => statuses.push(ClockStatus {
                clock: *clock,
                unavailable: error.clone(),
                self_check: None,
                self_check_ok: None,
                tsc_ticks_per_cycle: None,
            }),
            engine::Msg::SelfCheck {
                clock,
                ratio,
                add_ticks,
                ok,
            } => {
                if let Some(s) = statuses.iter_mut().find(|s| s.clock == *clock) {
                    s.self_check = Some(*ratio);
                    s.self_check_ok = Some(*ok);
                    if *clock == ClockKind::Tsc {
                        s.tsc_ticks_per_cycle = Some(*add_ticks);
                    }
                }
            }
            engine::Msg::Figure {
                job,
                clock,
                values,
                raw_ticks,
                rejected,
                repetitions,
                converged,
                dropped,
                contended,
                outvoted_plausible,
                ..
            } => {
                let mut f = figure(*clock, values, raw_ticks, *rejected)?;
                f.converged = *converged;
                f.dropped = *dropped;
                f.contended = contended.clone();
                f.outvoted_plausible = *outvoted_plausible;
                f.repetitions = repetitions.clone();
                figs.insert((*job, *clock), f);
            }
            engine::Msg::Note(n) => {
                if let Some(fatal) = n.strip_prefix("fatal: ") {
                    return Err(BenchError::Measurement(fatal.to_string()));
                }
                notes.push(n.clone());
            }
        }
    }
    if let Some(e) = &out.exit {
        return Err(BenchError::Measurement(e.clone()));
    }
    Ok((statuses, figs))
}

/// The statistics of one figure's accepted repetitions.
fn figure(
    clock: ClockKind,
    values: &[f64],
    raw_ticks: &[f64],
    rejected: usize,
) -> Result<Figure, BenchError> {
    if values.is_empty() {
        return Err(BenchError::Measurement(format!(
            "the {clock} clock moved during every repetition ({rejected} rejected); the machine is too noisy now, try again"
        )));
    }
    let s = stats::sorted(values);
    let median = stats::percentile(&s, 50.0);
    let (snapped, snapped_ok) = stats::snap(median, stats::pipes());
    Ok(Figure {
        clock,
        median,
        p10: stats::percentile(&s, 10.0),
        p90: stats::percentile(&s, 90.0),
        snapped,
        snapped_ok,
        accepted: values.len(),
        rejected,
        raw_tsc_ticks: stats::median(raw_ticks),
        converged: true,
        repetitions: vec![median],
        dropped: false,
        contended: Vec::new(),
        outvoted_plausible: false,
    })
}

/// The clocks whose self-check passed; an error when no clock was usable, or (unless every
/// clock was asked for) when a usable one failed its self-check.
fn good_clocks(
    statuses: &[ClockStatus],
    choice: ClockChoice,
) -> Result<Vec<ClockKind>, BenchError> {
    if statuses.iter().all(|s| s.unavailable.is_some()) {
        let why: Vec<String> = statuses
            .iter()
            .map(|s| format!("{}: {}", s.clock, s.unavailable.clone().unwrap_or_default()))
            .collect();
        return Err(BenchError::Measurement(format!(
            "no usable clock ({})",
            why.join("; ")
        )));
    }
    for s in statuses {
        // A usable clock whose verdict never came back counts as failed, never as "no figures".
        if s.unavailable.is_none() && s.self_check_ok != Some(true) && choice != ClockChoice::All {
            return Err(BenchError::SelfCheck {
                clock: s.clock,
                ratio: s.self_check.unwrap_or(f64::NAN),
            });
        }
    }
    Ok(statuses
        .iter()
        .filter(|s| s.self_check_ok == Some(true))
        .map(|s| s.clock)
        .collect())
}

/// Every wanted figure must have come back for every clock that passed its self-check.
fn check_complete(
    good: &[ClockKind],
    wanted: &[usize],
    figs: &Figures,
    variants: &[variants::Variant],
) -> Result<(), BenchError> {
    for c in good {
        if let Some(j) = wanted.iter().find(|j| !figs.contains_key(&(**j, *c))) {
            return Err(BenchError::Measurement(format!(
                "the measurement process returned no {c} figure for `{}`; try again",
                variants[*j].text()
            )));
        }
    }
    Ok(())
}

/// One result per latency pair; a cross-file pair whose chain is shorter than two cycles is
/// moved to the skipped pairs with the reason.
fn latency_results(
    planned: &mut Planned,
    figures_of: &dyn Fn(usize) -> Vec<Figure>,
) -> Vec<PairResult> {
    let mut latency = Vec::new();
    for (p, j, rt) in &planned.latency {
        let chain = figures_of(*j);
        let (figures, derived) = match rt {
            None => (chain, None),
            Some(rt) => derive(&chain, &figures_of(*rt), p),
        };
        // Instruction and connector each take at least a cycle: a shorter chain means the
        // value does not flow through the pair (a dependency-breaking idiom such as
        // `sbb rax, rax`, or a shorter path through other operands carries the loop).
        if let Some(d) = derived.as_ref().filter(|d| d.chain < 1.9) {
            let why = format!(
                "the chain through the connector `{}` took {:.3} cycles (< 2), so the output does not depend on {} through this pair here (dependency-breaking idiom, or another path carries the chain); no latency to report",
                d.connector, d.chain, p.from
            );
            planned.notes.push(format!(
                "pair {} {}->{} not reported: {why}",
                p.pair, p.from, p.to
            ));
            planned.skipped_pairs.push((p.pair.clone(), why));
            continue;
        }
        latency.push(PairResult {
            pair: p.pair.clone(),
            from: p.from.clone(),
            to: p.to.clone(),
            body: p.variant.text(),
            note: p.note.clone(),
            figures,
            derived,
        });
    }
    latency
}

/// Throughput per chain count and the best per clock (the chain count of the first clock's).
fn throughput_result(
    planned: &Planned,
    good: &[ClockKind],
    figures_of: &dyn Fn(usize) -> Vec<Figure>,
) -> Option<ThroughputResult> {
    if planned.tp.is_empty() {
        return None;
    }
    let per_chains: Vec<ChainResult> = planned
        .tp
        .iter()
        .map(|(k, v, j)| ChainResult {
            chains: *k,
            body: v
                .chains
                .iter()
                .map(|c| c.iter().map(asm::format).collect::<Vec<_>>().join("; "))
                .collect::<Vec<_>>()
                .join(" | "),
            figures: figures_of(*j),
        })
        .collect();
    let mut best = Vec::new();
    let mut best_chains = 0;
    for (ci, c) in good.iter().enumerate() {
        let cands: Vec<(usize, &Figure)> = per_chains
            .iter()
            .filter_map(|r| {
                r.figures
                    .iter()
                    .find(|f| f.clock == *c)
                    .map(|f| (r.chains, f))
            })
            .collect();
        if let Some(b) = best_of(&cands) {
            if ci == 0 {
                best_chains = b.0;
            }
            best.push(b.1.clone());
        }
    }
    Some(ThroughputResult {
        best,
        best_chains,
        per_chains,
        skipped_chains: planned.skipped_chains.clone(),
    })
}

/// The best (lowest) throughput over chain counts: the lowest figure, except that an accepted
/// figure within 1% of an unaccepted lower one is preferred (the unaccepted one only confirms
/// it). The result is unaccepted when a lower chain count was never confirmed: then it is not
/// a clean number.
fn best_of<'a>(cands: &[(usize, &'a Figure)]) -> Option<(usize, &'a Figure)> {
    let low = cands
        .iter()
        .min_by(|a, b| a.1.median.total_cmp(&b.1.median))?;
    let conv = cands
        .iter()
        .filter(|c| c.1.converged)
        .min_by(|a, b| a.1.median.total_cmp(&b.1.median));
    Some(match conv {
        Some(c) if c.1.median <= low.1.median * 1.01 => *c,
        _ => *low,
    })
}

fn job_of(f: &engine::Fault, layout: &engine::Layout, jobs: &[engine::Job]) -> Option<usize> {
    let (img, _) = layout.locate(f.offset as usize)?;
    jobs.iter().position(|j| j.small == img || j.large == img)
}

pub(crate) fn fault_message(
    f: &engine::Fault,
    layout: &engine::Layout,
    variants: &[variants::Variant],
    jobs: &[engine::Job],
    gprs: &[(Register, u64)],
    method: &Method,
) -> String {
    let sig = sys::signal_name(f.signal);
    if f.signal == libc::SIGALRM {
        return format!(
            "the measurement did not finish within {} s (SIGALRM); the body may be very slow",
            method.timeout.as_secs()
        );
    }
    let located = layout.locate(f.offset as usize);
    let ins = located.and_then(|(img, rel)| {
        let job = jobs.iter().position(|j| j.small == img || j.large == img)?;
        let idx = layout.images[img].insn_at(rel)?;
        // Copy index determines the chain; find which copy contains rel.
        let image = &layout.images[img];
        let pos = image
            .insn_offsets
            .partition_point(|(o, _)| *o <= rel)
            .checked_sub(1)?;
        let n = variants[job].chains[0].len();
        let copy = pos / n.max(1);
        let chain = copy % variants[job].chains.len();
        Some(variants[job].chains[chain][idx])
    });
    let Some(ins) = ins else {
        return format!(
            "the measurement raised {sig} (si_code {}) outside the timed body (harness offset {:#x}); this is a bug in tma's harness",
            f.code, f.offset
        );
    };
    let text = asm::format(&ins);
    let value = |r: Register| {
        gprs.iter()
            .find(|(g, _)| *g == r.full_register())
            .map(|x| x.1)
    };
    match f.signal {
        libc::SIGFPE => {
            use iced_x86::Mnemonic;
            if matches!(ins.mnemonic(), Mnemonic::Div | Mnemonic::Idiv) {
                if ins.op0_kind() == iced_x86::OpKind::Register {
                    let d = ins.op0_register();
                    let dn = asm::register_name(d);
                    let body_writes_divisor = job_of(f, layout, jobs).is_some_and(|j| {
                        variants[j].chains.iter().flatten().any(|i| {
                            i.mnemonic() != ins.mnemonic()
                                && variants::data_ops(i).iter().any(|o| {
                                    o.written && o.reg.full_register() == d.full_register()
                                })
                        })
                    });
                    if body_writes_divisor {
                        return format!("{text} raised #DE (SIGFPE): divisor zero or quotient too large; {dn} is written by the body, so check the values that feed it");
                    }
                    match value(d) {
                        Some(0) => {
                            return format!("{text} raised #DE (SIGFPE): divisor {dn}=0; pass --init {}=3", asm::register_name(d.full_register()))
                        }
                        v => {
                            return format!(
                                "{text} raised #DE (SIGFPE): the quotient does not fit (rdx:rax / {dn}, with {dn}={}); keep rdx below the divisor, e.g. --init rdx=0",
                                v.map_or("?".into(), |v| v.to_string())
                            )
                        }
                    }
                }
                return format!("{text} raised #DE (SIGFPE): divide error (divisor zero or quotient overflow)");
            }
            format!("{text} raised an arithmetic exception (SIGFPE, si_code {})", f.code)
        }
        libc::SIGILL => format!(
            "{text} raised #UD (SIGILL): this CPU does not execute this instruction or encoding"
        ),
        libc::SIGSEGV | libc::SIGBUS => format!(
            "{text} faulted ({sig}) accessing address {:#x}: memory operands must point into the memory buffer (base registers are set to its start, index registers to 0, see --mem); a register the body writes cannot be an address",
            f.addr
        ),
        libc::SIGTRAP => format!("{text} raised a debug trap (SIGTRAP)"),
        _ => format!("{text} raised {sig} (si_code {})", f.code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(text: &str) -> variants::Variant {
        let body = asm::parse_body(text).unwrap();
        let instrs = body
            .iter()
            .map(|p| asm::resolve(p).unwrap().instr)
            .collect();
        variants::Variant {
            chains: vec![instrs],
            reloads: Vec::new(),
        }
    }

    fn mem(text: &str, size: Option<usize>) -> Result<MemPlan, BenchError> {
        let method = Method {
            mem: size,
            ..Method::default()
        };
        plan_memory(&[variant(text)], &method, &[])
    }

    #[test]
    fn memory_operands_point_into_the_buffer() {
        let m = mem("add rax, [rbx]", None).unwrap();
        assert_eq!(m.addr, vec![Register::RBX]);
        assert!(m.zero.is_empty() && m.chase.is_none());
        assert_eq!(m.size, harness::DEFAULT_MEM);
        // Index registers are 0; r14 already points there; lea reads no memory.
        let m = mem(
            "add rax, [rbx+rcx*8+16]; add rdx, [r14+8]; lea rsi, [rdi+4]",
            None,
        )
        .unwrap();
        assert_eq!(m.addr, vec![Register::RBX]);
        assert_eq!(m.zero, vec![Register::RCX]);
        // A store and a load of one location (store-to-load forwarding).
        let m = mem("mov [rbx], rax; mov rax, [rbx]", None).unwrap();
        assert_eq!(m.addr, vec![Register::RBX]);
        assert!(m.chase.is_none());
    }

    #[test]
    fn a_load_into_its_own_base_is_a_pointer_chase() {
        let m = mem("mov rax, [rax]", None).unwrap();
        assert_eq!(m.chase, Some(engine::Chase { len: 64, offset: 0 }));
        assert!(m.note.unwrap().contains("one cache line"));
        let m = mem("mov rax, [rax+8]", Some(1 << 20)).unwrap();
        assert_eq!(
            m.chase,
            Some(engine::Chase {
                len: 1 << 20,
                offset: 8
            })
        );
        // Complex addressing: the index is 0, the chase still runs through the base.
        let m = mem("mov rax, [rax+rbx*8]", None).unwrap();
        assert_eq!(m.zero, vec![Register::RBX]);
        assert!(m.chase.is_some());
    }

    #[test]
    fn memory_forms_that_cannot_work_are_refused_with_the_reason() {
        let e = mem("add rax, [rax]", None).unwrap_err().to_string();
        assert!(e.contains("writes its own address register"), "{e}");
        let e = mem("mov rax, [rax+64]", None).unwrap_err().to_string();
        assert!(e.contains("displacement of 0 to 56"), "{e}");
        let e = mem("mov rax, [rbx+0x2000]", Some(4096))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the 4096-byte memory buffer"), "{e}");
        let e = mem("add rax, [rbx]", Some(16)).unwrap_err().to_string();
        assert!(e.contains("--mem 16"), "{e}");
        let e = mem("add rax, [rbx+rcx]; add rdx, [rcx]", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("both a base and an index"), "{e}");
        // A register set with --init keeps the user's address.
        let method = Method::default();
        let m = plan_memory(
            &[variant("mov rax, [rbx]")],
            &method,
            &[(Register::RBX, 0x1000)],
        )
        .unwrap();
        assert!(m.addr.is_empty());
    }

    fn figure(median: f64, converged: bool, reps: usize) -> Figure {
        Figure::tsc_for_tests(median, converged, reps)
    }

    #[test]
    fn a_throughput_check_off_by_more_than_one_percent_unconfirms_throughput() {
        // Two repetitions that agree.
        let f = |median: f64, converged: bool| figure(median, converged, 2);
        let tp = || ThroughputResult {
            best: vec![f(0.2425, true)],
            best_chains: 4,
            per_chains: vec![ChainResult {
                chains: 4,
                body: "popcnt rax, rbx".into(),
                figures: vec![f(0.2425, true)],
            }],
            skipped_chains: Vec::new(),
        };
        // The state seen on this project's VMs: imul x3 at 0.970.
        let mut t = tp();
        let note = check_independent_work(&[f(0.9697, true)], &mut t).unwrap();
        assert!(note.contains("0.970"), "{note}");
        assert!(!t.best[0].converged && !t.per_chains[0].figures[0].converged);
        // Within 1%, or itself unconverged: nothing changes.
        for check in [f(1.004, true), f(0.9, false)] {
            let mut t = tp();
            assert!(check_independent_work(&[check], &mut t).is_none());
            assert!(t.best[0].converged);
        }
    }

    #[test]
    fn the_best_throughput_prefers_an_accepted_figure_within_one_percent() {
        let f = |median: f64, converged: bool| figure(median, converged, 1);
        let (a, b, c) = (f(0.2502, true), f(0.2499, false), f(0.31, true));
        assert_eq!(best_of(&[(4, &a), (12, &b), (8, &c)]).unwrap().0, 4);
        // An unconfirmed figure well below every accepted one makes the result unaccepted.
        let d = f(0.2, false);
        let best = best_of(&[(4, &a), (12, &d)]).unwrap();
        assert_eq!(best.0, 12);
        assert!(!best.1.converged);
        assert!(best_of(&[]).is_none());
    }
}
