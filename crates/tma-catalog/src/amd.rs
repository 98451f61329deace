//! AMD Zen 4 and Zen 5 "pipeline utilization" tables, written by hand from the facts
//! (event codes, umasks and formulas) listed in `shared/pmu-data/README.md`, section 5.
//! Names of the nodes follow the metric names Linux perf uses for the same quantities, so
//! that users can compare; formulas, descriptions and thresholds are our own text.
//!
//! Values are percent of dispatch slots (×100), like the Intel TMA nodes.
//! `total_dispatch_slots` = dispatch width × unhalted core cycles (width 6 on Zen 4,
//! 8 on Zen 5, README 5.1 / 5.2). Shares of the slots divide plainly, so a
//! run with no cycles counted says "division by zero" instead of printing a tree of zeros; the
//! ratios between sub-events use `d_ratio` (0 when the denominator is 0), as the data defines.
//!
//! Thresholds (our choice, not from the data): a level-1 node is worth a look when it
//! takes more than 20% of the slots (10% for SMT contention, 15% for bad speculation;
//! retiring only above 70%, where the code is running well and the next win is in the
//! instruction mix). A level-2 node is flagged when it is above 10% and its parent is
//! flagged, so the bottleneck walk only descends below a flagged parent.
//!
//! Counters: Zen 4 and Zen 5 have 6 general-purpose core counters per thread
//! (kernel `AMD64_NUM_COUNTERS_CORE`, README section 5) and no fixed counters.

use crate::types::*;

/// An AMD core event: any of the 6 counters, not precise, no extra MSR.
const fn amd(name: &'static str, code: u16, umask: u8) -> EventDef {
    EventDef {
        name,
        code,
        umask,
        cmask: 0,
        inv: false,
        edge: false,
        any_thread: false,
        msr_index: 0,
        msr_value: 0,
        counter_mask: 0b11_1111,
        fixed: None,
        precise: false,
        taken_alone: false,
        kind: EventKind::Core,
        sample_after: 0,
    }
}

const fn node(
    name: &'static str,
    parent: Option<&'static str>,
    level: u8,
    formula: &'static str,
    threshold: &'static str,
    description: &'static str,
) -> NodeDef {
    NodeDef {
        name,
        parent,
        level,
        formula,
        threshold,
        locate_with: &[],
        description,
        unit: Unit::PercentSlots,
        count_domain: "Slots",
    }
}

static ZEN4_EVENTS: &[EventDef] = &[
    amd("ls_not_halted_cyc", 0x076, 0x00),
    amd("de_no_dispatch_per_slot.no_ops_from_frontend", 0x1A0, 0x01),
    amd("de_no_dispatch_per_slot.backend_stalls", 0x1A0, 0x1E),
    amd("de_no_dispatch_per_slot.smt_contention", 0x1A0, 0x60),
    amd("de_src_op_disp.all", 0x0AA, 0x07),
    amd("ex_ret_ops", 0x0C1, 0x00),
    amd("ex_ret_brn_misp", 0x0C3, 0x00),
    amd("resyncs_or_nc_redirects", 0x096, 0x00),
    amd("ex_no_retire.load_not_complete", 0x0D6, 0xA2),
    amd("ex_no_retire.not_complete", 0x0D6, 0x02),
    amd("ex_ret_ucode_ops", 0x1C2, 0x00),
];

static ZEN5_EVENTS: &[EventDef] = &[
    amd("ls_not_halted_cyc", 0x076, 0x00),
    amd("de_no_dispatch_per_slot.no_ops_from_frontend", 0x1A0, 0x01),
    amd("de_no_dispatch_per_slot.backend_stalls", 0x1A0, 0x1E),
    amd("de_no_dispatch_per_slot.smt_contention", 0x1A0, 0x60),
    amd("de_src_op_disp.all", 0x0AA, 0x07),
    amd("ex_ret_ops", 0x0C1, 0x00),
    amd("ex_ret_brn_misp", 0x0C3, 0x00),
    amd("bp_redirects.resync", 0x09F, 0x01),
    amd("ex_no_retire.load_not_complete", 0x0D6, 0xA2),
    amd("ex_no_retire.not_complete", 0x0D6, 0x02),
    amd("ex_ret_ucode_ops", 0x1C2, 0x00),
];

const D_FE: &str = "Slots the frontend left empty: dispatch had room but no ops arrived";
const D_BS: &str = "Slots spent on ops that were dispatched but never retired (wrong-path work)";
const D_BE: &str = "Slots lost because the backend (execution units, load/store, retire queue) could not accept ops";
const D_SMT: &str = "Slots given to the other SMT thread of the same core";
const D_RET: &str = "Slots that dispatched ops which went on to retire: useful work";

static ZEN4_NODES: &[NodeDef] = &[
    node("frontend_bound", None, 1,
        "100 * ( de_no_dispatch_per_slot.no_ops_from_frontend ) / total_dispatch_slots",
        "frontend_bound > 20", D_FE),
    node("bad_speculation", None, 1,
        "100 * ( de_src_op_disp.all - ex_ret_ops ) / total_dispatch_slots",
        "bad_speculation > 15", D_BS),
    node("backend_bound", None, 1,
        "100 * ( de_no_dispatch_per_slot.backend_stalls ) / total_dispatch_slots",
        "backend_bound > 20", D_BE),
    node("smt_contention", None, 1,
        "100 * ( de_no_dispatch_per_slot.smt_contention ) / total_dispatch_slots",
        "smt_contention > 10", D_SMT),
    node("retiring", None, 1,
        "100 * ( ex_ret_ops ) / total_dispatch_slots",
        "retiring > 70", D_RET),
    node("frontend_bound_latency", Some("frontend_bound"), 2,
        "100 * ( 6 * de_no_dispatch_per_slot.no_ops_from_frontend:c6 ) / total_dispatch_slots",
        "frontend_bound_latency > 10 & frontend_bound > 20",
        "Frontend slots lost in cycles where nothing at all arrived (fetch or decode stalled)"),
    node("frontend_bound_bandwidth", Some("frontend_bound"), 2,
        "100 * ( de_no_dispatch_per_slot.no_ops_from_frontend - 6 * de_no_dispatch_per_slot.no_ops_from_frontend:c6 ) / total_dispatch_slots",
        "frontend_bound_bandwidth > 10 & frontend_bound > 20",
        "Frontend slots lost in cycles where some, but fewer than 6, ops arrived"),
    node("bad_speculation_mispredicts", Some("bad_speculation"), 2,
        "bad_speculation * d_ratio(ex_ret_brn_misp, ex_ret_brn_misp + resyncs_or_nc_redirects)",
        "bad_speculation_mispredicts > 10 & bad_speculation > 15",
        "Wrong-path slots attributed to mispredicted branches"),
    node("bad_speculation_pipeline_restarts", Some("bad_speculation"), 2,
        "bad_speculation * d_ratio(resyncs_or_nc_redirects, ex_ret_brn_misp + resyncs_or_nc_redirects)",
        "bad_speculation_pipeline_restarts > 10 & bad_speculation > 15",
        "Wrong-path slots attributed to pipeline restarts (resyncs, memory ordering) rather than branches"),
    node("backend_bound_memory", Some("backend_bound"), 2,
        "backend_bound * d_ratio(ex_no_retire.load_not_complete, ex_no_retire.not_complete)",
        "backend_bound_memory > 10 & backend_bound > 20",
        "Backend slots lost while the oldest op waited for a load: cache and memory latency"),
    node("backend_bound_cpu", Some("backend_bound"), 2,
        "backend_bound * (1 - d_ratio(ex_no_retire.load_not_complete, ex_no_retire.not_complete))",
        "backend_bound_cpu > 10 & backend_bound > 20",
        "Backend slots lost for reasons other than loads: busy execution units, long dependency chains"),
    node("retiring_fastpath", Some("retiring"), 2,
        "retiring * (1 - d_ratio(ex_ret_ucode_ops, ex_ret_ops))",
        "retiring_fastpath > 10 & retiring > 70",
        "Retired ops that came straight from the decoders or op cache"),
    node("retiring_microcode", Some("retiring"), 2,
        "retiring * d_ratio(ex_ret_ucode_ops, ex_ret_ops)",
        "retiring_microcode > 10 & retiring > 70",
        "Retired ops that came from the microcode sequencer (complex instructions)"),
];

static ZEN5_NODES: &[NodeDef] = &[
    node("frontend_bound", None, 1,
        "100 * ( de_no_dispatch_per_slot.no_ops_from_frontend ) / total_dispatch_slots",
        "frontend_bound > 20", D_FE),
    node("bad_speculation", None, 1,
        "100 * ( de_src_op_disp.all - ex_ret_ops ) / total_dispatch_slots",
        "bad_speculation > 15", D_BS),
    node("backend_bound", None, 1,
        "100 * ( de_no_dispatch_per_slot.backend_stalls ) / total_dispatch_slots",
        "backend_bound > 20", D_BE),
    node("smt_contention", None, 1,
        "100 * ( de_no_dispatch_per_slot.smt_contention ) / total_dispatch_slots",
        "smt_contention > 10", D_SMT),
    node("retiring", None, 1,
        "100 * ( ex_ret_ops ) / total_dispatch_slots",
        "retiring > 70", D_RET),
    node("frontend_bound_by_latency", Some("frontend_bound"), 2,
        "100 * ( 8 * de_no_dispatch_per_slot.no_ops_from_frontend:c8 ) / total_dispatch_slots",
        "frontend_bound_by_latency > 10 & frontend_bound > 20",
        "Frontend slots lost in cycles where nothing at all arrived (fetch or decode stalled)"),
    node("frontend_bound_by_bandwidth", Some("frontend_bound"), 2,
        "100 * ( de_no_dispatch_per_slot.no_ops_from_frontend - 8 * de_no_dispatch_per_slot.no_ops_from_frontend:c8 ) / total_dispatch_slots",
        "frontend_bound_by_bandwidth > 10 & frontend_bound > 20",
        "Frontend slots lost in cycles where some, but fewer than 8, ops arrived"),
    node("bad_speculation_from_mispredicts", Some("bad_speculation"), 2,
        "bad_speculation * d_ratio(ex_ret_brn_misp, ex_ret_brn_misp + bp_redirects.resync)",
        "bad_speculation_from_mispredicts > 10 & bad_speculation > 15",
        "Wrong-path slots attributed to mispredicted branches"),
    node("bad_speculation_from_pipeline_restarts", Some("bad_speculation"), 2,
        "bad_speculation * d_ratio(bp_redirects.resync, ex_ret_brn_misp + bp_redirects.resync)",
        "bad_speculation_from_pipeline_restarts > 10 & bad_speculation > 15",
        "Wrong-path slots attributed to pipeline restarts (resyncs) rather than branches"),
    node("backend_bound_by_memory", Some("backend_bound"), 2,
        "backend_bound * d_ratio(ex_no_retire.load_not_complete, ex_no_retire.not_complete)",
        "backend_bound_by_memory > 10 & backend_bound > 20",
        "Backend slots lost while the oldest op waited for a load: cache and memory latency"),
    node("backend_bound_by_cpu", Some("backend_bound"), 2,
        "backend_bound * (1 - d_ratio(ex_no_retire.load_not_complete, ex_no_retire.not_complete))",
        "backend_bound_by_cpu > 10 & backend_bound > 20",
        "Backend slots lost for reasons other than loads: busy execution units, long dependency chains"),
    node("retiring_from_fastpath", Some("retiring"), 2,
        "retiring * (1 - d_ratio(ex_ret_ucode_ops, ex_ret_ops))",
        "retiring_from_fastpath > 10 & retiring > 70",
        "Retired ops that came straight from the decoders or op cache"),
    node("retiring_from_microcode", Some("retiring"), 2,
        "retiring * d_ratio(ex_ret_ucode_ops, ex_ret_ops)",
        "retiring_from_microcode > 10 & retiring > 70",
        "Retired ops that came from the microcode sequencer (complex instructions)"),
];

static ZEN4_METRICS: &[MetricDef] = &[
    MetricDef {
        name: "total_dispatch_slots",
        formula: "6 * ls_not_halted_cyc",
        description: "Dispatch slots available: 6 per unhalted core cycle",
        unit: Unit::Number,
        group: "Thread",
        perf_groups: "",
    },
    MetricDef {
        name: "ipc",
        formula: "ex_ret_ops / ls_not_halted_cyc",
        description: "Retired macro-ops per unhalted core cycle",
        unit: Unit::Number,
        group: "Thread",
        perf_groups: "",
    },
];

static ZEN5_METRICS: &[MetricDef] = &[
    MetricDef {
        name: "total_dispatch_slots",
        formula: "8 * ls_not_halted_cyc",
        description: "Dispatch slots available: 8 per unhalted core cycle",
        unit: Unit::Number,
        group: "Thread",
        perf_groups: "",
    },
    MetricDef {
        name: "ipc",
        formula: "ex_ret_ops / ls_not_halted_cyc",
        description: "Retired macro-ops per unhalted core cycle",
        unit: Unit::Number,
        group: "Thread",
        perf_groups: "",
    },
];

/// AMD Zen 4 (family 0x19 outside the Zen 3 models).
pub static ZEN4: Model = Model {
    key: "zen4",
    name: "AMD Zen 4",
    vendor: Vendor::Amd,
    core_kind: CoreKind::Uniform,
    pmu: "cpu",
    source: "hand-written from the Zen 4 pipeline-utilization facts, pmu-data README 5.1",
    // The kernel AMD files give no TMA version (pipeline utilization, not a TMA release).
    tma_version: None,
    slots_per_cycle: 6,
    gp_counters: 6,
    fixed_counters: 0,
    topdown: Topdown::Generic,
    events: ZEN4_EVENTS,
    nodes: ZEN4_NODES,
    metrics: ZEN4_METRICS,
    retire_latencies: &[],
};

/// AMD Zen 5 (family 0x1A, models 0x00-0x2F, 0x40-0x4F, 0x60-0x7F).
pub static ZEN5: Model = Model {
    key: "zen5",
    name: "AMD Zen 5",
    vendor: Vendor::Amd,
    core_kind: CoreKind::Uniform,
    pmu: "cpu",
    source: "hand-written from the Zen 5 pipeline-utilization facts, pmu-data README 5.2",
    // The kernel AMD files give no TMA version (pipeline utilization, not a TMA release).
    tma_version: None,
    slots_per_cycle: 8,
    gp_counters: 6,
    fixed_counters: 0,
    topdown: Topdown::Generic,
    events: ZEN5_EVENTS,
    nodes: ZEN5_NODES,
    metrics: ZEN5_METRICS,
    retire_latencies: &[],
};
