use super::*;

use std::os::unix::fs::FileTypeExt;

fn text(path: &Path, body: &'static str) -> Result<(), OutputError> {
    write_output(path, |w| Ok(w.write_all(body.as_bytes())?))
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Make a device node or FIFO; None (with the reason printed) where this user may not.
fn mknod(path: &Path, ty: rustix::fs::FileType, dev: rustix::fs::Dev) -> Option<()> {
    match rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        ty,
        rustix::fs::Mode::from_raw_mode(0o666),
        dev,
    ) {
        Ok(()) => Some(()),
        Err(e) => {
            println!(
                "skipped: cannot mknod {} here ({e}); needs root",
                path.display()
            );
            None
        }
    }
}

#[test]
fn a_new_path_is_created_with_a_normal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("new.txt");
    text(&p, "x").unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "x");
    let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666 & !current_umask(), "{mode:o}");
    assert_eq!(entries(dir.path()), ["new.txt"]);
}

#[test]
fn an_existing_file_is_replaced_and_keeps_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.txt");
    fs::write(&p, "old").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(OutputFile::check(&p).unwrap().kind(), OutputKind::File);
    text(&p, "new").unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "new");
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn a_failed_render_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.txt");
    let r = write_output(&p, |w| {
        w.write_all(b"partial")?;
        Err(OutputError::Io(io::Error::other("render failed")))
    });
    assert!(r.is_err());
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    // An existing file stays as it was.
    fs::write(&p, "old").unwrap();
    let r = write_output(&p, |_| {
        Err(OutputError::Io(io::Error::other("render failed")))
    });
    assert!(r.is_err());
    assert_eq!(fs::read_to_string(&p).unwrap(), "old");
    assert_eq!(entries(dir.path()), ["out.txt"]);
}

#[test]
fn a_symlink_is_followed_and_stays() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.txt");
    let link = dir.path().join("link");
    fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink("target.txt", &link).unwrap();
    text(&link, "new").unwrap();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("target.txt"));
    assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    // A chain of links, the last one dangling: the file it names is created.
    let dangling = dir.path().join("dangling");
    let chain = dir.path().join("chain");
    std::os::unix::fs::symlink("made.txt", &dangling).unwrap();
    std::os::unix::fs::symlink(&dangling, &chain).unwrap();
    text(&chain, "made").unwrap();
    assert!(fs::symlink_metadata(&chain)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_to_string(dir.path().join("made.txt")).unwrap(),
        "made"
    );
}

#[test]
fn a_character_device_is_written_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let null = dir.path().join("null");
    let dev = rustix::fs::makedev(1, 3);
    if mknod(&null, rustix::fs::FileType::CharacterDevice, dev).is_none() {
        return;
    }
    let o = OutputFile::check(&null).unwrap();
    assert_eq!(o.kind(), OutputKind::Direct);
    o.write(|w| Ok(w.write_all(b"into the void")?)).unwrap();
    let ft = fs::symlink_metadata(&null).unwrap().file_type();
    assert!(ft.is_char_device(), "the device node was replaced: {ft:?}");
    assert_eq!(rustix::fs::stat(&null).unwrap().st_rdev, dev);
    assert_eq!(entries(dir.path()), ["null"]);
}

#[test]
fn dev_null_and_descriptor_links_are_written_directly() {
    assert_eq!(
        OutputFile::check(Path::new("/dev/null")).unwrap().kind(),
        OutputKind::Direct
    );
    write_output(Path::new("/dev/null"), |w| Ok(w.write_all(b"x")?)).unwrap();
    assert!(fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    for p in ["/dev/stdout", "/dev/stderr", "/proc/self/fd/2"] {
        if Path::new(p).exists() {
            assert_eq!(
                OutputFile::check(Path::new(p)).unwrap().kind(),
                OutputKind::Direct,
                "{p}"
            );
        }
    }
}

#[test]
fn a_descriptor_link_to_a_regular_file_appends() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("log");
    fs::write(&p, "before\n").unwrap();
    let f = OpenOptions::new().append(true).open(&p).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    let link = PathBuf::from(format!("/proc/self/fd/{fd}"));
    let o = OutputFile::check(&link).unwrap();
    assert_eq!(o.kind(), OutputKind::Direct);
    o.write(|w| Ok(w.write_all(b"after\n")?)).unwrap();
    drop(f);
    assert_eq!(fs::read_to_string(&p).unwrap(), "before\nafter\n");
    assert_eq!(entries(dir.path()), ["log"]);
}

#[test]
fn a_fifo_with_a_reader_is_written_directly() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    let o = OutputFile::check(&fifo).unwrap();
    assert_eq!(o.kind(), OutputKind::Direct);
    o.write(|w| Ok(w.write_all(b"through the pipe")?)).unwrap();
    assert_eq!(reader.join().unwrap(), "through the pipe");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(entries(dir.path()), ["fifo"]);
}

#[test]
fn a_socket_is_connected_to() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        got
    });
    text(&sock, "over the socket").unwrap();
    assert_eq!(reader.join().unwrap(), "over the socket");
    assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
}

#[test]
fn a_directory_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = text(dir.path(), "x").unwrap_err().to_string();
    assert!(e.contains("is a directory"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn a_block_device_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let blk = dir.path().join("disk");
    if mknod(
        &blk,
        rustix::fs::FileType::BlockDevice,
        rustix::fs::makedev(7, 200),
    )
    .is_none()
    {
        return;
    }
    let e = OutputFile::check(&blk).unwrap_err().to_string();
    assert!(e.contains("block device"), "{e}");
}

#[test]
fn a_missing_directory_is_found_before_the_run_and_no_temporary_name_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nodir/x.json");
    let e = OutputFile::check(&p).unwrap_err().to_string();
    assert!(e.contains("does not exist"), "{e}");
    assert!(e.contains("mkdir -p"), "{e}");
    let e = text(&p, "x").unwrap_err().to_string();
    assert!(!e.contains(".tma-out"), "{e}");
}

#[test]
fn dash_is_standard_output_and_two_outputs_may_not_clash() {
    assert!(OutputFile::check(Path::new("-")).unwrap().is_stdout());
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.txt");
    let link = dir.path().join("l");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let b = dir.path().join("b.txt");
    assert!(check_outputs([("-o", a.as_path()), ("--record", b.as_path())]).is_ok());
    let e = check_outputs([("-o", a.as_path()), ("--record", link.as_path())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("same file"), "{e}");
    let e = check_outputs([("-o", Path::new("-")), ("--record", Path::new("-"))])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("-o and --record would both write to standard output"),
        "{e}"
    );
}

#[test]
fn an_output_directory_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    assert!(check_output_dir(dir.path()).is_ok());
    assert!(check_output_dir(&dir.path().join("new/deeper")).is_ok());
    let f = dir.path().join("file");
    fs::write(&f, "").unwrap();
    let e = check_output_dir(&f).unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
    assert!(check_output_dir(&f.join("below")).is_err());
}

#[test]
fn two_stdins_are_refused() {
    assert!(check_one_stdin([Path::new("a"), Path::new("-")]).is_ok());
    let e = check_one_stdin([Path::new("-"), Path::new("-")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("only once"), "{e}");
}

/// A writer that takes `room` bytes, then fails like a full disk.
struct Full {
    got: Vec<u8>,
    room: usize,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.got.len() >= self.room {
            return Err(io::Error::from_raw_os_error(28));
        }
        let n = buf.len().min(self.room - self.got.len());
        self.got.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_file_keeps_every_byte_between_the_file_and_the_tail() {
    let mut spill = Spill::new(Full {
        got: Vec::new(),
        room: 10,
    });
    {
        let mut w = io::BufWriter::with_capacity(4, &mut spill);
        for i in 0..20u8 {
            w.write_all(&[b'a' + i]).unwrap();
        }
        w.flush().unwrap();
    }
    let e = spill.error.take().expect("the failure is recorded");
    assert_eq!(e.raw_os_error(), Some(28));
    assert_eq!(spill.written, 10);
    let mut all = spill.inner.got.clone();
    all.extend_from_slice(&spill.tail);
    assert_eq!(all, b"abcdefghijklmnopqrst");
}

#[test]
fn a_rescue_saves_beside_the_target_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("run.json");
    let o = OutputFile::check(&p).unwrap();
    let e = o.rescued(&p, b"measured", io::Error::from_raw_os_error(28));
    let msg = e.to_string();
    let saved = dir
        .path()
        .join(format!("run.json.tma-saved-{}", std::process::id()));
    assert!(msg.contains(&saved.display().to_string()), "{msg}");
    assert!(msg.contains("No space left"), "{msg}");
    assert_eq!(fs::read(&saved).unwrap(), b"measured");
}
