//! The region control protocol between a program and `tma stat --regions`: the environment
//! variables tma gives the program, and the lines the program writes on the control FIFO.
//! One definition, used by the marker library (which writes) and by tma (which reads).
//!
//! Lines (UTF-8, one `write(2)` each, at most [`MAX_LINE`] bytes so that lines of several
//! threads never interleave):
//!
//! * `begin TID NAME` / `end TID NAME`: thread TID enters / leaves region NAME (the rest of the
//!   line; no tab, no control characters, at most [`MAX_NAME`] bytes). Regions nest per thread;
//!   an `end` names the innermost open region of its thread.
//! * `!begin TID NAME` / `!end TID NAME`: the same, acknowledged: tma reads the counters, then
//!   writes `ok` (or `error TEXT`) and a newline on the acknowledgement FIFO ([`ENV_ACK`]). The
//!   writer waits for it, so the counters are read exactly at the boundary. Writers in several
//!   threads must take turns (write, then read the answer) under one lock.
//! * `total TID CALLS WALL_NS COUNTS PATH`: counts a program took itself (the marker library in
//!   process), added to region PATH (the names from the outermost in, separated by tabs) of
//!   thread TID: CALLS more calls, WALL_NS more nanoseconds, and COUNTS, `-` or per counter
//!   group of [`ENV_EVENTS`] `ENABLED:RUNNING:V1,V2,...` separated by `;`.
//! * `error TID TEXT`: a problem the program noticed (an `end` that did not match), shown as a
//!   note.

use std::fmt;

/// The control FIFO the program writes its lines to.
pub const ENV_FIFO: &str = "TMA_REGIONS_FIFO";
/// The acknowledgement FIFO tma answers `!` lines on.
pub const ENV_ACK: &str = "TMA_REGIONS_ACK";
/// The counter groups the marker library may open in process, per thread (see
/// [`parse_events`]); absent: the library speaks the acknowledged protocol instead.
pub const ENV_EVENTS: &str = "TMA_REGIONS_EVENTS";
/// `fifo` makes the marker library speak the acknowledged protocol even where it could
/// count in process (to compare the two ways, and for the overhead benchmark).
pub const ENV_MODE: &str = "TMA_MARKER_MODE";
/// `1` makes the marker library count each thread alone: without it a thread's counters
/// follow the threads and processes it starts (inherited counters, read with `read(2)`,
/// which sums them); with it they count the thread alone, read with `rdpmc` where the
/// kernel allows.
pub const ENV_OWN_THREAD: &str = "TMA_MARKER_OWN_THREAD";
/// The longest line (`PIPE_BUF`: a write of at most this many bytes to a pipe is atomic).
pub const MAX_LINE: usize = 4096;
/// The longest region name, in bytes.
pub const MAX_NAME: usize = 200;
/// Regions per thread whose begin and end are kept for the timeline (the first ones).
pub const MAX_SPANS: usize = 2000;

/// `CLOCK_MONOTONIC` in nanoseconds at `t` (the clock span lines carry: the same in every
/// process of the machine).
pub fn monotonic_ns(t: std::time::Instant) -> u64 {
    let now = std::time::Instant::now();
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let now_ns = (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64);
    match now.checked_duration_since(t) {
        Some(back) => now_ns.saturating_sub(back.as_nanos() as u64),
        None => now_ns.saturating_add(t.duration_since(now).as_nanos() as u64),
    }
}

/// Why a line or a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("unknown verb {0:?} (expected begin, end, !begin, !end, total, span or error)")]
    Verb(String),
    #[error("missing {0}")]
    Missing(&'static str),
    #[error("bad {what} {text:?}")]
    Number { what: &'static str, text: String },
    #[error(
        "bad region name {0:?}: give 1 to 200 bytes of text without tabs or control characters"
    )]
    Name(String),
    #[error("bad counts {0:?}: expected `-` or ENABLED:RUNNING:V1,V2 per group, separated by `;`")]
    Counts(String),
    #[error("the line is not UTF-8")]
    Utf8,
    #[error("bad event list {0:?}: expected TYPE:CONFIG[:CONFIG1[:CONFIG2[:u]]] per event, `,` between events, `;` between groups")]
    Events(String),
}

/// One group's counts over a stretch: enabled and running nanoseconds and one value per
/// member, in the order of [`ENV_EVENTS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupCount {
    pub enabled: u64,
    pub running: u64,
    pub values: Vec<u64>,
}

impl GroupCount {
    /// `self - earlier`, each field (cumulative readings to a delta).
    pub fn since(&self, earlier: &GroupCount) -> GroupCount {
        GroupCount {
            enabled: self.enabled.saturating_sub(earlier.enabled),
            running: self.running.saturating_sub(earlier.running),
            values: self
                .values
                .iter()
                .zip(earlier.values.iter().chain(std::iter::repeat(&0)))
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// Add `now - start` into `self` (`now.since(start)`, with no vector made; a missing
    /// start counts from zero).
    pub fn add_since(&mut self, now: &GroupCount, start: Option<&GroupCount>) {
        let zero = GroupCount::default();
        let start = start.unwrap_or(&zero);
        self.enabled += now.enabled.saturating_sub(start.enabled);
        self.running += now.running.saturating_sub(start.running);
        if self.values.len() < now.values.len() {
            self.values.resize(now.values.len(), 0);
        }
        let earlier = start.values.iter().chain(std::iter::repeat(&0));
        for ((a, v), b) in self.values.iter_mut().zip(&now.values).zip(earlier) {
            *a += v.saturating_sub(*b);
        }
    }

    /// One `read(2)` of a group leader opened with tma-perf's `READ_FORMAT` into `self` (its
    /// vector reused: no allocation once it has held a reading).
    pub fn read_leader(
        &mut self,
        leader: &std::os::fd::OwnedFd,
        members: usize,
    ) -> std::io::Result<()> {
        let (enabled, running) =
            tma_perf::sys::read_group_values(leader, members, &mut self.values)?;
        self.enabled = enabled;
        self.running = running;
        Ok(())
    }

    /// Add `other` into `self`.
    pub fn add(&mut self, other: &GroupCount) {
        self.enabled += other.enabled;
        self.running += other.running;
        if self.values.len() < other.values.len() {
            self.values.resize(other.values.len(), 0);
        }
        for (a, b) in self.values.iter_mut().zip(&other.values) {
            *a += b;
        }
    }
}

/// Add the counts of a stretch, `now - start` group by group, into `into` (a group missing
/// from `start` counts from zero).
pub fn add_deltas(into: &mut Vec<GroupCount>, now: &[GroupCount], start: &[GroupCount]) {
    if into.len() < now.len() {
        into.resize_with(now.len(), GroupCount::default);
    }
    for (i, (sum, cur)) in into.iter_mut().zip(now).enumerate() {
        sum.add_since(cur, start.get(i));
    }
}

/// Add every group of `other` into `into` (group by group).
pub fn add_groups(into: &mut Vec<GroupCount>, other: &[GroupCount]) {
    if into.len() < other.len() {
        into.resize(other.len(), GroupCount::default());
    }
    for (a, b) in into.iter_mut().zip(other) {
        a.add(b);
    }
}

/// One line of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Begin {
        tid: u32,
        name: String,
        ack: bool,
    },
    End {
        tid: u32,
        name: String,
        ack: bool,
    },
    Total {
        tid: u32,
        path: Vec<String>,
        calls: u64,
        wall_ns: u64,
        counts: Vec<GroupCount>,
    },
    /// One region's begin and end (`CLOCK_MONOTONIC` ns), counted in process: for the
    /// timeline.
    Span {
        tid: u32,
        path: Vec<String>,
        begin_ns: u64,
        end_ns: u64,
    },
    Error {
        tid: u32,
        text: String,
    },
}

/// Whether `name` is a valid region name.
pub fn check_name(name: &str) -> Result<(), ProtocolError> {
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ProtocolError::Name(
            name.chars().take(MAX_NAME + 8).collect(),
        ));
    }
    Ok(())
}

fn number(what: &'static str, text: Option<&str>) -> Result<u64, ProtocolError> {
    let text = text.ok_or(ProtocolError::Missing(what))?;
    text.parse().map_err(|_| ProtocolError::Number {
        what,
        text: text.to_string(),
    })
}

/// Parse one line (without or with its newline).
pub fn parse(line: &[u8]) -> Result<Message, ProtocolError> {
    let line = std::str::from_utf8(line).map_err(|_| ProtocolError::Utf8)?;
    let line = line.strip_suffix('\n').unwrap_or(line);
    let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
    let (ack, verb) = match verb.strip_prefix('!') {
        Some(v) if v == "begin" || v == "end" => (true, v),
        _ => (false, verb),
    };
    let (tid_text, rest) = match rest.split_once(' ') {
        Some((a, b)) => (Some(a), b),
        None => ((!rest.is_empty()).then_some(rest), ""),
    };
    match verb {
        "begin" | "end" => {
            let tid = number("thread id", tid_text)? as u32;
            check_name(rest)?;
            let name = rest.to_string();
            Ok(if verb == "begin" {
                Message::Begin { tid, name, ack }
            } else {
                Message::End { tid, name, ack }
            })
        }
        "total" => {
            let tid = number("thread id", tid_text)? as u32;
            let mut f = rest.splitn(4, ' ');
            let calls = number("call count", f.next())?;
            let wall_ns = number("wall time", f.next())?;
            let counts = parse_counts(f.next().ok_or(ProtocolError::Missing("counts"))?)?;
            let path_text = f.next().ok_or(ProtocolError::Missing("region path"))?;
            let path: Vec<String> = path_text.split('\t').map(str::to_string).collect();
            for n in &path {
                check_name(n)?;
            }
            Ok(Message::Total {
                tid,
                path,
                calls,
                wall_ns,
                counts,
            })
        }
        "span" => {
            let tid = number("thread id", tid_text)? as u32;
            let mut f = rest.splitn(3, ' ');
            let begin_ns = number("begin time", f.next())?;
            let end_ns = number("end time", f.next())?;
            let path_text = f.next().ok_or(ProtocolError::Missing("region path"))?;
            let path: Vec<String> = path_text.split('\t').map(str::to_string).collect();
            for n in &path {
                check_name(n)?;
            }
            Ok(Message::Span {
                tid,
                path,
                begin_ns,
                end_ns,
            })
        }
        "error" => Ok(Message::Error {
            tid: number("thread id", tid_text)? as u32,
            text: rest.to_string(),
        }),
        other => Err(ProtocolError::Verb(other.chars().take(40).collect())),
    }
}

fn parse_counts(text: &str) -> Result<Vec<GroupCount>, ProtocolError> {
    if text == "-" {
        return Ok(Vec::new());
    }
    let bad = || ProtocolError::Counts(text.chars().take(80).collect());
    text.split(';')
        .map(|g| {
            let mut p = g.splitn(3, ':');
            let num = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok()).ok_or_else(bad);
            let enabled = num(p.next())?;
            let running = num(p.next())?;
            let values = p
                .next()
                .ok_or_else(bad)?
                .split(',')
                .map(|v| v.parse::<u64>().map_err(|_| bad()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(GroupCount {
                enabled,
                running,
                values,
            })
        })
        .collect()
}

impl fmt::Display for Message {
    /// The line, with its newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::Begin { tid, name, ack } => {
                writeln!(f, "{}begin {tid} {name}", if *ack { "!" } else { "" })
            }
            Message::End { tid, name, ack } => {
                writeln!(f, "{}end {tid} {name}", if *ack { "!" } else { "" })
            }
            Message::Total {
                tid,
                path,
                calls,
                wall_ns,
                counts,
            } => {
                write!(f, "total {tid} {calls} {wall_ns} ")?;
                if counts.is_empty() {
                    f.write_str("-")?;
                }
                for (i, g) in counts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(";")?;
                    }
                    write!(f, "{}:{}:", g.enabled, g.running)?;
                    for (k, v) in g.values.iter().enumerate() {
                        write!(f, "{}{v}", if k > 0 { "," } else { "" })?;
                    }
                }
                writeln!(f, " {}", path.join("\t"))
            }
            Message::Span {
                tid,
                path,
                begin_ns,
                end_ns,
            } => writeln!(f, "span {tid} {begin_ns} {end_ns} {}", path.join("\t")),
            Message::Error { tid, text } => {
                let text: String = text.chars().filter(|c| !c.is_control()).collect();
                writeln!(f, "error {tid} {text}")
            }
        }
    }
}

/// One counter of [`ENV_EVENTS`]: the `perf_event_attr` fields that name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventAttr {
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    /// Count user space only.
    pub user_only: bool,
}

/// Parse [`ENV_EVENTS`]: groups separated by `;`, events by `,`, each
/// `TYPE:CONFIG[:CONFIG1[:CONFIG2[:u]]]` in decimal or 0x-hex.
pub fn parse_events(text: &str) -> Result<Vec<Vec<EventAttr>>, ProtocolError> {
    let bad = || ProtocolError::Events(text.chars().take(80).collect());
    let num = |s: &str| -> Result<u64, ProtocolError> {
        match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).map_err(|_| bad()),
            None => s.parse().map_err(|_| bad()),
        }
    };
    text.split(';')
        .filter(|g| !g.is_empty())
        .map(|g| {
            g.split(',')
                .map(|e| {
                    let f: Vec<&str> = e.split(':').collect();
                    if f.len() < 2 || f.len() > 5 {
                        return Err(bad());
                    }
                    let user_only = match f.get(4) {
                        None => false,
                        Some(&"u") => true,
                        Some(_) => return Err(bad()),
                    };
                    Ok(EventAttr {
                        type_: u32::try_from(num(f[0])?).map_err(|_| bad())?,
                        config: num(f[1])?,
                        config1: f.get(2).map_or(Ok(0), |s| num(s))?,
                        config2: f.get(3).map_or(Ok(0), |s| num(s))?,
                        user_only,
                    })
                })
                .collect()
        })
        .collect()
}

/// Write groups of counters as [`parse_events`] reads them.
pub fn format_events(groups: &[Vec<EventAttr>]) -> String {
    groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|e| {
                    format!(
                        "{}:{:#x}:{:#x}:{:#x}{}",
                        e.type_,
                        e.config,
                        e.config1,
                        e.config2,
                        if e.user_only { ":u" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let msgs = [
            Message::Begin {
                tid: 12,
                name: "load weights".into(),
                ack: false,
            },
            Message::End {
                tid: 12,
                name: "load weights".into(),
                ack: true,
            },
            Message::Total {
                tid: 7,
                path: vec!["outer".into(), "inner x".into()],
                calls: 3,
                wall_ns: 1500,
                counts: vec![
                    GroupCount {
                        enabled: 10,
                        running: 5,
                        values: vec![1, 2],
                    },
                    GroupCount {
                        enabled: 10,
                        running: 10,
                        values: vec![4],
                    },
                ],
            },
            Message::Total {
                tid: 7,
                path: vec!["a".into()],
                calls: 1,
                wall_ns: 2,
                counts: vec![],
            },
            Message::Error {
                tid: 3,
                text: "end b while a is open".into(),
            },
            Message::Span {
                tid: 9,
                path: vec!["outer".into(), "inner x".into()],
                begin_ns: 100,
                end_ns: 250,
            },
        ];
        for m in msgs {
            let line = m.to_string();
            assert!(line.ends_with('\n'));
            assert_eq!(parse(line.as_bytes()).unwrap(), m, "{line:?}");
        }
    }

    #[test]
    fn bad_lines_are_refused_with_the_reason() {
        assert!(matches!(parse(b"start 1 x"), Err(ProtocolError::Verb(_))));
        assert!(matches!(parse(b"begin"), Err(ProtocolError::Missing(_))));
        assert!(matches!(
            parse(b"begin x y"),
            Err(ProtocolError::Number { .. })
        ));
        assert!(matches!(parse(b"begin 1 "), Err(ProtocolError::Name(_))));
        assert!(matches!(
            parse(b"begin 1 a\tb"),
            Err(ProtocolError::Name(_))
        ));
        assert!(matches!(parse(b"!total 1 x"), Err(ProtocolError::Verb(_))));
        assert!(matches!(
            parse(b"total 1 1 1 1:2 a"),
            Err(ProtocolError::Counts(_))
        ));
        assert!(matches!(parse(&[b'b', 0xff]), Err(ProtocolError::Utf8)));
        let long = format!("begin 1 {}", "x".repeat(MAX_NAME + 1));
        assert!(matches!(
            parse(long.as_bytes()),
            Err(ProtocolError::Name(_))
        ));
    }

    #[test]
    fn events_round_trip() {
        let g = vec![
            vec![
                EventAttr {
                    type_: 1,
                    config: 1,
                    config1: 0,
                    config2: 0,
                    user_only: false,
                },
                EventAttr {
                    type_: 4,
                    config: 0x1c2,
                    config1: 3,
                    config2: 0,
                    user_only: true,
                },
            ],
            vec![EventAttr {
                type_: 0,
                config: 0,
                config1: 0,
                config2: 0,
                user_only: false,
            }],
        ];
        assert_eq!(parse_events(&format_events(&g)).unwrap(), g);
        assert!(parse_events("1").is_err());
        assert!(parse_events("1:2:3:4:k").is_err());
        assert_eq!(parse_events("").unwrap(), Vec::<Vec<EventAttr>>::new());
    }

    #[test]
    fn deltas_and_sums() {
        let a = GroupCount {
            enabled: 10,
            running: 8,
            values: vec![5, 7],
        };
        let b = GroupCount {
            enabled: 30,
            running: 20,
            values: vec![6, 17],
        };
        let d = b.since(&a);
        assert_eq!(d.values, [1, 10]);
        assert_eq!((d.enabled, d.running), (20, 12));
        let mut s = vec![d.clone()];
        add_groups(&mut s, std::slice::from_ref(&d));
        assert_eq!(s[0].values, [2, 20]);
        // add_since is add(since) without the vector: equal on ordinary, backward (a counter
        // read lower than before: saturates to 0) and missing starts, and longer readings.
        let back = GroupCount {
            enabled: 5,
            running: 9,
            values: vec![4, 20, 3],
        };
        for (now, start) in [
            (&b, Some(&a)),
            (&a, Some(&b)),
            (&back, Some(&a)),
            (&b, None),
        ] {
            let mut by_since = s[0].clone();
            by_since.add(&now.since(start.unwrap_or(&GroupCount::default())));
            let mut direct = s[0].clone();
            direct.add_since(now, start);
            assert_eq!(direct, by_since);
        }
    }
}
