//! Argument groups several commands share (`#[command(flatten)]`), so a flag reads and
//! behaves the same everywhere.

use std::path::PathBuf;
use std::time::Duration;

use tma_host::Host;

/// `--cpu NAME`.
#[derive(Debug, Clone, clap::Args)]
pub struct CpuArg {
    /// CPU model whose tables to use (e.g. spr, icx, zen4); default: from the recording (its
    /// `# cpu:` line, or the tables its events fit when this machine's do not), else this
    /// machine.
    #[arg(long, value_name = "NAME", hide_possible_values = true,
          value_parser = crate::cmd::completions::cpu_keys().parsing(cpu_model))]
    pub cpu: Option<String>,
}

/// `--cpu` names a CPU model everywhere; a CPU list (`0`, `0-3,8`) is `-C/--cpu-list`.
pub fn cpu_model(text: &str) -> Result<String, String> {
    let t = text.trim();
    if !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
    {
        return Err(format!(
            "--cpu takes a CPU model key (skx, icx, spr, adl, zen4, zen5, ...), not {t:?}; to \
             count on CPUs {t}, use -C/--cpu-list {t}"
        ));
    }
    Ok(t.to_string())
}

/// A duration as perf users type it: a number with a unit (`100ms`, `2s`, `1.5s`, `1m`,
/// `1h`, `250us`; or humantime's `1m30s`), or a bare number in the option's own unit
/// (`bare_unit`: `ms` for `-I`, `s` for `--duration`).
pub fn parse_duration(text: &str, bare_unit: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = if unit.is_empty() {
        bare_unit
    } else {
        unit.trim()
    };
    let scale = match unit {
        "ns" => Some(1e-9),
        "us" | "µs" => Some(1e-6),
        "ms" => Some(1e-3),
        "s" | "sec" => Some(1.0),
        "m" | "min" => Some(60.0),
        "h" => Some(3600.0),
        _ => None,
    };
    let bad = || {
        format!(
            "bad duration {text:?}: give a number with a unit (100ms, 2s, 1.5s, 1m) or a bare \
             number of {}",
            if bare_unit == "ms" {
                "milliseconds"
            } else {
                "seconds"
            }
        )
    };
    match (num.parse::<f64>(), scale) {
        (Ok(n), Some(scale)) if n.is_finite() && n >= 0.0 => {
            Duration::try_from_secs_f64(n * scale).map_err(|_| bad())
        }
        _ => humantime::parse_duration(t).map_err(|_| bad()),
    }
}

/// `-I`: a duration, bare numbers in milliseconds (perf's unit), as whole milliseconds.
pub fn interval_ms(text: &str) -> Result<u64, String> {
    let d = parse_duration(text, "ms")?;
    let ms = d.as_secs_f64() * 1e3;
    if d > Duration::ZERO && ms < 1.0 {
        return Err(format!("{text}: the interval must be at least 1ms"));
    }
    Ok(ms.round() as u64)
}

/// `--duration`: a duration, bare numbers in seconds (perf's unit), as seconds.
pub fn seconds(text: &str) -> Result<f64, String> {
    parse_duration(text, "s").map(|d| d.as_secs_f64())
}

/// `-l N` and `--nodes LIST`: which part of the tree.
#[derive(Debug, Clone, clap::Args)]
pub struct TreeArgs {
    /// Deepest tree level (1 = top level).
    #[arg(short = 'l', long = "level", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: u8,
    /// Only these nodes (comma-separated names) and their subtrees, down to --level.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub nodes: Vec<String>,
}

/// `--cpu`, `-l`, `--nodes` and `--smt` of the commands that read recordings beside their own
/// documents (`tma diff`, `tma report`).
#[derive(Debug, Clone, clap::Args)]
pub struct ReadArgs {
    #[command(flatten)]
    pub cpu: CpuArg,
    /// Recordings: deepest tree level to evaluate (default 1; 2 or more for the timeline of
    /// the bottleneck's children in `tma report`); for `tma stat --json` inputs of `tma
    /// diff`, a filter (default: every node they hold).
    #[arg(short = 'l', long = "level", value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=6))]
    pub level: Option<u8>,
    /// Recordings: only these nodes (comma-separated names) and their subtrees.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Recordings: whether SMT was on where `perf stat` files were recorded.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub smt: Option<String>,
}

impl ReadArgs {
    /// Whether any of them was given.
    pub fn any(&self) -> bool {
        self.cpu.cpu.is_some()
            || self.level.is_some()
            || !self.nodes.is_empty()
            || self.smt.is_some()
    }

    pub fn options(&self) -> tma_stat::ReadOptions {
        tma_stat::ReadOptions {
            cpu: self.cpu.cpu.clone(),
            level: self.level,
            nodes: self.nodes.clone(),
            smt: self.smt.as_deref().map(|s| s == "on"),
        }
    }
}

/// `-m`, `-M` and `-B`: the helper metrics shown (stat) or recorded (events) with the tree.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricArgs {
    /// Print helper metrics after the tree, grouped (Thread, Core, Memory...): without LIST a
    /// default set (IPC, CPI, CoreIPC, ILP, MLP, ...); `all`; or metric names and groups,
    /// comma-separated (`IPC,Memory`). `tma list --metrics` shows them.
    #[arg(short = 'm', long = "metrics", value_name = "LIST", num_args = 0..=1,
          default_missing_value = "")]
    pub metrics: Option<String>,
    /// Select by `perf stat -M` group names, comma-separated: TopdownL1..TopdownL6 and
    /// PipelineL1/PipelineL2 set the tree level, other names (Summary, Mem, ...) add the
    /// metrics the tables list under them.
    #[arg(short = 'M', value_name = "NAME", value_delimiter = ',')]
    pub metric_groups: Vec<String>,
    /// Print the Bottleneck_* costs (% of pipeline slots) as a ranked list after the tree.
    #[arg(short = 'B', long = "bottlenecks")]
    pub bottlenecks: bool,
}

impl MetricArgs {
    /// `-m LIST` as words (`Some(empty)` for `-m` alone: the default set).
    pub fn metric_words(&self) -> Option<Vec<String>> {
        self.metrics.as_deref().map(|l| {
            l.split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect()
        })
    }
}

/// `--json` and `-o FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Print JSON (a versioned schema, `tma.<command>`).
    #[arg(long)]
    pub json: bool,
    /// Write the output to FILE instead of standard output (`-`: standard output); a file is replaced only when the command succeeds.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `--root DIR` (hidden, global): read `DIR/proc` and `DIR/sys` instead of `/proc` and
/// `/sys`, for tests on fake trees. The one convention of every command that reads the host;
/// accepted before or after the subcommand.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RootArg {
    /// Read proc/ and sys/ under DIR instead of /proc and /sys (fake trees, tests).
    #[arg(long, value_name = "DIR", hide = true, global = true)]
    pub root: Option<PathBuf>,
}

impl RootArg {
    /// The `/sys` and `/proc` roots the host facts are read from.
    pub fn host(&self) -> Host {
        match &self.root {
            Some(r) => Host::under(r),
            None => Host::system(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_bare_numbers_in_perfs_units() {
        assert_eq!(interval_ms("100"), Ok(100));
        assert_eq!(interval_ms("100ms"), Ok(100));
        assert_eq!(interval_ms("2s"), Ok(2000));
        assert_eq!(interval_ms("1.5s"), Ok(1500));
        assert_eq!(interval_ms("1m"), Ok(60_000));
        assert_eq!(interval_ms("0"), Ok(0));
        assert!(interval_ms("500us").unwrap_err().contains("at least 1ms"));
        assert_eq!(seconds("10"), Ok(10.0));
        assert_eq!(seconds("2.5"), Ok(2.5));
        assert_eq!(seconds("100ms"), Ok(0.1));
        assert_eq!(seconds("1m"), Ok(60.0));
        assert_eq!(seconds("1m30s"), Ok(90.0));
        assert_eq!(parse_duration("10s", "s"), Ok(Duration::from_secs(10)));
        for bad in ["soon", "-1", "1x", "", "nan"] {
            let e = seconds(bad).unwrap_err();
            assert!(e.contains("bare number of seconds"), "{bad}: {e}");
        }
        assert!(interval_ms("x").unwrap_err().contains("milliseconds"));
    }

    #[test]
    fn cpu_is_a_model_and_a_cpu_list_is_refused_with_the_right_flag() {
        assert_eq!(cpu_model("spr"), Ok("spr".into()));
        assert_eq!(cpu_model("zen4"), Ok("zen4".into()));
        for list in ["0", "0-3", "0-3,8"] {
            let e = cpu_model(list).unwrap_err();
            assert!(
                e.contains("CPU model key") && e.contains("-C/--cpu-list"),
                "{e}"
            );
        }
    }
}
