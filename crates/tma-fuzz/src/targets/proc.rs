//! /proc and /sys text. The first byte of an input picks the parser (modulo 8) and the rest
//! is the file's text (one parser per input, so that afl spends each run on one file's
//! parser rather than all of them on text meant for one; each fixture seed is prefixed with
//! the byte of its kind, see [`crate::seeds::proc_kind`]):
//! 0. `/proc/cpuinfo`: `tma_catalog::parse_cpuinfo`, `tma_host::CpuInfo::parse`, the
//!    snapshot's `CpuIdentity::from_cpuinfo`;
//! 1. `/proc/<pid>/smaps` (`host::parse_smaps`);
//! 2. `/proc/<pid>/maps` (`host::parse_maps`, `parse_maps_header` of its first lines,
//!    `tma_profile::aggregate::parse_proc_maps`, the mmap table of a profile);
//! 3. `/proc/kallsyms`;
//! 4. `/proc/self/mountinfo` (the cgroup2 mount);
//! 5. CPU lists (`cpus`, `online`);
//! 6. integers (`perf_event_paranoid`, `nmi_watchdog`);
//! 7. selected-value files (`[madvise] never`) and the THP mode.
use crate::{Bound, Target};

pub const TARGET: Target = Target {
    name: "proc",
    setup: crate::no_setup,
    bound: |_| Bound {
        per_byte: 64,
        fixed: 1 << 20,
    },
    run: |data| {
        use tma_host as host;
        let Some((kind, data)) = data.split_first() else {
            return;
        };
        match kind % 8 {
            0 => {
                let _ = tma_catalog::registry::parse_cpuinfo(data);
                let _ = host::CpuInfo::parse(data);
                let _ = tma_perf::snapshot::CpuIdentity::from_cpuinfo(data);
            }
            1 => {
                let _ = host::parse_smaps(data);
            }
            2 => {
                let _ = host::parse_maps(data);
                if let Ok(text) = std::str::from_utf8(data) {
                    for line in text.lines().take(4) {
                        let _ = host::parse_maps_header(line);
                    }
                }
                let _ = tma_profile::aggregate::parse_proc_maps(data);
            }
            3 => {
                let _ = tma_profile::symbols::Kallsyms::parse(data);
            }
            4 => {
                let _ = host::parse_cgroup2_mount(data);
            }
            5 => {
                let _ = host::parse_cpu_list(data);
            }
            6 => {
                let _ = host::parse_int(data);
            }
            _ => {
                let _ = host::parse_selected(data);
                let _ = host::parse_thp_mode(data);
            }
        }
    },
};
