//! perf.data files with zstd-compressed records (`perf record -z`: `PERF_RECORD_COMPRESSED`
//! and `COMPRESSED2`), file and pipe mode, through `tma_profile::import::import_bytes`: the
//! same reader as the `perf_data` target, from compressed seeds, so that afl mutates the
//! compressed stream and the records inside it. `tma_profile::compressed` bounds what the
//! records may inflate to; the allocation bound follows it ([`crate::perf_data_bound`]).
use crate::Target;

pub const TARGET: Target = Target {
    name: "perf_data_z",
    setup: crate::no_setup,
    bound: crate::perf_data_bound,
    run: |data| {
        let mut agg = tma_profile::aggregate::Aggregator::new();
        let _ = tma_profile::import::import_bytes(data, &mut agg);
    },
};
