//! Running a [`Plan`](crate::plan::Plan) on a [`Target`]: the [`Backend`] trait, the [`Live`] backend
//! (perf_event_open; with a software-event plan it is the "Software" backend that works on a
//! machine without a PMU), and the [`Replay`] backend (recorded raw readings with chosen
//! enabled/running times).
//!
//! Every backend returns a [`Measurement`] of *raw* group readings per interval; readings,
//! multiplex scaling and aggregation are derived from it by one function
//! ([`Measurement::interval_readings`]) so live runs and replays print the same figures.

mod live;
mod replay;
mod run;
mod synthetic;

pub use live::{
    cgroup_points, on_core_type_time, open_cgroup, resolve_command, AttachPoint, Live, Opener,
};
pub(crate) use live::{open_groups, read_deltas, FailedGroups, OpenGroup};
pub use replay::Replay;
pub use run::{
    combine_runs, only_groups, repeat_stats, software_events, sub_plan, Backend, Ending,
    GroupReading, Measurement, RawInterval, RunError, RunOptions, Target,
};
pub use synthetic::{Synthetic, SyntheticThread};
