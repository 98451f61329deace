//! Arm Neoverse tables: identification from `/proc/cpuinfo`, `--cpu` names, the tree built
//! from Arm's decision tree, and every spelling of an event that perf prints on Arm.

use tma_catalog::{by_name, identify, models, parse_cpuinfo, EventKind, Unit, Vendor};

const KEYS: [&str; 6] = [
    "neoverse-n1",
    "neoverse-v1",
    "neoverse-n2",
    "neoverse-v2",
    "neoverse-n3",
    "neoverse-v3",
];

/// A `/proc/cpuinfo` processor block of an arm64 kernel (two processors, the way the kernel
/// prints them; the `CPU architecture` line has no tab before its colon).
fn cpuinfo(implementer: &str, part: &str) -> String {
    let one = |n: u32| {
        format!(
            "processor\t: {n}\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: {implementer}\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: {part}\nCPU revision\t: 1\n\n"
        )
    };
    format!("{}{}", one(0), one(1))
}

#[test]
fn cpuinfo_picks_each_core() {
    for (part, key) in [
        ("0xd0c", "neoverse-n1"),
        ("0xd40", "neoverse-v1"),
        ("0xd4f", "neoverse-v2"),
        ("0xd49", "neoverse-n2"),
        ("0xd8e", "neoverse-n3"),
        ("0xd84", "neoverse-v3"),
    ] {
        let (v, f, m, s) = parse_cpuinfo(cpuinfo("0x41", part).as_bytes()).unwrap();
        assert_eq!((v.as_str(), f, s), ("ARM", 8, 0x31), "{part}");
        let found = identify(&v, f, m, s).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, key, "{part}");
        assert_eq!(found[0].vendor, Vendor::Arm);
    }
    // An Arm core without a table, and another implementer (Ampere's own cores).
    let (v, f, m, s) = parse_cpuinfo(cpuinfo("0x41", "0xd0b").as_bytes()).unwrap();
    let e = identify(&v, f, m, s).unwrap_err().to_string();
    assert!(
        e.contains("0xd0b") && e.contains("0xd4f") && e.contains("--cpu"),
        "{e}"
    );
    let (v, f, m, s) = parse_cpuinfo(cpuinfo("0xc0", "0xac3").as_bytes()).unwrap();
    let e = identify(&v, f, m, s).unwrap_err().to_string();
    assert!(e.contains("implementer 0xc0") && e.contains("0x41"), "{e}");
    // A block without a part number is refused with the field named.
    let e = parse_cpuinfo(b"processor\t: 0\nCPU implementer\t: 0x41\n\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("CPU part"), "{e}");
    let e = parse_cpuinfo(b"CPU implementer\t: 0x4x1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("0x4x1"), "{e}");
}

#[test]
fn names_and_aliases() {
    for k in KEYS {
        assert_eq!(by_name(k).unwrap().key, k);
        assert_eq!(by_name(&k.to_uppercase()).unwrap().key, k);
        assert_eq!(by_name(&k.replace('-', "_")).unwrap().key, k);
        assert_eq!(by_name(&k["neoverse-".len()..]).unwrap().key, k);
    }
    for (alias, key) in [
        ("graviton2", "neoverse-n1"),
        ("Ampere Altra", "neoverse-n1"),
        ("graviton3", "neoverse-v1"),
        ("graviton4", "neoverse-v2"),
        ("grace", "neoverse-v2"),
        ("axion", "neoverse-v2"),
        ("cobalt-100", "neoverse-n2"),
        ("Neoverse V3", "neoverse-v3"),
    ] {
        assert_eq!(by_name(alias).unwrap().key, key, "{alias}");
    }
    let e = by_name("neoverse-e1").unwrap_err().to_string();
    assert!(e.contains("neoverse-v2") && e.contains("graviton4"), "{e}");
}

#[test]
fn trees_follow_the_decision_tree() {
    for k in KEYS {
        let m = by_name(k).unwrap();
        assert_eq!(m.vendor, Vendor::Arm);
        assert_eq!(m.pmu, "armv8_pmuv3_0");
        let l1: Vec<&str> = m.children(None).map(|n| n.name).collect();
        if k == "neoverse-n1" {
            // N1's specification has cycle accounting only.
            assert_eq!(l1, ["frontend_stalled_cycles", "backend_stalled_cycles"]);
            assert_eq!(m.slots_per_cycle, 5);
        } else {
            assert_eq!(
                l1,
                [
                    "frontend_bound",
                    "backend_bound",
                    "retiring",
                    "bad_speculation"
                ],
                "{k}"
            );
            for n in m.children(None) {
                assert_eq!(n.unit, Unit::PercentSlots, "{k} {}", n.name);
                // The core's slot count is in the formula (STALL_SLOT* / (CPU_CYCLES * W)).
                let w = m.slots_per_cycle.to_string();
                assert!(
                    n.formula.contains(&format!("CPU_CYCLES * {w}"))
                        || n.formula.contains(&format!("{w} * CPU_CYCLES")),
                    "{k} {}: {}",
                    n.name,
                    n.formula
                );
            }
        }
        // Every level-1 node drills down and names events to sample.
        for n in m.children(None) {
            assert!(m.children(Some(n.name)).count() > 0, "{k} {}", n.name);
            assert!(!n.locate_with.is_empty(), "{k} {}", n.name);
            assert!(!n.threshold.is_empty(), "{k} {}", n.name);
            for e in n.locate_with {
                assert!(m.event(e).is_some(), "{k} {}: {e}", n.name);
            }
        }
        // A drill-down metric node refers to the helper metric of the same name.
        for n in m.nodes.iter().filter(|n| n.name.contains("__")) {
            let (parent, metric) = n.name.split_once("__").unwrap();
            assert_eq!(n.parent, Some(parent));
            assert_eq!(n.formula, metric);
            assert!(m.metric(metric).is_some(), "{k} {}", n.name);
            assert_eq!(n.threshold, "0");
        }
        // The stage-2 groups are `-m` groups; MPKI, miss ratios and the operation mix exist.
        for g in ["MPKI", "Miss_Ratio", "Operation_Mix", "General"] {
            assert!(m.metrics.iter().any(|x| x.group == g), "{k}: no {g} metric");
        }
        assert!(m
            .metric("l1d_cache_mpki")
            .unwrap()
            .in_perf_group("L1D_Cache_Effectiveness"));
        assert_eq!(
            m.slots_per_cycle,
            [5, 8, 5, 8, 5, 10][KEYS.iter().position(|x| *x == k).unwrap()]
        );
    }
    // N3 and V3 have Arm's deeper frontend/backend tree, with the orphan placed by its
    // denominator.
    for k in ["neoverse-n3", "neoverse-v3"] {
        let m = by_name(k).unwrap();
        let n = m.node("backend_busy_bound").unwrap();
        assert_eq!((n.parent, n.level), (Some("backend_bound"), 2));
        let n = m.node("frontend_cache_l2i_bound").unwrap();
        assert_eq!((n.parent, n.level), (Some("frontend_mem_cache_bound"), 4));
        assert!(m
            .node("frontend_cache_l2i_bound__ll_cache_read_mpki")
            .is_some());
        assert_eq!(
            n.threshold,
            "frontend_cache_l2i_bound > 30 & frontend_mem_cache_bound > 30 & frontend_mem_bound > 30 & frontend_bound > 20"
        );
    }
}

#[test]
fn every_perf_spelling_of_an_arm_event() {
    let v2 = by_name("neoverse-v2").unwrap();
    let want = vec!["STALL_SLOT_FRONTEND".to_string()];
    for spec in [
        "STALL_SLOT_FRONTEND",
        "stall_slot_frontend",
        "armv8_pmuv3_0/STALL_SLOT_FRONTEND/",
        "armv8_pmuv3_0/stall_slot_frontend/",
        "armv8_pmuv3/stall_slot_frontend/",
        "armv8_pmuv3_1/STALL_SLOT_FRONTEND/",
        "armv9_neoverse_v2/stall_slot_frontend/",
        "armv8_pmuv3_0/event=0x3e/",
        "armv8_pmuv3_0/event=62/",
        "armv8_pmuv3_0/config=0x3e/",
        "armv8_pmuv3_0/event=0x3e,name=STALL_SLOT_FRONTEND/",
        "armv8_pmuv3_0/r3e/",
        "r3e",
        "r003E",
        "r0x3e",
        "r0x003e",
    ] {
        assert_eq!(v2.resolve_perf_event_all(spec).unwrap(), want, "{spec}");
    }
    // perf's generic names map as the kernel's PMUv3 map does.
    for (generic, id) in [
        ("cycles", "CPU_CYCLES"),
        ("cpu-cycles", "CPU_CYCLES"),
        ("instructions", "INST_RETIRED"),
        ("stalled-cycles-frontend", "STALL_FRONTEND"),
        ("stalled-cycles-backend", "STALL_BACKEND"),
        ("armv8_pmuv3_0/cycles/", "CPU_CYCLES"),
    ] {
        assert_eq!(v2.resolve_perf_event(generic).unwrap(), id, "{generic}");
    }
    // Events with 16-bit numbers, and ones no formula uses.
    let n3 = by_name("neoverse-n3").unwrap();
    let e = n3.event("STALL_FRONTEND_FLUSH").unwrap();
    assert!(e.code > 0xFF);
    for spec in [
        format!("r{:x}", e.code),
        format!("armv8_pmuv3_0/event={:#x}/", e.code),
    ] {
        assert_eq!(
            n3.resolve_perf_event(&spec).unwrap(),
            "STALL_FRONTEND_FLUSH",
            "{spec}"
        );
    }
    assert_eq!(
        v2.resolve_perf_event("armv8_pmuv3_0/sw_incr/").unwrap(),
        "SW_INCR"
    );
    // x86 forms and foreign PMUs are refused, with the reason.
    for (spec, why) in [
        ("cpu/STALL_SLOT_FRONTEND/", "not an Arm core PMU"),
        ("arm_cmn_0/hnf_cache_miss/", "not an Arm core PMU"),
        ("armv8_pmuv3_0/event=0x3e,umask=0x1/", "only `event=`"),
    ] {
        let e = v2.resolve_perf_event_all(spec).unwrap_err().to_string();
        assert!(e.contains(why), "{spec}: {e}");
    }
    assert!(v2.resolve_perf_event_all("STALL_SLOT_FRONTEND:c1").is_err());
    assert!(v2.resolve_perf_event_all("r9999").is_err());
    // Privilege filters apply as on x86.
    assert_eq!(
        v2.resolve_perf_event("armv8_pmuv3_0/r3e/u").unwrap(),
        "STALL_SLOT_FRONTEND:USER"
    );
}

#[test]
fn perf_forms_use_the_pmuv3_format() {
    for k in KEYS {
        let m = by_name(k).unwrap();
        assert!(m.events.len() > 100, "{k}");
        for d in m.events {
            assert_eq!(d.kind, EventKind::Core);
            assert_eq!((d.umask, d.cmask, d.fixed), (0, 0, None), "{k} {}", d.name);
            let e = m.encode(d.name).unwrap();
            assert_eq!(e.config, d.code as u64);
            let spec = m.perf_event_spec(d.name).unwrap();
            assert_eq!(
                spec,
                format!("armv8_pmuv3_0/event={:#x},name={}/", d.code, d.name)
            );
            // The form we print reads back as the event.
            assert_eq!(
                m.resolve_perf_event_all(&spec).unwrap()[0],
                d.name,
                "{k} {spec}"
            );
        }
    }
    assert_eq!(
        models().iter().filter(|m| m.vendor == Vendor::Arm).count(),
        6
    );
}
