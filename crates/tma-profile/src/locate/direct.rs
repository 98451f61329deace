//! `--tree --direct`: the direct estimate of the bottleneck beside the group reads, from a
//! second live pass or from the same perf.data file ([`crate::estimate`]).

use std::io::Write;
use std::path::Path;

use tma_catalog::Model;
use tma_perf::sampling::{Rate, SampleEvent, SamplingConfig, Target};

use super::config::{LocateConfig, LocateError};
use super::recorded::{read_kallsyms, LivePass};
use super::sample::sampling_config;
use crate::aggregate::Aggregator;
use crate::choose::{self, Chosen, Request};
use crate::hotspots::{self, Profile, ReportOptions};
use crate::symbols::Symbolizer;

/// `--tree`'s second pass: sample the whole run's bottleneck node's locate-with event (the
/// nearest parent's where it has none; cpu-clock without a PMU) on the same target, and put
/// the two estimators side by side in the tree ([`crate::estimate`]). A pass that cannot be
/// made, or fails, is a note: the tree stands.
/// What the second pass samples, and how: the whole run's bottleneck node's locate-with
/// event (the nearest parent's where it has none; cpu-clock without a tree), at the catalog's
/// fixed period for a hardware event unless `--period`/`--freq` was given, with call chains,
/// the command's stdout to /dev/null. `Ok(Err(why))`: no second pass, and why.
pub(super) fn direct_plan(
    cfg: &LocateConfig,
    t: &crate::tree::TreeProfile,
    profile: &Profile,
    model: Option<&'static Model>,
    include_kernel: bool,
) -> Result<Result<(crate::estimate::Compared, SamplingConfig), String>, LocateError> {
    use crate::estimate;
    let node = t.total.bottleneck.as_ref().and_then(|b| b.node.clone());
    let (what, chosen) = match (model, t.level) {
        (Some(m), 1..) => {
            let Some(node) = node else {
                return Ok(Err("the whole run has no bottleneck node".into()));
            };
            let Some((with, _)) = estimate::locate_with(m, &node) else {
                return Ok(Err(format!(
                    "the {} tables name no locate-with event for {node} or its parents",
                    m.key
                )));
            };
            let pmu = choose::core_pmu(&cfg.host.sys);
            let chosen = choose::choose_on(
                &Request::Node(with.to_string()),
                Some(m),
                pmu.as_ref(),
                &cfg.host,
            )?;
            let what = estimate::Compared {
                // The group reads are compared for the node whose event the direct pass samples.
                group_basis: estimate::group_basis(profile, Some(with)),
                node: Some(node),
                direct_event: chosen.event.name().to_string(),
                direct_node: Some(with.to_string()),
                direct_source: "a second pass".into(),
            };
            (what, chosen)
        }
        _ => (
            estimate::Compared {
                node: None,
                group_basis: estimate::group_basis(profile, None),
                direct_event: "cpu-clock".into(),
                direct_node: None,
                direct_source: "a second pass".into(),
            },
            Chosen {
                event: SampleEvent::CpuClock,
                precise: 0,
                wanted: "cpu-clock".into(),
                notes: Vec::new(),
            },
        ),
    };
    let mut scfg = sampling_config(cfg, &chosen)?;
    scfg.callchain = true;
    scfg.include_kernel = include_kernel;
    scfg.command_stdout = tma_perf::process::CommandStdout::Null;
    // Samples proportional to events: a hardware event at the catalog's fixed period.
    if cfg.rate.is_none() {
        if let (SampleEvent::Raw { name, .. }, Some(m)) = (&chosen.event, model) {
            let base = tma_catalog::EventId::parse(name).base;
            if let Some(e) = m.event(base).filter(|e| e.sample_after > 0) {
                scfg.rate = Rate::Period(e.sample_after);
            }
        }
    }
    Ok(Ok((what, scfg)))
}

/// `--import --tree`: the direct estimate from the same file, when it also holds samples of
/// the event the second pass would sample, recorded on their own (`perf record -e
/// '{cycles,...}:S' -e EVENT`): the locate-with event of the bottleneck (or of its nearest
/// parent with one); without a tree, the file's first event outside the group.
#[allow(clippy::too_many_arguments)]
pub(super) fn direct_from_file(
    cfg: &LocateConfig,
    path: &Path,
    others: &[String],
    t: &mut crate::tree::TreeProfile,
    profile: &Profile,
    model: Option<&'static Model>,
    consts: &tma_metrics::Constants,
    notes: &mut dyn Write,
) -> Result<(), LocateError> {
    use crate::estimate;
    let base = |e: &str| e.split(':').next().unwrap_or(e).to_ascii_lowercase();
    let (what, event) = match (model, t.level) {
        (Some(m), 1..) => {
            let Some(node) = t.total.bottleneck.as_ref().and_then(|b| b.node.clone()) else {
                return Ok(());
            };
            let Some((with, ev)) = estimate::locate_with(m, &node) else {
                return Ok(());
            };
            let want = base(ev);
            let Some(found) = others.iter().find(|e| base(e) == want) else {
                return skip_direct(
                    cfg,
                    notes,
                    t,
                    format!(
                        "the file holds no samples of {ev} (the locate-with event of {with}): \
                         record it beside the group (perf record -e '{{...}}:S' -e {ev})"
                    ),
                );
            };
            let what = estimate::Compared {
                group_basis: estimate::group_basis(profile, Some(with)),
                node: Some(node),
                direct_event: found.clone(),
                direct_node: Some(with.to_string()),
                direct_source: "the same file".into(),
            };
            (what, found.clone())
        }
        _ => {
            let Some(found) = others.first() else {
                return Ok(());
            };
            let what = estimate::Compared {
                node: None,
                group_basis: estimate::group_basis(profile, None),
                direct_event: found.clone(),
                direct_node: None,
                direct_source: "the same file".into(),
            };
            (what, found.clone())
        }
    };
    let mut agg = Aggregator::new();
    agg.keep_callchains = true;
    crate::import::import_file(path, &mut agg, Some(&event)).map_err(|source| {
        LocateError::Import {
            path: path.display().to_string(),
            source,
        }
    })?;
    let sym = Symbolizer::new(
        cfg.symdir.clone(),
        cfg.kallsyms.as_deref().and_then(read_kallsyms),
    );
    compare_direct(cfg, notes, t, what, &agg, sym, profile, model, consts)
}

/// Put the direct samples in `agg` beside the group reads of `profile`: the estimators of
/// the node `what` names, stored in `t` (and their verdict said on stderr with `echo_notes`;
/// the text report shows it under the table).
#[allow(clippy::too_many_arguments)]
pub(super) fn compare_direct(
    cfg: &LocateConfig,
    notes: &mut dyn Write,
    t: &mut crate::tree::TreeProfile,
    what: crate::estimate::Compared,
    agg: &Aggregator,
    mut sym: Symbolizer,
    profile: &Profile,
    model: Option<&'static Model>,
    consts: &tma_metrics::Constants,
) -> Result<(), LocateError> {
    use crate::estimate;
    let opts = ReportOptions {
        annotate: None,
        top: 1,
        no_frame_lines: true,
        ..ReportOptions::default()
    };
    let direct = hotspots::analyze(agg, &mut sym, &what.direct_event, &opts);
    let node = what.direct_node.as_deref().or(what.node.as_deref());
    let group = estimate::group_amounts(profile, model, node, consts)
        .map_err(crate::tree::TreeError::from)?;
    let shown: Vec<estimate::FuncKey> = t
        .functions
        .iter()
        .map(|f| (f.function.clone(), f.module.clone()))
        .collect();
    let e = estimate::compare(what, &group, &estimate::direct_amounts(&direct), &shown);
    if cfg.echo_notes {
        writeln!(notes, "tma: note: {}", e.verdict())?;
    }
    t.estimators = Some(e);
    Ok(())
}

/// Why there is no direct estimate: a note in the tree (and on stderr with `echo_notes`).
pub(super) fn skip_direct(
    cfg: &LocateConfig,
    notes: &mut dyn Write,
    t: &mut crate::tree::TreeProfile,
    why: String,
) -> Result<(), LocateError> {
    let n = format!("no direct estimate of the bottleneck: {why}");
    if cfg.echo_notes {
        writeln!(notes, "tma: note: {n}")?;
    }
    t.notes.push(n);
    Ok(())
}

pub(super) fn direct_pass(
    cfg: &LocateConfig,
    live: &LivePass,
    t: &mut crate::tree::TreeProfile,
    profile: &Profile,
    model: Option<&'static Model>,
    consts: &tma_metrics::Constants,
    notes: &mut dyn Write,
) -> Result<(), LocateError> {
    if live.ended_early {
        return skip_direct(
            cfg,
            notes,
            t,
            "the session was interrupted or its process went away".into(),
        );
    }
    if !matches!(live.target, Target::Launch(_)) && cfg.duration_s.is_none() {
        return skip_direct(
            cfg,
            notes,
            t,
            "a second pass of -p or -a needs --duration (the first ran until the end)".into(),
        );
    }
    let (what, scfg) = match direct_plan(cfg, t, profile, model, live.include_kernel)? {
        Ok(p) => p,
        Err(why) => return skip_direct(cfg, notes, t, why),
    };
    writeln!(
        notes,
        "tma: second pass for the direct estimate: sampling {}{}",
        what.direct_event,
        match &what.direct_node {
            Some(n) => format!(" (the locate-with event of {n})"),
            None => String::new(),
        }
    )?;
    let mut agg = Aggregator::new();
    agg.keep_callchains = true;
    if let Err(e) = crate::live::sample(scfg, &live.target, &mut agg, None) {
        return skip_direct(cfg, notes, t, format!("the second pass failed: {e}"));
    }
    let sym = Symbolizer::new(cfg.symdir.clone(), None);
    compare_direct(cfg, notes, t, what, &agg, sym, profile, model, consts)
}

#[cfg(test)]
mod tests {
    use tma_host::Host;

    use super::*;

    /// A replayed tree of `model` whose whole-run bottleneck is Backend_Bound (Ice Lake) or
    /// backend_bound (Zen 4): one sample of thread 1 in one function.
    fn backend_bound_tree(key: &str) -> (crate::tree::TreeProfile, Profile, &'static Model) {
        use crate::tree::{build, replay, ReplaySample, TreeLayout};
        let m = tma_catalog::by_name(key).unwrap();
        let layout = TreeLayout::hardware(m, 1, false, false).unwrap();
        let values: &[(&str, u64)] = match key {
            "icl" => &[
                ("TOPDOWN.SLOTS:perf_metrics", 10000),
                ("CPU_CLK_UNHALTED.THREAD", 2000),
                ("PERF_METRICS.FRONTEND_BOUND", 1000),
                ("PERF_METRICS.BAD_SPECULATION", 500),
                ("PERF_METRICS.RETIRING", 2500),
                ("PERF_METRICS.BACKEND_BOUND", 6000),
            ],
            _ => &[
                ("ls_not_halted_cyc", 1000),
                ("de_no_dispatch_per_slot.no_ops_from_frontend", 600),
                ("de_src_op_disp.all", 1500),
                ("ex_ret_ops", 1200),
                ("de_no_dispatch_per_slot.backend_stalls", 3900),
            ],
        };
        let (p, first) = replay(
            &layout,
            &[ReplaySample {
                tid: 1,
                ip: 0x1000,
                group_id: 1,
                values,
            }],
        );
        let consts = tma_metrics::Constants::default();
        let t = build(&p, &layout, Some(m), 1, &consts, 10, first).unwrap();
        (t, p, m)
    }

    /// The second pass samples the bottleneck's locate-with event on the host's core PMU
    /// (tests/fixtures/roots/icx-6.12: `cpu`, type 4) at the catalog's period, unless a rate
    /// was given; where the tables name no locate-with event (AMD) there is no second pass,
    /// and without a tree it samples cpu-clock against the group's task-clock.
    #[test]
    fn direct_plan_samples_the_locate_with_event() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/roots/icx-6.12");
        let mut cfg = LocateConfig {
            host: Host::under(&root),
            ..LocateConfig::default()
        };
        let (t, p, icl) = backend_bound_tree("icl");
        let (what, scfg) = direct_plan(&cfg, &t, &p, Some(icl), false)
            .unwrap()
            .unwrap();
        assert_eq!(what.node.as_deref(), Some("Backend_Bound"));
        assert_eq!(what.direct_node.as_deref(), Some("Backend_Bound"));
        assert_eq!(what.direct_event, "TOPDOWN.BACKEND_BOUND_SLOTS");
        assert_eq!(what.group_basis, "Backend_Bound slots");
        match &scfg.event {
            SampleEvent::Raw {
                pmu_type, config, ..
            } => assert_eq!((*pmu_type, *config & 0xffff), (4, 0x02a4)),
            e => panic!("{e:?}"),
        }
        assert_eq!(scfg.rate, Rate::Period(10000003));
        assert!(scfg.callchain && !scfg.include_kernel);
        assert_eq!(scfg.command_stdout, tma_perf::process::CommandStdout::Null);
        cfg.rate = Some(Rate::Freq(1000));
        let (_, scfg) = direct_plan(&cfg, &t, &p, Some(icl), true).unwrap().unwrap();
        assert_eq!(scfg.rate, Rate::Freq(1000));
        assert!(scfg.include_kernel);

        let (t, p, zen4) = backend_bound_tree("zen4");
        assert_eq!(
            t.total.bottleneck.as_ref().and_then(|b| b.node.as_deref()),
            Some("backend_bound")
        );
        assert_eq!(
            direct_plan(&cfg, &t, &p, Some(zen4), false)
                .unwrap()
                .unwrap_err(),
            "the zen4 tables name no locate-with event for backend_bound or its parents"
        );

        let mut soft = t.clone();
        soft.level = 0;
        let mut sp = p.clone();
        sp.value_names = vec![
            "cpu-clock".into(),
            "page-faults".into(),
            "context-switches".into(),
            "task-clock".into(),
        ];
        let (what, scfg) = direct_plan(&cfg, &soft, &sp, None, false).unwrap().unwrap();
        assert_eq!(
            (what.node, what.group_basis.as_str(), scfg.event),
            (None, "task-clock", SampleEvent::CpuClock)
        );
    }
}
