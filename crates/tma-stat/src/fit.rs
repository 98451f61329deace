//! Which tables a recording's events fit, for an import without `--cpu` and without a
//! `# cpu:` line: the events name their CPU (`TOPDOWN.SLOTS` and `topdown-heavy-ops` are a
//! Sapphire Rapids', `ex_ret_ops` a Zen's), so a recording made elsewhere is read with the
//! tables of the machine that made it, not refused because this machine has none (or read
//! with this machine's tables, which do not know its events).
//!
//! The tables that know the most of the recording's events are read on its first bytes, as
//! the import reads them; those that show one tree are one choice. Between choices, the
//! values perf printed beside the counts decide (perf computed them with the tables of the
//! CPU it ran on), else a clearly larger share of the tree's events held; else `--cpu` is
//! asked for.

use std::collections::BTreeSet;
use std::io::Write;

use tma_catalog::Model;
use tma_perfstat::{is_generic_event, split_modifiers, IntervalReader};

use crate::model::{required_at, select_model, CLEARLY_MORE};
use crate::sink::Collect;
use crate::{StatConfig, StatError};

/// The events of the start of a recording.
#[derive(Debug, Default)]
struct Recorded {
    /// Each perf spec once, in order of appearance.
    specs: Vec<String>,
    /// perf printed metric values beside the counts of the first interval.
    printed: bool,
}

/// The events of the start of a recording (`prefix`: its first bytes, possibly cut in the
/// middle of a line); `None` when it names its CPU (`# cpu: KEY`), or when it cannot be
/// read: the import itself then says what is wrong.
fn recorded(prefix: &[u8]) -> Option<Recorded> {
    let mut reader = IntervalReader::new(prefix).ok()?;
    if reader.cpu_hint().is_some() {
        return None;
    }
    let mut r = Recorded::default();
    match reader.next_interval() {
        Ok(Some(iv)) => {
            for reading in &iv.readings {
                if !r.specs.contains(&reading.event) {
                    r.specs.push(reading.event.clone());
                }
            }
            r.printed = !iv.printed.is_empty();
        }
        // The first interval does not end within the bytes read: the events seen so far.
        _ => r.specs = reader.events().to_vec(),
    }
    (!r.specs.is_empty()).then_some(r)
}

/// The event ids of `model` a perf spec stands for, as the import looks them up: with perf's
/// modifiers (`:u`), else without them (empty: not an event of the table).
fn ids_of(model: &Model, spec: &str) -> Vec<String> {
    match model.resolve_perf_event_all(spec) {
        Ok(ids) if !ids.is_empty() => ids,
        _ => model
            .resolve_perf_event_all(split_modifiers(spec).0)
            .unwrap_or_default(),
    }
}

/// How well the recording fits one table.
#[derive(Debug, Clone, Copy)]
struct Fit {
    model: &'static Model,
    /// Events of the table's tree (to the requested level) the recording holds.
    held: usize,
    /// Their share of the tree's events.
    coverage: f64,
    /// The recording's specs the table knows.
    known: usize,
}

fn fit(model: &'static Model, rec: &Recorded, level: u8) -> Fit {
    let mut held = BTreeSet::new();
    let mut known = 0;
    for spec in &rec.specs {
        let ids = ids_of(model, spec);
        known += usize::from(!ids.is_empty());
        held.extend(ids);
    }
    let required = required_at(model, level);
    let count = required.iter().filter(|id| held.contains(*id)).count();
    Fit {
        model,
        held: count,
        coverage: if required.is_empty() {
            0.0
        } else {
            count as f64 / required.len() as f64
        },
        known,
    }
}

/// The tables a recording fits: those that know the most of its events, of those that
/// hold at least one event of their tree. Several as a rule (the Ice Lake, Tiger Lake and
/// Sapphire Rapids tables all know `TOPDOWN.SLOTS` and `topdown-retiring`): their trees,
/// and the values perf printed, then decide. Empty when it holds not one event of any tree.
fn best_fits(fits: &[Fit]) -> Vec<Fit> {
    let Some(most) = fits.iter().filter(|f| f.held > 0).map(|f| f.known).max() else {
        return Vec::new();
    };
    fits.iter()
        .filter(|f| f.held > 0 && f.known == most)
        .copied()
        .collect()
}

/// The tables whose events a recording can be: those of its core-type PMUs (`cpu_core/…/`
/// is an event of a hybrid part's P-cores, which only the adl and mtl tables read), else all.
fn candidates(prefix: &[u8]) -> Vec<&'static Model> {
    let pmus = crate::import::core_pmus_in(prefix);
    let all = tma_catalog::models();
    let typed: Vec<&'static Model> = all
        .iter()
        .copied()
        .filter(|m| pmus.iter().any(|p| p == m.pmu))
        .collect();
    if typed.is_empty() {
        all.to_vec()
    } else {
        typed
    }
}

/// A tree as the numbers it shows: each computed node's name and value to the tenth of a
/// point tma prints.
type Tree = Vec<(&'static str, i64)>;

/// The first bytes of the recording read with `model`'s tables as the import reads them:
/// the tree shown to the requested level (the nodes it computes), and of the values perf
/// printed for nodes of the whole tree, how many agree and how many there are. `None` when
/// the import fails (not one node computed).
fn read_with(cfg: &StatConfig, model: &Model, prefix: &[u8]) -> Option<(Tree, usize, usize)> {
    let c = StatConfig {
        cpu: Some(model.key.to_string()),
        cpu_from_events: false,
        // The whole tree, for every value perf printed; one tree of a hybrid part.
        level: 6,
        nodes: Vec::new(),
        metrics: None,
        metric_groups: Vec::new(),
        bottlenecks: false,
        strict: false,
        one_tree: true,
        ..cfg.clone()
    };
    let mut collect = Collect::default();
    let notes = &mut std::io::sink();
    if crate::import::is_hybrid(prefix) {
        crate::import::hybrid::run_hybrid(&c, prefix, "", &mut collect, notes).ok()?;
    } else {
        crate::import::run_perf_stat(&c, prefix, "", &mut collect, notes).ok()?;
    }
    let (run, _) = collect.into_run().ok()?;
    let first = run.intervals.first()?;
    let tree = first
        .report
        .nodes
        .iter()
        .filter(|n| n.level <= cfg.level)
        .filter_map(|n| Some((n.name, (n.value? * 10.0).round() as i64)))
        .collect();
    let agrees = first.perf.iter().filter(|p| p.agrees).count();
    Some((tree, agrees, first.perf.len()))
}

/// Tables that show one tree of the recording.
struct Kind {
    tables: Vec<Fit>,
    /// Of each table, the values perf printed for nodes of its whole tree that it agrees
    /// with (the tables of one kind may differ deeper than the level shown).
    agree: Vec<usize>,
    /// The most of them.
    agrees: usize,
}

impl Kind {
    /// The largest share of a tree's events its tables hold.
    fn coverage(&self) -> f64 {
        self.tables.iter().map(|f| f.coverage).fold(0.0, f64::max)
    }

    /// The table that reads the recording: the first in the catalog's order of those that
    /// agree with the most values perf printed.
    fn read_by(&self) -> Fit {
        let i = self
            .agree
            .iter()
            .position(|&a| a == self.agrees)
            .unwrap_or(0);
        self.tables[i]
    }
}

/// `fits` grouped by the tree they show (a table whose import fails is a kind of its own),
/// in order of the values perf printed they agree with, then of [`Kind::coverage`].
fn kinds_of_tree(cfg: &StatConfig, fits: &[Fit], prefix: &[u8]) -> Vec<Kind> {
    let mut kinds: Vec<(Kind, Option<Tree>)> = Vec::new();
    for f in fits {
        let read = read_with(cfg, f.model, prefix);
        let agrees = read.as_ref().map_or(0, |r| r.1);
        let tree = read.map(|r| r.0);
        match kinds.iter_mut().find(|(_, t)| tree.is_some() && *t == tree) {
            Some((kind, _)) => {
                kind.tables.push(*f);
                kind.agree.push(agrees);
                kind.agrees = kind.agrees.max(agrees);
            }
            None => kinds.push((
                Kind {
                    tables: vec![*f],
                    agree: vec![agrees],
                    agrees,
                },
                tree,
            )),
        }
    }
    let mut kinds: Vec<Kind> = kinds.into_iter().map(|(k, _)| k).collect();
    kinds.sort_by(|a, b| {
        b.agrees
            .cmp(&a.agrees)
            .then(b.coverage().total_cmp(&a.coverage()))
    });
    kinds
}

/// Without `--cpu`: the table of an imported recording, from its events (`prefix`: its
/// first bytes), when this machine has no table or its table clearly does not fit them (a
/// recording from another machine), with a note on `notes` saying so. `None`: read it as
/// before (a `# cpu:` line, this machine's table). An error, in one line, when the events
/// fit several tables that give different trees, or none while this machine has no table.
pub(crate) fn cpu_of_recording(
    cfg: &StatConfig,
    prefix: &[u8],
    file: &str,
    notes: &mut dyn Write,
) -> Result<Option<&'static Model>, StatError> {
    if cfg.cpu.is_some() {
        return Ok(None);
    }
    let Some(rec) = recorded(prefix) else {
        return Ok(None);
    };
    let level = cfg.level;
    let here = select_model(None, None, &cfg.host);
    // This machine's table: whether it knows every event, and how many of the node values
    // perf printed it agrees with.
    let mut host = None;
    if let Ok((m, _)) = &here {
        let knows_all = rec
            .specs
            .iter()
            .all(|s| is_generic_event(s) || !ids_of(m, s).is_empty());
        // The usual case: a recording of this machine, without perf's values to check.
        if knows_all && !rec.printed {
            return Ok(None);
        }
        let (agrees, checks) = read_with(cfg, m, prefix).map_or((0, 0), |r| (r.1, r.2));
        if knows_all && agrees == checks {
            return Ok(None);
        }
        host = Some((*m, knows_all, agrees));
    }
    let fits: Vec<Fit> = candidates(prefix)
        .into_iter()
        .map(|m| fit(m, &rec, level))
        .collect();
    let kinds = kinds_of_tree(cfg, &best_fits(&fits), prefix);
    let this = match host {
        Some((m, knows_all, agrees)) => {
            let mine = fit(m, &rec, level);
            // Another table must agree with more of perf's values, or hold a clearly larger
            // share of its tree's events (as for the "try --cpu" hint of an import with the
            // wrong --cpu; any, when this machine's tree holds none), to be preferred.
            let better = kinds.first().is_some_and(|k| {
                !k.tables.iter().any(|f| f.model.key == m.key)
                    && (k.agrees > agrees
                        || (k.agrees == agrees
                            && (mine.held == 0 || k.coverage() >= mine.coverage + CLEARLY_MORE)))
            });
            if !better {
                return Ok(None);
            }
            if knows_all {
                format!(
                    "perf's printed values are not those of this machine's {} tables",
                    m.key
                )
            } else {
                format!("this machine's {} tables do not know them all", m.key)
            }
        }
        None => {
            let why = match &here {
                Err(StatError::NoTableHere { cpuid, .. }) => {
                    format!("this machine ({cpuid}) has no tables")
                }
                Err(StatError::Cpuinfo { path, .. }) => {
                    format!(
                        "this machine's CPU is not known ({} unreadable)",
                        path.display()
                    )
                }
                _ => "this machine's CPU has no tables".to_string(),
            };
            if kinds.is_empty() {
                return Err(StatError::NoFit {
                    file: file.to_string(),
                    why,
                });
            }
            why
        }
    };
    // One tree; or the one that agrees with more of the values perf printed beside the
    // counts; or the one whose tables hold clearly more of their tree's events than those
    // of every other.
    let chosen = match kinds.as_slice() {
        [one] => Some(one),
        [first, second, ..] if first.agrees > second.agrees => Some(first),
        [first, second, ..]
            if first.agrees == second.agrees
                && first.coverage() >= second.coverage() + CLEARLY_MORE =>
        {
            Some(first)
        }
        _ => None,
    };
    let Some(kind) = chosen else {
        return Err(StatError::SeveralFits {
            file: file.to_string(),
            keys: kinds.iter().map(|k| k.read_by().model.key).collect(),
        });
    };
    let read_by = kind.read_by();
    let same: Vec<&str> = kind
        .tables
        .iter()
        .map(|f| f.model.key)
        .filter(|k| *k != read_by.model.key)
        .collect();
    let also = match same.as_slice() {
        [] => String::new(),
        [one] => format!(" ({one} gives the same tree)"),
        more => format!(" ({} give the same tree)", more.join(", ")),
    };
    writeln!(
        notes,
        "tma: note: no --cpu: {file} holds the events of the {} tables{also}, which read it; \
         {this} (--cpu NAME picks another)",
        read_by.model.key
    )?;
    Ok(Some(read_by.model))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf stat -x, rows of `specs`, each counted a different number of times.
    fn csv(specs: &[&str]) -> Vec<u8> {
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{},,{s},1000,100.00,,\n", (i + 1) * 1000))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn the_events_of_a_tree_fit_its_table() {
        let zen4 = tma_catalog::by_name("zen4").unwrap();
        let specs: Vec<String> =
            tma_metrics::required_events(zen4, &tma_metrics::Selection::level(2))
                .unwrap()
                .iter()
                .map(|id| zen4.perf_event_spec(id).unwrap())
                .collect();
        let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let bytes = csv(&specs);
        let rec = recorded(&bytes).unwrap();
        assert_eq!(rec.specs.len(), specs.len());
        assert!(!rec.printed);
        let fits: Vec<Fit> = candidates(&bytes)
            .into_iter()
            .map(|m| fit(m, &rec, 2))
            .collect();
        let best = best_fits(&fits);
        let z4 = best
            .iter()
            .find(|f| f.model.key == "zen4")
            .expect("zen4 fits");
        assert_eq!((z4.held, z4.known), (specs.len(), specs.len()));
        assert!((z4.coverage - 1.0).abs() < 1e-9);
        assert!(
            best.iter().all(|f| f.model.vendor == zen4.vendor),
            "{best:?}"
        );
    }

    #[test]
    fn a_hybrid_parts_events_are_read_by_its_tables_only() {
        let keys: Vec<&str> = candidates(b"1,,cpu_core/TOPDOWN.SLOTS/,1,100.00,,\n")
            .iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(keys, ["adl", "mtl"]);
        assert_eq!(
            candidates(b"1,,cycles,1,100.00,,\n").len(),
            tma_catalog::models().len()
        );
    }

    #[test]
    fn a_recording_that_names_its_cpu_or_cannot_be_read_is_left_alone() {
        assert!(recorded(b"# cpu: spr\n1,,cycles,1,100.00,,\n").is_none());
        assert!(recorded(b"not a recording at all\n").is_none());
        assert!(recorded(b"").is_none());
    }

    #[test]
    fn events_no_table_knows_fit_none() {
        let bytes = csv(&["no.such.event", "nor.this.one"]);
        let rec = recorded(&bytes).unwrap();
        let fits: Vec<Fit> = candidates(&bytes)
            .into_iter()
            .map(|m| fit(m, &rec, 1))
            .collect();
        assert!(best_fits(&fits).is_empty());
    }

    #[test]
    fn with_cpu_or_a_cpu_line_nothing_is_chosen() {
        let host = tma_host::Host::new("/nonexistent/sys", "/nonexistent");
        let cfg = StatConfig {
            cpu: Some("zen4".into()),
            host: host.clone(),
            ..StatConfig::default()
        };
        let bytes = csv(&["TOPDOWN.SLOTS", "topdown-retiring"]);
        assert!(cpu_of_recording(&cfg, &bytes, "f", &mut Vec::new())
            .unwrap()
            .is_none());
        let cfg = StatConfig {
            host,
            ..StatConfig::default()
        };
        let named = [&b"# cpu: zen4\n"[..], &bytes].concat();
        assert!(cpu_of_recording(&cfg, &named, "f", &mut Vec::new())
            .unwrap()
            .is_none());
    }
}
