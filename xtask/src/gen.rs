//! The converter: Intel perfmon JSON (BSD-3-Clause) -> Rust tables in
//! `crates/tma-catalog/src/generated/`. Pure function of the data folder, deterministic.
//! The E-core (`cpu_atom`) tables, for which perfmon has no metrics, are built in
//! [`ecore`] from a hand-written tree joined with the perfmon E-core event files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

mod amd;
mod arm;
#[path = "../../crates/tma-catalog/src/conversions.rs"]
mod conversions;
#[path = "../../crates/tma-catalog/src/descriptions.rs"]
mod descriptions;
mod ecore;

/// Where the generated files go, relative to the workspace root.
pub const OUT_DIR: &str = "crates/tma-catalog/src/generated";

/// One platform we convert.
struct Platform {
    key: &'static str,
    name: &'static str,
    /// perfmon folder under `intel/`.
    dir: &'static str,
    /// Core event file (P-core file on hybrids).
    core: &'static str,
    metrics: &'static str,
    fp_arith: Option<&'static str>,
    retire_latency: Option<&'static str>,
    hybrid: bool,
    /// Issue width used by TMA (slots per cycle). Not a field of the perfmon JSON; from the
    /// microarchitectures: Skylake-family 4-wide (the SKL/SKX/CLX metrics compute slots as
    /// `4 * core clocks`), Sunny/Willow Cove (ICL, ICX, TGL) 5-wide, Golden Cove and Redwood
    /// Cove (SPR, EMR, GNR, ADL-P, MTL-P) 6-wide.
    width: u32,
}

const PLATFORMS: &[Platform] = &[
    Platform {
        key: "skx",
        name: "Skylake-SP",
        dir: "SKX",
        core: "events/skylakex_core.json",
        metrics: "metrics/skylakex_metrics.json",
        fp_arith: Some("events/skylakex_fp_arith_inst.json"),
        retire_latency: None,
        hybrid: false,
        width: 4,
    },
    Platform {
        key: "clx",
        name: "Cascade Lake-SP",
        dir: "CLX",
        core: "events/cascadelakex_core.json",
        metrics: "metrics/cascadelakex_metrics.json",
        fp_arith: Some("events/cascadelakex_fp_arith_inst.json"),
        retire_latency: None,
        hybrid: false,
        width: 4,
    },
    Platform {
        key: "icx",
        name: "Ice Lake-SP",
        dir: "ICX",
        core: "events/icelakex_core.json",
        metrics: "metrics/icelakex_metrics.json",
        fp_arith: None,
        retire_latency: None,
        hybrid: false,
        width: 5,
    },
    Platform {
        key: "spr",
        name: "Sapphire Rapids",
        dir: "SPR",
        core: "events/sapphirerapids_core.json",
        metrics: "metrics/sapphirerapids_metrics.json",
        fp_arith: None,
        retire_latency: None,
        hybrid: false,
        width: 6,
    },
    Platform {
        key: "emr",
        name: "Emerald Rapids",
        dir: "EMR",
        core: "events/emeraldrapids_core.json",
        metrics: "metrics/emeraldrapids_metrics.json",
        fp_arith: None,
        retire_latency: None,
        hybrid: false,
        width: 6,
    },
    Platform {
        key: "gnr",
        name: "Granite Rapids",
        dir: "GNR",
        core: "events/graniterapids_core.json",
        metrics: "metrics/graniterapids_metrics.json",
        fp_arith: None,
        retire_latency: Some("metrics/graniterapids_retire_latency.json"),
        hybrid: false,
        width: 6,
    },
    Platform {
        key: "skl",
        name: "Skylake (client; also Kaby/Coffee/Comet Lake)",
        dir: "SKL",
        core: "events/skylake_core.json",
        metrics: "metrics/skylake_metrics.json",
        fp_arith: Some("events/skylake_fp_arith_inst.json"),
        retire_latency: None,
        hybrid: false,
        width: 4,
    },
    Platform {
        key: "icl",
        name: "Ice Lake (client)",
        dir: "ICL",
        core: "events/icelake_core.json",
        metrics: "metrics/icelake_metrics.json",
        fp_arith: None,
        retire_latency: None,
        hybrid: false,
        width: 5,
    },
    Platform {
        key: "tgl",
        name: "Tiger Lake",
        dir: "TGL",
        core: "events/tigerlake_core.json",
        metrics: "metrics/tigerlake_metrics.json",
        fp_arith: None,
        retire_latency: None,
        hybrid: false,
        width: 5,
    },
    Platform {
        key: "adl",
        name: "Alder Lake / Raptor Lake P-core (Golden Cove)",
        dir: "ADL",
        core: "events/alderlake_goldencove_core.json",
        metrics: "metrics/alderlake_metrics_goldencove_core.json",
        fp_arith: None,
        retire_latency: None,
        hybrid: true,
        width: 6,
    },
    Platform {
        key: "mtl",
        name: "Meteor Lake P-core (Redwood Cove)",
        dir: "MTL",
        core: "events/meteorlake_redwoodcove_core.json",
        metrics: "metrics/meteorlake_metrics_redwoodcove_core.json",
        fp_arith: None,
        retire_latency: None,
        hybrid: true,
        width: 6,
    },
];

/// PERF_METRICS pseudo events and their byte index (README section 4.3 / 6).
const PERF_METRICS: [&str; 8] = [
    "PERF_METRICS.RETIRING",
    "PERF_METRICS.BAD_SPECULATION",
    "PERF_METRICS.FRONTEND_BOUND",
    "PERF_METRICS.BACKEND_BOUND",
    "PERF_METRICS.HEAVY_OPERATIONS",
    "PERF_METRICS.BRANCH_MISPREDICTS",
    "PERF_METRICS.FETCH_LATENCY",
    "PERF_METRICS.MEMORY_BOUND",
];

fn read_json(path: &Path) -> Result<Value> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// First number of a perfmon field (`"0x2A,0x2B"` -> 0x2A); hex or decimal; empty -> 0.
fn num(field: &str) -> Result<u64> {
    let first = field.split(',').next().unwrap_or("").trim();
    if first.is_empty() || first == "null" || first == "NA" {
        return Ok(0);
    }
    let r = if let Some(h) = first
        .strip_prefix("0x")
        .or_else(|| first.strip_prefix("0X"))
    {
        u64::from_str_radix(h, 16)
    } else {
        first.parse()
    };
    r.map_err(|_| anyhow!("bad number `{field}`"))
}

/// An event name usable as an event id: `[A-Za-z_][A-Za-z0-9_.]*` (crates/tma-catalog lib.rs).
fn is_event_id(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// One row of the generated EVENTS table.
#[derive(Clone)]
struct Ev {
    name: String,
    code: u64,
    umask: u64,
    cmask: u64,
    inv: bool,
    edge: bool,
    any: bool,
    msr_index: u64,
    msr_value: u64,
    counter_mask: u32,
    fixed: Option<u8>,
    precise: bool,
    taken_alone: bool,
    kind: String,
    sample_after: u64,
}

fn event_from_json(e: &Value) -> Result<Ev> {
    let name = s(e, "EventName").to_string();
    let counter = s(e, "Counter");
    let (counter_mask, fixed) = if let Some(n) = counter.strip_prefix("Fixed counter") {
        (0u32, Some(num(n)? as u8))
    } else {
        let mut m = 0u32;
        for c in counter.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            let i: u32 = c
                .parse()
                .map_err(|_| anyhow!("{name}: bad Counter `{counter}`"))?;
            m |= 1 << i;
        }
        (m, None)
    };
    let mut code = num(s(e, "EventCode"))?;
    let mut umask = num(s(e, "UMask"))?;
    let any = s(e, "AnyThread") == "1";
    // The deliberate differences from perfmon's row, each named with its reason in
    // crates/tma-catalog/src/conversions.rs (instructions 0xC0, core cycles 0x3C; the
    // AnyThread bit stays). Every other row, INST_RETIRED.PREC_DIST's 0x00/0x01 on fixed
    // counter 0 included, keeps perfmon's encoding.
    if let Some(c) = conversions::conversion_for(&name) {
        let expected = (
            u64::from(c.perfmon.0),
            u64::from(c.perfmon.1),
            Some(c.fixed),
        );
        if (code, umask, fixed) != expected {
            bail!(
                "{name}: perfmon has event {code:#x} umask {umask:#x} on {counter:?}, but the \
                 conversion table (crates/tma-catalog/src/conversions.rs) expects event {:#x} \
                 umask {:#x} on fixed counter {}; update the table",
                c.perfmon.0,
                c.perfmon.1,
                c.fixed
            );
        }
        (code, umask) = (u64::from(c.ours.0), u64::from(c.ours.1));
    }
    // SKL/SKX/CLX use `PEBS` ("1" or "2" = can be precise), ICL and later `Precise`.
    let precise = match e.get("Precise") {
        Some(_) => s(e, "Precise") == "1",
        None => matches!(s(e, "PEBS"), "1" | "2"),
    };
    let kind = if name == "TOPDOWN.SLOTS" {
        "EventKind::Slots".to_string()
    } else {
        "EventKind::Core".to_string()
    };
    let msr_index = num(s(e, "MSRIndex"))?;
    Ok(Ev {
        code,
        umask,
        cmask: num(s(e, "CounterMask"))?,
        inv: s(e, "Invert") == "1",
        edge: s(e, "EdgeDetect") == "1",
        any,
        msr_index,
        msr_value: if msr_index != 0 {
            num(s(e, "MSRValue"))?
        } else {
            0
        },
        counter_mask,
        fixed,
        precise,
        taken_alone: s(e, "TakenAlone") == "1",
        kind,
        sample_after: num(s(e, "SampleAfterValue"))?,
        name,
    })
}

fn pseudo_event(name: &str) -> Option<Ev> {
    let blank = |kind: String, umask: u64| Ev {
        name: name.to_string(),
        code: 0,
        umask,
        cmask: 0,
        inv: false,
        edge: false,
        any: false,
        msr_index: 0,
        msr_value: 0,
        counter_mask: 0,
        fixed: None,
        precise: false,
        taken_alone: false,
        kind,
        sample_after: 0,
    };
    if let Some(b) = PERF_METRICS.iter().position(|p| *p == name) {
        return Some(blank(
            format!("EventKind::PerfMetrics({b})"),
            0x80 + b as u64,
        ));
    }
    if name == "TSC" {
        return Some(blank("EventKind::Tsc".to_string(), 0));
    }
    None
}

/// Split a perfmon formula into tokens; identifiers are `[A-Za-z_][A-Za-z0-9_]*`.
fn rewrite_formula(formula: &str, mut map: impl FnMut(&str) -> Result<String>) -> Result<String> {
    let b = formula.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let w = &formula[st..i];
            match w {
                "if" | "else" | "min" | "max" => out.push_str(w),
                _ => out.push_str(&map(w)?),
            }
        } else if c.is_ascii_digit() || c == b'.' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                i += 1;
                if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
                    i += 1;
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            out.push_str(&formula[st..i]);
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    // Collapse runs of blanks so the output is tidy and stable.
    let mut toks: Vec<String> = out.split_whitespace().map(str::to_string).collect();
    // perfmon writes `a >= b` as `a > = b` (GNR retire-latency guards). The formula
    // language has no `>=` / `<=`: write `( ( a < b ) ^ 1 )`, i.e. not(a < b), which the
    // language's logical xor gives exactly. Only single-token operands occur; anything
    // else is refused rather than guessed.
    let operand = |t: &str| {
        t.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '#' || c == '.')
    };
    let mut i = 0;
    while i + 1 < toks.len() {
        if (toks[i] == ">" || toks[i] == "<") && toks[i + 1] == "=" {
            if i == 0 || i + 2 >= toks.len() || !operand(&toks[i - 1]) || !operand(&toks[i + 2]) {
                bail!(
                    "cannot rewrite `{} =` with a compound operand in `{formula}`",
                    toks[i]
                );
            }
            let flipped = if toks[i] == ">" { "<" } else { ">" };
            let rewritten = format!("( ( {} {flipped} {} ) ^ 1 )", toks[i - 1], toks[i + 2]);
            toks.splice(i - 1..i + 3, [rewritten]);
        }
        i += 1;
    }
    Ok(toks.join(" "))
}

/// The platforms whose core clocks need the AnyThread event `CPU_CLK_UNHALTED.THREAD_ANY`
/// when SMT is on (before Ice Lake). [`core_wide_branch`] gives their formulas the per-thread
/// estimate for counts that are not core-wide.
const ANYTHREAD_PLATFORMS: &[&str] = &["skx", "clx", "skl"];

/// perfmon's core clocks with SMT on, as [`rewrite_formula`] writes them (SKL/SKX/CLX
/// `Info_Core_CORE_CLKS`, inlined into every formula that uses core clocks or slots).
const CORE_CLKS_ANY: &str =
    "( ( CPU_CLK_UNHALTED.THREAD_ANY / 2 ) if #smt_on else ( CPU_CLK_UNHALTED.THREAD ) )";
/// Give a SKL/SKX/CLX formula the branch for counts that are not core-wide (`#core_wide`
/// false: per-process or per-thread counting with SMT on), where the AnyThread events
/// (`*_ANY`, the AnyThread bit) are not counted: perf's default recording has none.
///
/// * Core clocks: the perfmon data has only `THREAD_ANY / 2 if #smt_on else THREAD`. Intel's
///   TMA spreadsheet has a third branch, used when the counts are not core-wide (its
///   `EBS_Mode`; Linux perf's converted metrics test `#core_wide < 1`): the thread's clocks
///   scaled by how often its sibling was idle,
///   `CPU_CLK_UNHALTED.THREAD / 2 * (1 + CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE /
///   CPU_CLK_UNHALTED.REF_XCLK)` (both reference-clock counts, so their ratio is the share
///   of time this thread ran alone on its core).
/// * Recovery cycles stay as perfmon has them (`INT_MISC.RECOVERY_CYCLES_ANY / 2` with SMT
///   on), as in the spreadsheet and perf's metrics: a real per-process recording on Cascade
///   Lake (tests/fixtures/import/real/clx-lkml-2023-skippable-kan) shows perf computing
///   Bad_Speculation and Backend_Bound from `RECOVERY_CYCLES_ANY / 2` beside the estimated
///   clocks, and tma matches its values only so.
///
/// The new branch is always the `else` of an `if #core_wide`; `tma-metrics` marks a value
/// that went through such a branch as estimated. Returns the formula and how many core-clock
/// expressions were given the branch. A whole formula equal to the pattern without its outer
/// parentheses (`Info_Core_CORE_CLKS` itself) is found too.
fn core_wide_branch(formula: &str) -> (String, usize) {
    let whole = format!("( {formula} )");
    let wrapped = if whole == CORE_CLKS_ANY {
        whole
    } else {
        formula.to_string()
    };
    let clks = wrapped.matches(CORE_CLKS_ANY).count();
    let estimate = "( CPU_CLK_UNHALTED.THREAD / 2 * ( 1 + CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE \
                    / CPU_CLK_UNHALTED.REF_XCLK ) )";
    let out = wrapped.replace(
        CORE_CLKS_ANY,
        &format!("( {CORE_CLKS_ANY} if #core_wide else {estimate} )"),
    );
    (out, clks)
}

/// A perfmon metric name as a formula-language identifier: names that start with a digit
/// (`4K_Aliasing`) get a leading `_` (`_4K_Aliasing`), because identifiers cannot start
/// with a digit (crates/tma-catalog/src/lib.rs).
fn ident(name: &str) -> String {
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name.to_string()
    }
}

fn word_in(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

/// A constant of a perfmon metric as a formula-language expression (lib.rs docs).
fn constant(name: &str, base_formula: &str, tma_category: bool) -> Result<String> {
    Ok(match name {
        "HYPERTHREADING_ON" => "#smt_on".into(),
        "THREADS_PER_CORE" => "#threads".into(),
        "DURATIONTIMEINMILLISECONDS" => "( #duration_time * 1000 )".into(),
        // README 3.2: Info_System_Core_Frequency's BaseFormula names it `tsc`, the TSC tick
        // count over the run. Every TMA-category metric that has this constant uses it that
        // way, directly (BaseFormula `tsc`) or through Info_System_Core_Frequency /
        // Info_System_CPUs_Utilized, which perfmon inlines into the expanded Formula
        // (checked over all 11 platforms). Only the non-TMA `cpu_operating_frequency`
        // (`a / b * c / 1e9`, no duration) uses it as a frequency in Hz; we do not convert
        // non-TMA metrics, but keep the rule for it.
        "SYSTEM_TSC_FREQ" if tma_category || word_in(base_formula, "tsc") => "TSC".into(),
        "SYSTEM_TSC_FREQ" => "#tsc_freq".into(),
        "SOCKET_COUNT" => "#num_sockets".into(),
        "CHAS_PER_SOCKET" => "#chas_per_socket".into(),
        "CORES_PER_SOCKET" => "( #num_cores / #num_sockets )".into(),
        "system.sockets[0].cpus.count * system.socket_count" => "#num_cpus_online".into(),
        n if n.parse::<f64>().is_ok() => n.to_string(),
        n => bail!("unknown constant `{n}`"),
    })
}

struct NodeOut {
    name: String,
    parent: Option<String>,
    level: u64,
    formula: String,
    threshold: String,
    locate: Vec<String>,
    description: String,
    unit: &'static str,
    count_domain: String,
}

struct MetricOut {
    name: String,
    formula: String,
    description: String,
    unit: &'static str,
    /// The group the name places the metric in (`Thread`, `Inst_Mix`, `Bottleneck`...).
    group: String,
    /// perfmon `MetricGroup`: the `perf stat -M` group names, `;`-separated.
    perf_groups: String,
}

/// The groups of the `Info_*` metric names, longest first where one is a prefix of another:
/// `Info_Memory_TLB_Code_STLB_MPKI` is in `Memory_TLB`, `Info_Memory_MLP` in `Memory`.
const METRIC_GROUPS: &[&str] = &[
    "Botlnk_L0",
    "Botlnk_L2",
    "Thread",
    "Core",
    "Inst_Mix",
    "Pipeline",
    "Frontend",
    "Bad_Spec",
    "Branches",
    "Memory_Latency",
    "Memory_Mix",
    "Memory_Core",
    "Memory_TLB",
    "Memory_SoC",
    "Memory_Prefetches",
    "Memory",
    "System",
];

/// The group of a metric from its name: `Bottleneck` for `Bottleneck_*`, else the first of
/// [`METRIC_GROUPS`] that `Info_<group>_` starts the name.
fn metric_group(name: &str) -> Result<&'static str> {
    if name.starts_with("Bottleneck_") {
        return Ok("Bottleneck");
    }
    let rest = name
        .strip_prefix("Info_")
        .ok_or_else(|| anyhow!("metric {name} is neither Info_* nor Bottleneck_*"))?;
    METRIC_GROUPS
        .iter()
        .find(|g| {
            rest.strip_prefix(**g)
                .is_some_and(|r| r.starts_with('_') && r.len() > 1)
        })
        .copied()
        .ok_or_else(|| anyhow!("metric {name}: no group in METRIC_GROUPS; add it to gen.rs"))
}

fn metric_description(name: &str) -> String {
    if let Some(d) = descriptions::describe_metric(name) {
        return d.to_string();
    }
    let (kind, rest) = match name.split_once('_') {
        Some(("Info", r)) => ("Info", r),
        Some(("Bottleneck", r)) => ("Bottleneck", r),
        _ => ("TMA", name),
    };
    format!(
        "TMA {} metric {} (see formula)",
        kind.to_lowercase(),
        rest.replace('_', " ")
    )
}

/// What the converter makes of the data.
#[derive(Debug, PartialEq)]
pub struct Generated {
    /// Every file: `(path relative to the workspace root, content)`, sorted by path.
    pub files: Vec<(PathBuf, String)>,
    /// Every tree-shape resolution made, `key: text`, in platform and file order.
    pub resolutions: Vec<String>,
}

/// Generate every file from the data folder.
pub fn generate(data: &Path) -> Result<Generated> {
    let intel = data.join("intel");
    let mut files = Vec::new();
    let license = fs::read_to_string(intel.join("LICENSE"))
        .with_context(|| format!("reading {}", intel.join("LICENSE").display()))?;
    files.push((
        PathBuf::from(OUT_DIR).join("LICENSE-intel-perfmon"),
        format!(
            "The files in this folder are generated from the Intel perfmon data\n\
             (https://github.com/intel/perfmon), which carries the following notice.\n\n{license}"
        ),
    ));
    let mut resolutions = Vec::new();
    for p in PLATFORMS {
        let (text, resolved) =
            gen_platform(&intel, p).with_context(|| format!("platform {}", p.key))?;
        files.push((PathBuf::from(OUT_DIR).join(format!("{}.rs", p.key)), text));
        resolutions.extend(resolved.into_iter().map(|r| format!("{}: {r}", p.key)));
    }
    for (module, text) in ecore::gen_all(&intel)? {
        files.push((PathBuf::from(OUT_DIR).join(format!("{module}.rs")), text));
    }
    files.push((PathBuf::from(OUT_DIR).join("mod.rs"), gen_mod(&intel)?));
    files.push((
        PathBuf::from(amd::OUT_FILE),
        amd::gen_amd(&data.join("amd"))?,
    ));
    files.extend(arm::gen_all(&data.join("arm"))?);
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Generated { files, resolutions })
}

const HEADER: &str = "// @generated by `cargo xtask gen-tables` from the Intel perfmon data\n\
// (BSD-3-Clause; notice in LICENSE-intel-perfmon next to this file). Do not edit by hand:\n\
// change xtask/src/gen.rs or crates/tma-catalog/src/descriptions.rs and regenerate.\n";

fn gen_mod(intel: &Path) -> Result<String> {
    let map = fs::read_to_string(intel.join("mapfile.csv"))
        .with_context(|| format!("reading {}", intel.join("mapfile.csv").display()))?;
    let mut rows: Vec<(String, &str)> = Vec::new();
    for line in map.lines().skip(1) {
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() < 4 {
            continue;
        }
        let dir = cols[2]
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        let key = if cols[3] == "metrics" {
            PLATFORMS
                .iter()
                .find(|p| p.dir == dir && cols[2].ends_with(p.metrics))
                .map(|p| p.key)
        } else {
            ecore::ECORE_PLATFORMS
                .iter()
                .find(|p| ecore::mapfile_row_selects(&cols, p))
                .map(|p| p.key)
        };
        if let Some(key) = key {
            let row = (cols[0].to_string(), key);
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
    }
    let mut o = String::from(HEADER);
    o.push_str("\n//! Generated Intel tables, one module per platform, and the mapfile rows that pick them.\n\n");
    o.push_str("use crate::types::Model;\n\n");
    let modules: Vec<String> = PLATFORMS
        .iter()
        .map(|p| p.key.to_string())
        .chain(ecore::ECORE_PLATFORMS.iter().map(|p| p.module()))
        .collect();
    for m in &modules {
        writeln!(o, "#[rustfmt::skip]\npub mod {m};")?;
    }
    o.push_str("/// The Arm Neoverse tables (xtask/src/gen/arm.rs; Apache-2.0 notice in arm/).\npub mod arm;\n");
    o.push_str("\n/// Every generated model: the P-core / uniform ones, then the E-core ones.\npub static MODELS: &[&Model] = &[\n");
    for m in &modules {
        writeln!(o, "    &{m}::MODEL,")?;
    }
    o.push_str("];\n\n/// `intel/mapfile.csv` rows in file order: perf-CPUID regex, model key. P-core and uniform\n/// models from the EventType `metrics` rows; E-core models from the rows naming their event\n/// file (`hybridcore` with Core Type 0x20, or the `core` row of an E-core-only part).\n");
    o.push_str("pub static CPUID_ROWS: &[(&str, &str)] = &[\n");
    for (pat, key) in rows {
        writeln!(o, "    ({pat:?}, {key:?}),")?;
    }
    o.push_str("];\n");
    Ok(o)
}

/// The generated source of one platform and the tree-shape resolutions made for it.
fn gen_platform(intel: &Path, p: &Platform) -> Result<(String, Vec<String>)> {
    let dir = intel.join(p.dir);
    let core = read_core_events(&dir, p)?;
    let metrics_json = read_json(&dir.join(p.metrics))?;
    let tree = convert_metrics(p, &core.catalog, &metrics_json)?;
    check_thresholds(&tree.nodes, &tree.metrics)?;
    let mut nodes = preorder(tree.nodes)?;
    describe_rest(&mut nodes)?;
    let retire = read_retire_latencies(&dir, p)?;
    let topdown = if tree.uses_perf_metrics_l2 {
        "Topdown::PerfMetricsL2"
    } else if tree.uses_perf_metrics {
        "Topdown::PerfMetricsL1"
    } else {
        "Topdown::Generic"
    };
    let events = all_events(&core.catalog, &tree.used);
    let mut o = String::from(HEADER);
    writeln!(
        o,
        "//\n// {} ({}): {} tree nodes, {} helper metrics, {} events ({} used by the formulas).",
        p.name,
        p.key,
        nodes.len(),
        tree.metrics.len(),
        events.len(),
        tree.used.len()
    )?;
    if !core.unnamed.is_empty() {
        writeln!(
            o,
            "// {} event rows left out: named `{}` and alike, which is no event id; each has the\n// encoding of another row (its OCR.* name).",
            core.unnamed.len(),
            core.unnamed[0].name
        )?;
    }
    if !tree.dropped.is_empty() {
        o.push_str("// Info metrics left out (they need uncore or non-core inputs):\n");
        for d in &tree.dropped {
            writeln!(o, "//   {d}")?;
        }
    }
    if !tree.resolutions.is_empty() {
        o.push_str(
            "// Parents resolved from the hierarchy (threshold chain, Level, legacy name):\n",
        );
        for r in &tree.resolutions {
            writeln!(o, "//   {r}")?;
        }
    }
    emit_tables(&mut o, &events, &nodes, &tree.metrics, &retire)?;
    let header = &metrics_json["Header"];
    let source = format!(
        "Intel perfmon {} metrics {} (TMA {}), events {}",
        p.dir,
        s(header, "Version"),
        s(header, "TmaVersion"),
        core.version
    );
    emit_model(&mut o, p, &source, header, &core, topdown)?;
    Ok((o, tree.resolutions))
}

/// A platform's core event file (and its fp_arith file).
struct CoreEvents {
    /// The file header's `Version`.
    version: String,
    /// The events by name.
    catalog: HashMap<String, Ev>,
    /// Highest index in the `Counter` fields + 1.
    max_gp: u32,
    /// The distinct `Fixed counter N` values.
    fixed: BTreeSet<u8>,
    /// Rows left out: their name is no event id, another row has their encoding.
    unnamed: Vec<Ev>,
}

/// Read the core events of `p` from `dir`.
fn read_core_events(dir: &Path, p: &Platform) -> Result<CoreEvents> {
    let core = read_json(&dir.join(p.core))?;
    let version = s(&core["Header"], "Version").to_string();
    let mut catalog: HashMap<String, Ev> = HashMap::new();
    let mut max_gp = 0u32;
    let mut fixed_set = BTreeSet::new();
    let mut sources = vec![core];
    if let Some(f) = p.fp_arith {
        // The fp_arith files describe FP_ARITH umask bits; rows with an EventName (none in
        // this data) are merged like core events.
        sources.push(read_json(&dir.join(f))?);
    }
    // Rows whose name is not an event id of the formula language (CLX's deprecated
    // `OFFCORE_RESPONSE:request=…:response=…` spellings): left out when another row has the
    // same encoding (their `OCR.*` names), refused otherwise.
    let mut unnamed: Vec<Ev> = Vec::new();
    for src in &sources {
        for e in src["Events"].as_array().into_iter().flatten() {
            if s(e, "EventName").is_empty() {
                continue;
            }
            let ev = event_from_json(e)?;
            if !is_event_id(&ev.name) {
                unnamed.push(ev);
                continue;
            }
            if ev.counter_mask != 0 {
                max_gp = max_gp.max(32 - ev.counter_mask.leading_zeros());
            }
            if let Some(f) = ev.fixed {
                fixed_set.insert(f);
            }
            catalog.entry(ev.name.clone()).or_insert(ev);
        }
    }
    for u in &unnamed {
        let twin = catalog.values().find(|c| {
            (c.code, c.umask, c.cmask, c.inv, c.edge, c.any, c.msr_value)
                == (u.code, u.umask, u.cmask, u.inv, u.edge, u.any, u.msr_value)
        });
        if twin.is_none() {
            bail!(
                "event `{}` is no event id and no other row has its encoding",
                u.name
            );
        }
    }
    Ok(CoreEvents {
        version,
        catalog,
        max_gp,
        fixed: fixed_set,
        unnamed,
    })
}

/// The TMA rows of a metrics file, converted.
struct Converted {
    nodes: Vec<NodeOut>,
    metrics: Vec<MetricOut>,
    /// The events the formulas and locate-with fields use.
    used: BTreeMap<String, Ev>,
    /// Info metrics left out, with why.
    dropped: Vec<String>,
    /// Parents not taken from perfmon's `ParentCategory`.
    resolutions: Vec<String>,
    uses_perf_metrics: bool,
    uses_perf_metrics_l2: bool,
}

/// Convert the TMA rows of `metrics_json`: tree nodes (with thresholds, locate-with events
/// and parents) and helper metrics, in file order.
fn convert_metrics(
    p: &Platform,
    catalog: &HashMap<String, Ev>,
    metrics_json: &Value,
) -> Result<Converted> {
    let lookup =
        |base: &str| -> Option<Ev> { catalog.get(base).cloned().or_else(|| pseudo_event(base)) };
    let all: Vec<&Value> = metrics_json["Metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let legacy: HashMap<&str, String> = all
        .iter()
        .map(|m| (s(m, "LegacyName"), ident(s(m, "MetricName"))))
        .collect();

    // The tree nodes by legacy name: (name, perfmon Level), and each node's parent in the
    // outline that the dotted legacy names draw in file order.
    let tree_rows: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|m| s(m, "Category") == "TMA" && is_tree_node(s(m, "MetricName")))
        .collect();
    let levels: HashMap<&str, (String, u64)> = tree_rows
        .iter()
        .map(|m| {
            let lvl = m["Level"].as_u64().unwrap_or(1);
            (s(m, "LegacyName"), (ident(s(m, "MetricName")), lvl))
        })
        .collect();
    let shape = Shape {
        outline: legacy_outline(&tree_rows)?,
        legacy,
        levels,
    };
    let mut out = Converted {
        nodes: Vec::new(),
        metrics: Vec::new(),
        used: BTreeMap::new(),
        dropped: Vec::new(),
        resolutions: Vec::new(),
        uses_perf_metrics: false,
        uses_perf_metrics_l2: false,
    };
    let mut core_wide_branches = 0usize;

    for m in all.iter().filter(|m| s(m, "Category") == "TMA") {
        let perfmon_name = s(m, "MetricName");
        let name_owned = ident(perfmon_name);
        let name = name_owned.as_str();
        let is_node = is_tree_node(name);
        // Convert; on failure an Info/Bottleneck metric is dropped, a tree node is an error.
        let (mut formula, evs) = match convert_formula(m, &lookup) {
            Ok(x) => x,
            Err(e) if !is_node => {
                out.dropped.push(format!("{name}: {e}"));
                continue;
            }
            Err(e) => return Err(e.context(format!("tree node {name}"))),
        };
        if ANYTHREAD_PLATFORMS.contains(&p.key) {
            let (f, n) = core_wide_branch(&formula);
            formula = f;
            core_wide_branches += n;
        }
        for ev in evs {
            if ev.kind.starts_with("EventKind::PerfMetrics") {
                out.uses_perf_metrics = true;
                if PERF_METRICS[4..].contains(&ev.name.as_str()) {
                    out.uses_perf_metrics_l2 = true;
                }
            }
            out.used.entry(ev.name.clone()).or_insert(ev);
        }
        let domain = s(m, "CountDomain");
        let unit = if domain.contains("Slots") {
            "Unit::PercentSlots"
        } else if s(m, "UnitOfMeasure") == "percent" || is_node {
            "Unit::Percent"
        } else {
            "Unit::Number"
        };
        if !is_node {
            out.metrics.push(MetricOut {
                name: name.to_string(),
                formula,
                description: metric_description(name),
                unit,
                group: metric_group(name)?.to_string(),
                perf_groups: s(m, "MetricGroup").to_string(),
            });
            continue;
        }
        let (node, resolution) = convert_node(m, &shape, formula, unit, &lookup, &mut out.used)?;
        out.resolutions.extend(resolution);
        out.nodes.push(node);
    }
    if ANYTHREAD_PLATFORMS.contains(&p.key) && core_wide_branches == 0 {
        bail!(
            "no formula has the core clocks `{CORE_CLKS_ANY}`: the data changed; \
             update core_wide_branch"
        );
    }
    Ok(out)
}

/// What the rows of a metrics file tell of the tree's shape.
struct Shape<'a> {
    /// Legacy name -> identifier, of every row.
    legacy: HashMap<&'a str, String>,
    /// The tree nodes by legacy name: (identifier, perfmon Level).
    levels: HashMap<&'a str, (String, u64)>,
    /// Each node's parent in the outline that the dotted legacy names draw in file order.
    outline: HashMap<String, Option<String>>,
}

/// One tree node's row (`m`, with its converted `formula`): its threshold, locate-with
/// events (added to `used`), parent and description; and the resolution made for its
/// parent, if any.
fn convert_node(
    m: &Value,
    shape: &Shape,
    formula: String,
    unit: &'static str,
    lookup: &dyn Fn(&str) -> Option<Ev>,
    used: &mut BTreeMap<String, Ev>,
) -> Result<(NodeOut, Option<String>)> {
    let perfmon_name = s(m, "MetricName");
    let name_owned = ident(perfmon_name);
    let name = name_owned.as_str();
    let domain = s(m, "CountDomain");
    let th = &m["Threshold"];
    let level = m["Level"].as_u64().unwrap_or(1);
    let threshold =
        node_threshold(th, &shape.legacy).with_context(|| format!("threshold of {name}"))?;
    let mut locate = Vec::new();
    for l in s(m, "LocateWith").split(';').map(str::trim) {
        if l.is_empty() || l == "#NA" {
            continue;
        }
        let base = l.split(':').next().unwrap_or("");
        let ev = lookup(base).ok_or_else(|| anyhow!("{name}: locate-with `{l}` unknown"))?;
        used.entry(ev.name.clone()).or_insert(ev);
        locate.push(l.to_string());
    }
    // The tree nodes the threshold names one level up: the parent in the chain.
    let threshold_parents: Vec<&str> = th["ThresholdMetrics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| shape.levels.get(s(t, "Value")))
        .filter(|(n, l)| *l + 1 == level && n != name)
        .map(|(n, _)| n.as_str())
        .collect();
    let place = resolve_parent(&Evidence {
        name,
        legacy_name: s(m, "LegacyName"),
        level,
        parent_category: match s(m, "ParentCategory") {
            "" => None,
            p => Some(ident(p)),
        },
        parent_category_level: shape
            .levels
            .values()
            .find(|(n, _)| *n == ident(s(m, "ParentCategory")))
            .map(|(_, l)| *l),
        threshold: &threshold,
        threshold_parents: &threshold_parents,
        outline_parent: shape.outline.get(name).cloned().flatten(),
    })?;
    let parent = place.parent;
    let description = match descriptions::describe(perfmon_name) {
        Some(d) => d.to_string(),
        None if level <= 3 => {
            bail!("no description for level-{level} node {name}: add it to descriptions.rs")
        }
        None => format!(
            "Level-{level} share of {} (see formula)",
            parent.as_deref().unwrap_or("the tree")
        ),
    };
    let node = NodeOut {
        name: name.to_string(),
        parent,
        level,
        formula,
        threshold,
        locate,
        description,
        unit,
        count_domain: domain.to_string(),
    };
    Ok((node, place.resolution))
}

/// One metric row's formula in the formula language (its event and constant aliases
/// replaced), and the events it reads.
fn convert_formula(m: &Value, lookup: &dyn Fn(&str) -> Option<Ev>) -> Result<(String, Vec<Ev>)> {
    let base_formula = s(m, "BaseFormula");
    let mut aliases: HashMap<&str, String> = HashMap::new();
    let mut evs = Vec::new();
    for e in m["Events"].as_array().into_iter().flatten() {
        let id = s(e, "Name");
        let base = id.split(':').next().unwrap_or("");
        let ev = lookup(base).ok_or_else(|| anyhow!("event `{base}` is not a core event"))?;
        evs.push(ev);
        aliases.insert(s(e, "Alias"), id.to_string());
    }
    for c in m["Constants"].as_array().into_iter().flatten() {
        let v = constant(s(c, "Name"), base_formula, s(m, "Category") == "TMA")?;
        if v == "TSC" {
            evs.push(pseudo_event("TSC").expect("TSC is a pseudo event"));
        }
        aliases.insert(s(c, "Alias"), v);
    }
    let f = rewrite_formula(s(m, "Formula"), |w| {
        aliases
            .get(w)
            .cloned()
            .ok_or_else(|| anyhow!("formula word `{w}` is neither an event nor a constant alias"))
    })?;
    Ok((f, evs))
}

/// A node's threshold (`th`, its `Threshold` object) with the metrics it names by their
/// identifiers (`legacy`: legacy name -> identifier).
fn node_threshold(th: &Value, legacy: &HashMap<&str, String>) -> Result<String> {
    let tm: HashMap<&str, &str> = th["ThresholdMetrics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| (s(t, "Alias"), s(t, "Value")))
        .collect();
    rewrite_formula(s(th, "Formula"), |w| {
        let leg = tm
            .get(w)
            .ok_or_else(|| anyhow!("threshold word `{w}` is not an alias"))?;
        legacy
            .get(leg)
            .map(|n| n.to_string())
            .ok_or_else(|| anyhow!("threshold refers to unknown `{leg}`"))
    })
}

/// Thresholds may only name kept nodes / metrics.
fn check_thresholds(nodes: &[NodeOut], metrics: &[MetricOut]) -> Result<()> {
    let known: BTreeSet<&str> = nodes
        .iter()
        .map(|n| n.name.as_str())
        .chain(metrics.iter().map(|m| m.name.as_str()))
        .collect();
    for n in nodes {
        for w in n
            .threshold
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        {
            if w.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && !known.contains(w) {
                bail!("threshold of {} names `{w}`, which was not kept", n.name);
            }
        }
    }
    Ok(())
}

/// A description for the nodes that have none (below level 3: their share of the parent).
fn describe_rest(nodes: &mut [NodeOut]) -> Result<()> {
    for n in nodes {
        if n.description.is_empty() {
            if n.level <= 3 {
                bail!(
                    "no description for level-{} node {}: add it to descriptions.rs",
                    n.level,
                    n.name
                );
            }
            n.description = format!(
                "Level-{} share of {} (see formula)",
                n.level,
                n.parent.as_deref().unwrap_or("the tree")
            );
        }
    }
    Ok(())
}

/// The mean retire latencies of the platform's file (none without one), by event name.
fn read_retire_latencies(dir: &Path, p: &Platform) -> Result<Vec<(String, f64)>> {
    let Some(f) = p.retire_latency else {
        return Ok(Vec::new());
    };
    let j = read_json(&dir.join(f))?;
    let mut v: Vec<(String, f64)> = j["Data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, d)| {
            let mean = d["MEAN"]
                .as_f64()
                .or_else(|| d["MEAN"].as_str().and_then(|x| x.parse().ok()))
                .ok_or_else(|| anyhow!("{k}: no MEAN"))?;
            Ok((k.clone(), mean))
        })
        .collect::<Result<_>>()?;
    v.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(v)
}

/// The `MODEL` static of a platform.
fn emit_model(
    o: &mut String,
    p: &Platform,
    source: &str,
    header: &Value,
    core: &CoreEvents,
    topdown: &str,
) -> Result<()> {
    writeln!(o, "pub static MODEL: Model = Model {{")?;
    writeln!(o, "    key: {:?},", p.key)?;
    writeln!(o, "    name: {:?},", p.name)?;
    writeln!(o, "    vendor: Vendor::Intel,")?;
    writeln!(
        o,
        "    core_kind: {},",
        if p.hybrid {
            "CoreKind::Performance"
        } else {
            "CoreKind::Uniform"
        }
    )?;
    writeln!(
        o,
        "    pmu: {:?},",
        if p.hybrid { "cpu_core" } else { "cpu" }
    )?;
    writeln!(o, "    source: {source:?},")?;
    writeln!(o, "    // perfmon metrics header `TmaVersion`.")?;
    writeln!(
        o,
        "    tma_version: {:?},",
        Some(s(header, "TmaVersion")).filter(|v| !v.is_empty())
    )?;
    writeln!(
        o,
        "    // Issue width of the microarchitecture (xtask/src/gen.rs, PLATFORMS)."
    )?;
    writeln!(o, "    slots_per_cycle: {},", p.width)?;
    writeln!(
        o,
        "    // Highest index in the core file's `Counter` fields + 1 (the SMT-on view)."
    )?;
    writeln!(o, "    gp_counters: {},", core.max_gp)?;
    writeln!(
        o,
        "    // Distinct `Fixed counter N` values in the core file."
    )?;
    writeln!(o, "    fixed_counters: {},", core.fixed.len())?;
    writeln!(
        o,
        "    // From the PERF_METRICS.* events the metrics use (L2 slices present or not)."
    )?;
    writeln!(o, "    topdown: {topdown},")?;
    o.push_str("    events: EVENTS,\n    nodes: NODES,\n    metrics: METRICS,\n    retire_latencies: RETIRE_LATENCIES,\n};\n");
    Ok(())
}

/// Every event of a model's table: the whole event file (`catalog`) plus the pseudo events
/// (PERF_METRICS slices, TSC) the formulas use.
fn all_events(catalog: &HashMap<String, Ev>, used: &BTreeMap<String, Ev>) -> BTreeMap<String, Ev> {
    let mut all: BTreeMap<String, Ev> = catalog
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in used {
        all.entry(k.clone()).or_insert_with(|| v.clone());
    }
    all
}

/// One compact EVENTS row (`crate::types::event_row`).
fn event_row(e: &Ev) -> String {
    let flags: Vec<&str> = [
        (e.inv, "INV"),
        (e.edge, "EDGE"),
        (e.any, "ANY"),
        (e.precise, "PRECISE"),
        (e.taken_alone, "ALONE"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, f)| *f)
    .collect();
    let flags = if flags.is_empty() {
        "0".to_string()
    } else {
        flags.join(" | ")
    };
    let mut r = format!(
        "ev({:?}, {:#x}, {:#x}, {}, {flags}, {:#x}, {})",
        e.name, e.code, e.umask, e.cmask, e.counter_mask, e.sample_after
    );
    if e.msr_index != 0 || e.msr_value != 0 {
        write!(r, ".with_msr({:#x}, {:#x})", e.msr_index, e.msr_value).expect("to a String");
    }
    if let Some(f) = e.fixed {
        write!(r, ".on_fixed({f})").expect("to a String");
    }
    if e.kind != "EventKind::Core" {
        write!(r, ".with_kind({})", e.kind).expect("to a String");
    }
    r
}

/// The `use` line and the EVENTS, NODES, METRICS and RETIRE_LATENCIES statics of one model.
fn emit_tables(
    o: &mut String,
    events: &BTreeMap<String, Ev>,
    nodes: &[NodeOut],
    metrics: &[MetricOut],
    retire: &[(String, f64)],
) -> Result<()> {
    o.push_str("\nuse crate::types::event_row::*;\nuse crate::types::*;\n\n");
    o.push_str(
        "// Every core event of the event file (and the pseudo events the formulas name), by name:\n\
         // ev(name, event code, umask, cmask, flags, general counters, sample-after value).\n",
    );
    o.push_str("static EVENTS: &[EventDef] = &[\n");
    for e in events.values() {
        writeln!(o, "    {},", event_row(e))?;
    }
    o.push_str("];\n\nstatic NODES: &[NodeDef] = &[\n");
    for n in nodes {
        writeln!(o, "    NodeDef {{")?;
        writeln!(o, "        name: {:?},", n.name)?;
        writeln!(o, "        parent: {:?},", n.parent)?;
        writeln!(o, "        level: {},", n.level)?;
        writeln!(o, "        formula: {:?},", n.formula)?;
        writeln!(o, "        threshold: {:?},", n.threshold)?;
        writeln!(o, "        locate_with: &{:?},", n.locate)?;
        writeln!(o, "        description: {:?},", n.description)?;
        writeln!(o, "        unit: {},", n.unit)?;
        writeln!(o, "        count_domain: {:?},", n.count_domain)?;
        writeln!(o, "    }},")?;
    }
    o.push_str("];\n\nstatic METRICS: &[MetricDef] = &[\n");
    for m in metrics {
        writeln!(
            o,
            "    MetricDef {{ name: {:?}, formula: {:?}, description: {:?}, unit: {}, group: {:?}, perf_groups: {:?} }},",
            m.name, m.formula, m.description, m.unit, m.group, m.perf_groups
        )?;
    }
    o.push_str("];\n\n");
    o.push_str("static RETIRE_LATENCIES: &[(&str, f64)] = &[\n");
    for (k, v) in retire {
        writeln!(o, "    ({k:?}, {v:?}),")?;
    }
    o.push_str("];\n\n");
    Ok(())
}

/// Order nodes parent-first: depth-first, siblings in file order.
fn preorder(nodes: Vec<NodeOut>) -> Result<Vec<NodeOut>> {
    let names: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    for n in &nodes {
        if let Some(p) = &n.parent {
            if !names.contains(p) {
                bail!("node {} has unknown parent {p}", n.name);
            }
        }
    }
    let mut slots: Vec<Option<NodeOut>> = nodes.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len());
    fn visit(parent: Option<&str>, slots: &mut Vec<Option<NodeOut>>, out: &mut Vec<NodeOut>) {
        let idx: Vec<usize> = slots
            .iter()
            .enumerate()
            .filter(|(_, n)| n.as_ref().is_some_and(|n| n.parent.as_deref() == parent))
            .map(|(i, _)| i)
            .collect();
        for i in idx {
            if let Some(n) = slots[i].take() {
                let name = n.name.clone();
                out.push(n);
                visit(Some(&name), slots, out);
            }
        }
    }
    visit(None, &mut slots, &mut out);
    if out.len() != slots.len() {
        bail!("the node tree has a cycle");
    }
    // The level is the depth in the tree. Intel nodes carry perfmon's `Level`, which
    // [`resolve_parent`] made agree with the parent link; a disagreement left here is a
    // converter bug. E-core nodes carry 0 and get their depth.
    let mut depth: HashMap<String, u64> = HashMap::new();
    for n in &mut out {
        let d = n
            .parent
            .as_ref()
            .and_then(|p| depth.get(p))
            .map_or(1, |d| d + 1);
        if n.level != 0 && n.level != d {
            bail!(
                "{} has Level {} but is at depth {d} under {}",
                n.name,
                n.level,
                n.parent.as_deref().unwrap_or("the root")
            );
        }
        n.level = d;
        depth.insert(n.name.clone(), d);
    }
    Ok(out)
}

/// A tree node, as opposed to an `Info_*` or `Bottleneck_*` metric.
fn is_tree_node(name: &str) -> bool {
    !name.starts_with("Info_") && !name.starts_with("Bottleneck_")
}

/// The depth a legacy name gives: `metric_TMA_....Serializing_Operation(%)` has two dots
/// per level below 1, so level 3.
fn legacy_depth(legacy: &str) -> Option<u64> {
    let rest = legacy.strip_prefix("metric_TMA_")?;
    let dots = rest.len() - rest.trim_start_matches('.').len();
    (dots % 2 == 0).then_some(dots as u64 / 2 + 1)
}

/// Each tree node's parent in the outline the dotted legacy names draw: the nearest node
/// before it in file order whose depth is one less (`None` at level 1).
fn legacy_outline(rows: &[&Value]) -> Result<HashMap<String, Option<String>>> {
    let mut open: Vec<String> = Vec::new(); // open[d - 1] = the last node seen at depth d
    let mut out = HashMap::new();
    for m in rows {
        let name = ident(s(m, "MetricName"));
        let legacy = s(m, "LegacyName");
        let depth = legacy_depth(legacy)
            .ok_or_else(|| anyhow!("{name}: legacy name `{legacy}` has no dotted depth"))?
            as usize;
        if depth > open.len() + 1 {
            bail!(
                "{name}: legacy name `{legacy}` is {depth} deep, below no node of depth {}",
                depth - 1
            );
        }
        open.truncate(depth - 1);
        out.insert(name.clone(), open.last().cloned());
        open.push(name);
    }
    Ok(out)
}

/// What the data says about one node's place in the tree.
struct Evidence<'a> {
    name: &'a str,
    legacy_name: &'a str,
    /// perfmon `Level`.
    level: u64,
    parent_category: Option<String>,
    /// perfmon `Level` of the `ParentCategory` node.
    parent_category_level: Option<u64>,
    /// The converted threshold, for the message.
    threshold: &'a str,
    /// Tree nodes the threshold names at `level - 1`.
    threshold_parents: &'a [&'a str],
    /// The parent in the legacy-name outline.
    outline_parent: Option<String>,
}

struct Place {
    parent: Option<String>,
    /// Set when the parent is not perfmon's `ParentCategory`.
    resolution: Option<String>,
}

/// The parent of a node, from the hierarchy rather than from `ParentCategory` alone.
///
/// perfmon's `ParentCategory` sometimes contradicts the rest of the record: on SKX and CLX
/// `Serializing_Operation` has Level 3, the threshold chain
/// `Serializing_Operation > 10 & Core_Bound > 10 & Backend_Bound > 20` and the legacy name
/// `....Serializing_Operation`, yet ParentCategory `Ports_Utilized_0` (a level-4 node). The
/// level is the one `Level` and the legacy name agree on; the parent is the node one level
/// up that the threshold chain names and that the legacy-name outline (dotted names in file
/// order) puts above the node. When those two disagree, or neither gives a parent, the
/// data is refused. ParentCategory is kept when it agrees; otherwise the choice is returned
/// as a resolution to print.
fn resolve_parent(e: &Evidence) -> Result<Place> {
    let name = e.name;
    let depth = legacy_depth(e.legacy_name);
    if depth != Some(e.level) {
        bail!(
            "{name}: Level {} but legacy name `{}` is at depth {depth:?}",
            e.level,
            e.legacy_name
        );
    }
    let hierarchy = if e.level == 1 {
        None
    } else {
        let from_threshold = match e.threshold_parents {
            [] => None,
            [one] => Some(one.to_string()),
            many => bail!(
                "{name}: the threshold names several level-{} nodes: {}",
                e.level - 1,
                many.join(", ")
            ),
        };
        match (from_threshold, &e.outline_parent) {
            (Some(t), Some(o)) if t != *o => bail!(
                "{name}: the threshold chain names {t} but the legacy-name outline puts it under {o}"
            ),
            (Some(t), _) => Some(t),
            (None, Some(o)) => Some(o.clone()),
            (None, None) => bail!("{name}: level {} with no parent in the threshold chain or the legacy-name outline", e.level),
        }
    };
    if hierarchy == e.parent_category {
        return Ok(Place {
            parent: hierarchy,
            resolution: None,
        });
    }
    let chosen = hierarchy.as_deref().unwrap_or("none (level 1)");
    let why = if e.threshold_parents.is_empty() {
        format!("Level {} and legacy name {}", e.level, e.legacy_name)
    } else {
        format!(
            "Level {}, threshold `{}` and legacy name {}",
            e.level, e.threshold, e.legacy_name
        )
    };
    let resolution = match (&e.parent_category, e.parent_category_level) {
        (None, _) => format!("{name}: no ParentCategory; parent {chosen} from its {why}"),
        (Some(pc), Some(l)) => format!(
            "{name}: ParentCategory {pc} (level {l}) contradicts its {why}; parent {chosen}"
        ),
        (Some(pc), None) => format!(
            "{name}: ParentCategory {pc} is not a tree node; parent {chosen} from its {why}"
        ),
    };
    Ok(Place {
        parent: hierarchy,
        resolution: Some(resolution),
    })
}
