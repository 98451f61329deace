//! `tma sha256sum`: a drop-in for coreutils `sha256sum` (`tma_workloads::sha256sum`).

use std::ffi::OsString;
use std::io::{self, BufWriter};
use std::process::ExitCode;

use tma_workloads::sha256sum::{self, Sha256sumConfig, Sha256sumError, Streams};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files to hash (or checksum files with --check); none or `-` means standard input.
    #[arg(value_name = "FILE")]
    pub files: Vec<OsString>,
    /// Read in binary mode (output marker `*`).
    #[arg(short = 'b', long, overrides_with = "text")]
    pub binary: bool,
    /// Read in text mode (default; output marker ` `).
    #[arg(short = 't', long, overrides_with = "binary")]
    pub text: bool,
    /// Read checksums from the FILEs and check them.
    #[arg(short = 'c', long)]
    pub check: bool,
    /// Create a BSD-style checksum line: `SHA256 (name) = hex`.
    #[arg(long)]
    pub tag: bool,
    /// End each output line with NUL, not newline, and do not escape file names.
    #[arg(short = 'z', long)]
    pub zero: bool,
    /// With --check: do not fail or report status for missing files.
    #[arg(long)]
    pub ignore_missing: bool,
    /// With --check: do not print OK for each successfully verified file.
    #[arg(long)]
    pub quiet: bool,
    /// With --check: print nothing; the exit status shows success.
    #[arg(long)]
    pub status: bool,
    /// With --check: exit non-zero for improperly formatted checksum lines.
    #[arg(long)]
    pub strict: bool,
    /// With --check: warn about improperly formatted checksum lines.
    #[arg(short = 'w', long)]
    pub warn: bool,
    /// SHA-256 implementation: auto (fastest), portable or ni.
    #[arg(long = "impl", value_name = "IMPL", default_value = "auto", hide_possible_values = true,
          value_parser = crate::cmd::completions::sha256_impls())]
    pub imp: String,
    /// Regular files hashed at once with interleaved SHA-NI streams (1 = one after another; the
    /// default is the widest interleave that paid off in scripts/bench-sha256.sh).
    #[arg(long, value_name = "K", default_value_t = tma_workloads::sha256::DEFAULT_LANES)]
    pub streams: usize,
}

impl Args {
    fn into_config(self) -> Sha256sumConfig {
        Sha256sumConfig {
            files: self.files,
            binary: self.binary,
            text: self.text,
            check: self.check,
            tag: self.tag,
            zero: self.zero,
            ignore_missing: self.ignore_missing,
            quiet: self.quiet,
            status: self.status,
            strict: self.strict,
            warn: self.warn,
            imp: self.imp,
            streams: self.streams,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = args.into_config();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let io = Streams {
        stdin: &mut io::stdin(),
        stdout: &mut out,
        stderr: &mut io::stderr(),
    };
    match sha256sum::run(&cfg, io) {
        Ok(outcome) => Ok(ExitCode::from(outcome.exit_code())),
        // Keep the I/O error itself in the chain, so a closed pipe is recognised.
        Err(Sha256sumError::Io(e)) => Err(e.into()),
        Err(e) => Err(e.into()),
    }
}
