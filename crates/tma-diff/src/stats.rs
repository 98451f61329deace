//! Per-side summaries and Welch's t-test (unequal variances), with the t distribution of
//! `statrs`.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The p-value under which a delta is called significant.
pub const ALPHA: f64 = 0.05;

/// The samples of one node on one side.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples with a value.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1); `None` with fewer than two samples.
    pub sd: Option<f64>,
}

impl Summary {
    /// `None` when no sample has a value.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let sd = (n >= 2).then(|| {
            let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
            (ss / (n - 1) as f64).sqrt()
        });
        Some(Summary { n, mean, sd })
    }
}

/// Welch's t-test of after against before.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// (after mean - before mean) / its standard error.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Whether a delta is significant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Significance {
    /// p < [`ALPHA`].
    Significant,
    /// p >= [`ALPHA`].
    NotSignificant,
    /// No test was possible; `reason` says why.
    Unknown { reason: String },
}

/// Welch's test where each side has two samples or more and some variation; otherwise why
/// significance is unknown.
pub fn welch(before: &Summary, after: &Summary) -> Result<Welch, String> {
    let (Some(s1), Some(s2)) = (before.sd, after.sd) else {
        let one = if before.n < 2 && after.n < 2 {
            "one sample per side".to_string()
        } else {
            let side = if before.n < 2 { "before" } else { "after" };
            format!("one sample {side}")
        };
        return Err(format!(
            "{one}: a test needs two or more on each side (-I intervals or --repeat runs)"
        ));
    };
    let (n1, n2) = (before.n as f64, after.n as f64);
    let (v1, v2) = (s1 * s1 / n1, s2 * s2 / n2);
    let se2 = v1 + v2;
    if se2 <= 0.0 || !se2.is_finite() {
        return Err("no variation within either side".into());
    }
    let t = (after.mean - before.mean) / se2.sqrt();
    let df = se2 * se2 / (v1 * v1 / (n1 - 1.0) + v2 * v2 / (n2 - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df).map_err(|e| format!("t distribution: {e}"))?;
    let p = (2.0 * dist.sf(t.abs())).min(1.0);
    Ok(Welch { t, df, p })
}

impl Significance {
    pub fn of(test: &Result<Welch, String>) -> Significance {
        match test {
            Ok(w) if w.p < ALPHA => Significance::Significant,
            Ok(_) => Significance::NotSignificant,
            Err(reason) => Significance::Unknown {
                reason: reason.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_mean_and_sample_sd() {
        let s = Summary::of(&[2.0, 4.0, 6.0]).unwrap();
        assert_eq!(s.n, 3);
        assert!((s.mean - 4.0).abs() < 1e-12);
        assert!((s.sd.unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(Summary::of(&[1.0]).unwrap().sd, None);
        assert_eq!(Summary::of(&[]), None);
    }

    /// Samples [0, 2] before and [2, 4] after: means 1 and 3, variances 2 and 2, so
    /// se = sqrt(2/2 + 2/2) = sqrt 2, t = 2 / sqrt 2 = sqrt 2 and df = (1 + 1)^2 / (1/1 + 1/1)
    /// = 2. For df = 2 the t CDF is F(t) = 1/2 + t / (2 sqrt(2 + t^2)), so the two-sided
    /// p = 1 - t / sqrt(2 + t^2) = 1 - sqrt 2 / 2.
    #[test]
    fn welch_matches_the_closed_form_for_two_degrees_of_freedom() {
        let b = Summary::of(&[0.0, 2.0]).unwrap();
        let a = Summary::of(&[2.0, 4.0]).unwrap();
        let w = welch(&b, &a).unwrap();
        assert!((w.t - 2f64.sqrt()).abs() < 1e-12);
        assert!((w.df - 2.0).abs() < 1e-12);
        assert!((w.p - (1.0 - 2f64.sqrt() / 2.0)).abs() < 1e-9, "{}", w.p);
    }

    #[test]
    fn one_sample_means_unknown() {
        let b = Summary::of(&[1.0]).unwrap();
        let a = Summary::of(&[2.0, 3.0]).unwrap();
        let e = welch(&b, &a).unwrap_err();
        assert!(e.starts_with("one sample before"), "{e}");
        let e = welch(&b, &Summary::of(&[2.0]).unwrap()).unwrap_err();
        assert!(e.starts_with("one sample per side"), "{e}");
        let flat = Summary::of(&[1.0, 1.0]).unwrap();
        assert!(welch(&flat, &flat).is_err());
    }
}
