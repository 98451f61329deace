//! The fleet counters: tma_slots_total charged to each node (node="total" for all slots),
//! tma_cycles_total and tma_instructions_total add up over the intervals of a recording,
//! stamped with the time each interval was published; none of them without a PMU.

mod common;

use common::*;
use tma_serve::expo::Format;
use tma_stat::sink::{IntervalData, IntervalSink, Start};

/// The value and timestamp of the sample `series` (name and labels exactly as written).
fn sample_at(text: &str, series: &str) -> Option<(f64, Option<i64>)> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(series)?.strip_prefix(' ')?;
        let mut it = rest.split(' ');
        let v = it.next()?.parse().ok()?;
        Some((v, it.next().and_then(|t| t.parse().ok())))
    })
}

/// Every interval of `rel` as `tma stat --import` evaluates it.
struct Reports(Vec<(tma_perf::Interval, tma_stat::IntervalReport)>);

impl IntervalSink for Reports {
    fn start(&mut self, _: Start<'_>) -> Result<(), tma_stat::StatError> {
        Ok(())
    }
    fn interval(&mut self, iv: IntervalData<'_>) -> Result<(), tma_stat::StatError> {
        self.0
            .push((iv.readings.clone(), iv.report.cloned().unwrap()));
        Ok(())
    }
}

fn reports(rel: &str) -> Vec<(tma_perf::Interval, tma_stat::IntervalReport)> {
    let mut r = Reports(Vec::new());
    tma_stat::run(&import_config(rel), &mut r, &mut std::io::sink()).unwrap();
    r.0
}

fn count(iv: &tma_perf::Interval, event: &str) -> f64 {
    iv.get(event).and_then(|r| r.value).unwrap_or_else(|| {
        panic!(
            "no {event} in {:?}",
            iv.readings.iter().map(|r| &r.event).collect::<Vec<_>>()
        )
    })
}

#[test]
fn slots_cycles_and_instructions_add_up_over_the_recording() {
    let text = loaded(SPR_INTERVALS).render(Format::Text);
    let ivs = reports(SPR_INTERVALS);
    assert_eq!(ivs.len(), 3);
    let slots: f64 = ivs
        .iter()
        .map(|(iv, _)| count(iv, "TOPDOWN.SLOTS:perf_metrics"))
        .sum();
    let (total, at) = sample_at(&text, "tma_slots_total{node=\"total\",level=\"0\"}")
        .unwrap_or_else(|| panic!("no total slots in\n{text}"));
    assert_eq!(total, slots);
    assert!(at.is_some_and(|ms| ms > 1_700_000_000_000), "{at:?}");
    let spr = tma_catalog::by_name("spr").unwrap();
    let mut level1 = 0.0;
    for n in &ivs[0].1.report.nodes {
        let path = tma_serve::collect::node_path(spr, n.name);
        let series = format!("tma_slots_total{{node=\"{path}\",level=\"{}\"}}", n.level);
        let want: f64 = ivs
            .iter()
            .map(|(iv, rep)| {
                rep.report.node(n.name).unwrap().value.unwrap() / 100.0
                    * count(iv, "TOPDOWN.SLOTS:perf_metrics")
            })
            .sum();
        let (got, _) = sample_at(&text, &series).unwrap_or_else(|| panic!("no {series}"));
        assert!(
            (got - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{series}: {got} vs {want}"
        );
        if n.level == 1 {
            level1 += got;
        }
    }
    // The level-1 nodes share all the slots.
    assert!((level1 - slots).abs() < 1e-6 * slots, "{level1} vs {slots}");
    let cycles: f64 = ivs
        .iter()
        .map(|(iv, _)| count(iv, "CPU_CLK_UNHALTED.THREAD"))
        .sum();
    let inst: f64 = ivs
        .iter()
        .map(|(iv, _)| count(iv, "INST_RETIRED.ANY"))
        .sum();
    assert_eq!(
        sample_at(&text, "tma_cycles_total").map(|s| s.0),
        Some(cycles)
    );
    assert_eq!(
        sample_at(&text, "tma_instructions_total").map(|s| s.0),
        Some(inst)
    );
}

#[test]
fn without_a_pmu_no_slots_only_cpu_time() {
    let text = software_only().render(Format::Text);
    for fake in [
        "tma_slots_total",
        "tma_cycles_total",
        "tma_instructions_total",
    ] {
        assert!(!text.contains(fake), "{fake} in\n{text}");
    }
    assert_eq!(sample(&text, "tma_task_clock_seconds_total"), Some(0.5));
}
