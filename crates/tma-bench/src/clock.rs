//! Clock backends other than the TSC: PERF_COUNT_HW_CPU_CYCLES opened through tma-perf
//! ([`tma_perf::cycles`]), read with read(2) (`perf`) or from user space through the perf mmap
//! page and rdpmc (`rdpmc`); and core counter 0 programmed through the msr driver
//! ([`tma_perf::msr`]), read with rdpmc (`msr`).

use std::io;

use tma_perf::cycles::Cycles;

/// Why the cycles event cannot be used, in words a user can act on.
pub fn explain_open_error(e: &io::Error, paranoid: Option<i32>) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            "no hardware PMU (cycles event not supported)".to_string()
        }
        // A user-space-only counter of the calling thread.
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "permission denied opening the cycles event (perf_event_paranoid is {}): {}",
            paranoid.map_or("unknown".to_string(), |p| p.to_string()),
            tma_sys::advice::permission(tma_sys::advice::Op::PerfOpenUser)
        ),
        _ => format!("cannot open the cycles event: {e}"),
    }
}

fn paranoid() -> Option<i32> {
    tma_host::Host::system().perf_event_paranoid().ok()
}

/// Open a user-space-only cycles counter on the calling thread.
pub fn open_cycles() -> Result<Cycles, String> {
    Cycles::open().map_err(|e| explain_open_error(&e, paranoid()))
}

/// Whether a clock can be used on this machine (Err carries the reason, e.g.
/// "no hardware PMU (cycles event not supported)"). The MSR clock is checked on the current
/// CPU without `--force`.
pub fn available(clock: crate::ClockKind) -> Result<(), String> {
    match clock {
        #[cfg(not(target_arch = "x86_64"))]
        crate::ClockKind::Msr | crate::ClockKind::Tsc => Err("x86-64 only".into()),
        #[cfg(target_arch = "x86_64")]
        crate::ClockKind::Msr => {
            let vendor = tma_sys::cpu::vendor();
            let cpu = crate::sys::current_cpu().unwrap_or(0);
            tma_perf::msr::MsrSetup::system()
                .check(cpu, &vendor, false)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        #[cfg(target_arch = "x86_64")]
        crate::ClockKind::Tsc => {
            if std::is_x86_feature_detected!("sse2") {
                Ok(())
            } else {
                Err("no TSC".into())
            }
        }
        crate::ClockKind::Perf => open_cycles().map(|_| ()),
        crate::ClockKind::Rdpmc => {
            let c = open_cycles()?;
            let mut s = c
                .into_user_reads()
                .map_err(|e| format!("cannot map the perf page: {e}"))?;
            s.enable()
                .map_err(|e| format!("cannot enable the cycles counter: {e}"))?;
            if s.read().is_some() {
                Ok(())
            } else {
                Err("the kernel does not allow user-space counter reads (cap_user_rdpmc=0)".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_errors_are_explained() {
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(
            explain_open_error(&e, Some(2)),
            "no hardware PMU (cycles event not supported)"
        );
        let e = io::Error::from_raw_os_error(libc::EACCES);
        let m = explain_open_error(&e, Some(3));
        assert!(m.contains("perf_event_paranoid is 3"), "{m}");
        assert!(
            m.contains("sudo sysctl kernel.perf_event_paranoid=2"),
            "{m}"
        );
    }
}
