//! Which CPU model's tables to use: `--cpu NAME`, else the one the recording names, else this
//! machine's (from its cpuinfo).

use tma_catalog::Model;
use tma_host::Host;

use crate::{StatConfig, StatError};

/// Where the CPU model came from, for the header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    /// `--cpu NAME`.
    Flag,
    /// A `# cpu: KEY` line (or the snapshot's CPU) in the recording.
    Recording,
    /// The recording's events: those of this table (an import without `--cpu`, see
    /// [`StatConfig::cpu_from_events`]).
    Events,
    /// This machine's cpuinfo.
    ThisMachine,
}

impl CpuSource {
    /// The words of the header line.
    pub fn describe(&self) -> &'static str {
        match self {
            CpuSource::Flag => "from --cpu",
            CpuSource::Recording => "named in the recording",
            CpuSource::Events => "from the recording's events",
            CpuSource::ThisMachine => "identified from this machine",
        }
    }
}

/// The model for `--cpu NAME`, else the one named by the recording, else this machine's
/// (identified from the cpuinfo of `host`, normally `/proc/cpuinfo`). A machine without
/// tables is [`StatError::NoTableHere`], one short line.
pub fn select_model(
    cpu: Option<&str>,
    hint: Option<&str>,
    host: &Host,
) -> Result<(&'static Model, CpuSource), StatError> {
    if let Some(name) = cpu {
        return Ok((tma_catalog::by_name(name)?, CpuSource::Flag));
    }
    if let Some(name) = hint {
        let m = tma_catalog::by_name(name).map_err(|source| StatError::RecordingCpu {
            name: name.to_string(),
            source,
        })?;
        return Ok((m, CpuSource::Recording));
    }
    let bytes = host.cpuinfo_bytes().map_err(|e| StatError::Cpuinfo {
        path: e.path().to_path_buf(),
        source: e.into_io(),
    })?;
    let (vendor, family, model, stepping) = tma_catalog::parse_cpuinfo(&bytes)?;
    let models = tma_catalog::identify(&vendor, family, model, stepping).map_err(|e| match e {
        tma_catalog::CatalogError::UnsupportedCpu { cpuid, reason, .. } => {
            StatError::NoTableHere { cpuid, reason }
        }
        e => e.into(),
    })?;
    match models.first() {
        Some(m) => Ok((m, CpuSource::ThisMachine)),
        None => Err(StatError::NoTable),
    }
}

/// An import's model: [`select_model`] with the CPU the recording names (`hint`), where
/// `--cpu` is the one [`crate::run`] chose from the recording's events when
/// [`StatConfig::cpu_from_events`] says so.
pub(crate) fn select_for_import(
    cfg: &StatConfig,
    hint: Option<&str>,
) -> Result<(&'static Model, CpuSource), StatError> {
    let (m, source) = select_model(cfg.cpu.as_deref(), hint, &cfg.host)?;
    Ok(match source {
        CpuSource::Flag => (m, given_source(cfg)),
        s => (m, s),
    })
}

/// Where a `cfg.cpu` that is set came from: `--cpu`, or the recording's events.
pub(crate) fn given_source(cfg: &StatConfig) -> CpuSource {
    if cfg.cpu_from_events {
        CpuSource::Events
    } else {
        CpuSource::Flag
    }
}

/// How much larger a share of its tree's events the recording must hold for another model
/// to be named: 10 points (a whole zen4 recording holds about 20 points more of the zen4
/// level-2 tree than of the zen5 one).
pub const CLEARLY_MORE: f64 = 0.1;

/// The model (other than `current`) a recording clearly belongs to, when it has events
/// `current` does not know: "these look like events of spr, try --cpu spr". `unknown` are
/// the recording's specs `current` does not know, `specs` all of them, `level` the requested
/// tree depth. A model qualifies only when it knows at least half of `unknown` AND the
/// recording holds clearly more of its level-`level` tree's events (a share at least
/// [`CLEARLY_MORE`] larger than that of `current`): one extra event that another table
/// happens to list (a Skylake-SP offcore event that only the skl table names) is no reason
/// to switch.
pub fn guess_other_cpu(
    unknown: &[String],
    specs: &[String],
    current: &Model,
    level: u8,
) -> Option<&'static str> {
    if unknown.is_empty() {
        return None;
    }
    // The share of `m`'s tree events the recording holds.
    let coverage = |m: &Model| -> f64 {
        let required = required_at(m, level);
        if required.is_empty() {
            return 0.0;
        }
        let held: std::collections::BTreeSet<String> = specs
            .iter()
            .flat_map(|s| m.resolve_perf_event_all(s).unwrap_or_default())
            .collect();
        required.iter().filter(|id| held.contains(*id)).count() as f64 / required.len() as f64
    };
    let mut mine: Option<f64> = None;
    let mut best: Option<(&'static str, f64, usize)> = None;
    for m in tma_catalog::models() {
        if m.key == current.key {
            continue;
        }
        let n = unknown
            .iter()
            .filter(|s| m.resolve_perf_event(s).is_ok())
            .count();
        if n == 0 || 2 * n < unknown.len() {
            continue;
        }
        let cov = coverage(m);
        let mine = *mine.get_or_insert_with(|| coverage(current));
        if cov < mine + CLEARLY_MORE {
            continue;
        }
        if best.is_none_or(|(_, c, b)| (cov, n) > (c, b)) {
            best = Some((m.key, cov, n));
        }
    }
    best.map(|(k, _, _)| k)
}

/// The events of `m`'s tree down to `level` (none where the selection fails), computed once
/// per bundled model and level: an import whose events are not the model's asks it of
/// every other model.
pub(crate) fn required_at(m: &Model, level: u8) -> &'static std::collections::BTreeSet<String> {
    use std::collections::BTreeSet;
    type Key = (usize, usize, usize, usize, u8);
    static CACHE: tma_catalog::cache::Leaked<Key, BTreeSet<String>> = std::sync::OnceLock::new();
    // The tables are `'static` slices: their addresses name them.
    let key = (
        m.nodes.as_ptr() as usize,
        m.nodes.len(),
        m.metrics.as_ptr() as usize,
        m.events.as_ptr() as usize,
        level,
    );
    tma_catalog::cache::get_or_build(&CACHE, key, || {
        tma_metrics::required_events(m, &tma_metrics::Selection::level(level)).unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_wins_then_hint_then_cpuinfo() {
        let none = &Host::new("/nonexistent/sys", "/nonexistent");
        let (m, s) = select_model(Some("zen4"), Some("spr"), none).unwrap();
        assert_eq!((m.key, s), ("zen4", CpuSource::Flag));
        let (m, s) = select_model(None, Some("spr"), none).unwrap();
        assert_eq!((m.key, s), ("spr", CpuSource::Recording));
        let e = select_model(None, None, none).unwrap_err().to_string();
        assert!(
            e.contains("/nonexistent/cpuinfo") && e.contains("--cpu NAME"),
            "{e}"
        );
        let e = select_model(None, Some("nope"), none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the recording names CPU `nope`"), "{e}");
    }

    #[test]
    fn guesses_the_cpu_of_foreign_events() {
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let spr_events = vec![
            "TOPDOWN.SLOTS".to_string(),
            "INT_MISC.RECOVERY_CYCLES".into(),
        ];
        let g = guess_other_cpu(&spr_events, &spr_events, zen4, 1);
        assert!(g.is_some(), "an Intel model should claim Intel events");
        let none = ["no.such.event".to_string()];
        assert_eq!(guess_other_cpu(&none, &none, zen4, 1), None);
    }

    /// The perf specs of a model's level-`level` tree events.
    fn tree_specs(m: &Model, level: u8) -> Vec<String> {
        tma_metrics::required_events(m, &tma_metrics::Selection::level(level))
            .unwrap()
            .iter()
            .map(|id| m.perf_event_spec(id).unwrap())
            .collect()
    }

    #[test]
    fn one_event_another_table_names_is_no_reason_to_switch() {
        let skx = tma_catalog::by_name("skx").unwrap();
        let skl = tma_catalog::by_name("skl").unwrap();
        // An event the skl tables know and the skx ones do not (an offcore one, say).
        let extra = skl
            .event_ids()
            .into_iter()
            .find(|id| skx.resolve_perf_event(id).is_err())
            .expect("an skl event the skx tables lack");
        for level in [1, 3] {
            let mut specs = tree_specs(skx, level);
            specs.push(extra.clone());
            let unknown = vec![extra.clone()];
            assert_eq!(
                guess_other_cpu(&unknown, &specs, skx, level),
                None,
                "{extra}"
            );
        }
        // A whole skx recording imported as zen4 still gets the hint.
        let specs = tree_specs(skx, 2);
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let unknown: Vec<String> = specs
            .iter()
            .filter(|s| zen4.resolve_perf_event(s).is_err())
            .cloned()
            .collect();
        let g = guess_other_cpu(&unknown, &specs, zen4, 2).expect("an Intel model");
        assert!(["skx", "clx", "skl"].contains(&g), "{g}");
    }
}
