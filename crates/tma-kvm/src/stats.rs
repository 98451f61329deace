//! Aggregation of decoded KVM events into a report: exits by reason with the time until the
//! next `kvm_entry` of the same thread (as `perf kvm stat` pairs them), per-vCPU breakdown,
//! VMM-level exits and the timer summary.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::decode::{mmio_kind_name, KvmEvent};
use crate::reasons::{userspace_exit_label, ExitReason, Isa, MSR_IA32_TSC_DEADLINE};

/// One sampled record with its perf sample header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Process id (tgid) of the thread that hit the tracepoint.
    pub pid: u32,
    /// Thread id (the vCPU thread).
    pub tid: u32,
    /// perf clock, nanoseconds.
    pub time_ns: u64,
    /// CPU the record was taken on.
    pub cpu: u32,
    pub event: KvmEvent,
}

/// Running statistics of durations (Welford), in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
struct Dur {
    n: u64,
    mean: f64,
    m2: f64,
    min: u64,
    max: u64,
    sum: u64,
}

impl Dur {
    fn add(&mut self, v: u64) {
        if self.n == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.n += 1;
        self.sum = self.sum.saturating_add(v);
        let d = v as f64 - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (v as f64 - self.mean);
    }
    /// Relative standard error of the mean, percent (perf's `+-` column).
    fn rel_err_pct(&self) -> Option<f64> {
        if self.n < 2 || self.mean == 0.0 {
            return None;
        }
        let var = self.m2 / (self.n - 1) as f64;
        Some(100.0 * (var / self.n as f64).sqrt() / self.mean)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct ReasonAcc {
    count: u64,
    dur: Dur,
}

#[derive(Debug, Clone, Copy, Default)]
struct Timer {
    external_interrupt: u64,
    preemption_timer: u64,
    tdcall: u64,
    svm_interrupt: u64,
    tsc_deadline_writes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum VmmKey {
    Pio(u32, bool),
    Msr(u32, bool),
    MmioWrite(u64),
}

fn time_fields(d: Option<&Dur>) -> (u64, Option<f64>, Option<f64>, Option<f64>) {
    match d {
        Some(d) if d.n > 0 => (
            d.n,
            Some(d.min as f64 / 1e3),
            Some(d.mean / 1e3),
            Some(d.max as f64 / 1e3),
        ),
        _ => (0, None, None, None),
    }
}

/// Counts of every sampled tracepoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventTotals {
    pub kvm_exit: u64,
    pub kvm_entry: u64,
    pub kvm_userspace_exit: u64,
    pub kvm_pio: u64,
    pub kvm_mmio: u64,
    pub kvm_msr: u64,
    pub kvm_cpuid: u64,
    pub kvm_emulate_insn: u64,
}

impl EventTotals {
    /// True when VMM-level events moved (anything but kvm_exit/kvm_entry).
    pub fn vmm_level_moved(&self) -> bool {
        self.kvm_userspace_exit
            + self.kvm_pio
            + self.kvm_mmio
            + self.kvm_msr
            + self.kvm_cpuid
            + self.kvm_emulate_insn
            > 0
    }
}

#[derive(Debug, Clone, Default)]
struct ThreadAcc {
    pid: u32,
    vcpu_id: Option<u32>,
    exits: BTreeMap<ExitReason, ReasonAcc>,
    userspace_exits: u64,
    emulated: u64,
}

/// Accumulates samples; [`Aggregator::report`] turns them into a [`KvmReport`].
#[derive(Debug, Clone, Default)]
pub struct Aggregator {
    totals: EventTotals,
    exits: BTreeMap<ExitReason, ReasonAcc>,
    pending: HashMap<u32, (ExitReason, u64)>,
    /// Last pio / msr / mmio-write of each thread, waiting for its kvm_entry (perf kvm stat's
    /// ioport, msr and mmio-write times).
    pending_vmm: HashMap<u32, (VmmKey, u64)>,
    vmm_dur: BTreeMap<VmmKey, Dur>,
    unpaired_exits: u64,
    threads: BTreeMap<u32, ThreadAcc>,
    uexit: BTreeMap<(u32, i32), u64>,
    pio: BTreeMap<(u32, bool), (u64, u64)>,
    mmio: BTreeMap<(u64, u32), u64>,
    msr: BTreeMap<(u32, bool), (u64, u64)>,
    cpuid: BTreeMap<u32, u64>,
    emulate_failed: u64,
    timer: Timer,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    /// Records the kernel reported lost (PERF_RECORD_LOST).
    pub lost: u64,
    /// Records that could not be decoded (too short for their format).
    pub undecodable: u64,
    /// PERF_RECORD_THROTTLE records (the kernel stopped sampling for a while).
    pub throttled: u64,
}

impl Aggregator {
    pub fn new() -> Aggregator {
        Aggregator::default()
    }

    /// Add samples; they must be in time order per thread (sort a batch by `time_ns` first).
    pub fn add(&mut self, s: &Sample) {
        self.first_ns = Some(self.first_ns.map_or(s.time_ns, |f| f.min(s.time_ns)));
        self.last_ns = Some(self.last_ns.map_or(s.time_ns, |l| l.max(s.time_ns)));
        let th = self.threads.entry(s.tid).or_default();
        th.pid = s.pid;
        match &s.event {
            KvmEvent::Exit(e) => {
                self.totals.kvm_exit += 1;
                if e.vcpu_id.is_some() {
                    th.vcpu_id = e.vcpu_id;
                }
                self.exits.entry(e.reason).or_default().count += 1;
                th.exits.entry(e.reason).or_default().count += 1;
                match (e.reason.isa, e.reason.code) {
                    (Isa::Vmx, 1) => self.timer.external_interrupt += 1,
                    (Isa::Vmx, 52) => self.timer.preemption_timer += 1,
                    (Isa::Vmx, 77) => self.timer.tdcall += 1,
                    (Isa::Svm, 0x060) => self.timer.svm_interrupt += 1,
                    _ => {}
                }
                if self.pending.insert(s.tid, (e.reason, s.time_ns)).is_some() {
                    // An exit without its entry (lost record or end of a batch): dropped, as perf.
                    self.unpaired_exits += 1;
                }
            }
            KvmEvent::Entry { vcpu_id, .. } => {
                self.totals.kvm_entry += 1;
                if vcpu_id.is_some() {
                    th.vcpu_id = *vcpu_id;
                }
                if let Some((k, t0)) = self.pending_vmm.remove(&s.tid) {
                    self.vmm_dur
                        .entry(k)
                        .or_default()
                        .add(s.time_ns.saturating_sub(t0));
                }
                if let Some((r, t0)) = self.pending.remove(&s.tid) {
                    let d = s.time_ns.saturating_sub(t0);
                    self.exits.entry(r).or_default().dur.add(d);
                    th.exits.entry(r).or_default().dur.add(d);
                }
            }
            KvmEvent::UserspaceExit { reason, errno } => {
                self.totals.kvm_userspace_exit += 1;
                th.userspace_exits += 1;
                let key = if *errno < 0 {
                    (*reason, *errno)
                } else {
                    (*reason, 0)
                };
                *self.uexit.entry(key).or_default() += 1;
            }
            KvmEvent::Pio {
                write,
                port,
                size,
                count,
            } => {
                self.totals.kvm_pio += 1;
                self.pending_vmm
                    .insert(s.tid, (VmmKey::Pio(*port, *write), s.time_ns));
                let e = self.pio.entry((*port, *write)).or_default();
                e.0 += 1;
                e.1 += u64::from(*size) * u64::from(*count);
            }
            KvmEvent::Mmio { kind, gpa, .. } => {
                self.totals.kvm_mmio += 1;
                if *kind == 2 {
                    self.pending_vmm
                        .insert(s.tid, (VmmKey::MmioWrite(*gpa), s.time_ns));
                }
                *self.mmio.entry((*gpa, *kind)).or_default() += 1;
            }
            KvmEvent::Msr {
                write,
                ecx,
                exception,
                ..
            } => {
                self.totals.kvm_msr += 1;
                self.pending_vmm
                    .insert(s.tid, (VmmKey::Msr(*ecx, *write), s.time_ns));
                let e = self.msr.entry((*ecx, *write)).or_default();
                e.0 += 1;
                e.1 += u64::from(*exception);
                if *write && *ecx == MSR_IA32_TSC_DEADLINE {
                    // Not when the exit that led here is already a timer reason (a TDX guest's
                    // TDCALL that writes the MSR): counted once.
                    let under_timer_exit =
                        self.pending.get(&s.tid).is_some_and(|(r, _)| r.is_timer());
                    if !under_timer_exit {
                        self.timer.tsc_deadline_writes += 1;
                    }
                }
            }
            KvmEvent::Cpuid { function, .. } => {
                self.totals.kvm_cpuid += 1;
                *self.cpuid.entry(*function).or_default() += 1;
            }
            KvmEvent::EmulateInsn { failed } => {
                self.totals.kvm_emulate_insn += 1;
                th.emulated += 1;
                self.emulate_failed += u64::from(*failed);
            }
        }
    }

    /// Totals so far.
    pub fn totals(&self) -> EventTotals {
        self.totals
    }

    /// Build the report. `elapsed_s` is the measured wall time (for rates); `backend` the KVM
    /// module name from [`crate::tracefs::detect_backend`].
    ///
    /// The samples were collected by [`Aggregator::add`]; here the totals are taken first
    /// (`Scale`), then each table becomes sorted, render-ready rows.
    pub fn report(&self, elapsed_s: f64, backend: &str) -> KvmReport {
        let scale = Scale {
            elapsed_s,
            exit_time_total: self.exits.values().map(|a| a.dur.sum).sum(),
        };
        KvmReport {
            backend: backend.to_string(),
            duration_s: elapsed_s,
            totals: self.totals,
            kvm_exit_not_emitted: self.kvm_exit_not_emitted(backend),
            exits: reason_rows(&self.exits, self.totals.kvm_exit, &scale),
            exit_time_total_us: scale.exit_time_total as f64 / 1e3,
            unpaired_exits: self.unpaired_exits + self.pending.len() as u64,
            timer: self.timer_summary(&scale),
            userspace_exits: self.userspace_exit_rows(&scale),
            pio: self.pio_rows(),
            mmio: self.mmio_rows(),
            msr: self.msr_rows(),
            cpuid: self.cpuid_rows(),
            emulated_insns: self.totals.kvm_emulate_insn,
            emulation_failed: self.emulate_failed,
            per_vcpu: self.vcpu_rows(&scale),
            lost_records: self.lost,
            throttle_events: self.throttled,
            undecodable_records: self.undecodable,
        }
    }

    fn vcpu_rows(&self, scale: &Scale) -> Vec<VcpuRow> {
        self.threads
            .iter()
            .filter(|(_, t)| !t.exits.is_empty() || t.userspace_exits > 0 || t.emulated > 0)
            .map(|(tid, t)| {
                let n: u64 = t.exits.values().map(|a| a.count).sum();
                VcpuRow {
                    pid: t.pid,
                    tid: *tid,
                    vcpu_id: t.vcpu_id,
                    exits: n,
                    userspace_exits: t.userspace_exits,
                    emulated_insns: t.emulated,
                    reasons: reason_rows(&t.exits, n, scale),
                }
            })
            .collect()
    }

    fn timer_summary(&self, scale: &Scale) -> TimerSummary {
        let t = &self.timer;
        let total = t.external_interrupt
            + t.preemption_timer
            + t.tdcall
            + t.svm_interrupt
            + t.tsc_deadline_writes;
        let exits = self.totals.kvm_exit;
        TimerSummary {
            total,
            share_of_exits_pct: (exits > 0).then(|| pct(total, exits)),
            external_interrupt: t.external_interrupt,
            preemption_timer: t.preemption_timer,
            tdcall: t.tdcall,
            svm_interrupt: t.svm_interrupt,
            tsc_deadline_msr_writes: t.tsc_deadline_writes,
            rate_per_s: scale.rate(total),
        }
    }

    fn userspace_exit_rows(&self, scale: &Scale) -> Vec<UexitRow> {
        let mut rows: Vec<UexitRow> = self
            .uexit
            .iter()
            .map(|(&(reason, errno), &count)| UexitRow {
                name: if errno < 0 {
                    if errno == -4 {
                        "restart (EINTR)".into()
                    } else {
                        format!("error (errno {})", -errno)
                    }
                } else {
                    userspace_exit_label(reason)
                },
                reason,
                errno,
                count,
                share_pct: pct(count, self.totals.kvm_userspace_exit),
                rate_per_s: scale.rate(count),
            })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
        rows
    }

    fn pio_rows(&self) -> Vec<PioRow> {
        let mut rows: Vec<PioRow> = self
            .pio
            .iter()
            .map(|(&(port, write), &(count, bytes))| {
                let (paired, min_us, mean_us, max_us) =
                    time_fields(self.vmm_dur.get(&VmmKey::Pio(port, write)));
                PioRow {
                    port,
                    direction: if write { "out" } else { "in" }.into(),
                    count,
                    bytes,
                    paired,
                    min_us,
                    mean_us,
                    max_us,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.port.cmp(&b.port)));
        rows
    }

    fn mmio_rows(&self) -> Vec<MmioRow> {
        let mut rows: Vec<MmioRow> = self
            .mmio
            .iter()
            .map(|(&(gpa, kind), &count)| {
                let d = (kind == 2)
                    .then(|| self.vmm_dur.get(&VmmKey::MmioWrite(gpa)))
                    .flatten();
                let (paired, min_us, mean_us, max_us) = time_fields(d);
                MmioRow {
                    gpa,
                    kind: mmio_kind_name(kind),
                    count,
                    paired,
                    min_us,
                    mean_us,
                    max_us,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.gpa.cmp(&b.gpa)));
        rows
    }

    fn msr_rows(&self) -> Vec<MsrRow> {
        let mut rows: Vec<MsrRow> = self
            .msr
            .iter()
            .map(|(&(ecx, write), &(count, exc))| {
                let (paired, min_us, mean_us, max_us) =
                    time_fields(self.vmm_dur.get(&VmmKey::Msr(ecx, write)));
                MsrRow {
                    msr: ecx,
                    access: if write { "write" } else { "read" }.into(),
                    count,
                    gp_faults: exc,
                    paired,
                    min_us,
                    mean_us,
                    max_us,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.msr.cmp(&b.msr)));
        rows
    }

    fn cpuid_rows(&self) -> Vec<CpuidRow> {
        let mut rows: Vec<CpuidRow> = self
            .cpuid
            .iter()
            .map(|(&function, &count)| CpuidRow { function, count })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.function.cmp(&b.function)));
        rows
    }

    /// The one-line explanation when the backend fired VMM-level events but no `kvm_exit`.
    fn kvm_exit_not_emitted(&self, backend: &str) -> Option<String> {
        if self.totals.kvm_exit != 0 || !self.totals.vmm_level_moved() {
            return None;
        }
        let by = |r: u32| {
            self.uexit
                .iter()
                .filter(|((x, e), _)| *x == r && *e >= 0)
                .map(|(_, c)| *c)
                .sum::<u64>()
        };
        let others = self.totals.kvm_userspace_exit - by(2) - by(6) - by(5);
        Some(format!(
            "{backend} does not emit kvm_exit: 0 kvm_exit records while {} userspace exits (IO {}, MMIO {}, HLT {}{}) and {} emulated instructions were recorded; VMM-level exits follow.",
            self.totals.kvm_userspace_exit,
            by(2),
            by(6),
            by(5),
            if others > 0 { format!(", other {others}") } else { String::new() },
            self.totals.kvm_emulate_insn
        ))
    }
}

/// What rows are scaled by: the measured wall time (rates) and the summed handling time of
/// all paired exits (time shares).
struct Scale {
    elapsed_s: f64,
    exit_time_total: u64,
}

impl Scale {
    fn rate(&self, n: u64) -> f64 {
        if self.elapsed_s > 0.0 {
            n as f64 / self.elapsed_s
        } else {
            0.0
        }
    }
}

/// `n` as a percentage of `d` (0 when `d` is 0).
fn pct(n: u64, d: u64) -> f64 {
    if d > 0 {
        100.0 * n as f64 / d as f64
    } else {
        0.0
    }
}

/// Exit reasons as rows, most frequent first; `total` is what the shares are of.
fn reason_rows(m: &BTreeMap<ExitReason, ReasonAcc>, total: u64, scale: &Scale) -> Vec<ReasonRow> {
    let mut v: Vec<ReasonRow> = m
        .iter()
        .map(|(r, a)| ReasonRow {
            name: r.to_string(),
            isa: isa_label(r.isa),
            code: r.code,
            failed_vmentry: r.failed_vmentry,
            known: r.name().is_some(),
            count: a.count,
            share_pct: pct(a.count, total),
            rate_per_s: scale.rate(a.count),
            paired: a.dur.n,
            time_share_pct: pct(a.dur.sum, scale.exit_time_total),
            min_us: (a.dur.n > 0).then(|| a.dur.min as f64 / 1e3),
            mean_us: (a.dur.n > 0).then(|| a.dur.mean / 1e3),
            max_us: (a.dur.n > 0).then(|| a.dur.max as f64 / 1e3),
            mean_rel_err_pct: a.dur.rel_err_pct(),
        })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    v
}

fn isa_label(i: Isa) -> String {
    match i {
        Isa::Vmx => "vmx".into(),
        Isa::Svm => "svm".into(),
        Isa::Other(n) => format!("isa{n}"),
    }
}

/// Exits of one reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReasonRow {
    /// Name from the table of the record's isa, or `unknown VMX 76` style.
    pub name: String,
    pub isa: String,
    /// VMX: basic reason (`& 0xffff`); SVM: full exit code.
    pub code: u32,
    pub failed_vmentry: bool,
    pub known: bool,
    pub count: u64,
    pub share_pct: f64,
    pub rate_per_s: f64,
    /// Exits paired with a following kvm_entry of the same thread (those have a time).
    pub paired: u64,
    pub time_share_pct: f64,
    pub min_us: Option<f64>,
    pub mean_us: Option<f64>,
    pub max_us: Option<f64>,
    /// Relative standard error of the mean time, percent.
    pub mean_rel_err_pct: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VcpuRow {
    pub pid: u32,
    pub tid: u32,
    pub vcpu_id: Option<u32>,
    pub exits: u64,
    pub userspace_exits: u64,
    pub emulated_insns: u64,
    pub reasons: Vec<ReasonRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimerSummary {
    pub total: u64,
    pub share_of_exits_pct: Option<f64>,
    pub external_interrupt: u64,
    pub preemption_timer: u64,
    pub tdcall: u64,
    pub svm_interrupt: u64,
    pub tsc_deadline_msr_writes: u64,
    pub rate_per_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UexitRow {
    pub name: String,
    pub reason: u32,
    /// Negative errno when KVM_RUN returned an error (-4: interrupted, restarted).
    pub errno: i32,
    pub count: u64,
    pub share_pct: f64,
    pub rate_per_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PioRow {
    pub port: u32,
    pub direction: String,
    pub count: u64,
    pub bytes: u64,
    /// Events followed by a kvm_entry of the same thread (time from the event to that entry,
    /// as perf kvm stat times ioport, msr and mmio writes; none where kvm_entry never fires).
    pub paired: u64,
    pub min_us: Option<f64>,
    pub mean_us: Option<f64>,
    pub max_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MmioRow {
    pub gpa: u64,
    pub kind: String,
    pub count: u64,
    /// Events followed by a kvm_entry of the same thread (time from the event to that entry,
    /// as perf kvm stat times ioport, msr and mmio writes; none where kvm_entry never fires).
    pub paired: u64,
    pub min_us: Option<f64>,
    pub mean_us: Option<f64>,
    pub max_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MsrRow {
    pub msr: u32,
    pub access: String,
    pub count: u64,
    pub gp_faults: u64,
    /// Events followed by a kvm_entry of the same thread (time from the event to that entry,
    /// as perf kvm stat times ioport, msr and mmio writes; none where kvm_entry never fires).
    pub paired: u64,
    pub min_us: Option<f64>,
    pub mean_us: Option<f64>,
    pub max_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuidRow {
    pub function: u32,
    pub count: u64,
}

/// Everything `tma kvm` reports (JSON schema `tma.kvm`, version 1).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KvmReport {
    /// KVM module in use (`kvm_intel`, `kvm_amd`, `kvm_pvm`, ...).
    pub backend: String,
    pub duration_s: f64,
    pub totals: EventTotals,
    /// Set when kvm_exit stayed at 0 while VMM-level events moved: the one-line explanation.
    pub kvm_exit_not_emitted: Option<String>,
    pub exits: Vec<ReasonRow>,
    pub exit_time_total_us: f64,
    /// Exits never followed by a kvm_entry of their thread (no time; perf drops them).
    pub unpaired_exits: u64,
    pub timer: TimerSummary,
    pub userspace_exits: Vec<UexitRow>,
    pub pio: Vec<PioRow>,
    pub mmio: Vec<MmioRow>,
    pub msr: Vec<MsrRow>,
    pub cpuid: Vec<CpuidRow>,
    pub emulated_insns: u64,
    pub emulation_failed: u64,
    pub per_vcpu: Vec<VcpuRow>,
    pub lost_records: u64,
    /// Times the kernel throttled sampling (records missing while throttled).
    pub throttle_events: u64,
    pub undecodable_records: u64,
}
