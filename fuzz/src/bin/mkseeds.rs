//! Writes the seeds that no fixture file holds as such (not a fuzz target; scripts/fuzz.sh
//! runs it before fuzzing): `mkseeds <dir>` writes
//! * `<dir>/expr/`: every distinct formula and threshold of the bundled catalog, one a file;
//! * `<dir>/docs/`: the `tma.kvm-memory` documents of the fixture /proc trees
//!   (tests/fixtures/roots), as `tma kvm --memory --json` writes them;
//! * `<dir>/evaluate/`: for every model, its tree's events counted (one interval of plausible
//!   counts, SMT off and on), and the perf stat recordings of tests/fixtures/import (`real/`,
//!   `arm/`, the synthetic ones) each prefixed for the model its name names (the layout
//!   fuzz/src/bin/evaluate.rs reads).
use std::path::Path;

fn main() {
    let out = std::env::args().nth(1).expect("usage: mkseeds DIR");
    let out = Path::new(&out);
    let expr = out.join("expr");
    std::fs::create_dir_all(&expr).expect("create expr/");
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
        std::fs::write(expr.join(format!("catalog-{i:04}")), t).expect("write a formula");
    }
    let docs = out.join("docs");
    std::fs::create_dir_all(&docs).expect("create docs/");
    let roots = tma_fuzz::repo_root().join("tests/fixtures/roots");
    for name in ["qemu-hugetlbfs", "guest-memfd"] {
        let root = roots.join(name);
        let cfg = tma_kvm::memory::MemoryConfig {
            target: tma_kvm::memory::MemoryTarget::All,
            host: tma_host::Host::new(root.join("sys"), root.join("proc")),
        };
        let Ok(report) = tma_kvm::memory::run(&cfg) else {
            eprintln!("mkseeds: no memory report from {}", root.display());
            continue;
        };
        let mut json = Vec::new();
        if tma_kvm::render::memory_json(&mut json, &report).is_ok() {
            std::fs::write(docs.join(format!("kvm-memory-{name}.json")), json)
                .expect("write a document");
        }
    }
    evaluate_seeds(&out.join("evaluate"));
    println!("mkseeds: {} formulas", seen.len());
}

/// Seeds of the `evaluate` target (see fuzz/src/bin/evaluate.rs for the layout).
fn evaluate_seeds(dir: &Path) {
    std::fs::create_dir_all(dir).expect("create evaluate/");
    let models = tma_catalog::models();
    for (i, m) in models.iter().enumerate() {
        let (_, events) = tma_fuzz::evaluate_request(m, None);
        for smt in [0u8, 1] {
            // Counts mode, a one-second interval (duration code 7), the text renderer, one
            // reading per event: tag 3 (a raw f64) with a counted share of 16/16.
            let mut seed = vec![i as u8, smt | (7 << 5)];
            for (k, _) in events.iter().enumerate() {
                seed.push(3 | (16 << 3));
                let v = 1e9 * (((k * 7919) % 97) as f64 + 1.0) / 100.0;
                seed.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            std::fs::write(dir.join(format!("counts-{}-smt{smt}", m.key)), seed)
                .expect("write a seed");
        }
    }
    // Recordings: the model is the one whose key starts the file's or directory's name.
    let import = tma_fuzz::repo_root().join("tests/fixtures/import");
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
        std::fs::write(dir.join(format!("recording-{name}")), seed).expect("write a seed");
    }
}
