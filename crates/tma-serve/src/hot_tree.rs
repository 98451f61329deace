//! `--cgroup-top N` with a PMU: the TMA tree of the N cgroups with the most slots (cycles
//! on AMD), re-chosen every refresh, and the rest of the system as `cgroup="other"`.
//!
//! Opening counters for every cgroup of a busy host would cost thousands of file
//! descriptors per CPU; so each refresh reads the cgroup tree's CPU time (cgroupfs, cheap)
//! for every cgroup, and counts the tree only for the chosen N, in perf_event's cgroup mode,
//! beside one system-wide count of the same events:
//!
//! 1. read the counters: system-wide, and each followed cgroup's since it was opened;
//! 2. publish ([`Collector::hot_interval`]): each followed cgroup's tree (less the followed
//!    cgroups below it: cgroup mode counts descendants), `other` = the system less the
//!    followed cgroups, so that the counters add up to the system's whatever the churn;
//! 3. choose the next N: measured slots for the followed cgroups, CPU time converted at
//!    their slots per CPU second for the others; only the cgroups that enter or leave the
//!    top have their counters opened or closed ([`HotCounters`]).
//!
//! A cgroup chosen at one refresh is counted from then on and named from the next one; its
//! first growth is also in `other` (a series' first sample adds nothing to a rate), as
//! [`crate::hot`] does for CPU time. The first refresh only reads the CPU time baseline, so
//! the first cgroups are chosen at the second and named from the third.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tma_perf::backend::{RawInterval, RunError};
use tma_perf::cgroup_counters::CgroupCounters;
use tma_stat::StatError;

use crate::collect::Collector;
use crate::log::Log;

/// Counters whose cgroups change between reads: [`CgroupCounters`] live, a recorder in
/// tests.
pub trait HotCounters {
    /// Follow the cgroup directory `path` from now on; the id its readings carry.
    fn add(&mut self, path: &Path) -> Result<u32, RunError>;
    /// Stop following `id`.
    fn remove(&mut self, id: u32) -> bool;
    /// The system-wide readings (no cgroup label) and each followed cgroup's, since the
    /// last read.
    fn read(&mut self) -> Result<RawInterval, RunError>;
}

impl HotCounters for CgroupCounters {
    fn add(&mut self, path: &Path) -> Result<u32, RunError> {
        CgroupCounters::add(self, path)
    }
    fn remove(&mut self, id: u32) -> bool {
        CgroupCounters::remove(self, id)
    }
    fn read(&mut self) -> Result<RawInterval, RunError> {
        CgroupCounters::read(self)
    }
}

/// What one refresh changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retarget {
    /// Cgroups whose counters were opened (paths relative to the cgroup root).
    pub opened: Vec<String>,
    /// Cgroups whose counters were closed.
    pub closed: Vec<String>,
    /// Chosen cgroups that could not be opened (gone since the scan, or refused), with why.
    pub refused: Vec<(String, String)>,
}

/// The hot cgroups' counters and the choice that drives them.
pub struct HotTree<C: HotCounters> {
    counters: C,
    /// The cgroup v2 root the chosen paths are relative to.
    root: PathBuf,
    /// (id, path) of the followed cgroups.
    followed: Vec<(u32, String)>,
}

impl<C: HotCounters> HotTree<C> {
    pub fn new(counters: C, root: impl Into<PathBuf>) -> HotTree<C> {
        HotTree {
            counters,
            root: root.into(),
            followed: Vec::new(),
        }
    }

    /// The followed cgroups (paths relative to the root), in the order they were opened.
    pub fn followed(&self) -> Vec<&str> {
        self.followed.iter().map(|(_, p)| p.as_str()).collect()
    }

    pub fn counters(&self) -> &C {
        &self.counters
    }

    pub fn counters_mut(&mut self) -> &mut C {
        &mut self.counters
    }

    /// One refresh: read, publish through `collector`, then follow the cgroups it chose,
    /// opening and closing only those that changed.
    pub fn step(&mut self, collector: &mut Collector) -> Result<Retarget, StatError> {
        let raw = self.counters.read().map_err(StatError::Run)?;
        let next = collector.hot_interval(&raw, &self.followed)?;
        let mut out = Retarget::default();
        let counters = &mut self.counters;
        self.followed.retain(|(id, path)| {
            if next.contains(path) {
                return true;
            }
            counters.remove(*id);
            out.closed.push(path.clone());
            false
        });
        for path in next {
            if self.followed.iter().any(|(_, p)| *p == path) {
                continue;
            }
            match self.counters.add(&self.root.join(&path)) {
                Ok(id) => {
                    self.followed.push((id, path.clone()));
                    out.opened.push(path);
                }
                // Removed since the scan, or refused (out of file descriptors...): left in
                // `other`, chosen again next time if it is still among the hottest.
                Err(e) => out.refused.push((path, e.to_string())),
            }
        }
        Ok(out)
    }
}

/// Count until SIGINT/SIGTERM: one [`HotTree::step`] per `every`.
pub fn run<C: HotCounters>(
    tree: &mut HotTree<C>,
    every: Duration,
    collector: &mut Collector,
    log: &Log,
) -> Result<(), StatError> {
    let mut next = Instant::now() + every;
    loop {
        loop {
            if tma_perf::process::interrupted() {
                return Ok(());
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
        next += every;
        let r = tree.step(collector)?;
        if !r.opened.is_empty() || !r.closed.is_empty() {
            log.info(
                "cgroup_top_changed",
                &[
                    ("opened", &r.opened.join(",")),
                    ("closed", &r.closed.join(",")),
                ],
            );
        }
        for (path, why) in &r.refused {
            log.info("cgroup_not_counted", &[("cgroup", path), ("error", why)]);
        }
    }
}
