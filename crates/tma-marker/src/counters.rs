//! The in-process counters of one thread: the groups tma names in
//! [`crate::protocol::ENV_EVENTS`], opened on the calling thread (any CPU) through tma-perf and
//! read with `rdpmc` where the kernel allows it for a group of hardware counters
//! ([`crate::rdpmc`]), else with one `read(2)` per group.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tma_perf::attr::{Attr, READ_FORMAT, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use tma_perf::sys;

use crate::protocol::{EventAttr, GroupCount};
use crate::rdpmc::Page;

/// One group: the leader, its members (kept open), and how many counters it holds.
struct Group {
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    n: usize,
    /// Every counter's mapped page (leader first), when the group is read with `rdpmc`.
    pages: Vec<Page>,
}

/// The pages of a group of hardware counters the kernel lets this thread read with `rdpmc`
/// (empty otherwise: software counters, no PMU, rdpmc disabled).
fn user_pages(events: &[EventAttr], fds: &[&OwnedFd]) -> Vec<Page> {
    if events
        .iter()
        .any(|e| e.type_ == TYPE_SOFTWARE || e.type_ == TYPE_TRACEPOINT)
    {
        return Vec::new();
    }
    let pages: Vec<Page> = fds.iter().filter_map(|fd| Page::map(fd).ok()).collect();
    if pages.len() == fds.len() && pages.iter().all(Page::user_readable) {
        pages
    } else {
        Vec::new()
    }
}

/// The counter groups of the calling thread, counting from the moment they are opened.
pub(crate) struct ThreadGroups {
    groups: Vec<Group>,
    /// What one reading of every group takes (the least of a few, timed at open).
    read_cost: Duration,
}

fn attr(e: &EventAttr, inherit: bool) -> Attr {
    Attr {
        type_: e.type_,
        config: e.config,
        config1: e.config1,
        config2: e.config2,
        read_format: READ_FORMAT,
        sample_period: 0,
        disabled: false,
        inherit,
        enable_on_exec: false,
        exclude_kernel: e.user_only,
        exclude_user: false,
    }
}

/// A group read with `rdpmc` into `out`, when it has pages and every counter is on the PMU
/// now (`false`, and `out` unspecified, otherwise).
fn read_user(pages: &[Page], out: &mut GroupCount) -> bool {
    let Some((first, rest)) = pages.split_first() else {
        return false;
    };
    let Some((v, enabled, running)) = first.read() else {
        return false;
    };
    out.values.clear();
    out.values.push(v);
    for p in rest {
        match p.read() {
            Some((v, _, _)) => out.values.push(v),
            None => return false,
        }
    }
    out.enabled = enabled;
    out.running = running;
    true
}

impl ThreadGroups {
    /// Whether any group is read with `rdpmc`.
    #[cfg(test)]
    pub(crate) fn uses_rdpmc(&self) -> bool {
        self.groups.iter().any(|g| !g.pages.is_empty())
    }

    /// Open every group on this thread, enabled; with `inherit`, following the threads and
    /// processes it starts from now on (read with `read(2)`, which sums them: `rdpmc` reads
    /// the thread's own counter only).
    pub(crate) fn open(events: &[Vec<EventAttr>], inherit: bool) -> io::Result<ThreadGroups> {
        let mut groups = Vec::with_capacity(events.len());
        for g in events {
            let Some((first, rest)) = g.split_first() else {
                continue;
            };
            let leader = sys::perf_open(&attr(first, inherit), 0, -1, None)?;
            let mut members = Vec::with_capacity(rest.len());
            for e in rest {
                members.push(sys::perf_open(
                    &attr(e, inherit),
                    0,
                    -1,
                    Some(leader.as_raw_fd()),
                )?);
            }
            let fds: Vec<&OwnedFd> = std::iter::once(&leader).chain(&members).collect();
            let pages = if inherit {
                Vec::new()
            } else {
                user_pages(g, &fds)
            };
            groups.push(Group {
                leader,
                _members: members,
                n: g.len(),
                pages,
            });
        }
        let mut g = ThreadGroups {
            groups,
            read_cost: Duration::ZERO,
        };
        g.read_cost = (0..3)
            .map(|_| {
                let t = Instant::now();
                let _ = g.read();
                t.elapsed()
            })
            .min()
            .unwrap_or_default();
        Ok(g)
    }

    /// What one reading takes: a reading taken less than this before a boundary is as
    /// close to it as a new one could be.
    pub(crate) fn read_cost(&self) -> Duration {
        self.read_cost
    }

    /// The cumulative counts of every group.
    pub(crate) fn read(&self) -> io::Result<Vec<GroupCount>> {
        let mut out = Vec::new();
        self.read_into(&mut out)?;
        Ok(out)
    }

    /// [`ThreadGroups::read`] into `out`, reusing its vectors: no allocation once `out` has
    /// held a reading (this runs at every region boundary).
    pub(crate) fn read_into(&self, out: &mut Vec<GroupCount>) -> io::Result<()> {
        out.resize_with(self.groups.len(), GroupCount::default);
        for (g, c) in self.groups.iter().zip(out.iter_mut()) {
            if !read_user(&g.pages, c) {
                c.read_leader(&g.leader, g.n)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-process read of a hardware counter with `rdpmc` agrees with the kernel's read;
    /// needs a PMU that allows user-space reads.
    #[test]
    fn rdpmc_agrees_with_the_kernel() {
        let cycles = EventAttr {
            type_: tma_perf::attr::TYPE_HARDWARE,
            config: 0,
            config1: 0,
            config2: 0,
            user_only: true,
        };
        let g = match ThreadGroups::open(&[vec![cycles]], false) {
            Ok(g) => g,
            Err(e) => {
                println!("skipped: no hardware cycles counter on this thread ({e})");
                return;
            }
        };
        if !g.uses_rdpmc() {
            println!("skipped: the kernel does not allow rdpmc here (cap_user_rdpmc unset)");
            return;
        }
        let a = g.read().unwrap().remove(0);
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        let b = g.read().unwrap().remove(0);
        let r = sys::read_group(&g.groups[0].leader, 1).unwrap();
        assert!(b.values[0] > a.values[0] + 1_000_000, "{a:?} {b:?}");
        // The kernel's read, taken after, is at least the user-space one and close to it.
        assert!(r.values[0].0 >= b.values[0]);
        assert!(r.values[0].0 - b.values[0] < 1_000_000, "{r:?} {b:?}");
        assert!(b.enabled >= b.running && b.running > a.running);
    }
}
