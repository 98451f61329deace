//! TEMPORARY stand-in for the streaming reader being written in tma-perf (removed on merge).
#![allow(dead_code)]
use std::io::BufRead;
use tma_perf::import::{self, Breakdown, ImportError, ImportFormat, ResolveError};
use tma_perf::Interval;

pub struct IntervalReader {
    rec: import::Recording,
    next: usize,
}
impl IntervalReader {
    pub fn new(mut r: impl BufRead) -> Result<Self, ImportError> {
        let mut b = Vec::new();
        r.read_to_end(&mut b).map_err(|_| ImportError::NoData)?;
        Ok(IntervalReader {
            rec: import::parse(&b)?,
            next: 0,
        })
    }
    pub fn format(&self) -> ImportFormat {
        self.rec.format
    }
    pub fn interval_mode(&self) -> bool {
        self.rec.interval_mode
    }
    pub fn breakdown(&self) -> Breakdown {
        self.rec.breakdown
    }
    pub fn cpu_hint(&self) -> Option<&str> {
        self.rec.cpu_hint.as_deref()
    }
    pub fn next_interval(&mut self) -> Result<Option<Interval>, ImportError> {
        self.next += 1;
        Ok(self.rec.intervals.get(self.next - 1).cloned())
    }
}
pub enum Sniff {
    PerfText,
    TmaDocument,
}
pub fn sniff(p: &[u8]) -> Sniff {
    let t = String::from_utf8_lossy(p);
    match t
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    {
        Some(l) if l.starts_with('{') && (l == "{" || l.contains("\"schema\"")) => {
            Sniff::TmaDocument
        }
        _ => Sniff::PerfText,
    }
}
pub struct Resolver<'a> {
    key: &'static str,
    f: Box<dyn FnMut(&str) -> Vec<String> + 'a>,
    g: Box<dyn Fn(&[String]) -> Option<&'static str> + 'a>,
    mapping: Vec<(String, String)>,
}
impl<'a> Resolver<'a> {
    pub fn new(
        key: &'static str,
        f: Box<dyn FnMut(&str) -> Vec<String> + 'a>,
        g: Box<dyn Fn(&[String]) -> Option<&'static str> + 'a>,
    ) -> Self {
        Resolver {
            key,
            f,
            g,
            mapping: vec![],
        }
    }
    pub fn resolve(&mut self, iv: Interval) -> Result<Interval, ResolveError> {
        let g = &self.g;
        let o = import::resolve(std::slice::from_ref(&iv), self.key, &mut self.f, |u| g(u))?;
        for m in o.mapping {
            if !self.mapping.contains(&m) {
                self.mapping.push(m);
            }
        }
        Ok(o.intervals.into_iter().next().unwrap())
    }
    pub fn mapping(&self) -> &[(String, String)] {
        &self.mapping
    }
}
