//! A drop-in for coreutils `sha256sum` built on this crate's SHA-256 (`tma sha256sum`).
//!
//! Same output (`<hex>  <name>`, `<hex> *<name>` with `-b`, BSD `SHA256 (name) = hex` with
//! `--tag`, names holding `\`, newline or carriage return escaped behind a leading `\`, `-z`
//! for NUL-terminated lines), same `--check` messages, summaries and exit codes (0 all good,
//! 1 any mismatch, unreadable file or malformed input). Diagnostics start with
//! `tma sha256sum:` instead of `sha256sum:`. Several regular files are hashed together with
//! interleaved SHA-NI streams ([`Sha256sumConfig::streams`]), which beats hashing them one
//! after the other.
//!
//! [`run`] takes the standard streams as parameters, so it can be driven without a terminal.
//! The checksum-line format (parsing, escaping, diagnostic quoting) lives in [`mod@format`].

pub mod format;
mod hash;

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use crate::sha256::{Sha256Error, Sha256Impl};
use format::{errno_text, format_line, parse_line, quote_name, FormatState};
use hash::{hash_files_batched, Rolling};

/// Program name at the start of every diagnostic.
pub const PROG: &str = "tma sha256sum";

/// What to do: the options of coreutils `sha256sum` plus the implementation and stream count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sha256sumConfig {
    /// Files to hash (or checksum files with `check`); empty means standard input (`-`).
    pub files: Vec<OsString>,
    /// `-b`: binary mode (output marker `*`).
    pub binary: bool,
    /// `-t`: text mode (default; output marker ` `).
    pub text: bool,
    /// `-c`: read checksums from the files and check them.
    pub check: bool,
    /// `--tag`: BSD-style lines.
    pub tag: bool,
    /// `-z`: NUL-terminated output lines, names not escaped.
    pub zero: bool,
    /// `--ignore-missing` (with `check`).
    pub ignore_missing: bool,
    /// `--quiet` (with `check`).
    pub quiet: bool,
    /// `--status` (with `check`).
    pub status: bool,
    /// `--strict` (with `check`).
    pub strict: bool,
    /// `-w`/`--warn` (with `check`).
    pub warn: bool,
    /// Implementation name: `auto`, `portable` or `ni`.
    pub imp: String,
    /// Regular files hashed at once with interleaved SHA-NI streams (1 = one after another).
    pub streams: usize,
}

impl Default for Sha256sumConfig {
    fn default() -> Self {
        Sha256sumConfig {
            files: Vec::new(),
            binary: false,
            text: false,
            check: false,
            tag: false,
            zero: false,
            ignore_missing: false,
            quiet: false,
            status: false,
            strict: false,
            warn: false,
            imp: "auto".to_string(),
            streams: crate::sha256::DEFAULT_LANES,
        }
    }
}

/// How a run ended; the diagnostics are already written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sha256sumOutcome {
    /// Every file was hashed or verified.
    Ok,
    /// A file could not be read, a checksum did not match, or the input was malformed.
    Failed,
    /// Contradictory options (coreutils-style message and hint written).
    Usage,
}

impl Sha256sumOutcome {
    /// The process exit status coreutils uses: 0 for [`Ok`](Self::Ok), 1 otherwise.
    pub fn exit_code(self) -> u8 {
        match self {
            Sha256sumOutcome::Ok => 0,
            Sha256sumOutcome::Failed | Sha256sumOutcome::Usage => 1,
        }
    }
}

/// Failures that stop a run (as opposed to per-file problems, which are diagnostics).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Sha256sumError {
    /// Unknown or unavailable implementation.
    #[error(transparent)]
    Impl(#[from] Sha256Error),
    /// Writing the output or a diagnostic failed (for example a closed pipe).
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The standard streams of a run.
pub struct Streams<'a> {
    /// Standard input (`-`); read on a second thread for large inputs, hence `Send`.
    pub stdin: &'a mut (dyn Read + Send),
    /// Output lines; flushed before every diagnostic and at the end.
    pub stdout: &'a mut dyn Write,
    /// Diagnostics.
    pub stderr: &'a mut dyn Write,
}

/// A usage error in coreutils style: message, hint, exit status 1.
fn usage(err: &mut dyn Write, msg: &str) -> io::Result<Sha256sumOutcome> {
    writeln!(err, "{PROG}: {msg}")?;
    writeln!(err, "Try '{PROG} --help' for more information.")?;
    Ok(Sha256sumOutcome::Usage)
}

/// Option combinations coreutils refuses, as the message it prints.
fn usage_problem(cfg: &Sha256sumConfig) -> Option<String> {
    if cfg.check {
        if cfg.tag {
            return Some("the --tag option is meaningless when verifying checksums".into());
        }
        if cfg.binary || cfg.text {
            return Some(
                "the --binary and --text options are meaningless when verifying checksums".into(),
            );
        }
        if cfg.zero {
            return Some("the --zero option is not supported when verifying checksums".into());
        }
    } else {
        for (set, name) in [
            (cfg.ignore_missing, "--ignore-missing"),
            (cfg.status, "--status"),
            (cfg.warn, "--warn"),
            (cfg.quiet, "--quiet"),
            (cfg.strict, "--strict"),
        ] {
            if set {
                return Some(format!(
                    "the {name} option is meaningful only when verifying checksums"
                ));
            }
        }
        if cfg.tag && cfg.text {
            return Some("--tag does not support --text mode".into());
        }
    }
    None
}

/// Hash (or with `check`, verify) the configured files.
pub fn run(cfg: &Sha256sumConfig, io: Streams<'_>) -> Result<Sha256sumOutcome, Sha256sumError> {
    let imp = Sha256Impl::parse(&cfg.imp)?;
    if !imp.is_available() {
        return Err(Sha256Error::NiUnavailable.into());
    }
    if let Some(msg) = usage_problem(cfg) {
        return Ok(usage(io.stderr, &msg)?);
    }
    let mut files = cfg.files.clone();
    if files.is_empty() {
        files.push(OsString::from("-"));
    }
    let Streams {
        stdin,
        stdout: out,
        stderr: err,
    } = io;
    let done = if cfg.check {
        let mut ok = Ok(true);
        for f in &files {
            match check_file(cfg, imp, f, stdin, out, err) {
                Ok(good) => ok = ok.map(|o| o & good),
                Err(e) => {
                    ok = Err(e);
                    break;
                }
            }
        }
        ok
    } else {
        hash_files(cfg, imp, &files, stdin, out, err)
    };
    let ok = match (done, tma_sys::signal::interrupted()) {
        // SIGINT/SIGTERM: the lines written so far stand; the rest was not read.
        (Err(e), Some(sig)) if e.kind() == io::ErrorKind::Interrupted => {
            out.flush()?;
            writeln!(
                err,
                "{PROG}: interrupted by {sig}: the inputs after the last line shown were not {}",
                if cfg.check { "checked" } else { "hashed" }
            )?;
            false
        }
        (done, _) => done?,
    };
    out.flush()?;
    Ok(if ok {
        Sha256sumOutcome::Ok
    } else {
        Sha256sumOutcome::Failed
    })
}

/// The error that stops hashing after SIGINT/SIGTERM (kind `Interrupted`).
fn interrupted_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted")
}

fn hash_files(
    cfg: &Sha256sumConfig,
    imp: Sha256Impl,
    files: &[OsString],
    stdin: &mut (dyn Read + Send),
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<bool> {
    let mut ok = true;
    let mut emit = |j: usize, r: io::Result<[u8; 32]>| -> io::Result<()> {
        // A digest finished is still shown; the input the signal cut short ends the run.
        if r.is_err() && tma_sys::signal::interrupted().is_some() {
            return Err(interrupted_error());
        }
        let name = files[j].as_bytes();
        match r {
            Ok(d) => out.write_all(&format_line(cfg.tag, cfg.binary, cfg.zero, name, &d))?,
            Err(e) => {
                out.flush()?;
                writeln!(err, "{PROG}: {}: {}", quote_name(name), errno_text(&e))?;
                ok = false;
            }
        }
        Ok(())
    };
    hash_files_batched(
        imp,
        files,
        Rolling::for_this_host(cfg.streams.max(1)),
        stdin,
        &mut emit,
    )?;
    Ok(ok)
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// Check one checksum file; returns whether everything in it verified.
fn check_file(
    cfg: &Sha256sumConfig,
    imp: Sha256Impl,
    checkfile: &OsStr,
    stdin: &mut (dyn Read + Send),
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<bool> {
    let cname = checkfile.as_bytes();
    let content = if cname == b"-" {
        let mut v = Vec::new();
        stdin.read_to_end(&mut v).map(|_| v)
    } else {
        std::fs::read(checkfile)
    };
    let content = match content {
        Ok(c) => c,
        Err(e) => {
            out.flush()?;
            writeln!(err, "{PROG}: {}: {}", quote_name(cname), errno_text(&e))?;
            return Ok(false);
        }
    };
    let mut st = FormatState::default();
    let (mut formatted, mut malformed, mut unreadable, mut mismatched, mut verified) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut lines: Vec<&[u8]> = content.split(|&c| c == b'\n').collect();
    if content.last() == Some(&b'\n') {
        lines.pop();
    }
    // Parse every line first; the listed files are then hashed like several files are (the
    // lanes of `--streams`), and the malformed-line warnings and the results come out in the
    // order of the lines.
    enum Item {
        Malformed(usize),
        Entry { name: Vec<u8>, digest: [u8; 32] },
    }
    let mut items: Vec<Item> = Vec::new();
    let mut names: Vec<OsString> = Vec::new();
    for (lineno, raw) in lines.into_iter().enumerate() {
        if raw.first() == Some(&b'#') {
            continue;
        }
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        match parse_line(line, &mut st) {
            Some(entry) => {
                formatted += 1;
                names.push(OsString::from_vec(entry.name.clone()));
                items.push(Item::Entry {
                    name: entry.name,
                    digest: entry.digest,
                });
            }
            None => items.push(Item::Malformed(lineno)),
        }
    }
    let mut pending = items.into_iter();
    // Write the warnings up to the next entry and return that entry.
    let mut upto_entry = |out: &mut dyn Write,
                          err: &mut dyn Write,
                          malformed: &mut u64|
     -> io::Result<Option<(Vec<u8>, [u8; 32])>> {
        for item in pending.by_ref() {
            match item {
                Item::Malformed(lineno) => {
                    *malformed += 1;
                    if cfg.warn {
                        out.flush()?;
                        writeln!(
                            err,
                            "{PROG}: {}: {}: improperly formatted SHA256 checksum line",
                            quote_name(cname),
                            lineno + 1
                        )?;
                    }
                }
                Item::Entry { name, digest } => return Ok(Some((name, digest))),
            }
        }
        Ok(None)
    };
    let mut emit = |_: usize, result: io::Result<[u8; 32]>| -> io::Result<()> {
        if result.is_err() && tma_sys::signal::interrupted().is_some() {
            return Err(interrupted_error());
        }
        let (name, want) = upto_entry(&mut *out, &mut *err, &mut malformed)?.ok_or_else(|| {
            io::Error::other("internal: more files hashed than checksum lines listed")
        })?;
        let shown = format::check_display_name(&name);
        match result {
            Err(e) => {
                if cfg.ignore_missing && e.kind() == io::ErrorKind::NotFound {
                    return Ok(());
                }
                unreadable += 1;
                out.flush()?;
                writeln!(err, "{PROG}: {}: {}", quote_name(&name), errno_text(&e))?;
                if !cfg.status {
                    out.write_all(&shown)?;
                    out.write_all(b": FAILED open or read\n")?;
                }
            }
            Ok(d) if d == want => {
                verified += 1;
                if !cfg.status && !cfg.quiet {
                    out.write_all(&shown)?;
                    out.write_all(b": OK\n")?;
                }
            }
            Ok(_) => {
                mismatched += 1;
                if !cfg.status {
                    out.write_all(&shown)?;
                    out.write_all(b": FAILED\n")?;
                }
            }
        }
        Ok(())
    };
    hash_files_batched(
        imp,
        &names,
        Rolling::for_this_host(cfg.streams.max(1)),
        stdin,
        &mut emit,
    )?;
    // The warnings after the last entry (every entry was consumed by a result).
    upto_entry(&mut *out, &mut *err, &mut malformed)?;
    out.flush()?;
    if formatted == 0 {
        writeln!(
            err,
            "{PROG}: {}: no properly formatted checksum lines found",
            quote_name(cname)
        )?;
        return Ok(false);
    }
    if !cfg.status {
        if malformed > 0 {
            writeln!(
                err,
                "{PROG}: WARNING: {malformed} {}",
                plural(
                    malformed,
                    "line is improperly formatted",
                    "lines are improperly formatted"
                )
            )?;
        }
        if unreadable > 0 {
            writeln!(
                err,
                "{PROG}: WARNING: {unreadable} {}",
                plural(
                    unreadable,
                    "listed file could not be read",
                    "listed files could not be read"
                )
            )?;
        }
        if mismatched > 0 {
            writeln!(
                err,
                "{PROG}: WARNING: {mismatched} {}",
                plural(
                    mismatched,
                    "computed checksum did NOT match",
                    "computed checksums did NOT match"
                )
            )?;
        }
    }
    let mut ok = mismatched == 0 && unreadable == 0 && !(cfg.strict && malformed > 0);
    if cfg.ignore_missing && verified == 0 && mismatched == 0 && unreadable == 0 {
        if !cfg.status {
            writeln!(err, "{PROG}: {}: no file was verified", quote_name(cname))?;
        }
        ok = false;
    }
    Ok(ok)
}

#[cfg(test)]
mod tests;
