//! Writes the seeds that no fixture file holds as such (not a fuzz target; scripts/fuzz.sh
//! runs it before fuzzing): `mkseeds <dir>` writes
//! * `<dir>/expr/`: every distinct formula and threshold of the bundled catalog, one a file;
//! * `<dir>/docs/`: the `tma.kvm-memory` documents of the fixture /proc trees
//!   (tests/fixtures/roots), as `tma kvm --memory --json` writes them.
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
            host: tma_perf::host::Host::new(root.join("sys"), root.join("proc")),
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
    println!("mkseeds: {} formulas", seen.len());
}
