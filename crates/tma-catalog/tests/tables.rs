//! Structural checks over every model, and encodings checked against the vendor data.

use tma_catalog::encode::formula_identifiers;
use tma_catalog::{by_name, models, EventKind, Model};

fn is_name(m: &Model, id: &str) -> bool {
    m.node(id).is_some() || m.metric(id).is_some()
}

#[test]
fn formulas_reference_known_events_or_metrics() {
    for m in models() {
        let mut exprs: Vec<(&str, &str)> = Vec::new();
        for n in m.nodes {
            exprs.push((n.name, n.formula));
            exprs.push((n.name, n.threshold));
        }
        for x in m.metrics {
            exprs.push((x.name, x.formula));
        }
        for (owner, f) in exprs {
            for id in formula_identifiers(f) {
                if is_name(m, id) {
                    continue;
                }
                assert!(
                    m.encode(id).is_ok(),
                    "{}: {owner} uses `{id}`, which is neither a node, a metric nor an encodable event: {:?}",
                    m.key,
                    m.encode(id)
                );
            }
        }
        for n in m.nodes {
            for l in n.locate_with {
                assert!(
                    m.encode(l).is_ok(),
                    "{}: {} locate-with `{l}`",
                    m.key,
                    n.name
                );
            }
        }
    }
}

#[test]
fn thresholds_only_reference_nodes_and_metrics() {
    for m in models() {
        for n in m.nodes {
            for id in formula_identifiers(n.threshold) {
                assert!(
                    is_name(m, id),
                    "{}: threshold of {} uses `{id}`",
                    m.key,
                    n.name
                );
            }
        }
    }
}

#[test]
fn parents_exist_and_come_first() {
    for m in models() {
        assert!(!m.nodes.is_empty(), "{} has no nodes", m.key);
        for (i, n) in m.nodes.iter().enumerate() {
            match n.parent {
                None => assert_eq!(n.level, 1, "{}: {} has no parent", m.key, n.name),
                Some(p) => {
                    let pi =
                        m.nodes.iter().position(|x| x.name == p).unwrap_or_else(|| {
                            panic!("{}: parent {p} of {} missing", m.key, n.name)
                        });
                    assert!(pi < i, "{}: parent {p} after {}", m.key, n.name);
                    assert_eq!(m.nodes[pi].level + 1, n.level, "{}: {}", m.key, n.name);
                }
            }
            assert!(!n.description.is_empty(), "{}: {}", m.key, n.name);
        }
        let mut names: Vec<&str> = m.nodes.iter().map(|n| n.name).collect();
        names.extend(m.metrics.iter().map(|x| x.name));
        let before = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            before,
            names.len(),
            "{}: duplicate node/metric names",
            m.key
        );
    }
}

#[test]
fn perf_spec_round_trip_for_every_event_of_every_model() {
    let mut checked = 0;
    for m in models() {
        for id in m.event_ids() {
            let spec = m
                .perf_event_spec(&id)
                .unwrap_or_else(|e| panic!("{}: {id}: {e}", m.key));
            assert!(!spec.contains(':'), "{}: {spec} has a ':'", m.key);
            let back = m
                .resolve_perf_event_all(&spec)
                .unwrap_or_else(|e| panic!("{}: {id} -> {spec}: {e}", m.key));
            assert!(back.contains(&id), "{}: {id} -> {spec} -> {back:?}", m.key);
            // Named forms come back exactly; aliases give the shortest id of that encoding.
            if spec.contains("name=") {
                assert_eq!(
                    m.resolve_perf_event(&spec).unwrap(),
                    id,
                    "{}: {spec}",
                    m.key
                );
            }
            // Without the name= label the encoding alone must still find the id.
            if let Some(i) = spec.find(",name=") {
                let j = spec[i..].find('/').map(|j| i + j).unwrap_or(spec.len());
                let unnamed = format!("{}{}", &spec[..i], &spec[j..]);
                let back = m.resolve_perf_event_all(&unnamed).unwrap();
                assert!(back.contains(&id), "{}: {unnamed} -> {back:?}", m.key);
            }
            // And the id itself, in lower case, resolves to itself.
            assert_eq!(
                m.resolve_perf_event(&id.to_lowercase()).unwrap(),
                id,
                "{}: lower-case {id}",
                m.key
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} ids checked");
}

/// Raw configs from pmu-data README section 5.
#[test]
fn amd_encodings_match_readme_section_5() {
    let zen4 = by_name("zen4").unwrap();
    let zen5 = by_name("zen5").unwrap();
    let common = [
        ("ls_not_halted_cyc", 0x76u64),
        ("de_no_dispatch_per_slot.no_ops_from_frontend", 0x1000001A0),
        ("de_no_dispatch_per_slot.backend_stalls", 0x100001EA0),
        ("de_no_dispatch_per_slot.smt_contention", 0x1000060A0),
        ("de_src_op_disp.all", 0x7AA),
        ("ex_ret_ops", 0xC1),
        ("ex_ret_brn_misp", 0xC3),
        ("ex_no_retire.load_not_complete", 0xA2D6),
        ("ex_no_retire.not_complete", 0x2D6),
        ("ex_ret_ucode_ops", 0x1000000C2),
    ];
    for (m, extra) in [
        (
            zen4,
            [
                ("resyncs_or_nc_redirects", 0x96u64),
                (
                    "de_no_dispatch_per_slot.no_ops_from_frontend:c6",
                    0x1060001A0,
                ),
            ],
        ),
        (
            zen5,
            [
                ("bp_redirects.resync", 0x19F),
                (
                    "de_no_dispatch_per_slot.no_ops_from_frontend:c8",
                    0x1080001A0,
                ),
            ],
        ),
    ] {
        for (id, config) in common.iter().chain(extra.iter()) {
            let e = m.encode(id).unwrap();
            assert_eq!(e.config, *config, "{}: {id}: {:#x}", m.key, e.config);
            assert_eq!((e.pmu, e.config1, e.fixed), ("cpu", 0, None));
            assert_eq!(e.counter_mask, 0b11_1111);
        }
        assert_eq!((m.gp_counters, m.fixed_counters), (6, 0));
        // The table holds every core event of the kernel's event files, not only the
        // formula events (one of which is `:c6`/`:c8`, a modifier of a table event).
        assert!(m.events.len() > 300, "{}: {} events", m.key, m.events.len());
        for id in m.event_ids() {
            let base = id.split(':').next().unwrap();
            assert!(m.event(base).is_some(), "{}: {id}", m.key);
        }
        // Events no formula uses resolve by name and by encoding.
        let e = m.encode("LS_DISPATCH.LD_DISPATCH").unwrap();
        assert_eq!(e.config, 0x0129, "{}", m.key);
        assert_eq!(
            m.resolve_perf_event("cpu/event=0x29,umask=0x1/").unwrap(),
            "ls_dispatch.ld_dispatch"
        );
    }
    assert_eq!(zen4.slots_per_cycle, 6);
    assert_eq!(zen5.slots_per_cycle, 8);
    // perf forms of the raw configs.
    assert_eq!(
        zen4.resolve_perf_event("r1060001A0").unwrap(),
        "de_no_dispatch_per_slot.no_ops_from_frontend:c6"
    );
    assert_eq!(
        zen4.resolve_perf_event("cpu@de_no_dispatch_per_slot.no_ops_from_frontend\\,cmask\\=0x6@")
            .unwrap(),
        "de_no_dispatch_per_slot.no_ops_from_frontend:c6"
    );
    assert_eq!(
        zen4.resolve_perf_event("cpu/event=0x1a0,umask=0x1,cmask=6/")
            .unwrap(),
        "de_no_dispatch_per_slot.no_ops_from_frontend:c6"
    );
    assert_eq!(
        zen4.resolve_perf_event("cycles").unwrap(),
        "ls_not_halted_cyc"
    );
    assert_eq!(zen4.resolve_perf_event("EX_RET_OPS").unwrap(), "ex_ret_ops");
    let e = zen4
        .resolve_perf_event("cpu/event=0x12,umask=0x1/")
        .unwrap_err();
    assert!(e.to_string().contains("tma events --cpu zen4"), "{e}");
    assert!(zen4.resolve_perf_event("slots").is_err());
    assert!(zen4.encode("ex_ret_ops:zz").is_err());
    assert!(zen4.encode("no_such_event").is_err());
}

#[test]
fn amd_zen4_level1_covers_all_slots_by_construction() {
    let m = by_name("zen4").unwrap();
    let l1: Vec<&str> = m.children(None).map(|n| n.name).collect();
    assert_eq!(
        l1,
        [
            "frontend_bound",
            "bad_speculation",
            "backend_bound",
            "smt_contention",
            "retiring"
        ]
    );
    assert_eq!(m.nodes.len(), 13);
    assert!(m
        .nodes
        .iter()
        .all(|n| !n.formula.is_empty() && !n.threshold.is_empty()));
}

#[test]
fn event_kinds_are_consistent() {
    for m in models() {
        for e in m.events {
            match e.kind {
                EventKind::Slots => assert_eq!((e.code, e.umask, e.fixed), (0, 4, Some(3))),
                EventKind::PerfMetrics(b) => assert_eq!((e.code, e.umask), (0, 0x80 + b)),
                EventKind::Tsc => assert_eq!(e.name, "TSC"),
                EventKind::Core => {}
            }
        }
    }
}

/// `event`, `node` and `metric` (through a name index on long tables) find the row a search
/// of the table in order finds, whatever the case of the name asked for.
#[test]
fn lookups_by_name_find_the_first_row_so_named() {
    fn first<T>(rows: &'static [T], name_of: fn(&T) -> &str, name: &str) -> Option<*const T> {
        rows.iter()
            .find(|r| name_of(r).eq_ignore_ascii_case(name))
            .map(|r| r as *const T)
    }
    let cased = |s: &str| {
        [
            s.to_string(),
            s.to_ascii_lowercase(),
            s.to_ascii_uppercase(),
            format!("{s}x"),
        ]
    };
    for m in models() {
        for e in m.events {
            for n in cased(e.name) {
                let got = m.event(&n).map(|r| r as *const _);
                assert_eq!(got, first(m.events, |r| r.name, &n), "{}: event {n}", m.key);
            }
        }
        for x in m.nodes {
            for n in cased(x.name) {
                let got = m.node(&n).map(|r| r as *const _);
                assert_eq!(got, first(m.nodes, |r| r.name, &n), "{}: node {n}", m.key);
            }
        }
        for x in m.metrics {
            for n in cased(x.name) {
                let got = m.metric(&n).map(|r| r as *const _);
                assert_eq!(
                    got,
                    first(m.metrics, |r| r.name, &n),
                    "{}: metric {n}",
                    m.key
                );
            }
        }
        // Names longer than the index's stack buffer, and not ASCII.
        let long = "A".repeat(200);
        assert!(m.event(&long).is_none() && m.node("Façade").is_none());
    }
}
