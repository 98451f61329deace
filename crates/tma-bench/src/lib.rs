//! Instruction microbenchmarks: JIT with iced-x86 into a W^X buffer, forked pinned child with signal capture, calibrated rdtsc / perf / rdpmc clocks, statistics.
