//! Progress of long runs (`tma stat --drilldown/--repeat/--no-multiplex`, `tma demo`) on
//! standard error, drawn with indicatif only when standard error is a terminal: logs, pipes
//! and the tests see nothing extra. The measured commands write to the same terminal, so
//! each run or step gets one line, drawn once and left in place (never redrawn under
//! their output).

use std::io::IsTerminal;

/// Whether a run shows progress: only a long run, and only on a terminal.
pub fn shown(stderr_is_terminal: bool, long_run: bool) -> bool {
    stderr_is_terminal && long_run
}

/// One progress line per run or step, when [`shown`].
pub struct Lines {
    prefix: &'static str,
    on: bool,
}

impl Lines {
    /// Lines headed `prefix` (e.g. `tma stat`) for a run that is `long_run`.
    pub fn new(prefix: &'static str, long_run: bool) -> Lines {
        Lines {
            prefix,
            on: shown(std::io::stderr().is_terminal(), long_run),
        }
    }

    /// `PREFIX: MSG [bar] POS/LEN` (no bar when `len` is 1), left on its own line.
    pub fn line(&self, pos: usize, len: usize, msg: &str) {
        if !self.on {
            return;
        }
        let template = if len > 1 {
            "{prefix}: {msg} [{bar:20}] {pos}/{len}"
        } else {
            "{prefix}: {msg}"
        };
        // Set up hidden, then drawn once: no intermediate states flash by.
        let pb = indicatif::ProgressBar::with_draw_target(
            Some(len as u64),
            indicatif::ProgressDrawTarget::hidden(),
        );
        pb.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        pb.set_prefix(self.prefix);
        pb.set_message(msg.to_string());
        pb.set_position(pos as u64);
        pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        pb.abandon();
        // indicatif leaves the cursor at the end of the bar; what follows starts below it.
        eprintln!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_long_runs_on_a_terminal_show_progress() {
        assert!(shown(true, true));
        assert!(!shown(false, true), "a log or a pipe gets nothing extra");
        assert!(!shown(true, false), "a short run draws nothing");
        assert!(!shown(false, false));
    }

    #[test]
    fn without_a_terminal_lines_draw_nothing() {
        // The tests' standard error is captured, not a terminal.
        if std::io::stderr().is_terminal() {
            return;
        }
        let lines = Lines::new("tma test", true);
        assert!(!lines.on);
        lines.line(1, 3, "run");
    }
}
