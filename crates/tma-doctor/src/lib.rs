//! Measurement-environment checks (PMU, paranoid, NMI watchdog, THP, governor, SMT, hypervisor...) over a /proc and /sys root given as a parameter.
