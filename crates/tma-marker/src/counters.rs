//! The in-process counters of one thread: the groups tma names in
//! [`crate::protocol::ENV_EVENTS`], opened on the calling thread (any CPU) through tma-perf and
//! read with one `read(2)` per group.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use tma_perf::attr::{Attr, READ_FORMAT};
use tma_perf::sys;

use crate::protocol::{EventAttr, GroupCount};

/// One group: the leader, its members (kept open), and how many counters it holds.
struct Group {
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    n: usize,
}

/// The counter groups of the calling thread, counting from the moment they are opened.
pub(crate) struct ThreadGroups {
    groups: Vec<Group>,
}

fn attr(e: &EventAttr) -> Attr {
    Attr {
        type_: e.type_,
        config: e.config,
        config1: e.config1,
        config2: e.config2,
        read_format: READ_FORMAT,
        sample_period: 0,
        disabled: false,
        inherit: false,
        enable_on_exec: false,
        exclude_kernel: e.user_only,
        exclude_user: false,
    }
}

impl ThreadGroups {
    /// Open every group on this thread, enabled.
    pub(crate) fn open(events: &[Vec<EventAttr>]) -> io::Result<ThreadGroups> {
        let mut groups = Vec::with_capacity(events.len());
        for g in events {
            let Some((first, rest)) = g.split_first() else {
                continue;
            };
            let leader = sys::perf_open(&attr(first), 0, -1, None)?;
            let mut members = Vec::with_capacity(rest.len());
            for e in rest {
                members.push(sys::perf_open(&attr(e), 0, -1, Some(leader.as_raw_fd()))?);
            }
            groups.push(Group {
                leader,
                _members: members,
                n: g.len(),
            });
        }
        Ok(ThreadGroups { groups })
    }

    /// The cumulative counts of every group.
    pub(crate) fn read(&self) -> io::Result<Vec<GroupCount>> {
        self.groups
            .iter()
            .map(|g| {
                let r = sys::read_group(&g.leader, g.n)?;
                Ok(GroupCount {
                    enabled: r.time_enabled,
                    running: r.time_running,
                    values: r.values.iter().map(|v| v.0).collect(),
                })
            })
            .collect()
    }
}
