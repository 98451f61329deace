//! `tma stat --import FILE` of `perf stat -x,` CSV or `perf stat -j` JSON: read, resolve,
//! evaluate and write one interval at a time, so memory stays flat however long the
//! recording (a day of 100 ms intervals is 864,000 of them).

use std::io::{BufRead, Write};

use tma_perf::import::{self, Breakdown, IntervalReader, Resolver};
use tma_perf::snapshot::Topology;

use crate::eval::{Request, RunInfo, TreeEval};
use crate::render::tree::TreeWriter;
use crate::{Outcome, StatConfig, StatError};

/// Import a perf stat recording from `input` (named `file` in messages).
pub(crate) fn run_perf_stat(
    cfg: &StatConfig,
    input: impl BufRead,
    file: &str,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<Outcome, StatError> {
    let import_err = |source| StatError::Import {
        file: file.to_string(),
        source,
    };
    let resolve_err = |source| StatError::Resolve {
        file: file.to_string(),
        source,
    };
    let mut reader = IntervalReader::new(input).map_err(import_err)?;
    let (model, source) =
        crate::model::select_model(cfg.cpu.as_deref(), reader.cpu_hint(), &cfg.host)?;
    let what = match reader.breakdown() {
        Breakdown::Aggregated => "",
        Breakdown::PerCpu => ", per-CPU rows summed",
        Breakdown::PerThread => ", per-thread rows summed",
    };
    if cfg.smt.is_none() && model.nodes.iter().any(|n| n.formula.contains("#smt_on")) {
        writeln!(
            notes,
            "tma: note: assuming SMT was off where {file} was recorded; pass --smt on if it was \
             (some {} formulas differ)",
            model.key
        )?;
    }
    let mut info = RunInfo {
        model,
        cpu_source: source.describe().to_string(),
        source: format!("imported from {file} ({}{what})", reader.format()),
        interval_mode: reader.interval_mode(),
        request: Request {
            level: cfg.level,
            nodes: cfg.nodes.clone(),
            topology: cfg.smt.map(|smt| Topology {
                smt,
                ..Default::default()
            }),
        },
        command: None,
        event_map: Vec::new(),
    };
    let eval = TreeEval::new(&info)?;
    let mut resolver = Resolver::new(
        model.key,
        |spec: &str| model.resolve_perf_event_all(spec).unwrap_or_default(),
        |unknown: &[String]| crate::model::guess_other_cpu(unknown, model),
    );
    let aggregated = reader.breakdown() == Breakdown::Aggregated;
    let mut writer = TreeWriter::new(cfg.render.clone());
    let mut bottleneck = None;
    while let Some(iv) = reader.next_interval().map_err(import_err)? {
        let iv = resolver.resolve(iv).map_err(resolve_err)?;
        let iv = if aggregated {
            iv
        } else {
            import::aggregate(&iv)
        };
        if writer.count() == 0 {
            // The header names how each event spec was read: known from the first interval,
            // where perf lists every event it counted.
            eval.check_present(std::iter::once(&iv))?;
            info.event_map = resolver.mapping();
            writer.begin(out, &info)?;
        }
        let ir = eval.eval(&iv);
        writer.interval(out, &info, &ir)?;
        bottleneck = Some(ir.report.bottleneck);
    }
    if writer.count() == 0 {
        writer.begin(out, &info)?;
    }
    writer.end(out, &info)?;
    Ok(Outcome {
        ending: None,
        bottleneck,
    })
}
