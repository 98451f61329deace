//! perf.data files (file and pipe mode) through `tma_profile::import::import_bytes`, the
//! reader behind `tma locate`, `tma report` and `tma diff` of profiles.
use tma_fuzz::Bound;

fn main() {
    tma_fuzz::main(
        "perf_data",
        Bound {
            per_byte: 64,
            fixed: 8 << 20,
        },
        |data| {
            let _ = tma_profile::import::check_header(data);
            let mut agg = tma_profile::aggregate::Aggregator::new();
            let _ = tma_profile::import::import_bytes(data, &mut agg);
        },
    );
}
