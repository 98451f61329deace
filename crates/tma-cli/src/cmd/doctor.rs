//! `tma doctor` (being built: see the issue tracker).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tma doctor` is not built yet")
}
