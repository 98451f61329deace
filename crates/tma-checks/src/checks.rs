//! The individual checks.

use tma_catalog::{CoreKind, Model, Topdown, Vendor};
use tma_host::CpuInfo;
use tma_sys::advice::{self, Op};

use crate::{Check, CpuidFacts, DoctorReport, Roots, Status};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

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

/// The core PMUs under bus/event_source/devices (`cpu`, or `cpu_atom`/`cpu_core`), by name.
fn cpu_pmus(roots: &Roots) -> Vec<String> {
    let mut v: Vec<String> = tma_host::sysfs::core_pmu_types(&roots.sys)
        .into_iter()
        .map(|(name, _)| name.to_string())
        .collect();
    v.sort();
    v
}

/// The selected value of a sysfs choice file (`always [madvise] never` -> `madvise`); a file
/// holding one bare word is that word.
pub fn bracketed(s: &str) -> Option<String> {
    tma_host::parse_selected(s.as_bytes()).ok()
}

/// What several checks look at, read once.
struct Facts<'a> {
    roots: &'a Roots,
    cpuid: &'a CpuidFacts,
    info: CpuInfo,
    /// CPUID's vendor, else cpuinfo's.
    vendor: Option<String>,
    /// The core PMUs (`cpu`, or `cpu_core` / `cpu_atom`).
    pmus: Vec<String>,
    /// Online CPUs (CPU 0 when unknown).
    cpus: Vec<u32>,
    /// The catalog's model of this CPU (the P-core's on hybrid parts), when it knows it.
    model: Option<&'static Model>,
}

impl Facts<'_> {
    /// An AMD (or Hygon) CPU, by CPUID or cpuinfo.
    fn is_amd(&self) -> bool {
        matches!(
            self.vendor.as_deref(),
            Some("AuthenticAMD") | Some("HygonGenuine")
        )
    }
    /// A sysfs file's text, trimmed.
    fn sys(&self, rel: &str) -> Option<String> {
        self.roots.sys_text(rel).ok()
    }
}

/// Run every check, in report order.
pub fn run_checks(roots: &Roots, cpuid: &CpuidFacts) -> DoctorReport {
    let info = roots.cpuinfo().unwrap_or_default();
    let f = Facts {
        roots,
        cpuid,
        vendor: cpuid.vendor.clone().or_else(|| info.vendor.clone()),
        info,
        pmus: cpu_pmus(roots),
        cpus: roots.online_cpus_or_cpu0(),
        model: cpu_model(roots),
    };
    let checks: [fn(&Facts) -> Check; 17] = [
        pmu_check,
        paranoid_check,
        rdpmc_check,
        nmi_watchdog_check,
        counters_check,
        hybrid_check,
        smt_check,
        governor_check,
        boost_check,
        cstate_check,
        thp_check,
        isolation_check,
        hypervisor_check,
        tsc_check,
        sample_read_check,
        topdown_group_check,
        smt_level1_check,
    ];
    DoctorReport {
        checks: checks.iter().map(|c| c(&f)).collect(),
    }
}

/// The catalog model of the CPU `<proc>/cpuinfo` names (the performance core's on a hybrid
/// part), `None` when the catalog does not know it.
pub fn cpu_model(roots: &Roots) -> Option<&'static Model> {
    let info = roots.cpuinfo_bytes().ok()?;
    let (vendor, family, model, stepping) = tma_catalog::parse_cpuinfo(&info).ok()?;
    let models = tma_catalog::identify(&vendor, family, model, stepping).ok()?;
    models
        .iter()
        .find(|m| m.core_kind != CoreKind::Efficiency)
        .or(models.first())
        .copied()
}

/// The kernel caveats of group sampling (`tma locate --tree`) that apply on this host with
/// `model` (the model the run uses: `--cpu`, else this CPU's): the `sample_read`,
/// `topdown_group`, `nmi_watchdog` and `smt_level1` checks that are not ok.
pub fn tree_caveats(roots: &Roots, model: Option<&'static Model>) -> Vec<Check> {
    let cpuid = CpuidFacts::default();
    let info = roots.cpuinfo().unwrap_or_default();
    let f = Facts {
        roots,
        cpuid: &cpuid,
        vendor: info.vendor.clone(),
        info,
        pmus: cpu_pmus(roots),
        cpus: roots.online_cpus_or_cpu0(),
        model,
    };
    [
        sample_read_check(&f),
        topdown_group_check(&f),
        nmi_watchdog_check(&f),
        smt_level1_check(&f),
    ]
    .into_iter()
    .filter(|c| c.status != Status::Ok)
    .collect()
}

/// `major.minor` of a kernel release string (`6.11.0-1-amd64` -> (6, 11)).
pub fn kernel_version(osrelease: &str) -> Option<(u32, u32)> {
    let mut parts = osrelease.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Does sample-read follow a launched command's threads? The kernel takes `inherit` with
/// `PERF_SAMPLE_READ` from Linux 6.12 (<proc>/sys/kernel/osrelease).
fn sample_read_check(f: &Facts) -> Check {
    let release = f.roots.proc_text("sys/kernel/osrelease").ok();
    let release = release.as_deref().map(str::trim);
    let what = "`tma locate --tree` reads a group with every sample (PERF_SAMPLE_READ). To follow the threads and processes a launched command starts, each event is opened with `inherit`, which the kernel takes together with PERF_SAMPLE_READ only from Linux 6.12. On an older kernel tma opens the group per CPU on the command's first thread, without inherit, and says so: the threads it starts are not sampled. `-p PID` (one group per thread that exists when sampling starts) and `-a` (one per CPU, every task) work on any kernel.";
    match release.map(|r| (r, kernel_version(r))) {
        Some((r, Some(v))) if v < (6, 12) => check(
            "sample_read",
            Status::Warning,
            format!("Linux {r} is older than 6.12: group sampling of a launched command follows only its first thread"),
            what,
            None,
        ),
        Some((r, Some(_))) => check(
            "sample_read",
            Status::Ok,
            format!("Linux {r}: sample-read follows child threads (inherit with PERF_SAMPLE_READ, 6.12 and later)"),
            what,
            None,
        ),
        Some((r, None)) => check(
            "sample_read",
            Status::Warning,
            format!("kernel release {r:?} has no version number: whether sample-read follows child threads (Linux 6.12) is unknown"),
            what,
            None,
        ),
        None => check(
            "sample_read",
            Status::Warning,
            "kernel release unknown (no /proc/sys/kernel/osrelease): whether sample-read follows child threads (Linux 6.12) is unknown",
            what,
            None,
        ),
    }
}

/// The topdown metric events (Ice Lake and later P-cores) read zero outside a group led by
/// `slots`: are `slots` and `topdown-*` exposed by the kernel on this CPU's core PMU?
fn topdown_group_check(f: &Facts) -> Check {
    let name = |m: &Model| format!("{} ({})", m.name, m.key);
    let Some(m) = f.model.filter(|m| m.topdown != Topdown::Generic) else {
        return check(
            "topdown_group",
            Status::Ok,
            match f.model {
                Some(m) => format!("{}: no topdown metric events (level 1 from general-purpose counters)", name(m)),
                None if f.is_amd() => {
                    "AMD CPU: no topdown metric events (level 1 from general-purpose counters)".into()
                }
                None => "CPU model unknown to the catalog: no topdown metric events known".into(),
            },
            "The topdown metric events (slots plus PERF_METRICS) exist on Intel P-cores from Ice Lake on.",
            None,
        );
    };
    let explanation = "From Ice Lake on, level 1 comes from the `slots` fixed counter and the PERF_METRICS fractions (topdown-retiring, topdown-bad-spec, topdown-fe-bound, topdown-be-bound; eight on Sapphire Rapids and later). These metric events take no counter of their own and read zero unless they are in a group led by slots: tma always puts slots first (with perf: `-e '{slots,topdown-retiring,...}'`). In a sampled group slots leads but cannot sample, so the next event samples.";
    if !f.pmus.iter().any(|p| p == m.pmu) {
        return check(
            "topdown_group",
            Status::Ok,
            format!(
                "{}: no `{}` PMU here, so no topdown metric events to read",
                name(m),
                m.pmu
            ),
            explanation,
            None,
        );
    }
    let events = format!("bus/event_source/devices/{}/events", m.pmu);
    let wanted = [
        "slots",
        "topdown-retiring",
        "topdown-bad-spec",
        "topdown-fe-bound",
        "topdown-be-bound",
    ];
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|e| !f.roots.sys_exists(&format!("{events}/{e}")))
        .collect();
    if missing.is_empty() {
        check(
            "topdown_group",
            Status::Ok,
            format!("{}: slots and the topdown metric events are exposed; they read zero outside a slots-led group (tma groups them so)", name(m)),
            explanation,
            None,
        )
    } else {
        check(
            "topdown_group",
            Status::Warning,
            format!("{}: the kernel exposes no {} on `{}`: the topdown metric events cannot be read", name(m), missing.join(", "), m.pmu),
            format!("{explanation} The kernel adds them from Linux 5.9 (5.18 for the eight of Sapphire Rapids); a hypervisor may not pass PERF_METRICS to a guest. Without them the tree falls back to the events level 1 had before Ice Lake, where the catalog has them."),
            None,
        )
    }
}

/// Before Ice Lake (Intel without PERF_METRICS), with SMT on, the two threads of a core
/// share the pipeline and the level-1 formulas need whole-core (AnyThread) counts: a
/// per-thread (per-process, per-function) level 1 is meaningless.
fn smt_level1_check(f: &Facts) -> Check {
    let smt_on = f.sys("devices/system/cpu/smt/active").as_deref() == Some("1");
    let explanation = "Before Ice Lake the level-1 events count per core with SMT on only through AnyThread (or are estimated from CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE / REF_XCLK): the two hardware threads share issue slots, so a per-thread count (a process, a function in `tma locate --tree`) cannot be split into the four level-1 shares. Count whole cores (`tma stat -a`), or turn SMT off for per-thread trees. Ice Lake and later count slots per thread; AMD Zen has a smt_contention node.";
    match f.model {
        Some(m) if m.vendor == Vendor::Intel && m.topdown == Topdown::Generic && m.core_kind != CoreKind::Efficiency && smt_on => check(
            "smt_level1",
            Status::Warning,
            format!("{} ({}) with SMT on: per-thread level 1 is meaningless", m.name, m.key),
            explanation,
            Some("echo off > /sys/devices/system/cpu/smt/control".into()),
        ),
        Some(m) if m.vendor == Vendor::Intel && m.topdown == Topdown::Generic && m.core_kind != CoreKind::Efficiency => check(
            "smt_level1",
            Status::Ok,
            format!("{} ({}) with SMT {}: per-thread level 1 holds", m.name, m.key, if smt_on { "on" } else { "off or unknown" }),
            explanation,
            None,
        ),
        Some(m) => check(
            "smt_level1",
            Status::Ok,
            format!("{} ({}): level 1 is counted per thread, with or without SMT", m.name, m.key),
            explanation,
            None,
        ),
        None if f.is_amd() => check(
            "smt_level1",
            Status::Ok,
            "AMD CPU: dispatch slots are counted per thread, with or without SMT",
            explanation,
            None,
        ),
        None => check(
            "smt_level1",
            Status::Ok,
            "CPU model unknown to the catalog: the SMT caveat of pre-Ice Lake Intel cannot be judged",
            explanation,
            None,
        ),
    }
}

/// Is there a hardware core PMU?
fn pmu_check(f: &Facts) -> Check {
    if !f.pmus.is_empty() {
        check(
            "pmu",
            Status::Ok,
            format!("hardware PMU present ({})", f.pmus.join(", ")),
            "Core PMU events (cycles, instructions, TMA slots) can be counted.",
            None,
        )
    } else {
        let why = if f.info.has_flag("hypervisor") {
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
    }
}

/// perf_event_paranoid, with this process's capabilities.
fn paranoid_check(f: &Facts) -> Check {
    let paranoid = f.roots.perf_event_paranoid().ok();
    let caps = f.roots.effective_capabilities().ok();
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
    // Level 0: per-process with the kernel, and whole CPUs (-a); tracepoints need more (tma kvm
    // says what when it is refused).
    let fix_paranoid = Some(advice::permission(Op::PerfOpenCpu).to_string());
    match paranoid {
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
    }
}

/// May user space read counters with rdpmc?
fn rdpmc_check(f: &Facts) -> Check {
    let rdpmc: Vec<(String, String)> = f
        .pmus
        .iter()
        .filter_map(|p| {
            f.sys(&format!("bus/event_source/devices/{p}/rdpmc"))
                .map(|v| (p.clone(), v))
        })
        .collect();
    if f.pmus.is_empty() {
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
        let p = &rdpmc
            .iter()
            .find(|(_, v)| v == "0")
            .map(|x| x.0.clone())
            .unwrap_or_default();
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
                rdpmc
                    .iter()
                    .map(|(p, v)| format!("{p}/rdpmc={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "1 = allowed while a perf event is mmapped (default), 2 = always.",
            None,
        )
    }
}

/// Does the NMI watchdog hold a counter?
fn nmi_watchdog_check(f: &Facts) -> Check {
    match f.roots.nmi_watchdog() {
        Ok(0) => check(
            "nmi_watchdog",
            Status::Ok,
            "NMI watchdog off",
            "No counter is reserved by the hard-lockup detector.",
            None,
        ),
        Ok(v) if f.pmus.is_empty() => check(
            "nmi_watchdog",
            Status::Ok,
            format!("NMI watchdog={v}, but there is no PMU counter for it to take"),
            "On machines with a PMU the hard-lockup detector permanently occupies one general-purpose counter.",
            None,
        ),
        Ok(v) => check(
            "nmi_watchdog",
            Status::Warning,
            format!("NMI watchdog on ({v}): it takes one general-purpose counter"),
            "The hard-lockup detector keeps a cycles event on one counter of every CPU, so TMA groups get one counter less and multiplex more; the group `tma locate --tree` reads with every sample leaves out what no longer fits.",
            Some(advice::NMI_WATCHDOG_OFF.to_string()),
        ),
        Err(_) => check(
            "nmi_watchdog",
            Status::Ok,
            "no NMI watchdog control (kernel built without the hard-lockup detector)",
            "",
            None,
        ),
    }
}

/// More than one core type (P-cores and E-cores)?
fn hybrid_check(f: &Facts) -> Check {
    let hybrid: Vec<(String, String)> = f
        .pmus
        .iter()
        .filter(|p| p.starts_with("cpu_"))
        .map(|p| {
            (
                p.clone(),
                f.sys(&format!("bus/event_source/devices/{p}/cpus"))
                    .unwrap_or_else(|| "?".into()),
            )
        })
        .collect();
    if hybrid.len() > 1 {
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
    }
}

/// Simultaneous multithreading on or off.
fn smt_check(f: &Facts) -> Check {
    let smt_active = f.sys("devices/system/cpu/smt/active");
    let smt_control = f.sys("devices/system/cpu/smt/control");
    match smt_active.as_deref() {
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
    }
}

/// The cpufreq governor of the online CPUs.
fn governor_check(f: &Facts) -> Check {
    let mut govs: Vec<(u32, String)> = Vec::new();
    for c in &f.cpus {
        if let Some(g) = f.sys(&format!(
            "devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
        )) {
            govs.push((*c, g));
        }
    }
    if govs.is_empty() {
        check(
            "governor",
            Status::Ok,
            "no cpufreq driver: the frequency is not controlled by this kernel",
            if f.info.has_flag("hypervisor") {
                "Typical of a VM: the host decides the frequency, so cycle-based figures can vary with host load."
            } else {
                "The firmware or hardware manages the frequency."
            },
            None,
        )
    } else if govs.iter().all(|(_, g)| g == "performance") {
        check(
            "governor",
            Status::Ok,
            "cpufreq governor: performance on all CPUs",
            "",
            None,
        )
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
    }
}

/// Turbo / boost frequencies.
fn boost_check(f: &Facts) -> Check {
    let no_turbo = f.sys("devices/system/cpu/intel_pstate/no_turbo");
    let boost = f.sys("devices/system/cpu/cpufreq/boost");
    match (no_turbo.as_deref(), boost.as_deref()) {
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
    }
}

/// Transparent huge pages (crucial in a TDX guest).
fn thp_check(f: &Facts) -> Check {
    let tdx = f.info.has_flag("tdx_guest");
    let thp = f
        .sys("kernel/mm/transparent_hugepage/enabled")
        .and_then(|s| bracketed(&s));
    let defrag = f
        .sys("kernel/mm/transparent_hugepage/defrag")
        .and_then(|s| bracketed(&s));
    let thp_fix = Some("echo always > /sys/kernel/mm/transparent_hugepage/enabled".to_string());
    let tdx_note = if tdx {
        " In this TDX guest every 4 KiB page costs a TDX-module page acceptance and a TLB miss walks guest and secure-EPT tables, so huge pages are crucial."
    } else {
        ""
    };
    match thp.as_deref() {
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
    }
}

/// nohz_full / isolcpus CPUs.
fn isolation_check(f: &Facts) -> Check {
    let cmdline = f.roots.proc_text("cmdline").unwrap_or_default();
    let param = |name: &str| {
        cmdline
            .split_whitespace()
            .take_while(|w| *w != "--")
            .find_map(|w| w.strip_prefix(&format!("{name}=")).map(str::to_string))
    };
    let nohz = f
        .sys("devices/system/cpu/nohz_full")
        .filter(|s| !s.is_empty() && s != "(null)");
    let isolated = f
        .sys("devices/system/cpu/isolated")
        .filter(|s| !s.is_empty());
    match (nohz.or(param("nohz_full")), isolated.or(param("isolcpus"))) {
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
    }
}

/// Virtual machine, TDX or SEV guest?
fn hypervisor_check(f: &Facts) -> Check {
    let sev: Vec<&str> = ["sev", "sev_es", "sev_snp"]
        .into_iter()
        .filter(|flag| f.info.has_flag(flag))
        .collect();
    let sev_sysfs = f.roots.sys_exists("firmware/sev") || f.roots.sys_exists("kernel/mm/sev");
    let vendor_dmi = f.sys("class/dmi/id/sys_vendor");
    if f.info.has_flag("tdx_guest") {
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
    } else if f.info.has_flag("hypervisor") {
        check(
            "hypervisor",
            Status::Warning,
            format!("running in a virtual machine{}", vendor_dmi.map(|v| format!(" ({v})")).unwrap_or_default()),
            "Counters (if any) are virtualised: the host may multiplex them, steal time inflates cycles, and frequency is the host's. No TDX or SEV flags were found.",
            None,
        )
    } else {
        check(
            "hypervisor",
            Status::Ok,
            "bare metal (no hypervisor flag)",
            "",
            None,
        )
    }
}

/// Programmable counters per core type (sysfs caps, CPUID leaf 0xA, AMD perfctr_core).
fn counters_check(f: &Facts) -> Check {
    let cpuid = f.cpuid;
    if f.pmus.is_empty() {
        return check(
            "counters",
            Status::Problem,
            "0 programmable counters available (no hardware PMU)",
            "Without counters the TMA tree cannot be measured here.",
            None,
        );
    }
    let mut parts = Vec::new();
    for p in &f.pmus {
        let caps = |cap: &str| f.sys(&format!("bus/event_source/devices/{p}/caps/{cap}"));
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
    let amd = match f.vendor.as_deref() {
        Some("AuthenticAMD") | Some("HygonGenuine") => Some(if f.info.has_flag("perfctr_core") {
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

/// The deepest enabled C-state of the first online CPU.
fn cstate_check(f: &Facts) -> Check {
    let cpu = f.cpus.first().copied().unwrap_or(0);
    let base = format!("devices/system/cpu/cpu{cpu}/cpuidle");
    let mut deepest: Option<(String, u64)> = None;
    for i in 0..32 {
        let Some(name) = f.sys(&format!("{base}/state{i}/name")) else {
            break;
        };
        let disabled = f
            .sys(&format!("{base}/state{i}/disable"))
            .is_some_and(|d| d == "1");
        if disabled {
            continue;
        }
        let lat = f
            .sys(&format!("{base}/state{i}/latency"))
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        deepest = Some((name, lat));
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

/// Is the TSC invariant, and at what rate?
fn tsc_check(f: &Facts) -> Check {
    let (info, measured) = (&f.info, f.cpuid.tsc_mhz);
    let constant = info.has_flag("constant_tsc");
    let nonstop = info.has_flag("nonstop_tsc");
    let known = info.has_flag("tsc_known_freq");
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
