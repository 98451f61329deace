//! `tma kvm --memory` on fixture /proc trees (tests/fixtures/roots/qemu-hugetlbfs and
//! tests/fixtures/roots/guest-memfd, both synthetic; see tests/fixtures/roots/README.md).

use std::path::PathBuf;

use tma_host::Host;
use tma_kvm::memory::{self, Backing, MemoryConfig, MemoryTarget};

fn root(name: &str) -> Host {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/roots")
        .join(name);
    Host::under(&p)
}

fn run(name: &str) -> memory::MemoryReport {
    memory::run(&MemoryConfig {
        target: MemoryTarget::All,
        host: root(name),
    })
    .unwrap()
}

#[test]
fn qemu_on_hugetlbfs_is_all_huge() {
    let r = run("qemu-hugetlbfs");
    assert_eq!(r.vms.len(), 1);
    let vm = &r.vms[0];
    assert_eq!((vm.pid, vm.name.as_str()), (4242, "qemu-system-x86"));
    // The 4 GiB hugetlbfs RAM only: the heap, stack and an 8 MiB anonymous region are not guest memory.
    assert_eq!(vm.mappings.len(), 1);
    let m = &vm.mappings[0];
    assert_eq!(m.backing, Backing::Hugetlbfs);
    assert_eq!(
        (m.page_size, m.size, m.resident),
        (2 << 20, 4 << 30, 4 << 30)
    );
    assert_eq!(vm.huge_share, 1.0);
    assert_eq!(vm.guest_memfd, None);
    assert_eq!(
        vm.verdict,
        "guest memory 4 GiB (4 GiB resident), 100% on huge pages: backed by huge pages"
    );
    assert_eq!(vm.fix, None);
    let mut text = Vec::new();
    tma_kvm::render::memory(&mut text, &r).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.starts_with(
            "VMM pid 4242 (qemu-system-x86)\nTHP: system madvise, process THP_enabled 1\n"
        ),
        "{text}"
    );
    assert!(text.contains("hugetlbfs  2 MiB  4 GiB"), "{text}");
    // -p finds the same; the host's THP mode comes from the tree.
    let one = memory::inspect(&root("qemu-hugetlbfs"), 4242).unwrap();
    assert_eq!(&one, vm);
    assert!(matches!(
        memory::inspect(&root("qemu-hugetlbfs"), 4243),
        Err(tma_kvm::KvmError::NoSuchProcess(4243))
    ));
}

#[test]
fn guest_memfd_is_reported_as_such() {
    let r = run("guest-memfd");
    let vm = &r.vms[0];
    assert_eq!(vm.pid, 5151);
    let g = vm.guest_memfd.as_ref().unwrap();
    assert_eq!((g.fds, g.mapped_bytes), (1, 0));
    assert_eq!(vm.mappings.len(), 1);
    assert_eq!(vm.mappings[0].backing, Backing::Anonymous);
    assert_eq!(
        (vm.bytes, vm.resident, vm.huge_bytes),
        (16 << 30, 64 << 20, 0)
    );
    assert!(
        vm.verdict.starts_with(
            "shared guest memory 16 GiB (64 MiB resident), 0% on huge pages: THP is madvise-only and this VMM does not madvise"
        ),
        "{}",
        vm.verdict
    );
    assert!(
        vm.verdict.contains("1 guest_memfd file(s)"),
        "{}",
        vm.verdict
    );
    assert!(vm.fix.as_deref().unwrap().contains("MADV_HUGEPAGE"));
    let mut json = Vec::new();
    tma_kvm::render::memory_json(&mut json, &r).unwrap();
    let json = String::from_utf8(json).unwrap();
    for needle in [
        "\"schema\": \"tma.kvm.memory\"",
        "\"schema_version\": 2",
        "\"guest_memfd\": {\n        \"fds\": 1,",
        "\"system\": \"madvise\"",
        "\"process_enabled\": true",
        "\"backing\": \"anonymous\"",
    ] {
        assert!(json.contains(needle), "{needle} in {json}");
    }
}

/// The `tma.kvm.memory` round trip: what `tma kvm --memory --json` writes reads back into
/// [`memory::MemoryReport`] (the document's type), equal to the report, and that, written
/// again, gives the same bytes.
#[test]
fn the_json_document_reads_back_as_written() {
    use tma_kvm::render::{MEMORY_SCHEMA, MEMORY_SCHEMA_VERSION};
    for name in ["qemu-hugetlbfs", "guest-memfd"] {
        let r = run(name);
        let mut bytes = Vec::new();
        tma_kvm::render::memory_json(&mut bytes, &r).unwrap();
        let found = tma_render::recognize(&bytes);
        assert_eq!(found.schema(), Some(MEMORY_SCHEMA));
        assert_eq!(found.version(), Some(MEMORY_SCHEMA_VERSION));
        let doc: memory::MemoryReport = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(doc, r, "{name}");
        let mut again = Vec::new();
        tma_render::write_json(&mut again, MEMORY_SCHEMA, MEMORY_SCHEMA_VERSION, &doc).unwrap();
        assert_eq!(String::from_utf8(again), String::from_utf8(bytes), "{name}");
    }
}
