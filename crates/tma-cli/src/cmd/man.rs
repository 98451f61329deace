//! `tma man [COMMAND...] [-o DIR]`: the roff manual pages of `tma` and its subcommands
//! (clap_mangen): one page to standard output, or every page under it into a directory.
//! `docs/man/` holds the pages generated with `tma man -o docs/man`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::CommandFactory;

/// Print a manual page (roff), or write them all into a directory.
///
/// Examples:
///   tma man stat | man -l -
///   tma man workload sha256
///   tma man -o docs/man
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The command whose page to print (e.g. `stat`, `workload sha256`; default: `tma` itself).
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Write the page and those of its subcommands into DIR as NAME.1 files (created if
    /// missing) instead of printing one page.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = built_root();
    let cmd = find(&root, &args.command)?;
    match args
        .output
        .as_deref()
        .filter(|p| !tma_render::files::is_stdio(p))
    {
        None => {
            let mut out = std::io::stdout().lock();
            man(cmd).render(&mut out)?;
            out.flush()?;
        }
        Some(dir) => write_pages(cmd, dir)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The `tma` command tree, built: each subcommand's display name is its page name
/// (`tma-stat`, `tma-workload-sha256`).
fn built_root() -> clap::Command {
    let mut root = crate::Cli::command().disable_help_subcommand(true);
    root.build();
    root
}

/// The subcommand at the end of `path` (the root for an empty path).
fn find<'a>(root: &'a clap::Command, path: &[String]) -> anyhow::Result<&'a clap::Command> {
    let mut cmd = root;
    for word in path {
        cmd = match cmd
            .get_subcommands()
            .find(|s| !s.is_hide_set() && s.get_name() == word)
        {
            Some(s) => s,
            None => {
                let names: Vec<&str> = cmd
                    .get_subcommands()
                    .filter(|s| !s.is_hide_set())
                    .map(clap::Command::get_name)
                    .collect();
                bail!(
                    "no manual page for `{} {word}`; its subcommands: {}",
                    display_path(cmd),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            }
        };
    }
    Ok(cmd)
}

fn display_path(cmd: &clap::Command) -> String {
    cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string()
}

/// The page of one command; its source is `tma VERSION` for every page.
fn man(cmd: &clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd.clone()).source(format!("tma {}", env!("CARGO_PKG_VERSION")))
}

/// The pages of `cmd` and of its visible subcommands, depth first: (file name, roff).
fn pages(cmd: &clap::Command) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut all = Vec::new();
    let man = man(cmd);
    let mut roff = Vec::new();
    man.render(&mut roff)?;
    all.push((man.get_filename(), roff));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        all.extend(pages(sub)?);
    }
    Ok(all)
}

/// Every page into `dir` (made if missing), each written through [`tma_render::write_output`].
fn write_pages(cmd: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    tma_render::files::check_output_dir(dir)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, roff) in pages(cmd)? {
        tma_render::write_output(&dir.join(&name), |w| Ok(w.write_all(&roff)?))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_pages() -> Vec<(String, Vec<u8>)> {
        pages(&built_root()).unwrap()
    }

    #[test]
    fn one_page_per_command_named_after_it() {
        let names: Vec<String> = all_pages().into_iter().map(|(n, _)| n).collect();
        for want in ["tma.1", "tma-stat.1", "tma-man.1", "tma-workload-sha256.1"] {
            assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.starts_with("tma-help")),
            "{names:?}"
        );
    }

    #[test]
    fn subcommand_paths_are_found_and_unknown_ones_refused() {
        let root = built_root();
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            find(&root, &words(&["workload", "sha256"]))
                .unwrap()
                .get_name(),
            "sha256"
        );
        let e = find(&root, &words(&["nope"])).unwrap_err().to_string();
        assert!(
            e.contains("no manual page for `tma nope`") && e.contains("stat"),
            "{e}"
        );
    }

    #[test]
    fn pages_are_roff_that_man_renders() {
        let dir = tempfile::tempdir().unwrap();
        for (name, roff) in all_pages() {
            let text = String::from_utf8(roff.clone()).unwrap();
            assert!(
                text.lines().any(|l| l.starts_with(".TH ")),
                "{name} has no .TH title line"
            );
            let path = dir.path().join(&name);
            std::fs::write(&path, &roff).unwrap();
            let out = match std::process::Command::new("man")
                .arg("-l")
                .arg(&path)
                .env("MANWIDTH", "80")
                .output()
            {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("skipped rendering with man: cannot run man: {e}");
                    return;
                }
            };
            assert!(out.status.success(), "man -l {name} failed: {out:?}");
            let shown = String::from_utf8_lossy(&out.stdout);
            assert!(
                shown.contains("NAME") && shown.contains("tma"),
                "{name}: {shown}"
            );
        }
    }

    /// `docs/man/` must hold exactly the pages this build generates.
    #[test]
    fn checked_in_pages_are_current() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/man");
        let fix = "regenerate them with `cargo run -p tma-cli -- man -o docs/man` (and remove stale pages)";
        let want = all_pages();
        let mut have: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}; {fix}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        have.sort();
        let mut names: Vec<String> = want.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        assert_eq!(
            have, names,
            "docs/man lists other pages than tma generates; {fix}"
        );
        for (name, roff) in want {
            let on_disk = std::fs::read(dir.join(&name)).unwrap();
            assert!(on_disk == roff, "docs/man/{name} is out of date; {fix}");
        }
    }
}
