//! The core types of a hybrid recording that counted nothing: `perf stat --cputype core`
//! prints the other type's rows as `<not counted>`. Such a type has no tree; a note says
//! why, and the other types' trees are read as usual.

use std::io::Write;

use tma_perfstat::IntervalReader;

use crate::StatError;

/// Why a core type of a recording gave no count: each of its rows was `<not counted>` (the
/// work never ran on those cores: `perf stat --cputype core`, a pinned command), each was
/// `<not supported>`, or it has no row at all (its PMU named elsewhere in the file).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Idle {
    NotCounted,
    NotSupported,
    NoRow,
}

/// The core types of `pmus` of which `bytes` holds no counted row, with why. Reads until
/// every type has a counted row (the first interval, as a rule); a recording it cannot read
/// gives none, so the import itself says what is wrong.
pub(super) fn idle_types(bytes: &[u8], pmus: &[String]) -> Vec<(String, Idle)> {
    let Ok(mut reader) = IntervalReader::new(bytes) else {
        return Vec::new();
    };
    // Per type: a counted row, any row, a row that was not `<not supported>`.
    let mut counted = vec![false; pmus.len()];
    let mut rows = vec![false; pmus.len()];
    let mut supported = vec![false; pmus.len()];
    while counted.contains(&false) {
        let iv = match reader.next_interval() {
            Ok(Some(iv)) => iv,
            Ok(None) => break,
            Err(_) => return Vec::new(),
        };
        for r in &iv.readings {
            let Some((pmu, _)) = r.event.split_once('/') else {
                continue;
            };
            let Some(k) = pmus.iter().position(|p| p == pmu) else {
                continue;
            };
            rows[k] = true;
            counted[k] |= r.value.is_some();
            supported[k] |= r.status != tma_perf::ReadingStatus::NotSupported;
        }
    }
    pmus.iter()
        .enumerate()
        .filter(|&(k, _)| !counted[k])
        .map(|(k, pmu)| {
            let why = match (rows[k], supported[k]) {
                (false, _) => Idle::NoRow,
                (true, false) => Idle::NotSupported,
                (true, true) => Idle::NotCounted,
            };
            (pmu.clone(), why)
        })
        .collect()
}

/// Take the core types of `pmus` that counted nothing out of it, with a note for each,
/// when some other type did count (a recording where nothing was counted keeps them all:
/// the import of each says what is missing).
pub(super) fn drop_idle_types(
    bytes: &[u8],
    file: &str,
    pmus: &mut Vec<String>,
    notes: &mut dyn Write,
) -> Result<(), StatError> {
    let idle = idle_types(bytes, pmus);
    if idle.len() == pmus.len() {
        return Ok(());
    }
    for (pmu, why) in &idle {
        let label = crate::hybrid::core_label(pmu);
        let why = match why {
            Idle::NotCounted => format!(
                "every {pmu} row is `<not counted>` (no work ran on those cores: perf stat \
                 --cputype, or a command kept off them)"
            ),
            Idle::NotSupported => format!("every {pmu} row is `<not supported>`"),
            Idle::NoRow => format!("it names {pmu} but holds no row of its events"),
        };
        writeln!(notes, "tma: note: {file} has no {label} tree: {why}")?;
    }
    pmus.retain(|p| !idle.iter().any(|(q, _)| q == p));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_type_without_a_counted_row_is_idle() {
        let both = b"1,,cpu_atom/CPU_CLK_UNHALTED.CORE/,1,100.00,,\n\
                     2,,cpu_core/TOPDOWN.SLOTS/,1,100.00,,\n";
        let pmus = ["cpu_core", "cpu_atom"].map(String::from);
        assert_eq!(idle_types(both, &pmus), []);
        // `perf stat --cputype core`: the other type's rows not counted (or not supported).
        let csv = b"<not counted>,,cpu_atom/cycles/,0,0.00,,\n\
                    <not supported>,,cpu_lowpower/cycles/,0,0.00,,\n\
                    <not counted>,,cpu_core/cycles/,0,0.00,,\n\
                    6,,cpu_core/TOPDOWN.SLOTS/,1,100.00,,\n";
        let pmus = ["cpu_core", "cpu_atom", "cpu_lowpower", "cpu_other"].map(String::from);
        assert_eq!(
            idle_types(csv, &pmus),
            [
                ("cpu_atom".to_string(), Idle::NotCounted),
                ("cpu_lowpower".to_string(), Idle::NotSupported),
                ("cpu_other".to_string(), Idle::NoRow),
            ]
        );
        // Nothing counted anywhere: every type is kept, for the import to say what is missing.
        let mut kept = pmus.to_vec();
        let mut notes = Vec::new();
        drop_idle_types(
            b"<not counted>,,cpu_core/cycles/,0,0.00,,\n",
            "f",
            &mut kept,
            &mut notes,
        )
        .unwrap();
        assert_eq!((kept.len(), notes.len()), (4, 0));
        let mut kept = pmus.to_vec();
        drop_idle_types(csv, "f.csv", &mut kept, &mut notes).unwrap();
        assert_eq!(kept, ["cpu_core"]);
        let notes = String::from_utf8(notes).unwrap();
        assert!(
            notes.starts_with(
                "tma: note: f.csv has no E-core tree: every cpu_atom row is `<not counted>`"
            ),
            "{notes}"
        );
        assert_eq!(notes.lines().count(), 3, "{notes}");
    }
}
