//! `tma locate`: sample the bottleneck's event and show the hot functions and instructions.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use tma_perf::host::Host;
use tma_perf::sampling::{Rate, SampleEvent, SamplingConfig, Target};
use tma_profile::aggregate::Aggregator;
use tma_profile::choose::{self, Request};
use tma_profile::report::{self, ReportOptions, Syntax};
use tma_profile::symbols::{Kallsyms, Symbolizer};

use crate::cmd::args::RootArg;

/// Sample a node's locate-with event (or -e EVENT) and show hot functions and annotated code.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  tma locate -- ./app args\n  tma locate --node Memory_Bound -- ./app\n  \
tma locate -e cpu-clock -g --folded -o app.folded -- ./app\n  tma locate -p 1234 --duration 10\n  \
tma locate --import perf.data --symdir ./build"
)]
pub struct Args {
    /// Sample the locate-with event of this TMA node (first listed; :pp when precise).
    #[arg(long, conflicts_with = "event")]
    pub node: Option<String>,
    /// CPU model tables to use (`tma list --cpu` keys); default: this machine's CPU.
    #[arg(long, value_name = "KEY")]
    pub cpu: Option<String>,
    /// Sample this event: a catalog name (with :p/:pp/:ppp), rHEX, cpu-clock or task-clock.
    #[arg(short = 'e', long = "event")]
    pub event: Option<String>,
    /// Attach to this process (all its threads) instead of running a command.
    #[arg(short = 'p', long, conflicts_with = "import")]
    pub pid: Option<i32>,
    /// Stop sampling after this many seconds (a launched command is then sent SIGTERM).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Sample every N events.
    #[arg(long, value_name = "N", conflicts_with = "freq")]
    pub period: Option<u64>,
    /// Samples per second (default 4000; at most /proc/sys/kernel/perf_event_max_sample_rate).
    #[arg(long, value_name = "HZ")]
    pub freq: Option<u64>,
    /// Record call chains (frame pointers), for --folded and pprof stacks.
    #[arg(short = 'g', long = "call-graph")]
    pub call_graph: bool,
    /// Also sample kernel code.
    #[arg(long)]
    pub kernel: bool,
    /// Annotate this function instead of the hottest one.
    #[arg(long, value_name = "FUNC")]
    pub annotate: Option<String>,
    /// Disassembly syntax: intel (default) or att.
    #[arg(short = 'M', value_name = "SYNTAX", default_value = "intel")]
    pub syntax: String,
    /// Rows in the function table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Print the `tma.locate` v1 JSON document (the sampled command shares stdout: add -o FILE).
    #[arg(long, conflicts_with = "folded")]
    pub json: bool,
    /// Print folded stacks (`a;b;c count`) for flame graphs (use with -g).
    #[arg(long)]
    pub folded: bool,
    /// Also write a gzip-compressed pprof profile to FILE.
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write the report to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also save the samples as a perf.data file (perf's format; `perf report -i` reads it).
    #[arg(long, value_name = "FILE", conflicts_with = "import")]
    pub record: Option<PathBuf>,
    /// Analyse a perf.data file made by `perf record` (or --record) instead of sampling.
    #[arg(long, value_name = "FILE")]
    pub import: Option<PathBuf>,
    /// Look for binaries in DIR (by file name) before their recorded paths.
    #[arg(long, value_name = "DIR")]
    pub symdir: Vec<PathBuf>,
    /// Kernel symbols for imported data (a copy of that machine's /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
    /// The command to sample, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// This machine's model tables, when the catalog knows the CPU.
fn this_cpu_model(host: &Host) -> Option<&'static tma_catalog::Model> {
    let info = host.cpuinfo_bytes().ok()?;
    let (vendor, family, model, stepping) = tma_catalog::parse_cpuinfo(&info).ok()?;
    tma_catalog::identify(&vendor, family, model, stepping)
        .ok()?
        .into_iter()
        .next()
}

fn read_kallsyms(path: &std::path::Path) -> Option<Kallsyms> {
    std::fs::read(path).ok().and_then(|b| Kallsyms::parse(&b))
}

pub fn run(args: Args, root: &RootArg) -> anyhow::Result<ExitCode> {
    let host = root.host();
    let syntax = match args.syntax.to_ascii_lowercase().as_str() {
        "intel" => Syntax::Intel,
        "att" | "at&t" | "gas" => Syntax::Att,
        other => bail!("unknown syntax {other:?} for -M: use intel or att"),
    };
    let opts = ReportOptions {
        annotate: args.annotate.clone(),
        syntax,
        top: args.top,
    };
    let mut agg = Aggregator::new();
    agg.keep_callchains = true;
    let mut notes: Vec<String> = Vec::new();
    let mut exit = ExitCode::SUCCESS;
    let mut duration_ns = 0i64;
    let event_name;
    let kallsyms;

    if let Some(path) = &args.import {
        if !args.command.is_empty() {
            bail!("--import reads a file: give no command");
        }
        if args.node.is_some() {
            bail!("--node chooses what to sample; with --import use -e EVENT to pick an event of the file");
        }
        let info = tma_profile::import::import_file(path, &mut agg, args.event.as_deref())
            .with_context(|| format!("cannot import {}", path.display()))?;
        event_name = info
            .events
            .get(info.chosen)
            .cloned()
            .unwrap_or_else(|| "?".into());
        if info.events.len() > 1 {
            notes.push(format!(
                "the file has {} events ({}); showing {} (pick one with -e)",
                info.events.len(),
                info.events.join(", "),
                event_name
            ));
        }
        kallsyms = args.kallsyms.as_deref().and_then(read_kallsyms);
    } else {
        let target = match (args.pid, args.command.is_empty()) {
            (Some(_), false) => bail!("give either -p PID or a command after --, not both"),
            (Some(pid), true) => Target::Pid(pid),
            (None, false) => Target::Launch(args.command.clone()),
            (None, true) => {
                bail!("nothing to sample: give a command after `--`, -p PID, or --import FILE")
            }
        };
        let pmu = choose::core_pmu(&host.sys);
        let model = match &args.cpu {
            Some(k) => Some(tma_catalog::by_name(k)?),
            None => this_cpu_model(&host),
        };
        let request = match (&args.node, &args.event) {
            (Some(n), _) => Request::Node(n.clone()),
            (None, Some(e)) => Request::Event(e.clone()),
            // No PMU: there is nothing to count, and `choose` explains the cpu-clock fallback.
            (None, None) if pmu.is_none() => Request::Bottleneck(None),
            (None, None) => Request::Bottleneck(quick_stat_bottleneck(&args, &target, model)?),
        };
        let chosen = choose::choose(&request, model, pmu.as_ref())?;
        // The text report repeats the notes at its end; other formats get them on stderr.
        if args.json || args.folded || args.output.is_some() {
            for n in &chosen.notes {
                eprintln!("tma: note: {n}");
            }
        }
        notes.extend(chosen.notes.iter().cloned());
        let mut cfg = SamplingConfig::new(chosen.event.clone());
        cfg.host = host.clone();
        cfg.precise = chosen.precise;
        cfg.callchain = args.call_graph;
        cfg.include_kernel = args.kernel;
        if let Some(p) = args.period {
            cfg.rate = Rate::Period(p);
        } else if let Some(f) = args.freq {
            cfg.rate = Rate::Freq(f);
        }
        if let Some(s) = args.duration {
            if !(s > 0.0 && s.is_finite()) {
                bail!("--duration must be a positive number of seconds");
            }
            cfg.duration = Some(Duration::from_secs_f64(s));
        }
        if matches!(chosen.event, SampleEvent::CpuClock | SampleEvent::TaskClock)
            && chosen.notes.is_empty()
        {
            notes.push(format!(
                "{} is a timer: samples show where time goes, with skid",
                chosen.event.name()
            ));
        }
        event_name = chosen.event.name().to_string();
        let record = args.record.is_some();
        // The perf.data attr is known once the session is open: keep the records (they come
        // in time order, with perf's FINISHED_ROUND markers), then write the file.
        let mut records: Vec<(u32, u16, Vec<u8>)> = Vec::new();
        let mut collect = |r: &tma_perf::sampling::RawRecord<'_>| {
            if record {
                records.push((r.ty, r.misc, r.data.concat()));
            }
        };
        let tma_profile::live::LiveOutcome {
            summary,
            attr,
            late_records,
        } = tma_profile::live::sample(cfg, &target, &mut agg, Some(&mut collect))?;
        if late_records > 0 {
            notes.push(format!(
                "{late_records} records reached tma too late to be put in time order; \
                 samples among them may be attributed to [unknown] or an old mapping"
            ));
        }
        duration_ns = summary.elapsed.as_nanos().min(i64::MAX as u128) as i64;
        if let Some(path) = &args.record {
            let mut w = tma_profile::record::PerfDataWriter::new(attr);
            for (ty, misc, body) in &records {
                w.push(*ty, *misc, &[&body[..]]);
            }
            let image = w.finish();
            tma_report::write_atomic(path, |out| {
                out.write_all(&image)?;
                Ok(())
            })?;
        }
        if summary.target_vanished {
            notes.push("the attached process exited during sampling".into());
        }
        if summary.interrupted {
            notes.push("interrupted: the report covers the samples taken until Ctrl-C".into());
        }
        if summary.threads_vanished > 0 {
            notes.push(format!(
                "{} threads exited before their events could be opened",
                summary.threads_vanished
            ));
        }
        if summary.stopped_at_duration {
            notes.push(format!(
                "sampling stopped after --duration {}s; the command was sent SIGTERM",
                args.duration.unwrap_or(0.0)
            ));
        } else if let Some(sig) = summary.signal {
            notes.push(format!("the command was killed by signal {sig}"));
            exit = ExitCode::from(128u8.saturating_add(sig as u8));
        } else if let Some(code) = summary.exit_code {
            if code != 0 {
                exit = ExitCode::from(code.clamp(0, 255) as u8);
            }
        }
        kallsyms = match &args.kallsyms {
            Some(p) => read_kallsyms(p),
            None if args.kernel => read_kallsyms(&host.proc.join("kallsyms")),
            None => None,
        };
    }

    let mut sym = Symbolizer::new(args.symdir.clone(), kallsyms);
    let mut profile = report::analyze(&agg, &mut sym, &event_name, &opts);
    profile.notes.extend(notes);
    if args.folded && !args.call_graph && args.import.is_none() {
        profile
            .notes
            .push("--folded without -g: each stack is just the sampled function".into());
    }

    if let Some(path) = &args.pprof {
        tma_report::write_atomic(path, |w| {
            tma_profile::pprof::encode(&profile, duration_ns, w)?;
            Ok(())
        })?;
    }
    let render = |w: &mut dyn Write| -> Result<(), tma_report::ReportError> {
        if args.json {
            tma_report::write_json(
                w,
                tma_profile::JSON_SCHEMA,
                tma_profile::JSON_SCHEMA_VERSION,
                &profile,
            )
        } else if args.folded {
            report::render_folded(&profile, w)?;
            Ok(())
        } else {
            w.write_all(report::render_text(&profile).as_bytes())?;
            Ok(())
        }
    };
    match &args.output {
        Some(path) => tma_report::write_atomic(path, render)?,
        None => {
            // Render first, then write: a closed pipe (`| head`) surfaces as a plain
            // io::Error, which main treats as success like any Unix filter.
            let mut buf = Vec::new();
            render(&mut buf)?;
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            lock.write_all(&buf)?;
            lock.flush()?;
        }
    }
    Ok(exit)
}

/// With no `--node` or `-e` on a machine with a PMU: run `tma stat -l 3` on the same target
/// (the command runs once more, as with toplev) and return the bottleneck node it names.
fn quick_stat_bottleneck(
    args: &Args,
    target: &Target,
    model: Option<&'static tma_catalog::Model>,
) -> anyhow::Result<Option<String>> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let json = dir.path().join("stat.json");
    let mut cmd_args: Vec<String> = vec!["stat".into(), "-l".into(), "3".into(), "--json".into()];
    cmd_args.extend(["-o".into(), json.display().to_string()]);
    if let Some(m) = model {
        cmd_args.extend(["--cpu".into(), m.key.to_string()]);
    }
    match target {
        Target::Pid(pid) => {
            let secs = args.duration.unwrap_or(2.0);
            cmd_args.extend([
                "-p".into(),
                pid.to_string(),
                "--duration".into(),
                secs.to_string(),
            ]);
        }
        Target::Launch(cmd) => {
            cmd_args.push("--".into());
            cmd_args.extend(cmd.iter().cloned());
        }
    }
    eprintln!(
        "tma: no --node or -e: finding the bottleneck first with `tma {}`",
        cmd_args.join(" ")
    );
    let exe = std::env::current_exe().context("cannot find the tma executable")?;
    let status = std::process::Command::new(exe)
        .args(&cmd_args)
        .stdout(std::process::Stdio::null())
        .status()
        .context("cannot run the quick stat pass")?;
    if !json.exists() {
        bail!("the quick stat pass (exit status {status}) wrote no result; pass --node NAME or -e EVENT");
    }
    let bytes = std::fs::read(&json).context("cannot read the quick stat pass result")?;
    Ok(bottleneck_of_stat_json(&bytes))
}

/// The bottleneck node of the last interval of a `tma.stat` JSON document.
fn bottleneck_of_stat_json(bytes: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let iv = v.get("intervals")?.as_array()?.last()?;
    iv.get("bottleneck")?
        .get("node")?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod quick_stat_tests {
    use super::bottleneck_of_stat_json;

    #[test]
    fn bottleneck_is_read_from_the_last_interval() {
        let j = br#"{"schema":"tma.stat","intervals":[
            {"bottleneck":{"node":"Frontend_Bound"}},
            {"bottleneck":{"node":"DRAM_Bound","path":["Backend_Bound","Memory_Bound","DRAM_Bound"]}}]}"#;
        assert_eq!(bottleneck_of_stat_json(j).as_deref(), Some("DRAM_Bound"));
        assert_eq!(
            bottleneck_of_stat_json(br#"{"intervals":[{"bottleneck":{"node":null}}]}"#),
            None
        );
        assert_eq!(bottleneck_of_stat_json(b"not json"), None);
    }
}
