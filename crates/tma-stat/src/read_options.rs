//! How a recording is read into a tree by the commands that take recordings beside their own
//! documents (`tma diff`, `tma report`): the one builder of their `StatConfig`.

use std::path::Path;

use tma_host::Host;

use crate::{Input, StatConfig};

/// `--cpu`, `-l`, `--nodes` and `--smt` of a command that reads recordings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOptions {
    /// CPU model of `perf stat` recordings (else from the recording, else this machine).
    pub cpu: Option<String>,
    /// Deepest tree level evaluated (default 1, as `tma stat`).
    pub level: Option<u8>,
    /// Only these nodes and their subtrees.
    pub nodes: Vec<String>,
    /// Whether SMT was on where a `perf stat` file was recorded.
    pub smt: Option<bool>,
}

impl ReadOptions {
    /// The `tma stat --import` run of the recording at `path`.
    pub fn stat_config(&self, path: &Path, host: &Host) -> StatConfig {
        StatConfig {
            input: Input::Import(path.to_path_buf()),
            cpu: self.cpu.clone(),
            level: self.level.unwrap_or(1),
            nodes: self.nodes.clone(),
            smt: self.smt,
            host: host.clone(),
            ..StatConfig::default()
        }
    }
}
