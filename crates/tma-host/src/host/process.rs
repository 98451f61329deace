//! Processes and threads under `/proc`: their ids, open files, `stat`, `schedstat`,
//! `status` fields and this process's capabilities.

use std::path::PathBuf;

use super::{Host, HostError, ParseError};

/// The fields of a `/proc/<pid>/stat` line after the command name, from field 3 (the state)
/// on. The name (field 2, in parentheses) may hold spaces, parentheses and bytes that are not
/// UTF-8, so the fields start after its last `)`; `None` when there is no `)`.
pub fn stat_fields(bytes: &[u8]) -> Option<impl Iterator<Item = &[u8]>> {
    let close = bytes.iter().rposition(|&b| b == b')')?;
    Some(
        bytes[close + 1..]
            .split(u8::is_ascii_whitespace)
            .filter(|f| !f.is_empty()),
    )
}

/// The CPU a thread last ran on: field 39 (`processor`) of a `/proc/<tid>/stat` line.
pub fn parse_stat_processor(bytes: &[u8]) -> Result<u32, ParseError> {
    let field = stat_fields(bytes)
        .ok_or_else(|| ParseError::BadLine {
            line: 1,
            what: "no `)` closing the command name".into(),
        })?
        .nth(39 - 3)
        .ok_or_else(|| ParseError::BadLine {
            line: 1,
            what: "fewer than 39 fields".into(),
        })?;
    let text = std::str::from_utf8(field).map_err(|_| ParseError::NotUtf8)?;
    text.parse()
        .map_err(|_| ParseError::NotANumber(text.chars().take(40).collect()))
}

/// A thread's time on a CPU and its time runnable but waiting for one (ns): the first two
/// fields of `/proc/<tid>/schedstat` (`run time`, `run delay`, `timeslices`).
pub fn parse_schedstat(bytes: &[u8]) -> Result<(u64, u64), ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let mut fields = text.split_ascii_whitespace();
    let mut next = || -> Result<u64, ParseError> {
        let field = fields.next().ok_or(ParseError::Empty)?;
        field
            .parse()
            .map_err(|_| ParseError::NotANumber(field.chars().take(40).collect()))
    };
    Ok((next()?, next()?))
}

impl Host {
    /// Whether `<proc>/<pid>` exists (a process, or a thread id, alive or a zombie).
    pub fn has_process(&self, pid: i32) -> bool {
        self.proc.join(pid.to_string()).is_dir()
    }

    /// Where the open file descriptors of process `pid` point (the links in `<proc>/<pid>/fd`:
    /// `/dev/kvm`, `anon_inode:kvm-vm`, ...); links that vanish meanwhile are skipped. Listing
    /// another user's process is an error of kind `PermissionDenied`.
    pub fn fd_targets(&self, pid: i32) -> Result<Vec<PathBuf>, HostError> {
        Ok(Host::entries(self.proc.join(pid.to_string()).join("fd"))?
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .collect())
    }

    /// The thread ids of process `pid`, sorted, from the entries of `<proc>/<pid>/task` (empty
    /// for a zombie). A process that does not exist is an error for which
    /// [`HostError::is_missing`] holds.
    pub fn threads(&self, pid: i32) -> Result<Vec<i32>, HostError> {
        let mut tids: Vec<i32> = Host::entries(self.proc.join(pid.to_string()).join("task"))?
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        tids.sort_unstable();
        Ok(tids)
    }

    /// The process ids under `<proc>` (its numeric entries), sorted.
    pub fn pids(&self) -> Result<Vec<i32>, HostError> {
        let mut pids: Vec<i32> = Host::entries(self.proc.clone())?
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        pids.sort_unstable();
        Ok(pids)
    }

    /// The value of the field `name` in `<proc>/<pid>/status` (`THP_enabled`, `Name`),
    /// trimmed; `None` when the kernel does not show that field.
    pub fn status_field(&self, pid: i32, name: &str) -> Result<Option<String>, HostError> {
        let text = self.proc_text(&format!("{pid}/status"))?;
        Ok(text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k == name).then(|| v.trim().to_string())
        }))
    }

    /// The CPU thread `tid` last ran on (`<proc>/<tid>/stat`; any thread id, listed or not).
    pub fn thread_cpu(&self, tid: i32) -> Result<u32, HostError> {
        Host::parsed(
            self.proc.join(tid.to_string()).join("stat"),
            parse_stat_processor,
        )
    }

    /// Thread `tid`'s time on a CPU and time waiting, runnable, for one, in ns
    /// (`<proc>/<tid>/schedstat`; missing on a kernel built without it).
    pub fn thread_schedstat(&self, tid: i32) -> Result<(u64, u64), HostError> {
        Host::parsed(
            self.proc.join(tid.to_string()).join("schedstat"),
            parse_schedstat,
        )
    }
    /// The effective capability mask of this process (`CapEff` in `<proc>/self/status`).
    pub fn effective_capabilities(&self) -> Result<u64, HostError> {
        let path = self.proc.join("self/status");
        Host::parsed(path, |b| {
            let text = std::str::from_utf8(b).map_err(|_| ParseError::NotUtf8)?;
            let v = text
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .ok_or(ParseError::Empty)?;
            u64::from_str_radix(v.trim(), 16).map_err(|_| ParseError::NotANumber(v.trim().into()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tree;

    #[test]
    fn threads_of_a_process() {
        let d = tree(&[
            ("proc/42/task/42/comm", "a\n"),
            ("proc/42/task/7/comm", "b\n"),
            ("proc/42/task/notatid/comm", "c\n"),
        ]);
        let h = Host::under(d.path());
        assert_eq!(h.threads(42).unwrap(), vec![7, 42]);
        assert!(h.has_process(42) && !h.has_process(43));
        assert_eq!(h.proc_bytes("42/task/7/comm").unwrap(), b"b\n");
        assert_eq!(h.proc_text("42/task/7/comm").unwrap(), "b");
        let e = h.threads(43).unwrap_err();
        assert!(e.is_missing() && e.path().ends_with("proc/43/task"), "{e}");
        let me = std::process::id() as i32;
        assert!(Host::system().threads(me).unwrap().contains(&me));
        let f = tempfile::tempfile().unwrap();
        let fds = Host::system().fd_targets(me).unwrap();
        assert!(
            fds.iter()
                .any(|t| t.to_string_lossy().contains("(deleted)")),
            "{fds:?}"
        );
        drop(f);
        assert!(h.fd_targets(42).unwrap_err().is_missing());
    }
    #[test]
    fn stat_processor_after_a_tricky_name() {
        // A command name with spaces and a `)`; field 39 is the 37th after it.
        // (A name that is not UTF-8 too: threads name themselves with any bytes.)
        let mut line = b"4242 (a b) \xff c) S".to_vec();
        for f in 4..=38 {
            line.extend_from_slice(format!(" {f}").as_bytes());
        }
        line.extend_from_slice(b" 7 0 0 0\n");
        assert_eq!(parse_stat_processor(&line).unwrap(), 7);
        assert!(parse_stat_processor(b"1 (x) S 0 0").is_err());
        assert!(parse_stat_processor(b"no name here").is_err());
        let real = std::fs::read("/proc/self/stat").unwrap();
        let cpu = parse_stat_processor(&real).unwrap();
        assert!(
            Host::system().online_cpus_or_cpu0().contains(&cpu),
            "cpu {cpu}"
        );
    }

    #[test]
    fn schedstat_times() {
        assert_eq!(parse_schedstat(b"123 456 7\n").unwrap(), (123, 456));
        assert!(parse_schedstat(b"123").is_err());
        assert!(parse_schedstat(b"1 x 2").is_err());
        let me = std::process::id() as i32;
        match Host::system().thread_schedstat(me) {
            Ok((run, _)) => assert!(run > 0),
            Err(e) => assert!(e.is_missing(), "{e}"),
        }
    }
}
