//! The TMA flame graph's colours: each function's dominant level-1 node.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use tma_catalog::Model;
use tma_metrics::{Constants, Selection};

use super::TreeError;
use crate::hotspots::Profile;

/// A frame's colour in the TMA flame graph: the level-1 node with the largest share of the
/// function's slots (counted over every stack the function is on), and that share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dominant {
    pub node: String,
    /// Percent of the function's slots.
    pub share: f64,
}

/// Per function name: its dominant level-1 node, from the values of every stack it is on
/// (each stack once). Functions whose tree has no level-1 value are left out.
pub fn dominant_nodes(
    profile: &Profile,
    model: &'static Model,
    consts: &Constants,
) -> Result<std::collections::BTreeMap<String, Dominant>, TreeError> {
    let width = profile.value_names.len();
    let mut per: HashMap<&str, Vec<u64>> = HashMap::new();
    for st in &profile.stacks {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for &f in &st.frames {
            let name = profile.frames[f].function.as_str();
            if seen.insert(name) {
                let e = per.entry(name).or_insert_with(|| vec![0; width]);
                for (a, v) in e.iter_mut().zip(&st.values) {
                    *a += v;
                }
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for (name, vals) in per {
        let values: HashMap<String, f64> = profile
            .value_names
            .iter()
            .zip(&vals)
            .map(|(n, &v)| (n.clone(), v as f64))
            .collect();
        let rep = tma_metrics::evaluate(model, &Selection::level(1), &values, consts)?;
        let best = rep
            .nodes
            .iter()
            .filter(|n| n.level == 1)
            .filter_map(|n| Some((n.name, n.value?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((node, share)) = best {
            out.insert(
                name.to_string(),
                Dominant {
                    node: node.to_string(),
                    share,
                },
            );
        }
    }
    Ok(out)
}
