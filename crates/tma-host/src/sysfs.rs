//! PMU discovery from sysfs, with the root injectable so tests use fake trees
//! (`tests/fixtures/sysfs/<machine>/bus/event_source/devices/...`).
//!
//! For each PMU under `<root>/bus/event_source/devices/` we read `type`, the `format/*` field
//! layouts (`event` -> `config:0-7,32-35`), the `events/*` aliases (`slots` ->
//! `event=0x00,umask=0x4`), `caps/*`, `nr_addr_filters`, `cpus` (hybrid parts) and `rdpmc`.
//! Event terms are encoded through the PMU's own format, so an AMD event code above 0xFF lands
//! in config bits 32-35 because sysfs says so, not because we assume it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Errors from reading or interpreting sysfs.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("cannot read PMU list {path}: {source} (is sysfs mounted?)")]
    List {
        path: String,
        source: std::io::Error,
    },
    #[error("PMU {pmu}: bad `type` file content {content:?} (expected a decimal number)")]
    BadType { pmu: String, content: String },
    #[error("PMU {pmu}: bad format field {field}={content:?} (expected e.g. `config:0-7,32-35`)")]
    BadFormat {
        pmu: String,
        field: String,
        content: String,
    },
    #[error("PMU {pmu} has no format field `{term}`; it knows: {known}")]
    UnknownTerm {
        pmu: String,
        term: String,
        known: String,
    },
    #[error("PMU {pmu}: value {value:#x} does not fit in field `{term}` ({bits} bits)")]
    TooWide {
        pmu: String,
        term: String,
        value: u64,
        bits: u32,
    },
    #[error("bad event term {term:?} (expected name=value with a decimal or 0x hex value)")]
    BadTerm { term: String },
    #[error("PMU {pmu} has no event alias `{event}`")]
    UnknownAlias { pmu: String, event: String },
}

/// Which `perf_event_attr` config word a format field lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ConfigWord {
    Config,
    Config1,
    Config2,
    Config3,
}

/// A format field: a config word and bit ranges `[lo, hi]` (inclusive), filled low bits first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Format {
    pub word: ConfigWord,
    pub ranges: Vec<(u32, u32)>,
}

impl Format {
    /// Parse a `format/<field>` file: `config:0-7,32-35`, `config1:0-63`, `config:21`.
    pub fn parse(s: &str) -> Option<Format> {
        let (word, bits) = s.trim().split_once(':')?;
        let word = match word {
            "config" => ConfigWord::Config,
            "config1" => ConfigWord::Config1,
            "config2" => ConfigWord::Config2,
            "config3" => ConfigWord::Config3,
            _ => return None,
        };
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
                None => {
                    let b: u32 = part.trim().parse().ok()?;
                    (b, b)
                }
            };
            if lo > hi || hi > 63 {
                return None;
            }
            ranges.push((lo, hi));
        }
        if ranges.is_empty() {
            return None;
        }
        Some(Format { word, ranges })
    }

    /// Total width in bits.
    pub fn bits(&self) -> u32 {
        self.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum()
    }

    /// Scatter `value` into the field's bit ranges; `None` if it does not fit.
    pub fn place(&self, value: u64) -> Option<u64> {
        let bits = self.bits();
        if bits < 64 && value >> bits != 0 {
            return None;
        }
        let mut out = 0u64;
        let mut v = value;
        for &(lo, hi) in &self.ranges {
            let w = hi - lo + 1;
            let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
            out |= (v & mask) << lo;
            v = if w == 64 { 0 } else { v >> w };
        }
        Some(out)
    }
}

/// The config words an event encodes to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RawConfig {
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub config3: u64,
}

/// One PMU as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pmu {
    pub name: String,
    /// `perf_event_attr.type` for this PMU.
    pub type_: u32,
    pub formats: BTreeMap<String, Format>,
    /// Event aliases: name -> terms (`event=0x00,umask=0x4`).
    pub events: BTreeMap<String, String>,
    pub caps: BTreeMap<String, String>,
    pub nr_addr_filters: Option<u32>,
    /// CPU list the PMU covers (hybrid `cpu_core` / `cpu_atom`), raw text.
    pub cpus: Option<String>,
    /// Content of the `rdpmc` file (0 off, 1 for tasks with mmapped events, 2 any).
    pub rdpmc: Option<u32>,
}

impl Pmu {
    /// Is this PMU one core type of a hybrid part: a `cpus` file (the CPUs of that type) and
    /// a core-event format (`format/event`)? `cpu_core` and `cpu_atom` are, and so is any
    /// further type a newer part adds (`cpu_lowpower`); uncore PMUs have a `cpumask` file
    /// instead, and a uniform part's `cpu` PMU has no `cpus` file.
    pub fn is_core_type(&self) -> bool {
        self.cpus.is_some() && self.formats.contains_key("event")
    }

    /// The CPUs of the `cpus` file (empty when there is none or it does not parse).
    pub fn cpu_list(&self) -> Vec<u32> {
        self.cpus
            .as_deref()
            .and_then(|c| crate::parse_cpu_list(c.as_bytes()).ok())
            .unwrap_or_default()
    }

    /// `caps/max_precise` (0 when absent).
    pub fn max_precise(&self) -> u32 {
        self.caps
            .get("max_precise")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Encode `name=value` terms (`event=0x1a0,umask=0x1,cmask=6`) through the PMU's format.
    /// A bare term name (`edge`) means value 1.
    pub fn encode_terms(&self, terms: &str) -> Result<RawConfig, SysfsError> {
        let mut out = RawConfig::default();
        for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (name, value) = match term.split_once('=') {
                Some((n, v)) => (
                    n.trim(),
                    parse_num(v.trim()).ok_or_else(|| SysfsError::BadTerm {
                        term: term.to_string(),
                    })?,
                ),
                None => (term, 1),
            };
            // Direct config words are always allowed, as perf does.
            let (word, placed) = match name {
                "config" => (ConfigWord::Config, value),
                "config1" => (ConfigWord::Config1, value),
                "config2" => (ConfigWord::Config2, value),
                "config3" => (ConfigWord::Config3, value),
                _ => {
                    let f = self
                        .formats
                        .get(name)
                        .ok_or_else(|| SysfsError::UnknownTerm {
                            pmu: self.name.clone(),
                            term: name.to_string(),
                            known: self.formats.keys().cloned().collect::<Vec<_>>().join(", "),
                        })?;
                    let placed = f.place(value).ok_or_else(|| SysfsError::TooWide {
                        pmu: self.name.clone(),
                        term: name.to_string(),
                        value,
                        bits: f.bits(),
                    })?;
                    (f.word, placed)
                }
            };
            match word {
                ConfigWord::Config => out.config |= placed,
                ConfigWord::Config1 => out.config1 |= placed,
                ConfigWord::Config2 => out.config2 |= placed,
                ConfigWord::Config3 => out.config3 |= placed,
            }
        }
        Ok(out)
    }

    /// Encode a sysfs event alias (`slots`, `topdown-retiring`, `cpu-cycles`).
    pub fn encode_alias(&self, event: &str) -> Result<RawConfig, SysfsError> {
        let terms = self
            .events
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(event))
            .map(|(_, v)| v)
            .ok_or_else(|| SysfsError::UnknownAlias {
                pmu: self.name.clone(),
                event: event.to_string(),
            })?;
        self.encode_terms(terms)
    }
}

fn parse_num(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// All PMUs of a machine (or of a fake tree).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Pmus {
    pub root: PathBuf,
    pub pmus: Vec<Pmu>,
}

/// Names of the PMUs that count core events, in preference order.
pub const CORE_PMU_NAMES: [&str; 3] = ["cpu", "cpu_core", "cpu_atom"];

impl Pmus {
    /// Read every PMU under `<sys_root>/bus/event_source/devices` (`sys_root` is `/sys` on a
    /// real machine). Unreadable optional files are skipped; a malformed `type` or format
    /// file is an error because encoding would be wrong.
    pub fn discover(sys_root: &Path) -> Result<Pmus, SysfsError> {
        let dir = sys_root.join("bus/event_source/devices");
        let rd = std::fs::read_dir(&dir).map_err(|source| SysfsError::List {
            path: dir.display().to_string(),
            source,
        })?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut pmus = Vec::new();
        for name in names {
            let p = dir.join(&name);
            let Some(type_text) = read_trim(&p.join("type")) else {
                continue;
            };
            let type_ = type_text.parse().map_err(|_| SysfsError::BadType {
                pmu: name.clone(),
                content: type_text.clone(),
            })?;
            let mut formats = BTreeMap::new();
            for (field, content) in read_dir_files(&p.join("format")) {
                let f = Format::parse(&content).ok_or_else(|| SysfsError::BadFormat {
                    pmu: name.clone(),
                    field: field.clone(),
                    content: content.clone(),
                })?;
                formats.insert(field, f);
            }
            let events = read_dir_files(&p.join("events"))
                .into_iter()
                // `.scale` / `.unit` companions are not events.
                .filter(|(k, _)| !k.contains('.'))
                .collect();
            let caps = read_dir_files(&p.join("caps")).into_iter().collect();
            pmus.push(Pmu {
                nr_addr_filters: read_trim(&p.join("nr_addr_filters")).and_then(|s| s.parse().ok()),
                cpus: read_trim(&p.join("cpus")),
                rdpmc: read_trim(&p.join("rdpmc")).and_then(|s| s.parse().ok()),
                name,
                type_,
                formats,
                events,
                caps,
            });
        }
        Ok(Pmus {
            root: sys_root.to_path_buf(),
            pmus,
        })
    }

    /// A PMU by name.
    pub fn get(&self, name: &str) -> Option<&Pmu> {
        self.pmus.iter().find(|p| p.name == name)
    }

    /// The core-event PMUs present (`cpu`, or `cpu_core` + `cpu_atom` on hybrid parts, and
    /// any further core type, see [`Pmus::core_types`]).
    pub fn core_pmus(&self) -> Vec<&Pmu> {
        let mut v: Vec<&Pmu> = CORE_PMU_NAMES.iter().filter_map(|n| self.get(n)).collect();
        for p in self.core_types() {
            if !v.iter().any(|q| q.name == p.name) {
                v.push(p);
            }
        }
        v
    }

    /// The core types of a hybrid part, one PMU each ([`Pmu::is_core_type`]): N of them, not
    /// two. `cpu_core` first, then `cpu_atom`, then any others by name. Empty on a uniform
    /// part (its `cpu` PMU has no `cpus` file).
    pub fn core_types(&self) -> Vec<&Pmu> {
        let rank = |p: &Pmu| {
            CORE_PMU_NAMES
                .iter()
                .position(|n| *n == p.name)
                .unwrap_or(CORE_PMU_NAMES.len())
        };
        let mut v: Vec<&Pmu> = self.pmus.iter().filter(|p| p.is_core_type()).collect();
        v.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.name.cmp(&b.name)));
        v
    }

    /// Hybrid part: a `cpu_core` or `cpu_atom` PMU, or more than one core type.
    pub fn is_hybrid(&self) -> bool {
        self.get("cpu_core").is_some()
            || self.get("cpu_atom").is_some()
            || self.core_types().len() > 1
    }

    /// Is there a hardware core PMU at all?
    pub fn has_core_pmu(&self) -> bool {
        !self.core_pmus().is_empty()
    }

    /// Why this process cannot count hardware events on `host`, or `None` where it can try:
    /// a core PMU in sysfs, and `perf_event_paranoid` <= 2 or CAP_PERFMON / CAP_SYS_ADMIN.
    /// Tests that need counters skip with this reason.
    pub fn why_no_hardware_counting(host: &crate::Host) -> Option<String> {
        let pmus = Pmus::discover(&host.sys).unwrap_or_default();
        if !pmus.has_core_pmu() {
            return Some(format!(
                "no core PMU in {}/bus/event_source/devices",
                host.sys.display()
            ));
        }
        const CAP_SYS_ADMIN: u32 = 21;
        const CAP_PERFMON: u32 = 38;
        let caps = host.effective_capabilities().unwrap_or(0);
        let capable = caps & ((1 << CAP_SYS_ADMIN) | (1 << CAP_PERFMON)) != 0;
        match host.perf_event_paranoid() {
            Ok(p) if p > 2 && !capable => Some(format!(
                "perf_event_paranoid is {p}; 2 or less (or CAP_PERFMON) is needed"
            )),
            _ => None,
        }
    }

    /// PERF_METRICS topdown events are exposed (ICL+ P-core with the capability enumerated).
    pub fn has_perf_metrics(&self, pmu: &str) -> bool {
        self.get(pmu).is_some_and(|p| {
            p.events.contains_key("slots") && p.events.contains_key("topdown-retiring")
        })
    }
}

/// The core-event PMUs under `<sys_root>/bus/event_source/devices` and their
/// `perf_event_attr.type`: those of [`CORE_PMU_NAMES`] in that order, then any further core
/// type of a hybrid part by name (a `cpu_…` PMU with a `cpus` file, as `cpu_lowpower`, the
/// kernel's name for the low-power E-cores of Arrow Lake-H and later). From the `type` and
/// `cpus` files alone: cheaper than [`Pmus::discover`] and never an error (a PMU without a
/// numeric `type` is absent, as on a VM without a virtual PMU).
pub fn core_pmu_types(sys_root: &Path) -> Vec<(&'static str, u32)> {
    let dir = sys_root.join("bus/event_source/devices");
    let type_of = |name: &str| read_trim(&dir.join(name).join("type"))?.parse().ok();
    let mut out: Vec<(&'static str, u32)> = CORE_PMU_NAMES
        .iter()
        .filter_map(|&name| Some((name, type_of(name)?)))
        .collect();
    let mut more: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("cpu_")
                && !CORE_PMU_NAMES.contains(&n.as_str())
                && dir.join(n).join("cpus").is_file()
        })
        .collect();
    more.sort();
    for name in more {
        if let Some(t) = type_of(&name) {
            out.push((core_pmu_name(&name), t));
        }
    }
    out
}

/// A core PMU's name for the life of the process: one of [`CORE_PMU_NAMES`], else kept once
/// per name (a part has a handful of core types).
pub fn core_pmu_name(name: &str) -> &'static str {
    use std::sync::{Mutex, OnceLock};
    if let Some(n) = CORE_PMU_NAMES.iter().find(|n| **n == name) {
        return n;
    }
    static NAMES: OnceLock<Mutex<Vec<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(n);
    n
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_dir_files(dir: &Path) -> Vec<(String, String)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            read_trim(&e.path()).map(|c| (name, c))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        tma_testkit::fixture("sysfs").join(name)
    }

    #[test]
    fn format_parse_and_place() {
        let f = Format::parse("config:0-7,32-35").unwrap();
        assert_eq!(f.bits(), 12);
        assert_eq!(f.place(0x1A0), Some(0x1_0000_00A0));
        assert_eq!(f.place(0x1000), None);
        let one = Format::parse("config:21").unwrap();
        assert_eq!(one.place(1), Some(1 << 21));
        assert_eq!(one.place(2), None);
        let wide = Format::parse("config1:0-63").unwrap();
        assert_eq!(wide.place(u64::MAX), Some(u64::MAX));
        assert!(Format::parse("config:7-0").is_none());
        assert!(Format::parse("bogus:1").is_none());
        assert!(Format::parse("config:0-64").is_none());
    }

    #[test]
    fn spr_tree_topdown_aliases() {
        let pmus = Pmus::discover(&fixture("spr")).unwrap();
        let cpu = pmus.get("cpu").unwrap();
        assert_eq!(cpu.type_, 4);
        assert_eq!(cpu.max_precise(), 3);
        assert_eq!(cpu.rdpmc, Some(1));
        assert!(pmus.has_perf_metrics("cpu"));
        assert!(!pmus.is_hybrid());
        assert_eq!(cpu.encode_alias("slots").unwrap().config, 0x0400);
        assert_eq!(cpu.encode_alias("topdown-retiring").unwrap().config, 0x8000);
        assert_eq!(
            cpu.encode_alias("topdown-mem-bound").unwrap().config,
            0x8700
        );
        // UOPS_RETIRED.MS:c1:e1 on SPR: event 0xC2, umask 0x04, cmask 1, edge.
        let c = cpu
            .encode_terms("event=0xc2,umask=0x04,cmask=1,edge")
            .unwrap();
        assert_eq!(c.config, 0x01_04_04_C2);
        // OCR with an offcore response value in config1.
        let c = cpu
            .encode_terms("event=0x2a,umask=0x01,offcore_rsp=0x10003C0001")
            .unwrap();
        assert_eq!((c.config, c.config1), (0x012A, 0x10003C0001));
        assert!(matches!(
            cpu.encode_terms("event=0x100"),
            Err(SysfsError::TooWide { .. })
        ));
        assert!(matches!(
            cpu.encode_terms("bogus=1"),
            Err(SysfsError::UnknownTerm { .. })
        ));
    }

    #[test]
    fn zen4_extended_event_code() {
        let pmus = Pmus::discover(&fixture("zen4")).unwrap();
        let cpu = pmus.get("cpu").unwrap();
        // de_no_dispatch_per_slot.no_ops_from_frontend, cmask 6 (pmu-data README 5.1).
        let c = cpu.encode_terms("event=0x1a0,umask=0x01,cmask=6").unwrap();
        assert_eq!(c.config, 0x1060001A0);
        let c = cpu.encode_terms("event=0x1a0,umask=0x1e").unwrap();
        assert_eq!(c.config, 0x100001EA0);
        assert!(!pmus.has_perf_metrics("cpu"));
    }

    #[test]
    fn adl_hybrid_pmus() {
        let pmus = Pmus::discover(&fixture("adl")).unwrap();
        assert!(pmus.is_hybrid());
        let names: Vec<_> = pmus.core_pmus().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["cpu_core", "cpu_atom"]);
        assert_eq!(pmus.get("cpu_atom").unwrap().type_, 10);
        let types = core_pmu_types(&fixture("adl"));
        assert_eq!(types.iter().map(|t| t.0).collect::<Vec<_>>(), names);
        assert_eq!(types[1], ("cpu_atom", 10));
        assert_eq!(pmus.get("cpu_atom").unwrap().cpus.as_deref(), Some("16-23"));
        assert!(pmus.has_perf_metrics("cpu_core"));
        // E-core "topdown" events are generic events, not PERF_METRICS.
        assert!(!pmus.has_perf_metrics("cpu_atom"));
        let atom = pmus.get("cpu_atom").unwrap();
        assert_eq!(
            atom.encode_alias("topdown-bad-spec").unwrap().config,
            0x0673
        );
    }

    fn hybrid_fixture(name: &str) -> PathBuf {
        tma_testkit::fixture("hybrid").join(name).join("sys")
    }

    #[test]
    fn core_types_are_found_by_their_cpus_file_two_and_three() {
        let two = Pmus::discover(&hybrid_fixture("two-types")).unwrap();
        let names: Vec<_> = two.core_types().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["cpu_core", "cpu_atom"]);
        assert_eq!(two.core_types()[1].cpu_list(), [2, 3]);
        let three = Pmus::discover(&hybrid_fixture("three-types")).unwrap();
        let names: Vec<_> = three.core_types().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["cpu_core", "cpu_atom", "cpu_lowpower"]);
        let lp = three.get("cpu_lowpower").unwrap();
        assert_eq!((lp.type_, lp.cpu_list()), (12, vec![4, 5]));
        assert!(three.is_hybrid() && three.has_core_pmu());
        assert_eq!(three.core_pmus().len(), 3);
        // An uncore PMU (a `cpumask` file, no `cpus`) is no core type.
        assert!(three.get("uncore_imc_0").is_some_and(|p| !p.is_core_type()));
        // A uniform part: `cpu` without a `cpus` file, no core types.
        let spr = Pmus::discover(&fixture("spr")).unwrap();
        assert!(spr.core_types().is_empty());
        assert!(!spr.is_hybrid());
    }

    #[test]
    fn this_vm_has_no_core_pmu() {
        let pmus = Pmus::discover(&fixture("this-vm")).unwrap();
        assert!(!pmus.has_core_pmu());
        assert_eq!(pmus.get("software").unwrap().type_, 1);
        assert_eq!(
            pmus.get("msr").unwrap().encode_alias("tsc").unwrap().config,
            0
        );
        let names: Vec<_> = pmus.pmus.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["breakpoint", "msr", "software", "tracepoint", "uprobe"]
        );
    }

    #[test]
    fn missing_root_is_an_error() {
        assert!(Pmus::discover(Path::new("/nonexistent/sys")).is_err());
        assert!(core_pmu_types(Path::new("/nonexistent/sys")).is_empty());
        // Any further core type (a `cpu_…` PMU with a `cpus` file), after the known ones;
        // an uncore PMU (a `cpumask` file) is not one.
        let three = hybrid_fixture("three-types");
        assert_eq!(
            core_pmu_types(&three),
            [("cpu_core", 4), ("cpu_atom", 10), ("cpu_lowpower", 12)]
        );
        assert!(std::ptr::eq(
            core_pmu_name("cpu_lowpower"),
            core_pmu_name("cpu_lowpower")
        ));
        assert!(core_pmu_types(&fixture("this-vm")).is_empty());
    }
}
