//! The core types of a hybrid part in a `perf stat` recording: which PMUs it names, and
//! which events each type's tree reads.

use tma_perfstat as import;

/// One core type of a hybrid recording: the events of its PMU, read with its table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoreType {
    /// `cpu_core`, `cpu_atom`, `cpu_lowpower`...
    pub pmu: &'static str,
    pub model: &'static tma_catalog::Model,
}

impl CoreType {
    /// Whether a perf event spec belongs to this core type's tree: its PMU's events, and
    /// events of no core PMU (software and tool events) for every type.
    pub(super) fn keeps(&self, spec: &str) -> bool {
        match spec.split_once('/') {
            Some((pmu, _)) if is_core_type_pmu(pmu) => pmu == self.pmu,
            // Vendor names without a PMU are read by the P-core table.
            _ => import::is_generic_event(spec) || self.pmu == "cpu_core",
        }
    }

    /// `P-core`, `E-core`, else the PMU's name: the names live runs give the core types too.
    pub(super) fn label(&self) -> &'static str {
        crate::hybrid::core_label(self.pmu)
    }

    /// The spec as the type's table reads it: a type without a table of its own is read
    /// with the E-core table, so its PMU (`cpu_lowpower/…/`) is that table's (`cpu_atom`).
    pub(super) fn retarget(&self, spec: &str) -> String {
        match spec.split_once('/') {
            Some((pmu, rest)) if pmu == self.pmu && pmu != self.model.pmu => {
                format!("{}/{rest}", self.model.pmu)
            }
            _ => spec.to_string(),
        }
    }
}

/// A core type's PMU of a hybrid part: `cpu_core`, `cpu_atom`, or any further `cpu_…` type.
fn is_core_type_pmu(pmu: &str) -> bool {
    pmu.len() > "cpu_".len()
        && pmu.starts_with("cpu_")
        && pmu
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The core-type PMUs whose events `bytes` name (`cpu_core/…/`, `cpu_atom/…/`,
/// `cpu_lowpower/…/`): `cpu_core` and `cpu_atom` first, then the others by name.
pub(crate) fn core_pmus_in(bytes: &[u8]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(4).position(|w| w == b"cpu_") {
        let start = at + i;
        at = start + 4;
        if start > 0 && word(bytes[start - 1]) {
            continue;
        }
        let len = bytes[start..]
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .unwrap_or(bytes.len() - start);
        if bytes.get(start + len) != Some(&b'/') {
            continue;
        }
        let name = String::from_utf8_lossy(&bytes[start..start + len]).into_owned();
        if is_core_type_pmu(&name) && !found.contains(&name) {
            found.push(name);
        }
    }
    let rank = |n: &str| match n {
        "cpu_core" => 0,
        "cpu_atom" => 1,
        _ => 2,
    };
    found.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    found
}

/// Whether the first bytes of a recording hold events of several core-type PMUs of a
/// hybrid part.
pub(crate) fn is_hybrid(prefix: &[u8]) -> bool {
    core_pmus_in(prefix).len() > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_types_of_a_recording_are_its_cpu_pmus() {
        let csv = b"1,,cpu_lowpower/TOPDOWN_RETIRING.ALL/,1,100.00,,\n\
                    2,,cpu_atom/CPU_CLK_UNHALTED.CORE/,1,100.00,,\n\
                    3,,cpu_clk_unhalted.thread,1,100.00,,\n\
                    4,,cpu/cycles/,1,100.00,,\n\
                    5,,msr_cpu_x/tsc/,1,100.00,,\n\
                    6,,cpu_core/TOPDOWN.SLOTS/,1,100.00,,\n";
        assert_eq!(core_pmus_in(csv), ["cpu_core", "cpu_atom", "cpu_lowpower"]);
        assert!(is_hybrid(csv));
        assert!(!is_hybrid(b"1,,cpu_core/TOPDOWN.SLOTS/,1,100.00,,\n"));
        let lp = CoreType {
            pmu: "cpu_lowpower",
            model: tma_catalog::by_name("adl-e").unwrap(),
        };
        assert!(lp.keeps("cpu_lowpower/TOPDOWN_RETIRING.ALL/"));
        assert!(!lp.keeps("cpu_atom/TOPDOWN_RETIRING.ALL/"));
        assert!(lp.keeps("task-clock"));
        assert_eq!(
            lp.retarget("cpu_lowpower/TOPDOWN_RETIRING.ALL/"),
            "cpu_atom/TOPDOWN_RETIRING.ALL/"
        );
    }
}
