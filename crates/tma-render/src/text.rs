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

/// Join words into one shell command line, quoting each with [`shell_quote`].
pub fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w.as_ref()))
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
}
