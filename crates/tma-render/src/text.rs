//! Plain-text helpers shared by every renderer: word wrapping and shell quoting.

/// Wrap `text` to `width` columns; every line starts with `indent`. Breaks at spaces; a
/// word longer than the line stays whole on its own line. An empty text gives one line
/// holding only the indent.
pub fn wrap(text: &str, indent: &str, width: usize) -> Vec<String> {
    let avail = width.saturating_sub(indent.len()).max(20);
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + word.len() > avail {
            lines.push(format!("{indent}{cur}"));
            cur.clear();
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(format!("{indent}{cur}"));
    }
    lines
}

/// Quote one word for a POSIX shell, only when it needs it: words made of letters, digits
/// and `-_./=:,+@%` stay as they are; anything else is single-quoted (a `'` inside becomes
/// `'\''`). The result pasted into `sh` gives back the same word.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Quote one OS string (an argument or a path as the user gave it) for a shell: as
/// [`shell_quote`] when it is UTF-8; otherwise in `$'...'` form (bash, zsh, ksh, POSIX.1-2024
/// `sh`) with each byte that is not printable ASCII as `\xHH`, so pasting it gives back the same
/// bytes.
pub fn shell_quote_os(s: &std::ffi::OsStr) -> String {
    if let Some(text) = s.to_str() {
        return shell_quote(text);
    }
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::from("$'");
    for &b in s.as_bytes() {
        match b {
            b'\\' | b'\'' => {
                out.push('\\');
                out.push(b as char);
            }
            b' '..=b'~' => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('\'');
    out
}

/// Join words into one shell command line, quoting each with [`shell_quote_os`].
pub fn shell_words<S: AsRef<std::ffi::OsStr>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| shell_quote_os(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces_with_indent() {
        let l = wrap("aaa bbb ccc ddd eee fff ggg hhh iii jjj kkk", "  ", 24);
        assert_eq!(
            l,
            ["  aaa bbb ccc ddd eee", "  fff ggg hhh iii jjj", "  kkk"]
        );
    }

    #[test]
    fn long_word_stays_whole() {
        let w = "x".repeat(50);
        assert_eq!(wrap(&w, "", 30), vec![w]);
    }

    #[test]
    fn quoting_only_when_needed() {
        assert_eq!(
            shell_quote("cpu/event=0xc2,umask=0x2/"),
            "cpu/event=0xc2,umask=0x2/"
        );
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("{a,b}"), "'{a,b}'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_words(&["perf", "stat", "a b"]), "perf stat 'a b'");
        use std::os::unix::ffi::OsStrExt;
        let bad = std::ffi::OsStr::from_bytes(b"it's\\ \xff");
        assert_eq!(shell_quote_os(bad), "$'it\\'s\\\\ \\xff'");
    }

    #[test]
    fn quoted_words_survive_the_shell() {
        let words = [
            "plain",
            "with space",
            "it's",
            "$HOME",
            "a\"b",
            "",
            "{x,y}",
            "*",
        ];
        let line = format!("printf '%s\\n' {}", shell_words(&words));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .output();
        let Ok(out) = out else {
            println!("skipped: no sh to run the quoted line");
            return;
        };
        let got = String::from_utf8(out.stdout).unwrap();
        let want: String = words.iter().map(|w| format!("{w}\n")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bytes_that_are_not_utf8_survive_bash() {
        use std::os::unix::ffi::OsStrExt;
        let bytes: &[u8] = b"bad\xff name's \\ \x01\xfe.csv";
        let line = format!(
            "printf '%s' {}",
            shell_quote_os(std::ffi::OsStr::from_bytes(bytes))
        );
        let Ok(out) = std::process::Command::new("bash")
            .arg("-c")
            .arg(&line)
            .output()
        else {
            println!("skipped: no bash to run the quoted line");
            return;
        };
        assert_eq!(out.stdout, bytes, "{line}");
    }
}
