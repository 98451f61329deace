//! Instruction microbenchmarks: latency per input->output operand pair and reciprocal
//! throughput, in core cycles, on any x86-64 Linux machine, including VMs without a PMU.
//!
//! Pipeline: Intel-syntax text ([`asm`]) -> concrete iced-x86 instructions -> refusals and
//! CPUID feature check ([`variants`]) -> latency-pair and N-chain throughput variants ([`variants`]) ->
//! harness images at two unroll counts ([`harness`], pure bytes) -> a forked child pinned to
//! one CPU runs them from a W^X buffer with faults caught ([`engine`], `sys`) -> statistics
//! ([`stats`]) -> [`FormReport`]. One measurement is a sequence of stages in `measure`.
//! [`jitloop`] builds one fixed body with the same harness and runs it in the caller's process,
//! for callers that count it with their own counters (`tma doctor --verify`).
//!
//! The `tma bench` command: a clap-free [`BenchConfig`] -> [`run`] (every input of a body,
//! `--bytes`, a `--file` list or a preset, with `--compare` references: [`compare`]) ->
//! [`BenchOutcome`], written as a table or the `tma.bench` JSON document by [`render`].
//!
//! Method (docs/measurements.md has the figures): per-copy cost = (min over trials
//! of the 128-copy run - min over trials of the 64-copy run) / (iterations x 64); iterations
//! auto-sized so a run lasts >= 100k TSC ticks; on the `tsc` clock each repetition is divided by
//! the TSC ticks per core cycle measured right before and after it (the smaller of an
//! `add rax, rax` chain, 1 cycle per add, and an `imul rax, rax` chain / 3: contention can only
//! slow a chain down), and a repetition is rejected when those two calibrations differ by more
//! than 0.2%; the median of
//! 11 accepted repetitions is one independent repetition of the figure. Host noise only adds
//! time, so a figure is accepted when the lowest of its independent repetitions agree within
//! 1%, and the lower is reported ([`stats::agreed`]; a lone unconfirmed low repetition is
//! outvoted only by three agreeing ones); repetitions of all figures of a
//! measurement are taken round-robin (apart in time), at least 2 and at most 10; a figure
//! that never converged is reported as UNCONVERGED with its repetitions (never as a clean
//! number), and throughput chain counts well above the best accepted one stop early.
//! Throughput repetitions are bracketed by a contention sentinel of known cost on the core
//! ([`stats::sentinel_expect`]: 8 chains of `add`, or `vpaddd` for vector bodies) and
//! discarded when it reads off: a tenant sharing the ALUs slows every repetition alike, so
//! agreement alone cannot see it. A throughput check (3 independent imul chains: 1.00 per cycle
//! on every core) marks all throughput figures unconfirmed when the calibration is off for
//! independent work. A
//! self-check (imul chain / add chain = 3 within 1%) must pass before any figure is reported.
//! The `*` mark: the figure is not within 2% of a plausible value (an integer, or 1/n for n up
//! to the core's widest set of identical pipes, [`stats::pipe_count`]).
//!
//! Latency pairs: every register input -> register output of one instruction; the arithmetic
//! flags count as one more operand for instructions that read them (adc, sbb, rcl, cmovcc,
//! setcc), and other read-write general-purpose registers are cut off the chain with
//! `mov reg, spare`. A pair across register files (xmm -> GPR, GPR -> flags...) is closed by a
//! connector instruction of the other direction (`movq`, `vmovq`, `kmovw`, `test`, `setb`); the
//! round trip of the two connectors is timed too and the latency reported as bounds
//! ([`Derived`]: upper = chain - 1, lower = chain - round trip + 1, each connector taking at
//! least one cycle).
//!
//! Throughput: written registers renamed over N chains; implicit registers that an instruction
//! reads or partly writes (mul's rax) are reloaded from a spare before each copy (the moves are
//! timed, so the figure is an upper bound); serializing instructions are refused.
//!
//! Values: `div`/`idiv` and FP division/square root run with a "fast" and a "slow" operand
//! preset ([`DivPreset`], [`FpPreset`]) unless the user set the operands with `--init`
//! ([`parse_init`], which also takes vector registers).
//!
//! Registers: r15 is the loop counter, r14 points at the memory buffer (`--mem`, 1 MiB by
//! default; memory operands `[r14+disp]`), rsp is the stack; bodies may not write any of them.
//!
//! Memory forms, as uops.info measures them: the base registers of memory operands point at
//! the start of the buffer and index registers are 0 (`add rax, [rbx]`); a load into its own
//! base register (`mov rax, [rax]`) is a pointer chase through a ring of pointers over one
//! cache line (L1 load-to-use latency) or over `--mem` bytes in random line order; a store and
//! a load of the same location (`mov [rbx], rax; mov rax, [rbx]`) times store-to-load
//! forwarding; `rm64`-style operand kinds measure the register and the memory source form.
//!
//! Clocks: calibrated `tsc`; `perf` and `rdpmc` (the perf cycles event); `msr` (core counter 0
//! programmed through `/dev/cpu/N/msr` in the parent and read with rdpmc in the child, the
//! previous value restored on every exit path: [`tma_perf::msr`]).

use serde::{Deserialize, Serialize};

pub mod asm;
pub mod clock;
pub mod compare;
pub mod doc;
pub mod engine;
pub mod harness;
pub mod jitloop;
mod measure;
pub mod render;
pub mod sha;
pub mod sha_bound;
pub mod stats;
mod sweep;
mod sys;
pub mod variants;

pub use engine::Method;
pub use sha::{preset_sha, preset_sha_into, ShaBounds, ShaReport};
pub use sweep::{run, BenchConfig, BenchOutcome, Input, InputError, Preset, Progress};

use iced_x86::{Instruction, Register};

/// Errors of `tma bench`, each saying what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error("cannot parse `{text}`: {reason}")]
    Parse { text: String, reason: String },
    #[error("cannot assemble `{text}`: {reason}")]
    Resolve { text: String, reason: String },
    #[error("{text} needs {feature}; this CPU lacks it")]
    MissingFeature { text: String, feature: String },
    #[error("refusing `{text}`: {reason}")]
    Refused { text: String, reason: String },
    #[error("{0}")]
    Fault(String),
    /// `tma bench` assembles and runs x86-64 code; this build is for another architecture.
    #[error("tma bench is x86-64 only: it assembles and runs x86-64 instructions, and this build is for {0}; analysing recordings (tma stat --import, diff, report) works here")]
    X86Only(&'static str),
    #[error("{0}")]
    BadOption(String),
    #[error("calibration self-check failed on the {clock} clock: imul/add chain ratio {ratio:.3}, expected 3.00 within 1%; the clock is too unstable now (another load?), try again or pass --precise")]
    SelfCheck { clock: ClockKind, ratio: f64 },
    #[error("{what} failed: {source}")]
    Os {
        what: String,
        source: std::io::Error,
    },
    #[error("measurement failed: {0}")]
    Measurement(String),
    /// SIGINT or SIGTERM arrived (`tma_sys::signal`): the measurement in progress was dropped.
    #[error("interrupted by {0}")]
    Interrupted(tma_sys::signal::Interrupt),
    /// An input file (`--file`, `--compare`) could not be read.
    #[error("{what}")]
    Read {
        what: String,
        source: std::io::Error,
    },
}

/// Cycle sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ClockKind {
    /// rdtsc, calibrated to core cycles by an add chain.
    Tsc,
    /// PERF_COUNT_HW_CPU_CYCLES read with read(2).
    Perf,
    /// The same counter read in user space with rdpmc.
    Rdpmc,
    /// Core counter 0 programmed through `/dev/cpu/N/msr` with the vendor's unhalted-cycles
    /// event and read with rdpmc ([`tma_perf::msr`]); needs root, the msr driver and
    /// `/sys/bus/event_source/devices/cpu/rdpmc` = 2.
    Msr,
}

impl std::fmt::Display for ClockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClockKind::Tsc => "tsc",
            ClockKind::Perf => "perf",
            ClockKind::Rdpmc => "rdpmc",
            ClockKind::Msr => "msr",
        })
    }
}

/// `--clock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockChoice {
    Auto,
    One(ClockKind),
    All,
}

/// Pair selection (`--pair 2->1`, `--from xmm2 --to xmm1`).
#[derive(Debug, Clone, Default)]
pub struct PairFilter {
    pub pair: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// One parsed `--init` item.
#[derive(Debug, Clone, PartialEq)]
pub enum InitValue {
    /// A general-purpose register (64-bit name) and its value.
    Gpr(Register, u64),
    /// A vector register as named (xmm/ymm/zmm) and the 64 bytes loaded into its zmm slot.
    Vector(Register, Vec<u8>),
}

/// Parse one `--init REG=VALUE` item.
///
/// General-purpose registers take an integer (`rcx=3`, `rdx=0x10`, `rax=-1`).
/// Vector registers (`xmmN`, `ymmN`, `zmmN`) take:
/// - `0x` and hex digits, whose count sets the element width that is broadcast: up to 8 digits
///   a 32-bit lane (`xmm1=0x3f800000` is f32 1.0 in every lane), up to 16 a 64-bit lane
///   (`xmm1=0x3ff0000000000000` is f64 1.0 in every lane), up to 32 a full 128-bit value, up to
///   64 a 256-bit value, up to 128 a 512-bit value; written most significant digit first, as a
///   number (the last digits are lane 0); `_` separators are allowed; a value wider than the
///   named register is an error;
/// - `f32:X` or `f64:X`: the float X broadcast to every 32- or 64-bit lane (`xmm1=f64:1.5`).
///
/// The value is repeated to fill the whole 512-bit register, so wider aliases of the named
/// register see the same pattern. Registers not named keep the default: f32 1.5 in every lane
/// (0x3fc00000; as f64 lanes 0x3fc000003fc00000, about 0.125: normal, never denormal).
pub fn parse_init(spec: &str) -> Result<InitValue, BenchError> {
    let bad = |reason: String| BenchError::BadOption(format!("--init {spec}: {reason}"));
    let Some((r, v)) = spec.split_once('=') else {
        return Err(bad(
            "expected REG=VALUE, e.g. rcx=3 or xmm1=0x3f800000".into()
        ));
    };
    let (r, v) = (r.trim(), v.trim());
    let reg = asm::register_by_name(r).ok_or_else(|| bad(format!("unknown register `{r}`")))?;
    if reg.is_xmm() || reg.is_ymm() || reg.is_zmm() {
        let width = reg.size();
        let lane: Vec<u8> = if let Some(f) = v.strip_prefix("f32:") {
            let x: f32 = f
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{f}` is not a number")))?;
            x.to_le_bytes().to_vec()
        } else if let Some(f) = v.strip_prefix("f64:") {
            let x: f64 = f
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{f}` is not a number")))?;
            x.to_le_bytes().to_vec()
        } else if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            let digits: String = h.chars().filter(|c| *c != '_').collect();
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad(format!("`{v}` is not a hex number")));
            }
            let bytes = match digits.len() {
                0..=8 => 4,
                9..=16 => 8,
                17..=32 => 16,
                33..=64 => 32,
                65..=128 => 64,
                n => return Err(bad(format!("{n} hex digits is more than 512 bits"))),
            };
            if bytes > width {
                return Err(bad(format!(
                    "a {}-bit value does not fit {} ({} bits)",
                    bytes * 8,
                    asm::register_name(reg),
                    width * 8
                )));
            }
            let padded = format!("{digits:0>w$}", w = bytes * 2);
            let mut le: Vec<u8> = (0..bytes)
                .map(|i| u8::from_str_radix(&padded[i * 2..i * 2 + 2], 16).unwrap_or(0))
                .collect();
            le.reverse();
            le
        } else {
            return Err(bad(format!(
                "vector values are hex with 0x (the digit count sets the lane width: 0x3f800000 = 32-bit lanes) or f32:X / f64:X, not `{v}`"
            )));
        };
        let full: Vec<u8> = lane.iter().copied().cycle().take(64).collect();
        return Ok(InitValue::Vector(reg, full));
    }
    if !reg.is_gpr64() {
        return Err(bad(format!(
            "name the 64-bit register (e.g. rcx) or a vector register (xmm/ymm/zmm), not `{r}`"
        )));
    }
    let val = asm::parse_value(v).ok_or_else(|| bad(format!("`{v}` is not a number")))?;
    Ok(InitValue::Gpr(reg, val))
}

/// What to measure and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub latency: bool,
    pub throughput: bool,
    pub pairs: PairFilter,
    /// Independent chain counts swept for throughput.
    pub chains: Vec<usize>,
    pub clock: ClockChoice,
    /// `--init reg=value` for general-purpose registers.
    pub init: Vec<(Register, u64)>,
    /// `--init xmmN=...` (ymm/zmm too): the register's initial bytes, little-endian, 64 bytes
    /// (the value repeated to fill zmmN; see [`parse_init`]).
    pub vec_init: Vec<(Register, Vec<u8>)>,
    pub method: Method,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            latency: true,
            throughput: true,
            pairs: PairFilter::default(),
            chains: vec![1, 2, 4, 8, 12],
            clock: ClockChoice::Auto,
            init: Vec::new(),
            vec_init: Vec::new(),
            method: Method::default(),
        }
    }
}

/// The body to measure.
#[derive(Debug, Clone)]
pub enum Source {
    /// Intel syntax, `;`-separated.
    Text(String),
    /// Raw machine code (`--bytes`).
    Bytes(Vec<u8>),
}

/// One measured figure on one clock, in core cycles per body copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub clock: ClockKind,
    pub median: f64,
    #[serde(default)]
    pub p10: f64,
    #[serde(default)]
    pub p90: f64,
    /// Nearest plausible value: an integer, or 1/n for n up to the machine's pipe count
    /// ([`stats::snap`], [`stats::pipe_count`]).
    #[serde(default)]
    pub snapped: f64,
    /// Whether the median is within 2% of `snapped`.
    #[serde(default)]
    pub snapped_ok: bool,
    /// Whether the figure is accepted: the lowest of its independent repetitions agreed
    /// within 1% ([`stats::agreed`]) and `median` is the lower one. When false, `median` is the
    /// lowest repetition and `repetitions` shows the spread: not a clean number.
    #[serde(default = "yes")]
    pub converged: bool,
    /// The median of each independent repetition, in the order measured.
    #[serde(default)]
    pub repetitions: Vec<f64>,
    /// A throughput chain count no longer measured because its repetitions stayed more than
    /// 5% above the best chain count's accepted figure (it cannot be the best).
    #[serde(default)]
    pub dropped: bool,
    /// Throughput repetitions discarded because the contention sentinel timed around them read
    /// off its expected cost (these readings, in cycles): the ALUs were shared with another
    /// tenant, or the calibration was off ([`stats::sentinel_expect`]).
    #[serde(default)]
    pub contended: Vec<f64>,
    /// The lowest repetitions agreed on a value that no pipe count explains while a lower
    /// repetition is plausible; `median` is that lower one and `converged` is false.
    #[serde(default)]
    pub outvoted_plausible: bool,
    #[serde(default)]
    pub accepted: usize,
    #[serde(default)]
    pub rejected: usize,
    /// Median raw TSC ticks per copy, uncalibrated.
    #[serde(default)]
    pub raw_tsc_ticks: f64,
}

/// Latency through one input->output pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    /// `2->1` (explicit operands numbered from 1, implicit registers after them), or `body`.
    pub pair: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    /// The timed body, with the registers actually used.
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub note: Option<String>,
    /// For a pair across register files: upper bounds (chain minus the 1-cycle minimum of the
    /// connector); see `derived` for the lower bound and how they were obtained.
    #[serde(default)]
    pub figures: Vec<Figure>,
    /// Set when the pair crosses register files and the figure is derived, not measured alone.
    #[serde(default)]
    pub derived: Option<Derived>,
}

/// How a cross-file latency was derived (first usable clock), in core cycles.
///
/// The chain `instruction; connector` takes `chain` = L + c_back per copy; the connector round
/// trip `connector_forth; connector` takes `round_trip` = c_forth + c_back. Every register-file
/// crossing takes at least one cycle, so L <= chain - 1 (`upper`) and
/// L = chain - round_trip + c_forth >= chain - round_trip + 1 (`lower`). The two are equal
/// only when the round trip is 2 cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    /// The instruction closing the chain (e.g. `movq xmm1, rax`).
    pub connector: String,
    /// The timed round trip of the two connectors.
    pub round_trip_body: String,
    pub chain: f64,
    pub round_trip: f64,
    pub lower: f64,
    pub upper: f64,
}

fn yes() -> bool {
    true
}

impl Figure {
    /// A tsc figure of `median` over `reps` identical repetitions (tests' builder).
    #[cfg(test)]
    pub(crate) fn tsc_for_tests(median: f64, converged: bool, reps: usize) -> Figure {
        Figure {
            clock: ClockKind::Tsc,
            median,
            p10: median,
            p90: median,
            snapped: median,
            snapped_ok: true,
            accepted: 11,
            rejected: 0,
            raw_tsc_ticks: median,
            converged,
            repetitions: vec![median; reps],
            dropped: false,
            contended: Vec::new(),
            outvoted_plausible: false,
        }
    }

    /// The spread of the independent repetitions, relative to the lowest: (max - min) / min.
    pub fn repetition_spread(&self) -> f64 {
        let s = stats::sorted(&self.repetitions);
        match (s.first(), s.last()) {
            (Some(a), Some(b)) if *a > 0.0 => (b - a) / a,
            _ => f64::NAN,
        }
    }
}

/// Upper-bound figures and the derivation for a cross-file pair.
fn derive(
    chain: &[Figure],
    rt: &[Figure],
    p: &variants::PairPlan,
) -> (Vec<Figure>, Option<Derived>) {
    let figures: Vec<Figure> = chain
        .iter()
        .map(|f| {
            let median = (f.median - 1.0).max(0.0);
            let (snapped, snapped_ok) = stats::snap(median, stats::pipes());
            Figure {
                median,
                p10: (f.p10 - 1.0).max(0.0),
                p90: (f.p90 - 1.0).max(0.0),
                snapped,
                snapped_ok,
                // Raw ticks stay those of the timed chain (instruction + connector).
                ..f.clone()
            }
        })
        .collect();
    let derived = chain.first().and_then(|c| {
        let r = rt.iter().find(|r| r.clock == c.clock)?;
        let upper = (c.median - 1.0).max(0.0);
        Some(Derived {
            connector: p.connector.clone().unwrap_or_default(),
            round_trip_body: p.round_trip.as_ref().map(|v| v.text()).unwrap_or_default(),
            chain: c.median,
            round_trip: r.median,
            lower: (c.median - r.median + 1.0).clamp(0.0, upper),
            upper,
        })
    });
    (figures, derived)
}

/// Throughput for one chain count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainResult {
    pub chains: usize,
    pub body: String,
    pub figures: Vec<Figure>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// Per clock: the best (lowest) figure over the chain counts.
    #[serde(default)]
    pub best: Vec<Figure>,
    #[serde(default)]
    pub best_chains: usize,
    #[serde(default)]
    pub per_chains: Vec<ChainResult>,
    #[serde(default)]
    pub skipped_chains: Vec<(usize, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockStatus {
    pub clock: ClockKind,
    /// None when the clock was usable.
    pub unavailable: Option<String>,
    /// imul/add chain ratio (expect 3.00).
    pub self_check: Option<f64>,
    pub self_check_ok: Option<bool>,
    /// TSC ticks per core cycle measured by the add chain (tsc clock).
    pub tsc_ticks_per_cycle: Option<f64>,
}

/// Everything measured for one input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormReport {
    pub input: String,
    /// Operand-value preset the figures are for (`div`/`idiv` and FP div/sqrt: "fast: ..." or
    /// "slow: ..."), if any.
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub instructions: Vec<String>,
    #[serde(default)]
    pub bytes: String,
    #[serde(default)]
    pub cpu: usize,
    #[serde(default)]
    pub clocks: Vec<ClockStatus>,
    #[serde(default)]
    pub latency: Vec<PairResult>,
    #[serde(default)]
    pub latency_skipped: Vec<(String, String)>,
    #[serde(default)]
    pub throughput: Option<ThroughputResult>,
    #[serde(default)]
    pub throughput_note: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl FormReport {
    /// The summary latency: max over pairs of the first clock's median (as uops.info reports).
    pub fn latency_summary(&self) -> Option<f64> {
        self.latency
            .iter()
            .filter_map(|p| p.figures.first().map(|f| f.median))
            .reduce(f64::max)
    }
    pub fn throughput_summary(&self) -> Option<f64> {
        self.throughput.as_ref()?.best.first().map(|f| f.median)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Concrete instructions for a source, checked (refusals, CPU features).
pub fn prepare(
    src: &Source,
    probe: variants::FeatureProbe,
) -> Result<(String, Vec<Instruction>), BenchError> {
    let (input, instrs) = match src {
        Source::Text(t) => {
            let parsed = asm::parse_body(t)?;
            let concrete = variants::concretize(&parsed)?;
            let mut v = Vec::new();
            for p in &concrete {
                v.push(asm::resolve(p)?.instr);
            }
            (t.trim().to_string(), v)
        }
        Source::Bytes(b) => {
            let mut d = iced_x86::Decoder::new(64, b, iced_x86::DecoderOptions::NONE);
            let mut v = Vec::new();
            while d.can_decode() {
                let ins = d.decode();
                if ins.is_invalid() {
                    return Err(BenchError::Parse {
                        text: hex(b),
                        reason: format!(
                            "the bytes do not decode as x86-64 instructions at offset {}",
                            d.position() - ins.len()
                        ),
                    });
                }
                v.push(ins);
            }
            (format!("--bytes {}", hex(b)), v)
        }
    };
    // Name instructions in messages as the user wrote them (text), or as decoded (bytes).
    let texts: Vec<String> = match src {
        Source::Text(t) => asm::parse_body(t)?.into_iter().map(|p| p.text).collect(),
        Source::Bytes(_) => instrs.iter().map(asm::format).collect(),
    };
    for (i, ins) in instrs.iter().enumerate() {
        let t = match src {
            // Operand kinds (`r64`) are shown with the registers tma chose.
            Source::Text(_) if texts.get(i).is_some_and(|t| !has_kind(t)) => texts[i].clone(),
            _ => asm::format(ins),
        };
        variants::check_safe(ins, &t)?;
        variants::check_features(ins, &t, probe)?;
    }
    Ok((input, instrs))
}

fn has_kind(text: &str) -> bool {
    asm::parse_insn(text).is_ok_and(|p| {
        p.operands
            .iter()
            .any(|o| matches!(o, asm::Operand::Kind(_)))
    })
}

/// Measure one source with the operand values as given (defaults plus `--init`).
pub fn bench(src: &Source, opts: &Options) -> Result<FormReport, BenchError> {
    bench_inner(src, opts, &variants::host_has, None, None)
}

/// Measure one source; a lone `div`/`idiv` whose rax, rdx and divisor were not set with
/// `--init` is measured twice, with the "fast" and the "slow" operand preset (their cost
/// depends on the values), one report each; likewise a lone FP division or square root
/// (divsd, vdivps, sqrtsd...) when no vector register was set with `--init` ([`FpPreset`]).
pub fn bench_all(src: &Source, opts: &Options) -> Result<Vec<FormReport>, BenchError> {
    let (_, instrs) = prepare(src, &variants::host_has)?;
    if let Some(presets) = DivPreset::applicable(&instrs, &opts.init) {
        return presets
            .iter()
            .map(|p| bench_inner(src, opts, &variants::host_has, Some(p), None))
            .collect();
    }
    if let Some(presets) = FpPreset::applicable(&instrs, &opts.vec_init) {
        return presets
            .iter()
            .map(|p| bench_inner(src, opts, &variants::host_has, None, Some(p)))
            .collect();
    }
    Ok(vec![bench(src, opts)?])
}

/// Operand-value presets for FP division and square root (their latency may depend on the
/// values on some cores): every lane of every vector register gets the same value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FpPreset {
    pub name: &'static str,
    /// Lane bits for f32 and f64 elements.
    pub f32_bits: u32,
    pub f64_bits: u64,
}

impl FpPreset {
    /// Fast: 1.0 (x / 1.0 and sqrt(1.0) stay 1.0 along a chain).
    pub const FAST: FpPreset = FpPreset {
        name: "fast",
        f32_bits: 0x3F80_0000,
        f64_bits: 0x3FF0_0000_0000_0000,
    };
    /// Slow: a value just above 1.0 with many mantissa bits set. A division chain x / d keeps
    /// dense mantissas and, d being so close to 1, stays a normal number for the longest
    /// timed run (d^-30000 is about 0.002, far above the smallest normal number).
    pub const SLOW: FpPreset = FpPreset {
        name: "slow",
        f32_bits: 0x3F80_06A7,
        f64_bits: 0x3FF0_00D4_E5F6_A7B9,
    };

    fn is_fp_div_sqrt(ins: &Instruction) -> Option<bool> {
        let m = format!("{:?}", ins.mnemonic()).to_ascii_lowercase();
        let core = m.strip_prefix('v').unwrap_or(&m);
        let kind = [
            "divss", "divsd", "divps", "divpd", "sqrtss", "sqrtsd", "sqrtps", "sqrtpd",
        ]
        .iter()
        .find(|k| core == **k)?;
        Some(kind.ends_with("ss") || kind.ends_with("ps"))
    }

    /// The presets for a lone FP div/sqrt with no vector `--init`, else None.
    fn applicable(
        instrs: &[Instruction],
        vec_init: &[(Register, Vec<u8>)],
    ) -> Option<[FpPreset; 2]> {
        let [ins] = instrs else { return None };
        Self::is_fp_div_sqrt(ins)?;
        vec_init
            .is_empty()
            .then_some([FpPreset::FAST, FpPreset::SLOW])
    }

    /// 64 bytes of lanes for the instruction's element type.
    fn lanes(&self, ins: &Instruction) -> Vec<u8> {
        let lane = if Self::is_fp_div_sqrt(ins) == Some(true) {
            self.f32_bits.to_le_bytes().to_vec()
        } else {
            self.f64_bits.to_le_bytes().to_vec()
        };
        lane.into_iter().cycle().take(64).collect()
    }

    fn describe(&self, ins: &Instruction) -> String {
        let sqrt = format!("{:?}", ins.mnemonic())
            .to_ascii_lowercase()
            .contains("sqrt");
        let (ty, bits, value) = if Self::is_fp_div_sqrt(ins) == Some(true) {
            (
                "f32",
                format!("{:#x}", self.f32_bits),
                f32::from_bits(self.f32_bits) as f64,
            )
        } else {
            (
                "f64",
                format!("{:#x}", self.f64_bits),
                f64::from_bits(self.f64_bits),
            )
        };
        let mut d = format!(
            "{}: every lane of every vector register = {ty} {value} ({bits})",
            self.name
        );
        if self.name == "slow" {
            d.push_str(if sqrt {
                "; a square-root latency chain converges to 1.0 within a few dozen steps, so the slow values hold for throughput only"
            } else {
                "; a pair that divides a register by itself (2->1) computes 1.0 from the first step"
            });
        }
        d
    }
}

/// uops.info-style operand presets for integer division.
#[derive(Debug, Clone, Copy)]
pub struct DivPreset {
    pub name: &'static str,
    pub rax: u64,
    pub rdx: u64,
    pub divisor: u64,
}

impl DivPreset {
    /// Fast: 0 / 1. Slow: a large dividend and divisor (quotient and remainder stay large along
    /// the latency chain).
    pub const FAST: DivPreset = DivPreset {
        name: "fast",
        rax: 0,
        rdx: 0,
        divisor: 1,
    };
    pub const SLOW: DivPreset = DivPreset {
        name: "slow",
        rax: 133,
        rdx: 0x343a_9ed7_4455_6677,
        divisor: 0x75e6_e44f_ccdd_eeff,
    };

    /// The presets for this body, or None (not a lone 32/64-bit div/idiv by a register other
    /// than rax/rdx, or the user set rax, rdx or the divisor).
    fn applicable(instrs: &[Instruction], init: &[(Register, u64)]) -> Option<[DivPreset; 2]> {
        let [ins] = instrs else { return None };
        let d = Self::divisor(ins)?;
        let touched = init
            .iter()
            .any(|(r, _)| matches!(*r, Register::RAX | Register::RDX) || *r == d.full_register());
        (!touched).then_some([DivPreset::FAST, DivPreset::SLOW])
    }

    fn divisor(ins: &Instruction) -> Option<Register> {
        use iced_x86::Mnemonic;
        if !matches!(ins.mnemonic(), Mnemonic::Div | Mnemonic::Idiv)
            || ins.op0_kind() != iced_x86::OpKind::Register
        {
            return None;
        }
        let d = ins.op0_register();
        let ok = (d.is_gpr64() || d.is_gpr32())
            && !matches!(d.full_register(), Register::RAX | Register::RDX);
        ok.then_some(d)
    }

    /// Values for an operand size: 32-bit division uses the high halves (keeps edx < divisor
    /// and the signed quotient in range).
    fn values(&self, ins: &Instruction) -> (u64, u64, u64) {
        let wide = ins.op0_register().is_gpr64();
        if wide || self.name == "fast" {
            (self.rax, self.rdx, self.divisor)
        } else {
            (self.rax, self.rdx >> 32, self.divisor >> 32)
        }
    }

    fn describe(&self, ins: &Instruction) -> String {
        let (a, d, v) = self.values(ins);
        let dn = Self::divisor(ins).map_or("divisor".into(), asm::register_name);
        format!("{}: rdx:rax = {d:#x}:{a:#x}, {dn} = {v:#x}", self.name)
    }
}

/// [`bench()`] with an injectable CPU feature probe (tests).
pub fn bench_with_probe(
    src: &Source,
    opts: &Options,
    probe: variants::FeatureProbe,
) -> Result<FormReport, BenchError> {
    bench_inner(src, opts, probe, None, None)
}

/// How many times a measurement is tried when the calibration self-check fails. Host noise
/// (e.g. a busy SMT sibling on the host slowing the 1-cycle add chain) comes in bursts; a
/// fresh attempt, calibrated again, usually passes. The check itself is never loosened: a
/// figure is only reported from an attempt whose calibration passed.
const SELF_CHECK_ATTEMPTS: u32 = 4;

fn bench_inner(
    src: &Source,
    opts: &Options,
    probe: variants::FeatureProbe,
    div: Option<&DivPreset>,
    fp: Option<&FpPreset>,
) -> Result<FormReport, BenchError> {
    let mut attempt = 1;
    loop {
        match measure::measure_once(src, opts, probe, div, fp) {
            Err(BenchError::SelfCheck { .. }) if attempt < SELF_CHECK_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{calib_ins, fault_message};

    /// The fault -> message mapping, fed a synthetic fault report (as the child's signal
    /// handler would send it) instead of a real signal.
    fn message_for(
        text: &str,
        signal: i32,
        code: i64,
        addr: u64,
        gprs: &[(Register, u64)],
    ) -> String {
        let ins = asm::resolve(&asm::parse_insn(text).unwrap()).unwrap().instr;
        let calib = variants::Variant {
            chains: vec![vec![calib_ins(iced_x86::Code::Add_rm64_r64)]],
            reloads: Vec::new(),
        };
        let body = variants::Variant {
            chains: vec![vec![ins]],
            reloads: Vec::new(),
        };
        let variants = vec![calib, body];
        let mut images = Vec::new();
        let mut jobs = Vec::new();
        for v in &variants {
            let copies = v.encode().unwrap();
            images.push(
                harness::build_image(
                    &copies,
                    4,
                    &harness::Regs::values(gprs),
                    harness::VecInit::None,
                    false,
                )
                .unwrap(),
            );
            images.push(
                harness::build_image(
                    &copies,
                    8,
                    &harness::Regs::values(gprs),
                    harness::VecInit::None,
                    false,
                )
                .unwrap(),
            );
            jobs.push(engine::Job {
                small: images.len() - 2,
                large: images.len() - 1,
                unroll: (4, 8),
            });
        }
        let layout = engine::Layout::new(images);
        // Fault at the third copy of the body in the large image of job 1.
        let img = &layout.images[3];
        let offset = layout.offsets[3] + img.insn_offsets[2].0;
        let f = engine::Fault {
            signal,
            code,
            offset: offset as u64,
            addr,
            job: Some(1),
        };
        fault_message(&f, &layout, &variants, &jobs, gprs, &Method::default())
    }

    #[test]
    fn faults_map_back_to_the_instruction() {
        let mut gprs = harness::GPR_DEFAULTS.to_vec();
        gprs.iter_mut()
            .find(|(r, _)| *r == Register::RCX)
            .unwrap()
            .1 = 0;
        assert_eq!(
            message_for("div rcx", libc::SIGFPE, 1, 0, &gprs),
            "div rcx raised #DE (SIGFPE): divisor rcx=0; pass --init rcx=3"
        );
        let m = message_for("div rbx", libc::SIGFPE, 1, 0, &harness::GPR_DEFAULTS);
        assert!(
            m.contains("quotient does not fit") && m.contains("rbx=5"),
            "{m}"
        );
        let m = message_for(
            "mov rax, [rbx]",
            libc::SIGSEGV,
            1,
            5,
            &harness::GPR_DEFAULTS,
        );
        assert!(
            m.starts_with("mov rax, [rbx] faulted (SIGSEGV) accessing address 0x5: memory operands must point into the memory buffer"),
            "{m}"
        );
        let m = message_for("mov rax, [rbx]", libc::SIGBUS, 2, 5, &harness::GPR_DEFAULTS);
        assert!(m.contains("(SIGBUS)"), "{m}");
        let m = message_for(
            "vpaddd zmm0, zmm0, zmm0",
            libc::SIGILL,
            2,
            0,
            &harness::GPR_DEFAULTS,
        );
        assert!(
            m.starts_with("vpaddd zmm0, zmm0, zmm0 raised #UD (SIGILL)"),
            "{m}"
        );
    }

    #[test]
    fn vector_init_syntax() {
        let v = |s: &str| match parse_init(s).unwrap() {
            InitValue::Vector(r, b) => (asm::register_name(r), b),
            other => panic!("{other:?}"),
        };
        // 8 digits: a 32-bit lane broadcast over the whole register.
        let (r, b) = v("xmm1=0x3f800000");
        assert_eq!(r, "xmm1");
        assert_eq!(b.len(), 64);
        assert_eq!(&b[..8], &[0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f]);
        // 16 digits: a 64-bit lane; leading zeros count.
        let (_, b) = v("ymm2=0x0000000000000001");
        assert_eq!(&b[..16], &[1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        // A full 128-bit value: the last digits are lane 0; repeated in the upper lanes.
        let (_, b) = v("xmm3=0x00000000_00000010_00000000_00000002");
        assert_eq!(u64::from_le_bytes(b[..8].try_into().unwrap()), 2);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 0x10);
        assert_eq!(b[16..32], b[..16]);
        let (_, b) = v("zmm4=f64:1.5");
        assert_eq!(f64::from_le_bytes(b[56..64].try_into().unwrap()), 1.5);
        let (_, b) = v("xmm0=f32:-2");
        assert_eq!(f32::from_le_bytes(b[60..64].try_into().unwrap()), -2.0);
        assert_eq!(
            parse_init("rcx=3").unwrap(),
            InitValue::Gpr(Register::RCX, 3)
        );
        for (bad, why) in [
            ("xmm1=1.5", "vector values are hex"),
            (
                "xmm1=0x1234567890abcdef1234567890abcdef1",
                "does not fit xmm1",
            ),
            ("xmm1=0xzz", "not a hex number"),
            ("ecx=1", "64-bit register"),
            ("foo=1", "unknown register"),
            ("xmm1", "expected REG=VALUE"),
        ] {
            let e = parse_init(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn fp_presets_apply_to_lone_fp_div_and_sqrt() {
        let one = |t: &str| vec![asm::resolve(&asm::parse_insn(t).unwrap()).unwrap().instr];
        for t in [
            "divsd xmm0, xmm1",
            "vdivps ymm0, ymm1, ymm2",
            "sqrtss xmm0, xmm1",
            "vsqrtpd zmm1, zmm2",
        ] {
            assert!(FpPreset::applicable(&one(t), &[]).is_some(), "{t}");
        }
        for t in ["mulsd xmm0, xmm1", "addps xmm0, xmm1", "rsqrtps xmm0, xmm1"] {
            assert!(FpPreset::applicable(&one(t), &[]).is_none(), "{t}");
        }
        // --init of a vector register turns the presets off.
        let init = vec![(Register::XMM1, vec![0u8; 64])];
        assert!(FpPreset::applicable(&one("divsd xmm0, xmm1"), &init).is_none());
        // Lanes by element type; every value normal, fast = 1.0, slow != 1.0.
        let ps = FpPreset::SLOW.lanes(&one("divps xmm0, xmm1")[0]);
        let x = f32::from_le_bytes(ps[4..8].try_into().unwrap());
        assert!(x.is_normal() && x > 1.0 && x < 1.001);
        // Stays normal along the longest chain: 30000 divisions.
        assert!(x.powi(-30000).is_normal());
        let pd = FpPreset::SLOW.lanes(&one("divpd xmm0, xmm1")[0]);
        let y = f64::from_le_bytes(pd[8..16].try_into().unwrap());
        assert!(y.is_normal() && y > 1.0 && y.powi(-30000) > 1e-3);
        let f = FpPreset::FAST.lanes(&one("sqrtsd xmm0, xmm1")[0]);
        assert_eq!(f64::from_le_bytes(f[..8].try_into().unwrap()), 1.0);
        assert!(FpPreset::SLOW
            .describe(&one("sqrtsd xmm0, xmm1")[0])
            .starts_with("slow: every lane of every vector register = f64 1.0002"));
    }

    #[test]
    fn default_vector_pattern_is_normal_in_f32_and_f64_lanes() {
        let p = harness::pool_bytes();
        let f32s = p
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()));
        let f64s = p
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()));
        assert!(f32s.clone().all(|x| x.is_normal() && x == 1.5));
        assert!(f64s.clone().all(|x| x.is_normal()));
        // --init values land in the named register's slot only.
        let q = harness::pool_with(&[(3, vec![0u8; 64])]);
        assert!(q[3 * 64..4 * 64].iter().all(|&b| b == 0));
        assert_eq!(q[..3 * 64], p[..3 * 64]);
        assert_eq!(q[4 * 64..], p[4 * 64..]);
    }

    #[test]
    fn faults_outside_the_body_are_called_harness_bugs() {
        let gprs = harness::GPR_DEFAULTS;
        let layout = engine::Layout::new(vec![harness::build_image(
            &[harness::Copy {
                insns: vec![vec![0x90]],
            }],
            4,
            &harness::Regs::values(&gprs),
            harness::VecInit::None,
            false,
        )
        .unwrap()]);
        let f = engine::Fault {
            signal: libc::SIGSEGV,
            code: 1,
            offset: 3,
            addr: 0,
            job: Some(0),
        };
        let v = vec![variants::Variant {
            chains: vec![vec![Instruction::with(iced_x86::Code::Nopd)]],
            reloads: Vec::new(),
        }];
        let m = fault_message(
            &f,
            &layout,
            &v,
            &[engine::Job {
                small: 0,
                large: 0,
                unroll: (4, 8),
            }],
            &gprs,
            &Method::default(),
        );
        assert!(m.contains("outside the timed body"), "{m}");
    }
}
