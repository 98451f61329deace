//! `perf_event_attr` for an [`EventSpec`]: a plain, comparable [`Attr`] that the unsafe
//! syscall module ([`crate::sys`]) copies into the kernel struct.
//!
//! Rules followed (pmu-data README section 6 and the perf_event_open(2) ABI):
//! * core events use the PMU type from sysfs (`cpu`, `cpu_core`, `cpu_atom`) with the raw
//!   config; generic hardware events on a hybrid part use `PERF_TYPE_HARDWARE` with the PMU
//!   type in config bits 32-63 (`PERF_PMU_TYPE_SHIFT`);
//! * every counter reads `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID | GROUP`, so one
//!   `read(2)` on the leader returns the whole group with its enabled/running times;
//! * topdown metric events (0x8000-0x8700) carry no modifiers, never sample, and may only sit
//!   in a group whose leader is `slots` (checked in [`check_group`]);
//! * for a launched command the leader is opened disabled with `enable_on_exec`, members
//!   follow their leader; `inherit` follows child threads/processes for task targets.

use serde::Serialize;

use crate::event::{EventSpec, SpecKind};
use tma_host::sysfs::Pmus;

/// `PERF_TYPE_HARDWARE`.
pub const TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`.
pub const TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`.
pub const TYPE_TRACEPOINT: u32 = 2;
/// `PERF_TYPE_RAW`.
pub const TYPE_RAW: u32 = 4;
/// Where a hybrid PMU type goes in the config of `PERF_TYPE_HARDWARE` events.
pub const PMU_TYPE_SHIFT: u32 = 32;
pub const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
pub const FORMAT_ID: u64 = 4;
pub const FORMAT_GROUP: u64 = 8;
/// The read format of every counter `tma` opens.
pub const READ_FORMAT: u64 =
    FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING | FORMAT_ID | FORMAT_GROUP;

/// Errors building an attr.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AttrError {
    #[error(
        "event {event} needs the `{pmu}` PMU, which this machine does not have \
         (no hardware PMU, or a different CPU)"
    )]
    NoPmu { event: String, pmu: String },
    #[error(
        "topdown event {event}: config {config:#x} / config1 {config1:#x} carries modifiers; \
         topdown slots and metric events take none"
    )]
    TopdownModifiers {
        event: String,
        config: u64,
        config1: u64,
    },
    #[error("topdown metric event {event} must be in a group led by `slots` (TOPDOWN.SLOTS)")]
    MetricWithoutSlots { event: String },
}

/// How the counters attach to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct AttachMode {
    /// Leader starts disabled and is enabled when the target execs (launched command).
    pub enable_on_exec: bool,
    /// Count threads / processes the target creates later.
    pub inherit: bool,
    /// Leader starts disabled and is enabled later by ioctl.
    pub start_disabled: bool,
}

impl AttachMode {
    /// A command `tma` launches: enabled at exec, children followed.
    pub const LAUNCH: AttachMode = AttachMode {
        enable_on_exec: true,
        inherit: true,
        start_disabled: true,
    };
    /// An existing process: all its threads, and threads it creates.
    pub const PROCESS: AttachMode = AttachMode {
        enable_on_exec: false,
        inherit: true,
        start_disabled: true,
    };
    /// One thread, or one CPU (system-wide).
    pub const SINGLE: AttachMode = AttachMode {
        enable_on_exec: false,
        inherit: false,
        start_disabled: true,
    };
}

/// The fields of `perf_event_attr` that `tma` sets; everything else is zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Attr {
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub read_format: u64,
    /// Always 0: `tma stat` counts, it never samples.
    pub sample_period: u64,
    pub disabled: bool,
    pub inherit: bool,
    pub enable_on_exec: bool,
    pub exclude_kernel: bool,
    pub exclude_user: bool,
}

/// Build the attr of `spec` as a group leader (`leader = true`) or member.
pub fn attr_for(
    spec: &EventSpec,
    pmus: &Pmus,
    mode: AttachMode,
    leader: bool,
) -> Result<Attr, AttrError> {
    let pmu_type = |name: &str| {
        pmus.get(name)
            .map(|p| p.type_)
            .ok_or_else(|| AttrError::NoPmu {
                event: spec.name.clone(),
                pmu: name.to_string(),
            })
    };
    let (type_, config, config1) = match spec.kind {
        SpecKind::Software(ev) => (TYPE_SOFTWARE, ev.config(), 0),
        SpecKind::Tracepoint(id) => (TYPE_TRACEPOINT, id, 0),
        SpecKind::Hardware(id) => {
            if spec.pmu.is_empty() || !pmus.is_hybrid() {
                (TYPE_HARDWARE, id, 0)
            } else {
                let t = pmu_type(&spec.pmu)? as u64;
                (TYPE_HARDWARE, (t << PMU_TYPE_SHIFT) | (id & 0xffff_ffff), 0)
            }
        }
        SpecKind::Tsc => {
            let msr = pmus.get("msr").ok_or_else(|| AttrError::NoPmu {
                event: spec.name.clone(),
                pmu: "msr".into(),
            })?;
            let c = msr.encode_alias("tsc").map(|c| c.config).unwrap_or(0);
            (msr.type_, c, 0)
        }
        SpecKind::Slots => {
            // config1 bit 0 (metrics_clear) is the only modifier slots may carry.
            if spec.config != 0x0400 || spec.config1 & !1 != 0 {
                return Err(AttrError::TopdownModifiers {
                    event: spec.name.clone(),
                    config: spec.config,
                    config1: spec.config1,
                });
            }
            (pmu_type(&spec.pmu)?, spec.config, spec.config1)
        }
        SpecKind::PerfMetrics(i) => {
            if spec.config != 0x8000 + 0x100 * i as u64 || spec.config1 != 0 {
                return Err(AttrError::TopdownModifiers {
                    event: spec.name.clone(),
                    config: spec.config,
                    config1: spec.config1,
                });
            }
            (pmu_type(&spec.pmu)?, spec.config, 0)
        }
        SpecKind::Core => {
            let pmu = if spec.pmu.is_empty() {
                "cpu"
            } else {
                &spec.pmu
            };
            (pmu_type(pmu)?, spec.config, spec.config1)
        }
    };
    Ok(Attr {
        type_,
        config,
        config1,
        config2: 0,
        read_format: READ_FORMAT,
        sample_period: 0,
        disabled: leader && mode.start_disabled,
        inherit: mode.inherit,
        enable_on_exec: leader && mode.enable_on_exec,
        exclude_kernel: spec.exclude_kernel,
        exclude_user: spec.exclude_user,
    })
}

/// Check the vendor grouping rules for one group (leader first).
pub fn check_group(events: &[&EventSpec]) -> Result<(), AttrError> {
    let leader_is_slots = events.first().is_some_and(|e| e.kind == SpecKind::Slots);
    for e in events {
        if matches!(e.kind, SpecKind::PerfMetrics(_)) && !leader_is_slots {
            return Err(AttrError::MetricWithoutSlots {
                event: e.name.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SoftwareEvent;
    use std::path::Path;

    fn pmus(name: &str) -> Pmus {
        Pmus::discover(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/sysfs")
                .join(name),
        )
        .unwrap()
    }

    fn spec(name: &str, pmu: &str, kind: SpecKind, config: u64, config1: u64) -> EventSpec {
        EventSpec {
            kind,
            config1,
            ..EventSpec::raw(name, pmu, config)
        }
    }

    #[test]
    fn intel_core_event_spr() {
        // UOPS_RETIRED.MS:c1:e1, SPR: EventCode 0xC2, UMask 0x04 (intel/SPR events), cmask 1, edge.
        let p = pmus("spr");
        let cfg = p
            .get("cpu")
            .unwrap()
            .encode_terms("event=0xC2,umask=0x04,cmask=1,edge=1")
            .unwrap();
        let s = spec(
            "UOPS_RETIRED.MS:c1:e1",
            "cpu",
            SpecKind::Core,
            cfg.config,
            0,
        );
        let a = attr_for(&s, &p, AttachMode::LAUNCH, true).unwrap();
        assert_eq!(a.type_, 4);
        assert_eq!(a.config, 0x0104_04C2);
        assert_eq!(a.read_format, 0xF);
        assert!(a.disabled && a.enable_on_exec && a.inherit);
        assert_eq!(a.sample_period, 0);
        let m = attr_for(&s, &p, AttachMode::LAUNCH, false).unwrap();
        assert!(!m.disabled && !m.enable_on_exec && m.inherit);
    }

    #[test]
    fn prec_dist_opens_as_perf_does() {
        // perf opens INST_RETIRED.PREC_DIST as cpu/event=0x00,umask=0x01/: raw config 0x0100
        // on the core PMU, which the kernel puts on fixed counter 0 with PDIST.
        let p = pmus("spr");
        let cfg = p.get("cpu").unwrap().encode_terms("event=0x00,umask=0x01");
        assert_eq!(cfg.unwrap().config, 0x0100);
        let enc = tma_catalog::by_name("spr")
            .unwrap()
            .encode("INST_RETIRED.PREC_DIST")
            .unwrap();
        let s = EventSpec::from_encoding(&enc).unwrap();
        let a = attr_for(&s, &p, AttachMode::SINGLE, true).unwrap();
        assert_eq!((a.type_, a.config, a.config1), (4, 0x0100, 0));
    }

    #[test]
    fn topdown_slots_and_metrics() {
        let p = pmus("spr");
        let slots = spec(
            "TOPDOWN.SLOTS:perf_metrics",
            "cpu",
            SpecKind::Slots,
            0x0400,
            0,
        );
        let a = attr_for(&slots, &p, AttachMode::SINGLE, true).unwrap();
        assert_eq!((a.type_, a.config, a.config1), (4, 0x0400, 0));
        for i in 0..8u8 {
            let m = spec(
                "PERF_METRICS.X",
                "cpu",
                SpecKind::PerfMetrics(i),
                0x8000 + 0x100 * i as u64,
                0,
            );
            let a = attr_for(&m, &p, AttachMode::SINGLE, false).unwrap();
            assert_eq!(a.config, 0x8000 + 0x100 * i as u64);
            assert_eq!(a.read_format & FORMAT_GROUP, FORMAT_GROUP);
            assert_eq!(a.sample_period, 0);
            assert!(check_group(&[&slots, &m]).is_ok());
            assert!(matches!(
                check_group(&[&m, &slots]),
                Err(AttrError::MetricWithoutSlots { .. })
            ));
        }
        // Modifiers on a metric event are refused (kernel would say EINVAL).
        let bad = spec(
            "PERF_METRICS.RETIRING",
            "cpu",
            SpecKind::PerfMetrics(0),
            0x0100_8000,
            0,
        );
        assert!(matches!(
            attr_for(&bad, &p, AttachMode::SINGLE, false),
            Err(AttrError::TopdownModifiers { .. })
        ));
        // slots may carry metrics_clear (config1 bit 0), nothing else.
        let s1 = spec("TOPDOWN.SLOTS", "cpu", SpecKind::Slots, 0x0400, 1);
        assert!(attr_for(&s1, &p, AttachMode::SINGLE, true).is_ok());
        let s2 = spec("TOPDOWN.SLOTS", "cpu", SpecKind::Slots, 0x0400, 2);
        assert!(attr_for(&s2, &p, AttachMode::SINGLE, true).is_err());
    }

    #[test]
    fn offcore_response_in_config1() {
        // OCR.DEMAND_DATA_RD.L3_MISS on SPR: EventCode 0x2A, UMask 0x01, MSRIndex 0x1a6,
        // MSRValue 0x3FBFC00001.
        let p = pmus("spr");
        let mut s = spec(
            "OCR.DEMAND_DATA_RD.L3_MISS",
            "cpu",
            SpecKind::Core,
            0x012A,
            0x3F_BFC0_0001,
        );
        s.msr_index = 0x1A6;
        let a = attr_for(&s, &p, AttachMode::PROCESS, true).unwrap();
        assert_eq!((a.type_, a.config, a.config1), (4, 0x012A, 0x3F_BFC0_0001));
        assert!(a.disabled && !a.enable_on_exec && a.inherit);
    }

    #[test]
    fn amd_extended_event_code() {
        // de_no_dispatch_per_slot.backend_stalls: 0x1A0 / 0x1E -> 0x100001EA0 (README 5.1).
        let p = pmus("zen4");
        let cfg = p
            .get("cpu")
            .unwrap()
            .encode_terms("event=0x1A0,umask=0x1E")
            .unwrap();
        let s = spec(
            "de_no_dispatch_per_slot.backend_stalls",
            "cpu",
            SpecKind::Core,
            cfg.config,
            0,
        );
        let a = attr_for(&s, &p, AttachMode::SINGLE, true).unwrap();
        assert_eq!((a.type_, a.config), (4, 0x1_0000_1EA0));
        assert!(!a.inherit && !a.enable_on_exec);
    }

    #[test]
    fn hybrid_pmus() {
        let p = pmus("adl");
        let core = spec("INST_RETIRED.ANY", "cpu_core", SpecKind::Core, 0x00C0, 0);
        assert_eq!(
            attr_for(&core, &p, AttachMode::SINGLE, true).unwrap().type_,
            4
        );
        let atom = spec("INST_RETIRED.ANY", "cpu_atom", SpecKind::Core, 0x00C0, 0);
        assert_eq!(
            attr_for(&atom, &p, AttachMode::SINGLE, true).unwrap().type_,
            10
        );
        // Generic "cycles" on the E-core PMU: PERF_TYPE_HARDWARE, PMU type in bits 32-63.
        let cyc = spec("cycles", "cpu_atom", SpecKind::Hardware(0), 0, 0);
        let a = attr_for(&cyc, &p, AttachMode::SINGLE, true).unwrap();
        assert_eq!((a.type_, a.config), (0, (10u64 << 32)));
        // On a non-hybrid machine the generic event stays plain.
        let cyc = spec("cycles", "", SpecKind::Hardware(1), 0, 0);
        let a = attr_for(&cyc, &pmus("spr"), AttachMode::SINGLE, true).unwrap();
        assert_eq!((a.type_, a.config), (0, 1));
    }

    #[test]
    fn software_and_tsc_and_missing_pmu() {
        let p = pmus("this-vm");
        let s = EventSpec::software(SoftwareEvent::TaskClock);
        let a = attr_for(&s, &p, AttachMode::LAUNCH, true).unwrap();
        assert_eq!((a.type_, a.config), (1, 1));
        let tsc = spec("TSC", "msr", SpecKind::Tsc, 0, 0);
        assert_eq!(
            attr_for(&tsc, &p, AttachMode::SINGLE, true).unwrap().type_,
            9
        );
        let core = spec("INST_RETIRED.ANY", "cpu", SpecKind::Core, 0xC0, 0);
        assert!(matches!(
            attr_for(&core, &p, AttachMode::SINGLE, true),
            Err(AttrError::NoPmu { .. })
        ));
    }
}
