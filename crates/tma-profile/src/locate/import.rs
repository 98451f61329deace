//! `--import FILE`: the samples of a perf.data file, and its read group for `--tree`.

use std::path::Path;

use tma_catalog::Model;

use super::config::{usage, LocateConfig, LocateError};
use super::recorded::{new_aggregator, read_kallsyms, Recorded};
use crate::aggregate::Aggregator;
use crate::tree::TreeLayout;

/// `--import FILE`: the samples of one event of a perf.data file.
pub(super) fn import(cfg: &LocateConfig, path: &Path) -> Result<Recorded, LocateError> {
    if !cfg.command.is_empty() {
        return Err(usage("--import reads a file: give no command"));
    }
    if cfg.node.is_some() {
        return Err(usage(
            "--node chooses what to sample; with --import use -e EVENT to pick an event of the file",
        ));
    }
    let mut agg = new_aggregator(cfg);
    let info =
        crate::import::import_file(path, &mut agg, cfg.event.as_deref()).map_err(|source| {
            LocateError::Import {
                path: path.display().to_string(),
                source,
            }
        })?;
    let event_name = info
        .events
        .get(info.chosen)
        .cloned()
        .unwrap_or_else(|| "?".into());
    let mut notes = Vec::new();
    let tree = match cfg.tree {
        Some(_) => Some(imported_tree(cfg, &agg, &info)?),
        None => None,
    };
    // The events no read group of the sampled event names: sampled on their own.
    let in_group: Vec<usize> = agg
        .group()
        .map(|g| {
            g.ids
                .iter()
                .filter_map(|id| {
                    id.and_then(|id| info.event_ids.iter().position(|ids| ids.contains(&id)))
                })
                .collect()
        })
        .unwrap_or_default();
    let import_others: Vec<String> = info
        .events
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != info.chosen && !in_group.contains(i))
        .map(|(_, e)| e.clone())
        .collect();
    if info.events.len() > 1 && tree.is_none() {
        notes.push(format!(
            "the file has {} events ({}); showing {} (pick one with -e)",
            info.events.len(),
            info.events.join(", "),
            event_name
        ));
    }
    Ok(Recorded {
        agg,
        event_name,
        kallsyms: cfg.kallsyms.as_deref().and_then(read_kallsyms),
        notes,
        duration_ns: 0,
        exit_status: 0,
        tree,
        live: None,
        import_others,
    })
}

/// `--import --tree`: the file's samples must carry read groups; their values are named
/// by the ids the file lists for each event.
pub(super) fn imported_tree(
    cfg: &LocateConfig,
    agg: &Aggregator,
    info: &crate::import::ImportInfo,
) -> Result<(TreeLayout, Option<&'static Model>), LocateError> {
    let Some(group) = agg.group() else {
        return Err(usage(
            "--tree: the file's samples carry no read group; record one with \
             `perf record -e '{cpu-clock,page-faults}:S'` (a group whose leader samples and \
             reads the others)",
        ));
    };
    let names: Vec<String> = group
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            id.and_then(|id| info.event_ids.iter().position(|ids| ids.contains(&id)))
                .and_then(|e| info.events.get(e).cloned())
                .unwrap_or_else(|| format!("value{i}"))
        })
        .collect();
    let model = match &cfg.cpu {
        Some(k) => Some(tma_catalog::by_name(k)?),
        None => None,
    };
    let sampler = info.events.get(info.chosen).cloned().unwrap_or_default();
    Ok((TreeLayout::imported(&names, &sampler, model), model))
}
