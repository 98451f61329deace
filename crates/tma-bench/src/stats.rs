//! Statistics over repetitions: median, percentiles, snapping to simple fractions. Pure.

/// Percentile by linear interpolation on sorted data (p in 0..=100).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = (p / 100.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let f = pos - lo as f64;
    sorted[lo] * (1.0 - f) + sorted[hi] * f
}

pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(|a, b| a.total_cmp(b));
    s
}

pub fn median(v: &[f64]) -> f64 {
    percentile(&sorted(v), 50.0)
}

/// The nearest "simple" value: an integer, or a multiple of 1/12 (covers 1/2, 1/3, 1/4, 1/6,
/// 1/12 throughputs). Returns (snapped, within 2%).
pub fn snap(x: f64) -> (f64, bool) {
    if !x.is_finite() || x <= 0.0 {
        return (x, false);
    }
    let int = x.round();
    let twelfth = (x * 12.0).round() / 12.0;
    let s = if int > 0.0 && ((x - int) / int).abs() <= 0.02 {
        int
    } else if twelfth > 0.0 {
        twelfth
    } else {
        1.0 / 12.0
    };
    (s, ((x - s) / s).abs() <= 0.02)
}

/// Relative p10-p90 spread.
pub fn rel_spread(v: &[f64]) -> f64 {
    let s = sorted(v);
    let m = percentile(&s, 50.0);
    (percentile(&s, 90.0) - percentile(&s, 10.0)) / m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        let v = [3.0, 1.0, 2.0, 5.0, 4.0];
        assert_eq!(median(&v), 3.0);
        let s = sorted(&v);
        assert!((percentile(&s, 10.0) - 1.4).abs() < 1e-12);
        assert!((percentile(&s, 90.0) - 4.6).abs() < 1e-12);
    }

    #[test]
    fn snapping() {
        assert_eq!(snap(2.99), (3.0, true));
        assert_eq!(snap(0.251), (0.25, true));
        assert_eq!(snap(0.334), (1.0 / 3.0, true));
        let (s, ok) = snap(0.29);
        assert!((s - 0.25).abs() < 1e-12 || (s - 1.0 / 3.0).abs() < 1e-12);
        assert!(!ok);
        assert_eq!(snap(11.0), (11.0, true));
    }
}
