//! What the measuring child sends its parent through one pipe: JSON frames of [`Msg`], and the
//! fault record its signal handler writes ([`Fault`]), read back into an [`Outcome`].

use std::os::fd::OwnedFd;

use serde::{Deserialize, Serialize};

use crate::sys;
use crate::ClockKind;

/// A message of the child to the parent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Msg {
    Clock {
        clock: ClockKind,
        error: Option<String>,
    },
    SelfCheck {
        clock: ClockKind,
        /// NaN when too few calibrations agreed to compute it (JSON has no NaN: sent as null).
        #[serde(with = "nan_as_null")]
        ratio: f64,
        #[serde(with = "nan_as_null")]
        add_ticks: f64,
        ok: bool,
    },
    Figure {
        job: usize,
        clock: ClockKind,
        /// The accepted repetitions of the reported independent repetition (the lower of the
        /// agreeing two, or the lowest when none agreed).
        values: Vec<f64>,
        raw_ticks: Vec<f64>,
        /// Rejected repetitions over all independent repetitions.
        rejected: usize,
        attempts: usize,
        /// The median of every independent repetition, in the order measured.
        repetitions: Vec<f64>,
        /// Whether the lowest independent repetitions agreed within the tolerance ([`crate::stats::agreed`]).
        converged: bool,
        /// A throughput chain count whose repetitions stayed well above the best chain count's
        /// accepted figure: no longer measured (it cannot be the best), so not converged.
        #[serde(default)]
        dropped: bool,
        /// Repetitions discarded because the contention sentinel timed around them was off
        /// ([`crate::stats::sentinel_ok`]), and the sentinel readings that were off.
        #[serde(default)]
        contended: Vec<f64>,
        /// The lowest repetitions agreed on a value no pipe count explains while a lower
        /// repetition is plausible: that lower one is reported, unconverged
        /// (`Repeated::message`).
        #[serde(default)]
        outvoted_plausible: bool,
    },
    Note(String),
}

const TAG_JSON: u64 = 0x150A;

/// A fault reported by the child's signal handler.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    pub signal: i32,
    pub code: i64,
    /// Offset of the faulting RIP in the code buffer.
    pub offset: u64,
    pub addr: u64,
    pub job: Option<usize>,
}

/// What came back from the child.
#[derive(Debug, Default)]
pub struct Outcome {
    pub msgs: Vec<Msg>,
    pub fault: Option<Fault>,
    pub timed_out: bool,
    pub exit: Option<String>,
}

/// JSON has no NaN: write a non-finite f64 as null and read null back as NaN.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

pub(super) fn send(fd: &OwnedFd, m: &Msg) {
    let Ok(json) = serde_json::to_vec(m) else {
        return;
    };
    let mut frame = Vec::with_capacity(json.len() + 16);
    frame.extend_from_slice(&TAG_JSON.to_le_bytes());
    frame.extend_from_slice(&(json.len() as u64).to_le_bytes());
    frame.extend_from_slice(&json);
    let _ = sys::write_all(fd, &frame);
}

pub(super) fn parse_frames(buf: &[u8], out: &mut Outcome) {
    let mut p = 0;
    let u64_at = |p: usize| -> Option<u64> {
        buf.get(p..p + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    while let Some(tag) = u64_at(p) {
        if tag == TAG_JSON {
            let Some(len) = u64_at(p + 8) else { break };
            let start = p + 16;
            let end = start + len as usize;
            let Some(body) = buf.get(start..end) else {
                break;
            };
            match serde_json::from_slice::<Msg>(body) {
                Ok(m) => out.msgs.push(m),
                // Never drop a message silently: a lost verdict would look like no result.
                Err(e) => {
                    out.exit.get_or_insert_with(|| {
                        format!("internal: a message from the measuring child could not be decoded: {e}")
                    });
                }
            }
            p = end;
        } else if tag == sys::TAG_FAULT {
            let f: Vec<u64> = (0..5).filter_map(|i| u64_at(p + 8 + 8 * i)).collect();
            if f.len() < 5 {
                break;
            }
            out.fault = Some(Fault {
                signal: f[0] as i32,
                code: f[1] as i64,
                offset: f[2],
                addr: f[3],
                job: (f[4] != u64::MAX).then_some(f[4] as usize),
            });
            p += 48;
        } else {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-check verdict without a ratio (too few calibrations agreed) must reach the
    /// parent: before, NaN became JSON null, failed to decode and the verdict was dropped.
    #[test]
    fn self_check_without_ratio_round_trips() {
        let m = Msg::SelfCheck {
            clock: ClockKind::Tsc,
            ratio: f64::NAN,
            add_ticks: f64::NAN,
            ok: false,
        };
        let json = serde_json::to_vec(&m).unwrap();
        match serde_json::from_slice::<Msg>(&json).unwrap() {
            Msg::SelfCheck { ratio, ok, .. } => assert!(ratio.is_nan() && !ok),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn undecodable_frames_are_an_error() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&TAG_JSON.to_le_bytes());
        buf.extend_from_slice(&3u64.to_le_bytes());
        buf.extend_from_slice(b"{x}");
        let mut out = Outcome {
            msgs: Vec::new(),
            fault: None,
            timed_out: false,
            exit: None,
        };
        parse_frames(&buf, &mut out);
        assert!(out
            .exit
            .as_deref()
            .is_some_and(|e| e.contains("could not be decoded")));
    }

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        let m = Msg::Note("hi".into());
        let json = serde_json::to_vec(&m).unwrap();
        buf.extend_from_slice(&TAG_JSON.to_le_bytes());
        buf.extend_from_slice(&(json.len() as u64).to_le_bytes());
        buf.extend_from_slice(&json);
        for v in [sys::TAG_FAULT, 8, 1, 77, 0, 5] {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        let mut out = Outcome::default();
        parse_frames(&buf, &mut out);
        assert_eq!(out.msgs.len(), 1);
        let f = out.fault.unwrap();
        assert_eq!((f.signal, f.code, f.offset, f.job), (8, 1, 77, Some(5)));
    }
}
