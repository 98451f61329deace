//! Each fuzz target's seeds: what afl starts a campaign from (scripts/fuzz.sh writes them
//! with fuzz/'s `mkseeds`) and what this crate's tests replay. For a target, in this order (a
//! later seed of the same name replaces an earlier one):
//! * the seeds no fixture file holds as such, made here: `expr`, every distinct formula and
//!   threshold of the bundled catalog; `docs`, the `tma.kvm-memory` documents of the fixture
//!   /proc trees (tests/fixtures/roots), as `tma kvm --memory --json` writes them;
//!   `evaluate`, for every model its tree's events counted (one interval of plausible counts,
//!   SMT off and on), and the perf stat recordings of tests/fixtures/import (`real/`, `arm/`,
//!   the synthetic ones) each prefixed for the model its name names (the layout
//!   [`crate::targets::evaluate`] reads);
//! * the files of `fuzz/seeds/<target>/` (fuzz/seeds/README.md says how each was made);
//! * the test fixtures [`fixture_files`] lists, named by their path under tests/fixtures
//!   (`/` as `_`); a `proc` seed starts with the byte of its parser ([`proc_kind`]); a `sysfs`
//!   seed is one fixture PMU (`sysfs_seeds`).
//!
//! Seeds over 8 KiB (32 KiB for perf.data) are left out: large seeds slow every mutation of
//! them (afl's advice is under 1 KB), and the smallest real perf.data files are a few KiB.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A target's seeds by file name.
pub type Seeds = BTreeMap<String, Vec<u8>>;

/// The seeds of `target` (one of [`crate::targets::ALL`]'s names).
pub fn gather(target: &str) -> Seeds {
    let mut out = Seeds::new();
    match target {
        "expr" => expr_seeds(&mut out),
        "docs" => docs_seeds(&mut out),
        "evaluate" => evaluate_seeds(&mut out),
        _ => {}
    }
    let root = crate::repo_root();
    for f in files_in(&root.join("fuzz/seeds").join(target)) {
        if let (Some(name), Ok(bytes)) = (file_name(&f), std::fs::read(&f)) {
            out.insert(name, bytes);
        }
    }
    let fixtures = root.join("tests/fixtures");
    for f in fixture_files(target) {
        let Ok(mut bytes) = std::fs::read(&f) else {
            continue;
        };
        let rel = f.strip_prefix(&fixtures).unwrap_or(&f).to_string_lossy();
        if target == "proc" {
            bytes.insert(0, proc_kind(&f.to_string_lossy()));
        }
        out.insert(rel.replace('/', "_"), bytes);
    }
    if target == "sysfs" {
        sysfs_seeds(&mut out);
    }
    let max = if target.starts_with("perf_data") {
        32 << 10
    } else {
        8 << 10
    };
    out.retain(|_, bytes| bytes.len() <= max);
    out
}

/// Write the seeds of `target` to `dir`, replacing what it held.
pub fn write(dir: &Path, target: &str) -> std::io::Result<usize> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let seeds = gather(target);
    for (name, bytes) in &seeds {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(seeds.len())
}

/// The saved crashes of `target` (`tests/fixtures/fuzz/<target>/`, README files aside), each
/// an input the target once failed on, by path. The `proc` ones are kept without the byte
/// that picks the parser: it is put back ([`proc_kind`] of the file's name).
pub fn crashes(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = crate::repo_root().join("tests/fixtures/fuzz").join(target);
    let mut out = Vec::new();
    for f in files_in(&dir) {
        let mut bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if target == "proc" {
            bytes.insert(0, proc_kind(&f.to_string_lossy()));
        }
        out.push((f, bytes));
    }
    out
}

/// The plain files of `dir` (not README.md), sorted; none when it does not exist.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && !p.ends_with("README.md"))
        .collect();
    files.sort();
    files
}

fn file_name(p: &Path) -> Option<String> {
    Some(p.file_name()?.to_string_lossy().into_owned())
}

/// The files under tests/fixtures that match `pattern`, a path whose components may hold one
/// `*` each (matching any name that does not start with a dot), sorted.
fn glob(pattern: &str) -> Vec<PathBuf> {
    let mut paths = vec![crate::repo_root().join("tests/fixtures")];
    for comp in pattern.split('/') {
        let mut next = Vec::new();
        for p in &paths {
            match comp.split_once('*') {
                None => next.push(p.join(comp)),
                Some((pre, post)) => {
                    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                        let name = e.file_name().to_string_lossy().into_owned();
                        if !name.starts_with('.')
                            && name.len() >= pre.len() + post.len()
                            && name.starts_with(pre)
                            && name.ends_with(post)
                        {
                            next.push(e.path());
                        }
                    }
                }
            }
        }
        paths = next;
    }
    paths.retain(|p| p.exists());
    paths.sort();
    paths
}

/// Every plain file under `dir`, at any depth.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            walk(&p, out);
        } else if ft.is_file() {
            out.push(p);
        }
    }
}

/// The fixture files each target starts from.
pub fn fixture_files(target: &str) -> Vec<PathBuf> {
    let patterns: &[&str] = match target {
        "perf_stat" => &[
            "import/*.csv",
            "import/perf-json-*.json",
            "import/real/*/perf-stat.csv",
            "import/real/*/perf-stat.json",
            "import/real/*/perf-output.txt",
            "import/zen5-pipeline-synthetic/perf-output.txt",
            "serve/*.csv",
        ],
        "perf_data" => &["locate/two-events.perf.data"],
        "perf_data_z" => &["perf-compressed/compressed.perf.data"],
        "docs" => &[
            "diff/*.json",
            "report/*.json",
            "import/golden/*.json",
            "doctor/verify/*.json",
        ],
        "tracefs" => &["kvm/format-*/*"],
        "proc" => &["import/cpuinfo-*.txt", "locate/syswide.kallsyms"],
        _ => &[],
    };
    let mut files: Vec<PathBuf> = patterns.iter().flat_map(|p| glob(p)).collect();
    files.retain(|f| f.is_file());
    if target == "docs" {
        // tma's own documents only: those that name their schema.
        files.retain(|f| std::fs::read(f).is_ok_and(|b| b.windows(8).any(|w| w == b"\"schema\"")));
    }
    if target == "proc" {
        let fixtures = crate::repo_root().join("tests/fixtures");
        let mut found = Vec::new();
        for d in ["doctor", "roots", "live"] {
            walk(&fixtures.join(d), &mut found);
        }
        found.retain(|f| {
            let path = f.to_string_lossy();
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            name != "README.md"
                && (path.contains("/proc/")
                    || ["online", "possible", "enabled", "defrag"].contains(&&*name))
        });
        found.sort();
        files.splice(0..0, found);
    }
    files
}

/// The parser of the `proc` target (its input's first byte, [`crate::targets::proc`]) for a
/// fixture file's path.
pub fn proc_kind(path: &str) -> u8 {
    let name = path.rsplit('/').next().unwrap_or(path);
    if path.contains("cpuinfo") {
        0
    } else if path.contains("smaps") {
        1
    } else if path.contains("maps") {
        2
    } else if path.contains("kallsyms") {
        3
    } else if path.contains("mountinfo") {
        4
    } else if ["online", "possible", "cpus"].contains(&name) || name.starts_with("cpu-list") {
        5
    } else if ["enabled", "defrag"].contains(&name) {
        7
    } else {
        6
    }
}

/// One `sysfs` seed per fixture PMU: its format files as `<field> <content>` lines, a blank
/// line, then its event aliases' terms (the layout [`crate::targets::sysfs`] reads).
fn sysfs_seeds(out: &mut Seeds) {
    let fixtures = crate::repo_root().join("tests/fixtures");
    let pmus = glob("sysfs/*/bus/event_source/devices/*")
        .into_iter()
        .chain(glob("doctor/*/sys/bus/event_source/devices/*"));
    for pmu in pmus {
        if !pmu.join("format").is_dir() {
            continue;
        }
        let mut seed = Vec::new();
        for fmt in sorted_entries(&pmu.join("format")) {
            let content = std::fs::read_to_string(&fmt).unwrap_or_default();
            let field = fmt.file_name().unwrap_or_default().to_string_lossy();
            seed.extend_from_slice(
                format!("{field} {}\n", content.trim_end_matches('\n')).as_bytes(),
            );
        }
        seed.push(b'\n');
        for ev in sorted_entries(&pmu.join("events")) {
            if !ev
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .contains('.')
            {
                seed.extend(std::fs::read(&ev).unwrap_or_default());
            }
        }
        let rel = pmu
            .strip_prefix(&fixtures)
            .unwrap_or(&pmu)
            .to_string_lossy();
        out.insert(rel.replace('/', "_"), seed);
    }
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Every distinct formula and threshold of the bundled catalog, one a seed.
fn expr_seeds(out: &mut Seeds) {
    let mut seen = std::collections::BTreeSet::new();
    for m in tma_catalog::models() {
        let texts = m
            .nodes
            .iter()
            .flat_map(|n| [n.formula, n.threshold])
            .chain(m.metrics.iter().map(|x| x.formula));
        for t in texts {
            if !t.is_empty() {
                seen.insert(t);
            }
        }
    }
    for (i, t) in seen.iter().enumerate() {
        out.insert(format!("catalog-{i:04}"), t.as_bytes().to_vec());
    }
}

/// The `tma.kvm-memory` documents of the fixture /proc trees.
fn docs_seeds(out: &mut Seeds) {
    let roots = crate::repo_root().join("tests/fixtures/roots");
    for name in ["qemu-hugetlbfs", "guest-memfd"] {
        let root = roots.join(name);
        let cfg = tma_kvm::memory::MemoryConfig {
            target: tma_kvm::memory::MemoryTarget::All,
            host: tma_host::Host::new(root.join("sys"), root.join("proc")),
        };
        let Ok(report) = tma_kvm::memory::run(&cfg) else {
            continue;
        };
        let mut json = Vec::new();
        if tma_kvm::render::memory_json(&mut json, &report).is_ok() {
            out.insert(format!("kvm-memory-{name}.json"), json);
        }
    }
}

/// Seeds of the `evaluate` target (see [`crate::targets::evaluate`] for the layout).
fn evaluate_seeds(out: &mut Seeds) {
    let models = tma_catalog::models();
    for (i, m) in models.iter().enumerate() {
        let (_, events) = crate::evaluate_request(m, None);
        for smt in [0u8, 1] {
            // Counts mode, a one-second interval (duration code 7), the text renderer, one
            // reading per event: tag 3 (a raw f64) with a counted share of 16/16.
            let mut seed = vec![i as u8, smt | (7 << 5)];
            for (k, _) in events.iter().enumerate() {
                seed.push(3 | (16 << 3));
                let v = 1e9 * (((k * 7919) % 97) as f64 + 1.0) / 100.0;
                seed.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            out.insert(format!("counts-{}-smt{smt}", m.key), seed);
        }
    }
    // Recordings: the model is the one whose key starts the file's or directory's name.
    let import = crate::repo_root().join("tests/fixtures/import");
    let mut files = Vec::new();
    for sub in ["", "real", "arm"] {
        let Ok(rd) = std::fs::read_dir(import.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                for f in ["perf-stat.csv", "perf-stat.json", "perf-output.txt"] {
                    if p.join(f).is_file() {
                        files.push(p.join(f));
                    }
                }
            } else if p.extension().is_some_and(|x| x == "csv") {
                files.push(p);
            }
        }
    }
    files.sort();
    for f in files {
        let name = f
            .strip_prefix(&import)
            .unwrap_or(&f)
            .to_string_lossy()
            .replace('/', "_");
        let base = name.trim_start_matches("real_").trim_start_matches("arm_");
        // The longest key that starts the name (`adl-e` before `adl`); zen4 otherwise.
        let model = models
            .iter()
            .enumerate()
            .filter(|(_, m)| base.starts_with(m.key))
            .max_by_key(|(_, m)| m.key.len())
            .map_or_else(
                || models.iter().position(|m| m.key == "zen4").unwrap_or(0),
                |(i, _)| i,
            );
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        // Recording mode, rendered as JSON (3).
        let mut seed = vec![model as u8, 2 | (3 << 2)];
        seed.extend_from_slice(&bytes);
        out.insert(format!("recording-{name}"), seed);
    }
}
