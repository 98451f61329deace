//! The event to sample without `--tree`: `--node`, `-e`, or the bottleneck of a quick
//! in-process `tma stat` pass.

use std::io::Write;

use tma_catalog::Model;
use tma_perf::sampling::Target;

use super::config::{LocateConfig, LocateError};
use crate::choose::{self, Chosen, Request};

/// The event to sample: `--node`, `-e`, or the bottleneck of a quick stat pass (on a machine
/// with a PMU; without one `choose` explains the cpu-clock fallback).
pub(super) fn choose_event(
    cfg: &LocateConfig,
    target: &Target,
    notes: &mut dyn Write,
) -> Result<Chosen, LocateError> {
    let pmu = choose::core_pmu(&cfg.host.sys);
    let model = match &cfg.cpu {
        Some(k) => Some(tma_catalog::by_name(k)?),
        None => cfg.this_cpu,
    };
    let request = match (&cfg.node, &cfg.event) {
        (Some(n), _) => Request::Node(n.clone()),
        (None, Some(e)) => Request::Event(e.clone()),
        (None, None) if pmu.is_none() || matches!(target, Target::System { .. }) => {
            Request::Bottleneck(None)
        }
        (None, None) => Request::Bottleneck(quick_stat_bottleneck(cfg, target, model, notes)?),
    };
    Ok(choose::choose_on(&request, model, pmu.as_ref(), &cfg.host)?)
}

/// Run `tma stat -l 3` in-process on the same target (a launched command runs once more, as
/// with toplev; an attached process is counted for `--duration`, default 2 s) and return
/// the bottleneck node it names.
pub(super) fn quick_stat_bottleneck(
    cfg: &LocateConfig,
    target: &Target,
    model: Option<&'static Model>,
    notes: &mut dyn Write,
) -> Result<Option<String>, LocateError> {
    let (stat, shown) = quick_stat_config(cfg, target, model);
    writeln!(
        notes,
        "tma: no --node or -e: finding the bottleneck first with `tma {}`",
        shown.join(" ")
    )?;
    let outcome =
        tma_stat::run(&stat, &mut tma_stat::Discard, notes).map_err(LocateError::QuickStat)?;
    Ok(outcome.bottleneck.and_then(|b| b.node))
}

/// The quick stat pass's configuration, and the `tma stat` arguments it amounts to.
pub(super) fn quick_stat_config(
    cfg: &LocateConfig,
    target: &Target,
    model: Option<&'static Model>,
) -> (tma_stat::StatConfig, Vec<String>) {
    let mut live = tma_stat::LiveOptions {
        backend: cfg.stat_backend.clone(),
        ..tma_stat::LiveOptions::default()
    };
    let mut shown = vec!["stat".to_string(), "-l".into(), "3".into()];
    if let Some(m) = model {
        shown.extend(["--cpu".into(), m.key.to_string()]);
    }
    match target {
        Target::Pid(pid) => {
            let secs = cfg.duration_s.unwrap_or(2.0);
            live.target = tma_stat::LiveTarget::Pids(vec![*pid as u32]);
            live.duration_s = Some(secs);
            shown.extend(["-p".into(), pid.to_string(), "--duration".into()]);
            shown.push(secs.to_string());
        }
        Target::Launch(cmd) => {
            live.target = tma_stat::LiveTarget::Command(cmd.clone());
            // Only the sampled run shows the command's output (as the `tma stat` child with
            // stdout to /dev/null did).
            live.command_stdout = tma_perf::process::CommandStdout::Null;
            shown.push("--".into());
            shown.extend(cmd.iter().map(|a| tma_render::shell_quote_os(a)));
        }
        // choose_event never asks for a stat pass of the whole system.
        Target::System { .. } => {}
    }
    let stat = tma_stat::StatConfig {
        input: tma_stat::Input::Live(live),
        cpu: model.map(|m| m.key.to_string()),
        level: 3,
        host: cfg.host.clone(),
        ..tma_stat::StatConfig::default()
    };
    (stat, shown)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The quick pass in-process, counting with the synthetic backend (chosen Zen 4 counts of
    /// a SHA-256 run): the bottleneck is the one `tma_stat::run` names for the same counts.
    #[test]
    fn quick_stat_pass_names_the_stat_bottleneck() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/live/synthetic-zen4-sha256.json");
        let synthetic = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
        let cfg = LocateConfig {
            stat_backend: tma_stat::BackendChoice::Synthetic(synthetic),
            ..LocateConfig::default()
        };
        let model = tma_catalog::by_name("zen4").unwrap();
        let target = Target::Launch(vec!["true".into()]);
        let mut notes = Vec::new();
        let node = quick_stat_bottleneck(&cfg, &target, Some(model), &mut notes).unwrap();
        let notes = String::from_utf8(notes).unwrap();
        assert!(
            notes.starts_with(
                "tma: no --node or -e: finding the bottleneck first with `tma stat -l 3 --cpu zen4 -- true`"
            ),
            "{notes}"
        );
        let stat = tma_stat::StatConfig {
            cpu: Some("zen4".into()),
            level: 3,
            input: tma_stat::Input::Live(tma_stat::LiveOptions {
                target: tma_stat::LiveTarget::Command(vec!["true".into()]),
                backend: cfg.stat_backend.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let outcome = tma_stat::run(&stat, &mut tma_stat::Discard, &mut std::io::sink()).unwrap();
        let want = outcome.bottleneck.and_then(|b| b.node);
        assert!(want.is_some());
        assert_eq!(node, want);
    }

    /// The launched command's output belongs to the sampled run: the quick pass sends its
    /// stdout to /dev/null (stderr stays); an attached process's output is not ours to touch.
    #[test]
    fn quick_stat_pass_silences_the_command_stdout() {
        use tma_perf::process::CommandStdout;
        let cfg = LocateConfig::default();
        let launch = Target::Launch(vec!["echo".into(), "hi".into()]);
        let (stat, shown) = quick_stat_config(&cfg, &launch, None);
        assert_eq!(stat.live().unwrap().command_stdout, CommandStdout::Null);
        assert_eq!(
            stat.live().unwrap().target,
            tma_stat::LiveTarget::Command(vec!["echo".into(), "hi".into()])
        );
        assert_eq!(shown.join(" "), "stat -l 3 -- echo hi");
        let (stat, _) = quick_stat_config(&cfg, &Target::Pid(42), None);
        assert_eq!(stat.live().unwrap().command_stdout, CommandStdout::Inherit);
        assert_eq!(
            stat.live().unwrap().target,
            tma_stat::LiveTarget::Pids(vec![42])
        );
    }
}
