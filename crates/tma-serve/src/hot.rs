//! `--cgroup-top N` over the whole cgroup tree: each interval reads every cgroup's CPU time
//! ([`tma_host::cgroupfs`]), names the N that used the most since the last refresh, and
//! puts the rest in one `cgroup="other"` bucket, so that the series add up to the CPU time
//! of the whole tree whatever the churn.
//!
//! Each named cgroup's counter is its own CPU time since tma started following it (kept
//! while it is out of the top, so its rate is right when it comes back); `other` grows by
//! the time of the cgroups not named in a refresh, and by that of the cgroups named for the
//! first time (their series start then, and a series' first sample adds nothing to a
//! rate). So from one exposition to the next, the growth of the series present in both adds
//! up to the growth of the whole tree, which is what `sum(rate(...))` sees.

use std::collections::{HashMap, HashSet};

use tma_host::cgroupfs::{Accounting, CgroupFs, CgroupFsError};

use crate::expo::{Family, Kind};

/// The label of the root cgroup (its own tasks, and the last moments of removed cgroups).
pub const ROOT_LABEL: &str = "/";

/// Which cgroups a refresh names.
#[derive(Debug, Clone, Copy)]
pub enum Naming<'a> {
    /// The `N` that used the most CPU time since the last refresh.
    Top(usize),
    /// These (paths relative to the root): the cgroups whose TMA tree is counted.
    These(&'a HashSet<String>),
}

/// The cgroups of a tree followed by CPU time.
#[derive(Debug)]
pub struct HotCgroups {
    fs: CgroupFs,
    accounting: Accounting,
    /// Seconds charged to each live cgroup since it was first seen.
    totals: HashMap<String, f64>,
    other: f64,
    all: f64,
    /// The cgroups named in the last refresh (`None` before the first).
    named: Option<HashSet<String>>,
}

impl HotCgroups {
    pub fn new(fs: CgroupFs) -> HotCgroups {
        HotCgroups {
            fs,
            accounting: Accounting::default(),
            totals: HashMap::new(),
            other: 0.0,
            all: 0.0,
            named: None,
        }
    }

    pub fn fs(&self) -> &CgroupFs {
        &self.fs
    }

    /// Read the tree and charge the time since the last refresh. The families: each of the
    /// `top` busiest cgroups and `other` (at most `room - 2` series in all, `other`
    /// included), the number left out, the number seen.
    pub fn refresh(&mut self, top: usize, room: usize) -> Result<Vec<Family>, CgroupFsError> {
        let charged = self.scan()?;
        Ok(self.families(&charged, Naming::Top(top), room))
    }

    /// Read the tree and charge the time since the last scan: (cgroup, microseconds) of
    /// every cgroup of the tree, the root (`""`) included.
    pub fn scan(&mut self) -> Result<Vec<(String, u64)>, CgroupFsError> {
        let scan = self.fs.scan()?;
        let charges = self.accounting.charge(&scan);
        // Live cgroups only: a removed cgroup's total goes with it.
        let mut totals = HashMap::with_capacity(charges.charged.len());
        for (path, usec) in &charges.charged {
            let t = self.totals.get(path).copied().unwrap_or(0.0) + *usec as f64 / 1e6;
            totals.insert(path.clone(), t);
        }
        self.totals = totals;
        self.all += charges.total as f64 / 1e6;
        Ok(charges.charged)
    }

    /// Whether `path` (relative to the root, `""` for the root) was in the tree at the last
    /// scan.
    pub fn is_live(&self, path: &str) -> bool {
        self.totals.contains_key(path)
    }

    /// The families of the charges of one scan (see [`HotCgroups::refresh`]); with
    /// [`Naming::These`], the cgroups named are those (the ones whose TMA tree is
    /// exported), in the room there is.
    pub fn families(
        &mut self,
        charged: &[(String, u64)],
        naming: Naming<'_>,
        room: usize,
    ) -> Vec<Family> {
        let mut ranked: Vec<&(String, u64)> = charged.iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if let Naming::These(names) = naming {
            // The chosen ones first (in rank order), then the others.
            ranked.sort_by_key(|(p, _)| !names.contains(p));
        }
        let n = ranked.len();
        // `other` always has its series, so that the sum is the same set of series.
        let wanted = match naming {
            Naming::Top(top) => top,
            Naming::These(names) => ranked.iter().filter(|(p, _)| names.contains(p)).count(),
        };
        let named = wanted.min(n).min(room.saturating_sub(3));
        let mut cpu = Family::new(
            "tma_cgroup_cpu_seconds",
            Kind::Counter,
            "CPU time of each of the --cgroup-top busiest cgroups (cpu.stat usage, its own \
             tasks, not its children's) since tma started following it, and of the others \
             together as cgroup=\"other\"; the series add up to the whole tree.",
        );
        let mut now_named = HashSet::with_capacity(named);
        for (path, usec) in &ranked[..named] {
            let label = if path.is_empty() { ROOT_LABEL } else { path };
            cpu.push(
                vec![("cgroup", label.to_string())],
                self.totals.get(path).copied().unwrap_or(0.0),
            );
            if self.named.as_ref().is_some_and(|prev| !prev.contains(path)) {
                self.other += *usec as f64 / 1e6;
            }
            now_named.insert(path.clone());
        }
        self.named = Some(now_named);
        self.other += ranked[named..]
            .iter()
            .map(|(_, u)| *u as f64 / 1e6)
            .sum::<f64>();
        cpu.push(vec![("cgroup", "other".into())], self.other);
        let mut left = Family::new(
            "tma_cgroups_left_out",
            Kind::Gauge,
            "Cgroups counted in cgroup=\"other\" in the last interval (not among the \
             --cgroup-top busiest, or beyond the series budget).",
        );
        left.push(Vec::new(), (n - named) as f64);
        let mut seen = Family::new(
            "tma_cgroups_seen",
            Kind::Gauge,
            "Cgroups in the cgroup tree at the last refresh (the root included).",
        );
        seen.push(Vec::new(), n as f64);
        vec![cpu, left, seen]
    }

    /// The CPU time of the whole tree since the first refresh, seconds (what the series of
    /// `tma_cgroup_cpu_seconds_total` add up to, named and left-out time together).
    pub fn total_seconds(&self) -> f64 {
        self.all
    }
}
