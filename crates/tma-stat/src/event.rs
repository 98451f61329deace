//! The one parser of an event as perf users write it after `-e`, for `tma stat` (counted)
//! and `tma locate` (sampled): a software event (`page-faults`, `cs`), an event of the CPU's
//! tables, a generic hardware event (`cycles`), a tracepoint (`sched:sched_switch`),
//! `pmu/terms/` or `rHEX`.

use tma_catalog::Model;
use tma_host::sysfs::Pmus;
use tma_host::Host;
use tma_perf::event::{EventSpec, SoftwareEvent, SpecKind};

use crate::StatError;

/// perf's generic hardware events, in `PERF_COUNT_HW_*` order (the id is the position).
const GENERIC: [&str; 6] = [
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branches",
    "branch-misses",
];

/// One event spec (no commas). `model` resolves the CPU's own event names, `pmus` the
/// `pmu/terms/` form, `host` the tracefs ids of tracepoints (under its `/sys`).
pub fn parse_event(
    e: &str,
    model: Option<&Model>,
    pmus: &Pmus,
    host: &Host,
) -> Result<EventSpec, StatError> {
    let unknown = |why: String| StatError::UnknownEvent(format!("unknown event {e:?}: {why}"));
    if let Some(sw) = SoftwareEvent::parse(e) {
        return Ok(EventSpec::software(sw));
    }
    if let Some(s) = model
        .and_then(|m| m.encode(e).ok())
        .and_then(|enc| EventSpec::from_encoding(&enc))
    {
        return Ok(s);
    }
    if let Some((pmu, terms)) = e.strip_suffix('/').and_then(|s| s.split_once('/')) {
        let p = pmus
            .get(pmu)
            .ok_or_else(|| unknown(format!("this machine has no PMU named {pmu:?}")))?;
        let cfg = p
            .encode_terms(terms)
            .or_else(|_| p.encode_alias(terms))
            .map_err(|why| unknown(why.to_string()))?;
        let mut s = EventSpec::raw(e, pmu, cfg.config);
        s.config1 = cfg.config1;
        return Ok(s);
    }
    if let Some(hex) = e
        .strip_prefix('r')
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
    {
        let cfg = u64::from_str_radix(hex, 16)
            .map_err(|_| StatError::UnknownEvent(format!("bad raw event {e:?}")))?;
        return Ok(EventSpec::raw(e, "cpu", cfg));
    }
    if let Some(id) = GENERIC.iter().position(|h| h.eq_ignore_ascii_case(e)) {
        return Ok(EventSpec {
            kind: SpecKind::Hardware(id as u64),
            ..EventSpec::raw(e, "", id as u64)
        });
    }
    if let Some((sys, name)) = tracepoint_name(e) {
        let id = tracepoint_id(host, sys, name).ok_or_else(|| {
            unknown(format!(
                "no tracepoint {sys}:{name} under {}/kernel/tracing/events (is tracefs mounted \
                 and readable? `perf list tracepoint` lists them)",
                host.sys.display()
            ))
        })?;
        return Ok(EventSpec {
            pmu: "tracepoint".into(),
            kind: SpecKind::Tracepoint(id),
            ..EventSpec::raw(e, "", id)
        });
    }
    Err(unknown(
        "give a software event (task-clock, page-faults, context-switches, ...), cycles, \
         instructions, an event of the --cpu model (`tma list --events --cpu NAME`), a \
         tracepoint SYS:NAME, PMU/terms/ or rHEX"
            .into(),
    ))
}

/// `sched:sched_switch` -> (`sched`, `sched_switch`): two names of word characters.
fn tracepoint_name(e: &str) -> Option<(&str, &str)> {
    let (sys, name) = e.split_once(':')?;
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    (word(sys) && word(name) && sys.chars().any(|c| c.is_ascii_lowercase())).then_some((sys, name))
}

/// The tracepoint's id from tracefs (`kernel/tracing` or `kernel/debug/tracing` under /sys).
pub fn tracepoint_id(host: &Host, sys: &str, name: &str) -> Option<u64> {
    ["kernel/tracing", "kernel/debug/tracing"]
        .iter()
        .find_map(|t| {
            std::fs::read_to_string(
                host.sys
                    .join(t)
                    .join("events")
                    .join(sys)
                    .join(name)
                    .join("id"),
            )
            .ok()
        })
        .and_then(|s| s.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(e: &str, host: &Host) -> Result<EventSpec, StatError> {
        parse_event(e, tma_catalog::by_name("zen4").ok(), &Pmus::default(), host)
    }

    #[test]
    fn every_kind_of_event_perf_users_type() {
        let host = Host::new("/nonexistent/sys", "/nonexistent/proc");
        assert_eq!(
            parse("page-faults", &host).unwrap().kind,
            SpecKind::Software(SoftwareEvent::PageFaults)
        );
        assert_eq!(
            parse("cs", &host).unwrap().kind,
            SpecKind::Software(SoftwareEvent::ContextSwitches)
        );
        assert_eq!(parse("cycles", &host).unwrap().kind, SpecKind::Hardware(0));
        assert_eq!(
            parse("branch-misses", &host).unwrap().kind,
            SpecKind::Hardware(5)
        );
        assert_eq!(parse("r01c2", &host).unwrap().config, 0x1c2);
        assert_eq!(
            parse("ex_ret_ucode_ops", &host).unwrap().kind,
            SpecKind::Core
        );
        let e = parse("sched:sched_switch", &host).unwrap_err().to_string();
        assert!(e.contains("no tracepoint sched:sched_switch"), "{e}");
        let e = parse("bogus", &host).unwrap_err().to_string();
        assert!(
            e.contains("unknown event \"bogus\"") && e.contains("tracepoint"),
            "{e}"
        );
    }

    #[test]
    fn tracepoints_by_their_tracefs_id() {
        let d = tempfile::tempdir().unwrap();
        let dir = d
            .path()
            .join("sys/kernel/tracing/events/sched/sched_switch");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("id"), "316\n").unwrap();
        let host = Host::under(d.path());
        let s = parse("sched:sched_switch", &host).unwrap();
        assert_eq!(s.kind, SpecKind::Tracepoint(316));
        assert_eq!(s.name, "sched:sched_switch");
        assert!(!s.is_hardware());
        // A catalog event with a modifier is not a tracepoint.
        assert_eq!(tracepoint_name("INST_RETIRED.ANY:u"), None);
    }
}
