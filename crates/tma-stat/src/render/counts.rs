//! Plain counts: the software counts of a run without hardware counters (`tma stat` on a
//! machine without a PMU) and the `-e` events after the tree.

use std::io::Write;

use tma_perf::backend::{self, Measurement, RawInterval, Target};
use tma_perf::event::SpecKind;
use tma_perf::plan::Plan;
use tma_perf::Interval;
use tma_render::{JsonStream, OutputError};

use crate::render::doc::{SoftwareCount, SoftwareDoc, SoftwareHead, SoftwareInterval};
use crate::render::tree::{Format, RenderOptions};

/// The schema name of `tma stat --json` without hardware counters.
pub const SOFTWARE_SCHEMA: &str = "tma.stat.software";
/// Its version: 2 since schema names 2026-11 (version 1 was named `tma.stat_software`).
pub const SOFTWARE_SCHEMA_VERSION: u32 = 2;

/// How to print counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountsFormat {
    json: bool,
    csv: bool,
    compact: bool,
}

impl CountsFormat {
    /// The counts layout for the tree's render options.
    pub fn of(o: &RenderOptions) -> CountsFormat {
        CountsFormat {
            json: o.format == Format::Json,
            csv: o.format == Format::Csv,
            compact: o.compact,
        }
    }
}

/// `` `cmd args` ``, `pid 1,2`, `all CPUs`...
pub fn describe_target(t: &Target) -> String {
    let cpus = |c: &[u32]| {
        c.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let list = |v: &[i32]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    match t {
        Target::Command(argv) => format!("`{}`", tma_render::shell_words(argv)),
        Target::Pids(p) => format!("pid {}", list(p)),
        Target::Tids(p) => format!("tid {}", list(p)),
        Target::System(None) => "all CPUs".to_string(),
        Target::Cgroups(dirs) => format!(
            "cgroup{} {}",
            if dirs.len() == 1 { "" } else { "s" },
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Target::System(Some(c)) => format!("CPUs {}", cpus(c)),
        Target::SystemDuring {
            cpus: None,
            command,
        } => format!("all CPUs while `{}` ran", tma_render::shell_words(command)),
        Target::SystemDuring {
            cpus: Some(c),
            command,
        } => format!(
            "CPUs {} while `{}` ran",
            cpus(c),
            tma_render::shell_words(command)
        ),
    }
}

/// The `-e` events after the tree: whole-run values with their counted share.
pub fn extra_events(
    w: &mut dyn Write,
    names: &[String],
    total: Option<&Interval>,
) -> Result<(), OutputError> {
    if names.is_empty() {
        return Ok(());
    }
    let Some(iv) = total else { return Ok(()) };
    writeln!(w)?;
    writeln!(w, "Events (-e):")?;
    for n in names {
        match iv
            .get(n)
            .and_then(|r| r.value.map(|v| (v, r.counted_share)))
        {
            Some((v, share)) => {
                let share = share.unwrap_or(1.0);
                if share < 1.0 {
                    writeln!(w, "{v:>20.0}  {n}  [{:.1}% counted]", share * 100.0)?;
                } else {
                    writeln!(w, "{v:>20.0}  {n}")?;
                }
            }
            None => writeln!(w, "{:>20}  {n}", "<not counted>")?,
        }
    }
    Ok(())
}

/// One row of software counts: (event, value, unit, text line).
type Row = (String, f64, &'static str, String);

fn software_rows(plan: &Plan, value: &dyn Fn(&str) -> Option<f64>, wall_s: f64) -> Vec<Row> {
    let mut rows = Vec::new();
    for e in plan.events() {
        let Some(v) = value(&e.name) else {
            rows.push((
                e.name.clone(),
                f64::NAN,
                "",
                format!("{:>18}      {}", "<not counted>", e.name),
            ));
            continue;
        };
        if matches!(e.kind, SpecKind::Software(sw) if sw.is_time()) {
            let ms = v / 1e6;
            let util = if wall_s > 0.0 { v / 1e9 / wall_s } else { 0.0 };
            rows.push((
                e.name.clone(),
                ms,
                "msec",
                format!("{ms:>18.2} msec {:<18} # {util:.3} CPUs utilized", e.name),
            ));
        } else {
            rows.push((
                e.name.clone(),
                v,
                "",
                format!("{:>18.0}      {:<18}", v, e.name)
                    .trim_end()
                    .to_string(),
            ));
        }
    }
    rows
}

/// Software counts of a whole run (mean over --repeat runs) or, in interval mode, of each
/// interval of the first run.
pub fn software(
    w: &mut dyn Write,
    target: &Target,
    plan: &Plan,
    runs: &[Measurement],
    interval_mode: bool,
    fmt: CountsFormat,
) -> Result<(), OutputError> {
    if interval_mode {
        let mut json = None;
        if let Some(m) = runs.first() {
            for (k, iv) in m.intervals.iter().enumerate() {
                software_interval(w, target, plan, iv, k == 0, fmt, &mut json)?;
            }
        }
        return end_software_json(w, json);
    }
    let n = runs.len().max(1) as f64;
    let totals: Vec<Interval> = runs
        .iter()
        .map(|m| Measurement::interval_readings(plan, &m.total(), false))
        .collect();
    let mean = |name: &str| -> Option<f64> {
        let v: Vec<f64> = totals
            .iter()
            .filter_map(|t| t.get(name).and_then(|r| r.value))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let wall_s = runs.iter().map(|m| m.wall_ns as f64).sum::<f64>() / n / 1e9;
    let mut rows = software_rows(plan, &mean, wall_s);
    if runs.len() > 1 {
        // --repeat: the spread (sample standard deviation as % of the mean) per event.
        let stats = backend::repeat_stats(plan, runs);
        for row in rows.iter_mut() {
            if let Some((_, _, pct)) = stats.iter().find(|(n, _, _)| *n == row.0) {
                row.3 = format!("{:<64} ( +- {pct:.2}% )", row.3);
            }
        }
    }
    if fmt.json {
        let doc = SoftwareDoc {
            hardware_counters: false,
            target: describe_target(target),
            runs: runs.len(),
            wall_time_s: wall_s,
            events: counts_of(&rows),
        };
        return tma_render::write_json(w, SOFTWARE_SCHEMA, SOFTWARE_SCHEMA_VERSION, &doc);
    }
    if fmt.csv {
        writeln!(w, "event,value,unit")?;
        for (n, v, u, _) in &rows {
            writeln!(w, "{n},{v},{u}")?;
        }
        writeln!(w, "wall-time,{wall_s},s")?;
        return Ok(());
    }
    writeln!(
        w,
        "Software counts for {} (no hardware counters{}):",
        describe_target(target),
        if runs.len() > 1 {
            format!(", mean of {} runs", runs.len())
        } else {
            String::new()
        }
    )?;
    writeln!(w)?;
    for (_, _, _, line) in &rows {
        writeln!(w, "{line}")?;
    }
    writeln!(w, "{:>18.6}      seconds wall time", wall_s)?;
    Ok(())
}

/// The rows as the document's counts (`null` for an event that was not counted).
fn counts_of(rows: &[Row]) -> Vec<SoftwareCount> {
    rows.iter()
        .map(|(n, v, u, _)| SoftwareCount {
            event: n.clone(),
            value: v.is_finite().then_some(*v),
            unit: u.to_string(),
        })
        .collect()
}

/// Close the `-I` software document, when one was begun.
pub fn end_software_json(w: &mut dyn Write, json: Option<JsonStream>) -> Result<(), OutputError> {
    match json {
        Some(j) => j.end(w),
        None => Ok(()),
    }
}

/// The software counts of one interval (`first`: also the header). With `--json` the
/// intervals are the array of one `tma.stat_software` document: `json` holds it open
/// between calls, and [`end_software_json`] closes it.
pub fn software_interval(
    w: &mut dyn Write,
    target: &Target,
    plan: &Plan,
    iv: &RawInterval,
    first: bool,
    fmt: CountsFormat,
    json: &mut Option<JsonStream>,
) -> Result<(), OutputError> {
    let r = Measurement::interval_readings(plan, iv, false);
    let wall = iv.end_s - iv.start_s;
    let value = |n: &str| r.get(n).and_then(|x| x.value);
    if fmt.json {
        if json.is_none() {
            let head = SoftwareHead {
                hardware_counters: false,
                target: describe_target(target),
            };
            *json = Some(JsonStream::begin(
                w,
                SOFTWARE_SCHEMA,
                SOFTWARE_SCHEMA_VERSION,
                &head,
                "intervals",
            )?);
        }
        let doc = SoftwareInterval {
            start_s: iv.start_s,
            end_s: iv.end_s,
            events: counts_of(&software_rows(plan, &value, wall)),
        };
        if let Some(j) = json.as_mut() {
            j.item(w, &doc)?;
        }
        return Ok(());
    }
    if fmt.compact || fmt.csv {
        // The same units as the whole run's counts: clocks in milliseconds.
        let rows = software_rows(plan, &value, wall);
        if first {
            let names: Vec<String> = rows
                .iter()
                .map(|(n, _, u, _)| {
                    if u.is_empty() {
                        n.clone()
                    } else {
                        format!("{n} ({u})")
                    }
                })
                .collect();
            writeln!(w, "time_s,{}", names.join(","))?;
        }
        let vals: Vec<String> = rows
            .iter()
            .map(|(_, v, u, _)| match (v.is_finite(), u.is_empty()) {
                (false, _) => String::new(),
                (true, true) => format!("{v:.0}"),
                (true, false) => format!("{v:.6}"),
            })
            .collect();
        writeln!(w, "{:.3},{}", iv.end_s, vals.join(","))?;
        return Ok(());
    }
    if first {
        writeln!(
            w,
            "Software counts for {} every interval (no hardware counters):",
            describe_target(target)
        )?;
    }
    writeln!(w)?;
    writeln!(
        w,
        "--- interval {:.3} s .. {:.3} s ---",
        iv.start_s, iv.end_s
    )?;
    for (_, _, _, line) in software_rows(plan, &value, wall) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}
