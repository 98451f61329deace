//! perf.data files (file and pipe mode) through `tma_profile::import::import_bytes`, the
//! reader behind `tma locate`, `tma report` and `tma diff` of profiles. The allocation
//! bound is [`crate::perf_data_bound`] (shared with `perf_data_z`).
use crate::Target;

pub const TARGET: Target = Target {
    name: "perf_data",
    setup: crate::no_setup,
    bound: crate::perf_data_bound,
    run: |data| {
        let _ = tma_profile::import::check_header(data);
        let mut agg = tma_profile::aggregate::Aggregator::new();
        let _ = tma_profile::import::import_bytes(data, &mut agg);
    },
};
