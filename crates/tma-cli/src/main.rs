//! `tma`: find out why a program is slow on a modern x86 CPU (Top-down Microarchitecture
//! Analysis). This binary only parses arguments, builds plain config structs, calls the library
//! crates and maps errors to exit codes; no analysis lives here.
//!
//! Exit codes: 0 success; 2 bad input or a failure `tma` itself detected (message on stderr);
//! for `tma stat -- CMD` and similar, the measured command's own exit status is forwarded;
//! `tma doctor`: 1 when a check failed; 130 / 143 after SIGINT / SIGTERM.
//!
//! Signals: the commands that run long catch SIGINT and SIGTERM with the one handler of
//! `tma_sys::signal` (installed here, before the command starts); their loops ask
//! `tma_sys::signal::interrupted()`, stop, print or write what they have, marked as
//! interrupted, and return; the exit status is then 128 + the signal, whatever the command
//! returned. The short commands keep the default actions (the signal ends them at once).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod output;
mod progress;

/// Top-down Microarchitecture Analysis: identify the bottleneck, locate it, measure instructions.
#[derive(Debug, Parser)]
#[command(name = "tma", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    root: cmd::args::RootArg,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Count events and print the TMA tree for a command, a pid, the system, or an imported recording.
    Stat(cmd::stat::Args),
    /// Export the TMA tree to Prometheus, counting continuously (per host, per cgroup).
    Serve(cmd::serve::Args),
    /// Compare two runs: before, after and delta of every node, the bottleneck's move, significance.
    Diff(cmd::diff::Args),
    /// Draw results (trees, intervals, diffs, profiles, benchmarks) in one self-contained HTML page.
    Report(cmd::report::Args),
    /// List the raw events a TMA level needs, with perf encodings and a ready perf command.
    Events(cmd::events::Args),
    /// Show the TMA tree of a CPU: nodes, formulas, thresholds, locate-with events.
    List(cmd::list::Args),
    /// Sample a node's locate-with event and show hot functions and annotated instructions.
    Locate(cmd::locate::Args),
    /// Measure instruction latency and throughput in core cycles.
    Bench(cmd::bench::Args),
    /// Count KVM VM exits by reason.
    Kvm(cmd::kvm::Args),
    /// Check whether this machine is set up to measure, and what to fix.
    Doctor(cmd::doctor::Args),
    /// Run a bundled case-study workload (sha256, dram, matmul) as an ordinary process.
    Workload(cmd::workload::Args),
    /// Walk through the method on a bundled case study: measure, locate, fix, compare.
    Demo(cmd::demo::Args),
    /// Compute SHA-256 digests (drop-in for coreutils sha256sum).
    Sha256sum(cmd::sha256sum::Args),
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::completions::Args),
    /// Print a manual page (roff), or write them all with -o DIR.
    Man(cmd::man::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.runs_long() {
        if let Err(e) = tma_sys::signal::catch() {
            eprintln!("tma: error: cannot catch SIGINT/SIGTERM: {e}");
            return ExitCode::from(2);
        }
    }
    // `tma serve` logs its stop itself (logfmt only on stderr).
    let logs_its_stop = matches!(cli.command, Command::Serve(_));
    let result = match cli.command {
        Command::Stat(a) => cmd::stat::run(a, &cli.root),
        Command::Serve(a) => cmd::serve::run(a, &cli.root),
        Command::Diff(a) => cmd::diff::run(a, &cli.root),
        Command::Report(a) => cmd::report::run(a, &cli.root),
        Command::Events(a) => cmd::events::run(a, &cli.root),
        Command::List(a) => cmd::list::run(a, &cli.root),
        Command::Locate(a) => cmd::locate::run(a, &cli.root),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Kvm(a) => cmd::kvm::run(a, &cli.root),
        Command::Doctor(a) => cmd::doctor::run(a, &cli.root),
        Command::Workload(a) => cmd::workload::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Sha256sum(a) => cmd::sha256sum::run(a),
        Command::Completions(a) => cmd::completions::run(a),
        Command::Man(a) => cmd::man::run(a),
    };
    // Interrupted: the command stopped early and said so; the status says which signal.
    let interrupted = tma_sys::signal::interrupted();
    if let (Some(sig), Ok(_)) = (interrupted, &result) {
        if !logs_its_stop {
            eprintln!(
                "tma: interrupted by {sig}: stopped early; the output covers the work done until then"
            );
        }
        return ExitCode::from(sig.exit_code());
    }
    match result {
        Ok(code) => code,
        Err(err) => {
            // A closed pipe (`tma list | head`) is not an error, as for any Unix filter.
            if err.chain().any(|c| {
                let io = c
                    .downcast_ref::<std::io::Error>()
                    .or_else(|| {
                        c.downcast_ref::<tma_render::OutputError>()
                            .and_then(tma_render::OutputError::io_error)
                    })
                    .or_else(|| {
                        c.downcast_ref::<tma_stat::StatError>()
                            .and_then(tma_stat::StatError::io_error)
                    })
                    .or_else(|| {
                        c.downcast_ref::<tma_report::ReportError>()
                            .and_then(tma_report::ReportError::io_error)
                    });
                io.is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("tma: error: {}", one_line(&err));
            if let Some(sig) = interrupted {
                eprintln!("tma: interrupted by {sig}");
                return ExitCode::from(sig.exit_code());
            }
            ExitCode::from(2)
        }
    }
}

impl Command {
    /// Commands whose work can last (counting, sampling, measuring, hashing, serving, the
    /// demo): they catch SIGINT/SIGTERM and stop their loops cleanly. The others end at once.
    fn runs_long(&self) -> bool {
        match self {
            Command::Stat(_)
            | Command::Serve(_)
            | Command::Locate(_)
            | Command::Bench(_)
            | Command::Kvm(_)
            | Command::Doctor(_)
            | Command::Workload(_)
            | Command::Demo(_)
            | Command::Sha256sum(_) => true,
            Command::Diff(_)
            | Command::Report(_)
            | Command::Events(_)
            | Command::List(_)
            | Command::Completions(_)
            | Command::Man(_) => false,
        }
    }
}

/// The error and its causes on one line, each cause once: library errors often already
/// name their cause in their own message.
fn one_line(err: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        #[derive(Debug)]
        struct Read {
            source: std::io::Error,
        }
        impl std::fmt::Display for Read {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot read x: {}", self.source)
            }
        }
        impl std::error::Error for Read {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.source)
            }
        }
        let err = anyhow::Error::new(Read { source: io }).context("restore from x");
        assert_eq!(
            one_line(&err),
            "restore from x: cannot read x: no such file"
        );
    }
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Paths and the command to measure stay OS strings from argv to the system call: every
    /// argument named like a path or a command, in every subcommand, is parsed as a PathBuf
    /// or an OsString (a `String` would refuse bytes that are not UTF-8). A new option is
    /// checked as it is added; `tests/non_utf8_args.rs` runs each with such bytes.
    #[test]
    fn every_path_and_command_argument_takes_os_strings() {
        use clap::builder::ValueParser;
        /// Arguments of `c` and its subcommands named like a path or a command that are not
        /// parsed as OS strings, and how many there are in all.
        fn walk(c: &clap::Command, at: &str, wrong: &mut Vec<String>, checked: &mut usize) {
            const NAMES: &[&str] = &[
                "FILE", "FILE.svg", "DIR", "PATH", "INPUT", "BEFORE", "AFTER", "CMD",
            ];
            let os = [
                ValueParser::path_buf().type_id(),
                ValueParser::os_string().type_id(),
            ];
            for a in c.get_arguments() {
                let names = a.get_value_names().unwrap_or_default();
                if !a.get_action().takes_values()
                    || !names.iter().any(|n| NAMES.contains(&n.as_str()))
                {
                    continue;
                }
                *checked += 1;
                if !os.contains(&a.get_value_parser().type_id()) {
                    wrong.push(format!("{at} {}", a.get_id()));
                }
            }
            for s in c.get_subcommands() {
                walk(s, &format!("{at} {}", s.get_name()), wrong, checked);
            }
        }
        let mut cli = Cli::command();
        cli.build();
        let (mut wrong, mut checked) = (Vec::new(), 0);
        walk(&cli, "tma", &mut wrong, &mut checked);
        assert!(
            wrong.is_empty(),
            "not parsed as a PathBuf or an OsString: {wrong:?}"
        );
        // stat --import/-o/--record/--plot/-G/..., diff BEFORE AFTER, every -o, every CMD.
        assert!(checked >= 40, "only {checked} path arguments found");
    }
}
