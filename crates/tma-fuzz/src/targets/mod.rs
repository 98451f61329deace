//! The fuzz targets, one module each (what each feeds and checks: fuzz/README.md).

pub mod docs;
pub mod evaluate;
pub mod expr;
pub mod http;
pub mod perf_data;
pub mod perf_data_z;
pub mod perf_stat;
pub mod pprof;
pub mod proc;
pub mod sysfs;
pub mod tracefs;

use crate::Target;

/// Every target, in the order scripts/fuzz.sh runs them.
pub const ALL: [Target; 11] = [
    perf_stat::TARGET,
    perf_data::TARGET,
    perf_data_z::TARGET,
    docs::TARGET,
    http::TARGET,
    tracefs::TARGET,
    proc::TARGET,
    sysfs::TARGET,
    pprof::TARGET,
    expr::TARGET,
    evaluate::TARGET,
];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<Target> {
    ALL.into_iter().find(|t| t.name == name)
}
