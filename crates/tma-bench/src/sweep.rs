//! The `tma bench` use case: a clap-free [`BenchConfig`] in, every input measured, a
//! [`BenchOutcome`] out (rendered by [`crate::render`]).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::compare::{self, CompareRow, References};
use crate::{
    asm, bench_all, parse_init, preset_sha_into, BenchError, ClockChoice, FormReport, InitValue,
    Method, Options, PairFilter, ShaReport, Source,
};

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Instructions in Intel syntax separated by `;`.
    Body(String),
    /// Raw machine code in hex (`--bytes`).
    Bytes(String),
    /// A file with one body per line (`#` comments).
    File(PathBuf),
    /// A predefined set.
    Preset(Preset),
}

/// `--preset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// SHA-NI instructions and the SHA-256 bounds they imply.
    Sha,
}

/// Everything `tma bench` needs; no clap.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// `None`: nothing was given (an error that says what to give).
    pub input: Option<Input>,
    /// Latency was asked for (`--lat`); neither this nor `throughput` means both.
    pub latency: bool,
    /// Throughput was asked for (`--tp`).
    pub throughput: bool,
    pub pairs: PairFilter,
    /// Independent chain counts swept for throughput.
    pub chains: Vec<usize>,
    pub clock: ClockChoice,
    /// `REG=VALUE` items ([`parse_init`]).
    pub init: Vec<String>,
    /// The two unroll counts whose difference is taken.
    pub unroll: Vec<usize>,
    /// CPU to pin the measurement to (default: the current one).
    pub cpu: Option<usize>,
    /// [`Method::precise`] instead of the default method.
    pub precise: bool,
    /// Accepted timings per independent repetition of a figure (at least 3).
    pub reps: Option<usize>,
    /// Give up on one input after this long (at least a second).
    pub timeout: Duration,
    /// Reference values to compare with ([`compare::parse`]).
    pub compare: Option<PathBuf>,
    /// `--mem SIZE`: the memory buffer of memory operands and pointer chases, in bytes.
    pub mem: Option<u64>,
    /// `--force`: the MSR clock may borrow a counter whose enable bit is set.
    pub force: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            input: None,
            latency: false,
            throughput: false,
            pairs: PairFilter::default(),
            chains: vec![1, 2, 4, 8, 12],
            clock: ClockChoice::Auto,
            init: Vec::new(),
            unroll: vec![256, 512],
            cpu: None,
            precise: false,
            reps: None,
            timeout: Duration::from_secs(120),
            compare: None,
            mem: None,
            force: false,
        }
    }
}

impl BenchConfig {
    /// The measurement options these settings give.
    pub fn options(&self) -> Result<Options, BenchError> {
        let mut init = Vec::new();
        let mut vec_init = Vec::new();
        for kv in &self.init {
            match parse_init(kv)? {
                InitValue::Gpr(r, v) => init.push((r, v)),
                InitValue::Vector(r, b) => vec_init.push((r, b)),
            }
        }
        let [u1, u2] = self.unroll[..] else {
            return Err(BenchError::BadOption(
                "--unroll needs two counts, e.g. 256,512".into(),
            ));
        };
        let mut method = if self.precise {
            Method::precise()
        } else {
            Method::default()
        };
        method.unroll = (u1, u2);
        method.cpu = self.cpu;
        method.mem = self.mem.map(|m| usize::try_from(m).unwrap_or(usize::MAX));
        method.force = self.force;
        method.timeout = self.timeout.max(Duration::from_secs(1));
        if let Some(r) = self.reps {
            if r < 3 {
                return Err(BenchError::BadOption("--reps must be at least 3".into()));
            }
            method.reps = r;
        }
        let both = !self.latency && !self.throughput;
        Ok(Options {
            latency: self.latency || both,
            throughput: self.throughput || both,
            pairs: self.pairs.clone(),
            chains: self.chains.clone(),
            clock: self.clock,
            init,
            vec_init,
            method,
        })
    }
}

/// An input that could not be measured (the others still are).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputError {
    pub input: String,
    pub error: String,
}

/// Everything `tma bench` measured.
#[derive(Debug, Clone, Default)]
pub struct BenchOutcome {
    pub forms: Vec<FormReport>,
    /// Inputs of a `--file` list that failed.
    pub errors: Vec<InputError>,
    pub sha: Option<ShaReport>,
    /// `Some` when reference values were given.
    pub compare: Option<Vec<CompareRow>>,
    /// SIGINT or SIGTERM stopped the run: `forms` (and `errors`) are what was measured
    /// before it; the rest was not measured.
    pub interrupted: Option<tma_sys::signal::Interrupt>,
}

/// Progress of a run, for a progress bar or log lines.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// A preset is being measured (one step).
    Preset(&'a str),
    /// A list of `total` inputs begins.
    List { total: usize },
    /// Input `index` (from 0) of the list is being measured.
    Input {
        index: usize,
        total: usize,
        input: &'a str,
    },
    /// The current input is done (measured or failed).
    InputDone,
    /// The preset or list is done.
    Done,
}

/// Run `tma bench`: read the inputs and references, measure every input. A single input's
/// failure is the error; in a list, failed inputs are reported in [`BenchOutcome::errors`].
pub fn run(
    cfg: &BenchConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<BenchOutcome, BenchError> {
    if cfg!(not(target_arch = "x86_64")) {
        return Err(BenchError::X86Only(std::env::consts::ARCH));
    }
    let opts = cfg.options()?;
    let refs = cfg.compare.as_deref().map(read_references).transpose()?;
    let mut outcome = match &cfg.input {
        Some(Input::Preset(Preset::Sha)) => measure_sha(&opts, progress)?,
        Some(input) => match &sources(input)?[..] {
            [one] => match bench_all(one, &opts) {
                Err(BenchError::Interrupted(sig)) => BenchOutcome {
                    interrupted: Some(sig),
                    ..BenchOutcome::default()
                },
                r => BenchOutcome {
                    forms: r?,
                    ..BenchOutcome::default()
                },
            },
            list => measure_list(list, &opts, progress),
        },
        None => {
            return Err(BenchError::BadOption(
                "nothing to measure: give instructions ('imul rax, rbx'), --bytes HEX, --file LIST or --preset sha".into(),
            ))
        }
    };
    outcome.compare = refs.map(|r| compare::rows(&outcome.forms, &r));
    Ok(outcome)
}

fn read_references(path: &std::path::Path) -> Result<References, BenchError> {
    let text = tma_render::files::read_input_string(path).map_err(|source| BenchError::Read {
        what: format!("--compare {}", path.display()),
        source,
    })?;
    compare::parse(&text)
}

/// The bodies an input names.
fn sources(input: &Input) -> Result<Vec<Source>, BenchError> {
    match input {
        Input::Body(b) => Ok(reg_and_mem(b).into_iter().map(Source::Text).collect()),
        Input::Bytes(h) => Ok(vec![Source::Bytes(asm::parse_hex(h)?)]),
        Input::File(f) => {
            let text =
                tma_render::files::read_input_string(f).map_err(|source| BenchError::Read {
                    what: format!("--file {}", f.display()),
                    source,
                })?;
            let list: Vec<Source> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .flat_map(reg_and_mem)
                .map(Source::Text)
                .collect();
            if list.is_empty() {
                return Err(BenchError::BadOption(format!(
                    "--file {}: no instructions in the file",
                    f.display()
                )));
            }
            Ok(list)
        }
        Input::Preset(_) => Ok(Vec::new()),
    }
}

/// A body with a register-or-memory operand kind (`rm64`, `r/m64`, `xmm/m128`, `ymm/m256`) is
/// two forms: the register source (`r64`, `xmm`: tma picks the register) and the memory source
/// (`m64`: a location of the memory buffer), measured one after the other. Other bodies are
/// returned as they are.
pub fn reg_and_mem(body: &str) -> Vec<String> {
    let split = |tok: &str| -> Option<(String, String)> {
        let t = tok.to_ascii_lowercase();
        if let Some((r, m)) = t.split_once('/') {
            let ok_m =
                m.len() > 1 && m.starts_with('m') && m[1..].chars().all(|c| c.is_ascii_digit());
            // `r/m64`: the register class takes the memory operand's size.
            let r = if r == "r" {
                format!("r{}", &m[1.min(m.len())..])
            } else {
                r.to_string()
            };
            let ok_r = ["r8", "r16", "r32", "r64", "xmm", "ymm", "zmm", "mm"].contains(&r.as_str());
            return (ok_r && ok_m).then(|| (r, m.to_string()));
        }
        let bits = t.strip_prefix("rm")?;
        ["8", "16", "32", "64"]
            .contains(&bits)
            .then(|| (format!("r{bits}"), format!("m{bits}")))
    };
    let mut reg = Vec::new();
    let mut mem = Vec::new();
    let mut found = false;
    // Split on operand separators, keeping them.
    for piece in body.split_inclusive([',', ' ', ';']) {
        let (tok, sep) = match piece.char_indices().last() {
            Some((i, ',' | ' ' | ';')) => (&piece[..i], &piece[i..]),
            _ => (piece, ""),
        };
        match split(tok) {
            Some((r, m)) => {
                found = true;
                reg.push(format!("{r}{sep}"));
                mem.push(format!("{m}{sep}"));
            }
            None => {
                reg.push(piece.to_string());
                mem.push(piece.to_string());
            }
        }
    }
    if found {
        vec![reg.concat(), mem.concat()]
    } else {
        vec![body.to_string()]
    }
}

fn measure_sha(
    opts: &Options,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<BenchOutcome, BenchError> {
    progress(Progress::Preset("SHA preset"));
    let mut forms = Vec::new();
    let r = preset_sha_into(opts, &mut forms);
    progress(Progress::Done);
    match r {
        // The forms measured so far; no bounds (they need every figure).
        Err(BenchError::Interrupted(sig)) => Ok(BenchOutcome {
            forms,
            interrupted: Some(sig),
            ..BenchOutcome::default()
        }),
        r => {
            let r = r?;
            Ok(BenchOutcome {
                forms: r.forms.clone(),
                sha: Some(r),
                ..BenchOutcome::default()
            })
        }
    }
}

/// Every input of a list; a failure is recorded and the next input measured.
fn measure_list(
    list: &[Source],
    opts: &Options,
    progress: &mut dyn FnMut(Progress<'_>),
) -> BenchOutcome {
    let mut outcome = BenchOutcome::default();
    progress(Progress::List { total: list.len() });
    for (index, s) in list.iter().enumerate() {
        if let Some(sig) = tma_sys::signal::interrupted() {
            outcome.interrupted = Some(sig);
            break;
        }
        let input = match s {
            Source::Text(t) => t.clone(),
            Source::Bytes(b) => format!("{b:02x?}"),
        };
        progress(Progress::Input {
            index,
            total: list.len(),
            input: &input,
        });
        match bench_all(s, opts) {
            Ok(r) => outcome.forms.extend(r),
            Err(BenchError::Interrupted(sig)) => {
                outcome.interrupted = Some(sig);
                break;
            }
            Err(e) => outcome.errors.push(InputError {
                input,
                error: e.to_string(),
            }),
        }
        progress(Progress::InputDone);
    }
    progress(Progress::Done);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_or_memory_kinds_give_both_forms() {
        assert_eq!(
            reg_and_mem("add rax, rm64"),
            ["add rax, r64", "add rax, m64"]
        );
        assert_eq!(
            reg_and_mem("imul r64, r/m64"),
            ["imul r64, r64", "imul r64, m64"]
        );
        assert_eq!(
            reg_and_mem("vpaddd ymm1, ymm1, ymm/m256"),
            ["vpaddd ymm1, ymm1, ymm", "vpaddd ymm1, ymm1, m256"]
        );
        assert_eq!(reg_and_mem("add rax, [rbx]"), ["add rax, [rbx]"]);
        assert_eq!(reg_and_mem("add rax, rbx"), ["add rax, rbx"]);
        // Not a kind: a register named like one is left alone.
        assert_eq!(reg_and_mem("add rm, rbx"), ["add rm, rbx"]);
    }
}
