//! Where output goes: `-o FILE` (atomically: nothing is left behind when the command
//! fails) or standard output. The libraries render; this only picks the writer.

use std::io::Write;
use std::path::Path;

use tma_report::ReportError;

/// Run `render` with the output writer and return what it returns. With `path`, the output
/// goes to a temporary file that replaces `path` only when `render` succeeds.
pub fn emit<T, E>(
    path: Option<&Path>,
    render: impl FnOnce(&mut dyn Write) -> Result<T, E>,
) -> anyhow::Result<T>
where
    E: Into<anyhow::Error>,
{
    match path {
        Some(p) => {
            let mut result: Option<Result<T, E>> = None;
            let written = tma_report::write_atomic(p, |w| {
                let r = render(w);
                let failed = r.is_err();
                result = Some(r);
                if failed {
                    // Abandon the temporary file; the caller sees the real error below.
                    return Err(ReportError::Io(std::io::Error::other("render failed")));
                }
                Ok(())
            });
            match result {
                Some(Err(e)) => Err(e.into()),
                Some(Ok(v)) => {
                    written.map_err(io_first)?;
                    Ok(v)
                }
                None => Err(io_first(written.err().unwrap_or_else(|| {
                    ReportError::Io(std::io::Error::other("output was not written"))
                }))),
            }
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::new(stdout.lock());
            let v = render(&mut lock).map_err(Into::into)?;
            lock.flush()?;
            Ok(v)
        }
    }
}

/// Keep a plain io::Error at the top of the chain, so main sees a closed pipe and exits
/// quietly.
fn io_first(e: ReportError) -> anyhow::Error {
    match e {
        ReportError::Io(io) => anyhow::Error::from(io),
        other => anyhow::Error::from(other),
    }
}
