//! Paths the user named: where output goes (`-o`, `--record`, `--plot`, ...) and where input
//! comes from (`--import`, `tma diff A B`, ...). `-` is standard output or standard input.
//!
//! An output path is looked at before it is written ([`OutputFile::check`], which commands call
//! before the measured program starts), and written through what it names:
//! * a path that does not exist, or a regular file: a temporary file in the same directory that
//!   replaces it only when rendering succeeded, so a failed run leaves nothing half-written;
//! * a symbolic link: followed; the file it points to is replaced and the link stays;
//! * a character device, a FIFO or a socket: opened and written directly, as `perf -o` does;
//!   a descriptor link (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`) likewise, appending
//!   when it is a regular file so that `>>` keeps what was there;
//! * a directory or a block device: refused with one line that says what to do.
//!
//! If writing a regular file still fails at the end (a full disk), what was rendered is saved
//! beside the target or in the temporary directory, and the error names where.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::OutputError;

/// Whether `path` is the `-` that stands for standard input or output.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How a path is shown in messages: `standard input` / `standard output` for `-`.
pub fn display_input(path: &Path) -> String {
    if is_stdio(path) {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// Standard input, once read whole: a command that looks at an input's start to recognise it
/// and then reads it gets the same bytes twice.
static STDIN: std::sync::Mutex<Option<std::sync::Arc<[u8]>>> = std::sync::Mutex::new(None);

fn stdin_bytes() -> io::Result<std::sync::Arc<[u8]>> {
    let mut kept = STDIN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = kept.as_ref() {
        return Ok(b.clone());
    }
    let mut v = Vec::new();
    io::stdin().lock().read_to_end(&mut v)?;
    let b: std::sync::Arc<[u8]> = v.into();
    *kept = Some(b.clone());
    Ok(b)
}

/// Read an input path whole; `-` reads standard input to its end (once: later reads get the
/// same bytes).
pub fn read_input(path: &Path) -> io::Result<Vec<u8>> {
    if is_stdio(path) {
        Ok(stdin_bytes()?.to_vec())
    } else {
        fs::read(path)
    }
}

/// The first `limit` bytes of an input, enough to tell what it holds
/// ([`crate::recognize()`]) without reading a long recording whole; `-` (standard input) is
/// read whole and kept, as [`read_input`] does, so later reads get the same bytes.
pub fn read_input_head(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    if is_stdio(path) {
        return read_input(path);
    }
    let mut head = Vec::new();
    File::open(path)?.take(limit).read_to_end(&mut head)?;
    Ok(head)
}

/// [`read_input`] as text; bytes that are not UTF-8 are an `InvalidData` error.
pub fn read_input_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read_input(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Open an input path for streaming; `-` is standard input, streamed as it comes unless it was
/// already read whole.
pub fn open_input(path: &Path) -> io::Result<Box<dyn Read + Send>> {
    if is_stdio(path) {
        let kept = STDIN.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match kept {
            Some(b) => Ok(Box::new(io::Cursor::new(b))),
            None => Ok(Box::new(io::stdin())),
        }
    } else {
        Ok(Box::new(File::open(path)?))
    }
}

/// Refuse a command line that names standard input for two inputs: it can be read once.
pub fn check_one_stdin<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Result<(), OutputError> {
    if paths.into_iter().filter(|p| is_stdio(p)).count() > 1 {
        return Err(OutputError::Usage(
            "`-` (standard input) is named for more than one input; it can be read only once: \
             save all but one of them to files"
                .into(),
        ));
    }
    Ok(())
}

/// An output path, looked at and found writable; [`OutputFile::write`] writes it.
#[derive(Debug, Clone)]
pub struct OutputFile {
    named: PathBuf,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// `-`.
    Stdout,
    /// A new path or a regular file in a writable directory: temporary file, then rename over
    /// `real` (the end of any symbolic links).
    Replace { real: PathBuf },
    /// A regular file whose directory is not writable but which is: rendered whole first, then
    /// written over the file in place.
    Rewrite { real: PathBuf },
    /// A character device, a FIFO or a descriptor link: written as it is opened.
    Direct { real: PathBuf, append: bool },
    /// A Unix socket: connected to and written.
    Socket { real: PathBuf },
}

/// What an [`OutputFile`] turned out to be (for tests and messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Stdout,
    /// Replaced atomically.
    File,
    /// Written directly (a device, a FIFO, a socket, a descriptor).
    Direct,
}

impl OutputFile {
    /// Look at `path` and say whether it can be written, before anything is measured.
    pub fn check(path: &Path) -> Result<OutputFile, OutputError> {
        let kind = resolve(path).map_err(|problem| OutputError::OutputPath {
            path: path.display().to_string(),
            problem,
        })?;
        Ok(OutputFile {
            named: path.to_path_buf(),
            kind,
        })
    }

    /// The path as the user named it.
    pub fn path(&self) -> &Path {
        &self.named
    }

    pub fn kind(&self) -> OutputKind {
        match self.kind {
            Kind::Stdout => OutputKind::Stdout,
            Kind::Replace { .. } | Kind::Rewrite { .. } => OutputKind::File,
            Kind::Direct { .. } | Kind::Socket { .. } => OutputKind::Direct,
        }
    }

    /// Whether this output is standard output.
    pub fn is_stdout(&self) -> bool {
        self.kind == Kind::Stdout
    }

    /// The file this output ends up in, when it is one (links followed); two outputs of one
    /// command must not name the same one.
    pub fn identity(&self) -> Option<PathBuf> {
        match &self.kind {
            Kind::Replace { real } | Kind::Rewrite { real } => {
                let dir = real.parent().filter(|d| !d.as_os_str().is_empty());
                let dir = fs::canonicalize(dir.unwrap_or(Path::new("."))).ok()?;
                Some(dir.join(real.file_name()?))
            }
            _ => None,
        }
    }

    /// Write the output: `render` writes into the target as [`OutputFile`] describes.
    pub fn write<F>(&self, render: F) -> Result<(), OutputError>
    where
        F: FnOnce(&mut dyn Write) -> Result<(), OutputError>,
    {
        let err = |source: io::Error| OutputError::Output {
            path: self.named.display().to_string(),
            source: without_path(source),
        };
        match &self.kind {
            Kind::Stdout => {
                let stdout = io::stdout();
                let mut w = io::BufWriter::new(stdout.lock());
                render(&mut w)?;
                w.flush()?;
                Ok(())
            }
            Kind::Direct { real, append } => {
                let f = OpenOptions::new()
                    .write(true)
                    .append(*append)
                    .open(real)
                    .map_err(err)?;
                let mut w = io::BufWriter::new(f);
                render(&mut w)?;
                w.flush().map_err(err)
            }
            Kind::Socket { real } => {
                let s = std::os::unix::net::UnixStream::connect(real).map_err(err)?;
                let mut w = io::BufWriter::new(s);
                render(&mut w)?;
                w.flush().map_err(err)
            }
            Kind::Rewrite { real } => {
                let mut bytes = Vec::new();
                render(&mut bytes)?;
                let written = OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(real)
                    .and_then(|mut f| f.write_all(&bytes).and_then(|_| f.sync_all()));
                match written {
                    Ok(()) => Ok(()),
                    Err(e) => Err(self.rescued(real, &bytes, e)),
                }
            }
            Kind::Replace { real } => self.replace(real, render),
        }
    }

    fn replace<F>(&self, real: &Path, render: F) -> Result<(), OutputError>
    where
        F: FnOnce(&mut dyn Write) -> Result<(), OutputError>,
    {
        let err = |source: io::Error| OutputError::Output {
            path: self.named.display().to_string(),
            source: without_path(source),
        };
        let dir = parent_dir(real);
        let tmp = tempfile::Builder::new()
            .prefix(".tma-out-")
            .tempfile_in(dir)
            .map_err(err)?;
        let mut spill = Spill::new(tmp.as_file());
        let rendered = {
            let mut buf = io::BufWriter::new(&mut spill);
            render(&mut buf).and_then(|()| buf.flush().map_err(OutputError::Io))
        };
        if let Some(e) = spill.error.take() {
            // The file failed (a full disk): keep what was rendered somewhere else.
            let tail = std::mem::take(&mut spill.tail);
            let written = spill.written;
            let mut all = Vec::new();
            let mut f = tmp.as_file();
            let read_back = f
                .seek(io::SeekFrom::Start(0))
                .and_then(|_| f.take(written).read_to_end(&mut all));
            if read_back.is_err() {
                all.clear();
            }
            all.extend_from_slice(&tail);
            drop(tmp);
            if rendered.is_err() && all.is_empty() {
                return Err(err(e));
            }
            return Err(self.rescued(real, &all, e));
        }
        rendered?;
        // The temporary file is created 0600; give the result the mode a plain create would
        // (0666 less the umask), or the mode of the file it replaces.
        let mode = match fs::metadata(real) {
            Ok(m) => m.permissions().mode() & 0o7777,
            Err(_) => 0o666 & !current_umask(),
        };
        let finish = fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode))
            .and_then(|()| tmp.as_file().sync_all());
        if let Err(e) = finish {
            return Err(err(e));
        }
        match tmp.persist(real) {
            Ok(_) => Ok(()),
            Err(e) => {
                let mut all = Vec::new();
                let mut f = e.file.as_file();
                let _ = f
                    .seek(io::SeekFrom::Start(0))
                    .and_then(|_| f.read_to_end(&mut all));
                Err(self.rescued(real, &all, e.error))
            }
        }
    }

    /// The file could not be written at the end: save `bytes` beside it, else in the
    /// temporary directory, else on standard output, and say where.
    fn rescued(&self, real: &Path, bytes: &[u8], source: io::Error) -> OutputError {
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "output".into());
        let pid = std::process::id();
        let beside = parent_dir(real).join(format!("{name}.tma-saved-{pid}"));
        let in_tmp = std::env::temp_dir().join(format!("{name}.tma-saved-{pid}"));
        let kept = [beside, in_tmp].into_iter().find_map(|p| {
            let ok = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&p)
                .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()));
            match ok {
                Ok(()) => Some(p.display().to_string()),
                Err(_) => {
                    let _ = fs::remove_file(&p);
                    None
                }
            }
        });
        let kept = kept.unwrap_or_else(|| {
            let mut out = io::stdout().lock();
            match out.write_all(bytes).and_then(|_| out.flush()) {
                Ok(()) => "standard output (printed above)".to_string(),
                Err(_) => "nowhere: standard output failed too".to_string(),
            }
        });
        OutputError::Rescued {
            path: self.named.display().to_string(),
            source: without_path(source),
            kept,
        }
    }
}

/// Write `path` as the user named it (see [`OutputFile`]): looked at, then written.
pub fn write_output<F>(path: &Path, render: F) -> Result<(), OutputError>
where
    F: FnOnce(&mut dyn Write) -> Result<(), OutputError>,
{
    OutputFile::check(path)?.write(render)
}

/// Look at every output path of one command before it runs: each must be writable, and no
/// two may end in the same file (or both on standard output). Each path comes with the option
/// that named it, for the message.
pub fn check_outputs<'a>(
    paths: impl IntoIterator<Item = (&'a str, &'a Path)>,
) -> Result<Vec<OutputFile>, OutputError> {
    // (option, output, the file it ends in): each resolved once.
    let mut checked: Vec<(&str, OutputFile, Option<PathBuf>)> = Vec::new();
    for (flag, p) in paths {
        let o = OutputFile::check(p)?;
        let id = o.identity();
        let clash = checked
            .iter()
            .find(|(_, c, cid)| (c.is_stdout() && o.is_stdout()) || (cid.is_some() && *cid == id));
        if let Some((other, c, _)) = clash {
            return Err(OutputError::Usage(if o.is_stdout() {
                format!(
                    "{other} and {flag} would both write to standard output; \
                     send one of them to a file"
                )
            } else {
                format!(
                    "{other} {} and {flag} {} name the same file; give each its own",
                    c.path().display(),
                    p.display()
                )
            }));
        }
        checked.push((flag, o, id));
    }
    Ok(checked.into_iter().map(|(_, o, _)| o).collect())
}

/// Look at an output directory (`tma man -o DIR`): it exists as a directory, or can be made
/// under a directory that exists and is writable.
pub fn check_output_dir(dir: &Path) -> Result<(), OutputError> {
    let problem = |problem: String| OutputError::OutputPath {
        path: dir.display().to_string(),
        problem,
    };
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => writable_dir(dir).map_err(problem),
        Ok(_) => Err(problem(
            "exists and is not a directory: name a directory (created if missing)".into(),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Created with its missing parents; the nearest existing one must be writable.
            let mut up = dir.to_path_buf();
            while !up.exists() {
                match up.parent() {
                    Some(p) if !p.as_os_str().is_empty() => up = p.to_path_buf(),
                    _ => {
                        up = PathBuf::from(".");
                        break;
                    }
                }
            }
            if !up.is_dir() {
                return Err(problem(format!(
                    "{} is not a directory: name a path under a directory",
                    up.display()
                )));
            }
            writable_dir(&up).map_err(problem)
        }
        Err(e) => Err(problem(without_path(e).to_string())),
    }
}

/// What a path names, following symbolic links one at a time, or why it cannot be written.
fn resolve(named: &Path) -> Result<Kind, String> {
    if is_stdio(named) {
        return Ok(Kind::Stdout);
    }
    let mut p = named.to_path_buf();
    for _ in 0..40 {
        if is_descriptor_link(&p) {
            return descriptor(&p);
        }
        match fs::symlink_metadata(&p) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return new_file(p),
            Err(e) => return Err(without_path(e).to_string()),
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p).map_err(|e| without_path(e).to_string())?;
                p = if target.is_absolute() {
                    target
                } else {
                    parent_dir(&p).join(target)
                };
            }
            Ok(m) => return existing(p, m.file_type()),
        }
    }
    Err("too many levels of symbolic links".into())
}

/// `/proc/PID/fd/N` (also through `/dev/stdout`, `/dev/fd/N`, `/proc/self/...`).
fn is_descriptor_link(p: &Path) -> bool {
    let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return false;
    };
    let Ok(dir) = fs::canonicalize(dir) else {
        return false;
    };
    let parts: Vec<Component> = dir.components().collect();
    let name = |i: usize| parts.get(i).map(|c| c.as_os_str().to_os_string());
    let proc_ = Some(OsString::from("proc"));
    let fd = Some(OsString::from("fd"));
    let task = Some(OsString::from("task"));
    (parts.len() == 4 && name(1) == proc_ && name(3) == fd)
        || (parts.len() == 6 && name(1) == proc_ && name(3) == task && name(5) == fd)
}

fn descriptor(p: &Path) -> Result<Kind, String> {
    let m = fs::metadata(p).map_err(|e| without_path(e).to_string())?;
    let ft = m.file_type();
    if ft.is_dir() {
        return Err("is a directory: name a file".into());
    }
    Ok(Kind::Direct {
        real: p.to_path_buf(),
        append: ft.is_file(),
    })
}

fn existing(p: PathBuf, ft: fs::FileType) -> Result<Kind, String> {
    if ft.is_dir() {
        return Err("is a directory: name a file (inside it, for example)".into());
    }
    if ft.is_block_device() {
        return Err("is a block device: tma does not write to disks; name a file".into());
    }
    if ft.is_socket() {
        return Ok(Kind::Socket { real: p });
    }
    if ft.is_char_device() || ft.is_fifo() {
        writable(&p).map_err(|e| format!("cannot be written ({e})"))?;
        return Ok(Kind::Direct {
            real: p,
            append: false,
        });
    }
    let dir = parent_dir(&p);
    match writable_dir(dir) {
        Ok(()) => Ok(Kind::Replace { real: p }),
        Err(dir_problem) => match writable(&p) {
            Ok(()) => Ok(Kind::Rewrite { real: p }),
            Err(e) => Err(format!(
                "the file cannot be written ({e}), and {dir_problem}; \
                 name a path you can write"
            )),
        },
    }
}

fn new_file(p: PathBuf) -> Result<Kind, String> {
    let dir = parent_dir(&p);
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a directory", dir.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(format!(
                "directory {} does not exist: create it first (mkdir -p {}) or name another path",
                dir.display(),
                crate::shell_quote(&dir.display().to_string())
            ))
        }
        Err(e) => return Err(without_path(e).to_string()),
    }
    writable_dir(dir).map_err(|e| format!("{e}; name a path in a directory you can write"))?;
    Ok(Kind::Replace { real: p })
}

fn writable(p: &Path) -> io::Result<()> {
    rustix::fs::access(p, rustix::fs::Access::WRITE_OK).map_err(io::Error::from)
}

fn writable_dir(dir: &Path) -> Result<(), String> {
    rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .map_err(|e| {
        format!(
            "directory {} is not writable ({})",
            dir.display(),
            io::Error::from(e)
        )
    })
}

fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The operating system's error without any path a library wrapped into it (a temporary
/// file's name means nothing to the user).
fn without_path(e: io::Error) -> io::Error {
    if let Some(code) = e.raw_os_error() {
        return io::Error::from_raw_os_error(code);
    }
    let mut inner: Option<&(dyn std::error::Error + 'static)> =
        e.get_ref().map(|r| r as &(dyn std::error::Error + 'static));
    while let Some(cur) = inner {
        if let Some(io) = cur.downcast_ref::<io::Error>() {
            if let Some(code) = io.raw_os_error() {
                return io::Error::from_raw_os_error(code);
            }
        }
        inner = cur.source();
    }
    io::Error::from(e.kind())
}

/// The process umask, from `/proc/self/status` (Linux 4.7+); 0o022 when unreadable.
fn current_umask() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// A writer that, when its file fails, keeps the rest in memory instead, so that what was
/// rendered can be saved elsewhere: the file holds the first `written` bytes, `tail` the rest.
struct Spill<W: Write> {
    inner: W,
    written: u64,
    tail: Vec<u8>,
    error: Option<io::Error>,
}

impl<W: Write> Spill<W> {
    fn new(inner: W) -> Self {
        Spill {
            inner,
            written: 0,
            tail: Vec::new(),
            error: None,
        }
    }
}

impl<W: Write> Write for Spill<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.error.is_some() {
            self.tail.extend_from_slice(buf);
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Ok(0) if !buf.is_empty() => {
                self.error = Some(io::Error::from(io::ErrorKind::WriteZero));
                self.tail.extend_from_slice(buf);
                Ok(buf.len())
            }
            Ok(n) => {
                self.written += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                self.error = Some(e);
                self.tail.extend_from_slice(buf);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.error.is_none() {
            if let Err(e) = self.inner.flush() {
                self.error = Some(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
