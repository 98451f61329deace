//! The `tma locate` use case: a clap-free [`LocateConfig`] in, a [`Located`] profile out
//! (written by [`crate::render`]). Phases: choose the event (`--node`, `-e`, or the bottleneck
//! of a quick in-process `tma stat` pass), record (sample live, or import a perf.data file),
//! aggregate and symbolize into a [`Profile`](crate::hotspots::Profile).

mod config;
mod direct;
mod group;
mod import;
mod quick_stat;
mod recorded;
mod sample;

use std::io::Write;

use tma_perf::sampling::Target;

use self::config::usage;
use self::direct::{direct_from_file, direct_pass};
use self::group::tree_constants;
use self::import::import;
use self::sample::sample;
use crate::hotspots;
use crate::symbols::Symbolizer;

pub use self::config::{LocateConfig, LocateError, Located};

/// Run `tma locate` up to the profile; notes (and the quick stat pass's) go to `notes`.
pub fn run(cfg: &LocateConfig, notes: &mut dyn Write) -> Result<Located, LocateError> {
    if cfg.tree.is_some() {
        if cfg.node.is_some() || cfg.event.is_some() {
            return Err(usage(
                "--tree samples core cycles (or cpu-clock) with its own group: give no --node or -e",
            ));
        }
        if cfg.record.is_some() {
            return Err(usage(
                "--record with --tree is not supported: record the group with \
                 `perf record -e '{...}:S'` and read it with --import --tree",
            ));
        }
    }
    let rec = match (&cfg.import, cfg.pid, cfg.command.is_empty()) {
        _ if cfg.system_wide => {
            if cfg.import.is_some() || cfg.pid.is_some() || !cfg.command.is_empty() {
                return Err(usage(
                    "-a samples the whole system for --duration S (or until Ctrl-C): \
                     give no command, -p or --import with it",
                ));
            }
            let target = Target::System {
                cpus: cfg.cpus.clone(),
            };
            sample(cfg, &target, notes)?
        }
        _ if cfg.cpus.is_some() => {
            return Err(usage(
                "-C CPUS selects CPUs of a system-wide session: add -a",
            ))
        }
        (Some(path), ..) => import(cfg, path)?,
        (None, Some(_), false) => {
            return Err(usage("give either -p PID or a command after --, not both"))
        }
        (None, Some(pid), true) => sample(cfg, &Target::Pid(pid), notes)?,
        (None, None, false) => sample(cfg, &Target::Launch(cfg.command.clone()), notes)?,
        (None, None, true) => {
            return Err(usage(
                "nothing to sample: give a command after `--`, -p PID, or --import FILE",
            ))
        }
    };
    let mut sym = Symbolizer::new(cfg.symdir.clone(), rec.kallsyms);
    let mut profile = hotspots::analyze(&rec.agg, &mut sym, &rec.event_name, &cfg.report);
    profile.notes.extend(rec.notes);
    if cfg.folded && !cfg.call_graph && cfg.import.is_none() {
        profile
            .notes
            .push("--folded without -g: each stack is just the sampled function".into());
    }
    let mut dominant = None;
    let tree = match (&rec.tree, cfg.tree) {
        (Some((layout, model)), Some(level)) => {
            profile.value_names = layout.read_order();
            let consts = tree_constants(&cfg.host);
            let first = rec.agg.group().map_or(0, |g| g.first_reads);
            let mut t = crate::tree::build(
                &profile,
                layout,
                *model,
                level,
                &consts,
                cfg.report.top,
                first,
            )?;
            if let Some(m) = model {
                dominant = Some(crate::tree::dominant_nodes(&profile, m, &consts)?);
            }
            // Kernel samples are charged to their user frame here: the flat report's
            // note on unnamed kernel samples does not apply.
            t.notes.extend(
                profile
                    .notes
                    .iter()
                    .filter(|n| !n.contains("kernel samples shown as [kernel]"))
                    .cloned(),
            );
            if let Some(live) = &rec.live {
                // The kernel caveats `tma doctor` checks that apply to this run.
                let host_model = match &cfg.cpu {
                    Some(k) => Some(tma_catalog::by_name(k)?),
                    None => cfg.this_cpu,
                };
                for c in tma_checks::tree_caveats(&cfg.host, host_model) {
                    let n = format!("{} (tma doctor: {})", c.summary, c.id);
                    if cfg.echo_notes {
                        writeln!(notes, "tma: note: {n}")?;
                    }
                    t.notes.push(n);
                }
                if cfg.direct {
                    direct_pass(cfg, live, &mut t, &profile, *model, &consts, notes)?;
                }
            }
            if let (Some(path), true) = (&cfg.import, cfg.direct) {
                direct_from_file(
                    cfg,
                    path,
                    &rec.import_others,
                    &mut t,
                    &profile,
                    *model,
                    &consts,
                    notes,
                )?;
            }
            Some(t)
        }
        _ => None,
    };
    Ok(Located {
        profile,
        duration_ns: rec.duration_ns,
        exit_status: rec.exit_status,
        tree,
        dominant,
    })
}
