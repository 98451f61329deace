//! /proc and /sys text: every parser of it runs on each input — `/proc/cpuinfo`
//! (`tma_catalog::parse_cpuinfo`, `tma_perf::host::CpuInfo::parse`, the snapshot's
//! `CpuIdentity::from_cpuinfo`), `/proc/<pid>/smaps` and `maps` (`tma_perf::host`, and
//! `tma_profile::aggregate::parse_proc_maps`, the mmap table of a profile),
//! `/proc/kallsyms`, `/proc/self/mountinfo` (the cgroup2 mount), CPU lists (`cpus`,
//! `online`), integers (`perf_event_paranoid`), selected-value files
//! (`[madvise] never`) and the THP mode.
use tma_fuzz::Bound;

fn main() {
    tma_fuzz::main(
        "proc",
        Bound {
            per_byte: 64,
            fixed: 1 << 20,
        },
        |data| {
            use tma_perf::host;
            let _ = tma_catalog::registry::parse_cpuinfo(data);
            let _ = host::CpuInfo::parse(data);
            let _ = tma_perf::snapshot::CpuIdentity::from_cpuinfo(data);
            let _ = host::parse_smaps(data);
            let _ = host::parse_maps(data);
            if let Ok(text) = std::str::from_utf8(data) {
                for line in text.lines().take(4) {
                    let _ = host::parse_maps_header(line);
                }
            }
            let _ = tma_profile::aggregate::parse_proc_maps(data);
            let _ = tma_profile::symbols::Kallsyms::parse(data);
            let _ = host::parse_cgroup2_mount(data);
            let _ = host::parse_cpu_list(data);
            let _ = host::parse_int(data);
            let _ = host::parse_selected(data);
            let _ = host::parse_thp_mode(data);
        },
    );
}
