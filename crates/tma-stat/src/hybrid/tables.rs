//! The core types of a hybrid part and the tables each is read with: their labels
//! (`P-core`, `E-core`), the tables of a part, `--cputype`, and the cycles event that
//! weighs each type's tree.

use std::sync::{Mutex, OnceLock};

use tma_catalog::{CoreKind, Model};
use tma_host::sysfs::Pmus;
use tma_host::Host;
use tma_perf::event::EventSpec;

use crate::error::usage;
use crate::StatError;

/// One core type of the machine and the table it is read with.
#[derive(Debug, Clone)]
pub struct CoreTable {
    /// Its PMU: `cpu_core`, `cpu_atom`, `cpu_lowpower`...
    pub pmu: String,
    /// How trees and notes name it: `P-core`, `E-core`, else the PMU name.
    pub label: &'static str,
    pub model: &'static Model,
    /// No table of its own: read with the E-core table of the part (its events retargeted
    /// to this PMU).
    pub borrowed: bool,
}

/// How a core type is named: `P-core` (`cpu_core`), `E-core` (`cpu_atom`), else its PMU name
/// (leaked once per name: a part has a handful of core types).
pub fn core_label(pmu: &str) -> &'static str {
    match pmu {
        "cpu_core" => "P-core",
        "cpu_atom" => "E-core",
        other => {
            static NAMES: OnceLock<Mutex<Vec<&'static str>>> = OnceLock::new();
            let mut names = NAMES
                .get_or_init(Default::default)
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(n) = names.iter().find(|n| **n == other) {
                return n;
            }
            let n: &'static str = Box::leak(other.to_string().into_boxed_str());
            names.push(n);
            n
        }
    }
}

/// The tables of a hybrid part, P-core table first: `adl` gives `[adl, adl-e]`, and so does
/// `adl-e`. Empty for a uniform part's table.
pub fn core_family(model: &'static Model) -> Vec<&'static Model> {
    let stem = model.key.strip_suffix("-e").unwrap_or(model.key);
    [stem.to_string(), format!("{stem}-e")]
        .iter()
        .filter_map(|k| tma_catalog::by_name(k).ok())
        .filter(|m| m.core_kind != CoreKind::Uniform)
        .collect()
}

/// Each core type's table: the table of the part (`--cpu` or this machine's) whose PMU it
/// is; a further type without a table of its own is read with the part's E-core table.
pub(crate) fn core_tables(
    model: &'static Model,
    pmus: &[&str],
) -> Result<Vec<CoreTable>, StatError> {
    let family = core_family(model);
    if family.is_empty() {
        return Err(usage(format!(
            "this machine has {} core types ({}), but the {} tables are for a part with one: \
             pass --cpu with the tables of this hybrid part (adl, mtl), or --cputype TYPE",
            pmus.len(),
            pmus.join(", "),
            model.key
        )));
    }
    pmus.iter()
        .map(|&pmu| {
            let own = family.iter().find(|m| m.pmu == pmu);
            let efficiency = family
                .iter()
                .find(|m| m.core_kind == CoreKind::Efficiency && pmu != "cpu_core");
            match (own, efficiency) {
                (Some(m), _) => Ok(CoreTable {
                    pmu: pmu.to_string(),
                    label: core_label(pmu),
                    model: m,
                    borrowed: false,
                }),
                (None, Some(m)) => Ok(CoreTable {
                    pmu: pmu.to_string(),
                    label: core_label(pmu),
                    model: m,
                    borrowed: true,
                }),
                (None, None) => Err(usage(format!(
                    "no table for the core type {pmu} of {}: the {} tables know {}",
                    model.name,
                    model.key,
                    family.iter().map(|m| m.pmu).collect::<Vec<_>>().join(", ")
                ))),
            }
        })
        .collect()
}

/// The core types a recording of a hybrid part covers, each with the table it is read with:
/// this machine's (`host`) when it is a hybrid part, a further type without a table of its
/// own (`cpu_lowpower`) read with the E-core table; elsewhere the types the tables know.
/// With them, `true` when they are this machine's. Empty for a uniform part's table.
pub fn recording_core_types(
    model: &'static Model,
    host: &Host,
) -> Result<(Vec<CoreTable>, bool), StatError> {
    let family = core_family(model);
    if family.is_empty() {
        return Ok((Vec::new(), false));
    }
    let pmus = Pmus::discover(&host.sys).unwrap_or_default();
    let here: Vec<&str> = pmus.core_types().iter().map(|p| p.name.as_str()).collect();
    if here.len() > 1 {
        return Ok((core_tables(model, &here)?, true));
    }
    let tabled: Vec<&str> = family.iter().map(|m| m.pmu).collect();
    Ok((core_tables(model, &tabled)?, false))
}

/// `--cputype TYPE`: the one core type it names, by PMU (`cpu_atom`), by perf's short name
/// (`atom`, `core`) or by label (`E-core`). `whose`: whose types they are, for the error
/// that lists them (`this machine's`, `the adl tables'`).
pub fn pick_core_type(types: &[&str], want: &str, whose: &str) -> Result<String, StatError> {
    let w = want.to_ascii_lowercase();
    types
        .iter()
        .find(|t| {
            **t == w
                || t.strip_prefix("cpu_") == Some(w.as_str())
                || core_label(t).eq_ignore_ascii_case(&w)
        })
        .map(|t| t.to_string())
        .ok_or_else(|| {
            usage(format!(
                "--cputype {want}: {whose} core types are {}",
                types
                    .iter()
                    .map(|t| format!(
                        "{} ({})",
                        t.strip_prefix("cpu_").unwrap_or(t),
                        core_label(t)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The event that counts a core type's unhalted cycles (fixed counter 1): what the merged
/// view is weighted by.
pub(crate) fn cycles_event(model: &Model) -> Option<EventSpec> {
    model.events.iter().find_map(|e| {
        let enc = model.encode(e.name).ok()?;
        let cycles = enc.kind == tma_catalog::EventKind::Core
            && enc.fixed == Some(1)
            && !enc.exclude_kernel
            && !enc.exclude_user;
        if cycles {
            EventSpec::from_encoding(&enc)
        } else {
            None
        }
    })
}
