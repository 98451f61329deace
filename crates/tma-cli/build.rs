//! Hands the region tests (tests/regions.rs) the ITT static part's C sources at build time:
//! the `c-library` directory of the `ittapi-sys` crate (a dev-dependency) that cargo unpacked
//! in its registry, at the version Cargo.lock names, as `TMA_ITT_C_LIBRARY` (`!` and the
//! reason when it is not there). Nothing runs cargo at test time.
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let lock = manifest.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-env-changed=CARGO_HOME");
    let value = match itt_c_library(&lock) {
        Ok(dir) => {
            // Rerun when the sources go (a registry clean-up).
            println!(
                "cargo:rerun-if-changed={}",
                dir.join("include/ittnotify.h").display()
            );
            dir.display().to_string()
        }
        Err((why, expected)) => {
            // A path that does not exist yet makes cargo rerun this script on every build,
            // until cargo has unpacked the crate (a plain `cargo build` does not fetch
            // dev-dependencies; `cargo test` does).
            println!("cargo:rerun-if-changed={}", expected.display());
            format!("!{why}")
        }
    };
    println!("cargo:rustc-env=TMA_ITT_C_LIBRARY={value}");
}

/// `$CARGO_HOME/registry/src/<index>/ittapi-sys-<version>/c-library`, or why not (with a
/// path to watch for it).
fn itt_c_library(lock: &Path) -> Result<PathBuf, (String, PathBuf)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .unwrap_or_default();
    let src = home.join("registry/src");
    let text = std::fs::read_to_string(lock)
        .map_err(|e| (format!("{}: {e}", lock.display()), lock.to_path_buf()))?;
    let version = text
        .split("[[package]]")
        .find(|p| p.contains("name = \"ittapi-sys\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"').to_string())
        .ok_or_else(|| {
            (
                "ittapi-sys is not in Cargo.lock".to_string(),
                lock.to_path_buf(),
            )
        })?;
    let crate_dir = format!("ittapi-sys-{version}");
    let mut indexes: Vec<PathBuf> = std::fs::read_dir(&src)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    indexes.sort();
    for index in &indexes {
        let lib = index.join(&crate_dir).join("c-library");
        if lib.join("include/ittnotify.h").is_file() {
            return Ok(lib);
        }
    }
    let expected = indexes
        .first()
        .unwrap_or(&src)
        .join(&crate_dir)
        .join("c-library/include/ittnotify.h");
    Err((
        format!("no {crate_dir}/c-library in {}", src.display()),
        expected,
    ))
}
