//! Which table fits this CPU: the model list, `--cpu NAME` lookup, CPUID matching with the
//! mapfile rules (pmu-data README 2.1-2.3) and `/proc/cpuinfo` parsing.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;

use crate::error::CatalogError;
use crate::types::{CoreKind, Model};
use crate::{amd, generated};

/// Every model the catalog has: the generated Intel tables, the AMD ones, then the Arm
/// Neoverse ones.
pub fn models() -> &'static [&'static Model] {
    static ALL: OnceLock<Vec<&'static Model>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<&'static Model> = generated::MODELS.to_vec();
        v.push(&amd::ZEN4);
        v.push(&amd::ZEN5);
        v.extend(generated::arm::MODELS.iter().copied());
        v
    })
}

/// Other names accepted by [`by_name`] (after lower-casing and removing `-`, `_`, spaces).
const ALIASES: &[(&str, &str)] = &[
    ("skylakex", "skx"),
    ("skylakesp", "skx"),
    ("cascadelake", "clx"),
    ("cascadelakex", "clx"),
    ("cooperlake", "clx"),
    ("cpx", "clx"),
    ("icelakex", "icx"),
    ("icelakesp", "icx"),
    ("sapphirerapids", "spr"),
    ("emeraldrapids", "emr"),
    ("graniterapids", "gnr"),
    ("skylake", "skl"),
    ("kabylake", "skl"),
    ("kbl", "skl"),
    ("coffeelake", "skl"),
    ("cfl", "skl"),
    ("cometlake", "skl"),
    ("cml", "skl"),
    ("icelake", "icl"),
    ("tigerlake", "tgl"),
    ("alderlake", "adl"),
    ("raptorlake", "adl"),
    ("rpl", "adl"),
    ("meteorlake", "mtl"),
    // E-cores (Gracemont on Alder/Raptor Lake and Alder Lake-N, Crestmont on Meteor Lake).
    ("gracemont", "adl-e"),
    ("alderlakee", "adl-e"),
    ("raptorlakee", "adl-e"),
    ("rple", "adl-e"),
    ("alderlaken", "adl-e"),
    ("adln", "adl-e"),
    ("crestmont", "mtl-e"),
    ("meteorlakee", "mtl-e"),
    ("genoa", "zen4"),
    ("amdzen4", "zen4"),
    ("turin", "zen5"),
    ("amdzen5", "zen5"),
    // Arm Neoverse cores, by core and by the server parts built on them.
    ("n1", "neoverse-n1"),
    ("armn1", "neoverse-n1"),
    ("graviton2", "neoverse-n1"),
    ("altra", "neoverse-n1"),
    ("amperealtra", "neoverse-n1"),
    ("v1", "neoverse-v1"),
    ("armv1", "neoverse-v1"),
    ("graviton3", "neoverse-v1"),
    ("n2", "neoverse-n2"),
    ("armn2", "neoverse-n2"),
    ("cobalt100", "neoverse-n2"),
    ("v2", "neoverse-v2"),
    ("armv2", "neoverse-v2"),
    ("graviton4", "neoverse-v2"),
    ("grace", "neoverse-v2"),
    ("axion", "neoverse-v2"),
    ("n3", "neoverse-n3"),
    ("armn3", "neoverse-n3"),
    ("v3", "neoverse-v3"),
    ("armv3", "neoverse-v3"),
];

fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The supported names, for error messages: keys, then aliases.
pub fn supported_names() -> String {
    let keys: Vec<&str> = models().iter().map(|m| m.key).collect();
    let aliases: Vec<&str> = ALIASES.iter().map(|(a, _)| *a).collect();
    format!("{} (aliases: {})", keys.join(", "), aliases.join(", "))
}

/// The model for a `--cpu NAME` argument: a key (`spr`) or an alias (`sapphirerapids`,
/// `raptorlake`), case-insensitive; `-`, `_` and spaces are ignored.
pub fn by_name(name: &str) -> Result<&'static Model, CatalogError> {
    let n = normalize(name);
    let key = ALIASES
        .iter()
        .find(|(a, _)| *a == n)
        .map(|(_, k)| normalize(k))
        .unwrap_or(n);
    models()
        .iter()
        .copied()
        .find(|m| normalize(m.key) == key)
        .ok_or_else(|| CatalogError::UnknownCpuName {
            name: name.to_string(),
            supported: supported_names(),
        })
}

/// One mapfile row: a POSIX ERE over the perf CPUID string and what it means.
struct Row {
    pattern: &'static str,
    /// Our model key, or `None` when we have no table (the reason says why).
    key: Option<&'static str>,
    reason: &'static str,
}

/// AMD rows in the kernel mapfile's order (first match wins), README 2.3.
const AMD_ROWS: &[Row] = &[
    Row {
        pattern: "AuthenticAMD-23-([12][0-9A-F]|[0-9A-F])",
        key: None,
        reason: "AMD Zen 1 (family 0x17): Zen 1 and Zen 2 have no pipeline-utilization (topdown) events",
    },
    Row {
        pattern: "AuthenticAMD-23-[[:xdigit:]]+",
        key: None,
        reason: "AMD Zen 2 (family 0x17): Zen 1 and Zen 2 have no pipeline-utilization (topdown) events",
    },
    Row {
        pattern: "AuthenticAMD-25-([245][[:xdigit:]]|[[:xdigit:]])",
        key: None,
        reason: "AMD Zen 3 (family 0x19): Zen 3 has no pipeline-utilization (topdown) events",
    },
    Row {
        pattern: "AuthenticAMD-25-[[:xdigit:]]+",
        key: Some("zen4"),
        reason: "",
    },
    Row {
        pattern: "AuthenticAMD-26-([12467][[:xdigit:]]|[[:xdigit:]])",
        key: Some("zen5"),
        reason: "",
    },
    Row {
        pattern: "AuthenticAMD-26-[[:xdigit:]]+",
        key: None,
        reason: "AMD Zen 6 (family 0x1A): no Zen 6 table yet; `--cpu zen5` is the closest (same formulas and encodings)",
    },
];

/// perf's CPUID string: `<vendor>-<family decimal>-<MODEL hex>-<stepping hex>` (README 2.1).
pub fn cpuid_string(vendor: &str, family: u32, model: u32, stepping: u32) -> String {
    format!("{vendor}-{family}-{model:X}-{stepping:X}")
}

/// Whole-string POSIX-ERE match of a mapfile pattern, with perf's rule that a pattern
/// without a stepping field is matched against the CPUID string without its stepping.
fn row_matches(pattern: &'static str, full: &str, without_stepping: &str) -> bool {
    let has_stepping = pattern.split('-').count() >= 4;
    let subject = if has_stepping { full } else { without_stepping };
    // The patterns are our own constants or come from the mapfile through the generator;
    // a pattern the regex crate rejects simply never matches. Each is compiled once per
    // process (compiling the Intel rows took milliseconds for every identification).
    static COMPILED: OnceLock<Mutex<HashMap<&'static str, Option<Regex>>>> = OnceLock::new();
    let mut cache = COMPILED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry(pattern)
        .or_insert_with(|| Regex::new(&format!("^(?:{pattern})$")).ok())
        .as_ref()
        .is_some_and(|re| re.is_match(subject))
}

/// The models for a CPU identified by CPUID (vendor string from leaf 0, family / model /
/// stepping computed as in README 2.1). Hybrid parts give the P-core model first, then the
/// E-core model (`cpu_atom` PMU): Alder/Raptor Lake `[adl, adl-e]`, Meteor Lake
/// `[mtl, mtl-e]`. Alder Lake-N (E-cores only) gives `[adl-e]`. Which logical CPU is which
/// core type is CPUID leaf 0x1A (or the sysfs `cpu_core` / `cpu_atom` cpus lists); the
/// caller picks the model by [`Model::pmu`] / [`Model::core_kind`].
pub fn identify(
    vendor: &str,
    family: u32,
    model: u32,
    stepping: u32,
) -> Result<Vec<&'static Model>, CatalogError> {
    let full = cpuid_string(vendor, family, model, stepping);
    let short = format!("{vendor}-{family}-{model:X}");
    let unsupported = |reason: &str| CatalogError::UnsupportedCpu {
        cpuid: full.clone(),
        reason: if reason.is_empty() {
            String::new()
        } else {
            format!(" ({reason})")
        },
        supported: supported_names(),
    };
    let mut found: Vec<&'static Model> = Vec::new();
    if vendor == "GenuineIntel" {
        for (pattern, key) in generated::CPUID_ROWS {
            if row_matches(pattern, &full, &short) {
                if let Ok(m) = by_name(key) {
                    if !found.iter().any(|f| std::ptr::eq(*f, m)) {
                        found.push(m);
                    }
                }
            }
        }
        if found.is_empty() {
            return Err(unsupported("no TMA table for this Intel model"));
        }
        // P-core first.
        found.sort_by_key(|m| m.core_kind == CoreKind::Efficiency);
        return Ok(found);
    }
    if vendor == "AuthenticAMD" {
        return match AMD_ROWS
            .iter()
            .find(|r| row_matches(r.pattern, &full, &short))
        {
            Some(Row { key: Some(k), .. }) => Ok(vec![by_name(k)?]),
            Some(r) => Err(unsupported(r.reason)),
            None => Err(unsupported(
                "no pipeline-utilization table for this AMD family",
            )),
        };
    }
    if vendor == ARM_VENDOR {
        return generated::arm::CPU_PARTS
            .iter()
            .find(|(imp, part, _)| *imp == ARM_IMPLEMENTER && *part == model)
            .map(|(_, _, k)| by_name(k).map(|m| vec![m]))
            .unwrap_or_else(|| {
                Err(CatalogError::UnsupportedCpu {
                    cpuid: format!("ARM implementer 0x41, CPU part {model:#x}"),
                    reason: " (no table for this Arm core; the Neoverse tables are N1 0xd0c, \
                             V1 0xd40, N2 0xd49, V2 0xd4f, N3 0xd8e, V3 0xd84)"
                        .to_string(),
                    supported: supported_names(),
                })
            });
    }
    if let Some(imp) = vendor.strip_prefix(ARM_OTHER_IMPLEMENTER) {
        return Err(CatalogError::UnsupportedCpu {
            cpuid: format!("Arm implementer {imp}, CPU part {model:#x}"),
            reason: " (only Arm Ltd's own Neoverse cores, implementer 0x41, have tables)"
                .to_string(),
            supported: supported_names(),
        });
    }
    Err(unsupported("unknown CPU vendor"))
}

/// The vendor [`parse_cpuinfo`] gives for `CPU implementer : 0x41` (Arm Ltd), as `lscpu`
/// names it; [`identify`] then takes the `CPU part` as the model.
pub const ARM_VENDOR: &str = "ARM";
/// `CPU implementer` of Arm Ltd's own cores.
pub const ARM_IMPLEMENTER: u32 = 0x41;
/// Prefix of the vendor [`parse_cpuinfo`] gives for other Arm implementers
/// (`Arm implementer 0xc0`: Ampere's own cores, and so on).
const ARM_OTHER_IMPLEMENTER: &str = "Arm implementer ";

/// `(vendor, family, model, stepping)` of the first processor in `/proc/cpuinfo` text
/// (decimal numbers, as the kernel prints them on x86).
///
/// On Arm (`CPU implementer`, `CPU architecture`, `CPU variant`, `CPU part`, `CPU revision`
/// lines, hex or decimal): vendor [`ARM_VENDOR`] for implementer 0x41 (else
/// `Arm implementer 0xNN`), family = the architecture (8), model = the part number
/// (0xd4f for Neoverse V2), stepping = variant << 4 | revision.
pub fn parse_cpuinfo(bytes: &[u8]) -> Result<(String, u32, u32, u32), CatalogError> {
    let text = String::from_utf8_lossy(bytes);
    let mut vendor = None;
    let mut family = None;
    let mut model = None;
    let mut stepping = None;
    let mut arm = ArmIds::default();
    for line in text.lines() {
        if line.trim().is_empty() && (vendor.is_some() || arm.implementer.is_some()) {
            break; // end of the first processor block
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let num = |what: &str| {
            v.parse::<u32>().map_err(|_| {
                CatalogError::BadCpuinfo(format!("field `{what}` is `{v}`, not a decimal number"))
            })
        };
        match k {
            "vendor_id" => vendor = Some(v.to_string()),
            "cpu family" => family = Some(num("cpu family")?),
            "model" => model = Some(num("model")?),
            "stepping" => stepping = Some(num("stepping")?),
            "CPU implementer" => arm.implementer = Some(arm_num(k, v)?),
            "CPU architecture" => arm.architecture = Some(arm_num(k, v)?),
            "CPU variant" => arm.variant = Some(arm_num(k, v)?),
            "CPU part" => arm.part = Some(arm_num(k, v)?),
            "CPU revision" => arm.revision = Some(arm_num(k, v)?),
            _ => {}
        }
    }
    if vendor.is_none() {
        if let Some(imp) = arm.implementer {
            let missing = |f: &str| CatalogError::BadCpuinfo(format!("no `{f}` line"));
            let vendor = if imp == ARM_IMPLEMENTER {
                ARM_VENDOR.to_string()
            } else {
                format!("{ARM_OTHER_IMPLEMENTER}{imp:#x}")
            };
            return Ok((
                vendor,
                arm.architecture.unwrap_or(8),
                arm.part.ok_or_else(|| missing("CPU part"))?,
                (arm.variant.unwrap_or(0) << 4) | arm.revision.unwrap_or(0),
            ));
        }
    }
    let missing = |f: &str| CatalogError::BadCpuinfo(format!("no `{f}` line"));
    Ok((
        vendor.ok_or_else(|| missing("vendor_id"))?,
        family.ok_or_else(|| missing("cpu family"))?,
        model.ok_or_else(|| missing("model"))?,
        stepping.ok_or_else(|| missing("stepping"))?,
    ))
}

/// The Arm identification lines of a `/proc/cpuinfo` processor block.
#[derive(Default)]
struct ArmIds {
    implementer: Option<u32>,
    architecture: Option<u32>,
    variant: Option<u32>,
    part: Option<u32>,
    revision: Option<u32>,
}

/// An Arm cpuinfo number: `0x41` (hex) or `8` (decimal).
fn arm_num(field: &str, v: &str) -> Result<u32, CatalogError> {
    let r = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => v.parse::<u32>(),
    };
    r.map_err(|_| CatalogError::BadCpuinfo(format!("field `{field}` is `{v}`, not a number")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[&Model]) -> Vec<&'static str> {
        v.iter().map(|m| m.key).collect()
    }

    #[test]
    fn amd_rows_first_match_wins() {
        assert_eq!(
            keys(&identify("AuthenticAMD", 25, 0x61, 2).unwrap()),
            ["zen4"]
        );
        assert_eq!(
            keys(&identify("AuthenticAMD", 25, 0x11, 1).unwrap()),
            ["zen4"]
        );
        assert_eq!(
            keys(&identify("AuthenticAMD", 26, 0x44, 0).unwrap()),
            ["zen5"]
        );
        assert_eq!(
            keys(&identify("AuthenticAMD", 26, 0x2, 0).unwrap()),
            ["zen5"]
        );
        // Zen 3 models inside family 25.
        for m in [0x01, 0x21, 0x44, 0x50] {
            let e = identify("AuthenticAMD", 25, m, 0).unwrap_err().to_string();
            assert!(e.contains("Zen 3"), "{m:#x}: {e}");
        }
        let e = identify("AuthenticAMD", 23, 0x31, 0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Zen 2") && e.contains("--cpu") && e.contains("--import"),
            "{e}"
        );
        assert!(e.contains("AuthenticAMD-23-31-0"), "{e}");
        let e = identify("AuthenticAMD", 23, 0x01, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Zen 1"), "{e}");
        let e = identify("AuthenticAMD", 26, 0x50, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Zen 6"), "{e}");
    }

    #[test]
    fn supported_list_in_errors() {
        let e = by_name("pentium4").unwrap_err().to_string();
        for k in ["zen4", "zen5", "sapphirerapids"] {
            assert!(e.contains(k), "{e}");
        }
        let e = identify("HygonGenuine", 24, 0, 0).unwrap_err().to_string();
        assert!(e.contains("--cpu NAME") && e.contains("zen4"), "{e}");
    }

    #[test]
    fn names_and_aliases() {
        assert_eq!(by_name("ZEN4").unwrap().key, "zen4");
        assert_eq!(by_name("Genoa").unwrap().key, "zen4");
        assert_eq!(by_name("turin").unwrap().key, "zen5");
    }

    #[test]
    fn cpuinfo() {
        let text = b"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9654\nstepping\t: 1\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n";
        assert_eq!(
            parse_cpuinfo(text).unwrap(),
            ("AuthenticAMD".to_string(), 25, 17, 1)
        );
        assert!(parse_cpuinfo(b"garbage\x00\xff").is_err());
        let e = parse_cpuinfo(b"vendor_id : X\ncpu family : six\n").unwrap_err();
        assert!(e.to_string().contains("six"));
    }
}
