//! Which CPU model's tables to use: `--cpu NAME`, else the one the recording names, else this
//! machine's (from its cpuinfo).

use tma_catalog::Model;
use tma_perf::host::Host;

use crate::StatError;

/// Where the CPU model came from, for the header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    /// `--cpu NAME`.
    Flag,
    /// A `# cpu: KEY` line (or the snapshot's CPU) in the recording.
    Recording,
    /// This machine's cpuinfo.
    ThisMachine,
}

impl CpuSource {
    /// The words of the header line.
    pub fn describe(&self) -> &'static str {
        match self {
            CpuSource::Flag => "from --cpu",
            CpuSource::Recording => "named in the recording",
            CpuSource::ThisMachine => "identified from this machine",
        }
    }
}

/// The model for `--cpu NAME`, else the one named by the recording, else this machine's
/// (identified from the cpuinfo of `host`, normally `/proc/cpuinfo`).
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
    let models = tma_catalog::identify(&vendor, family, model, stepping)?;
    match models.first() {
        Some(m) => Ok((m, CpuSource::ThisMachine)),
        None => Err(StatError::NoTable),
    }
}

/// The model (other than `current`) on which most of `unknown` resolve, if that is at least
/// half of them: "these events look like a Sapphire Rapids recording, pass --cpu spr".
pub fn guess_other_cpu(unknown: &[String], current: &Model) -> Option<&'static str> {
    let mut best: Option<(&'static str, usize)> = None;
    for m in tma_catalog::models() {
        if m.key == current.key {
            continue;
        }
        let n = unknown
            .iter()
            .filter(|s| m.resolve_perf_event(s).is_ok())
            .count();
        if n > 0 && best.is_none_or(|(_, b)| n > b) {
            best = Some((m.key, n));
        }
    }
    best.filter(|&(_, n)| 2 * n >= unknown.len())
        .map(|(k, _)| k)
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
        let g = guess_other_cpu(&spr_events, zen4);
        assert!(g.is_some(), "an Intel model should claim Intel events");
        assert_eq!(guess_other_cpu(&["no.such.event".to_string()], zen4), None);
    }
}
