//! The metric formula language (`tma_metrics::expr::parse`): the catalog's formulas and
//! thresholds, `--metric` expressions.
use crate::{Bound, Target};

pub const TARGET: Target = Target {
    name: "expr",
    setup: crate::no_setup,
    bound: |_| Bound {
        per_byte: 256,
        fixed: 1 << 20,
    },
    run: |data| {
        let Ok(src) = std::str::from_utf8(data) else {
            return;
        };
        if let Ok(e) = tma_metrics::expr::parse(src) {
            let _ = e.identifiers();
            let _ = e.constants();
        }
    },
};
