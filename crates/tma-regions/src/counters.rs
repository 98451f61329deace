//! The live [`ThreadCounters`]: the plan's groups opened on each thread that names a region
//! (any CPU, enabled at once, following the threads and processes it starts from then on),
//! through tma-perf's `perf_event_open`, and read with one `read(2)` per group (which sums
//! the thread and those it started).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

use tma_host::sysfs::Pmus;
use tma_marker::protocol::{EventAttr, GroupCount};
use tma_perf::attr::{attr_for, AttachMode, Attr};
use tma_perf::plan::Plan;
use tma_perf::sys;

use crate::tree::ThreadCounters;
use crate::RegionsError;

/// One thread and the threads and processes it starts (inherited counters), counting from
/// the moment they are opened.
const PER_THREAD: AttachMode = AttachMode {
    enable_on_exec: false,
    inherit: true,
    start_disabled: false,
};

struct Group {
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    n: usize,
}

/// The plan's groups on every thread that named a region.
pub struct LiveCounters {
    attrs: Vec<Vec<Attr>>,
    threads: HashMap<u32, Vec<Group>>,
}

impl LiveCounters {
    /// The perf_event_attr of every event of `plan`, group by group.
    pub fn new(plan: &Plan, pmus: &Pmus) -> Result<LiveCounters, RegionsError> {
        let mut attrs = Vec::new();
        for g in &plan.groups {
            let mut ga = Vec::new();
            for (k, ev) in g.events.iter().enumerate() {
                let mut a = attr_for(ev, pmus, PER_THREAD, k == 0)
                    .map_err(|e| RegionsError::Counters(e.to_string()))?;
                a.disabled = false;
                ga.push(a);
            }
            attrs.push(ga);
        }
        Ok(LiveCounters {
            attrs,
            threads: HashMap::new(),
        })
    }

    fn open_on(&self, tid: i32) -> std::io::Result<Vec<Group>> {
        let mut out = Vec::new();
        for g in &self.attrs {
            let Some((first, rest)) = g.split_first() else {
                continue;
            };
            let leader = sys::perf_open(first, tid, -1, None)?;
            let mut members = Vec::new();
            for a in rest {
                members.push(sys::perf_open(a, tid, -1, Some(leader.as_raw_fd()))?);
            }
            out.push(Group {
                leader,
                _members: members,
                n: g.len(),
            });
        }
        Ok(out)
    }

    /// Whether the groups open at all: tried on tma's own thread, before the program starts.
    pub fn probe(&self) -> std::io::Result<()> {
        self.open_on(0).map(drop)
    }

    /// The groups as the marker library opens them in process ([`tma_marker::protocol::ENV_EVENTS`]);
    /// `None` when an event cannot be written there (kernel-only counting).
    pub fn event_attrs(&self) -> Option<Vec<Vec<EventAttr>>> {
        self.attrs
            .iter()
            .map(|g| {
                g.iter()
                    .map(|a| {
                        (!a.exclude_user).then_some(EventAttr {
                            type_: a.type_,
                            config: a.config,
                            config1: a.config1,
                            config2: a.config2,
                            user_only: a.exclude_kernel,
                        })
                    })
                    .collect()
            })
            .collect()
    }
}

impl ThreadCounters for LiveCounters {
    fn open(&mut self, tid: u32) -> Result<(), String> {
        let t = i32::try_from(tid).map_err(|_| format!("bad thread id {tid}"))?;
        let groups = self.open_on(t).map_err(|e| match e.raw_os_error() {
            Some(libc::ESRCH) => format!("no thread {tid}"),
            _ => e.to_string(),
        })?;
        self.threads.insert(tid, groups);
        Ok(())
    }

    fn read(&mut self, tid: u32) -> Result<Vec<GroupCount>, String> {
        let groups = self
            .threads
            .get(&tid)
            .ok_or_else(|| format!("thread {tid} has no counters"))?;
        groups
            .iter()
            .map(|g| {
                let mut c = GroupCount::default();
                c.read_leader(&g.leader, g.n).map_err(|e| e.to_string())?;
                Ok(c)
            })
            .collect()
    }
}
