//! The renderings of a [`TreeProfile`]: text, JSON and CSV.

use std::collections::BTreeSet;
use std::io::Write;

use tma_render::OutputError;

use super::doc::{LayoutDoc, TreeNode, TreeProfile};
use super::{TREE_SCHEMA, TREE_SCHEMA_VERSION};

/// The level-1 (and level-2) node names of the trees, in tree order.
fn node_columns(t: &TreeProfile) -> Vec<String> {
    t.total.nodes.iter().map(|n| n.name.clone()).collect()
}

fn value_text(n: Option<&TreeNode>) -> String {
    match n.and_then(|n| n.value) {
        Some(v) => format!("{v:.1}%"),
        None => "-".into(),
    }
}

/// The text report: each function's tree (with a PMU) or its software counts, then the
/// function × node table.
pub fn text(w: &mut dyn Write, t: &TreeProfile) -> Result<(), OutputError> {
    let l = &t.layout;
    writeln!(
        w,
        "per-function {} from the group {} ({} samples)",
        if t.level > 0 {
            format!("TMA tree, level {}", t.level)
        } else {
            "counts".to_string()
        },
        describe_doc(l),
        t.total.samples
    )?;
    writeln!(w)?;
    if t.level > 0 {
        for f in std::iter::once(&t.total).chain(&t.functions) {
            writeln!(
                w,
                "{} {}: {} samples ({:.1}%), {:.1}% mixed",
                f.function,
                if f.module.is_empty() {
                    String::new()
                } else {
                    format!("[{}]", f.module)
                },
                f.samples,
                f.percent,
                f.mixed_percent
            )?;
            let path: BTreeSet<&str> = f
                .bottleneck
                .as_ref()
                .map(|b| b.path.iter().map(String::as_str).collect())
                .unwrap_or_default();
            for n in &f.nodes {
                let indent = "  ".repeat(n.level as usize);
                let mark = if f.bottleneck.as_ref().and_then(|b| b.node.as_deref()) == Some(&n.name)
                {
                    "  <== bottleneck"
                } else if path.contains(n.name.as_str()) {
                    "  <"
                } else {
                    ""
                };
                let value = match n.value {
                    Some(v) => format!("{v:6.1}%"),
                    None => format!("  ({})", n.status),
                };
                let above = if n.above_threshold == Some(true) {
                    " *"
                } else {
                    ""
                };
                writeln!(w, "{indent}{:<28} {value}{above}{mark}", n.name)?;
            }
            writeln!(w)?;
        }
    }
    // The table.
    let cols = node_columns(t);
    let mut header: Vec<String> = vec!["function".into(), "samples".into(), "mixed".into()];
    if t.level > 0 {
        header.extend(cols.iter().cloned());
    } else {
        header.extend(t.events.iter().cloned());
    }
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = tma_render::table(&hdr);
    for f in t.functions.iter().chain(std::iter::once(&t.total)) {
        let mut row = vec![
            if f.module.is_empty() {
                f.function.clone()
            } else {
                format!("{} [{}]", f.function, f.module)
            },
            format!("{} ({:.1}%)", f.samples, f.percent),
            format!("{:.1}%", f.mixed_percent),
        ];
        if t.level > 0 {
            row.extend(cols.iter().map(|c| value_text(f.node(c))));
        } else {
            row.extend(
                f.counts
                    .iter()
                    .map(|c| format!("{} ({:.1}%)", c.count, c.percent)),
            );
        }
        table.add_row(row);
    }
    let right: Vec<usize> = (1..header.len()).collect();
    tma_render::align_right(&mut table, &right);
    writeln!(w, "{table}")?;
    if let Some(e) = &t.estimators {
        writeln!(w)?;
        estimators_text(w, e)?;
    }
    if !t.notes.is_empty() {
        writeln!(w)?;
        for n in &t.notes {
            writeln!(w, "note: {n}")?;
        }
    }
    Ok(())
}

/// The two estimators' table and verdict.
fn estimators_text(w: &mut dyn Write, e: &crate::estimate::Estimators) -> Result<(), OutputError> {
    let via = match (&e.node, &e.direct_node) {
        (Some(n), Some(d)) if n != d => format!(", the locate-with event of {d}"),
        (Some(_), _) => ", its locate-with event".to_string(),
        _ => String::new(),
    };
    let basis = &e.group_basis;
    writeln!(
        w,
        "{}: each function's share by two estimators: group reads (its {basis} / all {basis}) \
         and direct samples (its share of {} samples of {}{via}, {})",
        match &e.node {
            Some(n) => format!("bottleneck {n}"),
            None => "where the time goes".to_string(),
        },
        e.direct_samples,
        e.direct_event,
        e.direct_source,
    )?;
    let mut table = tma_render::table(&["function", "group reads", "direct samples", "disagree"]);
    for r in &e.functions {
        table.add_row(vec![
            if r.module.is_empty() {
                r.function.clone()
            } else {
                format!("{} [{}]", r.function, r.module)
            },
            format!("{:.1}%", r.group_percent),
            format!("{:.1}%", r.direct_percent),
            if r.disagree {
                "yes".into()
            } else {
                String::new()
            },
        ]);
    }
    tma_render::align_right(&mut table, &[1, 2]);
    writeln!(w, "{table}")?;
    writeln!(w, "{}", e.verdict())?;
    writeln!(w, "rule: {}", e.rule)?;
    Ok(())
}

fn describe_doc(l: &LayoutDoc) -> String {
    let mut names = Vec::new();
    if let Some(x) = &l.leader {
        names.push(x.clone());
    }
    names.push(format!("{} (samples)", l.sampler));
    names.extend(l.members.iter().cloned());
    format!("{{{}}}", names.join(", "))
}

/// The `tma.locate.tree` v1 JSON document.
pub fn json(w: &mut dyn Write, t: &TreeProfile) -> Result<(), OutputError> {
    tma_render::write_json(w, TREE_SCHEMA, TREE_SCHEMA_VERSION, t)
}

/// CSV: one row per function (then `(all)`): samples, mixed, each event's count, each
/// node's value (percent of slots; empty when not computed).
pub fn csv(w: &mut dyn Write, t: &TreeProfile) -> Result<(), OutputError> {
    let cols = node_columns(t);
    let mut header: Vec<String> = vec![
        "function".into(),
        "module".into(),
        "samples".into(),
        "mixed".into(),
        "mixed_percent".into(),
    ];
    header.extend(t.events.iter().cloned());
    header.extend(cols.iter().cloned());
    let est = t.estimators.as_ref();
    if est.is_some() {
        header.extend([
            "group_share".into(),
            "direct_share".into(),
            "disagree".into(),
        ]);
    }
    tma_render::csv_row(w, &header)?;
    for f in t.functions.iter().chain(std::iter::once(&t.total)) {
        let mut row = vec![
            f.function.clone(),
            f.module.clone(),
            f.samples.to_string(),
            f.mixed.to_string(),
            format!("{:.2}", f.mixed_percent),
        ];
        row.extend(f.counts.iter().map(|c| c.count.to_string()));
        row.extend(cols.iter().map(|c| {
            f.node(c)
                .and_then(|n| n.value)
                .map(|v| format!("{v:.2}"))
                .unwrap_or_default()
        }));
        if let Some(e) = est {
            // The `(all)` row: 100% each, and whether the estimators disagree at all.
            let (g, d, x) = match e.row(&f.function, &f.module) {
                Some(r) => (r.group_percent, r.direct_percent, r.disagree),
                None => (100.0, 100.0, !e.agree),
            };
            row.extend([
                format!("{g:.2}"),
                format!("{d:.2}"),
                if x { "yes" } else { "no" }.to_string(),
            ]);
        }
        tma_render::csv_row(w, &row)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tma_metrics::Constants;

    use super::*;
    use crate::tree::build::build;
    use crate::tree::layout::TreeLayout;
    use crate::tree::replay::{replay, ReplaySample};

    const A: u64 = 0x1000;

    /// The text, CSV and JSON renderings of the replayed Zen 4 trees.
    #[test]
    fn renderings_show_each_functions_tree_and_the_table() {
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let layout = TreeLayout::hardware(zen4, 1, false, false).unwrap();
        const CYC: &str = "ls_not_halted_cyc";
        const FE: &str = "de_no_dispatch_per_slot.no_ops_from_frontend";
        const DISP: &str = "de_src_op_disp.all";
        const RET: &str = "ex_ret_ops";
        const BE: &str = "de_no_dispatch_per_slot.backend_stalls";
        let a: &[(&str, u64)] = &[
            (CYC, 1000),
            (FE, 600),
            (DISP, 1500),
            (RET, 1200),
            (BE, 3900),
        ];
        let (p, first) = replay(
            &layout,
            &[ReplaySample {
                tid: 1,
                ip: A,
                group_id: 1,
                values: a,
            }],
        );
        let t = build(&p, &layout, Some(zen4), 1, &Constants::default(), 10, first).unwrap();
        let mut text = Vec::new();
        super::text(&mut text, &t).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with(
                "per-function TMA tree, level 1 from the group {ls_not_halted_cyc (samples), "
            ),
            "{text}"
        );
        assert!(
            text.contains("[unknown] 0x1000 [[unknown]]: 1 samples (100.0%), 0.0% mixed"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("backend_bound")
                    && l.contains("65.0% *  <== bottleneck")),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("retiring") && l.contains("20.0%")),
            "{text}"
        );
        let mut csv = Vec::new();
        super::csv(&mut csv, &t).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "function,module,samples,mixed,mixed_percent,ls_not_halted_cyc,\
             de_no_dispatch_per_slot.no_ops_from_frontend,de_src_op_disp.all,ex_ret_ops,\
             de_no_dispatch_per_slot.backend_stalls,de_no_dispatch_per_slot.smt_contention,\
             frontend_bound,bad_speculation,backend_bound,smt_contention,retiring"
        );
        assert_eq!(
            lines.next().unwrap(),
            "[unknown] 0x1000,[unknown],1,0,0.00,1000,600,1500,1200,3900,0,10.00,5.00,65.00,0.00,20.00"
        );
        let mut json = Vec::new();
        super::json(&mut json, &t).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["schema"], TREE_SCHEMA);
        assert_eq!(v["functions"][0]["bottleneck"]["node"], "backend_bound");
        assert_eq!(v["layout"]["kind"], "sampler_leads");
    }
}
