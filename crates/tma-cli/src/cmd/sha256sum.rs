//! `tma sha256sum`: a drop-in for coreutils `sha256sum` built on tma-workloads' SHA-256.
//!
//! Same output (`<hex>  <name>`, `<hex> *<name>` with `-b`, BSD `SHA256 (name) = hex` with
//! `--tag`, names holding `\`, newline or carriage return escaped behind a leading `\`, `-z`
//! for NUL-terminated lines), same `--check` messages, summaries and exit codes (0 all good,
//! 1 any mismatch, unreadable file or malformed input). Diagnostics start with
//! `tma sha256sum:` instead of `sha256sum:`. Several regular files are hashed together with
//! interleaved SHA-NI streams (`--streams`), which beats hashing them one after the other.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::ExitCode;

use tma_workloads::sha256::{self, Sha256, Sha256Impl};

const PROG: &str = "tma sha256sum";

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
    #[arg(long = "impl", value_name = "IMPL", default_value = "auto")]
    pub imp: String,
    /// Regular files hashed at once with interleaved SHA-NI streams (1 = one after another).
    #[arg(long, value_name = "K", default_value_t = 4)]
    pub streams: usize,
}

/// A usage error in coreutils style: message, hint, exit status 1.
fn usage(msg: &str) -> ExitCode {
    eprintln!("{PROG}: {msg}");
    eprintln!("Try '{PROG} --help' for more information.");
    ExitCode::from(1)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let imp = Sha256Impl::parse(&args.imp)?;
    if !imp.is_available() {
        return Err(sha256::Sha256Error::NiUnavailable.into());
    }
    if args.check {
        if args.tag {
            return Ok(usage(
                "the --tag option is meaningless when verifying checksums",
            ));
        }
        if args.binary || args.text {
            return Ok(usage(
                "the --binary and --text options are meaningless when verifying checksums",
            ));
        }
        if args.zero {
            return Ok(usage(
                "the --zero option is not supported when verifying checksums",
            ));
        }
    } else {
        for (set, name) in [
            (args.ignore_missing, "--ignore-missing"),
            (args.status, "--status"),
            (args.warn, "--warn"),
            (args.quiet, "--quiet"),
            (args.strict, "--strict"),
        ] {
            if set {
                return Ok(usage(&format!(
                    "the {name} option is meaningful only when verifying checksums"
                )));
            }
        }
        if args.tag && args.text {
            return Ok(usage("--tag does not support --text mode"));
        }
    }
    let mut files = args.files.clone();
    if files.is_empty() {
        files.push(OsString::from("-"));
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let ok = if args.check {
        let mut ok = true;
        for f in &files {
            ok &= check_file(&args, imp, f, &mut out)?;
        }
        ok
    } else {
        hash_files(&args, imp, &files, &mut out)?
    };
    out.flush()?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The text of an I/O error as coreutils prints it (strerror, without Rust's "(os error N)").
fn errno_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Quote a file name for a diagnostic the way coreutils does (shell-escape style): names made
/// only of safe characters are printed as is; others are single-quoted, with `'` written as
/// `'\''` and control characters as `$'\n'`-style escapes; a name whose only special character
/// is `'` is double-quoted.
pub fn quote_name(name: &[u8]) -> String {
    const SPECIAL: &[u8] = b" !\"$&'()*;<=>?[\\]^`|:";
    let is_ctrl = |c: u8| c < 0x20 || c == 0x7f;
    let needs = name.is_empty()
        || name.iter().any(|&c| SPECIAL.contains(&c) || is_ctrl(c))
        || matches!(name.first(), Some(b'~' | b'#'));
    let text = String::from_utf8_lossy(name);
    if !needs {
        return text.into_owned();
    }
    let only_apostrophe = !name.iter().any(|&c| is_ctrl(c) || b"\"$`\\!".contains(&c));
    if name.contains(&b'\'') && only_apostrophe {
        return format!("\"{text}\"");
    }
    let mut s = String::new();
    let mut in_quote = false;
    for ch in text.chars() {
        let c = ch as u32;
        if c < 0x20 || c == 0x7f {
            if in_quote {
                s.push('\'');
                in_quote = false;
            }
            let esc = match ch {
                '\x07' => "\\a".to_string(),
                '\x08' => "\\b".to_string(),
                '\t' => "\\t".to_string(),
                '\n' => "\\n".to_string(),
                '\x0b' => "\\v".to_string(),
                '\x0c' => "\\f".to_string(),
                '\r' => "\\r".to_string(),
                _ => format!("\\{c:03o}"),
            };
            s.push_str(&format!("$'{esc}'"));
        } else {
            if !in_quote {
                s.push('\'');
                in_quote = true;
            }
            if ch == '\'' {
                s.push_str("'\\''");
            } else {
                s.push(ch);
            }
        }
    }
    if in_quote {
        s.push('\'');
    }
    s
}

/// Does a name need coreutils' escaping (a leading `\` on the line)?
fn needs_escape(name: &[u8]) -> bool {
    name.iter().any(|&c| matches!(c, b'\\' | b'\n' | b'\r'))
}

/// Escape `\`, newline and carriage return as `\\`, `\n`, `\r`.
fn escape(name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(name.len() + 4);
    for &c in name {
        match c {
            b'\\' => v.extend_from_slice(b"\\\\"),
            b'\n' => v.extend_from_slice(b"\\n"),
            b'\r' => v.extend_from_slice(b"\\r"),
            _ => v.push(c),
        }
    }
    v
}

/// Undo [`escape`]; `None` for an invalid escape sequence.
fn unescape(name: &[u8]) -> Option<Vec<u8>> {
    let mut v = Vec::with_capacity(name.len());
    let mut it = name.iter();
    while let Some(&c) = it.next() {
        if c == b'\\' {
            match it.next() {
                Some(b'\\') => v.push(b'\\'),
                Some(b'n') => v.push(b'\n'),
                Some(b'r') => v.push(b'\r'),
                _ => return None,
            }
        } else {
            v.push(c);
        }
    }
    Some(v)
}

/// One output line for a computed digest.
fn format_line(args: &Args, name: &[u8], digest: &[u8; 32]) -> Vec<u8> {
    let hex = sha256::to_hex(digest);
    let esc = !args.zero && needs_escape(name);
    let shown = if esc { escape(name) } else { name.to_vec() };
    let mut line = Vec::with_capacity(shown.len() + 80);
    if esc {
        line.push(b'\\');
    }
    if args.tag {
        line.extend_from_slice(b"SHA256 (");
        line.extend_from_slice(&shown);
        line.extend_from_slice(b") = ");
        line.extend_from_slice(hex.as_bytes());
    } else {
        line.extend_from_slice(hex.as_bytes());
        line.push(b' ');
        line.push(if args.binary { b'*' } else { b' ' });
        line.extend_from_slice(&shown);
    }
    line.push(if args.zero { 0 } else { b'\n' });
    line
}

/// An input being hashed.
enum Input {
    Stdin(io::Stdin),
    File(File),
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Stdin(s) => s.read(buf),
            Input::File(f) => f.read(buf),
        }
    }
}

fn open_input(name: &OsStr) -> io::Result<(Input, bool)> {
    if name.as_bytes() == b"-" {
        return Ok((Input::Stdin(io::stdin()), false));
    }
    let f = File::open(name)?;
    let regular = f.metadata().map(|m| m.is_file()).unwrap_or(false);
    Ok((Input::File(f), regular))
}

/// Hash one input to the end, on two threads when it is large or a stream.
fn hash_input(imp: Sha256Impl, input: Input) -> io::Result<[u8; 32]> {
    let big = match &input {
        Input::Stdin(_) => true,
        Input::File(f) => f
            .metadata()
            .map(|m| m.len() >= PIPELINE_MIN)
            .unwrap_or(false),
    };
    if big {
        hash_one_pipelined(imp, input)
    } else {
        hash_one(imp, input)
    }
}

/// Read until `buf` is full or EOF; returns bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

const CHUNK: usize = 256 * 1024;

/// Hash one input to the end.
fn hash_one(imp: Sha256Impl, mut input: Input) -> io::Result<[u8; 32]> {
    let mut h = Sha256::with_impl(imp).map_err(io::Error::other)?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = read_full(&mut input, &mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize())
}

/// Inputs at least this large (and standard input) are read by a second thread while this
/// one hashes, so the copy out of the page cache overlaps the hashing on another core.
const PIPELINE_MIN: u64 = 8 << 20;

/// [`hash_one`] with reading and hashing on two threads (three rotating buffers).
fn hash_one_pipelined(imp: Sha256Impl, input: Input) -> io::Result<[u8; 32]> {
    use std::sync::mpsc::{channel, sync_channel};
    let mut h = Sha256::with_impl(imp).map_err(io::Error::other)?;
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = sync_channel::<io::Result<(Vec<u8>, usize)>>(2);
        let (empty_tx, empty_rx) = channel::<Vec<u8>>();
        for _ in 0..3 {
            let _ = empty_tx.send(vec![0u8; CHUNK]);
        }
        scope.spawn(move || {
            let mut input = input;
            // Ends when the hashing side hangs up (both channels then fail) or at EOF/error.
            while let Ok(mut buf) = empty_rx.recv() {
                match read_full(&mut input, &mut buf) {
                    Ok(n) => {
                        if full_tx.send(Ok((buf, n))).is_err() || n == 0 {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        let result = loop {
            match full_rx.recv() {
                Ok(Ok((_, 0))) => break Ok(()),
                Ok(Ok((buf, n))) => {
                    h.update(&buf[..n]);
                    let _ = empty_tx.send(buf);
                }
                Ok(Err(e)) => break Err(e),
                Err(_) => break Err(io::Error::other("the reader thread stopped early")),
            }
        };
        // Hang up so the reader thread ends before the scope joins it.
        drop(empty_tx);
        drop(full_rx);
        result
    })?;
    Ok(h.finalize())
}

/// Hash several opened regular files together, interleaving their streams.
fn hash_batch(imp: Sha256Impl, inputs: Vec<Input>) -> Vec<io::Result<[u8; 32]>> {
    let k = inputs.len();
    let mut inputs: Vec<Option<Input>> = inputs.into_iter().map(Some).collect();
    let mut hashers: Vec<Option<Sha256>> = (0..k).map(|_| Sha256::with_impl(imp).ok()).collect();
    let mut results: Vec<Option<io::Result<[u8; 32]>>> = (0..k).map(|_| None).collect();
    let mut bufs: Vec<Vec<u8>> = (0..k).map(|_| vec![0u8; CHUNK]).collect();
    loop {
        let mut active: Vec<usize> = Vec::new();
        let mut lens = vec![0usize; k];
        for i in 0..k {
            let Some(input) = inputs[i].as_mut() else {
                continue;
            };
            match read_full(input, &mut bufs[i]) {
                Ok(0) => {
                    inputs[i] = None;
                    if let Some(h) = hashers[i].take() {
                        results[i] = Some(Ok(h.finalize()));
                    }
                }
                Ok(n) => {
                    lens[i] = n;
                    active.push(i);
                }
                Err(e) => {
                    inputs[i] = None;
                    hashers[i] = None;
                    results[i] = Some(Err(e));
                }
            }
        }
        if active.is_empty() {
            break;
        }
        let mut hs: Vec<Sha256> = active
            .iter()
            .map(|&i| hashers[i].take().expect("active hasher"))
            .collect();
        let data: Vec<&[u8]> = active.iter().map(|&i| &bufs[i][..lens[i]]).collect();
        sha256::update_many(&mut hs, &data);
        for (h, &i) in hs.into_iter().zip(&active) {
            hashers[i] = Some(h);
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(io::Error::other("internal: stream not finished"))))
        .collect()
}

fn hash_files(
    args: &Args,
    imp: Sha256Impl,
    files: &[OsString],
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let mut ok = true;
    let width = args.streams.max(1);
    let mut i = 0;
    while i < files.len() {
        // Collect up to `width` consecutive regular files; anything else is hashed alone.
        let mut batch: Vec<(usize, Input)> = Vec::new();
        let mut errors: Vec<(usize, io::Error)> = Vec::new();
        let mut single: Option<(usize, Input)> = None;
        while i < files.len() && batch.len() < width {
            match open_input(&files[i]) {
                Ok((input, true)) => batch.push((i, input)),
                Ok((input, false)) => {
                    if batch.is_empty() && errors.is_empty() {
                        single = Some((i, input));
                        i += 1;
                    }
                    break;
                }
                Err(e) => errors.push((i, e)),
            }
            i += 1;
        }
        let mut results: Vec<(usize, io::Result<[u8; 32]>)> =
            errors.into_iter().map(|(j, e)| (j, Err(e))).collect();
        if let Some((j, input)) = single {
            results.push((j, hash_input(imp, input)));
        }
        let idx: Vec<usize> = batch.iter().map(|(j, _)| *j).collect();
        let mut inputs: Vec<Input> = batch.into_iter().map(|(_, inp)| inp).collect();
        let digests = if inputs.len() == 1 {
            vec![hash_input(imp, inputs.remove(0))]
        } else {
            hash_batch(imp, inputs)
        };
        results.extend(idx.into_iter().zip(digests));
        results.sort_by_key(|(j, _)| *j);
        for (j, r) in results {
            let name = files[j].as_bytes();
            match r {
                Ok(d) => out.write_all(&format_line(args, name, &d))?,
                Err(e) => {
                    out.flush()?;
                    eprintln!("{PROG}: {}: {}", quote_name(name), errno_text(&e));
                    ok = false;
                }
            }
        }
    }
    Ok(ok)
}

/// A parsed checksum line.
struct CheckLine {
    digest: [u8; 32],
    name: Vec<u8>,
}

/// Line-format state shared across a run: whether the "hex name" (single separator) format is
/// allowed. It is until a standard `hex  name` line has been seen, and once it has been used,
/// standard lines keep working but the two are not mixed the other way.
#[derive(Default)]
struct FormatState {
    /// None: undecided; Some(true): single-separator lines seen; Some(false): standard seen.
    reversed: Option<bool>,
}

fn is_white(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// Parse one checksum line (without its newline). `None` if improperly formatted.
fn parse_line(line: &[u8], st: &mut FormatState) -> Option<CheckLine> {
    let mut i = 0;
    while i < line.len() && is_white(line[i]) {
        i += 1;
    }
    let mut escaped = false;
    if line.get(i) == Some(&b'\\') {
        escaped = true;
        i += 1;
    }
    let rest = &line[i..];
    let unesc = |n: &[u8]| -> Option<Vec<u8>> {
        if escaped {
            unescape(n)
        } else {
            Some(n.to_vec())
        }
    };
    if let Some(after) = rest.strip_prefix(b"SHA256") {
        // BSD format: SHA256 (name) = hex
        let after = after.strip_prefix(b" ").unwrap_or(after);
        let body = after.strip_prefix(b"(")?;
        let close = body.iter().rposition(|&c| c == b')')?;
        let name = &body[..close];
        let mut j = close + 1;
        while j < body.len() && is_white(body[j]) {
            j += 1;
        }
        if body.get(j) != Some(&b'=') {
            return None;
        }
        j += 1;
        while j < body.len() && is_white(body[j]) {
            j += 1;
        }
        let digest = sha256::from_hex(&body[j..])?;
        return Some(CheckLine {
            digest,
            name: unesc(name)?,
        });
    }
    // Standard format: 64 hex digits, a white space, then ' ' or '*' and the name.
    if rest.len() < 64 + 2 {
        return None;
    }
    let digest = sha256::from_hex(&rest[..64])?;
    if !is_white(rest[64]) {
        return None;
    }
    let tail = &rest[65..];
    let name = if tail.len() == 1 || (tail[0] != b' ' && tail[0] != b'*') {
        if st.reversed == Some(false) {
            return None;
        }
        st.reversed = Some(true);
        tail
    } else {
        if st.reversed != Some(true) {
            st.reversed = Some(false);
        }
        &tail[1..]
    };
    if name.is_empty() {
        return None;
    }
    Some(CheckLine {
        digest,
        name: unesc(name)?,
    })
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
    args: &Args,
    imp: Sha256Impl,
    checkfile: &OsStr,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let cname = checkfile.as_bytes();
    let content = if cname == b"-" {
        let mut v = Vec::new();
        io::stdin().lock().read_to_end(&mut v).map(|_| v)
    } else {
        std::fs::read(checkfile)
    };
    let content = match content {
        Ok(c) => c,
        Err(e) => {
            out.flush()?;
            eprintln!("{PROG}: {}: {}", quote_name(cname), errno_text(&e));
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
    for (lineno, raw) in lines.into_iter().enumerate() {
        if raw.first() == Some(&b'#') {
            continue;
        }
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        let Some(entry) = parse_line(line, &mut st) else {
            malformed += 1;
            if args.warn {
                out.flush()?;
                eprintln!(
                    "{PROG}: {}: {}: improperly formatted SHA256 checksum line",
                    quote_name(cname),
                    lineno + 1
                );
            }
            continue;
        };
        formatted += 1;
        let name_os = OsString::from_vec(entry.name.clone());
        // Check output escapes (leading `\`, then `\\` and `\n`) only names with a newline,
        // and leaves carriage returns alone, as coreutils does.
        let shown = if entry.name.contains(&b'\n') {
            let mut v = vec![b'\\'];
            for &c in &entry.name {
                match c {
                    b'\\' => v.extend_from_slice(b"\\\\"),
                    b'\n' => v.extend_from_slice(b"\\n"),
                    _ => v.push(c),
                }
            }
            v
        } else {
            entry.name.clone()
        };
        let result = open_input(&name_os).and_then(|(input, _)| hash_input(imp, input));
        match result {
            Err(e) => {
                if args.ignore_missing && e.kind() == io::ErrorKind::NotFound {
                    continue;
                }
                unreadable += 1;
                out.flush()?;
                eprintln!("{PROG}: {}: {}", quote_name(&entry.name), errno_text(&e));
                if !args.status {
                    out.write_all(&shown)?;
                    out.write_all(b": FAILED open or read\n")?;
                }
            }
            Ok(d) if d == entry.digest => {
                verified += 1;
                if !args.status && !args.quiet {
                    out.write_all(&shown)?;
                    out.write_all(b": OK\n")?;
                }
            }
            Ok(_) => {
                mismatched += 1;
                if !args.status {
                    out.write_all(&shown)?;
                    out.write_all(b": FAILED\n")?;
                }
            }
        }
    }
    out.flush()?;
    if formatted == 0 {
        eprintln!(
            "{PROG}: {}: no properly formatted checksum lines found",
            quote_name(cname)
        );
        return Ok(false);
    }
    if !args.status {
        if malformed > 0 {
            eprintln!(
                "{PROG}: WARNING: {malformed} {}",
                plural(
                    malformed,
                    "line is improperly formatted",
                    "lines are improperly formatted"
                )
            );
        }
        if unreadable > 0 {
            eprintln!(
                "{PROG}: WARNING: {unreadable} {}",
                plural(
                    unreadable,
                    "listed file could not be read",
                    "listed files could not be read"
                )
            );
        }
        if mismatched > 0 {
            eprintln!(
                "{PROG}: WARNING: {mismatched} {}",
                plural(
                    mismatched,
                    "computed checksum did NOT match",
                    "computed checksums did NOT match"
                )
            );
        }
    }
    let mut ok = mismatched == 0 && unreadable == 0 && !(args.strict && malformed > 0);
    if args.ignore_missing && verified == 0 && mismatched == 0 && unreadable == 0 {
        if !args.status {
            eprintln!("{PROG}: {}: no file was verified", quote_name(cname));
        }
        ok = false;
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_coreutils_examples() {
        assert_eq!(quote_name(b"plain.txt"), "plain.txt");
        assert_eq!(quote_name(b"x y"), "'x y'");
        assert_eq!(quote_name(b"it's"), "\"it's\"");
        assert_eq!(quote_name(b"n\nl"), "'n'$'\\n''l'");
        assert_eq!(quote_name(b"q\x01"), "'q'$'\\001'");
        assert_eq!(quote_name(b"a'b\"c"), "'a'\\''b\"c'");
        assert_eq!(quote_name(b"~ab"), "'~ab'");
        assert_eq!(quote_name(b"a~"), "a~");
        assert_eq!(quote_name(b"a:b"), "'a:b'");
    }

    #[test]
    fn escape_round_trip() {
        let n = b"a\\b\nc\rd";
        assert!(needs_escape(n));
        assert_eq!(unescape(&escape(n)).unwrap(), n.to_vec());
        assert_eq!(unescape(b"a\\x"), None);
    }

    #[test]
    fn line_formats() {
        let hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let mut st = FormatState::default();
        let l = parse_line(format!("{hex}  a b").as_bytes(), &mut st).unwrap();
        assert_eq!(l.name, b"a b");
        let l = parse_line(format!("{hex} *bin").as_bytes(), &mut st).unwrap();
        assert_eq!(l.name, b"bin");
        // Standard format seen: the single-separator format is now refused.
        assert!(parse_line(format!("{hex} x").as_bytes(), &mut st).is_none());
        let mut st = FormatState::default();
        let l = parse_line(format!("SHA256 (x) y) = {hex}").as_bytes(), &mut st).unwrap();
        assert_eq!(l.name, b"x) y");
        assert!(parse_line(b"garbage", &mut st).is_none());
        assert!(parse_line(format!("{hex}x  a").as_bytes(), &mut st).is_none());
        let l = parse_line(format!("\\{hex}  a\\nb").as_bytes(), &mut st).unwrap();
        assert_eq!(l.name, b"a\nb");
    }
}
