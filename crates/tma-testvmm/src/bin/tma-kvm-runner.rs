//! Test guest for `tma kvm`: runs a real-mode guest that performs a known number of port I/O,
//! MMIO, HLT, CPUID, RDMSR and WRMSR operations, then prints the `EXPECT ...` line and the
//! exits its VMM loop handled. Usage: `tma-kvm-runner [ITERATIONS]` (default 1000).

use std::process::ExitCode;

#[cfg(not(target_arch = "x86_64"))]
fn main() -> ExitCode {
    eprintln!("tma-kvm-runner: error: the test guest is x86-64 code; this build is for another architecture");
    ExitCode::from(2)
}

#[cfg(target_arch = "x86_64")]
fn main() -> ExitCode {
    let n = match std::env::args().nth(1).map(|s| s.parse::<u16>()) {
        None => 1000,
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("tma-kvm-runner: error: ITERATIONS must be a number from 1 to 65535");
            return ExitCode::from(2);
        }
    };
    let expected = tma_testvmm::runner::RunnerCounts::expected(u32::from(n));
    match tma_testvmm::runner::run_guest(n) {
        Ok(got) => {
            println!("{}", expected.expect_line());
            println!(
                "HANDLED {}",
                got.expect_line().trim_start_matches("EXPECT ")
            );
            if !got.kvm_stats.is_empty() {
                let wanted = [
                    "exits",
                    "io_exits",
                    "mmio_exits",
                    "halt_exits",
                    "irq_exits",
                    "insn_emulation",
                ];
                let s: Vec<String> = got
                    .kvm_stats
                    .iter()
                    .filter(|(n, _)| wanted.contains(&n.as_str()))
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect();
                println!("KVM_STATS {}", s.join(" "));
            }
            let mut cmp = got.clone();
            cmp.kvm_stats.clear();
            if cmp != expected {
                eprintln!("tma-kvm-runner: error: the VMM handled other exits than the guest program performs");
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tma-kvm-runner: error: {e}");
            ExitCode::from(2)
        }
    }
}
