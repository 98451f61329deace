//! `--preset sha`: SHA-NI instruction costs, whether they share execution pipes, and the
//! SHA-256 lower bounds they imply.
//!
//! Instruction mix of one 64-byte block ([`BLOCK_MIX`], the sequence of
//! `tma_workloads::sha256`'s SHA-NI kernels): 32 SHA256RNDS2, 12 SHA256MSG1, 12 SHA256MSG2,
//! 30 PADDD (16 W+K, 12 in the message schedule, 2 feed-forward), 12 PALIGNR (schedule) and
//! 4 PSHUFB (byte order of the message words).
//!
//! One stream (latency):
//! * round chain: round pair k reads the state produced by pair k-1 as its source operand
//!   (pair 2->1) and the state of pair k-2 as its destination (pair 1->1), so the rounds need at
//!   least `max(32 x lat(2->1), 16 x lat(1->1))` cycles;
//! * message-schedule chain: each of the 12 schedule steps is SHA256MSG2 (1->1 latency) plus one
//!   dependent PADDD (taken as 1 cycle);
//! * one stream = the larger of the two chains.
//!
//! Interleaved streams (independent messages, throughput), from measured figures only:
//! * `tp(x)`: each instruction alone, independent copies; `alone(x) = n(x) x tp(x)` cycles per
//!   block if nothing else ran;
//! * sharing: the throughput of the mixed body `a; b` (one of each, independent copies) is
//!   `max(tp(a), tp(b))` when they run on separate pipes and `tp(a) + tp(b)` when they compete
//!   for one; `share(a, b) = (mixed - max) / min`, clamped to 0..1, is where it lies;
//! * the pipe of each SHA instruction S (SHA256RNDS2, MSG1, MSG2): `alone(S) + sum over x of
//!   share(S, x) x alone(x)` (every other instruction of the mix adds the part of its cost that
//!   it takes from S's pipe);
//! * all three SHA instructions together: the mixed triple `rnds2; msg1; msg2` measured the same
//!   way, `max(alone) + share x (sum - max)`;
//! * vector issue: every instruction of the mix needs a vector pipe, and the fastest one (PADDD)
//!   shows how many there are: `total instructions x tp(paddd)`;
//! * the latency chains: a stream's blocks are serial, so K interleaved streams need at least
//!   the one-stream bound / K cycles per block and stream.
//!
//! The interleaved bound is the largest of these lower-bound terms; the derivation names the
//! one that binds. Every term is a lower bound only if the model is right, so each is checked
//! against what was measured: a term that a measured figure of the same run beats was not a
//! lower bound, is said to be so ([`Beaten`]), and leaves the bound (here the block body below;
//! the kernels in [`crate::sha_bound::judge`]). No share of a bound is ever over 100%.
//!
//! A reference point, not a bound: the block mix measured as one body ([`block_body`]). The pair
//! model sees two or three kinds of instruction at a time, not the whole mix at once, so the
//! preset also measures one body that holds every instruction of one block in its real
//! proportions, interleaved evenly, each writing one of 14 destination registers (every kind
//! spread over them) from `xmm2` (never written), and before each SHA256RNDS2 the load of its
//! W+K operand into `xmm0` (`movdqa` of 16 bytes for the first of a four-round group, `movq` of
//! the upper 8 for the second, as the kernels do). It is measured at 4 and 8 copies per loop
//! (not 64 and 128: at 134 instructions a copy, that many would time the front end fetching the
//! loop from L2, not the execution pipes). It is one straightforward schedule of the mix, so it
//! says what such a schedule runs at; a kernel with a better schedule can run faster (a
//! 4-stream kernel did, on a Zen 4), so it is never the bound. It does check the terms: a term
//! above it is beaten.

use serde::{Deserialize, Serialize};

use crate::{bench, BenchError, FormReport, Options, Source};

/// The SHA forms measured by the preset: SHA-256 always, SHA-1 too (same CPUID bit, SHA).
pub const SHA_FORMS: [&str; 7] = [
    "sha256rnds2 xmm1, xmm2",
    "sha256msg1 xmm1, xmm2",
    "sha256msg2 xmm1, xmm2",
    "sha1rnds4 xmm1, xmm2, 0",
    "sha1nexte xmm1, xmm2",
    "sha1msg1 xmm1, xmm2",
    "sha1msg2 xmm1, xmm2",
];

/// An instruction of the SHA-256 block mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShaOp {
    Rnds2,
    Msg1,
    Msg2,
    Paddd,
    Palignr,
    Pshufb,
}

impl ShaOp {
    /// Mnemonic as printed.
    pub fn name(self) -> &'static str {
        match self {
            ShaOp::Rnds2 => "sha256rnds2",
            ShaOp::Msg1 => "sha256msg1",
            ShaOp::Msg2 => "sha256msg2",
            ShaOp::Paddd => "paddd",
            ShaOp::Palignr => "palignr",
            ShaOp::Pshufb => "pshufb",
        }
    }

    /// The form measured alone (`tma bench` syntax).
    pub fn alone_form(self) -> &'static str {
        match self {
            ShaOp::Rnds2 => SHA_FORMS[0],
            ShaOp::Msg1 => SHA_FORMS[1],
            ShaOp::Msg2 => SHA_FORMS[2],
            ShaOp::Paddd => "paddd xmm1, xmm2",
            ShaOp::Palignr => "palignr xmm1, xmm2, 4",
            ShaOp::Pshufb => "pshufb xmm1, xmm2",
        }
    }

    /// The instruction written to `dst` (reading the shared, never written `xmm2`), for mixed
    /// bodies.
    fn with_dst(self, dst: &str) -> String {
        match self {
            ShaOp::Palignr => format!("palignr {dst}, xmm2, 4"),
            _ => format!("{} {dst}, xmm2", self.name()),
        }
    }
}

/// Instructions per 64-byte block of the SHA-NI kernels.
pub const BLOCK_MIX: [(ShaOp, u32); 6] = [
    (ShaOp::Rnds2, 32),
    (ShaOp::Msg1, 12),
    (ShaOp::Msg2, 12),
    (ShaOp::Paddd, 30),
    (ShaOp::Palignr, 12),
    (ShaOp::Pshufb, 4),
];

/// The mixed bodies measured: each SHA-256 instruction with every other instruction of the mix
/// (the three SHA pairs, then each SHA instruction with the add and the two shuffles), and the
/// three SHA instructions together.
pub const MIXES: [&[ShaOp]; 13] = [
    &[ShaOp::Rnds2, ShaOp::Msg1],
    &[ShaOp::Rnds2, ShaOp::Msg2],
    &[ShaOp::Msg1, ShaOp::Msg2],
    &[ShaOp::Rnds2, ShaOp::Msg1, ShaOp::Msg2],
    &[ShaOp::Rnds2, ShaOp::Paddd],
    &[ShaOp::Rnds2, ShaOp::Palignr],
    &[ShaOp::Rnds2, ShaOp::Pshufb],
    &[ShaOp::Msg1, ShaOp::Paddd],
    &[ShaOp::Msg1, ShaOp::Palignr],
    &[ShaOp::Msg1, ShaOp::Pshufb],
    &[ShaOp::Msg2, ShaOp::Paddd],
    &[ShaOp::Msg2, ShaOp::Palignr],
    &[ShaOp::Msg2, ShaOp::Pshufb],
];

/// Destination registers of [`block_body`], used in turn: every xmm register but `xmm0` (the
/// W+K operand SHA256RNDS2 reads implicitly) and `xmm2` (the shared source, never written).
const BODY_DST: [&str; 14] = [
    "xmm1", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
    "xmm13", "xmm14", "xmm15",
];

/// The two unroll counts (copies per loop) [`block_body`] is measured at: few, because a copy
/// is 134 instructions and 64 or 128 of them would not fit the op cache or L1I.
pub const BLOCK_BODY_UNROLL: (usize, usize) = (4, 8);

/// One 64-byte block's instruction mix as one body of independent instructions: the
/// instructions of [`BLOCK_MIX`] interleaved evenly (at each position, the instruction furthest
/// behind its share; the first of [`BLOCK_MIX`] on a tie), each writing the register of
/// `BODY_DST` that has the fewest of its kind so far (the least recently written on a tie), and
/// reading its destination (the SSE forms are destructive) and `xmm2`. Before the `g`-th
/// SHA256RNDS2, its W+K operand is loaded into `xmm0` from the buffer `rbx` points at: the 16
/// bytes of group `g / 2` for the first round pair of a group, the upper 8 for the second.
pub fn block_body() -> String {
    let total: u32 = BLOCK_MIX.iter().map(|(_, n)| n).sum();
    let mut done = [0u32; BLOCK_MIX.len()];
    let mut out = Vec::new();
    let mut rnds2 = 0;
    let mut per_reg = [[0u32; BODY_DST.len()]; BLOCK_MIX.len()];
    let mut last = [0u32; BODY_DST.len()];
    for i in 0..total {
        // Deficit of each instruction at position i: (i + 1) x n / total - done, compared as
        // integers (times total).
        let (k, _) = BLOCK_MIX
            .iter()
            .enumerate()
            .map(|(k, (_, n))| (k, i64::from((i + 1) * n) - i64::from(done[k] * total)))
            .fold((0, i64::MIN), |best, c| if c.1 > best.1 { c } else { best });
        done[k] += 1;
        let op = BLOCK_MIX[k].0;
        if op == ShaOp::Rnds2 {
            out.push(if rnds2 % 2 == 0 {
                format!("movdqa xmm0, [rbx+{}]", 16 * (rnds2 / 2))
            } else {
                format!("movq xmm0, [rbx+{}]", 16 * (rnds2 / 2) + 8)
            });
            rnds2 += 1;
        }
        // The register with the fewest of this instruction so far, the least recently written
        // of those: each register's chain gets its share of every kind (at most 3 SHA256RNDS2).
        let r = (0..BODY_DST.len())
            .min_by_key(|&r| (per_reg[k][r], last[r]))
            .expect("BODY_DST is not empty");
        per_reg[k][r] += 1;
        last[r] = i + 1;
        out.push(op.with_dst(BODY_DST[r]));
    }
    out.join("; ")
}

/// Name of the reference point [`block_body`] measures (not a bound term).
pub const BLOCK_BODY: &str = "the block mix measured as one body";

/// The SHA-256 instructions whose pipes the model follows.
const SHA_OPS: [ShaOp; 3] = [ShaOp::Rnds2, ShaOp::Msg1, ShaOp::Msg2];

/// The body of a mixed measurement: one of each instruction, each with its own destination.
pub fn mix_body(ops: &[ShaOp]) -> String {
    const DST: [&str; 3] = ["xmm1", "xmm3", "xmm4"];
    ops.iter()
        .zip(DST)
        .map(|(op, d)| op.with_dst(d))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One instruction of the mix: its count and cost alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixTerm {
    pub op: ShaOp,
    pub per_block: u32,
    /// Reciprocal throughput alone, cycles.
    pub tp: f64,
    /// `per_block x tp`: cycles per block if nothing else ran.
    pub cycles: f64,
}

/// A measured mixed body and what it says about pipe sharing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sharing {
    pub ops: Vec<ShaOp>,
    pub body: String,
    /// Cycles per copy of the mixed body.
    pub mixed: f64,
    /// Expected if the instructions use separate pipes: the largest throughput alone.
    pub separate: f64,
    /// Expected if they compete for one pipe: the sum of the throughputs alone.
    pub shared: f64,
    /// `(mixed - separate) / (shared - separate)`, clamped to 0..1.
    pub share: f64,
}

/// Measured inputs of the model (cycles).
#[derive(Debug, Clone, PartialEq)]
pub struct ShaFigures {
    pub rnds2_lat_src: f64,
    pub rnds2_lat_dst: f64,
    pub msg2_lat: f64,
    /// Reciprocal throughput alone, for every instruction of [`BLOCK_MIX`].
    pub tp: Vec<(ShaOp, f64)>,
    /// Cycles per copy of each mixed body of [`MIXES`] that was measured.
    pub mixed: Vec<(Vec<ShaOp>, f64)>,
    /// Cycles per copy of [`block_body`] (one block's mix as one body), when measured.
    pub block_body: Option<f64>,
}

/// One lower-bound term of the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundTerm {
    pub name: String,
    /// Cycles per 64-byte block (and stream, for interleaved streams).
    pub cycles: f64,
    /// How it was computed, with the figures.
    pub formula: String,
}

/// A measured figure that is no bound: what one straightforward schedule of the mix runs at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub name: String,
    /// Cycles per 64-byte block.
    pub cycles: f64,
    /// What was measured.
    pub formula: String,
}

/// A term of the model that a measured figure of the same run beat: it was not a lower bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Beaten {
    /// The term as the model computed it (for a latency chain: per block and stream at the
    /// beating figure's stream count).
    pub term: BoundTerm,
    /// The measured figure that ran faster.
    pub by: String,
    /// Its cycles per block (and stream).
    pub measured: f64,
}

impl Beaten {
    /// The sentence every output prints for it.
    pub fn message(&self) -> String {
        format!(
            "the model's term {} ({:.1} cycles/block = {:.3} cycles/byte) was beaten by {} \
             ({:.1} cycles/block = {:.3} cycles/byte): it is not a lower bound",
            self.term.name,
            self.term.cycles,
            self.term.cycles / 64.0,
            self.by,
            self.measured,
            self.measured / 64.0
        )
    }
}

/// The terms of `terms` that the figure `by` (cycles per block) beats, taken out of `terms`.
pub(crate) fn take_beaten(terms: &mut Vec<BoundTerm>, by: &str, measured: f64) -> Vec<Beaten> {
    let (beaten, kept): (Vec<_>, Vec<_>) = std::mem::take(terms)
        .into_iter()
        .partition(|t| measured.is_finite() && measured > 0.0 && t.cycles > measured);
    *terms = kept;
    beaten
        .into_iter()
        .map(|term| Beaten {
            term,
            by: by.to_string(),
            measured,
        })
        .collect()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShaBounds {
    pub rnds2_lat_src: f64,
    pub rnds2_lat_dst: f64,
    pub rnds2_tp: f64,
    pub msg1_tp: f64,
    pub msg2_lat: f64,
    pub msg2_tp: f64,
    pub round_chain_cycles: f64,
    pub schedule_chain_cycles: f64,
    /// Cycles per 64-byte block, one stream.
    pub one_stream_cycles_per_block: f64,
    /// Cycles per 64-byte block with many interleaved streams: the largest of `terms`.
    pub interleaved_cycles_per_block: f64,
    /// Name of the term that binds.
    pub interleaved_binding: String,
    pub mix: Vec<MixTerm>,
    pub sharing: Vec<Sharing>,
    /// The throughput terms that hold: lower bounds for any number of streams. The latency
    /// chain is `one_stream_cycles_per_block`, divided by the streams.
    pub terms: Vec<BoundTerm>,
    /// The terms a figure of this run beat (the block body): not lower bounds, not in `terms`.
    #[serde(default)]
    pub beaten: Vec<Beaten>,
    /// What one straightforward schedule of the mix runs at (the block body): a reference
    /// point, not a bound.
    #[serde(default)]
    pub reference: Option<Reference>,
    /// The derivation, one line each, as printed by `tma bench --preset sha` and `tma demo -v`.
    pub derivation: Vec<String>,
    pub model: String,
}

impl ShaBounds {
    pub fn one_stream_cycles_per_byte(&self) -> f64 {
        self.one_stream_cycles_per_block / 64.0
    }
    pub fn interleaved_cycles_per_byte(&self) -> f64 {
        self.interleaved_cycles_per_block / 64.0
    }
}

/// The largest term; on a tie the first one (the simpler explanation).
pub(crate) fn largest(terms: &[BoundTerm]) -> Option<&BoundTerm> {
    terms
        .iter()
        .reduce(|best, t| if t.cycles > best.cycles { t } else { best })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShaReport {
    pub forms: Vec<FormReport>,
    pub bounds: ShaBounds,
    /// The measured inputs of the bounds that tma did not accept (unconverged or unconfirmed
    /// on a noisy host). Then the bounds are what this run measured, likely too high, and a
    /// kernel's share "of the bound" is not a figure to trust.
    #[serde(default)]
    pub unconfirmed: Vec<String>,
}

fn pair_lat(f: &FormReport, pair: &str) -> Option<f64> {
    f.latency
        .iter()
        .find(|p| p.pair == pair)
        .and_then(|p| p.figures.first())
        .map(|x| x.median)
}

/// Errors of the pure derivation: a figure the model needs is missing or not a positive number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("--preset sha: the throughput of {0} alone is missing or not positive")]
    MissingTp(&'static str),
    #[error(
        "--preset sha: the block mix measured as one body ({0:.1} cycles/block) ran faster than \
         every term of the model, each instruction alone included: the figures are inconsistent \
         (measure again on a quieter machine)"
    )]
    EveryTermBeaten(f64),
}

/// Compute the bounds from measured figures (pure; see the module docs for the model).
pub fn bounds(m: &ShaFigures) -> Result<ShaBounds, ModelError> {
    let tp = |op: ShaOp| {
        m.tp.iter()
            .find(|(o, _)| *o == op)
            .map(|(_, t)| *t)
            .filter(|t| t.is_finite() && *t > 0.0)
            .ok_or(ModelError::MissingTp(op.name()))
    };
    let mut mix = Vec::new();
    for (op, n) in BLOCK_MIX {
        let t = tp(op)?;
        mix.push(MixTerm {
            op,
            per_block: n,
            tp: t,
            cycles: f64::from(n) * t,
        });
    }
    let alone = |op: ShaOp| mix.iter().find(|x| x.op == op).map_or(0.0, |x| x.cycles);

    // Sharing, per measured mixed body.
    let mut sharing = Vec::new();
    for (ops, mixed) in &m.mixed {
        let ts: Vec<f64> = ops.iter().map(|&o| tp(o)).collect::<Result<_, _>>()?;
        let separate = ts.iter().copied().fold(0.0, f64::max);
        let shared: f64 = ts.iter().sum();
        let share = if shared > separate {
            ((mixed - separate) / (shared - separate)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        sharing.push(Sharing {
            ops: ops.clone(),
            body: mix_body(ops),
            mixed: *mixed,
            separate,
            shared,
            share,
        });
    }
    let share_of = |ops: &[ShaOp]| {
        sharing
            .iter()
            .find(|s| s.ops.as_slice() == ops)
            .map(|s| s.share)
    };

    let mut terms = Vec::new();
    for x in &mix {
        terms.push(BoundTerm {
            name: format!("{} alone", x.op.name()),
            cycles: x.cycles,
            formula: format!("{} x {:.3}", x.per_block, x.tp),
        });
    }
    // Each SHA instruction's pipe: its own cost plus what each other instruction takes from it.
    let share_pair = |a: ShaOp, b: ShaOp| share_of(&[a, b]).or_else(|| share_of(&[b, a]));
    for op in SHA_OPS {
        let mut cycles = alone(op);
        let mut parts = vec![format!("{cycles:.1}")];
        for x in mix.iter().filter(|x| x.op != op) {
            if let Some(s) = share_pair(op, x.op) {
                cycles += s * x.cycles;
                parts.push(format!("{s:.2} x {:.1} ({})", x.cycles, x.op.name()));
            }
        }
        terms.push(BoundTerm {
            name: format!("{}'s pipe", op.name()),
            cycles,
            formula: parts.join(" + "),
        });
    }
    if let Some(s) = share_of(&SHA_OPS) {
        let a: Vec<f64> = SHA_OPS.iter().map(|&o| alone(o)).collect();
        let max = a.iter().copied().fold(0.0, f64::max);
        let sum: f64 = a.iter().sum();
        terms.push(BoundTerm {
            name: "sha256rnds2, msg1 and msg2 together".into(),
            cycles: max + s * (sum - max),
            formula: format!("{max:.1} + {s:.2} x {:.1}", sum - max),
        });
    }
    let total: u32 = BLOCK_MIX.iter().map(|(_, n)| n).sum();
    let paddd = tp(ShaOp::Paddd)?;
    terms.push(BoundTerm {
        name: "vector issue".into(),
        cycles: f64::from(total) * paddd,
        formula: format!(
            "{total} instructions x {paddd:.3} (paddd: {:.1} vector pipes)",
            1.0 / paddd
        ),
    });
    // The block body is a reference point; every term above it was no lower bound.
    let reference = m.block_body.map(|c| Reference {
        name: BLOCK_BODY.into(),
        cycles: c,
        formula: format!(
            "{total} instructions + {} W+K loads in one body, measured",
            BLOCK_MIX[0].1
        ),
    });
    let beaten = match &reference {
        Some(r) => take_beaten(&mut terms, &r.name, r.cycles),
        None => Vec::new(),
    };
    // Each SHA instruction alone stays in `terms` unless the body beat it too: then nothing
    // is left to bind but an instruction's own throughput, which the body measured faster.
    let Some(binding) = largest(&terms) else {
        return Err(ModelError::EveryTermBeaten(
            reference.map_or(0.0, |r| r.cycles),
        ));
    };
    let interleaved = binding.cycles;
    let interleaved_binding = binding.name.clone();

    let round_chain = (32.0 * m.rnds2_lat_src).max(16.0 * m.rnds2_lat_dst);
    let schedule_chain = 12.0 * (m.msg2_lat + 1.0);
    let one_stream = round_chain.max(schedule_chain);

    let mut d = Vec::new();
    d.push(format!(
        "one stream: round chain max(32 x {:.2} (rnds2 2->1), 16 x {:.2} (1->1)) = {round_chain:.1}; \
         schedule chain 12 x ({:.2} (msg2) + 1) = {schedule_chain:.1}; bound {one_stream:.1} cycles/block = {:.3} cycles/byte",
        m.rnds2_lat_src,
        m.rnds2_lat_dst,
        m.msg2_lat,
        one_stream / 64.0
    ));
    d.push(format!(
        "block mix: {}",
        mix.iter()
            .map(|x| format!("{} {}", x.per_block, x.op.name()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for s in &sharing {
        let verdict = if s.share < 0.25 {
            "separate pipes"
        } else if s.share > 0.75 {
            "one shared pipe"
        } else {
            "partly shared"
        };
        d.push(format!(
            "sharing: `{}` {:.3} cycles vs {:.3} if separate, {:.3} if shared: share {:.2} ({verdict})",
            s.body, s.mixed, s.separate, s.shared, s.share
        ));
    }
    if let Some(c) = m.block_body {
        d.push(format!(
            "block mix as one body (a reference point, not a bound): the {total} instructions of \
             one block interleaved in their proportions, each writing one of {} registers in turn \
             from xmm2 (never written), and a W+K load into xmm0 before each sha256rnds2 ({}, \
             ...): {c:.1} cycles per copy = per block",
            BODY_DST.len(),
            block_body()
                .split("; ")
                .take(4)
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    for t in &terms {
        d.push(format!(
            "term {}: {} = {:.1} cycles/block",
            t.name, t.formula, t.cycles
        ));
    }
    for b in &beaten {
        d.push(format!(
            "term {}: {} = {:.1} cycles/block, NOT A LOWER BOUND: {}",
            b.term.name,
            b.term.formula,
            b.term.cycles,
            b.message()
        ));
    }
    // Below this many streams the latency chain is above the throughput terms.
    let chain_until = (one_stream / interleaved).ceil();
    d.push(format!(
        "latency chains: K interleaved streams need at least {one_stream:.1} / K cycles per block \
         and stream (the one-stream bound); above the throughput terms below {chain_until:.0} \
         streams"
    ));
    if let Some(r) = &reference {
        d.push(format!(
            "reference, not a bound: a straightforward schedule of this mix ({}) runs at {:.1} \
             cycles/block = {:.3} cycles/byte, {:.0}% of it above the bound; a kernel may run \
             faster with a better schedule",
            r.name,
            r.cycles,
            r.cycles / 64.0,
            100.0 * (r.cycles / interleaved - 1.0)
        ));
    }
    d.push(format!(
        "interleaved bound: {interleaved:.1} cycles/block = {:.3} cycles/byte, bound by \
         {interleaved_binding} (the largest lower-bound term)",
        interleaved / 64.0
    ));

    Ok(ShaBounds {
        rnds2_lat_src: m.rnds2_lat_src,
        rnds2_lat_dst: m.rnds2_lat_dst,
        rnds2_tp: tp(ShaOp::Rnds2)?,
        msg1_tp: tp(ShaOp::Msg1)?,
        msg2_lat: m.msg2_lat,
        msg2_tp: tp(ShaOp::Msg2)?,
        round_chain_cycles: round_chain,
        schedule_chain_cycles: schedule_chain,
        one_stream_cycles_per_block: one_stream,
        interleaved_cycles_per_block: interleaved,
        interleaved_binding,
        mix,
        sharing,
        terms,
        beaten,
        reference,
        derivation: d,
        model:
            "one stream = max(32 x lat(rnds2 2->1), 16 x lat(rnds2 1->1), 12 x (lat(msg2) + 1)); \
                interleaved = the largest of the lower-bound terms: each instruction alone (count \
                x tp), the pipe of each SHA instruction S (its cost + share(S, x) x cost of x for \
                every other instruction), the three SHA instructions together (max + share x \
                rest), vector issue (all instructions x tp(paddd)); K streams: also one stream / K \
                (the latency chains); share = (mixed - max tp) / (sum tp - max tp) from the \
                measured mixed bodies; stores not counted; a term that a measured figure beats \
                (the block mix measured as one body, a kernel) is not a lower bound and is \
                dropped; the block mix measured as one body is a reference point, not a bound"
                .into(),
    })
}

/// Measure the SHA-NI instructions, the adds and shuffles, the mixed bodies, and derive the
/// SHA-256 lower bounds. SHA-1 forms are measured too (they share the SHA CPUID bit).
pub fn preset_sha(opts: &Options) -> Result<ShaReport, BenchError> {
    preset_sha_into(opts, &mut Vec::new())
}

/// [`preset_sha`], each form measured pushed to `forms` as it is, so that the forms measured
/// before an error (an interruption) are still there.
pub fn preset_sha_into(
    opts: &Options,
    forms: &mut Vec<FormReport>,
) -> Result<ShaReport, BenchError> {
    for f in SHA_FORMS {
        forms.push(bench(&Source::Text(f.to_string()), opts)?);
    }
    let need = |v: Option<f64>, what: &str| {
        v.ok_or_else(|| BenchError::Measurement(format!("--preset sha: {what} was not measured")))
    };
    // Adds and shuffles, and the mixed bodies: throughput only. SHA256RNDS2 needs 4 chains in
    // flight (latency 4, one per cycle), so a mixed body is also given 6, as many as 16 xmm
    // registers allow for a pair: with no slack, any conflict would show as the pair's cost.
    let tp_only = Options {
        latency: false,
        throughput: true,
        ..opts.clone()
    };
    let mixed_opts = Options {
        chains: vec![4, 6],
        ..tp_only.clone()
    };
    let mut tp = Vec::new();
    for (op, _) in BLOCK_MIX {
        let form = match SHA_FORMS.iter().position(|f| *f == op.alone_form()) {
            Some(i) => &forms[i],
            None => {
                forms.push(bench(&Source::Text(op.alone_form().into()), &tp_only)?);
                forms.last().expect("just pushed")
            }
        };
        let t = need(
            form.throughput_summary(),
            &format!("{} throughput", op.name()),
        )?;
        tp.push((op, t));
    }
    let mut mixed = Vec::new();
    for ops in MIXES {
        let body = mix_body(ops);
        let f = bench(&Source::Text(body.clone()), &mixed_opts)?;
        mixed.push((
            ops.to_vec(),
            need(f.throughput_summary(), &format!("`{body}` throughput"))?,
        ));
        forms.push(f);
    }
    // One block's whole mix as one body: a single chain of copies (its registers already form
    // 14 short chains), few copies per loop (see BLOCK_BODY_UNROLL).
    let body_opts = Options {
        chains: vec![1],
        method: crate::Method {
            unroll: BLOCK_BODY_UNROLL,
            ..tp_only.method.clone()
        },
        ..tp_only.clone()
    };
    let f = bench(&Source::Text(block_body()), &body_opts)?;
    let block = need(f.throughput_summary(), "the block mix body's throughput")?;
    forms.push(f);
    let figures = ShaFigures {
        rnds2_lat_src: need(pair_lat(&forms[0], "2->1"), "sha256rnds2 latency 2->1")?,
        rnds2_lat_dst: need(pair_lat(&forms[0], "1->1"), "sha256rnds2 latency 1->1")?,
        msg2_lat: need(pair_lat(&forms[2], "1->1"), "sha256msg2 latency")?,
        tp,
        mixed,
        block_body: Some(block),
    };
    let b = bounds(&figures).map_err(|e| BenchError::Measurement(e.to_string()))?;
    let unconfirmed = unconfirmed_inputs(forms);
    Ok(ShaReport {
        forms: forms.clone(),
        bounds: b,
        unconfirmed,
    })
}

/// The forms whose figures the bounds use and tma did not accept: the latency pairs of every
/// form and its best throughput (the SHA-1 forms are reported, not used).
fn unconfirmed_inputs(forms: &[FormReport]) -> Vec<String> {
    forms
        .iter()
        .filter(|f| !f.input.starts_with("sha1"))
        .filter(|f| {
            let lat = f
                .latency
                .iter()
                .filter_map(|p| p.figures.first())
                .any(|x| !x.converged);
            let tp = f
                .throughput
                .as_ref()
                .and_then(|t| t.best.first())
                .is_some_and(|x| !x.converged);
            lat || tp
        })
        .map(|f| f.input.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures with every instruction alone at `tp` and the mixed bodies at `mixed(ops)`.
    fn figures(tp: [f64; 6], mixed: impl Fn(&[f64]) -> f64) -> ShaFigures {
        let tp: Vec<(ShaOp, f64)> = BLOCK_MIX.iter().map(|(o, _)| *o).zip(tp).collect();
        let t = |o: ShaOp| tp.iter().find(|(x, _)| *x == o).unwrap().1;
        let mixed = MIXES
            .iter()
            .map(|ops| {
                let ts: Vec<f64> = ops.iter().map(|&o| t(o)).collect();
                (ops.to_vec(), mixed(&ts))
            })
            .collect();
        ShaFigures {
            rnds2_lat_src: 4.0,
            rnds2_lat_dst: 4.0,
            msg2_lat: 3.0,
            tp,
            mixed,
            block_body: None,
        }
    }

    fn term(b: &ShaBounds, name: &str) -> f64 {
        b.terms.iter().find(|t| t.name == name).unwrap().cycles
    }

    #[test]
    fn separate_pipes_leave_rnds2_alone() {
        // rnds2 1, msg1 0.5, msg2 1, paddd 0.25, palignr 0.5, pshufb 0.5; every mix runs at
        // the slowest of its instructions: nothing is shared.
        let f = figures([1.0, 0.5, 1.0, 0.25, 0.5, 0.5], |ts| {
            ts.iter().copied().fold(0.0, f64::max)
        });
        let b = bounds(&f).unwrap();
        assert!(b.sharing.iter().all(|s| s.share == 0.0));
        assert_eq!(term(&b, "sha256rnds2's pipe"), 32.0);
        assert_eq!(term(&b, "sha256msg2's pipe"), 12.0);
        assert_eq!(term(&b, "sha256msg1's pipe"), 6.0);
        // 102 instructions on 4 vector pipes.
        assert_eq!(term(&b, "vector issue"), 25.5);
        assert_eq!(b.interleaved_cycles_per_block, 32.0);
        // Nothing shares SHA256RNDS2's pipe: it binds alone (first of the equal terms).
        assert_eq!(b.interleaved_binding, "sha256rnds2 alone");
        assert_eq!(b.one_stream_cycles_per_block, 128.0);
        assert_eq!(b.round_chain_cycles, 128.0);
        assert_eq!(b.schedule_chain_cycles, 48.0);
        assert_eq!(b.one_stream_cycles_per_byte(), 2.0);
        assert_eq!(b.interleaved_cycles_per_byte(), 0.5);
    }

    #[test]
    fn one_shared_pipe_adds_up() {
        // Every mix costs the sum of its instructions: the SHA instructions and the adds and
        // shuffles all compete for SHA256RNDS2's pipe.
        let f = figures([1.0, 0.5, 1.0, 0.25, 0.5, 0.5], |ts| ts.iter().sum());
        let b = bounds(&f).unwrap();
        assert!(b.sharing.iter().all(|s| s.share == 1.0));
        // 32 + 6 (msg1) + 12 (msg2) + 7.5 (paddd) + 6 (palignr) + 2 (pshufb), from every SHA
        // instruction's side.
        assert_eq!(term(&b, "sha256rnds2's pipe"), 65.5);
        assert_eq!(term(&b, "sha256msg1's pipe"), 65.5);
        assert_eq!(term(&b, "sha256msg2's pipe"), 65.5);
        assert_eq!(term(&b, "sha256rnds2, msg1 and msg2 together"), 50.0);
        assert_eq!(b.interleaved_cycles_per_block, 65.5);
        assert!(b
            .derivation
            .iter()
            .any(|l| l.contains("one shared pipe") && l.contains("sha256msg2")));
        assert!(b
            .derivation
            .last()
            .unwrap()
            .contains("bound by sha256rnds2's pipe"));
    }

    #[test]
    fn partial_sharing_interpolates() {
        // Only msg2 shares with rnds2, half the time; msg1 and msg2 share fully with each other,
        // and both are slow: their pipe binds.
        let tp = [1.0, 2.0, 2.0, 0.25, 0.5, 0.5];
        let mut f = figures(tp, |ts| ts.iter().copied().fold(0.0, f64::max));
        for (ops, m) in &mut f.mixed {
            if ops.as_slice() == [ShaOp::Rnds2, ShaOp::Msg2] {
                *m = 2.5; // max 2 + 0.5 x 1
            }
            if ops.as_slice() == [ShaOp::Msg1, ShaOp::Msg2] {
                *m = 4.0;
            }
        }
        let b = bounds(&f).unwrap();
        let s = |ops: &[ShaOp]| b.sharing.iter().find(|s| s.ops == ops).unwrap().share;
        assert_eq!(s(&[ShaOp::Rnds2, ShaOp::Msg2]), 0.5);
        assert_eq!(s(&[ShaOp::Msg1, ShaOp::Msg2]), 1.0);
        assert_eq!(term(&b, "sha256rnds2's pipe"), 32.0 + 0.5 * 24.0);
        // msg1's pipe: 24 + 24 (msg2, shared fully); msg2's: 24 + 24 (msg1) + 0.5 x 32 (rnds2).
        assert_eq!(term(&b, "sha256msg1's pipe"), 48.0);
        assert_eq!(term(&b, "sha256msg2's pipe"), 64.0);
        assert_eq!(b.interleaved_cycles_per_block, 64.0);
        assert_eq!(b.interleaved_binding, "sha256msg2's pipe");
        // A mixed body faster than its slowest instruction (noise) counts as separate.
        let mut g = figures(tp, |ts| ts.iter().copied().fold(0.0, f64::max) * 0.9);
        g.mixed.truncate(1);
        let b = bounds(&g).unwrap();
        assert_eq!(b.sharing[0].share, 0.0);
    }

    #[test]
    fn the_block_body_is_a_reference_point_not_the_bound() {
        // Separate pipes everywhere (the pairs say 32 cycles), and the whole mix measured as one
        // body takes 44: the bound stays the largest lower-bound term, and the body is shown as
        // what a straightforward schedule runs at.
        let mut f = figures([1.0, 0.5, 1.0, 0.25, 0.5, 0.5], |ts| {
            ts.iter().copied().fold(0.0, f64::max)
        });
        f.block_body = Some(44.0);
        let b = bounds(&f).unwrap();
        assert_eq!(b.interleaved_cycles_per_block, 32.0);
        assert_eq!(b.interleaved_binding, "sha256rnds2 alone");
        assert!(b.terms.iter().all(|t| t.name != BLOCK_BODY));
        assert!(b.beaten.is_empty());
        let r = b.reference.as_ref().unwrap();
        assert_eq!((r.name.as_str(), r.cycles), (BLOCK_BODY, 44.0));
        assert!(b.derivation.iter().any(|l| l
            .starts_with("block mix as one body (a reference point, not a bound)")
            && l.contains("44.0 cycles per copy")
            && l.contains("movdqa xmm0, [rbx+0]; sha256rnds2 xmm1, xmm2")));
        assert!(b.derivation.iter().any(|l| l.starts_with(
            "reference, not a bound: a straightforward schedule of this mix (the block mix \
             measured as one body) runs at 44.0 cycles/block = 0.688 cycles/byte, 38% of it above \
             the bound"
        )));
        let last = b.derivation.last().unwrap();
        assert!(last.starts_with("interleaved bound: 32.0 cycles/block = 0.500 cycles/byte, bound by sha256rnds2 alone"), "{last}");
        // Not measured: no reference, no line.
        f.block_body = None;
        let b = bounds(&f).unwrap();
        assert!(b.reference.is_none());
        assert!(b
            .derivation
            .iter()
            .all(|l| !l.starts_with("block mix as one body") && !l.starts_with("reference")));
    }

    #[test]
    fn a_term_the_block_body_beats_is_no_lower_bound() {
        // One shared pipe by the pairs (65.5 cycles for each SHA instruction's pipe), but the
        // whole mix ran at 45: the pipe terms were no lower bounds. They leave the bound, each
        // said to be beaten; the largest term left binds.
        let mut f = figures([1.0, 0.5, 1.0, 0.25, 0.5, 0.5], |ts| ts.iter().sum());
        f.block_body = Some(45.0);
        let b = bounds(&f).unwrap();
        let beaten: Vec<&str> = b.beaten.iter().map(|x| x.term.name.as_str()).collect();
        assert_eq!(
            beaten,
            [
                "sha256rnds2's pipe",
                "sha256msg1's pipe",
                "sha256msg2's pipe",
                "sha256rnds2, msg1 and msg2 together"
            ]
        );
        assert!(b
            .beaten
            .iter()
            .all(|x| x.by == BLOCK_BODY && x.measured == 45.0));
        assert_eq!(b.interleaved_cycles_per_block, 32.0);
        assert_eq!(b.interleaved_binding, "sha256rnds2 alone");
        assert!(b.terms.iter().all(|t| t.cycles <= 45.0));
        assert!(b.derivation.iter().any(|l| l.starts_with("term sha256rnds2's pipe: ")
            && l.contains("NOT A LOWER BOUND: the model's term sha256rnds2's pipe (65.5 cycles/block = 1.023 cycles/byte) was beaten by the block mix measured as one body (45.0 cycles/block = 0.703 cycles/byte): it is not a lower bound")));
        // Faster than each instruction alone: nothing is left to bind.
        f.block_body = Some(1.0);
        assert_eq!(bounds(&f).unwrap_err(), ModelError::EveryTermBeaten(1.0));
    }

    #[test]
    fn block_body_holds_one_block_of_independent_instructions() {
        let body = block_body();
        let ins: Vec<&str> = body.split("; ").collect();
        // Every instruction of the mix, in its count, and one W+K load per SHA256RNDS2.
        for (op, n) in BLOCK_MIX {
            let c = ins
                .iter()
                .filter(|i| i.starts_with(&format!("{} ", op.name())))
                .count();
            assert_eq!(c, n as usize, "{}", op.name());
        }
        let loads: Vec<&&str> = ins.iter().filter(|i| i.contains("xmm0, [rbx")).collect();
        assert_eq!(loads.len(), 32);
        assert_eq!(loads[0], &"movdqa xmm0, [rbx+0]");
        assert_eq!(loads[1], &"movq xmm0, [rbx+8]");
        assert_eq!(loads[31], &"movq xmm0, [rbx+248]");
        for (i, w) in ins.windows(2).enumerate() {
            if w[1].starts_with("sha256rnds2") {
                assert!(w[0].contains("xmm0, [rbx"), "no load before {i}: {}", w[1]);
            }
        }
        assert_eq!(ins.len(), 102 + 32);
        // xmm2 is only read; the destinations spread every kind over the 14 others, so no
        // register gets more than its share of the 32 SHA256RNDS2 (3).
        let dsts: Vec<&str> = ins
            .iter()
            .filter(|i| !i.starts_with("mov"))
            .map(|i| i.split([' ', ',']).nth(1).unwrap())
            .collect();
        assert!(dsts.iter().all(|d| *d != "xmm2" && *d != "xmm0"));
        for d in BODY_DST {
            let r = ins
                .iter()
                .filter(|i| i.starts_with(&format!("sha256rnds2 {d},")))
                .count();
            assert!(r <= 3, "{d}: {r}");
        }
        // Evenly interleaved: the four PSHUFB are spread over the body, not bunched.
        let at: Vec<usize> = dsts
            .iter()
            .zip(ins.iter().filter(|i| !i.starts_with("mov")))
            .enumerate()
            .filter(|(_, (_, i))| i.starts_with("pshufb"))
            .map(|(k, _)| k)
            .collect();
        assert!(at.windows(2).all(|w| w[1] - w[0] >= 20), "{at:?}");
    }

    #[test]
    fn missing_or_bad_throughput_is_an_error() {
        let mut f = figures([1.0, 0.5, 1.0, 0.25, 0.5, 0.5], |ts| ts[0]);
        f.tp.retain(|(o, _)| *o != ShaOp::Palignr);
        assert_eq!(bounds(&f).unwrap_err(), ModelError::MissingTp("palignr"));
        let mut f = figures([1.0, 0.5, 1.0, 0.0, 0.5, 0.5], |ts| ts[0]);
        f.mixed.clear();
        assert_eq!(bounds(&f).unwrap_err(), ModelError::MissingTp("paddd"));
    }

    #[test]
    fn mixed_bodies_use_separate_destinations() {
        assert_eq!(
            mix_body(&[ShaOp::Rnds2, ShaOp::Msg1, ShaOp::Msg2]),
            "sha256rnds2 xmm1, xmm2; sha256msg1 xmm3, xmm2; sha256msg2 xmm4, xmm2"
        );
        assert_eq!(
            mix_body(&[ShaOp::Rnds2, ShaOp::Palignr]),
            "sha256rnds2 xmm1, xmm2; palignr xmm3, xmm2, 4"
        );
    }
}
