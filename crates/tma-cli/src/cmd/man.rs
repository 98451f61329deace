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

/// The page of one command; its source is `tma VERSION` for every page. Its SYNOPSIS is
/// [`synopsis`] (clap_mangen's own leaves out the options' values: `[--cpu]`), and its NAME
/// line does not repeat the name (`tma - tma: ...`, see [`name_line`]).
fn man(cmd: &clap::Command) -> clap_mangen::Man {
    let mut page = cmd.clone().override_usage(synopsis(cmd));
    if let Some(about) = name_line(cmd) {
        page = page.about(about);
    }
    clap_mangen::Man::new(page).source(format!("tma {}", env!("CARGO_PKG_VERSION")))
}

/// The summary for the NAME line when the command's own needs mending: without a leading
/// `NAME: ` (the root's about is the package description, `tma: Top-down ...`) and a final
/// period, as the subcommands' summaries read.
fn name_line(cmd: &clap::Command) -> Option<String> {
    let about = cmd.get_about()?.to_string();
    let prefix = format!("{}: ", cmd.get_name());
    let trimmed = about.strip_prefix(&prefix).unwrap_or(&about);
    let trimmed = trimmed.strip_suffix('.').unwrap_or(trimmed);
    (trimmed != about).then(|| trimmed.to_string())
}

/// The command line of a built command with every visible option and its value, as `--help`
/// writes them: `tma list [--cpu <NAME>] [-l|--level <N>] [--events [<FILTER>]] ...`;
/// `[...]` optional, `...` repeatable, `<COMMAND>` where subcommands follow.
fn synopsis(cmd: &clap::Command) -> String {
    let mut words = vec![cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string()];
    let visible = |a: &&clap::Arg| !a.is_hide_set();
    let (required, optional): (Vec<&clap::Arg>, Vec<&clap::Arg>) =
        cmd.get_opts()
            .chain(cmd.get_arguments().filter(|a| {
                !a.is_positional() && !a.get_num_args().is_some_and(|n| n.takes_values())
            }))
            .filter(visible)
            .partition(|a| a.is_required_set());
    let mut opts = optional;
    opts.sort_by_key(|a| (a.get_display_order(), a.get_long().map(str::to_string)));
    opts.retain(|a| required.iter().all(|r| r.get_id() != a.get_id()));
    words.extend(opts.iter().chain(&required).map(|a| option_usage(a)));
    for p in cmd.get_positionals().filter(visible) {
        let many = if repeats(p) { "..." } else { "" };
        let v = format!("{}{many}", value_names(p));
        words.push(match (p.is_last_set(), p.is_required_set()) {
            (true, true) => format!("-- {v}"),
            (true, false) => format!("[-- {v}]"),
            (false, true) => v,
            (false, false) => format!("[{v}]"),
        });
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        words.push("<COMMAND>".into());
    }
    words.join(" ")
}

/// `[-l|--level <N>]`, `--input <FILE>` (required), `[--events [<FILTER>]]`, `[-e|--event <EVENT>]...`.
fn option_usage(a: &clap::Arg) -> String {
    let flag = match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("-{s}|--{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, Some(l)) => format!("--{l}"),
        (None, None) => a.get_id().to_string(),
    };
    let value = match a.get_num_args() {
        Some(n) if n.takes_values() && n.min_values() == 0 => format!(" [{}]", value_names(a)),
        Some(n) if n.takes_values() => format!(" {}", value_names(a)),
        _ => String::new(),
    };
    let many = if repeats(a) { "..." } else { "" };
    if a.is_required_set() {
        format!("{flag}{value}{many}")
    } else {
        format!("[{flag}{value}]{many}")
    }
}

/// `<NAME>` (or `<A> <B>` for several values), as `--help` names them.
fn value_names(a: &clap::Arg) -> String {
    match a.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| format!("<{n}>"))
            .collect::<Vec<_>>()
            .join(" "),
        None => format!("<{}>", a.get_id().as_str().to_uppercase()),
    }
}

/// Given more than once (`-e A -e B`, `-v -v`) or taking any number of values.
fn repeats(a: &clap::Arg) -> bool {
    matches!(
        a.get_action(),
        clap::ArgAction::Append | clap::ArgAction::Count
    ) || a.get_num_args().is_some_and(|n| n.max_values() > 1)
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

    /// The SYNOPSIS names each option's value; the NAME line does not repeat
    /// the name.
    #[test]
    fn synopsis_names_values_and_name_does_not_repeat_itself() {
        let root = built_root();
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let page = |path: &[&str]| {
            let mut roff = Vec::new();
            man(find(&root, &words(path)).unwrap())
                .render(&mut roff)
                .unwrap();
            String::from_utf8(roff).unwrap()
        };
        let section = |text: &str, name: &str| {
            let start = text.find(&format!(".SH {name}\n")).unwrap();
            let rest = &text[start + 5 + name.len()..];
            rest[..rest.find(".SH ").unwrap_or(rest.len())].replace("\\-", "-")
        };
        let list = section(&page(&["list"]), "SYNOPSIS");
        for want in [
            "tma list\\fR",
            "[--cpu <NAME>]",
            "[-l|--level <N>]",
            "[--events [<FILTER>]]",
        ] {
            assert!(list.contains(want), "{want}: {list}");
        }
        let stat = section(&page(&["stat"]), "SYNOPSIS");
        assert!(stat.contains("[-e|--event <EVENT>]..."), "{stat}");
        assert!(stat.contains("<CMD>...]"), "{stat}");
        assert!(
            !stat.contains("--root") && !stat.contains("synthetic"),
            "{stat}"
        );
        let top = page(&[]);
        assert!(section(&top, "SYNOPSIS").contains("<COMMAND>"), "{top}");
        let name = section(&top, "NAME");
        assert!(name.starts_with("tma - Top-down"), "{name}");
        assert!(!name.contains("tma: "), "{name}");
        let name = section(&page(&["list"]), "NAME");
        assert!(name.starts_with("tma-list - Show the TMA tree"), "{name}");
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
