//! The [`Replay`] backend: recorded raw readings, run by run.

use crate::plan::Plan;

use super::run::{Backend, Measurement, RawInterval, RunError, RunOptions, Target};

/// Replays recorded measurements, in order, one per `run` call: what a `tma stat --record`
/// snapshot holds, so a replay goes through the same session code as the live run. Each run
/// was recorded with a plan; the plan asked for must name the same events in each of its
/// non-empty groups (a `--no-multiplex` run asks for a sub-plan with the other groups
/// emptied). In interval mode the recorded intervals go to the interval callback in order.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    pub runs: std::collections::VecDeque<(Plan, Measurement)>,
}

impl Backend for Replay {
    fn run_with(
        &mut self,
        plan: &Plan,
        _target: &Target,
        opts: &RunOptions,
        on_interval: &mut dyn FnMut(&RawInterval),
    ) -> Result<Measurement, RunError> {
        let (recorded, m) = self
            .runs
            .pop_front()
            .ok_or_else(|| RunError::Replay("no more recorded runs".into()))?;
        let same = plan.groups.len() == recorded.groups.len()
            && plan.groups.iter().zip(&recorded.groups).all(|(a, b)| {
                a.events.is_empty()
                    || a.events
                        .iter()
                        .map(|e| &e.name)
                        .eq(b.events.iter().map(|e| &e.name))
            });
        if !same {
            return Err(RunError::Replay(
                "the plan differs from the recorded one (different CPU, level or events)".into(),
            ));
        }
        if opts.interval.is_some() {
            for iv in &m.intervals {
                on_interval(iv);
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::run::tests::two_group_plan;
    use crate::backend::run::Ending;

    #[test]
    fn replay_checks_the_plan() {
        let plan = two_group_plan();
        let m = Measurement {
            start_unix_s: 0.0,
            wall_ns: 1,
            intervals: vec![],
            ending: Ending::Exited(0),
            failed_groups: vec![],
        };
        let mut r = Replay {
            runs: vec![(plan.clone(), m.clone())].into(),
        };
        assert_eq!(
            r.run(&plan, &Target::Pids(vec![1]), &RunOptions::new())
                .unwrap(),
            m
        );
        assert!(r
            .run(&plan, &Target::Pids(vec![1]), &RunOptions::new())
            .is_err());
        let mut other = plan.clone();
        other.groups.pop();
        let mut r = Replay {
            runs: vec![(plan, m)].into(),
        };
        assert!(r
            .run(&other, &Target::Pids(vec![1]), &RunOptions::new())
            .is_err());
    }
}
