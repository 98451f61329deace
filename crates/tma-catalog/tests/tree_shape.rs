//! One tree shape for every model: a node is one level below its parent, and the nodes its
//! threshold names above it are its ancestors (the threshold spells out the ancestor chain,
//! e.g. `Serializing_Operation > 10 & Core_Bound > 10 & Backend_Bound > 20`).

use tma_catalog::encode::formula_identifiers;
use tma_catalog::{by_name, models, Model, NodeDef};

/// The parent chain of a node, nearest first.
fn ancestors(m: &Model, n: &NodeDef) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut cur = n.parent;
    while let Some(p) = cur {
        assert!(
            !out.contains(&p) && out.len() <= m.nodes.len(),
            "{}: {} has a parent cycle through {p}",
            m.key,
            n.name
        );
        out.push(p);
        cur = m
            .node(p)
            .unwrap_or_else(|| panic!("{}: {} has unknown parent {p}", m.key, n.name))
            .parent;
    }
    out
}

#[test]
fn all_twenty_one_models_are_checked() {
    assert_eq!(models().len(), 21);
}

#[test]
fn each_level_is_its_parents_level_plus_one() {
    for m in models() {
        for n in m.nodes {
            match n.parent {
                None => assert_eq!(n.level, 1, "{}: root node {} is not level 1", m.key, n.name),
                Some(p) => {
                    let parent = m
                        .node(p)
                        .unwrap_or_else(|| panic!("{}: {} has unknown parent {p}", m.key, n.name));
                    assert_eq!(
                        n.level,
                        parent.level + 1,
                        "{}: {} is level {} under {p} at level {}",
                        m.key,
                        n.name,
                        n.level,
                        parent.level
                    );
                }
            }
        }
    }
}

#[test]
fn parents_come_before_children() {
    for m in models() {
        for (i, n) in m.nodes.iter().enumerate() {
            if let Some(p) = n.parent {
                let pi = m.nodes.iter().position(|x| x.name == p);
                assert!(
                    pi.is_some_and(|pi| pi < i),
                    "{}: {} comes before its parent {p}",
                    m.key,
                    n.name
                );
            }
        }
    }
}

/// Whether `n` is below `above` in the tree.
fn descends_from(m: &Model, n: &NodeDef, above: &str) -> bool {
    ancestors(m, n).contains(&above)
}

#[test]
fn threshold_names_the_ancestor_chain() {
    let mut checked = 0;
    for m in models() {
        for n in m.nodes {
            let up = ancestors(m, n);
            let mut named_up = Vec::new();
            for id in formula_identifiers(n.threshold) {
                // Helper metrics, the node itself and its descendants (Retiring's threshold
                // names Heavy_Operations) are not part of the chain.
                let Some(named) = m.node(id) else { continue };
                if named.name == n.name || descends_from(m, named, n.name) {
                    continue;
                }
                checked += 1;
                assert!(
                    up.contains(&named.name),
                    "{}: the threshold of {} (`{}`) names {} (level {}), which is not among its ancestors {up:?}",
                    m.key,
                    n.name,
                    n.threshold,
                    named.name,
                    named.level
                );
                if !named_up.contains(&named.name) {
                    named_up.push(named.name);
                }
            }
            // The named ancestors are the nearest ones: parent, grandparent, ... with no gap.
            assert!(
                named_up.iter().all(|a| up[..named_up.len()].contains(a)),
                "{}: the threshold of {} (`{}`) skips ancestors: it names {named_up:?}, the chain is {up:?}",
                m.key,
                n.name,
                n.threshold
            );
        }
    }
    assert!(checked > 1000, "only {checked} threshold names checked");
}

#[test]
fn skylake_family_serializing_and_nop_nodes() {
    for key in ["skx", "clx", "skl"] {
        let m = by_name(key).unwrap();
        let ser = m.node("Serializing_Operation").unwrap();
        assert_eq!((ser.parent, ser.level), (Some("Core_Bound"), 3), "{key}");
        if let Some(p) = m.node("Slow_Pause") {
            assert_eq!(
                (p.parent, p.level),
                (Some("Serializing_Operation"), 4),
                "{key}"
            );
        }
        let nop = m.node("Nop_Instructions").unwrap();
        assert_eq!(
            (nop.parent, nop.level),
            (Some("Other_Light_Ops"), 4),
            "{key}"
        );
    }
    // Of the three only CLX has Slow_Pause.
    assert!(by_name("clx").unwrap().node("Slow_Pause").is_some());
}
