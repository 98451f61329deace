//! `tma doctor --verify` stops at the next step once SIGINT or SIGTERM has arrived, and says
//! so: the steps measured before it are judged, the rest are skipped as interrupted, and no
//! check fails for want of counts it never tried to take. (Its own test binary: the signal
//! flag is process-wide.)

use tma_doctor::verify::{judge, measure, Verdict};

#[test]
fn a_signal_stops_the_measurement_and_the_report_says_where() {
    tma_sys::signal::set(tma_sys::signal::Interrupt::Int);
    let rec = measure(None).unwrap();
    // The software step ran (it is short and comes first); everything after it did not.
    assert!(rec.software.is_some());
    assert_eq!(
        rec.interrupted.as_deref(),
        Some("SIGINT before the hardware checks")
    );
    assert!(rec.loops.is_empty() && rec.multiplex.is_none() && rec.level1.is_empty());
    let report = judge(&rec);
    let row = report.rows.iter().find(|r| r.id == "interrupted").unwrap();
    assert_eq!(row.verdict, Verdict::Skip);
    assert!(report.notes.iter().any(|n| n.contains("interrupted")));
    // Not run is not failed.
    assert!(
        report
            .rows
            .iter()
            .filter(|r| !r.id.starts_with("software"))
            .all(|r| r.verdict == Verdict::Skip),
        "{:#?}",
        report.rows
    );
}

/// A recording of an interrupted run on a machine with a PMU (loops measured, the rest not)
/// judges the loops and skips the rest, instead of failing "no level-1 result".
#[test]
fn an_interrupted_recording_with_a_pmu_skips_what_it_did_not_measure() {
    let rec = tma_doctor::verify::Recorded {
        source: "test".into(),
        interrupted: Some("SIGTERM before the multiplexing check".into()),
        ..Default::default()
    };
    let report = judge(&rec);
    assert!(!report.failed(), "{:#?}", report.rows);
    for id in ["interrupted", "multiplex", "level1"] {
        let r = report.rows.iter().find(|r| r.id == id).unwrap();
        assert_eq!(r.verdict, Verdict::Skip, "{id}");
    }
}
