//! One-line descriptions, in our own words, of the Intel TMA tree nodes of levels 1 to 3.
//! Node names repeat across platforms, so the table is keyed by name. `cargo xtask
//! gen-tables` reads this file (through `#[path]`) and writes the text into the generated
//! tables; nodes deeper than level 3 get a neutral generated line instead.
//! This file must stay self-contained (no `crate::` paths) for that reason.

/// `(node name, description)`, sorted by level then name.
pub static NODE_DESCRIPTIONS: &[(&str, &str)] = &[
    // Level 1
    ("Backend_Bound", "Slots where ops were ready to issue but the backend had no room: waiting on data or on busy execution resources"),
    ("Bad_Speculation", "Slots spent on ops that never retired (wrong-path work after mispredicts or machine clears) and on the recovery"),
    ("Frontend_Bound", "Slots the frontend left empty although the backend could have accepted ops"),
    ("Retiring", "Slots that delivered ops which retired: useful work"),
    // Level 2
    ("Branch_Mispredicts", "Wrong-path slots caused by mispredicted branches, including the refill after them"),
    ("Core_Bound", "Backend stalls not caused by memory: busy or serialized execution units, dividers, port pressure"),
    ("Fetch_Bandwidth", "Frontend slots lost while ops were arriving, but fewer than the pipeline width per cycle"),
    ("Fetch_Latency", "Frontend slots lost in cycles where no ops arrived at all (i-cache, iTLB, resteers, switches)"),
    ("Heavy_Operations", "Retired slots taken by instructions that need several ops or the microcode sequencer"),
    ("Light_Operations", "Retired slots taken by simple instructions that decode into a single op"),
    ("Machine_Clears", "Wrong-path slots caused by pipeline flushes other than branch mispredicts (memory ordering, self-modifying code, assists)"),
    ("Memory_Bound", "Backend stalls where the pipeline waited on loads or stores to the memory hierarchy"),
    // Level 3
    ("AMX_Busy", "Cycles the AMX matrix unit was busy, holding up the rest of the core"),
    ("Branch_Instructions", "Retired slots taken by branch instructions"),
    ("Branch_Resteers", "Fetch stalls while the frontend was redirected to a new branch target"),
    ("Cond_NT_Mispredicts", "Mispredicted conditional branches that were not taken"),
    ("Cond_TK_Mispredicts", "Mispredicted conditional branches that were taken"),
    ("DRAM_Bound", "Load stalls served from local or remote DRAM after missing every cache level"),
    ("DSB", "Fetch bandwidth limits of the decoded-op cache (DSB) path"),
    ("DSB_Switches", "Fetch stalls when delivery switched from the decoded-op cache to the legacy decoders"),
    ("Divider", "Cycles the integer or floating-point divider was busy"),
    ("FP_Arith", "Retired slots taken by floating-point arithmetic ops (scalar, vector and x87)"),
    ("Few_Uops_Instructions", "Retired slots of instructions decoding into a few (two to four) ops, without microcode"),
    ("Fused_Instructions", "Retired slots of macro-fused instruction pairs (compare or test fused with a branch)"),
    ("ICache_Misses", "Fetch stalls waiting for instruction bytes that missed the L1 instruction cache"),
    ("ITLB_Misses", "Fetch stalls on instruction address translation misses"),
    ("Ind_Call_Mispredicts", "Mispredicted indirect calls"),
    ("Ind_Jump_Mispredicts", "Mispredicted indirect jumps (excluding calls and returns)"),
    ("Int_Operations", "Retired slots of integer vector operations"),
    ("L1_Bound", "Load stalls even though the data hit the L1 data cache (latency, TLB, blocked forwarding, splits)"),
    ("L2_Bound", "Load stalls on data found in the L2 cache"),
    ("L3_Bound", "Load stalls on data found in the shared last-level cache, including sharing between cores"),
    ("L3_Miss_Bound", "Load stalls on data that missed the last-level cache"),
    ("LCP", "Decode stalls on length-changing prefixes (for example 16-bit immediates)"),
    ("LSD", "Fetch bandwidth limits while ops came from the loop stream detector"),
    ("MITE", "Fetch bandwidth limits of the legacy decode path (MITE)"),
    ("MS", "Fetch bandwidth limits while the microcode sequencer supplied ops"),
    ("MS_Switches", "Fetch stalls when switching into the microcode sequencer"),
    ("Memory_Operations", "Retired slots of load and store ops"),
    ("Microcode_Sequencer", "Retired slots whose ops came from the microcode sequencer (complex instructions, assists)"),
    ("Nop_Instructions", "Retired slots of NOP instructions (padding, alignment)"),
    ("Non_Fused_Branches", "Retired slots of branches that were not macro-fused"),
    ("Other_Light_Ops", "Retired slots of simple ops not in the other light-operation groups"),
    ("Other_Mispredicts", "Branch mispredicts not tied to a specific branch type, for example on non-retired branches"),
    ("Other_Nukes", "Machine clears other than memory-ordering ones"),
    ("Ports_Utilization", "Cycles with few execution ports busy, usually from dependency chains or low parallelism"),
    ("Ret_Mispredicts", "Mispredicted return instructions"),
    ("Serializing_Operation", "Stalls from serializing instructions and waits (fences, PAUSE, TPAUSE/UMWAIT, register writes)"),
    ("Store_Bound", "Stalls because the store buffer was full or stores were slow to commit"),
];

/// Our description of a node, `None` when the table has no entry for the name.
pub fn describe(name: &str) -> Option<&'static str> {
    NODE_DESCRIPTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
}

/// `(metric name, description)` for the helper metrics most users read; the converter
/// writes a neutral line derived from the name for the others.
pub static METRIC_DESCRIPTIONS: &[(&str, &str)] = &[
    ("Bottleneck_Big_Code", "Estimated cost, in percent of slots, of a large code footprint (i-cache and iTLB pressure)"),
    ("Bottleneck_Branching_Overhead", "Estimated cost of executing branch instructions themselves (calls, returns, jumps)"),
    ("Bottleneck_Cache_Memory_Bandwidth", "Estimated cost of limited cache or memory bandwidth"),
    ("Bottleneck_Cache_Memory_Latency", "Estimated cost of cache and memory access latency"),
    ("Bottleneck_Compute_Bound_Est", "Estimated cost of execution-unit limits (ports, dividers) not explained by memory"),
    ("Bottleneck_Data_Cache_Memory_Bandwidth", "Estimated cost of limited data-cache or memory bandwidth"),
    ("Bottleneck_Data_Cache_Memory_Latency", "Estimated cost of data-cache and memory access latency"),
    ("Bottleneck_Instruction_Fetch_BW", "Estimated cost of the frontend not delivering enough ops per cycle"),
    ("Bottleneck_Irregular_Overhead", "Estimated cost of irregular events: microcode assists, machine clears, serializing work"),
    ("Bottleneck_Memory_Data_TLBs", "Estimated cost of data address-translation misses"),
    ("Bottleneck_Memory_Synchronization", "Estimated cost of synchronization: locks, cache-line sharing, memory-ordering clears"),
    ("Bottleneck_Mispredictions", "Estimated total cost of branch mispredictions, frontend refill included"),
    ("Bottleneck_Other_Bottlenecks", "Slots not explained by the other bottleneck estimates"),
    ("Bottleneck_Useful_Work", "Slots that retired useful (non-overhead) work"),
    ("Info_Core_CORE_CLKS", "Unhalted core cycles, counting both SMT threads of a core once"),
    ("Info_Core_CoreIPC", "Instructions retired per core cycle (both SMT threads together)"),
    ("Info_Core_ILP", "Average number of ops executed per cycle when at least one executed"),
    ("Info_System_CPU_Utilization", "Share of time the measured CPUs were not halted"),
    ("Info_System_Core_Frequency", "Average frequency of the unhalted cores, in GHz"),
    ("Info_System_Kernel_Utilization", "Share of unhalted cycles spent in kernel mode"),
    ("Info_System_SMT_2T_Utilization", "Share of core cycles where both SMT threads were active"),
    ("Info_System_Time", "Wall-clock duration of the measurement, in seconds"),
    ("Info_System_Turbo_Utilization", "Ratio of actual to base (TSC) clock while unhalted"),
    ("Info_Thread_CLKS", "Unhalted cycles of this logical CPU"),
    ("Info_Thread_CPI", "Cycles per instruction retired"),
    ("Info_Thread_IPC", "Instructions retired per unhalted cycle"),
    ("Info_Thread_SLOTS", "Pipeline slots available to this logical CPU: issue width times cycles"),
    ("Info_Thread_UopPI", "Ops retired per instruction retired"),
];

/// Our description of a helper metric, `None` when the table has no entry.
pub fn describe_metric(name: &str) -> Option<&'static str> {
    METRIC_DESCRIPTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
}
