//! What the workspace's tests would otherwise declare in every file: the repository root,
//! fixture paths, the `tma` command set up so that no test depends on the host's CPU, the
//! output as text, and the golden-file comparison. Dev-only (`publish = false`); it depends
//! on nothing but `std`.
//!
//! # The binary
//!
//! Cargo tells an integration test where the built `tma` is only through
//! `env!("CARGO_BIN_EXE_tma")`, and only while it compiles tma-cli's own tests; a library
//! cannot read it. So a test file names the binary once, in a constant, and everything else
//! goes through it:
//!
//! ```ignore
//! use tma_testkit::{fixture, stdout, Tma};
//!
//! const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));
//!
//! let o = TMA.run(&["stat", "--import", "tests/fixtures/import/zen4-sha256-synthetic.csv"]);
//! ```
//!
//! A constant is plain Rust: no macro hides where the path comes from, and a test crate that
//! has no binary (any crate but tma-cli) simply does not use [`Tma`]. Finding the binary from
//! `current_exe()` instead would guess at cargo's target layout.
//!
//! [`Tma::command`] and [`Tma::run`] pass `--root tests/fixtures/roots/none` (a machine
//! root with no CPU the tables know, so nothing depends on the host) and run in the
//! repository root, so relative fixture paths work. [`Tma::with_root`] picks another root
//! under tests/fixtures/roots; [`Tma::bare`] is the binary alone, for the tests that measure
//! the host itself (live counting, sampling, the doctor) or set their own working directory.
//!
//! # Golden files
//!
//! [`check_golden`] compares a text with a file and rewrites the file when `UPDATE_GOLDEN`
//! is set. The golden files under tests/fixtures (import/golden, kvm/golden) are the source
//! of truth byte for byte: they are the exact program output, so they can be read, diffed
//! and reviewed as what a user sees. `insta` was considered and not used: its snapshot files
//! carry a metadata header (`---\nsource: ...\n---`), so pointing
//! `Settings::set_snapshot_path` at the existing files would not compare them as they are,
//! and converting them would make them no longer the plain output. The comparison needed is
//! twenty lines, with no dependency.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether the tests run as root (effective uid 0, from `/proc/self/status`): some checks
/// need it (`/dev/kvm` set-up, leaving `SCHED_IDLE`), and say so where it is missing.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|u| u.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The repository root (the directory of the workspace's Cargo.toml).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/tma-testkit sits two levels below the repository root")
        .to_path_buf()
}

/// A file or directory under tests/fixtures, by its path relative to that directory.
pub fn fixture(rel: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(rel)
}

/// The bytes of a file under tests/fixtures (panics, naming the file, when it cannot be read).
pub fn fixture_bytes(rel: &str) -> Vec<u8> {
    let p = fixture(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// [`fixture`] as a string, for argument lists of `&str`.
pub fn fixture_str(rel: &str) -> String {
    fixture(rel).display().to_string()
}

/// The `tma` binary of the build under test; see the crate documentation.
#[derive(Clone, Copy, Debug)]
pub struct Tma {
    bin: &'static str,
}

impl Tma {
    /// `bin` is `env!("CARGO_BIN_EXE_tma")` of the calling test.
    pub const fn new(bin: &'static str) -> Tma {
        Tma { bin }
    }

    /// The path of the binary.
    pub fn bin(&self) -> &'static str {
        self.bin
    }

    /// `tma --root tests/fixtures/roots/none`, run in the repository root.
    pub fn command(&self) -> Command {
        self.with_root("none")
    }

    /// `tma --root tests/fixtures/roots/<root>`, run in the repository root.
    pub fn with_root(&self, root: &str) -> Command {
        let mut c = Command::new(self.bin);
        c.arg("--root").arg(fixture("roots").join(root));
        c.current_dir(repo_root());
        c
    }

    /// The binary alone: the host's machine root and the test's working directory.
    pub fn bare(&self) -> Command {
        Command::new(self.bin)
    }

    /// Runs [`Tma::command`] with `args` to the end (stdin empty, output captured).
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run tma")
    }
}

/// Standard output as text (invalid UTF-8 replaced).
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text (invalid UTF-8 replaced).
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Build the C program `src` into `dir` (named after its stem) with the system C compiler,
/// at optimisation `opt` (`-O1`, `-O2`) with frame pointers and debug info, for the sampling
/// tests; `None`, after printing a `skipped:` line, when there is no working compiler.
pub fn build_c(src: &Path, dir: &Path, opt: &str) -> Option<PathBuf> {
    let exe = dir.join(src.file_stem().expect("a C source file name"));
    let st = Command::new("cc")
        .args([opt, "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(src)
        .status();
    match st {
        Ok(s) if s.success() => Some(exe),
        _ => {
            eprintln!("skipped: no working C compiler (cc)");
            None
        }
    }
}

/// Whether a `tma locate` run could open its sampling event on another task; prints a
/// `skipped:` line with perf's reason when it could not (perf_event_paranoid, no event).
pub fn can_sample(o: &Output) -> bool {
    let e = stderr(o);
    if e.contains("perf_event_paranoid") || e.contains("cannot open the sampling event") {
        eprintln!("skipped: perf_event_open not permitted here: {e}");
        return false;
    }
    true
}

/// Compares `actual` with the golden file at `path`, byte for byte. With `UPDATE_GOLDEN` set
/// in the environment it writes `actual` there instead (creating the directory); review the
/// change with `git diff` before committing it.
pub fn check_golden(path: impl AsRef<Path>, actual: &str) {
    let p = path.as_ref();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(p, actual).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        return;
    }
    let want = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", p.display()));
    if want != actual {
        let line = want
            .lines()
            .zip(actual.lines())
            .position(|(w, a)| w != a)
            .unwrap_or_else(|| want.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the golden file from line {} on (UPDATE_GOLDEN=1 rewrites it)\n\
             --- want\n{want}\n--- got\n{actual}",
            p.display(),
            line + 1
        );
    }
}

/// The round trip of one of tma's JSON documents: `bytes` (as a command wrote them) are
/// recognised as `schema` v`version`, read into `T`, and written again to the same bytes.
/// Returns the document read.
pub fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(
    bytes: &[u8],
    schema: &str,
    version: u32,
) -> T {
    let r = tma_render::recognize(bytes);
    assert_eq!(r.schema(), Some(schema), "recognised schema");
    assert_eq!(r.version(), Some(version), "recognised version");
    let doc: T = serde_json::from_slice(bytes).expect("the document reads into its type");
    let mut again = Vec::new();
    tma_render::write_json(&mut again, schema, version, &doc).expect("write the document");
    assert_eq!(
        String::from_utf8(again).expect("UTF-8"),
        String::from_utf8_lossy(bytes),
        "written again"
    );
    doc
}

/// A proptest runner of `cases` cases with a fixed seed (what a test checks must not
/// depend on the run) and no regression files.
pub fn proptest_runner(cases: u32) -> proptest::test_runner::TestRunner {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_holds_the_workspace_and_the_fixtures() {
        assert!(repo_root().join("Cargo.toml").is_file());
        assert!(fixture("roots/none").is_dir());
    }

    #[test]
    fn golden_matches_byte_for_byte() {
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            return; // it would rewrite instead of compare
        }
        let dir = std::env::temp_dir().join(format!("tma-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("g.txt");
        std::fs::write(&p, "a\nb\n").unwrap();
        check_golden(&p, "a\nb\n");
        let r = std::panic::catch_unwind(|| check_golden(&p, "a\nb"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(r.is_err(), "a missing final newline must differ");
    }
}
