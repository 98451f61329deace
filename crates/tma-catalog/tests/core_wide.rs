//! SKL/SKX/CLX: the branch for counts that are not core-wide. perfmon's
//! core clocks need the AnyThread `CPU_CLK_UNHALTED.THREAD_ANY` whenever SMT is on; the
//! generator adds, as Intel's TMA spreadsheet and Linux perf do, a per-thread estimate under
//! `if #core_wide else`.

use tma_catalog::{by_name, models, Vendor};

const ESTIMATE: &str = "( CPU_CLK_UNHALTED.THREAD / 2 * ( 1 + CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE \
                        / CPU_CLK_UNHALTED.REF_XCLK ) )";

#[test]
fn pre_ice_lake_core_clocks_have_the_per_thread_estimate() {
    for key in ["skl", "skx", "clx"] {
        let m = by_name(key).unwrap();
        let clks = m.metric("Info_Core_CORE_CLKS").unwrap().formula;
        assert!(
            clks.contains(&format!("if #core_wide else {ESTIMATE}")),
            "{key}: {clks}"
        );
        // Every formula that reads an AnyThread event reads it under `#core_wide` only.
        let texts = m
            .nodes
            .iter()
            .map(|n| (n.name, n.formula))
            .chain(m.metrics.iter().map(|x| (x.name, x.formula)));
        let mut with_branch = 0;
        for (name, f) in texts {
            // Recovery cycles keep perfmon's `RECOVERY_CYCLES_ANY / 2` with SMT on, as perf
            // computes them beside the estimated clocks.
            for any in ["CPU_CLK_UNHALTED.THREAD_ANY"] {
                if f.contains(any) {
                    assert!(f.contains("if #core_wide else"), "{key} {name}: {f}");
                    with_branch += 1;
                }
            }
        }
        assert!(with_branch > 50, "{key}: {with_branch}");
        for level1 in [
            "Frontend_Bound",
            "Bad_Speculation",
            "Retiring",
            "Backend_Bound",
        ] {
            assert!(
                m.node(level1).unwrap().formula.contains(ESTIMATE),
                "{key} {level1}"
            );
        }
    }
}

#[test]
fn no_other_model_uses_core_wide() {
    for m in models() {
        if ["skl", "skx", "clx"].contains(&m.key) {
            continue;
        }
        let uses = m.nodes.iter().any(|n| n.formula.contains("#core_wide"))
            || m.metrics.iter().any(|x| x.formula.contains("#core_wide"));
        assert!(!uses, "{}", m.key);
        if m.vendor == Vendor::Intel {
            // Ice Lake and later count core-wide topdown without AnyThread events.
            assert!(
                !m.nodes.iter().any(|n| n.formula.contains("THREAD_ANY")),
                "{}",
                m.key
            );
        }
    }
}
