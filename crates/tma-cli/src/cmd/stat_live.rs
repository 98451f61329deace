//! Live counting for `tma stat` (owned by the live-counting work; this placeholder only
//! reports that this build cannot count).

use std::path::Path;
use std::process::ExitCode;

use crate::cmd::stat::Args;
use crate::render::tree::StatRun;

/// `tma stat` without `--import`: count a command, pids, threads or the system.
pub fn run(_args: &Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "live counting is not available in this build; record elsewhere with the command from \
         `tma events --perf-cmd` and analyse it with `tma stat --import FILE`"
    )
}

/// `tma stat --import SNAPSHOT` for a `tma stat --record` snapshot.
pub fn replay_snapshot(_bytes: &[u8], path: &Path, _args: &Args) -> anyhow::Result<StatRun> {
    anyhow::bail!(
        "{} is a tma snapshot (`tma stat --record`), which this build cannot replay yet; \
         import `perf stat -x,` or `perf stat -j` output instead",
        path.display()
    )
}
