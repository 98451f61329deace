//! Which event to sample: `-e EVENT`, the locate-with event of `--node NAME`, or the node a
//! quick `tma stat` pass names as the bottleneck; and the `cpu-clock` fallback where no
//! hardware PMU exists.

use std::path::Path;

use tma_catalog::{EventId, Model, NodeDef};
use tma_host::sysfs::Pmus;
use tma_host::Host;
use tma_perf::attr::{TYPE_HARDWARE, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use tma_perf::event::SpecKind;
use tma_perf::sampling::SampleEvent;

/// Errors from choosing the event.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChoiceError {
    #[error("unknown node {0:?}: `tma list` shows the nodes of this CPU")]
    UnknownNode(String),
    #[error("node {0} has no locate-with event in the catalog; pick one with -e EVENT")]
    NoLocateEvent(String),
    #[error("unknown event {0:?}: use an event name from `tma list --events`, cycles, instructions, a software event (cpu-clock, task-clock, page-faults, ...), a tracepoint SYS:NAME, PMU/terms/ or rNNNN (raw hex)")]
    UnknownEvent(String),
    #[error("no CPU model table for this machine, so {0} cannot be resolved; use -e rNNNN or -e cpu-clock")]
    NoModel(String),
    #[error("cannot encode the event: {0}")]
    Encode(String),
    #[error("bad precise modifier in {0:?}: use :p, :pp or :ppp")]
    BadModifier(String),
}

/// A hardware PMU found in sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pmu {
    pub name: String,
    pub pmu_type: u32,
}

/// The core PMU under `<sysfs_root>/bus/event_source/devices` (`cpu`, or `cpu_core` on
/// hybrid parts), `None` where there is none (VMs without a virtual PMU).
pub fn core_pmu(sysfs_root: &Path) -> Option<Pmu> {
    tma_host::sysfs::core_pmu_types(sysfs_root)
        .into_iter()
        // Hybrid parts sample on the P-cores.
        .find(|&(name, _)| name != "cpu_atom")
        .map(|(name, pmu_type)| Pmu {
            name: name.into(),
            pmu_type,
        })
}

/// How the user asked for the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `-e EVENT`.
    Event(String),
    /// `--node NAME`.
    Node(String),
    /// Neither: the bottleneck of a quick stat pass (given as the node name, once known).
    Bottleneck(Option<String>),
}

/// The event to sample and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub event: SampleEvent,
    pub precise: u8,
    /// The event the method asked for (may differ from `event` after the fallback).
    pub wanted: String,
    /// Lines to tell the user (fallback explanation), empty when none.
    pub notes: Vec<String>,
}

fn precise_from_modifiers(spec: &str, mods: &[&str]) -> Result<Option<u8>, ChoiceError> {
    let mut p = None;
    for m in mods {
        if !m.is_empty() && m.chars().all(|c| c == 'p') {
            if m.len() > 3 {
                return Err(ChoiceError::BadModifier(spec.into()));
            }
            p = Some(m.len() as u8);
        }
    }
    Ok(p)
}

/// Resolve an event spec (`NAME[:p|:pp|:ppp]`, `rHEX`, `cpu-clock`, `task-clock`).
pub fn resolve_event(
    spec: &str,
    model: Option<&Model>,
    pmu_type: u32,
) -> Result<(SampleEvent, u8), ChoiceError> {
    let id = EventId::parse(spec);
    let precise = precise_from_modifiers(spec, &id.modifiers)?;
    match id.base.to_ascii_lowercase().as_str() {
        "cpu-clock" => return Ok((SampleEvent::CpuClock, 0)),
        "task-clock" => return Ok((SampleEvent::TaskClock, 0)),
        _ => {}
    }
    if let Some(hex) = id.base.strip_prefix('r') {
        if let Ok(config) = u64::from_str_radix(hex, 16) {
            return Ok((
                SampleEvent::Raw {
                    name: spec.to_string(),
                    pmu_type,
                    config,
                    config1: 0,
                    config2: 0,
                },
                precise.unwrap_or(0),
            ));
        }
    }
    let model = model.ok_or_else(|| ChoiceError::NoModel(spec.to_string()))?;
    let def = model
        .event(id.base)
        .ok_or_else(|| ChoiceError::UnknownEvent(spec.to_string()))?;
    // The catalog encodes the counting modifiers (c, u, e, i, ...); the precise level is ours.
    let mut counting = id.base.to_string();
    for m in id
        .modifiers
        .iter()
        .filter(|m| m.is_empty() || !m.chars().all(|c| c == 'p'))
    {
        counting.push(':');
        counting.push_str(m);
    }
    let enc = model
        .encode(&counting)
        .map_err(|e| ChoiceError::Encode(e.to_string()))?;
    let (config, config1) = (enc.config, enc.config1);
    // A precise-capable event without an explicit level gets :pp, as perf's `:P` would.
    let precise = precise.unwrap_or(if def.precise { 2 } else { 0 });
    let name = if precise > 0 && !spec.contains(':') {
        format!("{}:{}", def.name, "p".repeat(precise as usize))
    } else {
        spec.to_string()
    };
    Ok((
        SampleEvent::Raw {
            name,
            pmu_type,
            config,
            config1,
            config2: 0,
        },
        precise,
    ))
}

/// The event string the node is located with (first listed), with `:pp` added when the
/// event is precise and the catalog gave no level.
pub fn node_event(model: &Model, node: &str) -> Result<(&'static NodeDef, String), ChoiceError> {
    let n = model
        .node(node)
        .ok_or_else(|| ChoiceError::UnknownNode(node.to_string()))?;
    let first = n
        .locate_with
        .first()
        .ok_or_else(|| ChoiceError::NoLocateEvent(n.name.to_string()))?;
    let id = EventId::parse(first);
    let explicit = id
        .modifiers
        .iter()
        .any(|m| !m.is_empty() && m.chars().all(|c| c == 'p'));
    let precise = model.event(id.base).is_some_and(|e| e.precise);
    let s = if precise && !explicit {
        format!("{first}:pp")
    } else {
        first.to_string()
    };
    Ok((n, s))
}

/// Resolve `-e SPEC`: the CPU's own events with a precise level ([`resolve_event`]), else
/// whatever `tma stat -e` counts, through the one event parser
/// ([`tma_stat::event::parse_event`]): generic hardware events (`cycles`), software events
/// (`page-faults`), tracepoints (`sched:sched_switch`), `pmu/terms/`.
pub fn resolve_any(
    spec: &str,
    model: Option<&Model>,
    pmu_type: u32,
    host: &Host,
) -> Result<(SampleEvent, u8), ChoiceError> {
    let first = match resolve_event(spec, model, pmu_type) {
        Err(e @ (ChoiceError::UnknownEvent(_) | ChoiceError::NoModel(_))) => e,
        other => return other,
    };
    let id = EventId::parse(spec);
    let precise = precise_from_modifiers(spec, &id.modifiers)?.unwrap_or(0);
    // perf's precise modifiers are tma locate's; the parser takes the rest.
    let mut base = id.base.to_string();
    for m in id
        .modifiers
        .iter()
        .filter(|m| m.is_empty() || !m.chars().all(|c| c == 'p'))
    {
        base.push(':');
        base.push_str(m);
    }
    let pmus = Pmus::discover(&host.sys).unwrap_or_default();
    let Ok(parsed) = tma_stat::event::parse_event(&base, model, &pmus, host) else {
        return Err(match first {
            // Without tables, name what would resolve it.
            ChoiceError::NoModel(_) if id.base.contains('.') => first,
            _ => ChoiceError::UnknownEvent(spec.to_string()),
        });
    };
    let (pmu_type, config) = match parsed.kind {
        SpecKind::Software(ev) => (TYPE_SOFTWARE, ev.config()),
        SpecKind::Tracepoint(id) => (TYPE_TRACEPOINT, id),
        SpecKind::Hardware(id) => (TYPE_HARDWARE, id),
        SpecKind::Core if parsed.pmu.is_empty() => (pmu_type, parsed.config),
        SpecKind::Core => (
            pmus.get(&parsed.pmu)
                .map(|p| p.type_)
                .ok_or_else(|| ChoiceError::UnknownEvent(spec.to_string()))?,
            parsed.config,
        ),
        _ => {
            return Err(ChoiceError::Encode(format!(
                "{spec} cannot be sampled (it is counted only)"
            )))
        }
    };
    Ok((
        SampleEvent::Raw {
            name: spec.to_string(),
            pmu_type,
            config,
            config1: parsed.config1,
            config2: 0,
        },
        precise,
    ))
}

/// Events that need no hardware PMU: the software timers, software events and tracepoints.
fn needs_no_pmu(ev: &SampleEvent) -> bool {
    match ev {
        SampleEvent::CpuClock | SampleEvent::TaskClock => true,
        SampleEvent::Raw { pmu_type, .. } => {
            *pmu_type == TYPE_SOFTWARE || *pmu_type == TYPE_TRACEPOINT
        }
    }
}

/// Choose the event. `pmu` is the core PMU ([`core_pmu`]); where it is `None`, hardware
/// events fall back to cpu-clock with an explanation.
pub fn choose(
    req: &Request,
    model: Option<&Model>,
    pmu: Option<&Pmu>,
) -> Result<Chosen, ChoiceError> {
    choose_on(req, model, pmu, &Host::system())
}

/// [`choose`] with the `/sys` (PMUs, tracefs) of `host`.
pub fn choose_on(
    req: &Request,
    model: Option<&Model>,
    pmu: Option<&Pmu>,
    host: &Host,
) -> Result<Chosen, ChoiceError> {
    let pmu_type = pmu.map(|p| p.pmu_type).unwrap_or(4);
    let (wanted, resolved) = match req {
        Request::Event(e) => (e.clone(), resolve_any(e, model, pmu_type, host)),
        Request::Node(n) => match model {
            Some(m) => {
                let (_, ev) = node_event(m, n)?;
                let r = resolve_event(&ev, Some(m), pmu_type);
                (ev, r)
            }
            None => (
                format!("the locate-with event of {n}"),
                Err(ChoiceError::NoModel(format!("--node {n}"))),
            ),
        },
        Request::Bottleneck(Some(n)) => match model {
            Some(m) => {
                let (_, ev) = node_event(m, n)?;
                let r = resolve_event(&ev, Some(m), pmu_type);
                (ev, r)
            }
            None => (n.clone(), Err(ChoiceError::NoModel(n.clone()))),
        },
        Request::Bottleneck(None) => (
            "the bottleneck's locate-with event".to_string(),
            Ok((SampleEvent::CpuClock, 0)),
        ),
    };
    let fallback = |wanted: &str| Chosen {
        event: SampleEvent::CpuClock,
        precise: 0,
        wanted: wanted.to_string(),
        notes: vec![
            format!(
                "no hardware PMU on this machine (no cpu PMU under /sys/bus/event_source/devices): \
                 sampling cpu-clock instead of {wanted}"
            ),
            "cpu-clock attribution shows where time goes, not where that event happens, \
             and timer samples skid past the instruction that was running"
                .to_string(),
        ],
    };
    match resolved {
        Ok((ev, _)) if needs_no_pmu(&ev) => {
            if matches!(req, Request::Bottleneck(None)) {
                if pmu.is_none() {
                    return Ok(fallback(&wanted));
                }
                let mut c = fallback(&wanted);
                c.notes = vec!["no stat pass result available: sampling cpu-clock; \
                                name the node with --node or the event with -e"
                    .into()];
                return Ok(c);
            }
            Ok(Chosen {
                event: ev,
                precise: 0,
                wanted,
                notes: vec![],
            })
        }
        Ok((ev, precise)) => {
            if pmu.is_none() {
                return Ok(fallback(&wanted));
            }
            Ok(Chosen {
                event: ev,
                precise,
                wanted,
                notes: vec![],
            })
        }
        Err(ChoiceError::NoModel(_)) if pmu.is_none() && !matches!(req, Request::Event(_)) => {
            Ok(fallback(&wanted))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_catalog::{CoreKind, EventDef, EventKind, Topdown, Unit, Vendor};

    const fn ev(name: &'static str, code: u16, umask: u8, precise: bool) -> EventDef {
        EventDef {
            name,
            code,
            umask,
            cmask: 0,
            inv: false,
            edge: false,
            any_thread: false,
            msr_index: 0,
            msr_value: 0,
            counter_mask: 0xf,
            fixed: None,
            precise,
            taken_alone: false,
            kind: EventKind::Core,
            sample_after: 100003,
        }
    }
    const fn node(
        name: &'static str,
        parent: Option<&'static str>,
        level: u8,
        locate: &'static [&'static str],
    ) -> NodeDef {
        NodeDef {
            name,
            parent,
            level,
            formula: "",
            threshold: "",
            locate_with: locate,
            description: "",
            unit: Unit::PercentSlots,
            count_domain: "",
        }
    }
    static EVENTS: [EventDef; 3] = [
        ev("MEM_LOAD_RETIRED.L3_MISS", 0xd1, 0x20, true),
        ev("CYCLE_ACTIVITY.STALLS_L3_MISS", 0xa3, 0x06, false),
        ev("ex_ret_brn_misp", 0x0c3, 0, false),
    ];
    static NODES: [NodeDef; 4] = [
        node("Backend_Bound", None, 1, &[]),
        node("Retiring", None, 1, &[]),
        node(
            "Memory_Bound",
            Some("Backend_Bound"),
            2,
            &["MEM_LOAD_RETIRED.L3_MISS"],
        ),
        node(
            "DRAM_Bound",
            Some("Memory_Bound"),
            3,
            &["CYCLE_ACTIVITY.STALLS_L3_MISS"],
        ),
    ];
    static MODEL: Model = Model {
        key: "test",
        name: "Test",
        vendor: Vendor::Intel,
        core_kind: CoreKind::Uniform,
        pmu: "cpu",
        source: "synthetic",
        tma_version: None,
        slots_per_cycle: 4,
        gp_counters: 4,
        fixed_counters: 3,
        topdown: Topdown::Generic,
        events: &EVENTS,
        nodes: &NODES,
        metrics: &[],
        retire_latencies: &[],
    };
    const PMU: Pmu = Pmu {
        name: String::new(),
        pmu_type: 4,
    };

    /// `-e` takes what `tma stat -e` takes: generic hardware events, software events and
    /// tracepoints; software events and tracepoints need no PMU.
    #[test]
    fn locate_takes_every_event_stat_takes() {
        let d = tempfile::tempdir().unwrap();
        let tp = d
            .path()
            .join("sys/kernel/tracing/events/sched/sched_switch");
        std::fs::create_dir_all(&tp).unwrap();
        std::fs::write(tp.join("id"), "316\n").unwrap();
        let host = Host::under(d.path());
        let raw = |spec: &str| match resolve_any(spec, None, 4, &host).unwrap() {
            (
                SampleEvent::Raw {
                    pmu_type, config, ..
                },
                p,
            ) => (pmu_type, config, p),
            other => panic!("{other:?}"),
        };
        assert_eq!(raw("cycles"), (TYPE_HARDWARE, 0, 0));
        assert_eq!(raw("cycles:pp"), (TYPE_HARDWARE, 0, 2));
        assert_eq!(raw("instructions"), (TYPE_HARDWARE, 1, 0));
        assert_eq!(raw("page-faults"), (TYPE_SOFTWARE, 2, 0));
        assert_eq!(raw("sched:sched_switch"), (TYPE_TRACEPOINT, 316, 0));
        assert_eq!(
            resolve_any("cpu-clock", None, 4, &host).unwrap().0,
            SampleEvent::CpuClock
        );
        assert_eq!(
            resolve_any("bogus", None, 4, &host),
            Err(ChoiceError::UnknownEvent("bogus".into()))
        );
        assert_eq!(
            resolve_any("NOPE.EVENT", Some(&MODEL), 4, &host),
            Err(ChoiceError::UnknownEvent("NOPE.EVENT".into()))
        );
        // No PMU: page-faults and tracepoints are sampled as asked, cycles falls back.
        for (e, kept) in [
            ("page-faults", true),
            ("sched:sched_switch", true),
            ("cycles", false),
        ] {
            let c = choose_on(&Request::Event(e.into()), None, None, &host).unwrap();
            assert_eq!(c.event != SampleEvent::CpuClock, kept, "{e}: {c:?}");
        }
    }

    #[test]
    fn node_uses_first_locate_event_precise() {
        let c = choose(
            &Request::Node("memory_bound".into()),
            Some(&MODEL),
            Some(&PMU),
        )
        .unwrap();
        assert_eq!(c.precise, 2);
        match c.event {
            SampleEvent::Raw {
                name,
                config,
                pmu_type,
                ..
            } => {
                assert_eq!(name, "MEM_LOAD_RETIRED.L3_MISS:pp");
                assert_eq!(config, 0x20d1);
                assert_eq!(pmu_type, 4);
            }
            other => panic!("{other:?}"),
        }
        // Not precise: no :pp.
        let c = choose(
            &Request::Node("DRAM_Bound".into()),
            Some(&MODEL),
            Some(&PMU),
        )
        .unwrap();
        assert_eq!(c.precise, 0);
        assert_eq!(c.event.name(), "CYCLE_ACTIVITY.STALLS_L3_MISS");
        assert_eq!(
            choose(&Request::Node("Retiring".into()), Some(&MODEL), Some(&PMU)),
            Err(ChoiceError::NoLocateEvent("Retiring".into()))
        );
        assert!(matches!(
            choose(&Request::Node("Nope".into()), Some(&MODEL), Some(&PMU)),
            Err(ChoiceError::UnknownNode(_))
        ));
    }

    #[test]
    fn explicit_events_and_modifiers() {
        let (e, p) = resolve_event("MEM_LOAD_RETIRED.L3_MISS:ppp", Some(&MODEL), 4).unwrap();
        assert_eq!(p, 3);
        assert_eq!(e.name(), "MEM_LOAD_RETIRED.L3_MISS:ppp");
        let (e, p) = resolve_event("r01c2:p", None, 4).unwrap();
        assert_eq!(p, 1);
        assert!(matches!(e, SampleEvent::Raw { config: 0x1c2, .. }));
        assert_eq!(
            resolve_event("cpu-clock", None, 4).unwrap().0,
            SampleEvent::CpuClock
        );
        assert!(matches!(
            resolve_event("x:pppp", Some(&MODEL), 4),
            Err(ChoiceError::BadModifier(_))
        ));
        assert!(matches!(
            resolve_event("NOPE.EVENT", Some(&MODEL), 4),
            Err(ChoiceError::UnknownEvent(_))
        ));
    }

    #[test]
    fn counting_modifiers_go_to_the_catalog_encoding() {
        let (e, p) = resolve_event("CYCLE_ACTIVITY.STALLS_L3_MISS:c6:p", Some(&MODEL), 4).unwrap();
        assert_eq!(p, 1);
        assert!(
            matches!(e, SampleEvent::Raw { config, .. } if config == 0x0600_06a3),
            "{e:?}"
        );
    }

    #[test]
    fn no_pmu_falls_back_to_cpu_clock_with_notes() {
        let c = choose(&Request::Node("Memory_Bound".into()), Some(&MODEL), None).unwrap();
        assert_eq!(c.event, SampleEvent::CpuClock);
        assert_eq!(c.wanted, "MEM_LOAD_RETIRED.L3_MISS:pp");
        assert_eq!(c.notes.len(), 2);
        assert!(c.notes[0].contains("no hardware PMU"));
        assert!(c.notes[1].contains("skid"));
        let c = choose(&Request::Bottleneck(None), None, None).unwrap();
        assert_eq!(c.event, SampleEvent::CpuClock);
        // With -e cpu-clock there is nothing to explain.
        let c = choose(&Request::Event("cpu-clock".into()), None, None).unwrap();
        assert!(c.notes.is_empty());
    }

    /// The bottleneck named by the stat pass is sampled with its node's precise event.
    #[test]
    fn bottleneck_node_gets_its_locate_event() {
        // Then the node's event is chosen.
        let c = choose(
            &Request::Bottleneck(Some("Memory_Bound".into())),
            Some(&MODEL),
            Some(&PMU),
        )
        .unwrap();
        assert_eq!(c.precise, 2);
    }

    /// Every locate-with event of every catalog model resolves to an encoding.
    #[test]
    fn every_catalog_locate_event_resolves() {
        let mut failures = Vec::new();
        let mut n = 0;
        for m in tma_catalog::models() {
            for node in m.nodes.iter().filter(|n| !n.locate_with.is_empty()) {
                n += 1;
                if let Err(e) = choose(&Request::Node(node.name.into()), Some(m), Some(&PMU)) {
                    failures.push(format!("{} {}: {e}", m.key, node.name));
                }
            }
        }
        assert!(
            n > 20,
            "only {n} nodes with locate-with events in the catalog"
        );
        assert!(
            failures.is_empty(),
            "{} of {n} failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn core_pmu_from_fake_sysfs() {
        let d = tempfile::tempdir().unwrap();
        assert!(core_pmu(d.path()).is_none());
        let p = d.path().join("bus/event_source/devices/cpu");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("type"), "4\n").unwrap();
        assert_eq!(core_pmu(d.path()).unwrap().pmu_type, 4);
    }
}
