//! The independent repetitions of a figure and the rule that accepts them: when two agree, which
//! one is reported, and which jobs need another round.

use super::method::Method;
use super::wire::Msg;
use crate::stats;
use crate::ClockKind;

/// One independent repetition of a figure: `reps` accepted timings (median reported).
#[derive(Debug, Clone, Default)]
pub(super) struct Estimate {
    pub(super) values: Vec<f64>,
    pub(super) raw: Vec<f64>,
    pub(super) rejected: usize,
    pub(super) attempts: usize,
}

impl Estimate {
    pub(super) fn median(&self) -> f64 {
        stats::median(&self.values)
    }
}

/// The independent repetitions of one job so far.
#[derive(Debug, Default)]
pub(super) struct Repeated {
    pub(super) estimates: Vec<Estimate>,
    /// Timing attempts whose repetition had too few accepted values to count.
    pub(super) lost_rejected: usize,
    pub(super) lost_attempts: usize,
    pub(super) dropped: bool,
    /// Off sentinel readings of discarded repetitions.
    pub(super) contended: Vec<f64>,
    /// Repetitions discarded because of the sentinel (shown only when no other exists).
    pub(super) discarded: Vec<Estimate>,
}

impl Repeated {
    pub(super) fn medians(&self) -> Vec<f64> {
        self.estimates.iter().map(Estimate::median).collect()
    }

    pub(super) fn agreed(&self, m: &Method) -> Option<f64> {
        (self.estimates.len() >= m.min_rounds.max(2))
            .then(|| stats::agreed(&self.medians(), m.agree))
            .flatten()
    }

    /// The figure message: the accepted repetition ([`stats::agreed`]), else the lowest. For a
    /// throughput, `max_n` is this machine's pipe count: when the accepted value is not
    /// plausible ([`stats::snap`]) but a lower repetition is, the lower one is shown,
    /// unconverged. Host noise only adds time, and three repetitions of a run agreeing on
    /// popcnt at 0.284 cycles over one at 0.250 were the noise (the other runs read 0.250); the
    /// figure is then not confirmed either way, and says so.
    pub(super) fn message(
        &self,
        job: usize,
        clock: ClockKind,
        m: &Method,
        max_n: Option<usize>,
    ) -> Msg {
        let medians = self.medians();
        let mut agreed = self.agreed(m);
        let mut outvoted_plausible = false;
        if let (Some(v), Some(n)) = (agreed, max_n) {
            if !stats::snap(v, n).1 && medians.iter().any(|x| *x < v && stats::snap(*x, n).1) {
                agreed = None;
                outvoted_plausible = true;
            }
        }
        let converged = agreed.is_some();
        // The accepted repetition, or the lowest when none was accepted.
        let pick = match agreed {
            Some(v) => medians.iter().position(|x| *x == v),
            None => medians
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, _)| i),
        };
        // With no clean repetition at all, the lowest discarded one is shown (unconverged).
        let lowest_discarded = || {
            self.discarded
                .iter()
                .min_by(|a, b| a.median().total_cmp(&b.median()))
                .cloned()
        };
        let chosen = pick
            .and_then(|i| self.estimates.get(i).cloned())
            .or_else(lowest_discarded)
            .unwrap_or_default();
        Msg::Figure {
            job,
            clock,
            values: chosen.values,
            raw_ticks: chosen.raw,
            rejected: self
                .estimates
                .iter()
                .chain(&self.discarded)
                .map(|e| e.rejected)
                .sum::<usize>()
                + self.lost_rejected,
            attempts: self
                .estimates
                .iter()
                .chain(&self.discarded)
                .map(|e| e.attempts)
                .sum::<usize>()
                + self.lost_attempts,
            repetitions: medians,
            converged,
            dropped: self.dropped,
            contended: self.contended.clone(),
            outvoted_plausible,
        }
    }
}

/// Which jobs still need an independent repetition after a round. A job is done when its two
/// lowest repetitions agree ([`stats::agreed`]). Throughput chain counts (`tp`) are alternatives
/// of one figure (the best is reported): one that is not done but whose lowest repetition, after
/// at least two, is more than `DROP_MARGIN` above the best accepted chain count is dropped: it
/// cannot be the best unless every one of its repetitions was slowed by that much.
///
/// The best accepted chain count is measured again while its value is not plausible for this
/// machine ([`stats::snap`] with `max_n` pipes), until the time budget is spent: host noise
/// that lasts longer than one round (a busy SMT sibling of another tenant evicting the body
/// from the shared op cache) makes repetitions agree on a figure that is too high, e.g. popcnt
/// at 0.284 cycles instead of 0.250 in 11 runs of 20, while a later repetition, after
/// `RETRY_PAUSE`, finds the quiet value and the lowest agreeing pair then wins.
pub(super) fn still_needed(
    reps: &mut [(usize, Repeated)],
    tp: &[usize],
    m: &Method,
    max_n: usize,
) -> Vec<usize> {
    let best = reps
        .iter()
        .filter(|(j, _)| tp.contains(j))
        .filter_map(|(j, r)| r.agreed(m).map(|v| (*j, v)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let best_tp = best.map(|(_, v)| v);
    let mut out = Vec::new();
    for (j, r) in reps.iter_mut() {
        if r.dropped {
            continue;
        }
        if r.agreed(m).is_some() {
            if best.is_some_and(|(bj, v)| bj == *j && !stats::snap(v, max_n).1) {
                out.push(*j);
            }
            continue;
        }
        if let Some(best) = best_tp.filter(|_| tp.contains(j) && r.estimates.len() >= 2) {
            let low = r.medians().into_iter().reduce(f64::min).unwrap_or(f64::NAN);
            if low > best * (1.0 + DROP_MARGIN) {
                r.dropped = true;
                continue;
            }
        }
        out.push(*j);
    }
    out
}

/// See [`still_needed`].
const DROP_MARGIN: f64 = 0.05;

#[cfg(test)]
mod tests {
    use super::*;

    fn est(median: f64) -> Estimate {
        Estimate {
            values: vec![median; 5],
            raw: vec![median; 5],
            rejected: 1,
            attempts: 6,
        }
    }

    fn repeated(medians: &[f64]) -> Repeated {
        Repeated {
            estimates: medians.iter().map(|&m| est(m)).collect(),
            ..Repeated::default()
        }
    }

    /// The figure sent for synthetic repetition sequences: the lower of the two lowest when
    /// they agree, else the lowest, marked unconverged; never a noisy pair that agrees.
    #[test]
    fn figure_messages_follow_the_repetition_rule() {
        let m = Method::default();
        let fig = |r: &Repeated| match r.message(7, ClockKind::Tsc, &m, None) {
            Msg::Figure {
                values,
                repetitions,
                converged,
                rejected,
                attempts,
                ..
            } => (
                stats::median(&values),
                repetitions,
                converged,
                rejected,
                attempts,
            ),
            other => panic!("{other:?}"),
        };
        let (v, reps, ok, rejected, attempts) = fig(&repeated(&[0.31, 0.2502, 0.25]));
        assert_eq!((v, ok), (0.25, true));
        assert_eq!(reps, vec![0.31, 0.2502, 0.25]);
        assert_eq!((rejected, attempts), (3, 18));
        // The vpaddd run, 10 repetitions that never agree: the lowest, unconverged.
        let (v, _, ok, ..) = fig(&repeated(&[
            0.58, 0.31, 0.27, 0.45, 0.33, 0.29, 0.40, 0.36, 0.50, 0.60,
        ]));
        assert_eq!((v, ok), (0.27, false));
        // Two noisy repetitions agreeing above a lone low one: not accepted.
        let (v, _, ok, ..) = fig(&repeated(&[0.311, 0.31, 0.25]));
        assert_eq!((v, ok), (0.25, false));
        // A lone low repetition outvoted by three that agree: the agreeing value is sent.
        let (v, _, ok, ..) = fig(&repeated(&[0.2429, 0.2501, 0.2503, 0.2502]));
        assert_eq!((v, ok), (0.2501, true));
        // Repetitions the contention sentinel discarded never count; with nothing else, the
        // lowest of them is shown, unconverged, with the sentinel readings.
        let r = Repeated {
            discarded: vec![est(0.497), est(0.51)],
            contended: vec![0.49, 0.5],
            ..Repeated::default()
        };
        match r.message(3, ClockKind::Tsc, &m, None) {
            Msg::Figure {
                values,
                converged,
                contended,
                repetitions,
                ..
            } => {
                assert_eq!(stats::median(&values), 0.497);
                assert!(!converged && repetitions.is_empty());
                assert_eq!(contended, vec![0.49, 0.5]);
            }
            other => panic!("{other:?}"),
        }
        let r = Repeated {
            estimates: vec![est(0.25)],
            discarded: vec![est(0.497), est(0.498)],
            contended: vec![0.49, 0.5],
            ..Repeated::default()
        };
        assert!(
            r.agreed(&m).is_none(),
            "discarded repetitions never confirm"
        );
        // One repetition never converges, even with min_rounds = 1.
        let one = Method {
            min_rounds: 1,
            ..Method::default()
        };
        assert!(repeated(&[1.0]).agreed(&one).is_none());
    }

    /// Which jobs get another round: accepted ones stop; a throughput chain count more than
    /// 5% above the best accepted chain count stops (dropped) after two repetitions; latency
    /// jobs are never dropped.
    #[test]
    fn rounds_stop_when_accepted_or_clearly_not_the_best() {
        let m = Method::default();
        let mut reps = vec![
            (2, repeated(&[3.0, 3.01])),    // latency, accepted
            (3, repeated(&[1.3, 1.2])),     // latency, not yet
            (4, repeated(&[0.5, 0.501])),   // tp 2 chains, accepted
            (5, repeated(&[0.25, 0.2501])), // tp 4 chains, accepted: the best
            (6, repeated(&[0.30, 0.27])),   // tp 8 chains: 8% above the best, dropped
            (7, repeated(&[0.26, 0.2525])), // tp 12 chains: within 5%, measured again
            (8, repeated(&[0.9])),          // tp, one repetition: measured again
        ];
        let tp = [4, 5, 6, 7, 8];
        let next = still_needed(&mut reps, &tp, &m, 4);
        assert_eq!(next, vec![3, 7, 8]);
        assert!(reps[4].1.dropped && !reps[5].1.dropped);
        match reps[4].1.message(6, ClockKind::Tsc, &m, None) {
            Msg::Figure {
                converged, dropped, ..
            } => assert!(!converged && dropped),
            other => panic!("{other:?}"),
        }
        // Without an accepted chain count nothing is dropped.
        let mut reps = vec![(4, repeated(&[0.5, 0.6])), (5, repeated(&[0.3, 0.4]))];
        assert_eq!(still_needed(&mut reps, &[4, 5], &m, 4), vec![4, 5]);
        // The best accepted chain count at an implausible value is measured again; an
        // implausible one that is not the best, and a latency, are done.
        let mut reps = vec![
            (2, repeated(&[2.5, 2.51])),    // latency at 2.5: done
            (4, repeated(&[0.284, 0.285])), // tp 4 chains: the best, implausible
            (5, repeated(&[0.29, 0.291])),  // tp 8 chains: implausible, not the best
        ];
        assert_eq!(still_needed(&mut reps, &[4, 5], &m, 4), vec![4]);
        // Once a lower pair agrees on a plausible value, it is done.
        reps[1]
            .1
            .estimates
            .extend(repeated(&[0.25, 0.2505]).estimates);
        assert_eq!(still_needed(&mut reps, &[4, 5], &m, 4), Vec::<usize>::new());
        assert_eq!(reps[1].1.agreed(&m), Some(0.25));
        // Three agreeing at an implausible 0.284 over one plausible 0.250: the lower is shown,
        // unconverged; without the pipe count (a latency) the agreeing three win.
        let r = repeated(&[0.2501, 0.284, 0.2841, 0.2842]);
        let shown = |n: Option<usize>| match r.message(4, ClockKind::Tsc, &m, n) {
            Msg::Figure {
                values,
                converged,
                outvoted_plausible,
                ..
            } => (stats::median(&values), converged, outvoted_plausible),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            shown(Some(4)),
            (stats::median(&r.estimates[0].values), false, true)
        );
        assert_eq!(
            shown(None),
            (stats::median(&r.estimates[1].values), true, false)
        );
    }
}
