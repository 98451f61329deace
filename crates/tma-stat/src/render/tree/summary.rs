//! The closing lines of an interval run, printed once at its end: the verdict on the means
//! of every interval (the rule `tma report` and `tma diff` run on them,
//! [`tma_metrics::decide_summary`]) and the phases the means hide. Each interval keeps only
//! its one-line bottleneck. Memory is bounded by the tree and the number of phase changes,
//! not by the number of intervals.

use std::io::Write;

use tma_catalog::Unit;
use tma_metrics::Bottleneck;
use tma_render::OutputError;

use super::facts::*;
use super::text::*;
use crate::eval::{IntervalReport, RunInfo};

use tma_metrics::{Phase, SummaryNode};

/// One node summed over the intervals so far.
#[derive(Debug, Clone)]
struct NodeSum {
    name: &'static str,
    parent: Option<&'static str>,
    level: u8,
    unit: Unit,
    threshold: &'static str,
    locate_with: &'static [&'static str],
    description: &'static str,
    sum: f64,
    n: usize,
    above: usize,
    below: usize,
}

/// The intervals of a run, summarised as they stream past.
#[derive(Debug, Clone, Default)]
pub(super) struct RunSummary {
    nodes: Vec<NodeSum>,
    samples: usize,
    first_s: f64,
    last_s: f64,
    /// The bottleneck of one interval, when there was only one (its own verdict).
    only: Option<Bottleneck>,
    phases: Vec<Phase>,
}

impl RunSummary {
    pub(super) fn push(&mut self, ir: &IntervalReport) {
        let r = &ir.report;
        for n in &r.nodes {
            let i = match self.nodes.iter().position(|s| s.name == n.name) {
                Some(i) => i,
                None => {
                    self.nodes.push(NodeSum {
                        name: n.name,
                        parent: n.parent,
                        level: n.level,
                        unit: n.unit,
                        threshold: n.threshold,
                        locate_with: n.locate_with,
                        description: n.description,
                        sum: 0.0,
                        n: 0,
                        above: 0,
                        below: 0,
                    });
                    self.nodes.len() - 1
                }
            };
            let s = &mut self.nodes[i];
            if let Some(v) = n.value.filter(|v| v.is_finite()) {
                s.sum += v;
                s.n += 1;
            }
            s.above += usize::from(n.above_threshold == Some(true));
            s.below += usize::from(n.above_threshold == Some(false));
        }
        if self.samples == 0 {
            self.first_s = ir.start_s;
        }
        self.last_s = ir.end_s;
        self.samples += 1;
        self.only = (self.samples == 1).then(|| r.bottleneck.clone());
        let label = r.bottleneck.phase_label();
        let at = self.samples;
        match self.phases.last_mut() {
            Some(p) if p.label == label => p.last = at,
            _ => self.phases.push(Phase {
                first: at,
                last: at,
                label,
            }),
        }
    }

    fn mean(&self, name: &str) -> Option<f64> {
        self.nodes
            .iter()
            .find(|s| s.name == name)
            .filter(|s| s.n > 0)
            .map(|s| s.sum / s.n as f64)
    }

    /// The verdict on the means (one interval: its own).
    fn verdict(&self) -> Bottleneck {
        if let Some(b) = &self.only {
            return b.clone();
        }
        let nodes: Vec<SummaryNode> = self
            .nodes
            .iter()
            .map(|s| SummaryNode {
                name: s.name,
                parent: s.parent,
                level: s.level,
                mean: (s.n > 0).then(|| s.sum / s.n as f64),
                percent: s.unit != Unit::Number,
                threshold: s.threshold,
                above: s.above,
                below: s.below,
                locate_with: s.locate_with,
            })
            .collect();
        tma_metrics::decide_summary(&nodes, self.samples).1
    }

    /// The closing lines of the whole run, under a rule naming what they are of.
    pub(super) fn write(&self, w: &mut dyn Write, info: &RunInfo) -> Result<(), OutputError> {
        if self.samples == 0 {
            return Ok(());
        }
        let intervals = if self.samples == 1 {
            "1 interval".to_string()
        } else {
            format!("{} intervals", self.samples)
        };
        writeln!(w)?;
        // One tree of several (a hybrid part's core types and merged view) says which.
        let of = tree_name(info)
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        writeln!(
            w,
            "--- the whole run{of}: {intervals}, {:.3} s .. {:.3} s, verdict on the means ---",
            self.first_s, self.last_s
        )?;
        let b = self.verdict();
        let val = |name: &str| {
            let unit = self.nodes.iter().find(|s| s.name == name).map(|s| s.unit);
            match (self.mean(name), unit) {
                (Some(v), Some(u)) => fmt_value(v, u),
                _ => "-".into(),
            }
        };
        let node = |name: &str| {
            self.nodes.iter().find(|s| s.name == name).map(|s| Closing {
                description: s.description,
                out_of_range: self.mean(name).is_some_and(|v| {
                    let tol = tma_metrics::PERCENT_TOLERANCE;
                    s.unit != Unit::Number && !(-tol..=100.0 + tol).contains(&v)
                }),
            })
        };
        let phases = tma_metrics::phases_text(&self.phases, "intervals");
        closing(w, info, &b, &val, &node, phases.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Input, StatConfig};

    fn text(rel: &str, level: u8) -> String {
        let cfg = StatConfig {
            input: Input::Import(tma_testkit::fixture(rel)),
            cpu: Some("zen4".into()),
            level,
            ..StatConfig::default()
        };
        let ev = crate::evaluate(&cfg, &mut std::io::sink()).unwrap();
        let mut out = Vec::new();
        crate::render::tree::render(&mut out, &ev.run, &crate::RenderOptions::default()).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// 60 intervals print the closing lines once, at the end, on the means;
    /// each interval keeps its one-line verdict.
    #[test]
    fn an_interval_run_closes_once_with_the_verdict_on_the_means() {
        let t = text("report/zen4-phases-synthetic.csv", 2);
        assert_eq!(t.matches("--- interval ").count(), 60, "{t}");
        assert_eq!(t.matches("\nBottleneck: ").count(), 61, "{t}");
        for once in ["Next: ", "Locate with: ", "--- the whole run: 60 intervals"] {
            assert_eq!(t.matches(once).count(), 1, "{once}: {t}");
        }
        let (_, tail) = t.split_once("--- the whole run").unwrap();
        assert!(!tail.contains("--- interval"), "{tail}");
        // The means of the two phases: backend_bound_memory then backend_bound_cpu.
        assert!(
            tail.contains(
                "The bottleneck changes over time, which the means hide: intervals 1-30: \
                 backend_bound_memory; 31-60: backend_bound_cpu."
            ),
            "{tail}"
        );
        // Before: 872 lines, the closing lines after each interval.
        assert!(t.lines().count() < 700, "{} lines", t.lines().count());
    }
}
