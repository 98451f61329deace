//! Counters whose cgroups change while they count: `tma serve --cgroup-top N` with a PMU
//! counts the TMA tree of the N hottest cgroups, and the N change from one refresh to the
//! next. [`CgroupCounters`] holds one plan's groups system-wide (every task on every CPU,
//! what the cgroups' counts are taken from to give the rest) and, for each followed cgroup,
//! the same groups in perf_event's cgroup mode (`PERF_FLAG_PID_CGROUP`, the cgroup's
//! directory fd as `pid`, one attach point per CPU, as [`Target::Cgroups`] counts them).
//!
//! [`CgroupCounters::add`] opens one cgroup's groups (enabled at once) and
//! [`CgroupCounters::remove`] closes them; the other cgroups' counters and the system-wide
//! ones go on untouched, so a refresh that changes one cgroup of N re-opens one cgroup's
//! groups, not N. [`CgroupCounters::read`] gives the deltas of every open group since the
//! last read (a cgroup added since then: since it was opened), system-wide readings with no
//! cgroup label and each cgroup's with the id `add` gave it.
//!
//! perf_event's cgroup mode is hierarchical: a cgroup's counters count its descendants'
//! tasks too. Callers that follow a cgroup and one of its descendants take that into account.
//!
//! [`Target::Cgroups`]: crate::backend::Target::Cgroups

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::attr::AttachMode;
use crate::backend::{
    cgroup_points, open_cgroup, open_groups, read_deltas, AttachPoint, FailedGroups, OpenGroup,
    RawInterval, RunError,
};
use tma_host::Host;

/// Per-CPU counters that count from the moment they are opened: there is no exec to wait
/// for, and a cgroup added between two reads counts from its open on.
const RUNNING: AttachMode = AttachMode {
    enable_on_exec: false,
    inherit: false,
    start_disabled: false,
};
use crate::plan::Plan;
use crate::sys;
use tma_host::sysfs::Pmus;

/// What opens a counter: [`sys::perf_open_flags`] live, a recorder in tests.
pub type BoxedOpener = Box<
    dyn FnMut(
            &crate::attr::Attr,
            i32,
            i32,
            Option<i32>,
            u64,
        ) -> std::io::Result<std::os::fd::OwnedFd>
        + Send,
>;

/// One followed cgroup's open groups.
struct Followed {
    id: u32,
    path: PathBuf,
    groups: Vec<OpenGroup>,
}

/// A plan counted system-wide and in cgroup mode for a changing set of cgroups.
pub struct CgroupCounters {
    plan: Plan,
    pmus: Pmus,
    host: Host,
    cpus: Vec<u32>,
    opener: BoxedOpener,
    system: Vec<OpenGroup>,
    followed: Vec<Followed>,
    next_id: u32,
    t0: Instant,
    last_s: f64,
    failed: FailedGroups,
    /// Cgroups opened and closed since this set was made (what a refresh cost).
    opened: u64,
    closed: u64,
}

impl std::fmt::Debug for CgroupCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CgroupCounters")
            .field("cpus", &self.cpus)
            .field("system_groups", &self.system.len())
            .field(
                "followed",
                &self
                    .followed
                    .iter()
                    .map(|c| (c.id, &c.path))
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl CgroupCounters {
    /// Open `plan` system-wide on every online CPU of `host`, counting at once: the kernel's own
    /// counters (perf_event_open). Fails as a live run does (no PMU, no permission).
    pub fn open(plan: &Plan, host: &Host) -> Result<CgroupCounters, RunError> {
        let pmus = Pmus::discover(&host.sys).unwrap_or_default();
        let cpus = host.online_cpus_or_cpu0();
        Self::with_opener(plan, host, pmus, cpus, Box::new(sys::perf_open_flags))
    }

    /// [`CgroupCounters::open`] with chosen PMUs, CPUs and opener (tests record the calls).
    pub fn with_opener(
        plan: &Plan,
        host: &Host,
        pmus: Pmus,
        cpus: Vec<u32>,
        mut opener: BoxedOpener,
    ) -> Result<CgroupCounters, RunError> {
        let points: Vec<AttachPoint> = cpus
            .iter()
            .map(|&c| AttachPoint {
                pid: -1,
                cpu: c as i32,
                flags: 0,
                cpu_label: Some(c),
                tid_label: None,
                cgroup_label: None,
            })
            .collect();
        let (system, failed) = open_groups(plan, &pmus, &points, RUNNING, host, &mut *opener)?;
        Ok(CgroupCounters {
            plan: plan.clone(),
            pmus,
            host: host.clone(),
            cpus,
            opener,
            system,
            followed: Vec::new(),
            next_id: 0,
            t0: Instant::now(),
            last_s: 0.0,
            failed,
            opened: 0,
            closed: 0,
        })
    }

    /// Follow the cgroup at `path` (a cgroup v2 directory) from now on: its groups opened on
    /// every CPU in cgroup mode, counting at once. The id its readings carry.
    pub fn add(&mut self, path: &Path) -> Result<u32, RunError> {
        let fd = open_cgroup(path)?;
        let id = self.next_id;
        let points = cgroup_points(&[fd.as_raw_fd()], &self.cpus);
        let points: Vec<AttachPoint> = points
            .into_iter()
            .map(|p| AttachPoint {
                cgroup_label: Some(id),
                ..p
            })
            .collect();
        let (groups, failed) = open_groups(
            &self.plan,
            &self.pmus,
            &points,
            RUNNING,
            &self.host,
            &mut *self.opener,
        )?;
        // The kernel holds its own reference to the cgroup once the counters are open.
        drop(fd);
        for f in failed {
            if !self.failed.iter().any(|(g, _)| *g == f.0) {
                self.failed.push(f);
            }
        }
        self.next_id += 1;
        self.opened += 1;
        self.followed.push(Followed {
            id,
            path: path.to_path_buf(),
            groups,
        });
        Ok(id)
    }

    /// Stop following the cgroup `id` (its counters closed); `false` when it is not followed.
    pub fn remove(&mut self, id: u32) -> bool {
        let before = self.followed.len();
        self.followed.retain(|c| c.id != id);
        let gone = self.followed.len() < before;
        self.closed += u64::from(gone);
        gone
    }

    /// The followed cgroups: (id, path), in the order they were added.
    pub fn followed(&self) -> Vec<(u32, &Path)> {
        self.followed
            .iter()
            .map(|c| (c.id, c.path.as_path()))
            .collect()
    }

    /// Cgroups opened and closed so far.
    pub fn churn(&self) -> (u64, u64) {
        (self.opened, self.closed)
    }

    /// Groups the kernel refused somewhere (their events read as not supported there).
    pub fn failed_groups(&self) -> &[(usize, String)] {
        &self.failed
    }

    /// The CPUs counted on.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// The deltas of every open group since the last read (seconds since the set was
    /// opened as the interval's bounds).
    pub fn read(&mut self) -> Result<RawInterval, RunError> {
        let end_s = self.t0.elapsed().as_secs_f64();
        let mut out = read_deltas(&mut self.system, self.last_s, end_s)?;
        for c in &mut self.followed {
            let part = read_deltas(&mut c.groups, self.last_s, end_s)?;
            out.groups.extend(part.groups);
        }
        self.last_s = end_s;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventSpec, SoftwareEvent};
    use std::sync::{Arc, Mutex};

    /// (pid, cpu, flags) of each open call.
    type Calls = Arc<Mutex<Vec<(i32, i32, u64)>>>;

    fn recorder(calls: &Calls) -> BoxedOpener {
        let calls = Arc::clone(calls);
        Box::new(move |_attr, pid, cpu, _group, flags| {
            calls.lock().unwrap().push((pid, cpu, flags));
            std::fs::File::open("/dev/null").map(std::os::fd::OwnedFd::from)
        })
    }

    /// A directory that passes for a cgroup (it has `cgroup.procs`).
    fn fake_cgroup(root: &Path, name: &str) -> PathBuf {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cgroup.procs"), "").unwrap();
        d
    }

    #[test]
    fn adding_and_removing_a_cgroup_opens_and_closes_only_its_groups() {
        let plan = Plan::software(&[
            EventSpec::software(SoftwareEvent::TaskClock),
            EventSpec::software(SoftwareEvent::ContextSwitches),
        ]);
        let host = Host::new("/nonexistent/sys", "/nonexistent/proc");
        let calls: Calls = Arc::default();
        let mut set = CgroupCounters::with_opener(
            &plan,
            &host,
            Pmus::default(),
            vec![0, 1],
            recorder(&calls),
        )
        .unwrap();
        // System-wide: one group of two events on each of the two CPUs, no cgroup flag.
        assert_eq!(
            *calls.lock().unwrap(),
            [(-1, 0, 0), (-1, 0, 0), (-1, 1, 0), (-1, 1, 0)]
        );
        let dir = tempfile::tempdir().unwrap();
        let a = fake_cgroup(dir.path(), "a");
        let b = fake_cgroup(dir.path(), "b");
        calls.lock().unwrap().clear();
        let ia = set.add(&a).unwrap();
        let ib = set.add(&b).unwrap();
        assert_ne!(ia, ib);
        // Cgroup mode: the directory's fd as pid, every CPU, PERF_FLAG_PID_CGROUP.
        let got = calls.lock().unwrap().clone();
        assert_eq!(got.len(), 8);
        assert!(got
            .iter()
            .all(|&(pid, _, flags)| pid >= 0 && flags == sys::FLAG_PID_CGROUP));
        assert_eq!(
            got.iter().map(|c| c.1).collect::<Vec<_>>(),
            [0, 0, 1, 1, 0, 0, 1, 1],
            "one group per CPU and cgroup"
        );
        // Removing one closes its groups and opens nothing.
        calls.lock().unwrap().clear();
        assert!(set.remove(ia));
        assert!(!set.remove(ia));
        assert!(calls.lock().unwrap().is_empty());
        assert_eq!(set.followed(), [(ib, b.as_path())]);
        assert_eq!(set.churn(), (2, 1));
        // A path that is not a cgroup opens nothing.
        assert!(matches!(
            set.add(&dir.path().join("missing")),
            Err(RunError::BadCgroup { .. })
        ));
        assert!(calls.lock().unwrap().is_empty());
        // Ids are not reused: a cgroup that comes back is a new set of counters.
        assert_eq!(set.add(&a).unwrap(), 2);
    }
}
