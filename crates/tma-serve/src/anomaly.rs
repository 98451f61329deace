//! `--anomaly`: for each scope (cgroup, CPU or the host), learn the distribution of each
//! level-1 node and of IPC over a window of intervals, and mark an interval whose value falls
//! outside it. Then name the co-located scope whose memory-bound share rose the most at the
//! same moment, and more than the marked scope's own: the likely antagonist, as Google's CPI² (Zhang et al., EuroSys 2013) names the
//! co-runner whose CPU use tracks a victim's CPI.
//!
//! The distribution is the mean and standard deviation of the last `window` values (at
//! least `min_samples` before anything is judged); a value is outside when it is more than
//! `sigmas` deviations from the mean, the deviation floored (a share that never moved does
//! not make every wobble an anomaly: 1 point of slots for shares, 2% of the mean for IPC).
//! Each value joins the window after it is judged, so a lasting change becomes the new
//! normal after a window.

use std::collections::{HashMap, VecDeque};

/// How anomalies are told.
#[derive(Debug, Clone, PartialEq)]
pub struct AnomalyConfig {
    /// Intervals learnt (the window).
    pub window: usize,
    /// Intervals needed before a value is judged.
    pub min_samples: usize,
    /// Deviations from the mean that make a value an anomaly.
    pub sigmas: f64,
    /// The least rise of a memory-bound share (0..1) that names an antagonist.
    pub min_rise: f64,
}

impl Default for AnomalyConfig {
    fn default() -> Self {
        AnomalyConfig {
            window: 60,
            min_samples: 10,
            sigmas: 4.0,
            min_rise: 0.05,
        }
    }
}

/// One scope's values of an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeValues {
    /// The scope's label value (`""` for the host as a whole).
    pub scope: String,
    /// (node path or `IPC`, value): shares 0..1, IPC in instructions per cycle.
    pub values: Vec<(String, f64)>,
    /// The memory-bound share (0..1) when the tree has such a node.
    pub memory_bound: Option<f64>,
}

/// An interval outside its distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub scope: String,
    pub node: String,
    pub value: f64,
    pub mean: f64,
    pub deviation: f64,
    /// The other scope whose memory-bound share rose the most at the same moment.
    pub antagonist: Option<String>,
}

/// The key of the memory-bound history of a scope.
const MEMORY: &str = "\u{0}memory_bound";

#[derive(Debug, Default)]
struct History {
    values: VecDeque<f64>,
    last_seen: u64,
}

impl History {
    /// (mean, floored deviation) once there are enough values.
    fn stats(&self, cfg: &AnomalyConfig, ipc: bool) -> Option<(f64, f64)> {
        let n = self.values.len();
        if n < cfg.min_samples.max(2) {
            return None;
        }
        let mean = self.values.iter().sum::<f64>() / n as f64;
        let var = self.values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let floor = if ipc { 0.02 * mean.abs() } else { 0.01 };
        Some((mean, var.sqrt().max(floor).max(1e-12)))
    }

    fn push(&mut self, v: f64, window: usize, now: u64) {
        self.values.push_back(v);
        while self.values.len() > window.max(2) {
            self.values.pop_front();
        }
        self.last_seen = now;
    }
}

/// The learnt distributions of every scope.
#[derive(Debug, Default)]
pub struct Detector {
    cfg: AnomalyConfig,
    history: HashMap<(String, String), History>,
    intervals: u64,
}

impl Detector {
    pub fn new(cfg: AnomalyConfig) -> Detector {
        Detector {
            cfg,
            history: HashMap::new(),
            intervals: 0,
        }
    }

    /// Judge one interval of every scope, then learn it.
    pub fn observe(&mut self, scopes: &[ScopeValues]) -> Vec<Finding> {
        self.intervals += 1;
        let now = self.intervals;
        let cfg = self.cfg.clone();
        // How far each scope's memory-bound share rose above its own distribution.
        let rises: Vec<(&str, f64, f64)> = scopes
            .iter()
            .filter_map(|s| {
                let v = s.memory_bound?;
                let h = self.history.get(&(s.scope.clone(), MEMORY.to_string()))?;
                let (mean, dev) = h.stats(&cfg, false)?;
                Some((s.scope.as_str(), (v - mean) / dev, v - mean))
            })
            .collect();
        let mut out = Vec::new();
        for s in scopes {
            for (node, v) in &s.values {
                if !v.is_finite() {
                    continue;
                }
                let key = (s.scope.clone(), node.clone());
                let Some((mean, dev)) = self
                    .history
                    .get(&key)
                    .and_then(|h| h.stats(&cfg, node == "IPC"))
                else {
                    continue;
                };
                if (v - mean).abs() <= cfg.sigmas * dev {
                    continue;
                }
                // The antagonist uses the memory more than before, and more so than the
                // scope it slows down (a scope whose own memory share rose the most is the
                // aggressor, not a victim).
                let own_rise = rises
                    .iter()
                    .find(|(other, ..)| *other == s.scope)
                    .map_or(0.0, |r| r.2);
                let antagonist = rises
                    .iter()
                    .filter(|(other, z, rise)| {
                        *other != s.scope
                            && *other != "other"
                            && *z > cfg.sigmas
                            && *rise >= cfg.min_rise
                            && *rise > own_rise
                    })
                    .max_by(|a, b| a.2.total_cmp(&b.2))
                    .map(|(other, ..)| other.to_string());
                out.push(Finding {
                    scope: s.scope.clone(),
                    node: node.clone(),
                    value: *v,
                    mean,
                    deviation: dev,
                    antagonist,
                });
            }
        }
        for s in scopes {
            let mem = s.memory_bound.map(|m| (MEMORY.to_string(), m));
            for (node, v) in s.values.iter().cloned().chain(mem) {
                if v.is_finite() {
                    self.history
                        .entry((s.scope.clone(), node))
                        .or_default()
                        .push(v, cfg.window, now);
                }
            }
        }
        // Scopes gone for a window are forgotten (bounded memory under churn).
        let window = cfg.window as u64;
        self.history
            .retain(|_, h| now.saturating_sub(h.last_seen) <= window);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(name: &str, be: f64, mem: f64) -> ScopeValues {
        ScopeValues {
            scope: name.into(),
            values: vec![("Backend_Bound".into(), be)],
            memory_bound: Some(mem),
        }
    }

    #[test]
    fn a_jump_is_marked_and_the_cgroup_whose_memory_share_rose_is_named() {
        let mut d = Detector::new(AnomalyConfig::default());
        for i in 0..20 {
            let w = 0.002 * (i % 3) as f64;
            assert!(d
                .observe(&[scope("web", 0.2 + w, 0.1), scope("batch", 0.3, 0.1 + w)])
                .is_empty());
        }
        let f = d.observe(&[scope("web", 0.45, 0.2), scope("batch", 0.6, 0.5)]);
        let web = f.iter().find(|f| f.scope == "web").unwrap();
        assert_eq!(web.antagonist.as_deref(), Some("batch"));
        assert!((web.mean - 0.202).abs() < 0.01, "{web:?}");
        // A lasting change becomes normal after a window.
        for _ in 0..70 {
            d.observe(&[scope("web", 0.45, 0.2), scope("batch", 0.6, 0.5)]);
        }
        assert!(d
            .observe(&[scope("web", 0.45, 0.2), scope("batch", 0.6, 0.5)])
            .is_empty());
    }
}
