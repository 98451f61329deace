//! One-line descriptions, in our own words, of the Intel TMA tree nodes (all levels).
//! Node names repeat across platforms, so the table is keyed by name. `cargo xtask
//! gen-tables` reads this file (through `#[path]`) and writes the text into the generated
//! tables; it refuses to run when a level 1-3 node has no entry, and gives deeper nodes
//! without one a neutral generated line.
//! This file must stay self-contained (no `crate::` paths) for that reason.

/// `(perfmon node name, description)`, grouped by level (1, 2, 3, then 4 and deeper).
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
    // Level 4 and deeper (the converter falls back to a neutral line for names not here)
    ("4K_Aliasing", "Loads falsely delayed because their address matched an older store modulo 4 KiB"),
    ("ALU_Op_Utilization", "Cycles the integer/vector ALU ports were busy executing ops"),
    ("AVX_Assists", "Microcode assists for mixing SSE and AVX code (state transitions)"),
    ("Assists", "Microcode assists: rare cases (denormals, page-table A/D bits, ...) handled by microcode"),
    ("C01_Wait", "Cycles spent in the light C0.1 wait state (UMWAIT/TPAUSE)"),
    ("C02_Wait", "Cycles spent in the deeper C0.2 wait state (UMWAIT/TPAUSE)"),
    ("CISC", "Retired slots of complex instructions that the microcode sequencer expands"),
    ("Clears_Resteers", "Frontend resteers after machine clears"),
    ("Code_L2_Hit", "Instruction fetch stalls where the code was found in L2"),
    ("Code_L2_Miss", "Instruction fetch stalls where the code missed L2"),
    ("Code_STLB_Hit", "Instruction address translations that missed the first-level iTLB but hit the STLB"),
    ("Code_STLB_Miss", "Instruction address translations that missed the STLB and needed a page walk"),
    ("Code_STLB_Miss_2M", "Code page walks for 2 MiB pages"),
    ("Code_STLB_Miss_4K", "Code page walks for 4 KiB pages"),
    ("Contested_Accesses", "Loads that hit a line another core had modified (true or false sharing)"),
    ("DTLB_Load", "Load address translations that missed the first-level data TLB"),
    ("DTLB_Store", "Store address translations that missed the first-level data TLB"),
    ("Data_Sharing", "Loads of lines another core held unmodified (clean sharing)"),
    ("Decoder0_Alone", "Legacy-decode cycles where only the first decoder could work (complex instructions)"),
    ("FB_Full", "Stalls because the L1 fill buffers were all busy with outstanding misses"),
    ("FP_Assists", "Microcode assists for floating-point corner cases such as denormals"),
    ("FP_Divider", "Cycles the floating-point divider was busy"),
    ("FP_Scalar", "Retired slots of scalar floating-point ops"),
    ("FP_Vector", "Retired slots of vector floating-point ops (any width)"),
    ("FP_Vector_128b", "Retired slots of 128-bit vector floating-point ops"),
    ("FP_Vector_256b", "Retired slots of 256-bit vector floating-point ops"),
    ("FP_Vector_512b", "Retired slots of 512-bit vector floating-point ops"),
    ("False_Sharing", "Stores to lines that another core was also writing (different data, same line)"),
    ("INT_Divider", "Cycles the integer divider was busy"),
    ("Int_Vector_128b", "Retired slots of 128-bit integer vector ops"),
    ("Int_Vector_256b", "Retired slots of 256-bit integer vector ops"),
    ("L1_Latency_Dependency", "Stalls on L1 hits whose latency sits on a dependency chain (pointer chasing)"),
    ("L2_Hit_Latency", "Stalls on loads that hit L2, from its latency"),
    ("L3_Hit_Latency", "Stalls on loads that hit the last-level cache, from its latency"),
    ("Load_Op_Utilization", "Cycles the load ports were busy"),
    ("Load_STLB_Hit", "Load address translations that missed the first-level DTLB but hit the STLB"),
    ("Load_STLB_Miss", "Load address translations that missed the STLB and needed a page walk"),
    ("Load_STLB_Miss_1G", "Load page walks for 1 GiB pages"),
    ("Load_STLB_Miss_2M", "Load page walks for 2 MiB pages"),
    ("Load_STLB_Miss_4K", "Load page walks for 4 KiB pages"),
    ("Local_MEM", "Stalls on loads served by memory attached to the local socket"),
    ("Lock_Latency", "Stalls on locked (atomic) instructions and the cache-line locks they take"),
    ("MBA_Stalls", "Stalls from memory-bandwidth allocation (MBA) throttling"),
    ("MEM_Bandwidth", "Memory stalls while many requests were outstanding: limited by bandwidth"),
    ("MEM_Latency", "Memory stalls with few requests outstanding: limited by latency"),
    ("MITE_4wide", "Legacy-decode cycles where up to four decoders worked in parallel"),
    ("Memory_Fence", "Stalls on memory fences (for example LFENCE/MFENCE)"),
    ("Mispredicts_Resteers", "Frontend resteers after branch mispredicts"),
    ("Mixing_Vectors", "Slowdowns from mixing vector widths (for example 256-bit and 512-bit code)"),
    ("Page_Faults", "Microcode assists taken on page faults"),
    ("Port_0", "Cycles execution port 0 (ALU, branch, divider) dispatched an op"),
    ("Port_1", "Cycles execution port 1 (ALU, multiply) dispatched an op"),
    ("Port_2", "Cycles load port 2 dispatched an op"),
    ("Port_3", "Cycles load port 3 dispatched an op"),
    ("Port_4", "Cycles store-data port 4 dispatched an op"),
    ("Port_5", "Cycles execution port 5 (ALU, shuffle) dispatched an op"),
    ("Port_6", "Cycles execution port 6 (ALU, branch) dispatched an op"),
    ("Port_7", "Cycles store-address port 7 dispatched an op"),
    ("Ports_Utilized_0", "Cycles no op was executed on any port while the backend was stalled"),
    ("Ports_Utilized_1", "Cycles exactly one port executed an op"),
    ("Ports_Utilized_2", "Cycles exactly two ports executed ops"),
    ("Ports_Utilized_3m", "Cycles three or more ports executed ops"),
    ("Remote_Cache", "Stalls on loads served from a cache of another socket"),
    ("Remote_MEM", "Stalls on loads served by memory attached to another socket"),
    ("SQ_Full", "Stalls because the super queue of outstanding L2 misses was full"),
    ("Shuffles_256b", "Retired slots of 256-bit shuffle ops"),
    ("Slow_Pause", "Cycles spent in PAUSE instructions"),
    ("Split_Loads", "Loads that crossed a cache-line boundary"),
    ("Split_Stores", "Stores that crossed a cache-line boundary"),
    ("Store_Fwd_Blk", "Loads that could not take their data from an older overlapping store"),
    ("Store_Latency", "Stalls waiting for stores (RFO misses) to complete"),
    ("Store_Op_Utilization", "Cycles the store ports were busy"),
    ("Store_STLB_Hit", "Store address translations that missed the first-level DTLB but hit the STLB"),
    ("Store_STLB_Miss", "Store address translations that missed the STLB and needed a page walk"),
    ("Store_STLB_Miss_1G", "Store page walks for 1 GiB pages"),
    ("Store_STLB_Miss_2M", "Store page walks for 2 MiB pages"),
    ("Store_STLB_Miss_4K", "Store page walks for 4 KiB pages"),
    ("Streaming_Stores", "Cost of non-temporal (streaming) stores"),
    ("Unknown_Branches", "Frontend resteers for branches the predictor had not seen before"),
    ("X87_Use", "Retired slots of legacy x87 floating-point ops"),
];

/// Our description of a node, `None` when the table has no entry for the name.
pub fn describe(name: &str) -> Option<&'static str> {
    NODE_DESCRIPTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
}

/// `(node name, description)` for the E-core (`cpu_atom`, Gracemont / Crestmont) trees, in our
/// own words. Kept apart from [`NODE_DESCRIPTIONS`] because some names are shared with the
/// P-core trees but the E-core node measures something else (e.g. `Core_Bound` is the
/// allocation-restriction count there). The converter refuses to write an E-core node that
/// has no entry here.
pub static ECORE_NODE_DESCRIPTIONS: &[(&str, &str)] = &[
    // Level 1
    ("Frontend_Bound", "Issue slots left empty because the frontend delivered no op for them"),
    ("Bad_Speculation", "Issue slots used by ops that were later thrown away (mispredicts, clears), or lost to their recovery"),
    ("Backend_Bound", "Issue slots left empty because the backend could not take more ops (full buffers, busy schedulers)"),
    ("Retiring", "Issue slots whose ops went on to retire: useful work"),
    // Level 2
    ("Ifetch_Latency", "Frontend slots lost waiting for instruction bytes or a new fetch address (cache, TLB, branch redirects)"),
    ("Ifetch_Bandwidth", "Frontend slots lost while fetch worked but decode could not supply a full allocation width"),
    ("Branch_Mispredicts", "Slots wasted on the wrong path after a mispredicted branch"),
    ("Machine_Clears", "Slots wasted when the pipeline was flushed for a reason other than a branch mispredict"),
    ("Core_Bound", "Backend slots lost to allocation restrictions (ops that cannot allocate together in one cycle)"),
    ("Resource_Bound", "Backend slots lost because a backend resource (scheduler, register file, reorder buffer) was full or serialized"),
    // Level 3
    ("ICache_Misses", "Frontend slots lost to instruction-cache misses"),
    ("ITLB_Misses", "Frontend slots lost to instruction address-translation (iTLB) misses"),
    ("Branch_Detect", "Frontend slots lost when a later frontend predictor corrected the branch target buffer (a wrong or missing BTB prediction)"),
    ("Branch_Resteer", "Frontend slots lost redirecting fetch when the branch target buffer predicted a taken branch"),
    ("CISC", "Frontend slots lost while the microcode sequencer supplied ops for complex instructions"),
    ("Decode", "Frontend slots lost to decoder limits"),
    ("Predecode", "Frontend slots lost when instruction boundaries were predecoded wrongly and had to be redone"),
    ("Other_FB", "Frontend bandwidth slots lost for reasons the other frontend-bandwidth nodes do not cover"),
    ("Nuke", "Slots wasted by machine clears that need microcode to recover (slow clears, e.g. self-modifying code, assists)"),
    ("Fast_Nuke", "Slots wasted by machine clears recovered without microcode (memory ordering, disambiguation, renaming)"),
    ("Allocation_Restriction", "Backend slots lost because ops of one cycle could not allocate together"),
    ("Mem_Scheduler", "Backend slots lost because the memory-op (load/store) scheduler was full"),
    ("Non_Mem_Scheduler", "Backend slots lost because an integer, floating-point or vector scheduler was full"),
    ("Register", "Backend slots lost because no physical register was free"),
    ("Reorder_Buffer", "Backend slots lost because the reorder buffer was full, often behind a long-latency load"),
    ("Serialization", "Backend slots lost while serializing operations made allocation wait (scoreboards of the instruction queue, jump unit or microcode)"),
];

/// Our description of an E-core tree node, `None` when the table has no entry.
pub fn describe_ecore(name: &str) -> Option<&'static str> {
    ECORE_NODE_DESCRIPTIONS
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
