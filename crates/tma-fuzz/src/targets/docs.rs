//! tma's own documents: `tma_render::recognize` first (as every reader of inputs does), then
//! the reader of the schema it names — `tma.stat` and `tma.stat_software` through `tma diff`'s
//! and `tma report`'s loaders; `tma.diff`, `tma.diff-profile`, `tma.locate` and `tma.bench`
//! through `tma report`'s; `tma.snapshot` (`tma stat --record`) through
//! `tma_perf::snapshot::read`; `tma.kvm`,
//! `tma.kvm-memory`, `tma.workload` and `tma.doctor.verify` through their typed readers.
use crate::{Bound, Target};

pub const TARGET: Target = Target {
    name: "docs",
    setup: crate::warm_models,
    bound: |_| Bound {
        per_byte: 128,
        fixed: 8 << 20,
    },
    run: docs,
};

fn docs(data: &[u8]) {
    let recognized = tma_render::recognize(data);
    let Some(schema) = recognized.schema() else {
        return;
    };
    let root = crate::repo_root().join("tests/fixtures/doctor/this-vm");
    let host = tma_host::Host::new(root.join("sys"), root.join("proc"));
    use tma_stat::render::{counts, tree};
    match schema {
        s if s == tree::SCHEMA || s == counts::SOFTWARE_SCHEMA => {
            let path = crate::scratch_file("doc.json", data);
            let cfg = tma_diff::DiffConfig {
                host: host.clone(),
                ..tma_diff::DiffConfig::default()
            };
            let _ = tma_diff::input::load(&cfg, &path, &mut std::io::sink());
            report(data, host);
        }
        s if [
            tma_diff::render::SCHEMA,
            tma_diff::render::PROFILE_SCHEMA,
            tma_profile::render::JSON_SCHEMA,
            tma_bench::render::JSON_SCHEMA,
        ]
        .contains(&s) =>
        {
            report(data, host)
        }
        tma_perf::snapshot::SCHEMA => {
            let _ = tma_perf::snapshot::read(data);
        }
        tma_kvm::render::SCHEMA => {
            let _ = serde_json::from_slice::<tma_kvm::doc::KvmDoc>(data);
        }
        tma_kvm::render::MEMORY_SCHEMA => {
            let _ = serde_json::from_slice::<tma_kvm::doc::MemoryReport>(data);
        }
        tma_workloads::workload::render::SCHEMA => {
            let _ = tma_workloads::workload::WorkloadReport::read(data);
        }
        tma_doctor::verify::RECORDED_SCHEMA => {
            let _ = tma_doctor::verify::parse_recorded(data);
        }
        _ => {}
    }
}

/// `tma report`'s loader of one input (it reads a path).
fn report(data: &[u8], host: tma_host::Host) {
    let path = crate::scratch_file("doc.json", data);
    let cfg = tma_report::ReportConfig {
        inputs: vec![path.clone()],
        host,
        ..tma_report::ReportConfig::default()
    };
    let _ = tma_report::input::load(&cfg, &path, &mut std::io::sink());
}
