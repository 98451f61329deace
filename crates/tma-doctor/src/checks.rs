//! The individual checks.

use crate::{Check, CpuidFacts, DoctorReport, Roots, Status};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

struct CpuInfo {
    flags: Vec<String>,
    vendor: Option<String>,
    model_name: Option<String>,
    mhz: Vec<f64>,
}

impl CpuInfo {
    fn parse(text: &str) -> CpuInfo {
        let mut c = CpuInfo {
            flags: Vec::new(),
            vendor: None,
            model_name: None,
            mhz: Vec::new(),
        };
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            match k {
                "flags" if c.flags.is_empty() => {
                    c.flags = v.split_whitespace().map(str::to_string).collect()
                }
                "vendor_id" if c.vendor.is_none() => c.vendor = Some(v.to_string()),
                "model name" if c.model_name.is_none() => c.model_name = Some(v.to_string()),
                "cpu MHz" => {
                    if let Ok(x) = v.parse() {
                        c.mhz.push(x)
                    }
                }
                _ => {}
            }
        }
        c
    }
    fn has(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x == f)
    }
}

fn check(
    id: &'static str,
    status: Status,
    summary: impl Into<String>,
    explanation: impl Into<String>,
    fix: Option<String>,
) -> Check {
    Check {
        id,
        status,
        summary: summary.into(),
        explanation: explanation.into(),
        fix,
    }
}

/// The CPU PMU directories under bus/event_source/devices (`cpu`, or `cpu_core`/`cpu_atom`).
fn cpu_pmus(roots: &Roots) -> Vec<String> {
    let dir = roots.sys.join("bus/event_source/devices");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n == "cpu" || n.starts_with("cpu_"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn cap_eff(roots: &Roots) -> Option<u64> {
    let st = roots.read_proc("self/status")?;
    st.lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// The selected value of a sysfs choice file (`always [madvise] never` -> `madvise`); a file
/// holding one bare word is that word.
pub(crate) fn bracketed(s: &str) -> Option<String> {
    let t = s.trim();
    if !t.contains('[') && !t.is_empty() && !t.contains(char::is_whitespace) {
        return Some(t.to_string());
    }
    let a = s.find('[')?;
    let b = s[a..].find(']')?;
    Some(s[a + 1..a + b].to_string())
}

/// Run every check.
pub fn run_checks(roots: &Roots, cpuid: &CpuidFacts) -> DoctorReport {
    let info = CpuInfo::parse(&roots.read_proc("cpuinfo").unwrap_or_default());
    let vendor = cpuid.vendor.clone().or_else(|| info.vendor.clone());
    let pmus = cpu_pmus(roots);
    let mut checks = Vec::new();

    // Hardware PMU.
    let hypervisor = info.has("hypervisor");
    checks.push(if !pmus.is_empty() {
        check(
            "pmu",
            Status::Ok,
            format!("hardware PMU present ({})", pmus.join(", ")),
            "Core PMU events (cycles, instructions, TMA slots) can be counted.",
            None,
        )
    } else {
        let why = if hypervisor {
            "This is a virtual machine (cpuinfo `hypervisor` flag) whose hypervisor exposes no virtual PMU, so the kernel registered no `cpu` PMU in /sys/bus/event_source/devices. Ask for a vPMU: KVM/QEMU `-cpu host,pmu=on`, libvirt `<pmu state='on'/>`, Firecracker/cloud instances: choose an instance type with PMU passthrough (e.g. bare-metal or a vPMU-enabled size)."
        } else {
            "No `cpu` PMU is registered in /sys/bus/event_source/devices on this bare-metal machine: the kernel lacks perf support for this CPU (CONFIG_PERF_EVENTS, CONFIG_CPU_SUP_INTEL/AMD) or the BIOS disabled the counters."
        };
        check(
            "pmu",
            Status::Problem,
            "no hardware PMU: hardware events (cycles, instructions, TMA) cannot be counted",
            format!("{why} Software events, tracepoints and rdtsc still work; `tma stat --import` analyses recordings made elsewhere."),
            None,
        )
    });

    // perf_event_paranoid and capabilities.
    let paranoid = roots
        .read_proc("sys/kernel/perf_event_paranoid")
        .and_then(|s| s.trim().parse::<i32>().ok());
    let caps = cap_eff(roots);
    let has_cap = |bit: u32| caps.is_some_and(|c| c & (1u64 << bit) != 0);
    let privileged = has_cap(CAP_PERFMON) || has_cap(CAP_SYS_ADMIN);
    let cap_text = match caps {
        Some(_) if has_cap(CAP_SYS_ADMIN) && has_cap(CAP_PERFMON) => {
            "this process has CAP_SYS_ADMIN and CAP_PERFMON".to_string()
        }
        Some(_) if has_cap(CAP_PERFMON) => "this process has CAP_PERFMON".into(),
        Some(_) if has_cap(CAP_SYS_ADMIN) => "this process has CAP_SYS_ADMIN".into(),
        Some(_) => "this process has neither CAP_PERFMON nor CAP_SYS_ADMIN".into(),
        None => "capabilities unknown (no CapEff in /proc/self/status)".into(),
    };
    let fix_paranoid = Some("echo 0 > /proc/sys/kernel/perf_event_paranoid  (persist: `sysctl -w kernel.perf_event_paranoid=0` in /etc/sysctl.d/)".to_string());
    checks.push(match paranoid {
        None => check(
            "paranoid",
            Status::Problem,
            "perf_event_paranoid is missing: the kernel has no perf_event support",
            "Without /proc/sys/kernel/perf_event_paranoid, perf_event_open does not exist (CONFIG_PERF_EVENTS=n).",
            None,
        ),
        Some(p) if privileged => check(
            "paranoid",
            Status::Ok,
            format!("perf_event_paranoid={p}, but {cap_text}"),
            "The capabilities override the paranoid level: per-process, per-CPU, kernel and tracepoint measurements are allowed.",
            None,
        ),
        Some(p) if p <= 0 => check(
            "paranoid",
            Status::Ok,
            format!("perf_event_paranoid={p}; {cap_text}"),
            "Unprivileged users may measure kernel code and whole CPUs (-a).",
            None,
        ),
        Some(1) => check(
            "paranoid",
            Status::Warning,
            format!("perf_event_paranoid=1; {cap_text}"),
            "Per-process measurements including the kernel work, system-wide (-a) and tracepoints (tma kvm) need root or CAP_PERFMON.",
            fix_paranoid,
        ),
        Some(p) => check(
            "paranoid",
            if p >= 3 { Status::Problem } else { Status::Warning },
            format!("perf_event_paranoid={p}; {cap_text}"),
            if p >= 3 {
                "Level 3 and above (Debian/Android patches) forbid perf_event_open for unprivileged users altogether."
            } else {
                "Unprivileged users may only count their own user-space code: kernel time is excluded from TMA slots (skewing the tree), and -a and tracepoints are refused."
            },
            fix_paranoid,
        ),
    });

    // rdpmc.
    let rdpmc: Vec<(String, String)> = pmus
        .iter()
        .filter_map(|p| {
            roots
                .read_sys(&format!("bus/event_source/devices/{p}/rdpmc"))
                .map(|v| (p.clone(), v.trim().to_string()))
        })
        .collect();
    checks.push(if pmus.is_empty() {
        check(
            "rdpmc",
            Status::Warning,
            "rdpmc unavailable: there is no hardware PMU",
            "User-space rdpmc faults without a PMU; `tma bench` falls back to calibrated rdtsc timing.",
            None,
        )
    } else if rdpmc.is_empty() {
        check(
            "rdpmc",
            Status::Warning,
            "no rdpmc control file under the cpu PMU",
            "The kernel does not say whether user-space rdpmc is allowed; `tma bench` will try and fall back to perf reads.",
            None,
        )
    } else if rdpmc.iter().any(|(_, v)| v == "0") {
        let p = &rdpmc.iter().find(|(_, v)| v == "0").map(|x| x.0.clone()).unwrap_or_default();
        check(
            "rdpmc",
            Status::Warning,
            format!(
                "user-space rdpmc disabled ({})",
                rdpmc.iter().map(|(p, v)| format!("{p}/rdpmc={v}")).collect::<Vec<_>>().join(", ")
            ),
            "`tma bench` needs rdpmc for low-overhead counter reads around short instruction sequences.",
            Some(format!("echo 1 > /sys/bus/event_source/devices/{p}/rdpmc")),
        )
    } else {
        check(
            "rdpmc",
            Status::Ok,
            format!(
                "user-space rdpmc allowed ({})",
                rdpmc.iter().map(|(p, v)| format!("{p}/rdpmc={v}")).collect::<Vec<_>>().join(", ")
            ),
            "1 = allowed while a perf event is mmapped (default), 2 = always.",
            None,
        )
    });

    // NMI watchdog.
    let nmi = roots
        .read_proc("sys/kernel/nmi_watchdog")
        .map(|s| s.trim().to_string());
    checks.push(match nmi.as_deref() {
        Some("0") => check(
            "nmi_watchdog",
            Status::Ok,
            "NMI watchdog off",
            "No counter is reserved by the hard-lockup detector.",
            None,
        ),
        Some(v) if pmus.is_empty() => check(
            "nmi_watchdog",
            Status::Ok,
            format!("NMI watchdog={v}, but there is no PMU counter for it to take"),
            "On machines with a PMU the hard-lockup detector permanently occupies one general-purpose counter.",
            None,
        ),
        Some(v) => check(
            "nmi_watchdog",
            Status::Warning,
            format!("NMI watchdog on ({v}): it takes one general-purpose counter"),
            "The hard-lockup detector keeps a cycles event on one counter of every CPU, so TMA groups get one counter less and multiplex more.",
            Some("echo 0 > /proc/sys/kernel/nmi_watchdog  (persist: kernel.nmi_watchdog=0 in /etc/sysctl.d/)".into()),
        ),
        None => check(
            "nmi_watchdog",
            Status::Ok,
            "no NMI watchdog control (kernel built without the hard-lockup detector)",
            "",
            None,
        ),
    });

    // Counters per core type.
    checks.push(counters_check(
        roots,
        &pmus,
        cpuid,
        &info,
        vendor.as_deref(),
    ));

    // Hybrid.
    let hybrid: Vec<(String, String)> = pmus
        .iter()
        .filter(|p| p.starts_with("cpu_"))
        .map(|p| {
            (
                p.clone(),
                roots
                    .read_sys(&format!("bus/event_source/devices/{p}/cpus"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|| "?".into()),
            )
        })
        .collect();
    checks.push(if hybrid.len() > 1 {
        check(
            "hybrid",
            Status::Warning,
            format!(
                "hybrid CPU: {}",
                hybrid.iter().map(|(p, c)| format!("{p} on CPUs {c}")).collect::<Vec<_>>().join("; ")
            ),
            "P-cores and E-cores have different PMUs, events and TMA trees; a thread that migrates is measured partly on each. Pin the workload to one core type (taskset -c <cpus>) for a single TMA tree.",
            hybrid
                .iter()
                .find(|(p, _)| p == "cpu_core")
                .or(hybrid.first())
                .map(|(_, c)| format!("taskset -c {c} <command>")),
        )
    } else {
        check(
            "hybrid",
            Status::Ok,
            "not a hybrid CPU (one core type)",
            "",
            None,
        )
    });

    // SMT.
    let smt_active = roots
        .read_sys("devices/system/cpu/smt/active")
        .map(|s| s.trim().to_string());
    let smt_control = roots
        .read_sys("devices/system/cpu/smt/control")
        .map(|s| s.trim().to_string());
    checks.push(match smt_active.as_deref() {
        Some("1") => check(
            "smt",
            Status::Ok,
            format!("SMT on (control={})", smt_control.as_deref().unwrap_or("?")),
            "Sibling hyperthreads share the core: TMA level-1 slots are per core on some CPUs, and a busy sibling changes the results. For clean numbers keep the sibling idle, or turn SMT off (echo off > /sys/devices/system/cpu/smt/control).",
            None,
        ),
        Some(_) => check(
            "smt",
            Status::Ok,
            format!("SMT off (control={})", smt_control.as_deref().unwrap_or("?")),
            "One hardware thread per core: per-thread and per-core counts agree.",
            None,
        ),
        None => check("smt", Status::Ok, "SMT state unknown (no /sys/devices/system/cpu/smt)", "", None),
    });

    // Governor.
    let cpus = online_cpus(roots);
    let mut govs: Vec<(u32, String)> = Vec::new();
    for c in &cpus {
        if let Some(g) = roots.read_sys(&format!(
            "devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
        )) {
            govs.push((*c, g.trim().to_string()));
        }
    }
    checks.push(if govs.is_empty() {
        check(
            "governor",
            Status::Ok,
            "no cpufreq driver: the frequency is not controlled by this kernel",
            if hypervisor {
                "Typical of a VM: the host decides the frequency, so cycle-based figures can vary with host load."
            } else {
                "The firmware or hardware manages the frequency."
            },
            None,
        )
    } else if govs.iter().all(|(_, g)| g == "performance") {
        check("governor", Status::Ok, "cpufreq governor: performance on all CPUs", "", None)
    } else {
        let mut distinct: Vec<&str> = govs.iter().map(|(_, g)| g.as_str()).collect();
        distinct.sort();
        distinct.dedup();
        check(
            "governor",
            Status::Warning,
            format!("cpufreq governor: {} (not performance)", distinct.join(", ")),
            "Frequency changes during a run change cycle counts per unit of work and the time share of memory stalls. Use the performance governor while measuring.",
            Some("for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo performance > $g; done".into()),
        )
    });

    // Boost / turbo.
    let no_turbo = roots
        .read_sys("devices/system/cpu/intel_pstate/no_turbo")
        .map(|s| s.trim().to_string());
    let boost = roots
        .read_sys("devices/system/cpu/cpufreq/boost")
        .map(|s| s.trim().to_string());
    checks.push(match (no_turbo.as_deref(), boost.as_deref()) {
        (Some("0"), _) => check(
            "boost",
            Status::Warning,
            "turbo on (intel_pstate/no_turbo=0)",
            "Turbo frequency depends on temperature and active cores, so run-to-run timings vary; counts of cycles per instruction are unaffected. Disable it for repeatable timings.",
            Some("echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo".into()),
        ),
        (Some(_), _) => check("boost", Status::Ok, "turbo off (intel_pstate/no_turbo=1)", "", None),
        (None, Some("1")) => check(
            "boost",
            Status::Warning,
            "boost on (cpufreq/boost=1)",
            "Boost frequency depends on temperature and active cores, so run-to-run timings vary. Disable it for repeatable timings.",
            Some("echo 0 > /sys/devices/system/cpu/cpufreq/boost".into()),
        ),
        (None, Some(_)) => check("boost", Status::Ok, "boost off (cpufreq/boost=0)", "", None),
        (None, None) => check("boost", Status::Ok, "no turbo/boost control visible", "", None),
    });

    // Deepest C-state.
    checks.push(cstate_check(roots, cpus.first().copied().unwrap_or(0)));

    // THP.
    let tdx = info.has("tdx_guest");
    let thp = roots
        .read_sys("kernel/mm/transparent_hugepage/enabled")
        .and_then(|s| bracketed(&s));
    let defrag = roots
        .read_sys("kernel/mm/transparent_hugepage/defrag")
        .and_then(|s| bracketed(&s));
    let thp_fix = Some("echo always > /sys/kernel/mm/transparent_hugepage/enabled".to_string());
    let tdx_note = if tdx {
        " In this TDX guest every 4 KiB page costs a TDX-module page acceptance and a TLB miss walks guest and secure-EPT tables, so huge pages are crucial."
    } else {
        ""
    };
    checks.push(match thp.as_deref() {
        Some("always") => check(
            "thp",
            Status::Ok,
            format!("transparent huge pages: always (defrag {})", defrag.as_deref().unwrap_or("?")),
            format!("Large heaps get 2 MiB pages: fewer DTLB misses for memory-intensive and AI workloads.{tdx_note}"),
            None,
        ),
        Some("madvise") => check(
            "thp",
            if tdx { Status::Warning } else { Status::Ok },
            format!("transparent huge pages: madvise only (defrag {})", defrag.as_deref().unwrap_or("?")),
            format!("Only programs that call madvise(MADV_HUGEPAGE) get 2 MiB pages; others pay more DTLB misses (recommended: always, for memory-intensive and AI workloads).{tdx_note}"),
            if tdx { thp_fix } else { None },
        ),
        Some(v) => check(
            "thp",
            if tdx { Status::Problem } else { Status::Warning },
            format!("transparent huge pages: {v}"),
            format!("Every allocation uses 4 KiB pages: memory-intensive and AI workloads show inflated DTLB-miss and Memory_Bound figures.{tdx_note}"),
            thp_fix,
        ),
        None => check("thp", Status::Warning, "transparent huge pages not available (CONFIG_TRANSPARENT_HUGEPAGE=n)", "Memory-intensive workloads pay more DTLB misses.", None),
    });

    // nohz_full / isolcpus.
    let cmdline = roots.read_proc("cmdline").unwrap_or_default();
    let param = |name: &str| {
        cmdline
            .split_whitespace()
            .take_while(|w| *w != "--")
            .find_map(|w| w.strip_prefix(&format!("{name}=")).map(str::to_string))
    };
    let nohz = roots
        .read_sys("devices/system/cpu/nohz_full")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s != "(null)");
    let isolated = roots
        .read_sys("devices/system/cpu/isolated")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    checks.push(match (nohz.or(param("nohz_full")), isolated.or(param("isolcpus"))) {
        (None, None) => check(
            "isolation",
            Status::Ok,
            "no nohz_full / isolcpus CPUs",
            "Measured programs share CPUs with the rest of the system; for the least noise boot with isolcpus=<cpus> nohz_full=<cpus> and pin the workload there.",
            None,
        ),
        (n, i) => check(
            "isolation",
            Status::Ok,
            format!(
                "isolated CPUs: {}; nohz_full: {}",
                i.as_deref().unwrap_or("none"),
                n.as_deref().unwrap_or("none")
            ),
            "Pin measured programs to these CPUs (taskset -c) for the least interference; note that `-a` still counts them.",
            None,
        ),
    });

    // Hypervisor / confidential VM.
    let sev: Vec<&str> = ["sev", "sev_es", "sev_snp"]
        .into_iter()
        .filter(|f| info.has(f))
        .collect();
    let sev_sysfs =
        roots.sys.join("firmware/sev").exists() || roots.sys.join("kernel/mm/sev").exists();
    let vendor_dmi = roots
        .read_sys("class/dmi/id/sys_vendor")
        .map(|s| s.trim().to_string());
    checks.push(if tdx {
        check(
            "hypervisor",
            Status::Warning,
            "Intel TDX confidential guest (cpuinfo flag tdx_guest)",
            "Exits go through the TDX module (TDCALL), the host cannot see guest state, and a vPMU is only present when the TD was created with PMU access. Timer and MSR exits are expensive: see `tma kvm` on the host; huge pages matter most here.",
            None,
        )
    } else if !sev.is_empty() || sev_sysfs {
        check(
            "hypervisor",
            Status::Warning,
            format!("AMD SEV confidential guest ({})", if sev.is_empty() { "sysfs".to_string() } else { sev.join(", ") }),
            "Memory is encrypted; with SEV-ES/SNP the host cannot read guest registers and exits go through the GHCB (vmgexit). A vPMU is often absent.",
            None,
        )
    } else if hypervisor {
        check(
            "hypervisor",
            Status::Warning,
            format!("running in a virtual machine{}", vendor_dmi.map(|v| format!(" ({v})")).unwrap_or_default()),
            "Counters (if any) are virtualised: the host may multiplex them, steal time inflates cycles, and frequency is the host's. No TDX or SEV flags were found.",
            None,
        )
    } else {
        check("hypervisor", Status::Ok, "bare metal (no hypervisor flag)", "", None)
    });

    // TSC.
    checks.push(tsc_check(&info, cpuid.tsc_mhz));

    DoctorReport { checks }
}

fn online_cpus(roots: &Roots) -> Vec<u32> {
    let s = roots
        .read_sys("devices/system/cpu/online")
        .unwrap_or_else(|| "0".into());
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b.min(a.saturating_add(4096)));
                }
            }
            None => {
                if let Ok(x) = part.parse() {
                    v.push(x)
                }
            }
        }
    }
    v
}

fn counters_check(
    roots: &Roots,
    pmus: &[String],
    cpuid: &CpuidFacts,
    info: &CpuInfo,
    vendor: Option<&str>,
) -> Check {
    if pmus.is_empty() {
        return check(
            "counters",
            Status::Problem,
            "0 programmable counters available (no hardware PMU)",
            "Without counters the TMA tree cannot be measured here.",
            None,
        );
    }
    let mut parts = Vec::new();
    for p in pmus {
        let caps = |f: &str| {
            roots
                .read_sys(&format!("bus/event_source/devices/{p}/caps/{f}"))
                .map(|s| s.trim().to_string())
        };
        let mut s = p.clone();
        if let Some(n) = caps("pmu_name") {
            s.push_str(&format!(" ({n})"));
        }
        match (caps("num_counters"), caps("num_counters_fixed")) {
            (Some(g), Some(f)) => s.push_str(&format!(": {g} general-purpose + {f} fixed")),
            (Some(g), None) => s.push_str(&format!(": {g} general-purpose")),
            _ => {}
        }
        parts.push(s);
    }
    let from_cpuid = match (cpuid.gp_counters, cpuid.fixed_counters) {
        (Some(g), Some(f)) => Some(format!(
            "CPUID leaf 0xA: perfmon v{}, {g} general-purpose + {f} fixed counters per logical CPU",
            cpuid.perfmon_version.unwrap_or(0)
        )),
        _ => None,
    };
    let amd = match vendor {
        Some("AuthenticAMD") | Some("HygonGenuine") => Some(if info.has("perfctr_core") {
            "AMD core PMU: 6 general-purpose counters (perfctr_core)"
        } else {
            "AMD core PMU: 4 general-purpose counters (no perfctr_core)"
        }),
        _ => None,
    };
    let mut summary = parts.join("; ");
    if let Some(c) = &from_cpuid {
        summary.push_str(&format!("; {c}"));
    }
    if let Some(a) = amd {
        summary.push_str(&format!("; {a}"));
    }
    let low = cpuid.gp_counters.is_some_and(|g| g < 4);
    check(
        "counters",
        if low { Status::Warning } else { Status::Ok },
        summary,
        if low {
            "Fewer than 4 general-purpose counters (SMT sharing, a hypervisor reserving some, or the NMI watchdog): TMA groups must multiplex."
        } else {
            "TMA level 1 needs 4-5 events at once per core type; more levels multiplex."
        },
        None,
    )
}

fn cstate_check(roots: &Roots, cpu: u32) -> Check {
    let base = format!("devices/system/cpu/cpu{cpu}/cpuidle");
    let mut deepest: Option<(String, u64)> = None;
    for i in 0..32 {
        let Some(name) = roots.read_sys(&format!("{base}/state{i}/name")) else {
            break;
        };
        let disabled = roots
            .read_sys(&format!("{base}/state{i}/disable"))
            .is_some_and(|d| d.trim() == "1");
        if disabled {
            continue;
        }
        let lat = roots
            .read_sys(&format!("{base}/state{i}/latency"))
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        deepest = Some((name.trim().to_string(), lat));
    }
    match deepest {
        None => check("cstate", Status::Ok, "no cpuidle states (idle handled by the hypervisor or firmware)", "", None),
        Some((n, lat)) if lat > 100 => check(
            "cstate",
            Status::Warning,
            format!("deepest enabled C-state on cpu{cpu}: {n} (exit latency {lat} us)"),
            "Waking from deep C-states adds latency to each wake-up and can lower the frequency ramp; for latency-sensitive measurements limit it (e.g. `cpupower idle-set -D 10`).",
            Some("cpupower idle-set -D 10".into()),
        ),
        Some((n, lat)) => check(
            "cstate",
            Status::Ok,
            format!("deepest enabled C-state on cpu{cpu}: {n} (exit latency {lat} us)"),
            "",
            None,
        ),
    }
}

fn tsc_check(info: &CpuInfo, measured: Option<f64>) -> Check {
    let constant = info.has("constant_tsc");
    let nonstop = info.has("nonstop_tsc");
    let known = info.has("tsc_known_freq");
    let tsc_mhz = info.model_name.as_deref().and_then(|m| {
        let at = m.rfind('@')?;
        let g = m[at + 1..]
            .trim()
            .strip_suffix("GHz")?
            .trim()
            .parse::<f64>()
            .ok()?;
        Some(g * 1000.0)
    });
    let cpu_mhz = if info.mhz.is_empty() {
        None
    } else {
        Some(info.mhz.iter().sum::<f64>() / info.mhz.len() as f64)
    };
    let flags = format!(
        "constant_tsc={} nonstop_tsc={} tsc_known_freq={}",
        if constant { "yes" } else { "no" },
        if nonstop { "yes" } else { "no" },
        if known { "yes" } else { "no" }
    );
    let rates = format!(
        "TSC {}, cpu MHz {}",
        match (measured, tsc_mhz) {
            (Some(m), _) => format!("measured {m:.0} MHz"),
            (None, Some(m)) => format!("nominal {m:.0} MHz"),
            (None, None) => "rate unknown (no '@ x GHz' in the model name)".into(),
        },
        cpu_mhz.map_or_else(|| "unknown".into(), |m| format!("{m:.0}"))
    );
    if !(constant && nonstop) {
        return check(
            "tsc",
            Status::Warning,
            format!("TSC not invariant ({flags}); {rates}"),
            "rdtsc ticks change with frequency or stop in deep C-states: timings from rdtsc are unreliable; use perf task-clock instead.",
            None,
        );
    }
    check(
        "tsc",
        Status::Ok,
        format!("TSC invariant ({flags}); {rates}"),
        "rdtsc counts at a constant rate, which is not the core clock: under turbo, power saving or a hypervisor, TSC ticks and core cycles differ, so `tma bench` calibrates TSC against a dependent add chain before reporting cycles.",
        None,
    )
}
