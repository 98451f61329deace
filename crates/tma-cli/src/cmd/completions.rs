//! `tma completions SHELL`: the shell completion script for this command line (clap_complete),
//! printed to standard output.

use std::process::ExitCode;

use clap::CommandFactory;
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
    clap_complete::generate(shell, &mut crate::Cli::command(), "tma", &mut script);
    w.write_all(&script)?;
    w.flush()
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
