//! `tma bench`: clap arguments -> [`tma_bench::BenchConfig`] -> [`tma_bench::run`] (with a
//! progress bar when stderr is a terminal, log lines with `--progress`) -> the table or JSON renderer.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tma_bench::{BenchConfig, ClockChoice, ClockKind, Input, PairFilter, Preset, Progress};

/// Measure instruction latency (per input->output operand pair) and reciprocal throughput
/// (independent chains swept) in core cycles. Runs in a forked child pinned to one CPU; works
/// without a PMU (calibrated rdtsc).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  tma bench 'sha256rnds2 xmm1, xmm2'\n  tma bench 'mulx r64, r64, r64' --lat\n  tma bench 'add rax, rcx; imul rdx, rax' --tp -v\n  tma bench 'div rcx' --init rcx=7,rdx=0\n  tma bench 'mulps xmm0, xmm1' --init xmm1=0x3f800000,xmm0=f64:2.5\n  tma bench --bytes 0f38cbca\n  tma bench 'add rax, [rbx]'\n  tma bench 'mov rax, [rax]' --mem 64M\n  tma bench 'add rax, rm64'\n  tma bench --preset sha\n  tma bench --file forms.txt --progress --compare ref.csv\n  tma bench 'mov [rbx], rax; mov rax, [rbx]' --lat\n\nRegisters: r15 is the loop counter, r14 points at the memory buffer (--mem, 1 MiB by default; use [r14+disp]), rsp is the stack; bodies may not write them. Other base registers of memory operands point at the buffer too, index registers are 0. Figures whose independent repetitions never agreed within 1% are marked `?` (UNCONVERGED)."
)]
pub struct Args {
    /// Instructions in Intel syntax separated by `;`. Operand kinds (r64, xmm, ymm, m64) let tma pick.
    pub body: Option<String>,
    /// Raw machine code in hex instead of text (e.g. 0f38cbca).
    #[arg(long, value_name = "HEX", conflicts_with_all = ["body", "file", "preset"])]
    pub bytes: Option<String>,
    /// A file with one instruction body per line (`#` comments).
    #[arg(long, value_name = "LIST", conflicts_with_all = ["body", "preset"])]
    pub file: Option<PathBuf>,
    /// A predefined set: `sha` (SHA-NI instructions and the SHA-256 bounds they imply).
    #[arg(long, value_parser = ["sha"], conflicts_with = "body")]
    pub preset: Option<String>,
    /// Measure latency (per operand pair).
    #[arg(long)]
    pub lat: bool,
    /// Measure reciprocal throughput.
    #[arg(long)]
    pub tp: bool,
    /// Latency pair to measure, e.g. 2->1 (operands numbered from 1, implicit ones after).
    #[arg(long, value_name = "IN->OUT")]
    pub pair: Option<String>,
    /// Latency from this register.
    #[arg(long, value_name = "REG")]
    pub from: Option<String>,
    /// Latency to this register.
    #[arg(long, value_name = "REG")]
    pub to: Option<String>,
    /// Independent chain counts swept for throughput.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,12")]
    pub chains: Vec<usize>,
    /// Cycle source: auto (perf cycles when available, else calibrated tsc), tsc, perf, rdpmc,
    /// msr (core counter 0 programmed through /dev/cpu/N/msr and read with rdpmc: needs root,
    /// `modprobe msr` and /sys/bus/event_source/devices/cpu/rdpmc = 2; the previous setting is
    /// restored on exit), all (side by side, with the reason for each one missing).
    #[arg(long, default_value = "auto", value_parser = ["auto", "tsc", "perf", "rdpmc", "msr", "all"])]
    pub clock: String,
    /// With --clock msr: borrow counter 0 even when its enable bit is set (perf, the NMI
    /// watchdog or another tool uses it); its value is restored afterwards.
    #[arg(long)]
    pub force: bool,
    /// Initial register values, e.g. rcx=3,rdx=0. Vector registers: xmm1=0x3f800000 (hex digit
    /// count sets the broadcast lane: <=8 digits 32-bit, <=16 64-bit, <=32 a full 128-bit value,
    /// <=64 256-bit, <=128 512-bit; last digits are lane 0), or xmm1=f32:1.5 / f64:1.5.
    /// Unnamed vector registers hold f32 1.5 in every lane (normal, never denormal).
    #[arg(long, value_delimiter = ',', value_name = "REG=VALUE")]
    pub init: Vec<String>,
    /// The two unroll counts whose difference is taken (each rounded up to a multiple of the
    /// chain count, so that every chain gets the same number of copies).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "A,B",
        default_value = "256,512"
    )]
    pub unroll: Vec<usize>,
    /// CPU to pin the measurement to (default: the current one).
    #[arg(long, value_hint = clap::ValueHint::Other)]
    pub cpu: Option<usize>,
    /// Memory buffer for memory operands (default 1M, page-aligned, cache-warm): base registers
    /// of memory operands point at its start, index registers are 0. A pointer chase
    /// (`mov rax, [rax]`) walks all of it in random line order (default: one line, the L1
    /// load-to-use latency).
    #[arg(long, value_name = "SIZE", value_parser = tma_workloads::workload::parse_size)]
    pub mem: Option<u64>,
    /// 21 repetitions x 5 trials x 200k-tick regions (slower, for noisy hosts).
    #[arg(long)]
    pub precise: bool,
    /// Accepted timings per independent repetition of a figure (its median is the repetition's
    /// value; a figure takes 2 to 20 repetitions until the lowest agree within 1%).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Give up on one input after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Compare with a CSV of reference values (columns: instruction,latency,throughput); differences over 5% are marked.
    #[arg(long, value_name = "FILE")]
    pub compare: Option<PathBuf>,
    /// Show progress on stderr (for --file and --preset) also when it is a file or a pipe:
    /// one line per input (a terminal gets a bar anyway). Never written to stdout or the -o file.
    #[arg(long)]
    pub progress: bool,
    /// Show every chain count and clock details.
    #[arg(short, long)]
    pub verbose: bool,
    /// JSON output (schema tma.bench, version 1).
    #[arg(long)]
    pub json: bool,
    /// Write the output to FILE (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The clap-free configuration of these arguments.
pub fn config(a: &Args) -> BenchConfig {
    let input = match (&a.bytes, &a.file, &a.body, &a.preset) {
        (Some(h), ..) => Some(Input::Bytes(h.clone())),
        (None, Some(f), ..) => Some(Input::File(f.clone())),
        (None, None, Some(b), _) => Some(Input::Body(b.clone())),
        (None, None, None, Some(_)) => Some(Input::Preset(Preset::Sha)),
        (None, None, None, None) => None,
    };
    BenchConfig {
        input,
        latency: a.lat,
        throughput: a.tp,
        pairs: PairFilter {
            pair: a.pair.clone(),
            from: a.from.clone(),
            to: a.to.clone(),
        },
        chains: a.chains.clone(),
        clock: match a.clock.as_str() {
            "tsc" => ClockChoice::One(ClockKind::Tsc),
            "perf" => ClockChoice::One(ClockKind::Perf),
            "rdpmc" => ClockChoice::One(ClockKind::Rdpmc),
            "msr" => ClockChoice::One(ClockKind::Msr),
            "all" => ClockChoice::All,
            _ => ClockChoice::Auto,
        },
        init: a.init.clone(),
        unroll: a.unroll.clone(),
        cpu: a.cpu,
        precise: a.precise,
        reps: a.reps,
        timeout: Duration::from_secs(a.timeout),
        compare: a.compare.clone(),
        mem: a.mem,
        force: a.force,
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    crate::output::check(args.output.as_deref(), [])?;
    let cfg = config(&args);
    let mut progress = ProgressView::new(args.progress);
    let outcome = tma_bench::run(&cfg, &mut |p| progress.show(p))?;
    crate::output::emit(args.output.as_deref(), |w| {
        if args.json {
            tma_bench::render::json(w, &outcome)
        } else {
            tma_bench::render::text_width(w, &outcome, args.verbose, width(args.output.as_deref()))
        }
    })?;
    Ok(if outcome.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// The columns the text report fits: the terminal's when it goes to one, else
/// [`tma_bench::render::DEFAULT_WIDTH`].
fn width(output: Option<&std::path::Path>) -> usize {
    let to_stdout = output.is_none_or(tma_render::files::is_stdio);
    if !(to_stdout && std::io::stdout().is_terminal()) {
        return tma_bench::render::DEFAULT_WIDTH;
    }
    terminal_size::terminal_size()
        .map(|(w, _)| usize::from(w.0))
        .filter(|&w| w > 0)
        .unwrap_or(tma_bench::render::DEFAULT_WIDTH)
}

/// How a sweep's progress shows on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Off,
    /// A bar (or spinner), drawn by indicatif.
    Bar,
    /// One plain line per input, for a log.
    Lines,
}

/// A bar whenever stderr is a terminal (as every long run of tma); on a file or a pipe,
/// nothing unless `--progress` asks for plain lines (indicatif would draw nothing there).
fn view(progress_flag: bool, stderr_is_terminal: bool) -> View {
    match (stderr_is_terminal, progress_flag) {
        (true, _) => View::Bar,
        (false, true) => View::Lines,
        (false, false) => View::Off,
    }
}

/// The progress of a sweep on stderr, as [`view`] decides.
struct ProgressView {
    on: bool,
    lines: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl ProgressView {
    fn new(progress_flag: bool) -> ProgressView {
        let v = view(progress_flag, std::io::stderr().is_terminal());
        ProgressView {
            on: v != View::Off,
            lines: v == View::Lines,
            bar: None,
        }
    }

    fn show(&mut self, p: Progress<'_>) {
        if !self.on {
            return;
        }
        match p {
            Progress::Preset(name) => {
                let pb = indicatif::ProgressBar::new_spinner();
                pb.set_message(name.to_string());
                pb.enable_steady_tick(Duration::from_millis(120));
                self.bar = Some(pb);
                if self.lines {
                    eprintln!("tma bench: measuring the {name}");
                }
            }
            Progress::List { total } if !self.lines => {
                let pb = indicatif::ProgressBar::new(total as u64);
                pb.set_style(
                    indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                self.bar = Some(pb);
            }
            Progress::List { .. } => {}
            Progress::Input {
                index,
                total,
                input,
            } => {
                if let Some(pb) = &self.bar {
                    pb.set_message(input.to_string());
                }
                if self.lines {
                    eprintln!("tma bench: [{}/{total}] {input}", index + 1);
                }
            }
            Progress::InputDone => {
                if let Some(pb) = &self.bar {
                    pb.inc(1);
                }
            }
            Progress::Done => {
                if let Some(pb) = self.bar.take() {
                    pb.finish_and_clear();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_gets_a_bar_a_log_lines_only_when_asked() {
        assert_eq!(view(false, true), View::Bar);
        assert_eq!(view(true, true), View::Bar);
        assert_eq!(view(true, false), View::Lines);
        assert_eq!(view(false, false), View::Off);
    }
}
