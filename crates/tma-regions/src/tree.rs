//! Regions as the protocol describes them, gathered into one tree per thread: each `begin`
//! reads the thread's counters, each `end` charges the difference to the region's node
//! (named by the path of open regions), and `total` lines (counted in process) add in
//! directly. Counting itself is behind [`ThreadCounters`], so the bookkeeping is tested with
//! chosen counts.

use std::collections::BTreeMap;
use std::time::Instant;

use tma_marker::protocol::{add_deltas, add_groups, GroupCount, Message};

/// The counters of the threads that name regions: opened at a thread's first `begin`.
pub trait ThreadCounters {
    /// Start counting thread `tid` (once per thread).
    fn open(&mut self, tid: u32) -> Result<(), String>;
    /// The cumulative counts of `tid`'s groups, in plan order.
    fn read(&mut self, tid: u32) -> Result<Vec<GroupCount>, String>;
}

/// One region of a tree, with everything charged to it (its nested regions included).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegionNode {
    pub name: String,
    pub calls: u64,
    pub wall_ns: u64,
    /// Per counter group of the plan.
    pub counts: Vec<GroupCount>,
    pub children: Vec<RegionNode>,
}

impl RegionNode {
    /// The node at `path` under this one, created as needed.
    pub fn at(&mut self, path: &[String]) -> &mut RegionNode {
        let mut node = self;
        for name in path {
            let i = match node.children.iter().position(|c| &c.name == name) {
                Some(i) => i,
                None => {
                    node.children.push(RegionNode {
                        name: name.clone(),
                        ..RegionNode::default()
                    });
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i];
        }
        node
    }

    /// Add `other`'s figures (and its children's, by name) into this node.
    pub fn merge(&mut self, other: &RegionNode) {
        self.calls += other.calls;
        self.wall_ns += other.wall_ns;
        add_groups(&mut self.counts, &other.counts);
        for c in &other.children {
            self.at(std::slice::from_ref(&c.name)).merge(c);
        }
    }

    /// Regions in the order they were first seen, depth first, with their depth (the root,
    /// which has no name, is left out).
    pub fn walk(&self) -> Vec<(usize, Vec<&str>, &RegionNode)> {
        fn go<'a>(
            n: &'a RegionNode,
            path: &mut Vec<&'a str>,
            out: &mut Vec<(usize, Vec<&'a str>, &'a RegionNode)>,
        ) {
            for c in &n.children {
                path.push(&c.name);
                out.push((path.len() - 1, path.clone(), c));
                go(c, path, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        go(self, &mut Vec::new(), &mut out);
        out
    }
}

/// A region a thread has begun and not ended.
#[derive(Debug, Clone)]
struct Open {
    name: String,
    t0: Instant,
    start: Option<Vec<GroupCount>>,
}

/// What the collector answers to an acknowledged line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Nothing asked.
    None,
    Ok,
    Error(String),
}

/// Spans kept per thread for the timeline (the first ones; the rest are counted).
pub const MAX_SPANS: usize = tma_marker::protocol::MAX_SPANS;

/// One region's begin and end on a thread, in nanoseconds since the collector's origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// From the outermost open region in.
    pub path: Vec<String>,
    pub begin_ns: u64,
    pub end_ns: u64,
}

/// A thread's spans, and how many more there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadSpans {
    pub spans: Vec<Span>,
    pub dropped: u64,
}

/// Every thread's regions so far.
#[derive(Debug, Default)]
pub struct Collector {
    /// Per thread: its tree (root without a name) and its open regions.
    threads: BTreeMap<u32, (RegionNode, Vec<Open>)>,
    /// Per thread: the regions seen begin and end (the timeline).
    spans: BTreeMap<u32, ThreadSpans>,
    /// What span times count from (the program's start; else the first line), and that
    /// time on `CLOCK_MONOTONIC` (for spans the program timed itself).
    origin: Option<(Instant, u64)>,
    /// Threads whose counters could not be opened, and why (time and calls still count).
    uncounted: BTreeMap<u32, String>,
    /// Problems to show as notes.
    pub notes: Vec<String>,
}

impl Collector {
    /// A collector whose timeline counts from `origin` (the program's start).
    pub fn new(origin: Instant) -> Collector {
        Collector {
            origin: Some((origin, tma_marker::protocol::monotonic_ns(origin))),
            ..Collector::default()
        }
    }

    /// Handle one message, with the time it arrived.
    pub fn handle(
        &mut self,
        m: Message,
        now: Instant,
        counters: &mut dyn ThreadCounters,
    ) -> Answer {
        let (origin, origin_ns) = *self
            .origin
            .get_or_insert_with(|| (now, tma_marker::protocol::monotonic_ns(now)));
        match m {
            Message::Begin { tid, name, ack } => {
                let start = self.read(tid, counters);
                let (_, stack) = self.threads.entry(tid).or_default();
                stack.push(Open {
                    name,
                    t0: now,
                    start,
                });
                if ack {
                    Answer::Ok
                } else {
                    Answer::None
                }
            }
            Message::End { tid, name, ack } => {
                let err = self.end(tid, &name, now, origin, counters).err();
                match (ack, err) {
                    (false, Some(e)) => {
                        self.notes.push(e);
                        Answer::None
                    }
                    (false, None) => Answer::None,
                    (true, Some(e)) => {
                        self.notes.push(e.clone());
                        Answer::Error(e)
                    }
                    (true, None) => Answer::Ok,
                }
            }
            Message::Total {
                tid,
                path,
                calls,
                wall_ns,
                counts,
            } => {
                let (root, _) = self.threads.entry(tid).or_default();
                let node = root.at(&path);
                node.calls += calls;
                node.wall_ns += wall_ns;
                add_groups(&mut node.counts, &counts);
                Answer::None
            }
            Message::Span {
                tid,
                path,
                begin_ns,
                end_ns,
            } => {
                let spans = self.spans.entry(tid).or_default();
                if spans.spans.len() < MAX_SPANS {
                    spans.spans.push(Span {
                        path,
                        begin_ns: begin_ns.saturating_sub(origin_ns),
                        end_ns: end_ns.saturating_sub(origin_ns),
                    });
                } else {
                    spans.dropped += 1;
                }
                Answer::None
            }
            Message::Error { tid, text } => {
                self.notes.push(format!("thread {tid}: {text}"));
                Answer::None
            }
        }
    }

    /// The counts of `tid` now, opening its counters at its first region.
    fn read(&mut self, tid: u32, counters: &mut dyn ThreadCounters) -> Option<Vec<GroupCount>> {
        if self.uncounted.contains_key(&tid) {
            return None;
        }
        if !self.threads.contains_key(&tid) {
            if let Err(e) = counters.open(tid) {
                self.notes.push(format!(
                    "thread {tid}: its counters could not be opened ({e}): its regions carry \
                     time and calls only"
                ));
                self.uncounted.insert(tid, e);
                return None;
            }
        }
        match counters.read(tid) {
            Ok(c) => Some(c),
            Err(e) => {
                self.notes
                    .push(format!("thread {tid}: reading its counters failed: {e}"));
                None
            }
        }
    }

    fn end(
        &mut self,
        tid: u32,
        name: &str,
        now: Instant,
        origin: Instant,
        counters: &mut dyn ThreadCounters,
    ) -> Result<(), String> {
        let top = self
            .threads
            .get(&tid)
            .and_then(|(_, s)| s.last())
            .map(|o| o.name.clone());
        match top {
            None => {
                return Err(format!(
                    "thread {tid}: end {name:?} with no region open: ignored"
                ))
            }
            Some(t) if t != name => {
                return Err(format!(
                    "thread {tid}: end {name:?} while {t:?} is its innermost open region: ignored"
                ))
            }
            Some(_) => {}
        }
        let end = self.read(tid, counters);
        let (root, stack) = self.threads.get_mut(&tid).expect("checked above");
        let path: Vec<String> = stack.iter().map(|o| o.name.clone()).collect();
        let open = stack.pop().expect("checked above");
        let node = root.at(&path);
        node.calls += 1;
        node.wall_ns += now.saturating_duration_since(open.t0).as_nanos() as u64;
        if let (Some(a), Some(b)) = (end, open.start) {
            add_deltas(&mut node.counts, &a, &b);
        }
        let spans = self.spans.entry(tid).or_default();
        if spans.spans.len() < MAX_SPANS {
            let ns = |t: Instant| t.saturating_duration_since(origin).as_nanos() as u64;
            spans.spans.push(Span {
                path,
                begin_ns: ns(open.t0),
                end_ns: ns(now),
            });
        } else {
            spans.dropped += 1;
        }
        Ok(())
    }

    /// The trees: per thread, and every thread merged. Regions still open are noted (and not
    /// counted).
    pub fn finish(mut self) -> Regions {
        let mut threads = Vec::new();
        let mut merged = RegionNode::default();
        for (tid, (root, stack)) in std::mem::take(&mut self.threads) {
            for o in &stack {
                self.notes.push(format!(
                    "thread {tid}: region {:?} was still open when the program ended: not counted",
                    o.name
                ));
            }
            if root.children.is_empty() {
                continue;
            }
            merged.merge(&root);
            threads.push((tid, root));
        }
        Regions {
            threads,
            merged,
            notes: self.notes,
            uncounted: self.uncounted.into_keys().collect(),
            spans: self.spans.into_iter().collect(),
        }
    }
}

/// The regions of a run.
#[derive(Debug, Clone, Default)]
pub struct Regions {
    /// (tid, tree) by thread id.
    pub threads: Vec<(u32, RegionNode)>,
    /// Every thread's tree added up, region by region.
    pub merged: RegionNode,
    pub notes: Vec<String>,
    /// Threads whose counters could not be opened.
    pub uncounted: Vec<u32>,
    /// Per thread, the regions tma saw begin and end on the FIFO, and those the program timed
    /// itself (`span` lines).
    pub spans: Vec<(u32, ThreadSpans)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Counters that advance by chosen amounts at every read.
    #[derive(Default)]
    struct Steps {
        reads: BTreeMap<u32, u64>,
        fail_open: Option<u32>,
    }

    impl ThreadCounters for Steps {
        fn open(&mut self, tid: u32) -> Result<(), String> {
            if self.fail_open == Some(tid) {
                return Err("EACCES".into());
            }
            Ok(())
        }
        fn read(&mut self, tid: u32) -> Result<Vec<GroupCount>, String> {
            let n = self.reads.entry(tid).or_default();
            *n += 1;
            // Thread 2 counts ten times faster than thread 1.
            let k = *n * 100 * u64::from(tid).pow(2);
            Ok(vec![GroupCount {
                enabled: k,
                running: k,
                values: vec![k, *n],
            }])
        }
    }

    fn begin(tid: u32, name: &str) -> Message {
        Message::Begin {
            tid,
            name: name.into(),
            ack: true,
        }
    }
    fn end(tid: u32, name: &str) -> Message {
        Message::End {
            tid,
            name: name.into(),
            ack: false,
        }
    }

    #[test]
    fn nested_regions_are_charged_their_own_deltas_per_thread() {
        let mut c = Collector::default();
        let mut k = Steps::default();
        let t = Instant::now();
        let ms = |n| t + Duration::from_millis(n);
        assert_eq!(c.handle(begin(1, "outer"), ms(0), &mut k), Answer::Ok);
        c.handle(begin(1, "inner"), ms(1), &mut k);
        c.handle(begin(3, "outer"), ms(1), &mut k);
        c.handle(end(1, "inner"), ms(3), &mut k);
        c.handle(end(3, "outer"), ms(4), &mut k);
        c.handle(end(1, "outer"), ms(10), &mut k);
        let r = c.finish();
        assert!(r.notes.is_empty(), "{:?}", r.notes);
        let t1 = &r.threads[0].1;
        assert_eq!(r.threads[0].0, 1);
        let outer = &t1.children[0];
        // Thread 1 read 4 times: outer spans reads 1..4, inner 2..3.
        assert_eq!(outer.counts[0].values, [300, 3]);
        assert_eq!(outer.children[0].counts[0].values, [100, 1]);
        assert_eq!(outer.wall_ns, 10_000_000);
        assert_eq!(outer.children[0].wall_ns, 2_000_000);
        // Thread 3 kept apart (9x the rate), merged into the same name.
        assert_eq!(r.threads[1].1.children[0].counts[0].values, [900, 1]);
        assert_eq!(r.merged.children[0].counts[0].values, [1200, 4]);
        assert_eq!(r.merged.children[0].calls, 2);
        assert_eq!(r.merged.children[0].children[0].calls, 1);
        // The timeline, from the first line: each region's begin and end, in the order they
        // ended, with its path.
        let span = |tid: u32, i: usize| {
            let s = &r.spans.iter().find(|(t, _)| *t == tid).unwrap().1.spans[i];
            (
                s.path.join("/"),
                s.begin_ns / 1_000_000,
                s.end_ns / 1_000_000,
            )
        };
        assert_eq!(span(1, 0), ("outer/inner".to_string(), 1, 3));
        assert_eq!(span(1, 1), ("outer".to_string(), 0, 10));
        assert_eq!(span(3, 0), ("outer".to_string(), 1, 4));
    }

    #[test]
    fn mismatched_ends_and_open_regions_are_noted_not_counted() {
        let mut c = Collector::default();
        let mut k = Steps::default();
        let t = Instant::now();
        c.handle(begin(1, "a"), t, &mut k);
        let ans = c.handle(
            Message::End {
                tid: 1,
                name: "b".into(),
                ack: true,
            },
            t,
            &mut k,
        );
        assert!(matches!(ans, Answer::Error(e) if e.contains("\"a\" is its innermost")));
        c.handle(end(2, "x"), t, &mut k);
        let r = c.finish();
        assert_eq!(r.notes.len(), 3, "{:?}", r.notes);
        assert!(r.notes[2].contains("still open"));
        assert!(r.threads.is_empty());
    }

    #[test]
    fn totals_add_in_and_uncounted_threads_keep_time_and_calls() {
        let mut c = Collector::default();
        let mut k = Steps {
            fail_open: Some(5),
            ..Steps::default()
        };
        let t = Instant::now();
        c.handle(begin(5, "r"), t, &mut k);
        c.handle(end(5, "r"), t + Duration::from_millis(2), &mut k);
        for _ in 0..2 {
            c.handle(
                Message::Total {
                    tid: 6,
                    path: vec!["r".into(), "s".into()],
                    calls: 2,
                    wall_ns: 50,
                    counts: vec![GroupCount {
                        enabled: 5,
                        running: 5,
                        values: vec![7, 1],
                    }],
                },
                t,
                &mut k,
            );
        }
        let r = c.finish();
        assert_eq!(r.uncounted, [5]);
        let merged_r = &r.merged.children[0];
        assert_eq!((merged_r.calls, merged_r.wall_ns), (1, 2_000_000));
        assert!(merged_r.counts.is_empty());
        let s = &merged_r.children[0];
        assert_eq!(
            (s.calls, s.wall_ns, s.counts[0].values.clone()),
            (4, 100, vec![14, 2])
        );
    }
}
