//! The SHA-NI kernels against the lower bounds of `--preset sha` ([`crate::sha`]): which bound
//! holds for a kernel of K streams, and its share of it. `tma demo sha256` sets its kernels
//! against the bounds through [`judge`].
//!
//! The bounds are lower bounds only if their model is right. A kernel that runs faster than a
//! term shows that the term was not one: [`judge`] says so ([`Beaten`]) and drops the term
//! from the bound of every stream count, so no share is ever over 100%.
//!
//! For K interleaved streams the terms are the bench's throughput terms (they hold for any
//! number of streams) and the latency chain, the one-stream bound / K; the chain is one term:
//! beaten at one stream count, it is dropped at all of them.

use crate::sha::{largest, take_beaten, Beaten, BoundTerm, ShaBounds};

/// A kernel measured in the same run as the bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// Interleaved streams (1: one stream).
    pub streams: u32,
    /// Cycles per 64-byte block and stream.
    pub cycles_per_block: f64,
}

/// A kernel against the bound for its stream count.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    pub kernel: Kernel,
    /// The largest term no figure beat for its stream count; `None` when the figure is not a
    /// positive number or every term was beaten.
    pub bound: Option<BoundTerm>,
    /// `bound / cycles_per_block`, never over 1.
    pub share: Option<f64>,
}

/// The kernels of a run set against the bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub kernels: Vec<Share>,
    /// Every term beaten: the bench's own, then the ones the kernels beat.
    pub beaten: Vec<Beaten>,
    /// The throughput terms that held (bounds for any number of streams).
    pub held: Vec<BoundTerm>,
    /// The latency chain held (no kernel beat it).
    pub chain_held: bool,
}

impl Judged {
    /// The bound for many interleaved streams: the largest throughput term that held.
    pub fn interleaved(&self) -> Option<&BoundTerm> {
        largest(&self.held)
    }
}

/// The latency-chain term for `streams` interleaved streams.
fn chain(b: &ShaBounds, streams: u32) -> BoundTerm {
    let k = streams.max(1);
    let one = b.one_stream_cycles_per_block;
    BoundTerm {
        name: if k == 1 {
            "the latency chain of one stream".into()
        } else {
            format!("the latency chain of one stream / {k} streams")
        },
        cycles: one / f64::from(k),
        formula: format!("{one:.1} / {k}"),
    }
}

/// Set kernels measured in the same run against the bounds (see the module docs).
pub fn judge(b: &ShaBounds, kernels: &[Kernel]) -> Judged {
    let ok = |k: &Kernel| k.cycles_per_block.is_finite() && k.cycles_per_block > 0.0;
    let mut beaten = b.beaten.clone();
    // Throughput terms: the fastest kernel beats every term above it.
    let mut terms = b.terms.clone();
    if let Some(fastest) = kernels
        .iter()
        .filter(|k| ok(k))
        .min_by(|x, y| x.cycles_per_block.total_cmp(&y.cycles_per_block))
    {
        beaten.extend(take_beaten(
            &mut terms,
            &fastest.name,
            fastest.cycles_per_block,
        ));
    }
    // The latency chain: beaten by the kernel furthest below it for its stream count.
    let chain_beaten = kernels
        .iter()
        .filter(|k| ok(k))
        .map(|k| (k, chain(b, k.streams)))
        .filter(|(k, c)| c.cycles > k.cycles_per_block)
        .max_by(|x, y| {
            (x.1.cycles / x.0.cycles_per_block).total_cmp(&(y.1.cycles / y.0.cycles_per_block))
        });
    if let Some((k, c)) = &chain_beaten {
        beaten.push(Beaten {
            term: c.clone(),
            by: k.name.clone(),
            measured: k.cycles_per_block,
        });
    }
    let shares = kernels
        .iter()
        .map(|k| {
            let mut held = terms.clone();
            if chain_beaten.is_none() {
                held.push(chain(b, k.streams));
            }
            let bound = largest(&held).filter(|_| ok(k)).cloned();
            let share = bound.as_ref().map(|t| t.cycles / k.cycles_per_block);
            Share {
                kernel: k.clone(),
                bound,
                share,
            }
        })
        .collect();
    Judged {
        kernels: shares,
        beaten,
        held: terms,
        chain_held: chain_beaten.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(name: &str, cycles: f64) -> BoundTerm {
        BoundTerm {
            name: name.into(),
            cycles,
            formula: String::new(),
        }
    }

    /// A term's name and cycles (the formula aside).
    fn nc(t: &BoundTerm) -> (&str, f64) {
        (t.name.as_str(), t.cycles)
    }

    fn kernel(streams: u32, cycles_per_block: f64) -> Kernel {
        Kernel {
            name: format!("{streams} stream{}", if streams == 1 { "" } else { "s" }),
            streams,
            cycles_per_block,
        }
    }

    /// The Zen 4 run: SHA256RNDS2 alone 32 cycles/block, its pipe 36.8, the block body
    /// 57.4 (a reference point, no longer a term), the 4-stream kernel 55.0 (0.859 c/B).
    fn zen4() -> ShaBounds {
        ShaBounds {
            one_stream_cycles_per_block: 128.0,
            terms: vec![
                term("sha256rnds2 alone", 32.0),
                term("sha256rnds2's pipe", 36.8),
                term("vector issue", 25.5),
            ],
            ..ShaBounds::default()
        }
    }

    #[test]
    fn shares_are_of_the_largest_term_for_the_stream_count() {
        let j = judge(
            &zen4(),
            &[kernel(1, 130.0), kernel(2, 70.0), kernel(4, 55.0)],
        );
        assert!(j.beaten.is_empty(), "{:?}", j.beaten);
        assert!(j.chain_held);
        let bound = |i: usize| nc(j.kernels[i].bound.as_ref().unwrap());
        // One and two streams: the latency chain binds (128 and 64 per block and stream).
        assert_eq!(bound(0), ("the latency chain of one stream", 128.0));
        assert_eq!(
            bound(1),
            ("the latency chain of one stream / 2 streams", 64.0)
        );
        // Four streams: the chain (32) is below the pipe; 67%, not "104%" of the body.
        assert_eq!(bound(2), ("sha256rnds2's pipe", 36.8));
        assert!((j.kernels[2].share.unwrap() - 36.8 / 55.0).abs() < 1e-12);
        assert!(j.kernels.iter().all(|k| k.share.unwrap() <= 1.0));
    }

    #[test]
    fn a_kernel_faster_than_a_term_says_the_term_was_no_lower_bound() {
        // The body measured as a term again (57.4), a one-stream kernel faster than the chain
        // (120 < 128), and a figure that is not a number.
        let mut b = zen4();
        b.terms
            .push(term("the block mix measured as one body", 57.4));
        let j = judge(
            &b,
            &[kernel(1, 120.0), kernel(4, 55.0), kernel(8, f64::NAN)],
        );
        let beaten: Vec<(&str, &str)> = j
            .beaten
            .iter()
            .map(|x| (x.term.name.as_str(), x.by.as_str()))
            .collect();
        assert_eq!(
            beaten,
            [
                ("the block mix measured as one body", "4 streams"),
                ("the latency chain of one stream", "1 stream"),
            ]
        );
        assert!(!j.chain_held);
        assert_eq!(
            j.beaten[0].message(),
            "the model's term the block mix measured as one body (57.4 cycles/block = 0.897 \
             cycles/byte) was beaten by 4 streams (55.0 cycles/block = 0.859 cycles/byte): it is \
             not a lower bound"
        );
        // What is left for every stream count: the pipe (the chain was beaten at one stream).
        assert_eq!(j.interleaved().map(nc), Some(("sha256rnds2's pipe", 36.8)));
        for k in &j.kernels[..2] {
            assert_eq!(k.bound.as_ref().map(nc), Some(("sha256rnds2's pipe", 36.8)));
            assert!(k.share.unwrap() <= 1.0);
        }
        assert_eq!((&j.kernels[2].bound, j.kernels[2].share), (&None, None));
        // The terms the bench found beaten come first, as they were.
        let mut b = zen4();
        let old = Beaten {
            term: term("sha256msg2's pipe", 70.0),
            by: "the block mix measured as one body".into(),
            measured: 57.4,
        };
        b.beaten.push(old.clone());
        let j = judge(&b, &[kernel(4, 55.0)]);
        assert_eq!(j.beaten, [old]);
    }

    #[test]
    fn every_term_beaten_leaves_no_bound() {
        let j = judge(&zen4(), &[kernel(4, 20.0)]);
        assert_eq!(j.beaten.len(), 3 + 1);
        assert_eq!((&j.kernels[0].bound, j.kernels[0].share), (&None, None));
        assert_eq!(j.interleaved(), None);
    }
}
