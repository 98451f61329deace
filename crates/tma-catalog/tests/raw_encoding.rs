//! A vendor name and its raw `cpu/event=..,umask=..,.../` encoding resolve to the same event
//! id, including events and modifier combinations the formulas do not use. x86 tables only:
//! the Arm forms are in `arm.rs`.

use tma_catalog::{by_name, models, EventKind, Model, Vendor};

/// The x86 tables (these raw forms are x86 event-select layouts).
fn x86_models() -> impl Iterator<Item = &'static &'static Model> {
    models().iter().filter(|m| m.vendor != Vendor::Arm)
}

fn all(m: &Model, spec: &str) -> Vec<String> {
    m.resolve_perf_event_all(spec)
        .unwrap_or_else(|e| panic!("{}: {spec}: {e}", m.key))
}

/// The raw terms of an id's encoding, in the given order, values in hex or decimal.
fn raw_terms(m: &Model, id: &str, reversed: bool, decimal: bool) -> String {
    let e = m.encode(id).unwrap();
    let c = e.config;
    let num = |v: u64| {
        if decimal {
            v.to_string()
        } else {
            format!("{v:#x}")
        }
    };
    let mut terms = vec![
        format!("event={}", num((c & 0xFF) | ((c >> 32) & 0xF) << 8)),
        format!("umask={}", num((c >> 8) & 0xFF)),
    ];
    if (c >> 24) & 0xFF != 0 {
        terms.push(format!("cmask={}", num((c >> 24) & 0xFF)));
    }
    for (bit, name) in [(18, "edge"), (21, "any"), (23, "inv")] {
        if c & (1 << bit) != 0 {
            terms.push(name.to_string());
        }
    }
    if e.config1 != 0 {
        terms.push(format!("config1={}", num(e.config1)));
    }
    if reversed {
        terms.reverse();
    }
    format!("{}/{}/", e.pmu, terms.join(","))
}

#[test]
fn offcore_outstanding_with_a_cmask_by_name_and_by_encoding() {
    // Granite Rapids' perfmon file calls the event DATA_RD only.
    for (key, name) in [
        ("spr", "OFFCORE_REQUESTS_OUTSTANDING.ALL_DATA_RD:c4"),
        ("emr", "OFFCORE_REQUESTS_OUTSTANDING.ALL_DATA_RD:c4"),
        ("gnr", "OFFCORE_REQUESTS_OUTSTANDING.DATA_RD:c4"),
    ] {
        let m = by_name(key).unwrap();
        let want = all(m, name);
        assert_eq!(want[0], name, "{key}");
        for spec in [
            "cpu/event=0x20,umask=0x8,cmask=4/",
            "cpu/cmask=4,umask=8,event=32/",
            "cpu/umask=0x08,event=0x20,cmask=0x4/",
            "r4000820",
        ] {
            assert_eq!(all(m, spec), want, "{key}: {spec}");
        }
    }
}

#[test]
fn inverted_and_edge_terms_become_modifiers() {
    let icx = by_name("icx").unwrap();
    // A base event with cmask, inv and edge in any order.
    let by_name_ = all(icx, "UOPS_ISSUED.ANY:c2:i1");
    let e = icx.encode("UOPS_ISSUED.ANY:c2:i1").unwrap();
    assert_eq!(e.config & (1 << 23), 1 << 23);
    assert_eq!(all(icx, "cpu/inv,cmask=2,umask=0x1,event=0xe/"), by_name_);
    assert_eq!(all(icx, "cpu/event=14,umask=1,cmask=2,inv=1/"), by_name_);
    // The encoding of UOPS_ISSUED.ANY:c1:i1 is documented as UOPS_ISSUED.STALL_CYCLES: the
    // bare encoding resolves to that event, and with `name=` to the name given.
    assert_eq!(
        all(icx, "cpu/inv,cmask=1,umask=0x1,event=0xe/"),
        ["UOPS_ISSUED.STALL_CYCLES"]
    );
    assert_eq!(
        all(
            icx,
            "cpu/inv,cmask=1,umask=0x1,event=0xe,name=UOPS_ISSUED.ANY__c1__i1/"
        ),
        all(icx, "UOPS_ISSUED.ANY:c1:i1")
    );
    // Unknown encodings stay unknown.
    assert!(icx
        .resolve_perf_event_all("cpu/event=0x99,umask=0x77,cmask=3/")
        .is_err());
}

#[test]
fn every_table_event_resolves_by_name_and_by_encoding_alike() {
    for m in x86_models() {
        for d in m.events.iter().filter(|d| d.kind == EventKind::Core) {
            let base = d.cmask == 0 && !d.inv && !d.edge;
            let mut ids = vec![d.name.to_string()];
            if base && d.msr_index == 0 {
                ids.push(format!("{}:c3", d.name));
                ids.push(format!("{}:c1:e1", d.name));
            }
            for id in ids {
                for (reversed, decimal) in [(false, false), (true, true)] {
                    let spec = raw_terms(m, &id, reversed, decimal);
                    let Ok(raw) = m.resolve_perf_event_all(&spec) else {
                        panic!("{}: {id}: its encoding {spec} is refused", m.key)
                    };
                    let e = m.encode(&id).unwrap();
                    let r = m.encode(&raw[0]).unwrap();
                    assert_eq!(
                        (r.config, r.config1),
                        (e.config, e.config1),
                        "{}: {spec} -> {raw:?}",
                        m.key
                    );
                    // The id the encoding gives resolves by name to the same list.
                    assert_eq!(all(m, &raw[0]), raw, "{}: {id} / {spec}", m.key);
                }
            }
        }
    }
}

/// Events the formulas do not use are known too (every core event of the vendor file): for
/// every model, a sample of them resolves by name (any case, with modifiers) and by raw
/// encoding to the same id, and `name=` in a raw spec names the result.
#[test]
fn events_no_formula_uses_resolve_by_name_and_by_encoding() {
    for m in x86_models() {
        let used: Vec<String> = m
            .event_ids()
            .iter()
            .map(|id| id.split(':').next().unwrap().to_ascii_uppercase())
            .collect();
        let unused: Vec<_> = m
            .events
            .iter()
            .filter(|d| d.kind == EventKind::Core && !used.contains(&d.name.to_ascii_uppercase()))
            .collect();
        if m.vendor == Vendor::Intel {
            assert!(
                unused.len() > 50,
                "{}: {} unused events",
                m.key,
                unused.len()
            );
        }
        for d in unused.iter().step_by(7) {
            let lower = d.name.to_ascii_lowercase();
            assert_eq!(all(m, &lower)[0], d.name, "{}", m.key);
            let base = d.cmask == 0 && !d.inv && !d.edge;
            let mut ids = vec![d.name.to_string()];
            if base && d.fixed.is_none() {
                ids.push(format!("{}:c2", d.name));
            }
            for id in ids {
                let by_name = all(m, &id);
                assert_eq!(by_name[0], id, "{}", m.key);
                let spec = raw_terms(m, &id, false, false);
                let named = format!(
                    "{},name={}/",
                    spec.trim_end_matches('/'),
                    tma_catalog::encode::mangle_name(&id)
                );
                assert_eq!(all(m, &named), by_name, "{}: {named}", m.key);
                let raw = all(m, &spec);
                let (a, b) = (m.encode(&raw[0]).unwrap(), m.encode(&id).unwrap());
                assert_eq!(
                    (a.config, a.config1),
                    (b.config, b.config1),
                    "{}: {spec}",
                    m.key
                );
                // The bare encoding names a formula id with that encoding, else the first
                // documented event with it: this event unless an earlier row shares it.
                let same = |x: &str| {
                    m.encode(x)
                        .is_ok_and(|e| (e.config, e.config1) == (b.config, b.config1))
                };
                let formula_twin = m.event_ids().iter().any(|i| same(i));
                let first = m.events.iter().find(|x| same(x.name));
                if id == d.name && !formula_twin && first.is_some_and(|f| f.name == d.name) {
                    assert_eq!(raw[0], id, "{}: {spec}", m.key);
                }
            }
        }
    }
}

#[test]
fn spr_pmm_events_of_toplev_resolve() {
    let spr = by_name("spr").unwrap();
    for (name, spec) in [
        ("MEM_LOAD_RETIRED.LOCAL_PMM", "cpu/event=0xd1,umask=0x80/"),
        (
            "MEM_LOAD_L3_MISS_RETIRED.REMOTE_PMM",
            "cpu/event=0xd3,umask=0x10/",
        ),
    ] {
        assert_eq!(all(spr, name), [name]);
        assert_eq!(all(spr, spec), [name]);
        assert_eq!(spr.encode(&format!("{name}:c1")).unwrap().config >> 24, 1);
    }
}
