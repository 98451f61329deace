//! A reader that can look ahead: the lines read ahead are kept and handed out again, so a
//! streaming reader can decide something from a window of a file (how perf's text wrote
//! its numbers) before it parses the first line of that window.

use std::io::{BufRead, Read, Result};

pub(super) struct Replay<R> {
    /// Bytes read ahead and not yet handed out from `pos` on.
    head: Vec<u8>,
    pos: usize,
    inner: R,
}

impl<R: BufRead> Replay<R> {
    pub fn new(inner: R) -> Self {
        Replay {
            head: Vec::new(),
            pos: 0,
            inner,
        }
    }

    /// The next (at least) `bytes` bytes, or what is left when the input ends sooner, read
    /// in whole lines; they stay to be read.
    pub fn look_ahead(&mut self, bytes: usize) -> Result<&[u8]> {
        while self.head.len() - self.pos < bytes {
            if self.inner.read_until(b'\n', &mut self.head)? == 0 {
                break;
            }
        }
        Ok(&self.head[self.pos..])
    }
}

impl<R: BufRead> Read for Replay<R> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let n = {
            let available = self.fill_buf()?;
            let n = available.len().min(buf.len());
            buf[..n].copy_from_slice(&available[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Replay<R> {
    fn fill_buf(&mut self) -> Result<&[u8]> {
        if self.pos < self.head.len() {
            Ok(&self.head[self.pos..])
        } else {
            self.inner.fill_buf()
        }
    }

    fn consume(&mut self, n: usize) {
        if self.pos < self.head.len() {
            self.pos += n;
            if self.pos >= self.head.len() {
                self.head.clear();
                self.pos = 0;
            }
        } else {
            self.inner.consume(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_looked_at_is_read_again() {
        let mut r = Replay::new(&b"one\ntwo\nthree\nfour"[..]);
        let mut line = Vec::new();
        r.read_until(b'\n', &mut line).unwrap();
        assert_eq!(line, b"one\n");
        assert_eq!(r.look_ahead(5).unwrap(), b"two\nthree\n");
        assert_eq!(r.look_ahead(100).unwrap(), b"two\nthree\nfour");
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "two\nthree\nfour");
    }
}
