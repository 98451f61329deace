//! TMA formula language (perf MetricExpr grammar): parser, evaluator, tree evaluation with per-node status, bottleneck selection. Pure, no unsafe.
