//! Developer tasks for the `tma` workspace.
//!
//! * `cargo xtask gen-tables [--data DIR]`: regenerate `crates/tma-catalog/src/generated/`
//!   from the Intel perfmon data, and `generated/arm/` from Arm's Neoverse telemetry
//!   specifications (default `../shared/pmu-data` from the workspace root).
//! * `cargo xtask check-tables [--data DIR]`: exit 1 when the checked-in tables differ from
//!   what the converter makes of the data.
//!
//! `gen-tables` prints to stderr every place where the converter did not take perfmon's
//! `ParentCategory` as the parent (see `gen::resolve_parent`).

mod gen;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

fn workspace_root() -> PathBuf {
    // xtask/ is one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn default_data(root: &Path) -> PathBuf {
    root.join("../shared/pmu-data")
}

/// Files whose checked-in content differs from the generated one (or that are missing).
fn stale_files(root: &Path, data: &Path) -> Result<Vec<PathBuf>> {
    let mut stale = Vec::new();
    for (rel, text) in gen::generate(data)?.files {
        let on_disk = std::fs::read_to_string(root.join(&rel)).unwrap_or_default();
        if on_disk != text {
            stale.push(rel);
        }
    }
    Ok(stale)
}

fn run(args: &[String]) -> Result<ExitCode> {
    let root = workspace_root();
    let mut data = default_data(&root);
    let mut cmd = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--data" => {
                let d = it.next().context("--data needs a folder argument")?;
                data = PathBuf::from(d);
            }
            "gen-tables" | "check-tables" if cmd.is_none() => cmd = Some(a.clone()),
            "-h" | "--help" => {
                println!("usage: cargo xtask (gen-tables | check-tables) [--data DIR]");
                return Ok(ExitCode::SUCCESS);
            }
            other => bail!("unknown argument `{other}`; usage: cargo xtask (gen-tables | check-tables) [--data DIR]"),
        }
    }
    if !data.join("intel/mapfile.csv").is_file() {
        bail!(
            "no Intel perfmon data at {} (expected intel/mapfile.csv there); pass --data DIR",
            data.display()
        );
    }
    match cmd.as_deref() {
        Some("gen-tables") => {
            let generated = gen::generate(&data)?;
            for r in &generated.resolutions {
                eprintln!("resolved {r}");
            }
            std::fs::create_dir_all(root.join(gen::OUT_DIR))?;
            for (rel, text) in &generated.files {
                let path = root.join(rel);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                }
                std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("wrote {}", rel.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("check-tables") => {
            let stale = stale_files(&root, &data)?;
            if stale.is_empty() {
                println!("catalog tables are up to date with {}", data.display());
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("xtask: the checked-in catalog tables differ from what the converter makes of {}:", data.display());
                for f in &stale {
                    eprintln!("  {}", f.display());
                }
                eprintln!("xtask: run `cargo xtask gen-tables` and commit the result");
                Ok(ExitCode::FAILURE)
            }
        }
        _ => bail!("usage: cargo xtask (gen-tables | check-tables) [--data DIR]"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_in_tables_match_the_data() {
        let root = workspace_root();
        let data = default_data(&root);
        if !data.join("intel/mapfile.csv").is_file() {
            eprintln!("skipped: no pmu-data folder at {}", data.display());
            return;
        }
        let stale = stale_files(&root, &data).expect("the converter runs on the data");
        assert!(
            stale.is_empty(),
            "stale generated tables {stale:?}: run `cargo xtask gen-tables` and commit"
        );
    }

    #[test]
    fn generation_is_deterministic() {
        let root = workspace_root();
        let data = default_data(&root);
        if !data.join("intel/mapfile.csv").is_file() {
            eprintln!("skipped: no pmu-data folder at {}", data.display());
            return;
        }
        let a = gen::generate(&data).unwrap();
        let b = gen::generate(&data).unwrap();
        assert_eq!(a, b);
    }
}
