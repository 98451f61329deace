//! Output and input paths as the user named them, in every command (issue "Output files"):
//! no command replaces a device, a FIFO or a symbolic link; `-` is standard output and
//! standard input; output paths are checked before a program runs; a recording cut off at
//! its end is read up to its last complete interval in every command.

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tma_testkit::{fixture, fixture_str, repo_root, stderr, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// `tma` with `args`, which may name a `--root` of their own.
fn tma_with(args: &[String]) -> Command {
    if args.iter().any(|a| a == "--root") {
        let mut c = TMA.bare();
        c.current_dir(repo_root()).args(args);
        c
    } else {
        let mut c = TMA.command();
        c.args(args);
        c
    }
}

const ZEN4: &str = "import/zen4-sha256-synthetic.csv";
const PHASES: &str = "report/zen4-phases-synthetic.csv";

/// One command line per command that takes `-o`, with `OUT` where the output path goes.
fn commands() -> Vec<(&'static str, Vec<String>)> {
    let f = |s: &str| s.to_string();
    let zen4 = fixture_str(ZEN4);
    vec![
        (
            "stat -o",
            vec![f("stat"), f("--example"), f("-o"), f("OUT")],
        ),
        (
            "stat --record",
            vec![
                f("stat"),
                f("--synthetic-backend"),
                fixture_str("live/synthetic-zen4-sha256.json"),
                f("--cpu"),
                f("zen4"),
                f("-o"),
                f("/dev/null"),
                f("--record"),
                f("OUT"),
                f("--"),
                f("true"),
            ],
        ),
        (
            "stat --plot",
            vec![
                f("stat"),
                f("--example"),
                f("-o"),
                f("/dev/null"),
                f("--plot"),
                f("OUT"),
            ],
        ),
        (
            "list -o",
            vec![f("list"), f("--cpu"), f("zen4"), f("-o"), f("OUT")],
        ),
        (
            "events -o",
            vec![f("events"), f("--cpu"), f("zen4"), f("-o"), f("OUT")],
        ),
        (
            "diff -o",
            vec![
                f("diff"),
                zen4.clone(),
                zen4.clone(),
                f("--cpu"),
                f("zen4"),
                f("-o"),
                f("OUT"),
            ],
        ),
        (
            "report -o",
            vec![
                f("report"),
                zen4.clone(),
                f("--cpu"),
                f("zen4"),
                f("-o"),
                f("OUT"),
            ],
        ),
        (
            "report --svg",
            vec![
                f("report"),
                zen4,
                f("--cpu"),
                f("zen4"),
                f("--svg"),
                f("OUT"),
            ],
        ),
        (
            "locate -o",
            vec![
                f("locate"),
                f("--import"),
                fixture_str("locate/chase.perf.data"),
                f("--symdir"),
                fixture_str("locate"),
                f("-o"),
                f("OUT"),
            ],
        ),
        (
            "locate --pprof",
            vec![
                f("locate"),
                f("--import"),
                fixture_str("locate/chase.perf.data"),
                f("--symdir"),
                fixture_str("locate"),
                f("-o"),
                f("/dev/null"),
                f("--pprof"),
                f("OUT"),
            ],
        ),
        (
            "doctor -o",
            vec![
                f("doctor"),
                f("--root"),
                fixture_str("doctor/this-vm"),
                f("-o"),
                f("OUT"),
            ],
        ),
    ]
}

/// Whether a command did its job: `tma doctor` exits 1 when it reports a problem (the
/// fixture's VM has several), having written its report all the same.
fn done(name: &str, o: &Output) -> bool {
    o.status.success() || (name.starts_with("doctor") && o.status.code() == Some(1))
}

fn run_with(args: &[String], out: &Path) -> Output {
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if a == "OUT" {
                out.display().to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    tma_with(&args).output().expect("run tma")
}

fn sh(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_symlink_is_followed_in_every_command() {
    for (name, args) in commands() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        let link = dir.path().join("link");
        std::fs::write(&target, "old").unwrap();
        std::os::unix::fs::symlink("target.txt", &link).unwrap();
        let o = run_with(&args, &link);
        assert!(done(name, &o), "{name}: {}", stderr(&o));
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{name}: the link was replaced"
        );
        let got = std::fs::read(&target).unwrap();
        assert!(got.len() > 3 && got != b"old", "{name}: target unchanged");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 2, "{name}: files left behind");
    }
}

#[test]
fn a_character_device_is_written_not_replaced_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let null = dir.path().join("null");
    if !sh("mknod", &[null.to_str().unwrap(), "c", "1", "3"]) {
        println!("skipped: mknod of a character device failed here (needs root)");
        return;
    }
    for (name, args) in commands() {
        let o = run_with(&args, &null);
        assert!(done(name, &o), "{name}: {}", stderr(&o));
        let ft = std::fs::symlink_metadata(&null).unwrap().file_type();
        assert!(ft.is_char_device(), "{name}: the device node was replaced");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "{name}");
    }
}

#[test]
fn a_fifo_with_a_reader_gets_the_output_in_every_command() {
    for (name, args) in commands() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(sh("mkfifo", &[fifo.to_str().unwrap()]), "mkfifo");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        let o = run_with(&args, &fifo);
        assert!(done(name, &o), "{name}: {}", stderr(&o));
        let got = reader.join().unwrap();
        assert!(!got.is_empty(), "{name}: nothing came through the FIFO");
        let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(ft.is_fifo(), "{name}: the FIFO was replaced");
    }
}

#[test]
fn a_directory_is_a_one_line_error_in_every_command() {
    for (name, args) in commands() {
        let dir = tempfile::tempdir().unwrap();
        let o = run_with(&args, dir.path());
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("is a directory"), "{name}: {e}");
        assert_eq!(
            e.lines().filter(|l| l.contains("error")).count(),
            1,
            "{name}: {e}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{name}");
    }
}

#[test]
fn dash_is_standard_output_in_every_command() {
    for (name, args) in commands() {
        let dir = tempfile::tempdir().unwrap();
        let args: Vec<String> = args
            .into_iter()
            // The main output goes elsewhere when a side output takes standard output.
            .map(|a| {
                if a == "/dev/null" {
                    dir.path().join("main").display().to_string()
                } else {
                    a
                }
            })
            .collect();
        let args: Vec<String> = args
            .into_iter()
            .map(|a| if a == "OUT" { "-".to_string() } else { a })
            .collect();
        let o = tma_with(&args).current_dir(dir.path()).output().unwrap();
        assert!(done(name, &o), "{name}: {}", stderr(&o));
        assert!(!o.stdout.is_empty(), "{name}: nothing on standard output");
        assert!(
            !dir.path().join("-").exists(),
            "{name}: made a file named -"
        );
    }
}

#[test]
fn two_outputs_on_standard_output_are_refused() {
    let o = TMA
        .command()
        .args(["stat", "--example", "--record", "-"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("standard output"), "{}", stderr(&o));
}

#[test]
fn output_paths_are_checked_before_the_program_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    for flag in ["-o", "--record", "--plot"] {
        let bad = dir.path().join("nodir/x.json");
        let o = TMA
            .command()
            .args(["stat", flag])
            .arg(&bad)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("nodir") && e.contains("does not exist"),
            "{flag}: {e}"
        );
        assert!(
            !e.contains(".tma-out"),
            "{flag}: shows the temporary file: {e}"
        );
        assert!(!marker.exists(), "{flag}: the program ran before the check");
    }
    let o = TMA
        .command()
        .args(["locate", "-o"])
        .arg(dir.path().join("nodir/x.txt"))
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!marker.exists(), "locate ran the program before the check");
}

#[test]
fn man_writes_into_a_directory_and_dash_prints() {
    let dir = tempfile::tempdir().unwrap();
    let o = TMA
        .command()
        .args(["man", "stat", "-o"])
        .arg(dir.path().join("pages"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("pages/tma-stat.1").is_file());
    let o = TMA
        .command()
        .args(["man", "stat", "-o", "-"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains(".TH"));
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let o = TMA
        .command()
        .args(["man", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a directory"), "{}", stderr(&o));
}

fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = TMA
        .command()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    o
}

#[test]
fn dash_is_standard_input_in_every_command_that_reads_a_recording() {
    let csv = std::fs::read(fixture_str(ZEN4)).unwrap();
    let file_out = TMA
        .command()
        .args([
            "stat",
            "--import",
            &fixture_str(ZEN4),
            "--cpu",
            "zen4",
            "--json",
        ])
        .output()
        .unwrap();
    let o = with_stdin(&["stat", "--import", "-", "--cpu", "zen4", "--json"], &csv);
    assert!(o.status.success(), "{}", stderr(&o));
    let strip = |b: &[u8]| -> String {
        String::from_utf8_lossy(b)
            .lines()
            .filter(|l| !l.contains("imported from") && !l.contains("\"source\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&o.stdout), strip(&file_out.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("standard input"));

    let o = with_stdin(&["diff", &fixture_str(ZEN4), "-", "--cpu", "zen4"], &csv);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("after standard input"));

    let o = with_stdin(&["report", "-", "--cpu", "zen4"], &csv);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("<html"));

    let data = std::fs::read(fixture_str("locate/chase.perf.data")).unwrap();
    let o = with_stdin(
        &[
            "locate",
            "--import",
            "-",
            "--symdir",
            &fixture_str("locate"),
            "--json",
        ],
        &data,
    );
    assert!(o.status.success(), "{}", stderr(&o));

    let o = with_stdin(&["diff", "-", "-", "--cpu", "zen4"], &csv);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("only once"), "{}", stderr(&o));
}

/// The phases recording with its last line cut in the middle.
fn cut_recording(dir: &Path) -> PathBuf {
    let full = std::fs::read(fixture_str(PHASES)).unwrap();
    let p = dir.join("cut.csv");
    std::fs::write(&p, &full[..full.len() - 15]).unwrap();
    p
}

#[test]
fn a_recording_cut_off_at_the_end_is_read_alike_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let cut = cut_recording(dir.path());
    let cut = cut.to_str().unwrap();
    let full = fixture_str(PHASES);
    for args in [
        vec!["stat", "--import", cut, "--cpu", "zen4", "--compact"],
        vec!["report", cut, "--cpu", "zen4", "-o", "/dev/null"],
        vec!["diff", cut, &full, "--cpu", "zen4"],
    ] {
        let o = TMA.command().args(&args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let notes: Vec<String> = stderr(&o)
            .lines()
            .filter(|l| l.contains("cut off"))
            .map(String::from)
            .collect();
        assert_eq!(notes.len(), 1, "{args:?}: {}", stderr(&o));
        assert!(notes[0].contains("line 723"), "{}", notes[0]);
        assert!(notes[0].contains("dropped"), "{}", notes[0]);
    }
    // 59 of the 60 intervals are used.
    let o = TMA
        .command()
        .args(["stat", "--import", cut, "--cpu", "zen4", "--compact"])
        .output()
        .unwrap();
    let last = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert!(last.trim_start().starts_with("5.900"), "{last}");
    let o = TMA
        .command()
        .args(["diff", cut, &full, "--cpu", "zen4"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("(59 intervals)"));
    // --strict: the same intervals, then an error.
    let o = TMA
        .command()
        .args([
            "stat",
            "--import",
            cut,
            "--cpu",
            "zen4",
            "--compact",
            "--strict",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--strict"), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .map(str::trim_start)
            .map(|l| l.starts_with("5.900")),
        Some(true)
    );
}

#[test]
fn a_full_disk_keeps_what_was_measured_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    let rescue = dir.path().join("rescue");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::create_dir_all(&rescue).unwrap();
    // A 4 KiB tmpfs in a private mount namespace: needs root (CAP_SYS_ADMIN).
    let script = format!(
        "mount -t tmpfs -o size=4k tmpfs {small} || exit 77; \
         {tma} --root {root} stat --example --json -o {small}/out.json",
        small = small.display(),
        tma = TMA.bin(),
        root = fixture("roots/none").display(),
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env("TMPDIR", &rescue)
        .output();
    let o = match o {
        Ok(o) if o.status.code() != Some(77) && !stderr(&o).contains("unshare failed") => o,
        _ => {
            println!("skipped: cannot mount a small tmpfs here (needs root and unshare)");
            return;
        }
    };
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("No space left on device"), "{e}");
    let saved: Vec<PathBuf> = std::fs::read_dir(&rescue)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1, "{e}");
    assert!(e.contains(&saved[0].display().to_string()), "{e}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&saved[0]).unwrap()).expect("the whole document");
    assert_eq!(doc["schema"], "tma.stat");
    assert!(!e.contains(".tma-out"), "{e}");
}
