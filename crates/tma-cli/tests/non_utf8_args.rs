//! Bytes that are not UTF-8 in a path or in the measured command's arguments (issue "Every
//! perf output a user pastes is read", item 7): no argument makes tma panic, every path
//! option takes them (they stay OS strings from argv to the system call), and a command
//! after `--` runs with them, as perf runs it.
//!
//! The path options are enumerated from clap's definition of the command line, through the
//! zsh completion script clap_complete writes from it: an argument parsed as a `PathBuf`
//! completes to `_files` there (clap infers the path value hint from the parser), so a new
//! path option is covered without a change here. The hidden options are added by name; the
//! unit test `every_path_and_command_argument_takes_os_strings` (src/main.rs) checks that
//! every argument named like a path is parsed as an OS string.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tma_testkit::{fixture, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// A path, or an argument, that is not UTF-8.
fn bad(name: &str) -> OsString {
    let mut b = name.as_bytes().to_vec();
    b.extend_from_slice(b"\xff.x");
    OsString::from_vec(b)
}

/// How an argument is given: an option (its long name, or short) or a positional.
#[derive(Debug, Clone, PartialEq)]
enum How {
    Flag(String),
    Positional(String),
}

/// The subcommands (with their own subcommands: `workload sha256`) and their arguments that
/// take a path (`_files` in the zsh completion) or are the command to measure.
fn path_arguments() -> Vec<(Vec<String>, How)> {
    let o = TMA.run(&["--help"]);
    let help = stdout(&o);
    let top: Vec<String> = help
        .split("Commands:")
        .nth(1)
        .expect("a Commands: section")
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // `  stat   Count events...`; a wrapped description is indented further.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect();
    let zsh = stdout(&TMA.run(&["completions", "zsh"]));
    let mut at: Vec<String> = Vec::new();
    let mut out: Vec<(Vec<String>, How)> = Vec::new();
    for line in zsh.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
            if top.iter().any(|t| t == name) {
                at = vec![name.to_string()];
            } else if !at.is_empty() && !name.contains(' ') {
                at.truncate(1);
                at.push(name.to_string());
            }
            continue;
        }
        if at.is_empty() || at.iter().any(|w| w == "help") {
            continue;
        }
        let Some(spec) = line.strip_prefix('\'') else {
            continue;
        };
        let spec = spec.trim_end_matches('\\').trim_end();
        let files = spec.ends_with(":_files'");
        // An exclusion group first: `(--example)--import=[...]`.
        let spec = match spec.strip_prefix('(') {
            Some(rest) => rest.split_once(')').map_or(rest, |(_, r)| r),
            None => spec,
        };
        let spec = spec.trim_start_matches('*');
        let how = if let Some(pos) = spec.strip_prefix(':') {
            let name = pos
                .trim_start_matches(':')
                .split(" -- ")
                .next()
                .unwrap_or("");
            // The command to measure (`CMD` in the usage line) and sha256sum's files are OS
            // strings too.
            let os = spec.ends_with(":_default'")
                && ((name == "command" && usage(&at).contains("CMD")) || name == "files");
            if !(files || os) {
                continue;
            }
            How::Positional(name.to_string())
        } else if let Some(long) = spec.strip_prefix("--") {
            if !files {
                continue;
            }
            let name: String = long
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            How::Flag(format!("--{name}"))
        } else {
            // A short option: its long form is listed beside it.
            continue;
        };
        let entry = (at.clone(), how);
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    // Hidden options (clap_complete leaves them out).
    out.push((vec!["stat".into()], How::Flag("--synthetic-backend".into())));
    out.push((vec!["list".into()], How::Flag("--root".into())));
    out
}

/// The usage line of `tma AT --help`.
fn usage(at: &[String]) -> String {
    let mut args: Vec<&str> = at.iter().map(String::as_str).collect();
    args.push("--help");
    let help = stdout(&TMA.run(&args));
    help.lines()
        .find(|l| l.starts_with("Usage:"))
        .unwrap_or_default()
        .to_string()
}

/// Fixed arguments that bring a command as far as the path: the bundled example for `stat
/// -o`, a recording for `diff` and `report`, `--cpu` where this machine may have no tables.
fn base(at: &[String], how: &How) -> Vec<OsString> {
    let zen4: OsString = fixture("import/zen4-sha256-synthetic.csv").into();
    let w = |s: &[&str]| s.iter().map(OsString::from).collect::<Vec<_>>();
    let flag = match how {
        How::Flag(f) => f.as_str(),
        How::Positional(_) => "",
    };
    let at: Vec<&str> = at.iter().map(String::as_str).collect();
    match (at.as_slice(), flag) {
        (["stat"], "--import") => w(&["--cpu", "zen4"]),
        (["stat"], "--output" | "--plot") => w(&["--example"]),
        (["stat"], "--record") => w(&["-o", "/dev/null", "--", "true"]),
        (["stat"], "--itt-lib") => w(&["--itt", "--", "true"]),
        (["stat"], "--synthetic-backend") => w(&["--cpu", "zen4", "--", "true"]),
        (["diff"], f) if !f.is_empty() => vec![zen4.clone(), zen4],
        (["report"], f) if !f.is_empty() => vec![zen4],
        (["events"], "--perf-output") => w(&["--cpu", "spr", "--perf-cmd"]),
        (["events" | "list"], _) => w(&["--cpu", "spr"]),
        (["kvm"], f) if !f.is_empty() => w(&["-a", "--duration", "1"]),
        (["doctor"], "--replay" | "--record") => w(&["--verify"]),
        (["bench"], "--compare" | "--output") => w(&["--bytes", "90", "--reps", "1"]),
        (["serve"], _) => w(&["--listen", "127.0.0.1:0"]),
        (["demo"], _) => w(&["sha256", "--quick", "--no-locate", "--no-bench"]),
        (["workload", "sha256"], _) => w(&["--size", "4K", "--iters", "1", "--no-calibrate"]),
        (["workload", "dram"], _) => w(&["--size", "1M", "--accesses", "1000", "--no-calibrate"]),
        (["workload", "matmul" | "onednn"], _) => {
            w(&["--m", "16", "--k", "16", "--n", "16", "--no-calibrate"])
        }
        (["workload", _], _) => w(&["--no-calibrate"]),
        _ => Vec::new(),
    }
}

/// How a run ended: its exit code (`None`: killed after the time limit), stdout, stderr.
struct Ran {
    code: Option<i32>,
    out: Vec<u8>,
    err: String,
}

/// Run `tma --root tests/fixtures/roots/none ARGS` (ARGS' own `--root` instead, where they
/// have one) in `dir`, stopped after `limit`.
fn run_in(dir: &Path, args: &[OsString], limit: Duration) -> Ran {
    let out_path = dir.join(".stdout");
    let err_path = dir.join(".stderr");
    let mut c = Command::new(TMA.bin());
    if !args.iter().any(|a| a == "--root") {
        c.arg("--root").arg(fixture("roots/none"));
    }
    c.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = c.spawn().expect("run tma");
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        code,
        out: std::fs::read(&out_path).unwrap(),
        err: String::from_utf8_lossy(&std::fs::read(&err_path).unwrap()).into_owned(),
    }
}

fn shown(args: &[OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn no_path_option_of_any_command_panics_on_bytes_that_are_not_utf8() {
    let found = path_arguments();
    // The enumeration itself: the options named in the issue, and some of each kind.
    for (at, how) in [
        ("stat", How::Flag("--import".into())),
        ("stat", How::Flag("--output".into())),
        ("stat", How::Flag("--cgroup".into())),
        ("stat", How::Positional("command".into())),
        ("diff", How::Positional("before".into())),
        ("report", How::Positional("inputs".into())),
        ("locate", How::Flag("--import".into())),
        ("sha256sum", How::Positional("files".into())),
        ("man", How::Flag("--output".into())),
    ] {
        assert!(
            found.iter().any(|(p, h)| p[0] == at && *h == how),
            "{at} {how:?} not found in {found:?}"
        );
    }
    assert!(
        found.len() >= 45,
        "{} path arguments: {found:?}",
        found.len()
    );
    let mut timed_out = Vec::new();
    for (at, how) in &found {
        let dir = tempfile::tempdir().unwrap();
        let mut args: Vec<OsString> = at.iter().map(OsString::from).collect();
        args.extend(base(at, how));
        match how {
            How::Flag(f) => {
                let at_end = args.iter().position(|a| a == "--");
                let opt = [OsString::from(f), bad("bad")];
                match at_end {
                    Some(i) => {
                        args.splice(i..i, opt);
                    }
                    None => args.extend(opt),
                }
            }
            How::Positional(name) if name == "command" => {
                args.extend(["--".into(), "true".into(), bad("arg")]);
            }
            How::Positional(name) if at[0] == "diff" && name == "before" => {
                args.extend([bad("before"), bad("after")]);
            }
            How::Positional(name) if at[0] == "diff" && name == "after" => continue,
            How::Positional(_) => args.push(bad("bad")),
        }
        let t0 = Instant::now();
        let r = run_in(dir.path(), &args, Duration::from_secs(60));
        let line = shown(&args);
        if t0.elapsed() > Duration::from_secs(5) {
            println!("{:.1} s: tma {line}", t0.elapsed().as_secs_f64());
        }
        assert_ne!(r.code, Some(101), "tma {line}: {}", r.err);
        assert!(!r.err.contains("panicked"), "tma {line}: {}", r.err);
        // Taken, not refused by the parser.
        assert!(
            !r.err.contains("invalid UTF-8"),
            "tma {line} refused its argument: {}",
            r.err
        );
        if r.code.is_none() {
            timed_out.push(line);
        }
    }
    if !timed_out.is_empty() {
        println!("stopped after 60 s (no panic until then): {timed_out:?}");
    }
}

#[test]
fn an_import_and_an_output_with_such_names_are_read_and_written() {
    let dir = tempfile::tempdir().unwrap();
    // The runs: `tma stat --import $'bad\xff.csv' --cpu zen4` panicked (exit 101).
    let name = OsStr::from_bytes(b"bad\xff.csv");
    let r = run_in(
        dir.path(),
        &[
            "stat".into(),
            "--import".into(),
            name.into(),
            "--cpu".into(),
            "zen4".into(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(2), "{}", r.err);
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
    assert!(r.err.contains("bad\u{FFFD}.csv"), "{}", r.err);
    // The same file, there: read.
    std::fs::copy(
        fixture("import/zen4-sha256-synthetic.csv"),
        dir.path().join(name),
    )
    .unwrap();
    let out = OsStr::from_bytes(b"out\xfe.json");
    let r = run_in(
        dir.path(),
        &[
            "stat".into(),
            "--import".into(),
            name.into(),
            "--cpu".into(),
            "zen4".into(),
            "--json".into(),
            "-o".into(),
            out.into(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(0), "{}", r.err);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(out)).unwrap()).unwrap();
    assert_eq!(doc["cpu"]["key"], "zen4");
}

#[test]
fn a_command_with_such_arguments_runs_as_perf_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let arg = OsStr::from_bytes(b"bad\xff");
    // Without a PMU (the host root has none) tma counts software events and runs the
    // command all the same: printf writes the argument's bytes.
    let r = run_in(
        dir.path(),
        &[
            "stat".into(),
            "--".into(),
            "printf".into(),
            "%s".into(),
            arg.into(),
        ],
        Duration::from_secs(60),
    );
    assert!(!r.err.contains("invalid UTF-8"), "{}", r.err);
    assert_ne!(r.code, Some(101), "{}", r.err);
    if r.code == Some(0) {
        assert!(r.out.starts_with(b"bad\xff"), "{:?}", r.out);
    } else {
        println!("skipped: no software counting here: {}", r.err);
    }
    // ls reports the name it could not find, as run by perf, with its own exit status.
    let r = run_in(
        dir.path(),
        &["stat".into(), "--".into(), "ls".into(), arg.into()],
        Duration::from_secs(60),
    );
    assert!(!r.err.contains("invalid UTF-8"), "{}", r.err);
    if r.err.contains("Software counts") || stdout_has(&r.out, "Software counts") {
        assert_eq!(r.code, Some(2), "{}", r.err);
        assert!(r.err.contains("ls: cannot access"), "{}", r.err);
    }
    // The printed perf command quotes them so that a shell gives the same bytes back.
    let r = run_in(
        dir.path(),
        &[
            "events".into(),
            "--cpu".into(),
            "spr".into(),
            "--perf-cmd".into(),
            "--perf-output".into(),
            OsStr::from_bytes(b"o\xfe.csv").into(),
            "--".into(),
            "ls".into(),
            arg.into(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(0), "{}", r.err);
    let text = String::from_utf8(r.out).unwrap();
    assert!(
        text.contains(" -o $'o\\xfe.csv' -- ls $'bad\\xff'")
            && text.contains("tma stat --import $'o\\xfe.csv' --cpu spr"),
        "{text}"
    );
}

fn stdout_has(out: &[u8], what: &str) -> bool {
    String::from_utf8_lossy(out).contains(what)
}
