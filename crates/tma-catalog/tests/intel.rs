//! Intel tables: identification by the mapfile rules, encodings checked against the perfmon
//! event files (values copied from shared/pmu-data/intel/*/events/*_core.json), perf forms.

use tma_catalog::{by_name, identify, models, CoreKind, EventKind, Topdown};

fn key_of(vendor: &str, f: u32, m: u32, s: u32) -> Vec<&'static str> {
    identify(vendor, f, m, s)
        .unwrap_or_else(|e| panic!("{vendor}-{f}-{m:X}-{s:X}: {e}"))
        .iter()
        .map(|m| m.key)
        .collect()
}

#[test]
fn every_requested_key_exists() {
    let keys: Vec<&str> = models().iter().map(|m| m.key).collect();
    assert_eq!(
        keys,
        [
            "skx",
            "clx",
            "icx",
            "spr",
            "emr",
            "gnr",
            "skl",
            "icl",
            "tgl",
            "adl",
            "mtl",
            "adl-e",
            "mtl-e",
            "zen4",
            "zen5",
            "neoverse-n1",
            "neoverse-v1",
            "neoverse-n2",
            "neoverse-v2",
            "neoverse-n3",
            "neoverse-v3"
        ]
    );
}

#[test]
fn mapfile_rules() {
    // 6-55: stepping 0-4 is Skylake-SP, 5-F Cascade Lake (the rows carry a stepping field).
    for s in 0..=4 {
        assert_eq!(key_of("GenuineIntel", 6, 0x55, s), ["skx"]);
    }
    for s in 5..=0xF {
        assert_eq!(key_of("GenuineIntel", 6, 0x55, s), ["clx"]);
    }
    // Rows without a stepping ignore it.
    assert_eq!(key_of("GenuineIntel", 6, 0x8F, 8), ["spr"]);
    assert_eq!(key_of("GenuineIntel", 6, 0xCF, 2), ["emr"]);
    assert_eq!(key_of("GenuineIntel", 6, 0xAD, 1), ["gnr"]);
    assert_eq!(key_of("GenuineIntel", 6, 0x6A, 6), ["icx"]);
    assert_eq!(key_of("GenuineIntel", 6, 0x6C, 1), ["icx"]);
    assert_eq!(key_of("GenuineIntel", 6, 0x9E, 13), ["skl"]);
    assert_eq!(key_of("GenuineIntel", 6, 0xA5, 2), ["skl"]);
    assert_eq!(key_of("GenuineIntel", 6, 0x7E, 5), ["icl"]);
    assert_eq!(key_of("GenuineIntel", 6, 0x8C, 1), ["tgl"]);
    // Hybrid parts: the P-core model first, then the E-core one. Raptor Lake uses the Alder
    // Lake tables.
    for m in [0x97, 0x9A, 0xB7, 0xBA, 0xBF] {
        assert_eq!(key_of("GenuineIntel", 6, m, 1), ["adl", "adl-e"]);
    }
    for m in [0xAA, 0xAC, 0xB5] {
        assert_eq!(key_of("GenuineIntel", 6, m, 4), ["mtl", "mtl-e"]);
    }
    // Alder Lake-N has E-cores only (mapfile: one `core` row, the Gracemont file).
    assert_eq!(key_of("GenuineIntel", 6, 0xBE, 0), ["adl-e"]);
    // Whole-string match: 0x8F must not match a longer model such as 0x8F0, and
    // `6-8` must not match by prefix.
    assert!(identify("GenuineIntel", 6, 0x8F0, 0).is_err());
    assert!(identify("GenuineIntel", 6, 0x8, 0).is_err());
    assert!(identify("GenuineIntel", 16, 0x8F, 0).is_err());
    // Arrow Lake (0xC5) has Crestmont cores too, but in its own perfmon folder: no table.
    let e = identify("GenuineIntel", 6, 0xC5, 0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("GenuineIntel-6-C5-0") && e.contains("--import"),
        "{e}"
    );
    let e = identify("GenuineIntel", 6, 0x3F, 2)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("GenuineIntel-6-3F-2") && e.contains("spr"),
        "{e}"
    );
}

#[test]
fn aliases() {
    for (alias, key) in [
        ("SapphireRapids", "spr"),
        ("sapphire-rapids", "spr"),
        ("raptorlake", "adl"),
        ("RPL", "adl"),
        ("cascadelakex", "clx"),
        ("cascadelake", "clx"),
        ("skylakex", "skx"),
        ("icelakex", "icx"),
        ("emeraldrapids", "emr"),
        ("graniterapids", "gnr"),
        ("skylake", "skl"),
        ("icelake", "icl"),
        ("tigerlake", "tgl"),
        ("alderlake", "adl"),
        ("meteorlake", "mtl"),
        ("SPR", "spr"),
    ] {
        assert_eq!(by_name(alias).unwrap().key, key, "{alias}");
    }
}

#[test]
fn spr_tree_shape() {
    let spr = by_name("spr").unwrap();
    // pmu-data README 3.2: "SPR has 114 tree nodes".
    assert_eq!(spr.nodes.len(), 114);
    let l1: Vec<&str> = spr.children(None).map(|n| n.name).collect();
    assert_eq!(
        l1,
        [
            "Frontend_Bound",
            "Bad_Speculation",
            "Backend_Bound",
            "Retiring"
        ]
    );
    assert_eq!(spr.topdown, Topdown::PerfMetricsL2);
    assert_eq!(
        (spr.slots_per_cycle, spr.gp_counters, spr.fixed_counters),
        (6, 8, 4)
    );
    let fe = spr.node("frontend_bound").unwrap();
    assert_eq!(
        fe.formula,
        "100 * ( PERF_METRICS.FRONTEND_BOUND / ( PERF_METRICS.FRONTEND_BOUND + PERF_METRICS.BAD_SPECULATION + PERF_METRICS.RETIRING + PERF_METRICS.BACKEND_BOUND ) - INT_MISC.UOP_DROPPING / ( TOPDOWN.SLOTS:perf_metrics ) )"
    );
    assert_eq!(fe.threshold, "Frontend_Bound > 15");
    assert_eq!(fe.locate_with, ["FRONTEND_RETIRED.LATENCY_GE_4"]);
    let fl = spr.node("Fetch_Latency").unwrap();
    assert_eq!(
        fl.threshold,
        "( Fetch_Latency > 10 ) & ( Frontend_Bound > 15 )"
    );
    assert_eq!(
        fl.locate_with,
        [
            "FRONTEND_RETIRED.LATENCY_GE_16",
            "FRONTEND_RETIRED.LATENCY_GE_8"
        ]
    );
    // Helper metrics with core events are kept; uncore ones are not.
    assert!(spr.metric("Info_Thread_IPC").is_some());
    assert!(spr.metric("Bottleneck_Mispredictions").is_some());
    assert!(spr.metric("Info_System_DRAM_BW_Use").is_none());
    // SYSTEM_TSC_FREQ as the TSC tick count (README 3.2 note).
    let f = spr.metric("Info_System_Core_Frequency").unwrap().formula;
    assert!(f.contains(" TSC ") && f.contains("#duration_time"), "{f}");
}

#[test]
fn every_intel_tree_has_the_four_level1_nodes() {
    for m in models()
        .iter()
        .filter(|m| m.vendor == tma_catalog::Vendor::Intel)
    {
        let l1: Vec<&str> = m.children(None).map(|n| n.name).collect();
        assert_eq!(
            l1,
            [
                "Frontend_Bound",
                "Bad_Speculation",
                "Backend_Bound",
                "Retiring"
            ],
            "{}",
            m.key
        );
    }
    // ICX MEM_Bandwidth has no ParentCategory in perfmon; the converter takes it from the
    // threshold.
    let icx = by_name("icx").unwrap();
    let n = icx.node("MEM_Bandwidth").unwrap();
    assert_eq!((n.parent, n.level), (Some("L3_Miss_Bound"), 4));
}

#[test]
fn other_platform_facts() {
    let skx = by_name("skx").unwrap();
    assert_eq!(skx.topdown, Topdown::Generic);
    assert_eq!(
        (skx.slots_per_cycle, skx.gp_counters, skx.fixed_counters),
        (4, 4, 3)
    );
    let icx = by_name("icx").unwrap();
    assert_eq!(icx.topdown, Topdown::PerfMetricsL1);
    assert_eq!(icx.slots_per_cycle, 5);
    let adl = by_name("adl").unwrap();
    assert_eq!(
        (adl.pmu, adl.core_kind),
        ("cpu_core", CoreKind::Performance)
    );
    let gnr = by_name("gnr").unwrap();
    let dram = gnr
        .retire_latencies
        .iter()
        .find(|(n, _)| *n == "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM")
        .unwrap();
    assert_eq!(dram.1, 115.83);
    // The perfmon `4K_Aliasing` node is an identifier with a leading underscore.
    assert!(skx.node("_4K_Aliasing").is_some());
    for m in models() {
        for n in m.nodes {
            assert!(
                n.name
                    .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'),
                "{}",
                n.name
            );
        }
    }
}

#[test]
fn encodings_match_perfmon() {
    let spr = by_name("spr").unwrap();
    // UOPS_RETIRED.MS: EventCode 0xc2, UMask 0x04, MSRIndex 0x3F7, MSRValue 0x8, TakenAlone.
    let e = spr.encode("UOPS_RETIRED.MS:c1:e1").unwrap();
    assert_eq!(e.config, 0xc2 | 0x04 << 8 | 1 << 18 | 1 << 24);
    assert_eq!((e.config1, e.msr_index, e.taken_alone), (0x8, 0x3F7, true));
    assert_eq!(e.pmu, "cpu");
    // OCR: first code of "0x2A,0x2B", MSR value into config1; :ocr_msr_val overrides it.
    let e = spr.encode("OCR.DEMAND_RFO.L3_MISS").unwrap();
    assert_eq!(
        (e.config, e.config1, e.msr_index),
        (0x12A, 0x3F3FC00002, 0x1A6)
    );
    assert_eq!(e.counter_mask, 0b1111);
    let e = spr
        .encode("OCR.DEMAND_RFO.L3_MISS:ocr_msr_val=0x103b800002")
        .unwrap();
    assert_eq!(e.config1, 0x103b800002);
    // :u0xNN replaces the umask; :SUP / :USER filter privilege.
    let icx = by_name("icx").unwrap();
    let e = icx.encode("EXE_ACTIVITY.3_PORTS_UTIL:u0x80").unwrap();
    assert_eq!(e.config, 0x80a6);
    let e = spr.encode("CPU_CLK_UNHALTED.THREAD_P:SUP").unwrap();
    assert_eq!(
        (e.config, e.exclude_user, e.exclude_kernel),
        (0x3c, true, false)
    );
    // Fixed counters: real encodings (README 3.1), slots 0x0400, PERF_METRICS 0x80xx.
    let e = spr.encode("INST_RETIRED.ANY").unwrap();
    assert_eq!((e.config, e.fixed, e.counter_mask), (0xC0, Some(0), 0));
    let e = spr.encode("CPU_CLK_UNHALTED.REF_TSC").unwrap();
    assert_eq!((e.config, e.fixed), (0x0300, Some(2)));
    let e = spr.encode("TOPDOWN.SLOTS:perf_metrics").unwrap();
    assert_eq!(
        (e.config, e.kind, e.fixed),
        (0x0400, EventKind::Slots, Some(3))
    );
    let e = spr.encode("PERF_METRICS.FRONTEND_BOUND").unwrap();
    assert_eq!((e.config, e.kind), (0x8200, EventKind::PerfMetrics(2)));
    let e = spr.encode("PERF_METRICS.MEMORY_BOUND").unwrap();
    assert_eq!(e.config, 0x8700);
    // A modified fixed-counter event needs a general counter.
    let e = spr.encode("INST_RETIRED.ANY:c1").unwrap();
    assert_eq!((e.fixed, e.counter_mask), (None, 0xff));

    let skx = by_name("skx").unwrap();
    // CPU_CLK_UNHALTED.THREAD_ANY: fixed counter 1 pseudo 0x00/0x02 with AnyThread=1
    // becomes event 0x3C with any=1 (bit 21).
    let e = skx.encode("CPU_CLK_UNHALTED.THREAD_ANY").unwrap();
    assert_eq!((e.config, e.fixed), (0x3c | 1 << 21, Some(1)));
    assert_eq!(skx.encode("CPU_CLK_UNHALTED.THREAD").unwrap().config, 0x3c);
    assert_eq!(skx.encode("INST_RETIRED.ANY").unwrap().config, 0xc0);
    // FP_ARITH_INST_RETIRED.128B_PACKED_DOUBLE: 0xC7 / 0x04, :u0xfc sums the umasks.
    let e = skx
        .encode("FP_ARITH_INST_RETIRED.128B_PACKED_DOUBLE:u0xfc")
        .unwrap();
    assert_eq!(e.config, 0xfcc7);
    // GNR retire-latency operands are flagged.
    let gnr = by_name("gnr").unwrap();
    let id = gnr
        .event_ids()
        .into_iter()
        .find(|i| i.ends_with(":retire_latency"))
        .unwrap();
    assert!(gnr.encode(&id).unwrap().retire_latency);
    // Bad modifiers and unknown events are errors, not panics.
    assert!(spr.encode("UOPS_RETIRED.MS:c999").is_err());
    assert!(spr.encode("UOPS_RETIRED.MS:bogus").is_err());
    assert!(spr.encode("NOT_AN_EVENT").is_err());
}

#[test]
fn resolve_perf_forms() {
    let spr = by_name("spr").unwrap();
    let r = |s: &str| {
        spr.resolve_perf_event(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    };
    let all = |s: &str| {
        spr.resolve_perf_event_all(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    };
    assert!(all("slots").contains(&"TOPDOWN.SLOTS:perf_metrics".to_string()));
    assert!(all("cpu/slots/").contains(&"TOPDOWN.SLOTS:perf_metrics".to_string()));
    assert_eq!(r("topdown-fe-bound"), "PERF_METRICS.FRONTEND_BOUND");
    assert_eq!(r("cpu/topdown-be-bound/"), "PERF_METRICS.BACKEND_BOUND");
    assert_eq!(r("topdown-heavy-ops"), "PERF_METRICS.HEAVY_OPERATIONS");
    assert_eq!(
        r("topdown-br-mispredict"),
        "PERF_METRICS.BRANCH_MISPREDICTS"
    );
    assert_eq!(r("topdown-fetch-lat"), "PERF_METRICS.FETCH_LATENCY");
    assert_eq!(r("topdown-mem-bound"), "PERF_METRICS.MEMORY_BOUND");
    assert_eq!(r("topdown-retiring"), "PERF_METRICS.RETIRING");
    assert_eq!(r("topdown-bad-spec"), "PERF_METRICS.BAD_SPECULATION");
    assert!(all("instructions").contains(&"INST_RETIRED.ANY".to_string()));
    assert!(all("cycles").contains(&"CPU_CLK_UNHALTED.THREAD".to_string()));
    assert_eq!(r("ref-cycles"), "CPU_CLK_UNHALTED.REF_TSC");
    assert_eq!(r("msr/tsc/"), "TSC");
    assert_eq!(r("uops_retired.ms:c1:e1"), "UOPS_RETIRED.MS:c1:e1");
    assert_eq!(r("UOPS_RETIRED.MS__c1__e1"), "UOPS_RETIRED.MS:c1:e1");
    assert_eq!(
        r("cpu/event=0xc2,umask=0x4,cmask=1,edge,config1=0x8/"),
        "UOPS_RETIRED.MS:c1:e1"
    );
    assert_eq!(
        r("cpu@UOPS_RETIRED.MS\\,cmask\\=1\\,edge@"),
        "UOPS_RETIRED.MS:c1:e1"
    );
    assert_eq!(
        r("cpu/UOPS_RETIRED.MS,cmask=1,edge/"),
        "UOPS_RETIRED.MS:c1:e1"
    );
    // `rNNNN` carries no config1: it still matches when the config alone is unambiguous...
    assert_eq!(r("r10404c2"), "UOPS_RETIRED.MS:c1:e1");
    // ...but not when several offcore-response events share the config.
    let e = spr.resolve_perf_event("r12a").unwrap_err().to_string();
    assert!(e.contains("config1"), "{e}");
    assert_eq!(
        r("cpu/event=0x2a,umask=0x1,offcore_rsp=0x103b800002/"),
        "OCR.DEMAND_RFO.L3_MISS:ocr_msr_val=0x103b800002"
    );
    // A base event the formulas use only with modifiers still resolves by name.
    assert_eq!(r("UOPS_RETIRED.MS"), "UOPS_RETIRED.MS");
    // Errors name the spec and point at `tma events`.
    for bad in [
        "cpu/event=0x99,umask=0x77/",
        "NO_SUCH.EVENT",
        "",
        "foo/bar/",
        "rZZZ",
    ] {
        let e = spr.resolve_perf_event(bad).unwrap_err().to_string();
        assert!(e.contains("tma events --cpu spr"), "{bad}: {e}");
    }
    // Hybrid P-core forms.
    let adl = by_name("adl").unwrap();
    assert_eq!(
        adl.perf_event_spec("PERF_METRICS.FRONTEND_BOUND").unwrap(),
        "cpu_core/topdown-fe-bound/"
    );
    assert_eq!(
        adl.resolve_perf_event("cpu_core/topdown-fe-bound/")
            .unwrap(),
        "PERF_METRICS.FRONTEND_BOUND"
    );
    // The perf command-line forms.
    assert_eq!(
        spr.perf_event_spec("UOPS_RETIRED.MS:c1:e1").unwrap(),
        "cpu/event=0xc2,umask=0x4,cmask=0x1,edge,config1=0x8,name=UOPS_RETIRED.MS__c1__e1/"
    );
    assert_eq!(
        spr.perf_event_spec("TOPDOWN.SLOTS:perf_metrics").unwrap(),
        "slots"
    );
    assert_eq!(spr.perf_event_spec("TSC").unwrap(), "msr/tsc/");
    assert_eq!(
        spr.perf_event_spec("CPU_CLK_UNHALTED.THREAD_P:SUP")
            .unwrap(),
        "cpu/event=0x3c,umask=0x0,name=CPU_CLK_UNHALTED.THREAD_P__SUP/k"
    );
    // ICX has no L2 PERF_METRICS: topdown-heavy-ops matches nothing there.
    let icx = by_name("icx").unwrap();
    assert!(icx.resolve_perf_event("topdown-heavy-ops").is_err());
    assert_eq!(
        icx.resolve_perf_event("topdown-retiring").unwrap(),
        "PERF_METRICS.RETIRING"
    );
}

#[test]
fn tma_version_from_the_data() {
    let v = |k: &str| by_name(k).unwrap().tma_version;
    for k in ["spr", "emr", "gnr", "icx"] {
        assert_eq!(v(k), Some("5.2"), "{k}");
    }
    for k in ["skx", "clx", "skl"] {
        assert_eq!(v(k), Some("5.01"), "{k}");
    }
    for k in ["icl", "tgl", "adl", "mtl"] {
        assert_eq!(v(k), Some("5.1"), "{k}");
    }
    // No version in the data the E-core and AMD tables come from.
    for k in ["adl-e", "mtl-e", "zen4", "zen5"] {
        assert_eq!(v(k), None, "{k}");
    }
}
