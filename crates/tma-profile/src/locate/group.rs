//! `--tree`: the group a live run samples, and the constants of its per-thread trees.

use tma_catalog::Model;
use tma_host::Host;
use tma_perf::sampling::group::{GroupEvent, GroupSpec};
use tma_perf::sampling::SampleEvent;

use super::config::{usage, LocateConfig, LocateError};
use crate::tree::TreeLayout;

/// The constants of a per-thread tree: SMT as this host has it (`core_wide` only with SMT
/// off: samples are of one thread).
pub(super) fn tree_constants(host: &Host) -> tma_metrics::Constants {
    let smt_on = smt_active(host);
    tma_metrics::Constants {
        smt_on,
        threads_per_core: if smt_on { 2 } else { 1 },
        core_wide: !smt_on,
        ..tma_metrics::Constants::default()
    }
}

pub(super) fn smt_active(host: &Host) -> bool {
    host.sys_text("devices/system/cpu/smt/active")
        .map(|t| t.trim() == "1")
        .unwrap_or(false)
}

/// The group `--tree` samples: the level's events on this machine's core PMU for the
/// model, or the software group where there is no PMU (then no model: counts only).
pub(super) fn tree_plan(
    cfg: &LocateConfig,
    level: u8,
) -> Result<(TreeLayout, Option<&'static Model>, SampleEvent, GroupSpec), LocateError> {
    let model = match &cfg.cpu {
        Some(k) => Some(tma_catalog::by_name(k)?),
        None => cfg.this_cpu,
    };
    let pmus = tma_host::sysfs::Pmus::discover(&cfg.host.sys).ok();
    let hardware = match (model, &pmus) {
        (Some(m), Some(p)) if p.get(m.pmu).is_some() => Some((m, p)),
        _ => None,
    };
    let Some((m, pmus)) = hardware else {
        let mut layout = TreeLayout::software();
        layout.notes.insert(
            0,
            match model {
                Some(m) => format!(
                    "no `{}` PMU here (no hardware counters: a VM without a virtual PMU?): \
                     the {} tree cannot be counted",
                    m.pmu, m.key
                ),
                None => "no hardware PMU, and no CPU model (--cpu) for a tree".into(),
            },
        );
        let group = GroupSpec {
            leader: None,
            members: crate::tree::SOFTWARE_MEMBERS
                .iter()
                .map(|&e| GroupEvent::software(e))
                .collect(),
        };
        return Ok((layout, None, SampleEvent::CpuClock, group));
    };
    let layout = TreeLayout::hardware(m, level, cfg.host.nmi_watchdog_on(), smt_active(&cfg.host))?;
    let ge = |s: &tma_perf::event::EventSpec| {
        GroupEvent::from_spec(s, pmus).map_err(|e| usage(&e.to_string()))
    };
    let sampler = ge(&layout.sampler)?;
    let group = GroupSpec {
        leader: layout.leader.as_ref().map(ge).transpose()?,
        members: layout.members.iter().map(ge).collect::<Result<_, _>>()?,
    };
    let event = SampleEvent::Raw {
        name: sampler.name,
        pmu_type: sampler.type_,
        config: sampler.config,
        config1: sampler.config1,
        config2: 0,
    };
    Ok((layout, Some(m), event, group))
}
