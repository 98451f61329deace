//! Structured logs: one line per event on standard error, `key=value` pairs after a
//! timestamp, a level and the event name (logfmt), e.g.
//! `ts=2026-11-26T03:40:00.123Z level=info event=listening addr=127.0.0.1:9273`.

use std::fmt::Display;
use std::io::Write;
use std::sync::Mutex;
use std::time::SystemTime;

/// A shared log sink.
pub struct Log {
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Log")
    }
}

/// Append `v` as a logfmt value: bare when it is a plain word, else quoted with `"`, `\`
/// and newlines escaped.
fn push_value(v: &str, out: &mut String) {
    let bare = !v.is_empty()
        && v.chars()
            .all(|c| !c.is_whitespace() && c != '"' && c != '=' && c != '\\' && !c.is_control());
    if bare {
        out.push_str(v);
        return;
    }
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One log line (without the newline).
pub fn line(ts: SystemTime, level: &str, event: &str, fields: &[(&str, &dyn Display)]) -> String {
    let mut s = String::with_capacity(96);
    s.push_str("ts=");
    s.push_str(&humantime::format_rfc3339_millis(ts).to_string());
    s.push_str(" level=");
    s.push_str(level);
    s.push_str(" event=");
    push_value(event, &mut s);
    for (k, v) in fields {
        s.push(' ');
        s.push_str(k);
        s.push('=');
        push_value(&v.to_string(), &mut s);
    }
    s
}

impl Log {
    pub fn new(out: Box<dyn Write + Send>) -> Log {
        Log {
            out: Mutex::new(out),
        }
    }

    /// Standard error.
    pub fn stderr() -> Log {
        Log::new(Box::new(std::io::stderr()))
    }

    /// Write one event (a failed write to the log is ignored: there is nowhere else to say so).
    pub fn event(&self, level: &str, event: &str, fields: &[(&str, &dyn Display)]) {
        let mut l = line(SystemTime::now(), level, event, fields);
        l.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = out.write_all(l.as_bytes());
        let _ = out.flush();
    }

    pub fn info(&self, event: &str, fields: &[(&str, &dyn Display)]) {
        self.event("info", event, fields);
    }
    pub fn warn(&self, event: &str, fields: &[(&str, &dyn Display)]) {
        self.event("warn", event, fields);
    }
    pub fn error(&self, event: &str, fields: &[(&str, &dyn Display)]) {
        self.event("error", event, fields);
    }
}

/// A writer for the engine's notes (`tma: ...` lines): each complete line becomes one
/// `event=note` log line (`warn` when it is a warning).
pub struct Notes<'a> {
    log: &'a Log,
    pending: Vec<u8>,
}

impl<'a> Notes<'a> {
    pub fn new(log: &'a Log) -> Notes<'a> {
        Notes {
            log,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let msg = text.strip_prefix("tma: ").unwrap_or(text);
        // Said in the exporter's own terms: `pmu_unavailable` (once, with the reason) and
        // `stopped` (with what stopped it).
        if msg.starts_with("hardware counters are not available") || msg.starts_with("interrupted:")
        {
            return;
        }
        let (level, msg) = match msg.strip_prefix("warning: ") {
            Some(m) => ("warn", m),
            None => ("info", msg),
        };
        self.log.event(level, "note", &[("msg", &msg)]);
    }
}

impl Write for Notes<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(i) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            self.emit(&line);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Notes<'_> {
    fn drop(&mut self) {
        let rest = std::mem::take(&mut self.pending);
        self.emit(&rest);
    }
}

/// Test helpers: a log sink to read back, and the keys of a logfmt line.
#[cfg(test)]
pub(crate) mod testing {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A log sink whose bytes the test can read back.
    #[derive(Clone, Default)]
    pub(crate) struct Buf(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Buf {
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The keys of one logfmt line, in order: each `key=` outside a quoted value.
    pub(crate) fn keys(line: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut rest = line.trim();
        while !rest.is_empty() {
            let (key, after) = rest
                .split_once('=')
                .unwrap_or_else(|| panic!("no `=` after {rest:?} in {line:?}"));
            assert!(
                !key.is_empty() && !key.contains(char::is_whitespace),
                "bad key {key:?} in {line:?}"
            );
            keys.push(key.to_string());
            rest = if let Some(quoted) = after.strip_prefix('"') {
                // Up to the closing quote: a backslash escapes the next character.
                let mut chars = quoted.char_indices();
                let mut end = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => {
                            end = Some(i + 1);
                            break;
                        }
                        _ => {}
                    }
                }
                let end = end.unwrap_or_else(|| panic!("unclosed quote in {line:?}"));
                &quoted[end..]
            } else {
                after.find(' ').map_or("", |i| &after[i..])
            }
            .trim_start();
        }
        keys
    }

    /// Panic when a line of `text` repeats a key.
    pub(crate) fn assert_no_duplicate_keys(text: &str) {
        for line in text.lines() {
            let keys = keys(line);
            for (i, k) in keys.iter().enumerate() {
                assert!(!keys[..i].contains(k), "key `{k}` twice in {line:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{assert_no_duplicate_keys, keys, Buf};
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn logfmt_lines() {
        let ts = UNIX_EPOCH + Duration::from_millis(1_764_128_400_123);
        let l = line(
            ts,
            "warn",
            "pmu_unavailable",
            &[
                ("reason", &"no `cpu` PMU"),
                ("n", &3),
                ("q", &"a\"b"),
                ("e", &""),
            ],
        );
        assert_eq!(
            l,
            "ts=2025-11-26T03:40:00.123Z level=warn event=pmu_unavailable \
             reason=\"no `cpu` PMU\" n=3 q=\"a\\\"b\" e=\"\""
        );
    }

    #[test]
    fn notes_become_one_event_per_line() {
        let buf = Buf::default();
        let log = Log::new(Box::new(buf.clone()));
        {
            let mut n = Notes::new(&log);
            writeln!(n, "tma: interrupted: printing what was counted so far").unwrap();
            write!(n, "tma: warning: counter group 1 not counted\ntma: hello").unwrap();
            writeln!(n, " world").unwrap();
        }
        let text = buf.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("level=warn event=note msg=\"counter group 1 not counted\""));
        assert!(lines[1].contains("level=info event=note msg=\"hello world\""));
    }

    #[test]
    fn logfmt_keys_skip_quoted_values() {
        let ts = UNIX_EPOCH + Duration::from_millis(1_764_128_400_123);
        let l = line(
            ts,
            "info",
            "note",
            &[("msg", &"a=b \"c d=e\" \\"), ("n", &1), ("e", &"")],
        );
        assert_eq!(keys(&l), ["ts", "level", "event", "msg", "n", "e"]);
        assert_no_duplicate_keys(&l);
    }

    #[test]
    #[should_panic(expected = "key `level` twice")]
    fn a_repeated_key_is_found() {
        assert_no_duplicate_keys("ts=1 level=info event=x level=2");
    }
}
