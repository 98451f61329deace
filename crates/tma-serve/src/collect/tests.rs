use super::*;
use crate::expo::Format;
use tma_perf::backend::GroupReading;
use tma_stat::eval::Request;

/// Zen 4 level-1 counts of one scope: (frontend, backend, retiring, dispatched) shares of
/// the 6e9 slots of 1e9 cycles; bad speculation is dispatched - retiring.
fn zen4_value(ev: &str, fe: f64, be: f64, ret: f64, disp: f64) -> u64 {
    let slots = 6e9;
    (match ev {
        "ls_not_halted_cyc" => 1e9,
        "de_no_dispatch_per_slot.no_ops_from_frontend" => fe * slots,
        "de_no_dispatch_per_slot.backend_stalls" => be * slots,
        "ex_ret_ops" => ret * slots,
        "de_src_op_disp.all" => disp * slots,
        _ => 0.0,
    }) as u64
}

/// The run information and counting plan of `cpu`'s tree to `level`.
fn tree_of(cpu: &str, level: u8) -> (RunInfo, tma_perf::plan::Plan) {
    let model = tma_catalog::by_name(cpu).unwrap();
    let request = Request {
        level,
        nodes: Vec::new(),
        topology: None,
        metrics: Vec::new(),
        bottlenecks: Vec::new(),
    };
    let plan = tma_stat::groups::counting_plan(model, &request.selection(), &[], false).unwrap();
    let info = RunInfo {
        model,
        cpu_source: "test".into(),
        source: "test".into(),
        interval_mode: true,
        request,
        command: None,
        event_map: Vec::new(),
        scope: None,
        core_type: None,
    };
    (info, plan)
}

/// Feed one interval of two scopes (labelled by `label`) to a collector; the exposition.
fn two_scopes(split: Split, target: Target, cgroup: bool) -> String {
    let (info, plan) = tree_of("zen4", 1);
    let shared = Arc::new(Shared::default());
    let mut c = Collector::new(
        Arc::clone(&shared),
        Arc::new(Log::new(Box::new(std::io::sink()))),
        Build {
            version: "t".into(),
            cpu: "c".into(),
        },
        split,
        vec!["system.slice/a.service".into(), "b".into()],
        false,
    );
    c.start(Start::Tree {
        info: &info,
        plan: Some(&plan),
        target: Some(&target),
    })
    .unwrap();
    let mut groups = Vec::new();
    // Scope 0: backend 30%; scope 1: backend 50%. Each on CPUs 0 and 1 (cgroups) or on
    // its own CPU (per-CPU split).
    for (k, (fe, be, ret, disp)) in [(0.2, 0.3, 0.4, 0.5), (0.1, 0.5, 0.3, 0.4)]
        .into_iter()
        .enumerate()
    {
        let cpus: Vec<u32> = if cgroup { vec![0, 1] } else { vec![k as u32] };
        for &cpu in &cpus {
            for (gi, g) in plan.groups.iter().enumerate() {
                groups.push(GroupReading {
                    group: gi,
                    cpu: Some(cpu),
                    tid: None,
                    cgroup: cgroup.then_some(k as u32),
                    time_enabled_ns: 1_000_000_000,
                    time_running_ns: 1_000_000_000,
                    values: g
                        .events
                        .iter()
                        .map(|e| zen4_value(&e.name, fe, be, ret, disp) / cpus.len() as u64)
                        .collect(),
                });
            }
        }
    }
    let raw = RawInterval {
        start_s: 0.0,
        end_s: 1.0,
        groups,
    };
    let agg = Measurement::interval_readings(&plan, &raw, false);
    c.interval(IntervalData {
        raw: Some(&raw),
        readings: &agg,
        report: None,
    })
    .unwrap();
    shared.render(Format::Text)
}

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn a_cgroup_target_gives_one_tree_per_cgroup() {
    let target = Target::Cgroups(vec!["/cg/a".into(), "/cg/b".into()]);
    let text = two_scopes(Split::Target, target, true);
    let a = "cgroup=\"system.slice/a.service\"";
    let be = |cg: &str| {
        value(
            &text,
            &format!("tma_node_ratio{{node=\"backend_bound\",level=\"1\",{cg}}}"),
        )
    };
    assert!((be(a) - 0.3).abs() < 1e-12);
    assert!((be("cgroup=\"b\"") - 0.5).abs() < 1e-12);
    let fe = value(
        &text,
        &format!("tma_node_ratio{{node=\"frontend_bound\",level=\"1\",{a}}}"),
    );
    assert!((fe - 0.2).abs() < 1e-12);
    assert_eq!(
        value(
            &text,
            "tma_bottleneck_info{node=\"backend_bound\",cgroup=\"b\"}"
        ),
        1.0
    );
    // No series for the sum of the cgroups: every tree series names its cgroup.
    assert!(text
        .lines()
        .filter(|l| l.starts_with("tma_node_ratio{"))
        .all(|l| l.contains("cgroup=")));
    // Each cgroup's own cycles: 1e9 (two CPUs of 0.5e9).
    assert_eq!(
        value(
            &text,
            &format!("tma_event_total{{event=\"ls_not_halted_cyc\",{a}}}")
        ),
        1e9
    );
}

#[test]
fn per_cpu_split_gives_one_tree_per_cpu() {
    let text = two_scopes(Split::PerCpu, Target::System(None), false);
    let be = |cpu: u32| {
        value(
            &text,
            &format!("tma_node_ratio{{node=\"backend_bound\",level=\"1\",cpu=\"{cpu}\"}}"),
        )
    };
    assert!((be(0) - 0.3).abs() < 1e-12);
    assert!((be(1) - 0.5).abs() < 1e-12);
}

/// The lines a collector logs when counting starts (with a tree, then without a PMU)
/// repeat no key; the TMA level is `tma_level`, apart from the line's `level`.
#[test]
fn start_up_log_lines_have_no_duplicate_key() {
    use crate::log::testing::{assert_no_duplicate_keys, Buf};
    let (info, plan) = tree_of("spr", 2);
    let buf = Buf::default();
    let mut c = Collector::new(
        Arc::new(Shared::default()),
        Arc::new(Log::new(Box::new(buf.clone()))),
        Build {
            version: "t".into(),
            cpu: "c".into(),
        },
        Split::Target,
        Vec::new(),
        false,
    );
    c.start(Start::Tree {
        info: &info,
        plan: Some(&plan),
        target: None,
    })
    .unwrap();
    let software = tma_perf::plan::Plan::software(&tma_perf::backend::software_events());
    c.start(Start::Software {
        plan: &software,
        target: None,
        reason: Some("no `cpu` PMU"),
        streamed: true,
    })
    .unwrap();
    let text = buf.text();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.lines().next().is_some_and(
            |l| l.contains(" level=info event=counting ") && l.contains(" tma_level=2")
        ),
        "{text}"
    );
    assert_no_duplicate_keys(&text);
}

#[test]
fn node_paths_follow_the_parents() {
    let spr = tma_catalog::by_name("spr").unwrap();
    assert_eq!(node_path(spr, "Memory_Bound"), "Backend_Bound.Memory_Bound");
    assert_eq!(node_path(spr, "Retiring"), "Retiring");
}
