//! A regions run as a document: each region's time, calls, counted share, counts and (with a
//! PMU) its TMA tree, per thread and merged; written as text, JSON (`tma.stat.regions`
//! version 1) or CSV (one row per region). The same types read the document back (`tma diff`,
//! `tma report`); fields added after version 1 are optional, so older documents still read.

use std::io::Write;

use serde::{Deserialize, Serialize};
use tma_perf::backend::{GroupReading, Measurement, RawInterval};
use tma_perf::plan::Plan;
use tma_stat::eval::TreeEval;

use crate::tree::{RegionNode, Regions};
use crate::{Counting, RegionsError};

/// The JSON document's name (`tma_render::schema`'s convention) and version.
pub const SCHEMA: &str = "tma.stat.regions";
pub const SCHEMA_VERSION: u32 = 1;

/// One event's count over a region.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Count {
    pub event: String,
    /// Scaled for multiplexing; `None` when not counted.
    pub value: Option<f64>,
}

/// One node of a region's TMA tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeNode {
    pub node: String,
    pub level: u8,
    pub value: Option<f64>,
    /// `percent_slots`, `percent` or `number`.
    pub unit: String,
}

/// One region, its figures and its nested regions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Region {
    pub name: String,
    /// From the outermost region in.
    pub path: Vec<String>,
    pub calls: u64,
    pub wall_ns: u64,
    /// task-clock over the region's time: the share of it the thread ran on a CPU (summed
    /// over threads in the merged tree, so it can exceed 1 there).
    pub cpu_share: Option<f64>,
    /// The least share of its time a counter group was counted (multiplexing); `None` when
    /// nothing was counted.
    pub counted_share: Option<f64>,
    pub counts: Vec<Count>,
    /// The TMA tree (empty without a PMU).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tree: Vec<TreeNode>,
    pub children: Vec<Region>,
}

/// One thread's regions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    pub tid: u32,
    pub regions: Vec<Region>,
}

/// One region's begin and end on a thread (the timeline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanDoc {
    /// From the outermost open region in.
    pub path: Vec<String>,
    /// Nanoseconds since the program started.
    pub begin_ns: u64,
    pub end_ns: u64,
}

/// One thread's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTimeline {
    pub tid: u32,
    /// The first [`crate::tree::MAX_SPANS`] regions to end, in the order they ended.
    pub spans: Vec<SpanDoc>,
    /// Regions that ended after those (not kept).
    #[serde(default)]
    pub dropped: u64,
}

/// The document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub schema_version: u32,
    pub command: Vec<String>,
    /// Whether the regions carry TMA trees (a PMU counted them).
    pub hardware: bool,
    /// Why they do not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_tree: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    pub events: Vec<String>,
    /// The program's whole run.
    pub wall_ns: u64,
    /// Every thread added up, region by region.
    pub merged: Vec<Region>,
    pub threads: Vec<Thread>,
    /// Threads whose counters could not be opened (their regions carry time and calls only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncounted_threads: Vec<u32>,
    /// When each region began and ended, per thread (the first [`crate::tree::MAX_SPANS`]
    /// to end): as tma saw them on the FIFO, or as the marker library timed them in process.
    /// Absent from documents written before it was added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<ThreadTimeline>,
}

/// A region's counts as the one raw interval every reading is derived from.
fn raw_of(n: &RegionNode) -> RawInterval {
    RawInterval {
        start_s: 0.0,
        end_s: n.wall_ns as f64 / 1e9,
        groups: n
            .counts
            .iter()
            .enumerate()
            .map(|(i, g)| GroupReading {
                group: i,
                cpu: None,
                tid: None,
                cgroup: None,
                time_enabled_ns: g.enabled,
                time_running_ns: g.running,
                values: g.values.clone(),
            })
            .collect(),
    }
}

fn events_of(plan: &Plan) -> Vec<String> {
    plan.groups
        .iter()
        .flat_map(|g| g.events.iter().map(|e| e.name.clone()))
        .collect()
}

struct Builder<'a> {
    plan: &'a Plan,
    events: Vec<String>,
    eval: Option<TreeEval>,
}

impl Builder<'_> {
    fn region(&self, n: &RegionNode, path: &mut Vec<String>) -> Region {
        path.push(n.name.clone());
        let iv = Measurement::interval_readings(self.plan, &raw_of(n), false);
        let counts: Vec<Count> = self
            .events
            .iter()
            .map(|e| Count {
                event: e.clone(),
                value: iv.get(e).and_then(|r| r.value),
            })
            .collect();
        let counted_share = if n.counts.is_empty() {
            None
        } else {
            iv.readings
                .iter()
                .filter_map(|r| r.counted_share)
                .min_by(f64::total_cmp)
        };
        let cpu_share = iv
            .get("task-clock")
            .and_then(|r| r.value)
            .filter(|_| n.wall_ns > 0)
            .map(|t| t / n.wall_ns as f64);
        let tree = match &self.eval {
            Some(ev) => ev
                .eval(&iv)
                .report
                .nodes
                .iter()
                .map(|r| TreeNode {
                    node: r.name.to_string(),
                    level: r.level,
                    value: r.value,
                    unit: r.unit.name().to_string(),
                })
                .collect(),
            None => Vec::new(),
        };
        let children = n.children.iter().map(|c| self.region(c, path)).collect();
        path.pop();
        Region {
            name: n.name.clone(),
            path: path.iter().cloned().chain([n.name.clone()]).collect(),
            calls: n.calls,
            wall_ns: n.wall_ns,
            cpu_share,
            counted_share,
            counts,
            tree,
            children,
        }
    }

    fn regions(&self, root: &RegionNode) -> Vec<Region> {
        root.children
            .iter()
            .map(|c| self.region(c, &mut Vec::new()))
            .collect()
    }
}

impl Report {
    /// Evaluate every region of `regions`.
    pub fn build(
        counting: &Counting,
        regions: &Regions,
        command: &[std::ffi::OsString],
        wall_ns: u64,
    ) -> Result<Report, RegionsError> {
        let b = Builder {
            plan: &counting.plan,
            events: events_of(&counting.plan),
            eval: counting.tree.as_ref().map(TreeEval::new).transpose()?,
        };
        Ok(Report {
            schema: SCHEMA.to_string(),
            schema_version: SCHEMA_VERSION,
            // The report is text (JSON): an argument that is not UTF-8 is shown with U+FFFD.
            command: command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            hardware: counting.tree.is_some(),
            no_tree: counting.no_tree.clone(),
            cpu: counting.tree.as_ref().map(|i| i.model.key.to_string()),
            events: b.events.clone(),
            wall_ns,
            merged: b.regions(&regions.merged),
            threads: regions
                .threads
                .iter()
                .map(|(tid, root)| Thread {
                    tid: *tid,
                    regions: b.regions(root),
                })
                .collect(),
            uncounted_threads: regions.uncounted.clone(),
            timeline: regions
                .spans
                .iter()
                .map(|(tid, s)| ThreadTimeline {
                    tid: *tid,
                    spans: s
                        .spans
                        .iter()
                        .map(|x| SpanDoc {
                            path: x.path.clone(),
                            begin_ns: x.begin_ns,
                            end_ns: x.end_ns,
                        })
                        .collect(),
                    dropped: s.dropped,
                })
                .collect(),
        })
    }

    /// `tma.stat.regions` JSON.
    pub fn json(&self, w: &mut dyn Write) -> Result<(), RegionsError> {
        serde_json::to_writer_pretty(&mut *w, self).map_err(std::io::Error::from)?;
        writeln!(w)?;
        Ok(())
    }

    /// The regions depth first: (scope, tid, region).
    fn rows(&self) -> Vec<(&'static str, Option<u32>, &Region)> {
        fn walk<'a>(
            r: &'a [Region],
            scope: &'static str,
            tid: Option<u32>,
            out: &mut Vec<(&'static str, Option<u32>, &'a Region)>,
        ) {
            for x in r {
                out.push((scope, tid, x));
                walk(&x.children, scope, tid, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.merged, "merged", None, &mut out);
        for t in &self.threads {
            walk(&t.regions, "thread", Some(t.tid), &mut out);
        }
        out
    }

    /// One row per region (merged first, then each thread), one column per event and tree node.
    pub fn csv(&self, w: &mut dyn Write) -> Result<(), RegionsError> {
        let rows = self.rows();
        let nodes: Vec<&str> = rows
            .first()
            .map(|(_, _, r)| r.tree.iter().map(|n| n.node.as_str()).collect())
            .unwrap_or_default();
        let mut head: Vec<String> = [
            "scope",
            "tid",
            "region",
            "depth",
            "calls",
            "wall_ns",
            "cpu_share",
            "counted_share",
        ]
        .map(String::from)
        .to_vec();
        head.extend(self.events.iter().cloned());
        head.extend(nodes.iter().map(|n| n.to_string()));
        writeln!(
            w,
            "{}",
            head.iter()
                .map(|h| csv_field(h))
                .collect::<Vec<_>>()
                .join(",")
        )?;
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        for (scope, tid, r) in rows {
            let mut f: Vec<String> = vec![
                scope.to_string(),
                tid.map_or(String::new(), |t| t.to_string()),
                csv_field(&r.path.join(" > ")),
                (r.path.len() - 1).to_string(),
                r.calls.to_string(),
                r.wall_ns.to_string(),
                opt(r.cpu_share),
                opt(r.counted_share),
            ];
            f.extend(r.counts.iter().map(|c| opt(c.value)));
            f.extend(r.tree.iter().map(|n| opt(n.value)));
            writeln!(w, "{}", f.join(","))?;
        }
        Ok(())
    }

    /// The indented regions, merged and per thread; with a PMU each region's tree under it.
    pub fn text(&self, w: &mut dyn Write, verbose: bool) -> Result<(), RegionsError> {
        let n_regions = self
            .rows()
            .iter()
            .filter(|(s, _, _)| *s == "merged")
            .count();
        writeln!(
            w,
            "Regions of {}: {} region{} in {} thread{}, run {:.3} s",
            tma_render::text::shell_words(&self.command),
            n_regions,
            if n_regions == 1 { "" } else { "s" },
            self.threads.len(),
            if self.threads.len() == 1 { "" } else { "s" },
            self.wall_ns as f64 / 1e9
        )?;
        if let Some(why) = &self.no_tree {
            writeln!(
                w,
                "Software counts only: the TMA tree of a region needs a hardware PMU ({why})."
            )?;
        }
        let mut sections: Vec<(String, &[Region])> =
            vec![("All threads".to_string(), &self.merged[..])];
        if self.threads.len() > 1 || verbose {
            for t in &self.threads {
                sections.push((format!("Thread {}", t.tid), &t.regions[..]));
            }
        }
        let short = |e: &str| -> String {
            match e {
                "task-clock" => "task-clock ms".into(),
                "context-switches" => "ctx-sw".into(),
                "cpu-migrations" => "migr".into(),
                "page-faults" => "faults".into(),
                other => other.to_string(),
            }
        };
        let width = self
            .rows()
            .iter()
            .map(|(_, _, r)| 2 * (r.path.len() - 1) + r.name.chars().count())
            .max()
            .unwrap_or(6)
            .max(6);
        for (title, regions) in sections {
            writeln!(w, "\n{title}")?;
            write!(
                w,
                "  {:<width$} {:>7} {:>11} {:>6} {:>8}",
                "region", "calls", "time ms", "CPU", "counted"
            )?;
            if !self.hardware {
                for e in &self.events {
                    write!(w, " {:>13}", short(e))?;
                }
            }
            writeln!(w)?;
            let mut stack: Vec<&Region> = regions.iter().rev().collect();
            while let Some(r) = stack.pop() {
                let depth = r.path.len() - 1;
                let name = format!("{}{}", "  ".repeat(depth), r.name);
                let pct =
                    |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}%", v * 100.0));
                write!(
                    w,
                    "  {name:<width$} {:>7} {:>11.3} {:>6} {:>8}",
                    r.calls,
                    r.wall_ns as f64 / 1e6,
                    pct(r.cpu_share),
                    pct(r.counted_share)
                )?;
                if !self.hardware {
                    for c in &r.counts {
                        let v = match (c.event.as_str(), c.value) {
                            (_, None) => "-".to_string(),
                            ("task-clock", Some(v)) => format!("{:.3}", v / 1e6),
                            (_, Some(v)) => format!("{v:.0}"),
                        };
                        write!(w, " {v:>13}")?;
                    }
                }
                writeln!(w)?;
                for n in &r.tree {
                    let v = match (n.value, n.unit.as_str()) {
                        (None, _) => "-".to_string(),
                        (Some(v), "number") => format!("{v:.2}"),
                        (Some(v), _) => format!("{v:.1} %"),
                    };
                    writeln!(
                        w,
                        "  {}{:<28} {v:>9}",
                        "  ".repeat(depth + 1 + n.level as usize),
                        n.node
                    )?;
                }
                stack.extend(r.children.iter().rev());
            }
        }
        Ok(())
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_marker::protocol::GroupCount;

    /// The hardware path without a PMU: a Zen 4 level-1 plan, chosen counts per region and
    /// thread (as the counters would read them), and the tree each region gets.
    fn zen4() -> Counting {
        let model = tma_catalog::by_name("zen4").unwrap();
        let request = tma_stat::Request {
            level: 1,
            nodes: Vec::new(),
            topology: Some(tma_perf::snapshot::Topology {
                cpus: 2,
                cores: 2,
                sockets: 1,
                smt: false,
            }),
            metrics: Vec::new(),
            bottlenecks: Vec::new(),
        };
        let plan =
            tma_stat::groups::counting_plan(model, &request.selection(), &[], false).unwrap();
        Counting {
            plan,
            tree: Some(tma_stat::RunInfo {
                model,
                cpu_source: "from a test".into(),
                source: "chosen counts".into(),
                interval_mode: false,
                request,
                command: None,
                event_map: Vec::new(),
                scope: None,
                core_type: None,
            }),
            no_tree: None,
        }
    }

    /// Counts of `plan` for a region of `cycles` cycles: 20 % of the slots lost to the front
    /// end, 40 % to the back end, 30 % retiring, 10 % bad speculation; the hardware groups
    /// counted `share` of the time.
    fn counts(plan: &Plan, cycles: u64, share: f64) -> Vec<GroupCount> {
        let slots = 6 * cycles;
        let real = |e: &str| -> u64 {
            match e {
                "ls_not_halted_cyc" => cycles,
                "de_no_dispatch_per_slot.no_ops_from_frontend" => slots / 5,
                "de_no_dispatch_per_slot.backend_stalls" => slots * 2 / 5,
                "ex_ret_ops" => slots * 3 / 10,
                "de_src_op_disp.all" => slots * 4 / 10,
                "task-clock" => cycles / 2,
                _ => 0,
            }
        };
        plan.groups
            .iter()
            .map(|g| {
                let hw = g.pmu != "software";
                let s = if hw { share } else { 1.0 };
                GroupCount {
                    enabled: 1_000_000,
                    running: (1_000_000.0 * s) as u64,
                    // What a counter that ran `s` of the time reads.
                    values: g
                        .events
                        .iter()
                        .map(|e| (real(&e.name) as f64 * s) as u64)
                        .collect(),
                }
            })
            .collect()
    }

    #[test]
    fn each_region_gets_its_tree_per_thread_and_merged() {
        let c = zen4();
        let mut t1 = RegionNode::default();
        let n = t1.at(&["kernel".to_string()]);
        n.calls = 3;
        n.wall_ns = 1_000_000;
        n.counts = counts(&c.plan, 2_000_000_000, 0.5);
        let mut t2 = RegionNode::default();
        let n = t2.at(&["kernel".to_string()]);
        n.calls = 1;
        n.wall_ns = 500_000;
        n.counts = counts(&c.plan, 1_000_000_000, 0.5);
        let mut merged = t1.clone();
        merged.merge(&t2);
        let regions = Regions {
            threads: vec![(10, t1), (11, t2)],
            merged,
            notes: Vec::new(),
            uncounted: Vec::new(),
            spans: Vec::new(),
        };
        let r = Report::build(&c, &regions, &["app".into()], 2_000_000).unwrap();
        assert!(r.hardware);
        assert_eq!(r.cpu.as_deref(), Some("zen4"));
        for region in [
            &r.merged[0],
            &r.threads[0].regions[0],
            &r.threads[1].regions[0],
        ] {
            let node = |name: &str| {
                region
                    .tree
                    .iter()
                    .find(|n| n.node == name)
                    .and_then(|n| n.value)
                    .unwrap_or_else(|| panic!("{name} in {:?}", region.tree))
            };
            for (name, want) in [
                ("frontend_bound", 20.0),
                ("backend_bound", 40.0),
                ("retiring", 30.0),
                ("bad_speculation", 10.0),
            ] {
                assert!((node(name) - want).abs() < 0.01, "{name}: {}", node(name));
            }
            assert_eq!(region.counted_share, Some(0.5));
        }
        assert_eq!(r.merged[0].calls, 4);
        let mut text = Vec::new();
        r.text(&mut text, false).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("    frontend_bound"), "{text}");
        assert!(!text.contains("Software counts only"), "{text}");
        let mut csv = Vec::new();
        r.csv(&mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let head = csv.lines().next().unwrap();
        assert!(head.starts_with("scope,tid,region,depth,calls,wall_ns,cpu_share,counted_share,"));
        for node in [
            "frontend_bound",
            "bad_speculation",
            "backend_bound",
            "retiring",
        ] {
            assert!(head.split(',').any(|h| h == node), "{node} in {head}");
        }
        let merged_row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
        assert_eq!(&merged_row[..5], ["merged", "", "kernel", "0", "4"]);
        assert_eq!(csv.lines().count(), 4);
    }

    /// The region documents of `tests/fixtures/regions/zen4-regions-{before,after}.json`:
    /// a Zen 4 level-1 run of chosen counts (two threads; `solve` with `inner` nested, and
    /// `load`; the after run's `solve` is faster with less of it back-end bound, and names
    /// `save` instead of `load`), with a timeline. `UPDATE_GOLDEN=1` rewrites them.
    fn fixture_report(after: bool) -> Report {
        let c = zen4();
        // (cycles in millions, back-end share scaled in by `share` of the plan's slots)
        let region = |root: &mut RegionNode, path: &[&str], calls, ms: u64, mcycles: u64| {
            let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
            let n = root.at(&path);
            n.calls = calls;
            n.wall_ns = ms * 1_000_000;
            n.counts = fixture_counts(&c.plan, mcycles * 1_000_000, after);
        };
        let mut t1 = RegionNode::default();
        let mut t2 = RegionNode::default();
        let (solve, inner) = if after { (60, 40) } else { (90, 70) };
        region(&mut t1, &["solve"], 3, solve, solve * 3);
        region(&mut t1, &["solve", "inner"], 12, inner, inner * 3);
        region(&mut t2, &["solve"], 1, solve / 2, solve * 3 / 2);
        if after {
            region(&mut t1, &["save"], 1, 5, 2);
        } else {
            region(&mut t1, &["load"], 1, 8, 3);
        }
        let mut merged = t1.clone();
        merged.merge(&t2);
        let ms = |v: u64| v * 1_000_000;
        let span = |path: &[&str], b: u64, e: u64| crate::tree::Span {
            path: path.iter().map(|s| s.to_string()).collect(),
            begin_ns: ms(b),
            end_ns: ms(e),
        };
        let mut s1 = Vec::new();
        let first = if after { "save" } else { "load" };
        let first_ms = if after { 5 } else { 8 };
        s1.push(span(&[first], 1, 1 + first_ms));
        let mut t = 2 + first_ms;
        for _ in 0..3 {
            let (len, il) = (solve / 3, inner / 3);
            for k in 0..4 {
                let b = t + 1 + k * il / 4;
                s1.push(span(&["solve", "inner"], b, b + il / 4));
            }
            s1.push(span(&["solve"], t, t + len));
            t += len + 1;
        }
        let regions = Regions {
            threads: vec![(4101, t1), (4102, t2)],
            merged,
            notes: Vec::new(),
            uncounted: Vec::new(),
            spans: vec![
                (
                    4101,
                    crate::tree::ThreadSpans {
                        spans: s1,
                        dropped: 0,
                    },
                ),
                (
                    4102,
                    crate::tree::ThreadSpans {
                        spans: vec![span(&["solve"], 2 + first_ms, 2 + first_ms + solve / 2)],
                        dropped: 0,
                    },
                ),
            ],
        };
        Report::build(&c, &regions, &["./solver".into()], ms(t + 2)).unwrap()
    }

    /// Counts of `plan` for `cycles` cycles at 3 GHz (task-clock: cycles / 3 ns): 20 % of
    /// the slots lost to the front end; back end 40 % before, 25 % after; retiring 30 %
    /// before, 45 % after; the rest bad speculation.
    fn fixture_counts(plan: &Plan, cycles: u64, after: bool) -> Vec<GroupCount> {
        let slots = 6 * cycles;
        let (be, ret) = if after { (25, 45) } else { (40, 30) };
        let real = |e: &str| -> u64 {
            match e {
                "ls_not_halted_cyc" => cycles,
                "de_no_dispatch_per_slot.no_ops_from_frontend" => slots / 5,
                "de_no_dispatch_per_slot.backend_stalls" => slots * be / 100,
                "ex_ret_ops" => slots * ret / 100,
                "de_src_op_disp.all" => slots * (80 - be) / 100,
                "task-clock" => cycles / 3,
                _ => 0,
            }
        };
        plan.groups
            .iter()
            .map(|g| GroupCount {
                enabled: 1_000_000,
                running: 1_000_000,
                values: g.events.iter().map(|e| real(&e.name)).collect(),
            })
            .collect()
    }

    #[test]
    fn the_region_fixtures_are_what_the_builder_writes() {
        for (after, name) in [(false, "before"), (true, "after")] {
            let r = fixture_report(after);
            let mut json = Vec::new();
            r.json(&mut json).unwrap();
            let path = tma_testkit::repo_root()
                .join(format!("tests/fixtures/regions/zen4-regions-{name}.json"));
            tma_testkit::check_golden(&path, &String::from_utf8(json).unwrap());
        }
    }

    #[test]
    fn without_a_pmu_the_report_says_the_tree_needs_one() {
        let plan = Plan::software(&tma_perf::backend::software_events());
        let c = Counting {
            plan: plan.clone(),
            tree: None,
            no_tree: Some("no `cpu` PMU".into()),
        };
        let mut root = RegionNode::default();
        let n = root.at(&["r".to_string()]);
        n.calls = 1;
        n.wall_ns = 10_000_000;
        n.counts = vec![GroupCount {
            enabled: 10_000_000,
            running: 10_000_000,
            values: vec![5_000_000, 1, 0, 7],
        }];
        let regions = Regions {
            threads: vec![(1, root.clone())],
            merged: root,
            notes: Vec::new(),
            uncounted: Vec::new(),
            spans: Vec::new(),
        };
        let r = Report::build(&c, &regions, &["app".into()], 20_000_000).unwrap();
        assert_eq!(r.merged[0].cpu_share, Some(0.5));
        let mut text = Vec::new();
        r.text(&mut text, false).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("Software counts only: the TMA tree of a region needs a hardware PMU"),
            "{text}"
        );
        assert!(text.contains("50.0%"), "{text}");
        let mut json = Vec::new();
        r.json(&mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["schema"], "tma.stat.regions");
        assert_eq!(v["hardware"], false);
        assert_eq!(v["merged"][0]["counts"][3]["event"], "page-faults");
        assert_eq!(v["merged"][0]["counts"][3]["value"], 7.0);
        // No spans: no timeline field, as documents written before it had none; both read
        // back through the same type.
        assert!(v.get("timeline").is_none());
        let back: Report = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn the_timeline_is_written_and_read_back() {
        let plan = Plan::software(&tma_perf::backend::software_events());
        let c = Counting {
            plan,
            tree: None,
            no_tree: Some("no `cpu` PMU".into()),
        };
        let mut root = RegionNode::default();
        root.at(&["r".to_string()]).calls = 2;
        let span = |b, e| crate::tree::Span {
            path: vec!["r".into()],
            begin_ns: b,
            end_ns: e,
        };
        let regions = Regions {
            threads: vec![(7, root.clone())],
            merged: root,
            spans: vec![(
                7,
                crate::tree::ThreadSpans {
                    spans: vec![span(10, 20), span(30, 45)],
                    dropped: 3,
                },
            )],
            ..Regions::default()
        };
        let r = Report::build(&c, &regions, &["app".into()], 100).unwrap();
        let mut json = Vec::new();
        r.json(&mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["timeline"][0]["tid"], 7);
        assert_eq!(v["timeline"][0]["spans"][1]["end_ns"], 45);
        assert_eq!(v["timeline"][0]["dropped"], 3);
        let back: Report = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, r);
    }
}
