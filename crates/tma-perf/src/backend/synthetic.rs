//! The [`Synthetic`] backend: chosen true counts and multiplexing shares.

use serde::{Deserialize, Serialize};

use crate::event::EventSpec;
use crate::plan::Plan;
use tma_host::sysfs::Pmus;

use super::run::{
    pmu_covers, Backend, Collected, Ending, GroupReading, Measurement, RawInterval, RunError,
    RunOptions, Target,
};

/// A backend that answers any plan from chosen true counts and chosen multiplexing shares
/// (tests and demonstrations of scaling on machines without a PMU). Group `g` of the plan is
/// "on a counter" for `running_share[g]` of the enabled time (the last entry repeats; none
/// means 1.0), so each member reads `round(count * share)` raw, and scaling must recover
/// `count`. Events without a chosen count read 0. In interval mode the run is cut into equal
/// intervals of `-I` length, each with an equal part of the counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Synthetic {
    /// True counts over the whole run, by event name (case-insensitive).
    pub events: std::collections::BTreeMap<String, u64>,
    /// Share of the enabled time each plan group (by index) was on a counter, 0..=1; applied
    /// only when the plan has more than one hardware group (otherwise nothing multiplexes).
    #[serde(default)]
    pub running_share: Vec<f64>,
    /// Wall time (and enabled time) of each run.
    pub wall_ns: u64,
    /// How each run ends.
    #[serde(default = "default_ending")]
    pub ending: Ending,
    /// Threads of a `-t`/`-p` target, each with its part of every core type's counts: one
    /// reading per thread instead of one for the whole target (per-thread trees, threads
    /// that move between core types).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<SyntheticThread>,
}

/// One thread of a [`Synthetic`] run: for each PMU (`cpu_core`, `cpu_atom`, `software`...),
/// the share of that PMU's counts this thread takes in each interval (the last entry
/// repeats). A thread that runs on the P-cores, then moves to the E-cores has
/// `cpu_core: [1, 0]`, `cpu_atom: [0, 1]`. A PMU it does not name is split evenly over the
/// threads. Its per-task counters of a core type count only while it is on that type:
/// enabled all the time, running for its share of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticThread {
    pub tid: u32,
    pub share: std::collections::BTreeMap<String, Vec<f64>>,
}

impl SyntheticThread {
    fn share_of(&self, pmu: &str, interval: usize, threads: usize) -> Option<f64> {
        let v = self.share.get(pmu)?;
        v.get(interval)
            .or(v.last())
            .map(|x| x.clamp(0.0, 1.0))
            .or(Some(1.0 / threads.max(1) as f64))
    }
}

fn default_ending() -> Ending {
    Ending::Exited(0)
}

impl Default for Synthetic {
    fn default() -> Self {
        Synthetic {
            events: Default::default(),
            running_share: Vec::new(),
            wall_ns: 0,
            ending: default_ending(),
            threads: Vec::new(),
        }
    }
}

impl Synthetic {
    /// The chosen count of `name` on `pmu`: `pmu/name` first (each core type of a hybrid
    /// part has its own counts of events of the same name), then `name`.
    fn chosen(&self, pmu: &str, name: &str) -> Option<u64> {
        let find = |want: &str| {
            self.events
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(want))
                .map(|(_, v)| *v)
        };
        find(&format!("{pmu}/{name}")).or_else(|| find(name))
    }
    fn share(&self, group: usize) -> f64 {
        self.running_share
            .get(group)
            .or(self.running_share.last())
            .copied()
            .unwrap_or(1.0)
            .clamp(0.0, 1.0)
    }
}

impl Backend for Synthetic {
    fn run_with(
        &mut self,
        plan: &Plan,
        target: &Target,
        opts: &RunOptions,
        on_interval: &mut dyn FnMut(&RawInterval),
    ) -> Result<Measurement, RunError> {
        // System-wide on a CPU list: the counts are split evenly over the CPUs (per-CPU
        // readings, as the live backend gives); otherwise one aggregated reading per group.
        // On a hybrid part (core-type PMUs in the sysfs of `opts.host`), a core type's groups
        // read on its own CPUs only, and `-a` means every online CPU.
        let pmus = Pmus::discover(&opts.host.sys).unwrap_or_default();
        let hybrid = !pmus.core_types().is_empty();
        let cpus: Vec<Option<u32>> = match target {
            Target::System(Some(c))
            | Target::SystemDuring {
                cpus: Some(c),
                command: _,
            } if !c.is_empty() => c.iter().map(|x| Some(*x)).collect(),
            Target::System(None) | Target::SystemDuring { cpus: None, .. } if hybrid => opts
                .host
                .online_cpus_or_cpu0()
                .into_iter()
                .map(Some)
                .collect(),
            _ => vec![None],
        };
        let threads: &[SyntheticThread] = match target {
            Target::Tids(_) | Target::Pids(_) => &self.threads,
            _ => &[],
        };
        let n_iv = match opts.interval {
            Some(i) if i.as_nanos() > 0 => (self.wall_ns as u128 / i.as_nanos()).max(1) as u64,
            _ => 1,
        };
        let wall_s = self.wall_ns as f64 / 1e9;
        // Like the kernel, only multiplex when several hardware groups compete.
        let hw_groups = plan
            .groups
            .iter()
            .filter(|g| {
                g.slots
                    .iter()
                    .any(|s| !matches!(s, crate::plan::Slot::NoCounter))
            })
            .count();
        let mut intervals = Collected::new(opts);
        for k in 0..n_iv {
            // Split a whole-run quantity evenly; the last interval takes the rest.
            let part = |x: u64| {
                let base = x / n_iv;
                if k + 1 == n_iv {
                    x - base * (n_iv - 1)
                } else {
                    base
                }
            };
            let mut groups = Vec::new();
            for (gi, g) in plan.groups.iter().enumerate() {
                if g.events.is_empty() {
                    continue;
                }
                let share = if hw_groups > 1 { self.share(gi) } else { 1.0 };
                let enabled = self.wall_ns;
                let running = (enabled as f64 * share).round() as u64;
                let count = |e: &EventSpec| {
                    self.chosen(&g.pmu, &e.name)
                        .map_or(0, |c| (c as f64 * share).round() as u64)
                };
                if !threads.is_empty() {
                    // Each thread: its part of the time on this PMU, and of its counts.
                    let core_type = pmus.get(&g.pmu).is_some_and(|p| p.is_core_type());
                    for t in threads {
                        let f = t
                            .share_of(&g.pmu, k as usize, threads.len())
                            .unwrap_or(if core_type { 0.0 } else { 1.0 });
                        let of = |x: u64| (part(x) as f64 * f).round() as u64;
                        groups.push(GroupReading {
                            group: gi,
                            cpu: None,
                            tid: Some(t.tid),
                            cgroup: None,
                            time_enabled_ns: part(enabled),
                            time_running_ns: if core_type {
                                of(running)
                            } else {
                                part(running)
                            },
                            values: g.events.iter().map(|e| of(count(e))).collect(),
                        });
                    }
                    continue;
                }
                let on: Vec<Option<u32>> = cpus
                    .iter()
                    .copied()
                    .filter(|c| c.is_none_or(|c| pmu_covers(&pmus, &g.pmu, c as i32)))
                    .collect();
                let n_cpu = on.len() as u64;
                for (ci, cpu) in on.iter().enumerate() {
                    // Split over CPUs; the first CPU takes the rest.
                    let per_cpu = |x: u64| {
                        let base = x / n_cpu;
                        if ci == 0 {
                            x - base * (n_cpu - 1)
                        } else {
                            base
                        }
                    };
                    groups.push(GroupReading {
                        group: gi,
                        cpu: *cpu,
                        tid: None,
                        cgroup: None,
                        time_enabled_ns: part(enabled),
                        time_running_ns: part(running),
                        values: g.events.iter().map(|e| part(per_cpu(count(e)))).collect(),
                    });
                }
            }
            let iv = RawInterval {
                start_s: wall_s * k as f64 / n_iv as f64,
                end_s: wall_s * (k + 1) as f64 / n_iv as f64,
                groups,
            };
            if opts.interval.is_some() {
                on_interval(&iv);
            }
            intervals.push(iv);
        }
        Ok(Measurement {
            start_unix_s: 0.0,
            wall_ns: self.wall_ns,
            intervals: intervals.intervals,
            ending: self.ending,
            failed_groups: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Group, Slot};
    use std::time::Duration;

    #[test]
    fn synthetic_counts_scale_like_live_ones() {
        let plan = Plan {
            groups: vec![
                Group {
                    pmu: "cpu".into(),
                    events: vec![EventSpec::raw("A", "cpu", 1), EventSpec::raw("B", "cpu", 2)],
                    slots: vec![Slot::Gp(0), Slot::Gp(1)],
                },
                Group {
                    pmu: "cpu".into(),
                    events: vec![EventSpec::raw("C", "cpu", 3)],
                    slots: vec![Slot::Gp(0)],
                },
            ],
            unschedulable: vec![],
            aliases: vec![],
        };
        let mut s = Synthetic {
            wall_ns: 1_000_000_000,
            running_share: vec![0.25],
            ..Default::default()
        };
        s.events.insert("a".into(), 400);
        let m = s
            .run(&plan, &Target::Pids(vec![]), &RunOptions::new())
            .unwrap();
        let iv = Measurement::interval_readings(&plan, &m.total(), false);
        assert_eq!(iv.get("A").unwrap().value, Some(400.0));
        assert_eq!(iv.get("A").unwrap().raw, Some(100));
        assert_eq!(iv.get("A").unwrap().counted_share, Some(0.25));
        assert_eq!(iv.get("B").unwrap().value, Some(0.0));
        let mut o = RunOptions::new();
        o.interval = Some(Duration::from_millis(300));
        let m = s.run(&plan, &Target::Pids(vec![]), &o).unwrap();
        assert_eq!(m.intervals.len(), 3);
        assert_eq!(m.total().groups[0].values[0], 100);
        // A single hardware group is never multiplexed.
        let one = crate::backend::sub_plan(&plan, &[0]);
        let m = s
            .run(&one, &Target::Pids(vec![]), &RunOptions::new())
            .unwrap();
        let iv = Measurement::interval_readings(&one, &m.total(), false);
        assert_eq!(iv.get("A").unwrap().raw, Some(400));
        assert_eq!(iv.get("A").unwrap().counted_share, Some(1.0));
    }
}
