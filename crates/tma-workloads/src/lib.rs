//! Case-study workloads: SHA-256 (portable and SHA-NI) and a DRAM-bound random-access kernel with an optional software prefetch.
