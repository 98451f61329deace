//! Where output goes: `-o FILE` (through [`tma_render::OutputFile`]: a file is replaced only
//! when the command succeeds, a device or FIFO is written directly, `-` is standard output) or
//! standard output. The libraries render; this only picks the writer.

use std::io::Write;
use std::path::Path;

use tma_render::OutputError;

/// Look at every output path a command was given before it runs anything: each must be
/// writable, and no two may name the same file. `main` is the `-o` of the command's main
/// output (standard output when not given); `others` are its other output options.
pub fn check<'a>(
    main: Option<&'a Path>,
    others: impl IntoIterator<Item = (&'a str, Option<&'a Path>)>,
) -> anyhow::Result<()> {
    let main = match main {
        Some(p) => ("-o", p),
        None => ("the output (no -o given)", Path::new("-")),
    };
    let others = others.into_iter().filter_map(|(f, p)| p.map(|p| (f, p)));
    tma_render::check_outputs(std::iter::once(main).chain(others))?;
    Ok(())
}

/// Run `render` with the output writer and return what it returns. With `path`, the output
/// goes where [`tma_render::write_output`] puts it.
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
            let written = tma_render::write_output(p, |w| {
                let r = render(w);
                let failed = r.is_err();
                result = Some(r);
                if failed {
                    // Abandon the output; the caller sees the real error below.
                    return Err(OutputError::Io(std::io::Error::other("render failed")));
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
                    OutputError::Io(std::io::Error::other("output was not written"))
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
fn io_first(e: OutputError) -> anyhow::Error {
    match e {
        OutputError::Io(io) => anyhow::Error::from(io),
        other => anyhow::Error::from(other),
    }
}
