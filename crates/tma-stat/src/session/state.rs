//! The state of a counting session: its settings, its source of measurements (a backend,
//! or a snapshot's runs), everything counted so far, and the sink every step goes to.

use std::cell::RefCell;

use tma_perf::backend::{Backend, Replay, RunOptions, Target};
use tma_perf::plan::Plan;
use tma_perf::snapshot::{RecordedRun, Settings, Topology};

use crate::sink::IntervalSink;
use crate::{StatConfig, StatError};

/// Where a session's measurements come from.
pub(super) enum Source {
    /// perf_event_open (or the synthetic backend); the plan is computed.
    Live(Box<dyn Backend>),
    /// A snapshot: its plans by drill-down step, its runs in order.
    Replay { plans: Vec<Plan>, backend: Replay },
}

/// Everything counted so far (what a snapshot holds) and how to go on.
pub(super) struct Session<'a> {
    pub(super) cfg: &'a StatConfig,
    pub(super) settings: Settings,
    pub(super) target: Target,
    pub(super) opts: RunOptions,
    pub(super) source: Source,
    pub(super) plans: Vec<Plan>,
    pub(super) runs: Vec<RecordedRun>,
    pub(super) hardware: bool,
    pub(super) note: Option<String>,
    pub(super) cpu_source: String,
    pub(super) model_key: Option<String>,
    pub(super) topology: Topology,
    /// CPU -> core label, for --per-core.
    pub(super) cpu_cores: Vec<(u32, String)>,
    /// `--cputype`: the one core type of a hybrid part counted (its trees are marked).
    pub(super) core_type: Option<&'static str>,
    /// Where every step goes (taken while a step is counted).
    pub(super) sink: Option<&'a mut dyn IntervalSink>,
}

impl<'a> Session<'a> {
    /// Lend the sink out while `f` counts: the backend's callbacks hand it intervals while the
    /// session itself is borrowed by the counting.
    pub(super) fn lend_sink<T>(
        &mut self,
        f: impl FnOnce(&mut Self, &RefCell<&'a mut dyn IntervalSink>) -> Result<T, StatError>,
    ) -> Result<T, StatError> {
        let sink = RefCell::new(
            self.sink
                .take()
                .expect("a session has a sink between steps"),
        );
        let result = f(self, &sink);
        self.sink = Some(sink.into_inner());
        result
    }

    /// A replay's first recorded plan: the PMUs of its hardware groups.
    pub(super) fn plans_first_counter_pmus(&self) -> Option<Vec<String>> {
        match &self.source {
            Source::Replay { plans, .. } => plans
                .first()
                .map(|p| p.counter_pmus().into_iter().map(str::to_string).collect()),
            Source::Live(_) => None,
        }
    }

    pub(super) fn replaying(&self) -> bool {
        matches!(self.source, Source::Replay { .. })
    }
    pub(super) fn interval_mode(&self) -> bool {
        self.settings.interval_ms.is_some()
    }
    pub(super) fn breakdown(&self) -> bool {
        self.settings.per_core || self.settings.per_thread
    }
    pub(super) fn repeat(&self) -> u32 {
        self.settings.repeat.max(1)
    }
    pub(super) fn command(&self) -> Option<String> {
        match &self.target {
            // As the user would type it again (the `Next: tma locate -- CMD` line).
            Target::Command(argv) => Some(tma_render::shell_words(argv)),
            _ => None,
        }
    }
}
