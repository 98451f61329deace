//! The calling thread's place on the CPUs: its scheduling policy (`SCHED_IDLE` or the normal
//! one), its affinity mask, and the CPU it runs on. tma's region server uses them to sit on
//! the program's CPU without taking it from the program (tma_regions' placement).
// unsafe allowed: sched_setscheduler(2) (rustix has no wrapper).
#![allow(unsafe_code)]

use std::io;

use rustix::thread::CpuSet;

/// The calling thread's scheduling policy: `SCHED_IDLE` (it runs only when nothing else on
/// its CPU wants to; the scheduler also treats a CPU that runs only such threads as idle when
/// it places a woken thread) or `SCHED_OTHER`, the normal one. Lowering the policy needs no
/// privilege; going back to `SCHED_OTHER` from `SCHED_IDLE` needs none on Linux 2.6.39 and
/// later when the thread's nice value allows it (RLIMIT_NICE), as it does by default.
pub fn set_idle_policy(idle: bool) -> io::Result<()> {
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the duration of
    // the call, which only reads it.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's affinity mask.
pub fn affinity() -> io::Result<CpuSet> {
    Ok(rustix::thread::sched_getaffinity(None)?)
}

/// Set the calling thread's affinity mask.
pub fn set_affinity(set: &CpuSet) -> io::Result<()> {
    Ok(rustix::thread::sched_setaffinity(None, set)?)
}

/// Keep the calling thread on `cpu` alone (`EINVAL` when it is not one this thread may use).
pub fn pin_to(cpu: usize) -> io::Result<()> {
    if cpu >= CpuSet::MAX_CPU {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    set_affinity(&set)
}

/// The CPU the calling thread runs on.
pub fn current_cpu() -> usize {
    rustix::thread::sched_getcpu()
}

/// Whether `cpu` is in `set`.
pub fn has_cpu(set: &CpuSet, cpu: usize) -> bool {
    cpu < CpuSet::MAX_CPU && set.is_set(cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a thread of its own (a test thread's policy and mask must not leak to others).
    #[test]
    fn idle_policy_and_pinning_round_trip() {
        std::thread::spawn(|| {
            let before = affinity().unwrap();
            let cpu = (0..CpuSet::MAX_CPU).find(|&c| has_cpu(&before, c)).unwrap();
            pin_to(cpu).unwrap();
            assert_eq!(current_cpu(), cpu);
            set_idle_policy(true).unwrap();
            assert_eq!(policy(), libc::SCHED_IDLE);
            set_idle_policy(false).unwrap();
            assert_eq!(policy(), libc::SCHED_OTHER);
            set_affinity(&before).unwrap();
            let after = affinity().unwrap();
            assert!((0..CpuSet::MAX_CPU).all(|c| has_cpu(&after, c) == has_cpu(&before, c)));
            assert!(pin_to(CpuSet::MAX_CPU).is_err());
        })
        .join()
        .unwrap();
    }

    fn policy() -> i32 {
        // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
        unsafe { libc::sched_getscheduler(0) }
    }
}
