//! `tma sha256sum` against coreutils `sha256sum`, byte for byte: stdout and exit codes must be
//! identical, stderr identical once the program name (`tma sha256sum` vs `sha256sum`) is
//! normalised. Skips with a printed reason when coreutils sha256sum is not installed.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use tma_testkit::Tma;

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

struct Out {
    stdout: Vec<u8>,
    stderr: String,
    code: i32,
}

fn coreutils() -> Option<&'static str> {
    ["/usr/bin/sha256sum", "/bin/sha256sum"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

fn run(prog: &[&str], args: &[&str], dir: &Path, stdin: Option<&[u8]>) -> Out {
    let mut cmd = Command::new(prog[0]);
    // coreutils names itself after argv[0]: make it `sha256sum` whatever the path.
    std::os::unix::process::CommandExt::arg0(&mut cmd, Path::new(prog[0]).file_name().unwrap());
    cmd.args(&prog[1..])
        .args(args)
        .current_dir(dir)
        .env("LC_ALL", "C.UTF-8")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(data) = stdin {
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    Out {
        stdout: o.stdout,
        stderr: String::from_utf8_lossy(&o.stderr)
            .replace("tma sha256sum:", "sha256sum:")
            .replace("Try 'tma sha256sum --help'", "Try 'sha256sum --help'"),
        code: o.status.code().unwrap_or(-1),
    }
}

/// Run both with `args` (and `stdin`) and assert identical behaviour.
fn same(core: &str, dir: &Path, args: &[&str], stdin: Option<&[u8]>) {
    let a = run(&[core], args, dir, stdin);
    let b = run(&[TMA.bin(), "sha256sum"], args, dir, stdin);
    assert_eq!(
        String::from_utf8_lossy(&b.stdout),
        String::from_utf8_lossy(&a.stdout),
        "stdout differs for {args:?}"
    );
    assert_eq!(b.stdout, a.stdout, "stdout bytes differ for {args:?}");
    assert_eq!(b.stderr, a.stderr, "stderr differs for {args:?}");
    assert_eq!(b.code, a.code, "exit code differs for {args:?}");
}

/// Files of many sizes (around the 55/56/64-byte padding edges, multi-block, > one read
/// chunk) with deterministic contents, plus odd names.
fn make_tree(dir: &Path) -> Vec<String> {
    let sizes = [
        0usize, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096, 65_539, 262_144,
        262_145, 1_048_583,
    ];
    let mut names = Vec::new();
    let mut x: u32 = 12345;
    for s in sizes {
        let data: Vec<u8> = (0..s)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        let name = format!("f{s}.bin");
        std::fs::write(dir.join(&name), data).unwrap();
        names.push(name);
    }
    for odd in [
        "with space",
        "back\\slash",
        "new\nline",
        "carriage\rreturn",
        "it's",
        "-dash",
        "star*",
        "ünïcödé",
    ] {
        std::fs::write(dir.join(odd), odd.as_bytes()).unwrap();
        names.push(odd.to_string());
    }
    names
}

#[test]
fn hashing_matches_coreutils() {
    let Some(core) = coreutils() else {
        eprintln!("skipped: coreutils sha256sum not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = make_tree(d);
    std::fs::create_dir(d.join("adir")).unwrap();
    let mut all: Vec<&str> = vec!["--"];
    all.extend(names.iter().map(|s| s.as_str()));
    same(core, d, &all, None);
    for flags in [
        &["-b"][..],
        &["--binary"],
        &["-t"],
        &["--tag"],
        &["-z"],
        &["--tag", "-z"],
        &["-b", "-t"],
        &["-t", "-b"],
    ] {
        let mut args: Vec<&str> = flags.to_vec();
        args.extend_from_slice(&all);
        same(core, d, &args, None);
    }
    // Missing files and directories among good ones: messages and exit status 1.
    same(core, d, &["f1.bin", "missing", "adir", "f0.bin"], None);
    same(core, d, &["missing file"], None);
    // Standard input: no argument, `-`, and `-` mixed with files.
    let stdin_data = b"hello from stdin\n".repeat(1000);
    same(core, d, &[], Some(&stdin_data));
    same(core, d, &["-"], Some(&stdin_data));
    same(core, d, &["f3.bin", "-", "f64.bin", "-"], Some(&stdin_data));
    same(core, d, &["-"], Some(b""));
    // Usage errors.
    same(core, d, &["--status", "f1.bin"], None);
    same(core, d, &["--tag", "-t", "f1.bin"], None);
}

#[test]
fn forced_implementations_and_streams_agree() {
    let Some(core) = coreutils() else {
        eprintln!("skipped: coreutils sha256sum not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = make_tree(d);
    let mut files: Vec<&str> = vec!["--"];
    files.extend(names.iter().map(|s| s.as_str()));
    let want = run(&[core], &files, d, None);
    let ni = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.contains(" sha_ni"))
        .unwrap_or(false);
    for imp in ["portable", "ni", "auto"] {
        if imp == "ni" && !ni {
            eprintln!("skipped --impl ni: no SHA-NI on this CPU");
            let b = run(
                &[TMA.bin(), "sha256sum", "--impl", "ni", "f1.bin"],
                &[],
                d,
                None,
            );
            assert_eq!(b.code, 2, "--impl ni without SHA-NI is an error");
            continue;
        }
        for streams in ["1", "2", "3", "4", "8"] {
            let mut args = vec!["--impl", imp, "--streams", streams];
            args.extend_from_slice(&files);
            let got = run(&[TMA.bin(), "sha256sum"], &args, d, None);
            assert_eq!(got.stdout, want.stdout, "--impl {imp} --streams {streams}");
            assert_eq!(got.code, 0);
        }
    }
}

#[test]
fn check_matches_coreutils() {
    let Some(core) = coreutils() else {
        eprintln!("skipped: coreutils sha256sum not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = make_tree(d);
    let mut all: Vec<&str> = vec!["--"];
    all.extend(names.iter().map(|s| s.as_str()));
    // Good list, made by coreutils itself (standard and BSD formats).
    let good = run(&[core], &all, d, None).stdout;
    std::fs::write(d.join("good.sum"), &good).unwrap();
    let mut tag_args = vec!["--tag"];
    tag_args.extend_from_slice(&all);
    std::fs::write(d.join("tag.sum"), run(&[core], &tag_args, d, None).stdout).unwrap();
    let hex_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    std::fs::write(d.join("abc"), "abc").unwrap();
    // Mixed list: good, bad digest, malformed, comment, blank, missing, CRLF, upper case,
    // tab separator, escaped name, BSD line with odd spacing.
    let mixed = format!(
        "{hex_abc}  abc\n\
         {zero}  f0.bin\n\
         this line is garbage\n\
         # a comment\n\
         \n\
         {hex_abc}  missing\n\
         {hex_abc}  abc\r\n\
         {upper}  abc\n\
         {hex_abc} *abc\n\
         \\{hex_abc}  ab\\x\n\
         SHA256 (abc) = {hex_abc}\n\
         SHA256(abc)= {hex_abc}\n\
         {short}  abc\n",
        zero = "0".repeat(64),
        upper = hex_abc.to_uppercase(),
        short = &hex_abc[..60],
    );
    std::fs::write(d.join("mixed.sum"), &mixed).unwrap();
    std::fs::write(d.join("garbage.sum"), "nothing here\nat all\n").unwrap();
    std::fs::write(
        d.join("missing.sum"),
        format!("{hex_abc}  gone1\n{hex_abc}  gone2\n"),
    )
    .unwrap();
    std::fs::write(
        d.join("reversed.sum"),
        format!("{hex_abc} abc\n{hex_abc}\tabc\n"),
    )
    .unwrap();
    std::fs::write(
        d.join("twobad.sum"),
        format!("{z}  abc\n{z}  f1.bin\nbad\nbad2\n", z = "1".repeat(64)),
    )
    .unwrap();
    for args in [
        &["-c", "good.sum"][..],
        &["--check", "tag.sum"],
        &["-c", "good.sum", "tag.sum"],
        &["-c", "mixed.sum"],
        &["-c", "--warn", "mixed.sum"],
        &["-c", "-w", "mixed.sum"],
        &["-c", "--quiet", "mixed.sum"],
        &["-c", "--status", "mixed.sum"],
        &["-c", "--strict", "mixed.sum"],
        &["-c", "--strict", "good.sum"],
        &["-c", "--ignore-missing", "mixed.sum"],
        &["-c", "--ignore-missing", "missing.sum"],
        &["-c", "missing.sum"],
        &["-c", "garbage.sum"],
        &["-c", "reversed.sum"],
        &["-c", "twobad.sum"],
        &["-c", "no-such.sum"],
        &["-c", "good.sum", "no-such.sum", "mixed.sum"],
        &["-c", "--tag", "good.sum"],
        &["-c", "-b", "good.sum"],
        &["-c", "-z", "good.sum"],
    ] {
        same(core, d, args, None);
    }
    // Checksum list on standard input.
    same(core, d, &["-c"], Some(&good));
    same(core, d, &["-c", "-"], Some(mixed.as_bytes()));
}
