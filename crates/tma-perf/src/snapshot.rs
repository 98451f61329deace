//! `tma stat --record FILE` snapshots: everything needed to print the same output again on any
//! machine (`tma stat --import FILE`): CPU identity, topology, the command line, the plans and
//! every run's raw group readings with their enabled/running times per interval.
//!
//! Schema `tma.snapshot`, version 1 (JSON object):
//! `{schema, schema_version, tool, cpu {vendor, family, model, stepping, model_name,
//! catalog_key}, topology {cpus, cores, sockets, smt}, command_line [..], target, settings
//! {level, nodes, interval_ms, no_multiplex, repeat, drilldown, per_core, per_thread, events},
//! hardware, note, start_unix_s, duration_s, plans [Plan], runs [{step, plan, repeat, groups,
//! measurement {start_unix_s, wall_ns, ending, intervals [{start_s, end_s, groups [{group, cpu,
//! tid, time_enabled_ns, time_running_ns, values}]}]}}]}`.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::backend::{Measurement, Target};
use crate::plan::Plan;
use tma_host::{CpuInfo, Host};

pub const SCHEMA: &str = "tma.snapshot";
pub const SCHEMA_VERSION: u32 = 1;

/// Errors reading a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a tma snapshot: {0}")]
    Json(#[from] serde_json::Error),
    #[error("schema is {0:?}, expected \"tma.snapshot\"")]
    Schema(String),
    #[error(
        "snapshot schema_version {0} is newer than this tma understands ({SCHEMA_VERSION}); \
         use a newer tma"
    )]
    Version(u32),
    #[error("snapshot is inconsistent: {0}")]
    Inconsistent(String),
}

/// The CPU the snapshot was recorded on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CpuIdentity {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
    pub model_name: String,
    /// Catalog key of the tables used (`spr`, `zen4`), when the CPU has one.
    pub catalog_key: Option<String>,
}

impl CpuIdentity {
    /// Read `/proc/cpuinfo`-format bytes (first processor).
    pub fn from_cpuinfo(bytes: &[u8]) -> CpuIdentity {
        let info = CpuInfo::parse(bytes);
        let (vendor, family, model, stepping) = tma_catalog::parse_cpuinfo(bytes)
            .unwrap_or_else(|_| (info.vendor.clone().unwrap_or_default(), 0, 0, 0));
        let catalog_key = tma_catalog::identify(&vendor, family, model, stepping)
            .ok()
            .and_then(|v| v.first().map(|m| m.key.to_string()));
        CpuIdentity {
            vendor,
            family,
            model,
            stepping,
            model_name: info.model_name.unwrap_or_default(),
            catalog_key,
        }
    }
}

/// CPU topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Topology {
    pub cpus: u32,
    pub cores: u32,
    pub sockets: u32,
    pub smt: bool,
}

impl Topology {
    /// The online CPUs of `host` and their packages and cores (a CPU whose topology files
    /// are unreadable counts as core 0 of package 0).
    pub fn discover(host: &Host) -> Topology {
        let cpus = host.online_cpus_or_cpu0();
        let mut cores = std::collections::BTreeSet::new();
        let mut sockets = std::collections::BTreeSet::new();
        for &c in &cpus {
            let (pkg, core) = host.cpu_topology(c).map_or((0, 0), |t| (t.package, t.core));
            sockets.insert(pkg);
            cores.insert((pkg, core));
        }
        let n = cpus.len() as u32;
        let cores = (cores.len() as u32).max(1);
        Topology {
            cpus: n,
            cores,
            sockets: (sockets.len() as u32).max(1),
            smt: n > cores,
        }
    }
}

/// The `tma stat` settings that shape the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Settings {
    pub level: u8,
    pub nodes: Vec<String>,
    pub interval_ms: Option<u64>,
    pub no_multiplex: bool,
    pub repeat: u32,
    pub drilldown: bool,
    pub per_core: bool,
    pub per_thread: bool,
    /// Extra `-e` events.
    pub events: Vec<String>,
    pub compact: bool,
}

/// One run of the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRun {
    /// Drill-down step (0 without --drilldown).
    pub step: u32,
    /// Index into [`Snapshot::plans`].
    pub plan: usize,
    /// Repetition (0-based, `--repeat`).
    pub repeat: u32,
    /// Groups of the plan this run measured (all of them unless `--no-multiplex`).
    pub groups: Vec<usize>,
    pub measurement: Measurement,
}

/// A recorded `tma stat` session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub schema: String,
    pub schema_version: u32,
    /// `tma <version>`.
    pub tool: String,
    pub cpu: CpuIdentity,
    pub topology: Topology,
    /// The `tma` command line that recorded it.
    pub command_line: Vec<String>,
    pub target: Target,
    pub settings: Settings,
    /// Hardware counters were counted (false: software counts only, no PMU).
    pub hardware: bool,
    /// Why hardware counters were not used, when they were not.
    pub note: Option<String>,
    pub start_unix_s: f64,
    pub duration_s: f64,
    pub plans: Vec<Plan>,
    pub runs: Vec<RecordedRun>,
    /// CPU -> core label (`S0-C3`) for `--per-core` breakdowns.
    #[serde(default)]
    pub cpu_cores: Vec<(u32, String)>,
}

impl Snapshot {
    /// Write pretty JSON followed by a newline.
    pub fn write(&self, w: &mut dyn Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *w, self)?;
        writeln!(w)
    }
}

/// Parse and check a snapshot.
pub fn read(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    // Check schema and version first so a newer file gets the right message.
    let v: serde_json::Value = serde_json::from_slice(bytes)?;
    let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
    if schema != SCHEMA {
        return Err(SnapshotError::Schema(schema.to_string()));
    }
    let ver = v
        .get("schema_version")
        .and_then(|s| s.as_u64())
        .unwrap_or(0) as u32;
    if ver > SCHEMA_VERSION || ver == 0 {
        return Err(SnapshotError::Version(ver));
    }
    let s: Snapshot = serde_json::from_value(v)?;
    for (i, r) in s.runs.iter().enumerate() {
        let Some(plan) = s.plans.get(r.plan) else {
            return Err(SnapshotError::Inconsistent(format!(
                "run {i} refers to plan {} of {}",
                r.plan,
                s.plans.len()
            )));
        };
        for iv in &r.measurement.intervals {
            for g in &iv.groups {
                let n = plan.groups.get(g.group).map(|x| x.events.len());
                if n != Some(g.values.len()) {
                    return Err(SnapshotError::Inconsistent(format!(
                        "run {i}: group {} has {} values, the plan has {:?} events",
                        g.group,
                        g.values.len(),
                        n
                    )));
                }
                if g.time_running_ns > g.time_enabled_ns {
                    return Err(SnapshotError::Inconsistent(format!(
                        "run {i}: group {} ran longer ({} ns) than it was enabled ({} ns)",
                        g.group, g.time_running_ns, g.time_enabled_ns
                    )));
                }
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{software_events, Ending, GroupReading, RawInterval};

    fn sample() -> Snapshot {
        let plan = Plan::software(&software_events());
        Snapshot {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            tool: "tma test".into(),
            cpu: CpuIdentity::default(),
            topology: Topology {
                cpus: 2,
                cores: 2,
                sockets: 1,
                smt: false,
            },
            command_line: vec!["tma".into(), "stat".into()],
            target: Target::Command(vec!["true".into()]),
            settings: Settings::default(),
            hardware: false,
            note: None,
            start_unix_s: 1.5,
            duration_s: 0.25,
            plans: vec![plan],
            runs: vec![RecordedRun {
                step: 0,
                plan: 0,
                repeat: 0,
                groups: vec![0],
                measurement: Measurement {
                    start_unix_s: 1.5,
                    wall_ns: 250_000_000,
                    ending: Ending::Exited(0),
                    failed_groups: vec![],
                    intervals: vec![RawInterval {
                        start_s: 0.0,
                        end_s: 0.25,
                        groups: vec![GroupReading {
                            group: 0,
                            cpu: None,
                            tid: None,
                            cgroup: None,
                            time_enabled_ns: 100,
                            time_running_ns: 100,
                            values: vec![1, 2, 3, 4],
                        }],
                    }],
                },
            }],
            cpu_cores: vec![(0, "S0-C0".into())],
        }
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let mut buf = Vec::new();
        s.write(&mut buf).unwrap();
        assert_eq!(read(&buf).unwrap(), s);
        assert!(String::from_utf8_lossy(&buf).contains("\"schema\": \"tma.snapshot\""));
    }

    #[test]
    fn rejects_bad_documents() {
        assert!(matches!(read(b"{}"), Err(SnapshotError::Schema(_))));
        assert!(matches!(read(b"nope"), Err(SnapshotError::Json(_))));
        let mut s = sample();
        s.schema_version = 99;
        let b = serde_json::to_vec(&s).unwrap();
        assert!(matches!(read(&b), Err(SnapshotError::Version(99))));
        let mut s = sample();
        s.runs[0].measurement.intervals[0].groups[0].values.pop();
        let b = serde_json::to_vec(&s).unwrap();
        assert!(matches!(read(&b), Err(SnapshotError::Inconsistent(_))));
        let mut s = sample();
        s.runs[0].measurement.intervals[0].groups[0].time_running_ns = 101;
        let b = serde_json::to_vec(&s).unwrap();
        assert!(matches!(read(&b), Err(SnapshotError::Inconsistent(_))));
        let mut s = sample();
        s.runs[0].plan = 3;
        let b = serde_json::to_vec(&s).unwrap();
        assert!(matches!(read(&b), Err(SnapshotError::Inconsistent(_))));
    }

    #[test]
    fn topology_of_this_machine_is_sane() {
        let t = Topology::discover(&Host::system());
        assert!(t.cpus >= 1 && t.cores >= 1 && t.sockets >= 1);
        assert!(t.cores <= t.cpus);
    }

    #[test]
    fn cpu_identity_from_cpuinfo() {
        let c = CpuIdentity::from_cpuinfo(
            b"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9R14\nstepping\t: 1\n",
        );
        assert_eq!((c.family, c.model, c.stepping), (25, 17, 1));
        assert_eq!(c.model_name, "AMD EPYC 9R14");
        assert_eq!(c.catalog_key.as_deref(), Some("zen4"));
    }
}
