//! The group one sample reads: software, imported, or planned for a model's level.

use std::collections::HashMap;

use serde::Serialize;
use tma_catalog::{Model, Topdown, Vendor};
use tma_metrics::{Constants, Selection};
use tma_perf::event::{EventSpec, SoftwareEvent, SpecKind};

use super::TreeError;

/// How the sampled group is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutKind {
    /// Software events only (no PMU): no tree.
    Software,
    /// `slots` leads, the second event samples, PERF_METRICS members (Ice Lake and later).
    SlotsLeader,
    /// The sampler leads, the level's events are members (earlier Intel, E-cores, AMD).
    SamplerLeads,
}

/// The group one sample reads.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeLayout {
    pub kind: LayoutKind,
    /// The catalog model (`None` for the software group).
    pub cpu: Option<&'static str>,
    pub sampler: EventSpec,
    /// A counting leader before the sampler (`slots`).
    pub leader: Option<EventSpec>,
    pub members: Vec<EventSpec>,
    /// Events of the level that are not in the group, with why.
    pub dropped: Vec<(String, String)>,
    /// The event whose per-function sum ranks the functions (slots, else cycles);
    /// `None`: by samples.
    pub rank: Option<String>,
    /// Caveats that apply to this layout.
    pub notes: Vec<String>,
}

/// The software group of a machine without PMU.
pub const SOFTWARE_MEMBERS: [SoftwareEvent; 3] = [
    SoftwareEvent::PageFaults,
    SoftwareEvent::ContextSwitches,
    SoftwareEvent::TaskClock,
];

impl TreeLayout {
    /// `{cpu-clock, page-faults, context-switches, task-clock}`, cpu-clock sampling.
    pub fn software() -> TreeLayout {
        TreeLayout {
            kind: LayoutKind::Software,
            cpu: None,
            sampler: EventSpec::software(SoftwareEvent::CpuClock),
            leader: None,
            members: SOFTWARE_MEMBERS
                .iter()
                .map(|&e| EventSpec::software(e))
                .collect(),
            dropped: Vec::new(),
            rank: None,
            notes: vec![
                "no hardware PMU: a TMA tree needs one (core cycles, slots and the level's \
                 events); this is the software group, read with every sample, per function"
                    .into(),
            ],
        }
    }

    /// The group of a recorded file (`perf record -e '{a,b,c}:S'`): `names` in read order,
    /// the sampler among them; a tree is evaluated when `model` is given (the names must
    /// then be the formulas' event names).
    pub fn imported(names: &[String], sampler: &str, model: Option<&'static Model>) -> TreeLayout {
        let spec = |n: &str| EventSpec::raw(n, "", 0);
        let software = names
            .iter()
            .all(|n| SoftwareEvent::parse(n.split(':').next().unwrap_or(n)).is_some());
        TreeLayout {
            kind: if software {
                LayoutKind::Software
            } else {
                LayoutKind::SamplerLeads
            },
            cpu: model.map(|m| m.key),
            sampler: spec(sampler),
            leader: None,
            members: names
                .iter()
                .filter(|n| n.as_str() != sampler)
                .map(|n| spec(n))
                .collect(),
            dropped: Vec::new(),
            rank: None,
            notes: vec![format!(
                "the recorded group, values read with each sample of {sampler}"
            )],
        }
    }

    /// The names of each read's values, in the kernel's order (leader first).
    pub fn read_order(&self) -> Vec<String> {
        let mut v = Vec::with_capacity(self.members.len() + 2);
        if let Some(l) = &self.leader {
            v.push(l.name.clone());
        }
        v.push(self.sampler.name.clone());
        v.extend(self.members.iter().map(|m| m.name.clone()));
        v
    }

    /// The group as perf writes it: `{a,b,c}:S` with the sampler marked.
    pub fn describe(&self) -> String {
        let mut names = Vec::new();
        if let Some(l) = &self.leader {
            names.push(l.name.clone());
        }
        names.push(format!("{} (samples)", self.sampler.name));
        names.extend(self.members.iter().map(|m| m.name.clone()));
        format!("{{{}}}", names.join(", "))
    }

    /// Plan the group of `level` for `model` (`nmi_watchdog`: the watchdog holds a
    /// general-purpose counter; `smt_on`: SMT is active, which before Ice Lake makes the
    /// formulas estimate core clocks from two more events).
    pub fn hardware(
        model: &'static Model,
        level: u8,
        nmi_watchdog: bool,
        smt_on: bool,
    ) -> Result<TreeLayout, TreeError> {
        if !(1..=2).contains(&level) {
            return Err(TreeError::Level);
        }
        let mut specs = level_events(model, level, smt_on)?;
        let sampler = take_sampler(model, &mut specs)?;
        let mut notes = Vec::new();
        let mut dropped = Vec::new();
        let mut leader = None;
        let kind = if model.topdown == Topdown::Generic {
            LayoutKind::SamplerLeads
        } else {
            LayoutKind::SlotsLeader
        };
        if kind == LayoutKind::SlotsLeader {
            match specs.iter().position(|s| s.kind == SpecKind::Slots) {
                Some(i) => leader = Some(specs.remove(i)),
                None => notes.push("the level names no slots event: no slots leader".into()),
            }
            notes.push(
                "slots leads the group and cannot sample: the second event (core cycles) \
                 samples; the topdown metric events read zero outside a slots group"
                    .into(),
            );
            notes.push(
                "each topdown metric is an 8-bit fraction of the slots since the previous \
                 read: with short periods a sample's share is quantized to 1/255; use a \
                 period of many thousand cycles"
                    .into(),
            );
        }
        // The host's caveats (the NMI watchdog's counter, SMT before Ice Lake, the kernel
        // release) are the `tma doctor` checks `tma locate` says for a live run
        // (`tma_checks::tree_caveats`); what they cost the group is in `dropped`.
        // Counters: fixed by index, general-purpose by mask.
        let usable = model.gp_counters.saturating_sub(nmi_watchdog as u32);
        let mut fixed_used: Vec<u8> = Vec::new();
        let mut gp_used: u32 = 0;
        let mut take = |s: &EventSpec, gp_used: &mut u32| -> Result<(), String> {
            match s.kind {
                SpecKind::PerfMetrics(_) => {
                    return if kind == LayoutKind::SlotsLeader {
                        Ok(())
                    } else {
                        Err("a topdown metric event needs a slots leader".into())
                    };
                }
                SpecKind::Software(_) | SpecKind::Tracepoint(_) | SpecKind::Tsc => return Ok(()),
                _ => {}
            }
            if let Some(f) = s.fixed {
                if f < model.fixed_counters as u8 && !fixed_used.contains(&f) {
                    fixed_used.push(f);
                    return Ok(());
                }
            }
            if s.taken_alone {
                return Err(format!(
                    "needs MSR {:#x} of its own (taken alone): it cannot share the group",
                    s.msr_index
                ));
            }
            // Highest counter first: restricted events usually want the low ones.
            for c in (0..usable).rev() {
                if s.counter_mask & (1 << c) != 0 && *gp_used & (1 << c) == 0 {
                    *gp_used |= 1 << c;
                    return Ok(());
                }
            }
            Err(format!(
                "no general-purpose counter left: {} usable{} are taken",
                usable,
                if nmi_watchdog {
                    " (one more is held by the NMI watchdog)"
                } else {
                    ""
                }
            ))
        };
        if let Some(l) = &leader {
            take(l, &mut gp_used).map_err(|_| TreeError::NoSampler {
                cpu: model.key.to_string(),
            })?;
        }
        if take(&sampler, &mut gp_used).is_err() {
            return Err(TreeError::NoSampler {
                cpu: model.key.to_string(),
            });
        }
        let mut members = Vec::new();
        for s in specs {
            let intel_generic = model.vendor == Vendor::Intel && kind == LayoutKind::SamplerLeads;
            let upper = s.name.to_ascii_uppercase();
            if intel_generic && upper.ends_with("_ANY") {
                dropped.push((
                    s.name.clone(),
                    "a core-wide (AnyThread) count: samples of one thread cannot use it".into(),
                ));
                continue;
            }
            match take(&s, &mut gp_used) {
                Ok(()) => members.push(s),
                Err(why) => dropped.push((s.name.clone(), why)),
            }
        }
        let rank = match &leader {
            Some(l) => Some(l.name.clone()),
            None => Some(sampler.name.clone()),
        };
        Ok(TreeLayout {
            kind,
            cpu: Some(model.key),
            sampler,
            leader,
            members,
            dropped,
            rank,
            notes,
        })
    }
}

/// The level's events in node order, as specs: those some node's value needs first, then
/// those only a threshold reads.
fn level_events(
    model: &'static Model,
    level: u8,
    smt_on: bool,
) -> Result<Vec<EventSpec>, TreeError> {
    // The level's events in node order, for the constants of a per-thread count (the
    // branches of `#smt_on` / `#core_wide` that do not apply are left out).
    let consts = Constants {
        smt_on,
        threads_per_core: if smt_on { 2 } else { 1 },
        core_wide: !smt_on,
        ..Constants::default()
    };
    let mut ids: Vec<String> = Vec::new();
    let sel = Selection::level(level);
    for node in tma_metrics::node_order(model, &sel) {
        let one = Selection {
            max_level: node.level,
            nodes: vec![node.name.to_string()],
            metrics: Vec::new(),
        };
        for id in tma_metrics::required_events_for(model, &one, &consts)? {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    // Where not all fit, the events some node's value needs go first; those only a
    // threshold reads, after.
    let all: HashMap<String, f64> = ids.iter().map(|i| (i.clone(), 1.0)).collect();
    let value_needs = |id: &String| -> bool {
        let mut less = all.clone();
        less.remove(id);
        tma_metrics::evaluate(model, &sel, &less, &consts)
            .map(|r| {
                r.nodes
                    .iter()
                    .any(|n| n.missing_events.contains(id) && !n.status.has_value())
            })
            .unwrap_or(true)
    };
    let (first, rest): (Vec<String>, Vec<String>) = ids.into_iter().partition(value_needs);
    let ids: Vec<String> = first.into_iter().chain(rest).collect();
    let mut specs: Vec<EventSpec> = Vec::new();
    for id in &ids {
        if let Some(s) = EventSpec::from_encoding(&model.encode(id)?) {
            specs.push(s);
        }
    }
    Ok(specs)
}

/// The core-cycles event that samples: taken out of `specs` where the level reads it, else
/// encoded on its own.
fn take_sampler(model: &'static Model, specs: &mut Vec<EventSpec>) -> Result<EventSpec, TreeError> {
    let cycles_names: &[&str] = match model.vendor {
        Vendor::Amd => &["ls_not_halted_cyc"],
        _ => &["CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.CORE"],
    };
    let sampler = match specs
        .iter()
        .position(|s| cycles_names.iter().any(|c| s.name.eq_ignore_ascii_case(c)))
    {
        Some(i) => specs.remove(i),
        None => cycles_names
            .iter()
            .find_map(|c| {
                model
                    .encode(c)
                    .ok()
                    .and_then(|e| EventSpec::from_encoding(&e))
            })
            .ok_or_else(|| TreeError::NoSampler {
                cpu: model.key.to_string(),
            })?,
    };
    Ok(sampler)
}
