//! Where tma's control thread runs while it answers a program's acknowledged lines.
//!
//! An acknowledged line is a round trip: the program writes, tma wakes, reads the counters,
//! answers, and the program wakes. When tma's thread and the program's are on different CPUs,
//! each wake-up is an interrupt to the other CPU, and on a virtual machine whose idle CPUs
//! halt (no halt polling) that costs tens of microseconds: a pipe round trip between two
//! processes took 73-128 us on the 2-CPU test VM when idle, against 8 us with both on one CPU.
//! Reading the counters of a thread running on another CPU is a further interrupt (14-20 us).
//!
//! So tma follows the program: its control thread moves to the CPU the program's sending
//! thread last ran on, with the `SCHED_IDLE` policy. There it runs only while the program
//! waits for an answer (it never takes the CPU from the program), and the scheduler, which
//! counts a CPU running only `SCHED_IDLE` threads as idle, wakes the program on its own CPU
//! again instead of moving it to another: 10 us per round trip on the same VM.
//!
//! Every [`CHECK`] tma looks where the sending thread is (the scheduler moves it now and
//! then) and moves there too. `SCHED_IDLE` starves when the program's CPU is busy with other
//! work (a round trip took 776 us with a busy thread on each CPU). So, while the sender stays
//! on its CPU, tma measures how long the sender waits for each answer: its blocked time (wall
//! time less its time running and waiting to run, from the kernel's schedstat, and less tma's
//! own CPU time) per acknowledged line since the last check. After [`STARVED_IN_A_ROW`] checks
//! over [`STARVED`], or one over twenty times that, it goes back to the normal policy and the whole affinity mask, and tries
//! again later ([`FIRST_BACKOFF`], doubling to [`MAX_BACKOFF`] while it keeps failing). It
//! also stays put while several of the program's threads send acknowledged lines (one CPU
//! cannot be all of theirs), and when it could not leave `SCHED_IDLE` again (an unprivileged
//! user whose RLIMIT_NICE forbids it: then it never enters it).

use std::time::{Duration, Instant};

/// How often the placement is reconsidered (the sending thread's CPU, how long it waited).
pub(crate) const CHECK: Duration = Duration::from_millis(2);
/// The soonest a check may follow the last one when tma had to sleep for a line (see
/// [`Placement::slept`]).
pub(crate) const EARLY: Duration = Duration::from_micros(200);
/// A sender blocked longer than this per acknowledged line is kept waiting by tma (or
/// sleeps in its regions: either way following it saves nothing).
pub(crate) const STARVED: Duration = Duration::from_micros(50);
/// So many slow checks in a row and tma stops following (one alone can be an interrupt, a
/// kernel thread, or a region that sleeps); one check at twenty times [`STARVED`] is enough.
pub(crate) const STARVED_IN_A_ROW: u32 = 2;
/// How long tma stays put after it stopped following, the first time.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest it stays put before it tries again.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(64);

/// What placement needs from the system (a fake in tests).
pub(crate) trait Os {
    /// The launched program's pid (lines name threads of it or of its descendants).
    fn program(&mut self, _pid: u32) {}
    /// The CPU thread `tid` last ran on; `None` also for a thread outside the program.
    fn thread_cpu(&mut self, tid: u32) -> Option<usize>;
    /// Thread `tid`'s time running and time waiting to run so far (ns).
    fn thread_times(&mut self, tid: u32) -> Option<(u64, u64)>;
    /// The calling thread's CPU time so far (ns).
    fn own_cpu_ns(&mut self) -> u64;
    /// Move the calling thread to `cpu` alone, with the `SCHED_IDLE` policy.
    fn follow(&mut self, cpu: usize) -> std::io::Result<()>;
    /// Back to the normal policy and the thread's first affinity mask.
    fn release(&mut self) -> std::io::Result<()>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Never follows (turned off, or the system refused).
    Off,
    /// Normal policy and mask; may follow from `retry_at` on.
    Normal { retry_at: Instant },
    /// On `cpu` with `SCHED_IDLE`.
    Following { cpu: usize },
}

pub(crate) struct Placement<O: Os> {
    os: O,
    state: State,
    next_check: Instant,
    last_check: Instant,
    /// The thread that sent acknowledged lines since the last check, and whether others did.
    sender: Option<u32>,
    several: bool,
    /// Acknowledged lines since the last check, and the sender's times at it (while
    /// following, on the sender's CPU).
    lines: u32,
    last: Option<(Instant, u64)>,
    backoff: Duration,
    /// The last wait before following again.
    last_wait: Duration,
    /// Slow checks in a row, and since when tma has followed.
    slow: u32,
    since: Instant,
    /// How often tma stopped following because it waited for the CPU, or because several
    /// threads sent lines (for the run's notes).
    pub(crate) starved: u32,
    pub(crate) shared: u32,
    /// Why following was given up for good, if it was.
    pub(crate) off_reason: Option<String>,
    /// Whether it ever followed.
    tried: bool,
}

impl<O: Os> Placement<O> {
    pub(crate) fn new(os: O, enabled: bool, now: Instant) -> Placement<O> {
        Placement {
            os,
            state: if enabled {
                State::Normal { retry_at: now }
            } else {
                State::Off
            },
            next_check: now,
            last_check: now,
            sender: None,
            several: false,
            lines: 0,
            last: None,
            backoff: FIRST_BACKOFF,
            last_wait: Duration::ZERO,
            slow: 0,
            since: now,
            starved: 0,
            shared: 0,
            off_reason: None,
            tried: false,
        }
    }

    /// Following is not possible here (`why`: what [`SystemOs::new`] said): tma stays put,
    /// and the run's notes say why.
    pub(crate) fn cannot_follow(&mut self, why: String) {
        self.state = State::Off;
        self.off_reason = Some(why);
    }

    #[cfg(test)]
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// Whether tma's thread is on the program's CPU (then it sleeps between lines rather than
    /// looking for the next one: a spinning thread there would only wait for the program).
    pub(crate) fn following(&self) -> bool {
        matches!(self.state, State::Following { .. })
    }

    /// One check's waiting of the sender per acknowledged line: after
    /// [`STARVED_IN_A_ROW`] slow checks in a row, tma stops following.
    fn waited(&mut self, per_line: Duration, now: Instant) {
        if per_line <= STARVED {
            self.slow = 0;
            return;
        }
        self.slow += 1;
        // Far over the bar is no interrupt or short nap: the CPU is taken.
        if self.slow >= STARVED_IN_A_ROW || per_line > STARVED * 20 {
            self.starved += 1;
            self.stop_following(now);
        }
    }

    /// While following, tma found no line waiting and goes to sleep for one. On the
    /// sender's CPU it rarely has to (the sender's next line comes while tma waits for the
    /// CPU), so the sender may have moved: check soon, not a whole [`CHECK`] later.
    pub(crate) fn slept(&mut self) {
        if self.following() {
            self.next_check = self.next_check.min(self.last_check + EARLY);
        }
    }

    /// An acknowledged line from thread `tid` was just answered.
    pub(crate) fn acknowledged(&mut self, tid: u32, now: Instant) {
        match self.sender {
            None => self.sender = Some(tid),
            Some(t) if t != tid => self.several = true,
            Some(_) => {}
        }
        self.lines += 1;
        if now < self.next_check || self.state == State::Off {
            return;
        }
        self.next_check = now + CHECK;
        self.last_check = now;
        let sender = self.sender.take();
        let several = std::mem::take(&mut self.several);
        let lines = std::mem::take(&mut self.lines);
        if several {
            if self.following() {
                self.shared += 1;
                self.stop_following(now);
            }
            return;
        }
        let Some(tid) = sender else { return };
        match self.state {
            State::Off => {}
            State::Normal { retry_at } => {
                if now >= retry_at {
                    if let Some(cpu) = self.os.thread_cpu(tid) {
                        self.go_to(cpu, tid, now);
                        self.since = now;
                    }
                }
            }
            State::Following { cpu } => {
                // A spell of following longer than the wait before it: the failures that
                // made the wait grow are history.
                if now.duration_since(self.since) > self.last_wait {
                    self.backoff = FIRST_BACKOFF;
                }
                match self.os.thread_cpu(tid) {
                    Some(now_on) if now_on != cpu => {
                        self.slow = 0;
                        self.go_to(now_on, tid, now);
                    }
                    // On the sender's CPU: how long did it wait for each answer?
                    _ => {
                        let Some(accounted) = self.accounted(tid) else {
                            return;
                        };
                        if let Some((t, before)) = self.last {
                            let wall = now.duration_since(t).as_nanos() as u64;
                            let blocked = wall.saturating_sub(accounted.saturating_sub(before));
                            let per_line = Duration::from_nanos(blocked / u64::from(lines.max(1)));
                            self.waited(per_line, now);
                        }
                        self.last = self.following().then_some((now, accounted));
                    }
                }
            }
        }
    }

    /// The time the sender spent running or waiting to run, plus tma's own CPU time (while
    /// tma works on a line, opening a new thread's counters for one, the sender waits for
    /// tma, not for the CPU): what is left of the wall time is the sender blocked on tma
    /// while tma itself could not run.
    fn accounted(&mut self, tid: u32) -> Option<u64> {
        let (run, delay) = self.os.thread_times(tid)?;
        Some(run + delay + self.os.own_cpu_ns())
    }

    /// Move to the sender's CPU, and take its times there, from which the next check tells
    /// how long it waited for tma.
    fn go_to(&mut self, cpu: usize, tid: u32, now: Instant) {
        match self.os.follow(cpu) {
            Ok(()) => {
                self.tried = true;
                self.state = State::Following { cpu };
                self.last = self.accounted(tid).map(|a| (now, a));
            }
            Err(e) => {
                // A CPU outside tma's own mask (a cpuset) or a refused policy: stay put.
                let _ = self.os.release();
                self.off_reason = Some(format!("cannot move to CPU {cpu}: {e}"));
                self.state = State::Off;
            }
        }
    }

    fn stop_following(&mut self, now: Instant) {
        if let Err(e) = self.os.release() {
            self.off_reason = Some(format!("cannot go back to the normal policy: {e}"));
            self.state = State::Off;
            return;
        }
        self.slow = 0;
        self.last = None;
        self.state = State::Normal {
            retry_at: now + self.backoff,
        };
        self.last_wait = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// What happened, for the run's notes (`-v`): `None` when tma never tried to follow.
    pub(crate) fn summary(&self) -> Option<String> {
        if let Some(why) = &self.off_reason {
            return Some(format!(
                "the control thread stayed where the scheduler put it ({why})"
            ));
        }
        if !self.tried {
            return None;
        }
        Some(format!(
            "the control thread followed the program's sending thread onto its CPU; it went \
             back {} time(s) because that CPU was busy and {} time(s) because several threads \
             sent acknowledged lines",
            self.starved, self.shared
        ))
    }

    /// The program was started with this pid.
    pub(crate) fn program_started(&mut self, pid: u32) {
        self.os.program(pid);
    }

    /// Back to the normal policy and mask at the end of the run.
    pub(crate) fn finish(&mut self) {
        if self.following() {
            let _ = self.os.release();
            self.state = State::Off;
        }
    }
}

impl<O: Os> Drop for Placement<O> {
    /// A run that ends early (an error) must not leave tma's thread on one CPU at
    /// `SCHED_IDLE` for the rest of its work.
    fn drop(&mut self) {
        self.finish();
    }
}

/// The real system: the thread's CPU from `/proc`, its times from schedstat, and the
/// policy and mask through tma_sys::sched. `follow` is refused from the start when leaving
/// `SCHED_IDLE` again is not allowed (tried on a thread of its own).
pub(crate) struct SystemOs {
    host: tma_host::Host,
    mask: rustix::thread::CpuSet,
    program: Option<i32>,
    /// Threads found in the program's tree, or outside it (a line may name any number).
    checked: Vec<(u32, bool)>,
}

/// The most threads whose place in the program's tree is remembered.
const CHECKED: usize = 64;
/// The deepest chain of parents looked up from a thread to the program.
const DEPTH: usize = 16;

impl SystemOs {
    /// The reason, as an error, when this thread could not come back from following.
    pub(crate) fn new(host: tma_host::Host) -> Result<SystemOs, String> {
        let mask = tma_sys::sched::affinity().map_err(|e| format!("no affinity mask: {e}"))?;
        let probe = std::thread::spawn(|| -> std::io::Result<()> {
            tma_sys::sched::set_idle_policy(true)?;
            tma_sys::sched::set_idle_policy(false)
        })
        .join()
        .map_err(|_| "the policy probe failed".to_string())?;
        probe.map_err(|e| format!("cannot leave SCHED_IDLE once in it ({e}; RLIMIT_NICE)"))?;
        Ok(SystemOs {
            host,
            mask,
            program: None,
            checked: Vec::new(),
        })
    }

    /// Whether thread `tid` belongs to the program or to a process it started: a line that
    /// names another thread (a mistake, or a pid reused) must not send tma to that thread's
    /// CPU, where the checks on the sender would watch the wrong thread.
    fn in_program(&mut self, tid: u32) -> bool {
        if let Some(&(_, ok)) = self.checked.iter().find(|(t, _)| *t == tid) {
            return ok;
        }
        let Some(program) = self.program else {
            return false;
        };
        let field = |pid: i32, name: &str| -> Option<i32> {
            self.host.status_field(pid, name).ok()??.parse().ok()
        };
        let mut ok = false;
        let mut t = i32::try_from(tid).unwrap_or(0);
        for _ in 0..DEPTH {
            let Some(tgid) = field(t, "Tgid") else { break };
            if tgid == program {
                ok = true;
                break;
            }
            match field(tgid, "PPid") {
                Some(parent) if parent > 1 => t = parent,
                _ => break,
            }
        }
        if self.checked.len() >= CHECKED {
            self.checked.remove(0);
        }
        self.checked.push((tid, ok));
        ok
    }
}

impl Os for SystemOs {
    fn program(&mut self, pid: u32) {
        self.program = i32::try_from(pid).ok();
        self.checked.clear();
    }
    fn thread_cpu(&mut self, tid: u32) -> Option<usize> {
        if !self.in_program(tid) {
            return None;
        }
        let cpu = self.host.thread_cpu(i32::try_from(tid).ok()?).ok()? as usize;
        tma_sys::sched::has_cpu(&self.mask, cpu).then_some(cpu)
    }
    fn thread_times(&mut self, tid: u32) -> Option<(u64, u64)> {
        self.host.thread_schedstat(i32::try_from(tid).ok()?).ok()
    }
    fn own_cpu_ns(&mut self) -> u64 {
        tma_sys::clock::thread_cpu_ns()
    }
    fn follow(&mut self, cpu: usize) -> std::io::Result<()> {
        tma_sys::sched::pin_to(cpu)?;
        if let Err(e) = tma_sys::sched::set_idle_policy(true) {
            let _ = tma_sys::sched::set_affinity(&self.mask);
            return Err(e);
        }
        Ok(())
    }
    fn release(&mut self) -> std::io::Result<()> {
        tma_sys::sched::set_idle_policy(false)?;
        tma_sys::sched::set_affinity(&self.mask)
    }
}

/// No system at all: placement turned off (`--no-follow`) or refused.
impl Os for Option<SystemOs> {
    fn program(&mut self, pid: u32) {
        if let Some(os) = self {
            os.program(pid);
        }
    }
    fn thread_cpu(&mut self, tid: u32) -> Option<usize> {
        self.as_mut()?.thread_cpu(tid)
    }
    fn thread_times(&mut self, tid: u32) -> Option<(u64, u64)> {
        self.as_mut()?.thread_times(tid)
    }
    fn own_cpu_ns(&mut self) -> u64 {
        self.as_mut().map_or(0, |os| os.own_cpu_ns())
    }
    fn follow(&mut self, cpu: usize) -> std::io::Result<()> {
        match self {
            Some(os) => os.follow(cpu),
            None => Err(std::io::Error::from(std::io::ErrorKind::Unsupported)),
        }
    }
    fn release(&mut self) -> std::io::Result<()> {
        self.as_mut().map_or(Ok(()), |os| os.release())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake system: the sender's CPU, and its times (ns) as the test sets them.
    #[derive(Default)]
    struct Fake {
        cpu_of: std::collections::HashMap<u32, usize>,
        times: (u64, u64),
        own: u64,
        refuse_follow: bool,
        log: Vec<String>,
    }

    impl Fake {
        /// The sender, thread 7, on `cpu`.
        fn sender_on(cpu: usize) -> Fake {
            let mut f = Fake::default();
            f.cpu_of.insert(7, cpu);
            f
        }
    }

    impl Os for &mut Fake {
        fn thread_cpu(&mut self, tid: u32) -> Option<usize> {
            self.cpu_of.get(&tid).copied()
        }
        fn thread_times(&mut self, _tid: u32) -> Option<(u64, u64)> {
            Some(self.times)
        }
        fn own_cpu_ns(&mut self) -> u64 {
            self.own
        }
        fn follow(&mut self, cpu: usize) -> std::io::Result<()> {
            if self.refuse_follow {
                return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
            }
            self.log.push(format!("follow {cpu}"));
            Ok(())
        }
        fn release(&mut self) -> std::io::Result<()> {
            self.log.push("release".into());
            Ok(())
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// One check interval from `from`: 20 acknowledged lines, the sender running or waiting
    /// to run all of the time but `blocked_us` per line (its times advanced by that); returns
    /// the interval's end, where the check happens.
    fn interval(p: &mut Placement<&mut Fake>, from: Instant, blocked_us: u64) -> Instant {
        let end = from + CHECK;
        let busy = CHECK.as_nanos() as u64 - blocked_us * 20 * 1000;
        p.os.times.0 += busy;
        for k in 1..20u32 {
            p.acknowledged(7, from + CHECK * k / 20);
        }
        p.acknowledged(7, end);
        end
    }

    #[test]
    fn follows_the_sender_and_its_moves() {
        let mut os = Fake::sender_on(1);
        let t0 = Instant::now();
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(7, t0);
        assert_eq!(p.state(), State::Following { cpu: 1 });
        assert!(p.following());
        // Until the next check nothing is asked of the system.
        p.os.cpu_of.insert(7, 0);
        p.acknowledged(7, t0 + ms(1));
        assert_eq!(p.state(), State::Following { cpu: 1 });
        p.acknowledged(7, t0 + CHECK);
        assert_eq!(p.state(), State::Following { cpu: 0 });
        // Sleeping for a line brings the next check forward, to EARLY after the last.
        p.os.cpu_of.insert(7, 1);
        p.slept();
        p.acknowledged(7, t0 + CHECK + EARLY / 2);
        assert_eq!(p.state(), State::Following { cpu: 0 });
        p.acknowledged(7, t0 + CHECK + EARLY);
        assert_eq!(p.state(), State::Following { cpu: 1 });
        p.finish();
        drop(p);
        assert_eq!(os.log, ["follow 1", "follow 0", "follow 1", "release"]);
    }

    #[test]
    fn a_sender_kept_waiting_sends_it_back_with_a_growing_backoff() {
        let mut os = Fake::sender_on(1);
        let t0 = Instant::now();
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(7, t0);
        assert!(p.following());
        // Its times are taken when it moves; then 10 us of waiting per line is fine, 60 us
        // is slow, but once alone is not enough.
        let mut t = t0;
        for (blocked, following) in [(10, true), (60, true), (5, true), (60, true), (60, false)] {
            t = interval(&mut p, t, blocked);
            assert_eq!(p.following(), following, "after {blocked} us");
        }
        // (A single check far over the bar is enough: below.)
        assert_eq!(
            p.state(),
            State::Normal {
                retry_at: t + FIRST_BACKOFF
            }
        );
        assert_eq!(p.starved, 1);
        // Not before the backoff; then again, and failing again doubles it.
        p.acknowledged(7, t + ms(500));
        assert!(!p.following());
        let t1 = t + FIRST_BACKOFF;
        p.acknowledged(7, t1);
        assert!(p.following());
        let mut t = t1;
        for _ in 0..STARVED_IN_A_ROW {
            t = interval(&mut p, t, 80);
        }
        assert_eq!(
            p.state(),
            State::Normal {
                retry_at: t + FIRST_BACKOFF * 2
            }
        );
        // A good spell longer than the wait before it brings the wait back to the first.
        let t2 = t + FIRST_BACKOFF * 2;
        p.acknowledged(7, t2);
        assert!(p.following());
        let mut t = t2;
        while t < t2 + FIRST_BACKOFF * 2 + ms(10) {
            t = interval(&mut p, t, 1);
        }
        assert!(p.following());
        for _ in 0..2 {
            t = interval(&mut p, t, 80);
        }
        assert_eq!(
            p.state(),
            State::Normal {
                retry_at: t + FIRST_BACKOFF
            }
        );
        drop(p);
        assert_eq!(
            os.log,
            ["follow 1", "release", "follow 1", "release", "follow 1", "release"]
        );
    }

    #[test]
    fn one_check_far_over_the_bar_is_enough() {
        let mut os = Fake::sender_on(1);
        let t0 = Instant::now();
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(7, t0);
        let t = interval(&mut p, t0, 99);
        assert!(p.following(), "99 us per line once: not yet");
        let mut os = Fake::sender_on(1);
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(7, t0);
        // One line in the interval, the sender blocked for milliseconds waiting for it.
        p.os.times.0 += (CHECK - ms(1)).as_nanos() as u64;
        p.acknowledged(7, t + CHECK);
        assert!(!p.following());
        assert_eq!(p.starved, 1);
    }

    #[test]
    fn time_the_sender_waits_while_tma_works_is_no_starving() {
        let mut os = Fake::sender_on(1);
        let t0 = Instant::now();
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(7, t0);
        // One line in 2 ms: tma spent 1.9 ms on it (a new thread's counters), the sender ran
        // 0.1 ms and waited for tma the rest.
        p.os.own += 1_900_000;
        p.os.times.0 += 100_000;
        p.acknowledged(7, t0 + CHECK);
        assert!(p.following());
        assert_eq!(p.starved, 0);
    }

    #[test]
    fn several_senders_keep_it_put() {
        let mut os = Fake::sender_on(1);
        os.cpu_of.insert(8, 0);
        let t0 = Instant::now();
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(7, t0);
        assert!(p.following());
        p.acknowledged(8, t0 + ms(1));
        p.acknowledged(7, t0 + CHECK);
        assert!(!p.following());
        assert_eq!(p.shared, 1);
        assert!(p
            .summary()
            .unwrap()
            .contains("0 time(s) because that CPU was busy and 1 time(s)"));
        // A window with one sender again, after the backoff: follows again.
        p.acknowledged(7, t0 + CHECK + FIRST_BACKOFF);
        assert!(p.following());
    }

    #[test]
    fn off_and_refused() {
        let mut os = Fake::sender_on(1);
        let t0 = Instant::now();
        let mut p = Placement::new(&mut os, false, t0);
        p.acknowledged(7, t0);
        assert_eq!(p.state(), State::Off);
        assert_eq!(p.summary(), None);
        let mut os = Fake {
            refuse_follow: true,
            ..Fake::default()
        };
        os.cpu_of.insert(7, 3);
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(7, t0);
        assert_eq!(p.state(), State::Off);
        assert!(p.off_reason.as_deref().unwrap().contains("CPU 3"));
        // An unknown thread (gone, or in another pid namespace): stays put.
        let mut os = Fake::default();
        let mut p = Placement::new(&mut os, true, t0);
        p.acknowledged(9, t0);
        assert!(!p.following());
        // The system cannot follow at all (SystemOs::new said why): stays put, says why.
        let mut os = Fake::sender_on(1);
        let mut p = Placement::new(&mut os, true, t0);
        p.cannot_follow("cannot leave SCHED_IDLE once in it (EPERM; RLIMIT_NICE)".into());
        p.acknowledged(7, t0);
        assert_eq!(p.state(), State::Off);
        let said = p.summary().expect("a note");
        assert!(
            said.contains("stayed where") && said.contains("RLIMIT_NICE"),
            "{said}"
        );
    }

    /// The real thing: a thread follows itself (its own CPU), reads its times, goes back, and
    /// its mask and policy are restored.
    #[test]
    fn system_os_follows_and_releases() {
        std::thread::spawn(|| {
            let host = tma_host::Host::system();
            let mut os = match SystemOs::new(host) {
                Ok(os) => os,
                Err(e) => {
                    eprintln!("skipped: {e}");
                    return;
                }
            };
            let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
            // Before the program is known, and for a thread outside it: no CPU to go to.
            assert_eq!(os.thread_cpu(tid), None);
            os.program(std::process::id());
            assert_eq!(os.thread_cpu(1), None, "init is not in this test's tree");
            // A process the program started is in it.
            let mut child = std::process::Command::new("sleep")
                .arg("5")
                .spawn()
                .unwrap();
            assert!(os.thread_cpu(child.id()).is_some());
            let _ = child.kill();
            let _ = child.wait();
            let cpu = os.thread_cpu(tid).expect("own CPU");
            os.follow(cpu).unwrap();
            assert_eq!(tma_sys::sched::current_cpu(), cpu);
            let (run, _) = os.thread_times(tid).expect("schedstat");
            assert!(run > 0);
            os.release().unwrap();
            let mask = tma_sys::sched::affinity().unwrap();
            assert!(
                (0..rustix::thread::CpuSet::MAX_CPU)
                    .all(|c| tma_sys::sched::has_cpu(&mask, c)
                        == tma_sys::sched::has_cpu(&os.mask, c))
            );
        })
        .join()
        .unwrap();
    }
}
