//! Terminal, JSON and CSV rendering of `tma stat`, `tma list` and `tma events` results.
//! Renderers write into `&mut dyn Write`, so tests render into a `Vec<u8>` and compare with
//! golden files.

pub mod tree;

use std::io::Write;
use std::path::Path;

use tma_report::ReportError;

/// Render to `-o FILE` (atomically: nothing is left behind when rendering fails) or to
/// standard output.
pub fn emit<F>(output: Option<&Path>, render: F) -> anyhow::Result<()>
where
    F: FnOnce(&mut dyn Write) -> Result<(), ReportError>,
{
    let r = match output {
        Some(p) => tma_report::write_atomic(p, render),
        None => {
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::new(stdout.lock());
            render(&mut lock).and_then(|()| lock.flush().map_err(ReportError::Io))
        }
    };
    // Keep a plain io::Error at the top of the chain, so main sees a closed pipe
    // (`tma stat ... | head`) and exits quietly.
    r.map_err(|e| match e {
        ReportError::Io(io) => anyhow::Error::from(io),
        other => anyhow::Error::from(other),
    })
}
