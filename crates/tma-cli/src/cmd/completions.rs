//! `tma completions SHELL`: the shell completion script for this command line (clap_complete),
//! printed to standard output. Hidden options (`--root`, the internal ones) are left out,
//! and the values of `--cpu` and `--impl` complete to what they take ([`cpu_keys`],
//! [`sha256_impls`]), not to file names.

use std::ffi::OsStr;
use std::process::ExitCode;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Command, CommandFactory};
use clap_complete::Shell;

/// Print a shell completion script.
///
/// Examples:
///   tma completions bash > ~/.local/share/bash-completion/completions/tma
///   tma completions zsh > ~/.zfunc/_tma
///   tma completions fish > ~/.config/fish/completions/tma.fish
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    write(args.shell, &mut out)?;
    Ok(ExitCode::SUCCESS)
}

/// Write the completion script for `shell` to `w`.
pub fn write(shell: Shell, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut visible_cli(), "tma", &mut script);
    w.write_all(&script)?;
    w.flush()
}

/// The `tma` command tree without its hidden options and subcommands: clap_complete lists
/// hidden arguments, so they are left out of the tree it is given.
fn visible_cli() -> Command {
    let mut built = crate::Cli::command();
    built.build();
    // Names, about texts and arguments are borrowed from the built tree for the whole
    // program (clap keeps `&'static str` names without its `string` feature); it is built
    // once per `tma completions`.
    visible(Box::leak(Box::new(built)))
}

/// `cmd` (built: global options propagated, help and version flags and the `help`
/// subcommand made) rebuilt from its visible parts.
fn visible(cmd: &'static Command) -> Command {
    let kept = |id: &clap::Id| {
        cmd.get_arguments()
            .any(|a| a.get_id() == id && !a.is_hide_set())
    };
    let mut out = Command::new(cmd.get_name())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .args(
            cmd.get_arguments()
                .filter(|a| !a.is_hide_set())
                .map(|a| a.clone().global(false)),
        )
        .groups(cmd.get_groups().map(|g| {
            clap::ArgGroup::new(g.get_id().clone())
                .args(g.get_args().filter(|id| kept(id)).cloned())
                .multiple(g.clone().is_multiple())
        }))
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(visible),
        );
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(v) = cmd.get_version() {
        out = out.version(v);
    }
    out.visible_aliases(cmd.get_visible_aliases())
}

/// A value parser that names the values the completion scripts offer, and parses as its
/// `parse` function does (any text by default: the command checks the value and says what
/// it accepts). Used with `hide_possible_values = true`, so `--help` reads as before.
#[derive(Clone, Copy)]
pub struct Offer {
    values: fn() -> Vec<&'static str>,
    parse: fn(&str) -> Result<String, String>,
}

impl Offer {
    /// Parse with `parse` (its errors as clap reports a function value parser's).
    pub fn parsing(self, parse: fn(&str) -> Result<String, String>) -> Offer {
        Offer { parse, ..self }
    }
}

impl TypedValueParser for Offer {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        self.parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            (self.values)().into_iter().map(PossibleValue::new),
        ))
    }
}

fn any_text(text: &str) -> Result<String, String> {
    Ok(text.to_string())
}

/// `--cpu NAME` (a CPU model's tables): the catalog's model keys.
pub fn cpu_keys() -> Offer {
    Offer {
        values: || tma_catalog::models().iter().map(|m| m.key).collect(),
        parse: any_text,
    }
}

/// `--impl IMPL` (a SHA-256 implementation): `auto` and the implementations.
pub fn sha256_impls() -> Offer {
    Offer {
        values: || {
            let mut v = vec!["auto"];
            v.extend(
                [
                    tma_workloads::sha256::Sha256Impl::Portable,
                    tma_workloads::sha256::Sha256Impl::Ni,
                ]
                .map(|i| i.name()),
            );
            v
        },
        parse: any_text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    fn script(shell: Shell) -> String {
        let mut v = Vec::new();
        write(shell, &mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in Shell::value_variants() {
            let s = script(*shell);
            assert!(!s.is_empty(), "{shell}: empty script");
            for sub in crate::Cli::command().get_subcommands() {
                assert!(
                    s.contains(sub.get_name()),
                    "{shell}: the script does not mention `{}`",
                    sub.get_name()
                );
            }
        }
    }

    /// No hidden option in any script; `--cpu` and `--impl` complete to
    /// their values, not to file names.
    #[test]
    fn hidden_options_are_left_out_and_values_complete() {
        let hidden = [
            "root",
            "synthetic-backend",
            "http-workers",
            "run-loop",
            "run-kernel",
        ];
        for shell in Shell::value_variants() {
            let s = script(*shell);
            for h in hidden {
                assert!(
                    !s.contains(&format!("--{h}")) && !s.contains(&format!("-l {h} ")),
                    "{shell}: --{h} offered"
                );
            }
            // Elvish and PowerShell scripts complete option names only.
            if !matches!(shell, Shell::Bash | Shell::Zsh | Shell::Fish) {
                continue;
            }
            for value in ["zen4", "spr", "adl-e", "portable"] {
                assert!(s.contains(value), "{shell}: {value} not offered");
            }
        }
        let bash = script(Shell::Bash);
        let after = |opt: &str, section: &str| {
            let sec = &bash[bash.find(section).unwrap()..];
            let at = sec.find(&format!("                {opt})")).unwrap();
            sec[at..at + sec[at..].find(";;").unwrap()].to_string()
        };
        let list_cpu = after("--cpu", "        tma__subcmd__list)");
        assert!(
            list_cpu.contains("compgen -W \"skx") && list_cpu.contains("zen5"),
            "{list_cpu}"
        );
        let imp = after("--impl", "        tma__subcmd__sha256sum)");
        assert!(imp.contains("compgen -W \"auto portable ni\""), "{imp}");
        let bench_cpu = after("--cpu", "        tma__subcmd__bench)");
        assert!(!bench_cpu.contains("compgen -f"), "{bench_cpu}");
        // Still every subcommand and the help and version flags.
        assert!(
            bash.contains("--version") && bash.contains("tma__subcmd__workload__subcmd__sha256)")
        );
    }

    /// The parser behind the offered values takes any text, as before.
    #[test]
    fn offered_values_are_not_enforced() {
        let cli = <crate::Cli as clap::Parser>::try_parse_from([
            "tma",
            "list",
            "--cpu",
            "SapphireRapids",
        ]);
        assert!(cli.is_ok(), "{cli:?}");
        let help = crate::Cli::command()
            .find_subcommand_mut("list")
            .unwrap()
            .render_help()
            .to_string();
        assert!(!help.contains("possible values"), "{help}");
    }

    #[test]
    fn bash_accepts_the_bash_script() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tma.bash");
        std::fs::write(&path, script(Shell::Bash)).unwrap();
        let status = match std::process::Command::new("bash")
            .arg("-n")
            .arg(&path)
            .status()
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipped: cannot run bash: {e}");
                return;
            }
        };
        assert!(status.success(), "bash -n rejects the completion script");
    }
}
