//! Samples to hotspots: perf record parsing (live ring buffer and perf.data through one path), symbolization, instruction annotation, pprof and folded output.
