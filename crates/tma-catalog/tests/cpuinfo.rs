//! `/proc/cpuinfo` fixtures through `parse_cpuinfo` and `identify`.

use tma_catalog::{identify, parse_cpuinfo};

fn read_fixture(name: &str) -> Vec<u8> {
    let p = tma_testkit::fixture("catalog").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn key(name: &str) -> Vec<&'static str> {
    let (v, f, m, s) = parse_cpuinfo(&read_fixture(name)).unwrap();
    identify(&v, f, m, s)
        .unwrap()
        .iter()
        .map(|m| m.key)
        .collect()
}

#[test]
fn recorded_amd_vm_is_zen5() {
    let (v, f, m, s) = parse_cpuinfo(&read_fixture("cpuinfo-amd-epyc-vm.txt")).unwrap();
    assert_eq!((v.as_str(), f, m, s), ("AuthenticAMD", 26, 2, 1));
    assert_eq!(key("cpuinfo-amd-epyc-vm.txt"), ["zen5"]);
}

#[test]
fn synthetic_intel_ids() {
    assert_eq!(key("cpuinfo-spr-synthetic.txt"), ["spr"]);
    assert_eq!(key("cpuinfo-skx-clx-synthetic.txt"), ["clx"]);
    // Hybrid: P-core table first, then the E-core one; Alder Lake-N: E-core only.
    assert_eq!(key("cpuinfo-rpl-hybrid-synthetic.txt"), ["adl", "adl-e"]);
    assert_eq!(key("cpuinfo-adln-synthetic.txt"), ["adl-e"]);
}

#[test]
fn truncated_cpuinfo_is_an_error() {
    let full = read_fixture("cpuinfo-spr-synthetic.txt");
    let cut = &full[..40]; // vendor line only
    let e = parse_cpuinfo(cut).unwrap_err().to_string();
    assert!(e.contains("cpu family") && e.contains("--cpu"), "{e}");
    assert!(parse_cpuinfo(b"").is_err());
}
