//! What every backend shares: the [`Target`], the [`RunOptions`], the [`Measurement`] of raw
//! group readings and the one function that turns it into readings
//! ([`Measurement::interval_readings`]), the [`Backend`] trait, and what is done with
//! measurements (restricted to groups, combined, repeated).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::attr::AttrError;
use crate::event::{EventSpec, SoftwareEvent};
use crate::plan::Plan;
use crate::process::CommandStdout;
use crate::readings::{Interval, Reading, ReadingStatus};
use tma_host::sysfs::Pmus;
use tma_host::Host;

/// What to count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Launch a command (`argv[0]` looked up in PATH), counters enabled at exec. The
    /// arguments are the OS strings the user gave (any bytes but NUL); see
    /// [`crate::process::os_args`] for how they are recorded.
    Command(#[serde(with = "crate::process::os_args")] Vec<OsString>),
    /// Existing processes, all their threads.
    Pids(Vec<i32>),
    /// Existing threads.
    Tids(Vec<i32>),
    /// System-wide, on these CPUs (`None` = all online CPUs).
    System(Option<Vec<u32>>),
    /// System-wide on these CPUs (`None` = all online CPUs) while a launched command runs,
    /// as `perf stat -a -- CMD`: every task is counted, the command only bounds the run and
    /// gives the exit status.
    SystemDuring {
        cpus: Option<Vec<u32>>,
        #[serde(with = "crate::process::os_args")]
        command: Vec<OsString>,
    },
    /// The tasks of these cgroups (directories of a cgroup v2 hierarchy, as absolute paths),
    /// on every online CPU: perf_event's cgroup mode (`PERF_FLAG_PID_CGROUP`), one counter
    /// group per cgroup and CPU. Readings carry the cgroup's index in this list.
    Cgroups(Vec<PathBuf>),
}

/// How to run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// `-I MS`: read deltas every this many milliseconds.
    pub interval: Option<Duration>,
    /// Stop after this long (attach and system-wide targets; a command also stops then).
    pub duration: Option<Duration>,
    /// The `/sys` and `/proc` roots.
    pub host: Host,
    /// Where a launched command's stdout goes.
    pub command_stdout: CommandStdout,
    /// The interval callback consumes the intervals: the [`Measurement`] then holds their
    /// sum as one interval instead of every one (memory stays flat over a long `-I` run).
    pub stream_only: bool,
}

impl RunOptions {
    /// Options with the real `/sys` and `/proc`.
    pub fn new() -> Self {
        RunOptions {
            host: Host::system(),
            ..Default::default()
        }
    }
}

/// Errors from counting.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("hardware counters are not available: perf_event_open of {event} failed: {source}")]
    NoHardware {
        event: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Attr(#[from] AttrError),
    /// The kernel refused for want of privilege; `advice` is `tma_sys::advice`'s for what was
    /// opened (a task's user code, a task with its kernel code, or a whole CPU).
    #[error("permission denied opening {event} (perf_event_paranoid is {paranoid}): {advice}")]
    Permission {
        event: String,
        paranoid: String,
        advice: &'static str,
    },
    #[error("no such process: {0} (check the pid with `ps -p {0}`)")]
    NoSuchProcess(i32),
    #[error("command not found: {0} (not an executable file, and not in PATH)")]
    CommandNotFound(String),
    #[error("cannot run {cmd}: {source}")]
    Exec { cmd: String, source: std::io::Error },
    #[error("CPU {0} is not online (see /sys/devices/system/cpu/online)")]
    BadCpu(u32),
    #[error("kernel refused {event} (perf_event_open: {source})")]
    Open {
        event: String,
        source: std::io::Error,
    },
    #[error("reading counters failed: {0}")]
    Read(std::io::Error),
    #[error("nothing to count: empty target list")]
    EmptyTarget,
    #[error(
        "cannot count cgroup {}: {why}; give a directory of the cgroup v2 hierarchy, e.g. \
         /sys/fs/cgroup/system.slice/NAME.service (see `cat /proc/PID/cgroup` for a process's)",
        path.display()
    )]
    BadCgroup { path: PathBuf, why: String },
    #[error("replay: {0}")]
    Replay(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Raw readings of one group at one attach point for one interval (deltas).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupReading {
    /// Index of the group in the plan.
    pub group: usize,
    /// CPU for system-wide counting, else `None`.
    pub cpu: Option<u32>,
    /// Thread for attached-thread counting, else `None`.
    pub tid: Option<u32>,
    /// Index into [`Target::Cgroups`] for cgroup counting, else `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<u32>,
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
    /// One raw value per group member, in plan order.
    pub values: Vec<u64>,
}

/// All group readings of one interval (or of the whole run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawInterval {
    pub start_s: f64,
    pub end_s: f64,
    pub groups: Vec<GroupReading>,
}

impl RawInterval {
    /// Add `next`'s deltas (the stretch that follows this one) per group and attach point.
    pub fn add(&mut self, next: &RawInterval) {
        self.end_s = next.end_s;
        for g in &next.groups {
            match self.groups.iter_mut().find(|o| {
                o.group == g.group && o.cpu == g.cpu && o.tid == g.tid && o.cgroup == g.cgroup
            }) {
                Some(o) => {
                    o.time_enabled_ns += g.time_enabled_ns;
                    o.time_running_ns += g.time_running_ns;
                    for (a, b) in o.values.iter_mut().zip(&g.values) {
                        *a += b;
                    }
                }
                None => self.groups.push(g.clone()),
            }
        }
    }
}

/// A run's intervals as a backend collects them: every one, or with
/// [`RunOptions::stream_only`] their running sum, so that a long `-I` run whose intervals
/// are consumed by the callback keeps constant memory.
pub(super) struct Collected {
    keep: bool,
    pub(super) intervals: Vec<RawInterval>,
}

impl Collected {
    pub(super) fn new(opts: &RunOptions) -> Self {
        Collected {
            keep: !opts.stream_only,
            intervals: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, iv: RawInterval) {
        match self.intervals.first_mut() {
            Some(sum) if !self.keep => sum.add(&iv),
            _ => self.intervals.push(iv),
        }
    }
}

/// How the counted target ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The launched command exited with this code.
    Exited(i32),
    /// The launched command was killed by this signal.
    Signaled(i32),
    /// Ctrl-C / SIGTERM stopped counting.
    Interrupted,
    /// `--duration` elapsed.
    Duration,
    /// Every attached process exited.
    TargetsExited,
}

/// Everything one run counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Unix time (seconds) counting started.
    pub start_unix_s: f64,
    /// Wall-clock duration of the run, nanoseconds.
    pub wall_ns: u64,
    /// One entry per `-I` interval; a single entry for a run without `-I`.
    pub intervals: Vec<RawInterval>,
    pub ending: Ending,
    /// Groups the kernel refused (index, reason); their events read as not supported.
    #[serde(default)]
    pub failed_groups: Vec<(usize, String)>,
}

impl Measurement {
    /// The whole run as one raw interval (deltas summed per group and attach point).
    pub fn total(&self) -> RawInterval {
        let mut out = RawInterval {
            start_s: self.intervals.first().map_or(0.0, |i| i.start_s),
            end_s: self.intervals.first().map_or(0.0, |i| i.start_s),
            groups: Vec::new(),
        };
        for iv in &self.intervals {
            out.add(iv);
        }
        out
    }

    /// Readings for one raw interval: per attach point scaled by its own enabled/running
    /// time (`Reading::from_raw`), then summed into one aggregated reading per event. With
    /// `breakdown`, the per-CPU / per-thread readings are kept too.
    pub fn interval_readings(plan: &Plan, raw: &RawInterval, breakdown: bool) -> Interval {
        let mut readings: Vec<Reading> = Vec::new();
        let mut parts: Vec<Reading> = Vec::new();
        for (gi, group) in plan.groups.iter().enumerate() {
            let mut agg: Vec<Option<Agg>> = vec![None; group.events.len()];
            for gr in raw.groups.iter().filter(|g| g.group == gi) {
                for (k, ev) in group.events.iter().enumerate() {
                    let v = gr.values.get(k).copied().unwrap_or(0);
                    // Enabled for no time at all in this stretch (a per-task counter while the
                    // task slept): nothing happened and nothing was missed, so the value is the
                    // raw delta (0), fully counted, rather than "not counted".
                    let mut r = if gr.time_enabled_ns == 0 {
                        let mut r = Reading::from_raw(&ev.name, v, 0, 0);
                        r.value = Some(v as f64);
                        r.counted_share = Some(1.0);
                        r.status = ReadingStatus::Counted;
                        r
                    } else {
                        Reading::from_raw(&ev.name, v, gr.time_enabled_ns, gr.time_running_ns)
                    };
                    r.group = Some(gi);
                    let a = agg[k].get_or_insert_with(Agg::default);
                    a.raw += v;
                    a.enabled += gr.time_enabled_ns;
                    a.running += gr.time_running_ns;
                    if let Some(x) = r.value {
                        a.value += x;
                        a.counted = true;
                    }
                    if breakdown && (gr.cpu.is_some() || gr.tid.is_some()) {
                        r.cpu = gr.cpu;
                        r.tid = gr.tid;
                        parts.push(r);
                    }
                }
            }
            for (k, ev) in group.events.iter().enumerate() {
                let r = match &agg[k] {
                    // No reading of this group at all: it could not be opened.
                    None => {
                        let mut r = Reading::missing(&ev.name, ReadingStatus::NotSupported);
                        r.group = Some(gi);
                        r
                    }
                    Some(a) => Reading {
                        event: ev.name.clone(),
                        raw: Some(a.raw),
                        value: a.counted.then_some(a.value),
                        time_enabled_ns: Some(a.enabled),
                        time_running_ns: Some(a.running),
                        counted_share: Some(if a.enabled == 0 {
                            1.0
                        } else {
                            (a.running as f64 / a.enabled as f64).min(1.0)
                        }),
                        status: if a.counted {
                            ReadingStatus::Counted
                        } else {
                            ReadingStatus::NotCounted
                        },
                        group: Some(gi),
                        block: None,
                        cpu: None,
                        tid: None,
                    },
                };
                readings.push(r);
            }
        }
        for (alias, name) in &plan.aliases {
            if let Some(r) = readings.iter().find(|r| &r.event == name).cloned() {
                readings.push(Reading {
                    event: alias.clone(),
                    ..r
                });
            }
        }
        readings.extend(parts);
        Interval {
            start_s: raw.start_s,
            end_s: raw.end_s,
            readings,
            printed: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Agg {
    raw: u64,
    value: f64,
    enabled: u64,
    running: u64,
    counted: bool,
}

/// A way of producing measurements for a plan.
pub trait Backend {
    /// Run `plan` on `target`. In interval mode (`opts.interval`), `on_interval` gets each
    /// interval as soon as it is read, in order (the same ones the measurement then holds),
    /// so a caller can print or export while counting goes on.
    fn run_with(
        &mut self,
        plan: &Plan,
        target: &Target,
        opts: &RunOptions,
        on_interval: &mut dyn FnMut(&RawInterval),
    ) -> Result<Measurement, RunError>;

    /// [`Backend::run_with`] without an interval callback.
    fn run(
        &mut self,
        plan: &Plan,
        target: &Target,
        opts: &RunOptions,
    ) -> Result<Measurement, RunError> {
        self.run_with(plan, target, opts, &mut |_| {})
    }
}

/// The software counts `tma stat` always takes (and the only ones on a machine without PMU).
pub fn software_events() -> Vec<EventSpec> {
    [
        SoftwareEvent::TaskClock,
        SoftwareEvent::ContextSwitches,
        SoftwareEvent::CpuMigrations,
        SoftwareEvent::PageFaults,
    ]
    .into_iter()
    .map(EventSpec::software)
    .collect()
}

/// Whether a group of `pmu` can be opened on `cpu` (-1: any CPU, per-task counting): always,
/// unless the PMU is one core type of a hybrid part whose `cpus` file leaves `cpu` out.
pub(super) fn pmu_covers(pmus: &Pmus, pmu: &str, cpu: i32) -> bool {
    let Ok(cpu) = u32::try_from(cpu) else {
        return true;
    };
    match pmus.get(pmu) {
        Some(p) if p.is_core_type() => p.cpu_list().contains(&cpu),
        _ => true,
    }
}

/// Restrict a measurement to some groups (a `--no-multiplex` run measures one group).
pub fn only_groups(m: &Measurement, groups: &[usize]) -> Measurement {
    let mut out = m.clone();
    for iv in &mut out.intervals {
        iv.groups.retain(|g| groups.contains(&g.group));
    }
    out
}

/// A plan holding only the given groups of `plan` (group indices are kept by the caller).
pub fn sub_plan(plan: &Plan, groups: &[usize]) -> Plan {
    Plan {
        groups: plan
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                if groups.contains(&i) {
                    g.clone()
                } else {
                    crate::plan::Group {
                        pmu: g.pmu.clone(),
                        events: Vec::new(),
                        slots: Vec::new(),
                    }
                }
            })
            .collect(),
        unschedulable: plan.unschedulable.clone(),
        aliases: plan.aliases.clone(),
    }
}

/// Merge the total readings of several runs that each measured different groups
/// (`--no-multiplex`): one raw interval with every group once.
pub fn combine_runs(runs: &[Measurement]) -> Measurement {
    let mut groups = Vec::new();
    let mut wall = 0;
    for m in runs {
        groups.extend(m.total().groups);
        wall += m.wall_ns;
    }
    let end_s = wall as f64 / 1e9;
    Measurement {
        start_unix_s: runs.first().map_or(0.0, |m| m.start_unix_s),
        wall_ns: wall,
        intervals: vec![RawInterval {
            start_s: 0.0,
            end_s,
            groups,
        }],
        ending: runs.last().map_or(Ending::Exited(0), |m| m.ending),
        failed_groups: runs.iter().flat_map(|m| m.failed_groups.clone()).collect(),
    }
}

/// Mean and relative spread (sample standard deviation as % of the mean) per event over
/// repeated runs, from their aggregated readings.
pub fn repeat_stats(plan: &Plan, runs: &[Measurement]) -> Vec<(String, f64, f64)> {
    let totals: Vec<Interval> = runs
        .iter()
        .map(|m| Measurement::interval_readings(plan, &m.total(), false))
        .collect();
    let mut out = Vec::new();
    for ev in plan.events() {
        let vals: Vec<f64> = totals
            .iter()
            .filter_map(|t| t.get(&ev.name).and_then(|r| r.value))
            .collect();
        if vals.is_empty() {
            continue;
        }
        let n = vals.len() as f64;
        let mean = vals.iter().sum::<f64>() / n;
        let sd = if vals.len() > 1 {
            (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        let pct = if mean != 0.0 {
            100.0 * sd / mean.abs()
        } else {
            0.0
        };
        out.push((ev.name.clone(), mean, pct));
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::plan::{Group, Slot};

    pub(in crate::backend) fn two_group_plan() -> Plan {
        let g = |names: &[&str]| Group {
            pmu: "cpu".into(),
            events: names.iter().map(|n| EventSpec::raw(*n, "cpu", 1)).collect(),
            slots: (0..names.len()).map(|i| Slot::Gp(i as u8)).collect(),
        };
        Plan {
            groups: vec![g(&["A", "B"]), g(&["C"])],
            unschedulable: vec![],
            aliases: vec![("C_ALIAS".into(), "C".into())],
        }
    }

    fn gr(group: usize, cpu: Option<u32>, en: u64, run: u64, values: &[u64]) -> GroupReading {
        GroupReading {
            group,
            cpu,
            tid: None,
            cgroup: None,
            time_enabled_ns: en,
            time_running_ns: run,
            values: values.to_vec(),
        }
    }

    #[test]
    fn multiplex_scaling_per_group() {
        let plan = two_group_plan();
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups: vec![
                gr(0, None, 1000, 500, &[10, 20]),
                gr(1, None, 1000, 250, &[7]),
            ],
        };
        let iv = Measurement::interval_readings(&plan, &raw, false);
        assert_eq!(iv.get("A").unwrap().value, Some(20.0));
        assert_eq!(iv.get("B").unwrap().value, Some(40.0));
        assert_eq!(iv.get("C").unwrap().value, Some(28.0));
        assert_eq!(iv.get("C").unwrap().counted_share, Some(0.25));
        assert_eq!(iv.get("C_ALIAS").unwrap().value, Some(28.0));
    }

    #[test]
    fn idle_stretch_is_zero_not_missing() {
        let plan = two_group_plan();
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups: vec![gr(0, None, 0, 0, &[0, 0]), gr(1, None, 10, 0, &[0])],
        };
        let iv = Measurement::interval_readings(&plan, &raw, false);
        assert_eq!(iv.get("A").unwrap().value, Some(0.0));
        assert_eq!(iv.get("A").unwrap().status, ReadingStatus::Counted);
        // Enabled but never on a counter: not counted, no value.
        assert_eq!(iv.get("C").unwrap().value, None);
    }

    #[test]
    fn per_cpu_scaled_then_summed() {
        let plan = two_group_plan();
        let raw = RawInterval {
            start_s: 0.0,
            end_s: 1.0,
            groups: vec![
                gr(0, Some(0), 100, 100, &[10, 1]),
                gr(0, Some(1), 100, 50, &[10, 1]),
                gr(1, Some(0), 100, 0, &[0]),
                gr(1, Some(1), 100, 0, &[0]),
            ],
        };
        let iv = Measurement::interval_readings(&plan, &raw, true);
        // CPU0 10 + CPU1 10*2 = 30; share = 150/200.
        let a = iv.get("A").unwrap();
        assert_eq!(a.value, Some(30.0));
        assert_eq!(a.counted_share, Some(0.75));
        // Never scheduled anywhere: not counted, no value (never a silent zero).
        let c = iv.get("C").unwrap();
        assert_eq!(c.status, ReadingStatus::NotCounted);
        assert_eq!(c.value, None);
        let per_cpu: Vec<_> = iv
            .readings
            .iter()
            .filter(|r| r.cpu == Some(1) && r.event == "A")
            .collect();
        assert_eq!(per_cpu[0].value, Some(20.0));
    }

    #[test]
    fn totals_and_no_multiplex_combination_and_repeat() {
        let plan = two_group_plan();
        let m = |a: u64, c: u64| Measurement {
            start_unix_s: 0.0,
            wall_ns: 1_000_000_000,
            intervals: vec![
                RawInterval {
                    start_s: 0.0,
                    end_s: 0.5,
                    groups: vec![gr(0, None, 50, 50, &[a, 1]), gr(1, None, 50, 50, &[c])],
                },
                RawInterval {
                    start_s: 0.5,
                    end_s: 1.0,
                    groups: vec![gr(0, None, 50, 25, &[a, 1]), gr(1, None, 50, 25, &[c])],
                },
            ],
            ending: Ending::Exited(0),
            failed_groups: vec![],
        };
        let t = m(10, 3).total();
        assert_eq!(t.groups[0].values, vec![20, 2]);
        assert_eq!(
            (t.groups[0].time_enabled_ns, t.groups[0].time_running_ns),
            (100, 75)
        );
        // --no-multiplex: run 1 measured group 0, run 2 group 1.
        let r1 = only_groups(&m(10, 0), &[0]);
        let r2 = only_groups(&m(0, 3), &[1]);
        let c = combine_runs(&[r1, r2]);
        let iv = Measurement::interval_readings(&plan, &c.intervals[0], false);
        assert_eq!(iv.get("C").unwrap().raw, Some(6));
        assert_eq!(iv.get("A").unwrap().raw, Some(20));
        let stats = repeat_stats(&plan, &[m(10, 3), m(20, 3)]);
        let a = stats.iter().find(|s| s.0 == "A").unwrap();
        // totals 20 and 40 raw over share 0.75 -> 26.67 and 53.33; mean 40, sd 18.86 -> 47.1%.
        assert!((a.1 - 40.0).abs() < 1e-9);
        assert!((a.2 - 47.14).abs() < 0.01, "{}", a.2);
        let cst = stats.iter().find(|s| s.0 == "C").unwrap();
        assert_eq!(cst.2, 0.0);
    }
}
