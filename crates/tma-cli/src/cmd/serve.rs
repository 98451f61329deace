//! `tma serve`: clap arguments -> [`tma_serve::ServeConfig`] -> [`tma_serve::run`]. Runs
//! until SIGINT/SIGTERM; logs (logfmt) go to standard error.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tma_serve::{ServeConfig, Source};

use crate::cmd::args::{CpuArg, RootArg};

/// Export the TMA tree to Prometheus, counting continuously.
///
/// Serves the last completed interval on /metrics (Prometheus text 0.0.4, or OpenMetrics when
/// the scraper asks for it), /-/healthy and /-/ready. Without a PMU it serves the software
/// counts and tma_pmu_available 0. Stops cleanly on SIGINT/SIGTERM.
///
/// Examples:
///   tma serve                                   # all CPUs, 127.0.0.1:9273, every 10 s
///   tma serve --cgroup system.slice/nginx.service --cgroup system.slice/pg.service
///   tma serve --listen 0.0.0.0:9273 -l 3 --interval 15s
///   tma serve --replay run.snapshot.json --interval 1s
///   tma serve --cgroup-top 20 --series-budget 300   # the 20 busiest cgroups + other
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Address and port to listen on; loopback unless you say otherwise (`:9273`: every
    /// interface, as node_exporter's `:9100`; host names such as localhost:9273 work too).
    #[arg(long, value_name = "ADDR:PORT", default_value = tma_serve::DEFAULT_LISTEN,
          value_parser = tma_serve::parse_listen)]
    pub listen: SocketAddr,
    /// Count system-wide, on every CPU (the default without --cgroup).
    #[arg(short = 'a', long = "all-cpus", conflicts_with = "cgroup")]
    pub all_cpus: bool,
    /// Count only on these CPUs (e.g. 0-3,8).
    #[arg(
        short = 'C',
        long = "cpu-list",
        value_name = "CPUS",
        conflicts_with = "cgroup"
    )]
    pub cpu_list: Option<String>,
    /// Count the tasks of this cgroup (v2: a directory under the cgroup2 mount, absolute or
    /// relative to it, e.g. system.slice/nginx.service); repeat for several. Series get a
    /// `cgroup` label.
    #[arg(short = 'G', long = "cgroup", value_name = "PATH")]
    pub cgroup: Vec<PathBuf>,
    /// One series per CPU (a `cpu` label) instead of the system-wide sum.
    #[arg(long, conflicts_with = "cgroup")]
    pub per_cpu: bool,
    #[command(flatten)]
    pub cpu: CpuArg,
    /// Deepest tree level exported (1 = top level).
    #[arg(short = 'l', long = "level", value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: u8,
    /// Only these nodes (comma-separated names) and their subtrees, down to --level.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Helper metrics exported as tma_metric{name=...}: names and groups, comma-separated
    /// (`IPC,Memory`), `all`, or `none`; default: the default set of `tma stat -m`.
    #[arg(short = 'm', long = "metrics", value_name = "LIST")]
    pub metrics: Option<String>,
    /// Counting interval (e.g. 10s, 500ms, 1m; a bare number is seconds); with --replay, how
    /// long each recorded interval is served.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Serve the intervals of a recording in a loop instead of counting: a `tma stat
    /// --record` snapshot or `perf stat -I ... -x,` / `-j` output (demos, dashboards, tests).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cgroup", "cpu_list", "all_cpus", "per_cpu"])]
    pub replay: Option<PathBuf>,
    /// Follow only the N busiest cgroups, re-chosen every interval, and count the rest as
    /// cgroup="other" so that totals add up (tma_cgroups_left_out says how many). With
    /// --cgroup: the N of those with the most slots (CPU time without a PMU), each with its
    /// tree. Without: every cgroup of the host's cgroup tree by CPU time (cpu.stat), exported
    /// as tma_cgroup_cpu_seconds_total; with a PMU, also the tree of each of the N with the
    /// most slots, counted in perf_event's cgroup mode (only the cgroups that enter or leave
    /// the N are re-opened), else the host's one tree.
    #[arg(long, value_name = "N", conflicts_with = "replay")]
    pub cgroup_top: Option<usize>,
    /// The most series one scrape returns, all families together; cgroups or CPUs beyond it
    /// are counted in "other", then event counts, counted shares and metrics are left out.
    #[arg(long, value_name = "N", default_value_t = tma_serve::collect::DEFAULT_SERIES_BUDGET)]
    pub series_budget: usize,
    /// Learn each cgroup's (or the host's) level-1 shares and IPC over the last N intervals
    /// (default 60) and mark an interval outside them as tma_anomaly{cgroup,node}, naming the
    /// co-located cgroup whose memory-bound share rose at the same moment (antagonist label).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "60",
          value_parser = clap::value_parser!(u32).range(10..=100_000))]
    pub anomaly: Option<u32>,
    /// Threads serving HTTP connections.
    #[arg(long, value_name = "N", default_value_t = 4, hide = true)]
    pub http_workers: usize,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::cmd::args::parse_duration(s, "s")
}

/// The clap-free configuration of these arguments.
pub fn config(a: &Args, root: &RootArg) -> anyhow::Result<ServeConfig> {
    let metrics = match a.metrics.as_deref() {
        None => Some(Vec::new()),
        Some(l) if l.trim().eq_ignore_ascii_case("none") => None,
        Some(l) => Some(
            l.split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect(),
        ),
    };
    let source = match &a.replay {
        Some(p) => Source::Replay(p.clone()),
        None => Source::Live {
            cpu_list: a.cpu_list.clone(),
            // Each names its series (a `cgroup` label, which Prometheus keeps as text).
            cgroups: a
                .cgroup
                .iter()
                .map(|p| {
                    p.to_str().map(String::from).ok_or_else(|| {
                        anyhow::anyhow!(
                            "--cgroup {}: not UTF-8, and its name would be a Prometheus label, \
                             which is text; count it with tma stat -G",
                            p.display()
                        )
                    })
                })
                .collect::<anyhow::Result<_>>()?,
        },
    };
    Ok(ServeConfig {
        listen: a.listen,
        source,
        interval: a.interval,
        per_cpu: a.per_cpu,
        cpu: a.cpu.cpu.clone(),
        level: a.level,
        nodes: a.nodes.clone(),
        metrics,
        metric_groups: Vec::new(),
        host: root.host(),
        limits: tma_serve::http::Limits {
            workers: a.http_workers.clamp(1, 64),
            ..Default::default()
        },
        bounds: tma_serve::collect::Bounds {
            cgroup_top: a.cgroup_top,
            series_budget: a.series_budget,
        },
        anomaly: a.anomaly.map(|w| tma_serve::anomaly::AnomalyConfig {
            window: w as usize,
            ..Default::default()
        }),
    })
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    let cfg = config(&args, root)?;
    let log = Arc::new(tma_serve::log::Log::stderr());
    tma_serve::run(&cfg, log).context("tma serve")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn cfg(argv: &[&str]) -> ServeConfig {
        let mut v = vec!["tma"];
        v.extend(argv);
        config(&T::parse_from(v).a, &RootArg::default()).unwrap()
    }

    #[test]
    fn defaults_are_loopback_all_cpus_every_ten_seconds() {
        let c = cfg(&[]);
        assert_eq!(c.listen.to_string(), "127.0.0.1:9273");
        assert_eq!(c.interval, Duration::from_secs(10));
        assert_eq!(c.level, 2);
        assert_eq!(c.metrics, Some(vec![]));
        assert_eq!(c.bounds.series_budget, 300);
        assert_eq!(c.bounds.cgroup_top, None);
        let c2 = cfg(&["--cgroup-top", "20", "--series-budget", "500"]);
        assert_eq!(c2.bounds.cgroup_top, Some(20));
        assert_eq!(c2.bounds.series_budget, 500);
        assert!(T::try_parse_from(["tma", "--cgroup-top", "3", "--replay", "x"]).is_err());
        assert_eq!(c2.anomaly, None);
        assert_eq!(cfg(&["--anomaly"]).anomaly.map(|a| a.window), Some(60));
        assert_eq!(
            cfg(&["--anomaly", "30"]).anomaly.map(|a| a.window),
            Some(30)
        );
        assert_eq!(
            c.source,
            Source::Live {
                cpu_list: None,
                cgroups: vec![]
            }
        );
    }

    #[test]
    fn cgroups_replay_and_metrics() {
        let c = cfg(&[
            "-G",
            "a.slice",
            "--cgroup",
            "/sys/fs/cgroup/b",
            "-m",
            "none",
        ]);
        assert_eq!(
            c.source,
            Source::Live {
                cpu_list: None,
                cgroups: vec!["a.slice".into(), "/sys/fs/cgroup/b".into()]
            }
        );
        assert_eq!(c.metrics, None);
        let c = cfg(&["--replay", "x.json", "--interval", "1s", "-m", "IPC,CPI"]);
        assert_eq!(c.source, Source::Replay("x.json".into()));
        assert_eq!(c.interval, Duration::from_secs(1));
        assert_eq!(c.metrics, Some(vec!["IPC".into(), "CPI".into()]));
        assert!(T::try_parse_from(["tma", "--replay", "x", "-G", "a"]).is_err());
        assert!(T::try_parse_from(["tma", "--interval", "soon"]).is_err());
    }

    #[test]
    fn listen_takes_exporter_spellings_and_interval_bare_seconds() {
        assert_eq!(
            cfg(&["--listen", ":9100"]).listen.to_string(),
            "0.0.0.0:9100"
        );
        let l = cfg(&["--listen", "localhost:9273"]).listen;
        assert!(l.ip().is_loopback() && l.port() == 9273, "{l}");
        assert_eq!(
            cfg(&["--listen", "[::1]:9273"]).listen.to_string(),
            "[::1]:9273"
        );
        for bad in ["9273", "localhost", ":http", ":99999"] {
            assert!(
                T::try_parse_from(["tma", "--listen", bad]).is_err(),
                "{bad}"
            );
        }
        assert_eq!(cfg(&["--interval", "15"]).interval, Duration::from_secs(15));
        assert_eq!(
            cfg(&["--interval", "500ms"]).interval,
            Duration::from_millis(500)
        );
    }
}
