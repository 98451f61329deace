//! The generated Intel tables against perfmon: every encoding is perfmon's, except the
//! deliberate conversions named in `tma_catalog::conversions`.
//!
//! The first tests need only the tables: perfmon's fixed-counter pseudo encoding (event 0x00,
//! umask = index + 1, pmu-data README 3.1) is a rule of the data, so every fixed-counter
//! event must hold it or a named conversion. The last test reads the perfmon event files
//! from `shared/pmu-data` beside the workspace (as `xtask check-tables` does) and compares
//! every field of every generated event with its row; it says `skipped` when they are absent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;
use tma_catalog::{
    conversion_for, models, EventDef, EventKind, Model, Vendor, ENCODING_CONVERSIONS,
};

/// The models whose perfmon file has `INST_RETIRED.PREC_DIST` on fixed counter 0
/// (Ice Lake and later P-cores). On Skylake-era models it is 0xC0/0x01 on general counter 1.
const PDIST_MODELS: [&str; 8] = ["icl", "icx", "tgl", "spr", "emr", "gnr", "adl", "mtl"];

fn intel() -> impl Iterator<Item = &'static Model> {
    models()
        .iter()
        .copied()
        .filter(|m| m.vendor == Vendor::Intel)
}

#[test]
fn conversion_table_is_well_formed() {
    let mut seen = BTreeSet::new();
    for c in ENCODING_CONVERSIONS {
        assert!(seen.insert(c.event), "{} listed twice", c.event);
        // Only fixed-counter pseudo encodings are converted, each to a real event.
        assert_eq!(c.perfmon, (0, c.fixed + 1), "{}", c.event);
        assert_ne!(c.ours.0, 0, "{}", c.event);
        assert!(!c.reason.trim().is_empty(), "{}", c.event);
        assert_eq!(conversion_for(c.event), Some(c));
    }
    // PDIST needs perfmon's encoding: it must never be converted.
    assert_eq!(conversion_for("INST_RETIRED.PREC_DIST"), None);
}

/// Every fixed-counter event holds perfmon's pseudo encoding or its named conversion.
#[test]
fn fixed_counter_events_keep_perfmons_encoding_unless_named() {
    let mut used = BTreeSet::new();
    for m in intel() {
        for e in m.events.iter().filter(|e| e.fixed.is_some()) {
            let i = e.fixed.unwrap();
            let have = (e.code, e.umask);
            match conversion_for(e.name) {
                Some(c) => {
                    assert_eq!(i, c.fixed, "{} {}", m.key, e.name);
                    assert_eq!(
                        have, c.ours,
                        "{} {}: not the named conversion",
                        m.key, e.name
                    );
                    used.insert(c.event);
                }
                None => assert_eq!(
                    have,
                    (0, i + 1),
                    "{} {}: differs from perfmon's fixed-counter encoding and is not \
                     named in tma_catalog::conversions",
                    m.key,
                    e.name
                ),
            }
        }
    }
    let all: BTreeSet<&str> = ENCODING_CONVERSIONS.iter().map(|c| c.event).collect();
    assert_eq!(used, all, "a named conversion that no table uses");
}

#[test]
fn prec_dist_keeps_event_0x00_umask_0x01() {
    let mut pdist = Vec::new();
    for m in intel() {
        let Some(e) = m.event("INST_RETIRED.PREC_DIST") else {
            continue;
        };
        if e.fixed.is_none() {
            // Skylake era: perfmon's general-counter encoding, not converted either.
            assert_eq!(
                (e.code, e.umask, e.counter_mask),
                (0xC0, 0x01, 0x2),
                "{}",
                m.key
            );
            continue;
        }
        pdist.push(m.key);
        assert_eq!((e.code, e.umask), (0x00, 0x01), "{}", m.key);
        assert_eq!((e.fixed, e.counter_mask), (Some(0), 0), "{}", m.key);
        assert!(e.precise && !e.any_thread && e.cmask == 0, "{}", m.key);
        let enc = m.encode("INST_RETIRED.PREC_DIST").unwrap();
        assert_eq!((enc.pmu, enc.config, enc.fixed), (m.pmu, 0x0100, Some(0)));
        // What `tma events --perf-cmd` writes: perf's own spelling of the event.
        assert_eq!(
            m.perf_event_spec("INST_RETIRED.PREC_DIST").unwrap(),
            format!("{}/event=0x0,umask=0x1,name=INST_RETIRED.PREC_DIST/", m.pmu)
        );
        // The Retiring nodes locate with it: the sampler gets the same encoding.
        let locating: Vec<_> = m
            .nodes
            .iter()
            .filter(|n| n.locate_with.contains(&"INST_RETIRED.PREC_DIST"))
            .collect();
        assert!(!locating.is_empty(), "{}", m.key);
        // INST_RETIRED.ANY stays the named conversion, on the same fixed counter.
        let any = m.encode("INST_RETIRED.ANY").unwrap();
        assert_eq!((any.config, any.fixed), (0xC0, Some(0)), "{}", m.key);
    }
    pdist.sort_unstable();
    let mut want = PDIST_MODELS.to_vec();
    want.sort_unstable();
    assert_eq!(pdist, want);
}

/// The perfmon event files each Intel table is made from, first file first (the first
/// row of a name wins, as in the converter).
fn perfmon_files(key: &str) -> &'static [&'static str] {
    match key {
        "skx" => &[
            "SKX/events/skylakex_core.json",
            "SKX/events/skylakex_fp_arith_inst.json",
        ],
        "clx" => &[
            "CLX/events/cascadelakex_core.json",
            "CLX/events/cascadelakex_fp_arith_inst.json",
        ],
        "icx" => &["ICX/events/icelakex_core.json"],
        "spr" => &["SPR/events/sapphirerapids_core.json"],
        "emr" => &["EMR/events/emeraldrapids_core.json"],
        "gnr" => &["GNR/events/graniterapids_core.json"],
        "skl" => &[
            "SKL/events/skylake_core.json",
            "SKL/events/skylake_fp_arith_inst.json",
        ],
        "icl" => &["ICL/events/icelake_core.json"],
        "tgl" => &["TGL/events/tigerlake_core.json"],
        "adl" => &["ADL/events/alderlake_goldencove_core.json"],
        "mtl" => &["MTL/events/meteorlake_redwoodcove_core.json"],
        "adl-e" => &["ADL/events/alderlake_gracemont_core.json"],
        "mtl-e" => &["MTL/events/meteorlake_crestmont_core.json"],
        other => panic!("no perfmon event files listed for the Intel table {other}"),
    }
}

fn perfmon_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pmu-data/intel")
}

fn field<'a>(row: &'a Value, k: &str) -> &'a str {
    row[k].as_str().unwrap_or("")
}

fn num(row: &Value, k: &str) -> u64 {
    let s = field(row, k).split(',').next().unwrap_or("").trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap_or(0),
    }
}

/// The differences between a generated event and its perfmon row, as `field: ours vs perfmon`.
fn differences(e: &EventDef, row: &Value) -> Vec<String> {
    let counter = field(row, "Counter");
    let (fixed, counter_mask) = match counter.strip_prefix("Fixed counter") {
        Some(i) => (Some(i.trim().parse::<u8>().unwrap()), 0u32),
        None => {
            let m = counter.split(',').filter(|c| !c.trim().is_empty());
            (
                None,
                m.map(|c| 1u32 << c.trim().parse::<u32>().unwrap()).sum(),
            )
        }
    };
    let precise = match row.get("Precise") {
        Some(_) => field(row, "Precise") == "1",
        None => matches!(field(row, "PEBS"), "1" | "2"),
    };
    let msr_index = num(row, "MSRIndex");
    let msr_value = if msr_index != 0 {
        num(row, "MSRValue")
    } else {
        0
    };
    let checks: [(&str, u64, u64); 13] = [
        ("event code", e.code.into(), num(row, "EventCode")),
        ("umask", e.umask.into(), num(row, "UMask")),
        ("cmask", e.cmask.into(), num(row, "CounterMask")),
        ("invert", e.inv.into(), (field(row, "Invert") == "1").into()),
        (
            "edge",
            e.edge.into(),
            (field(row, "EdgeDetect") == "1").into(),
        ),
        (
            "any thread",
            e.any_thread.into(),
            (field(row, "AnyThread") == "1").into(),
        ),
        ("msr index", e.msr_index.into(), msr_index),
        ("msr value", e.msr_value, msr_value),
        ("counters", e.counter_mask.into(), counter_mask.into()),
        (
            "fixed counter",
            e.fixed.map_or(99, u64::from),
            fixed.map_or(99, u64::from),
        ),
        ("precise", e.precise.into(), precise.into()),
        (
            "taken alone",
            e.taken_alone.into(),
            (field(row, "TakenAlone") == "1").into(),
        ),
        ("sample after", e.sample_after, num(row, "SampleAfterValue")),
    ];
    checks
        .iter()
        .filter(|(_, ours, theirs)| ours != theirs)
        .map(|(what, ours, theirs)| format!("{what}: {ours:#x} vs perfmon {theirs:#x}"))
        .collect()
}

#[test]
fn every_generated_encoding_matches_its_perfmon_row() {
    let dir = perfmon_dir();
    if !dir.join("mapfile.csv").is_file() {
        eprintln!("skipped: no perfmon data at {}", dir.display());
        return;
    }
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    let mut compared = 0;
    for m in intel() {
        let mut rows: BTreeMap<String, Value> = BTreeMap::new();
        for rel in perfmon_files(m.key) {
            let bytes = std::fs::read(dir.join(rel)).unwrap();
            let json: Value = serde_json::from_slice(&bytes).unwrap();
            for r in json["Events"].as_array().unwrap() {
                let name = field(r, "EventName");
                if !name.is_empty() && !rows.contains_key(name) {
                    rows.insert(name.to_string(), r.clone());
                }
            }
        }
        for e in m.events {
            if matches!(e.kind, EventKind::PerfMetrics(_) | EventKind::Tsc) {
                // Pseudo events of the formulas: no perfmon row (pmu-data README 3.1, 4).
                continue;
            }
            let Some(row) = rows.get(e.name) else {
                problems.push(format!("{} {}: no perfmon row", m.key, e.name));
                continue;
            };
            compared += 1;
            let mut diff = differences(e, row);
            let theirs = (num(row, "EventCode"), num(row, "UMask"));
            let named = conversion_for(e.name).filter(|c| {
                (u64::from(c.perfmon.0), u64::from(c.perfmon.1)) == theirs
                    && (c.ours.0, c.ours.1) == (e.code, e.umask)
                    && e.fixed == Some(c.fixed)
            });
            if let Some(c) = named {
                // The named conversion accounts for the code and umask, nothing else.
                diff.retain(|d| !d.starts_with("event code") && !d.starts_with("umask"));
                used.insert(c.event);
            }
            if !diff.is_empty() {
                problems.push(format!("{} {}: {}", m.key, e.name, diff.join("; ")));
            }
        }
        // And the other way: every named perfmon row is in the table.
        for name in rows.keys().filter(|n| is_event_id(n)) {
            if m.event(name).is_none() {
                problems.push(format!(
                    "{} {name}: perfmon row missing from the table",
                    m.key
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {compared} generated events differ from perfmon beyond the conversions named \
         in tma_catalog::conversions:\n{}",
        problems.len(),
        problems.join("\n")
    );
    let all: BTreeSet<&str> = ENCODING_CONVERSIONS.iter().map(|c| c.event).collect();
    assert_eq!(used, all, "a named conversion that matches no perfmon row");
}

/// An event name the formula language can name (`[A-Za-z_][A-Za-z0-9_.]*`); CLX's
/// `OFFCORE_RESPONSE:request=…` spellings are not (the converter keeps their `OCR.*` twins).
fn is_event_id(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}
