//! The SHA-NI kernels against the instruction-level lower bounds of `tma bench --preset sha`
//! (`tma_bench::sha`): which bound holds for a kernel of K streams, and its share of it.
//!
//! The bounds are lower bounds only if their model is right. A kernel that runs faster than a
//! term shows that the term was not one: [`judge`] says so ([`Beaten`]) and drops the term
//! from the bound of every stream count, so no share is ever over 100%. `tma demo sha256`
//! sets its kernels against the bounds through [`judge`]; `scripts/bench-sha256.sh` does the
//! same in Python (keep the two in step).
//!
//! For K interleaved streams the lower-bound terms are the throughput terms of the bench (each
//! instruction alone, the shared pipes, the vector issue; they hold for any number of streams)
//! and the latency chain: a stream's blocks are serial, so K streams need at least the
//! one-stream bound / K cycles per block and stream. The chain is one term: beaten at one
//! stream count, it is dropped at all of them.

/// One lower-bound term (cycles per 64-byte block, and stream for interleaved streams).
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub name: String,
    pub cycles: f64,
}

/// The lower bounds of one `tma bench --preset sha` run.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounds {
    /// The throughput terms that hold (the bench's `bounds.terms`).
    pub terms: Vec<Term>,
    /// The one-stream bound (latency chains), cycles per block (`bounds.one_stream_cycles_per_block`).
    pub one_stream: f64,
    /// Terms the bench itself found beaten (by the block mix measured as one body).
    pub beaten: Vec<Beaten>,
}

/// A kernel measured in the same run as the bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// Interleaved streams (1: one stream).
    pub streams: u32,
    /// Cycles per 64-byte block and stream.
    pub cycles_per_block: f64,
}

/// A term that a measured figure beat: it was not a lower bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Beaten {
    pub term: Term,
    /// The measured figure that ran faster.
    pub by: String,
    /// Its cycles per block (and stream).
    pub measured: f64,
}

impl Beaten {
    /// The sentence every output prints for it (`tma_bench::sha::Beaten::message` words it
    /// the same).
    pub fn message(&self) -> String {
        format!(
            "the model's term {} ({:.1} cycles/block = {:.3} cycles/byte) was beaten by {} \
             ({:.1} cycles/block = {:.3} cycles/byte): it is not a lower bound",
            self.term.name,
            self.term.cycles,
            self.term.cycles / 64.0,
            self.by,
            self.measured,
            self.measured / 64.0
        )
    }
}

/// A kernel against the bound for its stream count.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    pub kernel: Kernel,
    /// The largest term no figure beat for its stream count; `None` when the figure is not a
    /// positive number or every term was beaten.
    pub bound: Option<Term>,
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
    pub held: Vec<Term>,
}

impl Judged {
    /// The bound for many interleaved streams: the largest throughput term that held.
    pub fn interleaved(&self) -> Option<&Term> {
        largest(&self.held)
    }
}

/// Name of the latency-chain term for `streams` interleaved streams.
pub fn chain_name(streams: u32) -> String {
    if streams <= 1 {
        "the latency chain of one stream".into()
    } else {
        format!("the latency chain of one stream / {streams} streams")
    }
}

fn chain(b: &Bounds, streams: u32) -> Term {
    let k = streams.max(1);
    Term {
        name: chain_name(k),
        cycles: b.one_stream / f64::from(k),
    }
}

/// The largest term, the first on a tie.
fn largest(terms: &[Term]) -> Option<&Term> {
    terms
        .iter()
        .fold(None, |best: Option<&Term>, t| match best {
            Some(b) if b.cycles >= t.cycles => Some(b),
            _ => Some(t),
        })
}

/// The bound for `streams` interleaved streams, as the bench measured it (no kernel figures).
pub fn bound_for(b: &Bounds, streams: u32) -> Option<Term> {
    let mut t = b.terms.clone();
    t.push(chain(b, streams));
    largest(&t).cloned()
}

/// Set kernels measured in the same run against the bounds (see the module docs).
pub fn judge(b: &Bounds, kernels: &[Kernel]) -> Judged {
    let ok = |k: &Kernel| k.cycles_per_block.is_finite() && k.cycles_per_block > 0.0;
    let mut beaten = b.beaten.clone();
    // Throughput terms: the fastest kernel beats every term above it.
    let mut terms = b.terms.clone();
    if let Some(fastest) = kernels
        .iter()
        .filter(|k| ok(k))
        .min_by(|x, y| x.cycles_per_block.total_cmp(&y.cycles_per_block))
    {
        let (out, kept): (Vec<Term>, Vec<Term>) = terms
            .into_iter()
            .partition(|t| t.cycles > fastest.cycles_per_block);
        terms = kept;
        beaten.extend(out.into_iter().map(|term| Beaten {
            term,
            by: fastest.name.clone(),
            measured: fastest.cycles_per_block,
        }));
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(name: &str, cycles: f64) -> Term {
        Term {
            name: name.into(),
            cycles,
        }
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
    fn zen4() -> Bounds {
        Bounds {
            terms: vec![
                term("sha256rnds2 alone", 32.0),
                term("sha256rnds2's pipe", 36.8),
                term("vector issue", 25.5),
            ],
            one_stream: 128.0,
            beaten: Vec::new(),
        }
    }

    #[test]
    fn shares_are_of_the_largest_term_for_the_stream_count() {
        let j = judge(
            &zen4(),
            &[kernel(1, 130.0), kernel(2, 70.0), kernel(4, 55.0)],
        );
        assert!(j.beaten.is_empty(), "{:?}", j.beaten);
        let bound = |i: usize| j.kernels[i].bound.clone().unwrap();
        // One and two streams: the latency chain binds (128 and 64 per block and stream).
        assert_eq!(bound(0), term("the latency chain of one stream", 128.0));
        assert_eq!(
            bound(1),
            term("the latency chain of one stream / 2 streams", 64.0)
        );
        // Four streams: the chain (32) is below the pipe; 67%, not "104%" of the body.
        assert_eq!(bound(2), term("sha256rnds2's pipe", 36.8));
        assert!((j.kernels[2].share.unwrap() - 36.8 / 55.0).abs() < 1e-12);
        assert!(j.kernels.iter().all(|k| k.share.unwrap() <= 1.0));
        assert_eq!(
            bound_for(&zen4(), 4),
            Some(term("sha256rnds2's pipe", 36.8))
        );
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
        assert_eq!(
            j.beaten[0].message(),
            "the model's term the block mix measured as one body (57.4 cycles/block = 0.897 \
             cycles/byte) was beaten by 4 streams (55.0 cycles/block = 0.859 cycles/byte): it is \
             not a lower bound"
        );
        // What is left for every stream count: the pipe (the chain was beaten at one stream).
        assert_eq!(j.interleaved(), Some(&term("sha256rnds2's pipe", 36.8)));
        for k in &j.kernels[..2] {
            assert_eq!(k.bound, Some(term("sha256rnds2's pipe", 36.8)));
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
