//! perf.data files (file and pipe mode) through `tma_profile::import::import_bytes`, the
//! reader behind `tma locate`, `tma report` and `tma diff` of profiles. The allocation
//! bound is [`tma_fuzz::perf_data_bound`] (shared with `perf_data_z`).
fn main() {
    tma_fuzz::main_with("perf_data", tma_fuzz::perf_data_bound, |data| {
        let _ = tma_profile::import::check_header(data);
        let mut agg = tma_profile::aggregate::Aggregator::new();
        let _ = tma_profile::import::import_bytes(data, &mut agg);
    });
}
