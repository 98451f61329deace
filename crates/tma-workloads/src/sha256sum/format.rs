//! The checksum-line format of `sha256sum`: output lines, `--check` input lines, the
//! escaping of names holding `\`, newline or carriage return, and coreutils' quoting of
//! names in diagnostics. Everything works on bytes (file names need not be UTF-8).

use std::io;

use crate::sha256;

/// The text of an I/O error as coreutils prints it (strerror, without Rust's "(os error N)").
pub fn errno_text(e: &io::Error) -> String {
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
pub fn needs_escape(name: &[u8]) -> bool {
    name.iter().any(|&c| matches!(c, b'\\' | b'\n' | b'\r'))
}

/// Escape `\`, newline and carriage return as `\\`, `\n`, `\r`.
pub fn escape(name: &[u8]) -> Vec<u8> {
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
pub fn unescape(name: &[u8]) -> Option<Vec<u8>> {
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

/// One output line for a computed digest: `hex  name` (`hex *name` when `binary`), or
/// `SHA256 (name) = hex` when `tag`; NUL-terminated and unescaped when `zero`.
pub fn format_line(tag: bool, binary: bool, zero: bool, name: &[u8], digest: &[u8; 32]) -> Vec<u8> {
    let hex = sha256::to_hex(digest);
    let esc = !zero && needs_escape(name);
    let shown = if esc { escape(name) } else { name.to_vec() };
    let mut line = Vec::with_capacity(shown.len() + 80);
    if esc {
        line.push(b'\\');
    }
    if tag {
        line.extend_from_slice(b"SHA256 (");
        line.extend_from_slice(&shown);
        line.extend_from_slice(b") = ");
        line.extend_from_slice(hex.as_bytes());
    } else {
        line.extend_from_slice(hex.as_bytes());
        line.push(b' ');
        line.push(if binary { b'*' } else { b' ' });
        line.extend_from_slice(&shown);
    }
    line.push(if zero { 0 } else { b'\n' });
    line
}

/// A parsed checksum line.
pub struct CheckLine {
    /// The expected digest.
    pub digest: [u8; 32],
    /// The file name, unescaped.
    pub name: Vec<u8>,
}

/// Line-format state shared across a run: whether the "hex name" (single separator) format is
/// allowed. It is until a standard `hex  name` line has been seen, and once it has been used,
/// standard lines keep working but the two are not mixed the other way.
#[derive(Debug, Default)]
pub struct FormatState {
    /// None: undecided; Some(true): single-separator lines seen; Some(false): standard seen.
    reversed: Option<bool>,
}

fn is_white(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// Parse one checksum line (without its newline). `None` if improperly formatted.
pub fn parse_line(line: &[u8], st: &mut FormatState) -> Option<CheckLine> {
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

/// A name as `--check` prints it: escaped (a leading `\`, then `\\` and `\n`) only when it holds
/// a newline, carriage returns left alone, as coreutils does.
pub fn check_display_name(name: &[u8]) -> Vec<u8> {
    if !name.contains(&b'\n') {
        return name.to_vec();
    }
    let mut v = vec![b'\\'];
    for &c in name {
        match c {
            b'\\' => v.extend_from_slice(b"\\\\"),
            b'\n' => v.extend_from_slice(b"\\n"),
            _ => v.push(c),
        }
    }
    v
}
