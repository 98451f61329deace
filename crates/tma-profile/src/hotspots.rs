//! From sample counts to the report: hot functions, annotated instructions, call stacks.

use std::collections::HashMap;

use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, Instruction, IntelFormatter};
use serde::{Deserialize, Serialize};

use crate::aggregate::{Aggregator, Counts, Frame, Task, TaskId};
use crate::symbols::Symbolizer;

/// The module of kernel frames, named as `perf report` names it.
pub const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// Assembly syntax of the annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Syntax {
    #[default]
    Intel,
    Att,
}

/// A column the function table groups by (`--sort comm,dso,sym`, as perf report's keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    /// The sampled thread's command name.
    Comm,
    /// The process id (shown as `pid:comm`, as perf does).
    Pid,
    /// The module (shared object): `libc.so.6`, `[kernel.kallsyms]`, `[unknown]`.
    Dso,
    /// The function.
    Sym,
}

impl SortKey {
    /// Parse perf's comma-separated key list (`comm,dso,sym`; `symbol` and
    /// `shared_object` are accepted too).
    pub fn parse_list(text: &str) -> Result<Vec<SortKey>, String> {
        let mut keys = Vec::new();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let k = match word.to_ascii_lowercase().as_str() {
                "comm" => SortKey::Comm,
                "pid" => SortKey::Pid,
                "dso" | "shared_object" => SortKey::Dso,
                "sym" | "symbol" => SortKey::Sym,
                _ => {
                    return Err(format!(
                        "unknown sort key {word:?}: choose from comm, pid, dso, sym \
                         (comma-separated, e.g. --sort comm,dso,sym)"
                    ))
                }
            };
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        if keys.is_empty() {
            return Err("--sort needs at least one key: comm, pid, dso or sym".into());
        }
        Ok(keys)
    }
}

/// What to put in the report.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Annotate this function instead of the hottest one.
    pub annotate: Option<String>,
    pub syntax: Syntax,
    /// Rows in the function table (0 = all).
    pub top: usize,
    /// What a row of the function table is; empty: `dso,sym`.
    pub sort: Vec<SortKey>,
    /// Add the children column (samples with the row anywhere in their call chain) and
    /// order by it, when call chains were recorded.
    pub children: bool,
    /// Skip the source file and line of every frame (only pprof shows them; the annotated
    /// function always gets its lines). Reading a large library's DWARF is most of the
    /// symbolization time.
    pub no_frame_lines: bool,
}

/// A resolved stack frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedFrame {
    /// Function name, `[kernel]`, or `[unknown] 0xADDR` when no symbol covers the address.
    pub function: String,
    /// Module file name (`libc.so.6`), `[kernel.kallsyms]` ([`KERNEL_MODULE`]) or `[unknown]`.
    pub module: String,
    /// Full module path as recorded, when the frame is in a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module_path: Option<String>,
    /// SVMA in the module (or the raw address for kernel/unknown frames).
    pub address: u64,
    /// Start of the function symbol, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_start: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// One row of the hot-function table: a function, or what the sort keys group (then
/// `function` and `module` are empty when `sym` and `dso` are not among them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionRow {
    pub function: String,
    pub module: String,
    /// The command name, when sorting by comm or pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// The process id, when sorting by pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// Samples whose leaf (sampled instruction) is in this function ("self").
    pub samples: u64,
    /// Share of all samples, in percent.
    pub percent: f64,
    /// Samples with this function anywhere in their call chain, counted once per sample
    /// (with children shown and call chains recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children_percent: Option<f64>,
}

/// One distinct call stack of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    /// Indices into [`Profile::frames`], leaf first.
    pub frames: Vec<usize>,
    pub samples: u64,
    /// Index into [`Profile::tasks`].
    pub task: TaskId,
    /// With group sampling: the increases of the read group's values charged to this stack
    /// (named by [`Profile::value_names`]); empty otherwise.
    pub values: Vec<u64>,
}

/// One disassembled instruction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InsnRow {
    pub address: u64,
    pub text: String,
    pub samples: u64,
    /// Share of the function's samples, in percent.
    pub percent: f64,
    pub hottest: bool,
    /// Source location, when DWARF line tables exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The source line's text, when the file is readable here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The disassembly of one function with per-instruction samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    pub function: String,
    pub module: String,
    pub start: u64,
    pub size: u64,
    pub syntax: Syntax,
    /// Samples in the function.
    pub samples: u64,
    pub instructions: Vec<InsnRow>,
}

/// Samples of one thread whose previous sample was charged to another frame.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Transition {
    /// The previous sample's frame (index into [`Profile::frames`]).
    pub from: usize,
    /// This sample's frame.
    pub to: usize,
    pub samples: u64,
    /// The increases these samples were charged (as [`Stack::values`]).
    pub values: Vec<u64>,
}

/// The analysed profile: the `tma.locate` document (v1, less its envelope), written by
/// [`crate::render::json`] and read back by `tma diff` and `tma report`; the parts after
/// `notes` are not in the document (empty when read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub event: String,
    pub counts: Counts,
    pub functions: Vec<FunctionRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotation: Option<Annotation>,
    pub notes: Vec<String>,
    /// Distinct frames; stacks refer to them by index.
    #[serde(skip)]
    pub frames: Vec<ResolvedFrame>,
    /// Distinct (task, stack) pairs with their samples.
    #[serde(skip)]
    pub stacks: Vec<Stack>,
    /// The processes/threads stacks refer to.
    #[serde(skip)]
    pub tasks: Vec<Task>,
    /// The sort keys of `functions` (for the renderer's columns).
    #[serde(skip)]
    pub sort: Vec<SortKey>,
    /// Modules with their recorded paths, address range and build ids (for pprof).
    #[serde(skip)]
    pub modules: Vec<crate::aggregate::Module>,
    /// With group sampling: the names of [`Stack::values`], in read-group order.
    #[serde(skip)]
    pub value_names: Vec<String>,
    /// With group sampling: consecutive samples of one thread whose charged frames differ.
    #[serde(skip)]
    pub transitions: Vec<Transition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FuncKey {
    Sym { module: u32, start: u64 },
    Addr { module: u32, svma: u64 },
    Kernel(Option<String>),
    Unknown(u64),
}

/// Resolve every frame, count samples per function and annotate the chosen function.
pub fn analyze(
    agg: &Aggregator,
    sym: &mut Symbolizer,
    event: &str,
    opts: &ReportOptions,
) -> Profile {
    let modules = agg.modules();
    let mut notes = Vec::new();
    let mut frame_index: HashMap<Frame, usize> = HashMap::new();
    let mut frames: Vec<ResolvedFrame> = Vec::new();
    let mut keys: Vec<FuncKey> = Vec::new();
    // Per-module facts for notes.
    let mut stripped: Vec<String> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    let mut mismatched: Vec<String> = Vec::new();

    let mut stacks: Vec<Stack> = Vec::with_capacity(agg.stack_count());
    let mut sorted: Vec<(&Vec<Frame>, TaskId, u64)> =
        agg.stacks().map(|(t, st, n)| (st, t, n)).collect();
    sorted.sort_unstable();
    for (stack, task, n) in sorted {
        let mut idx = Vec::with_capacity(stack.len());
        for f in stack {
            let i = match frame_index.get(f) {
                Some(&i) => i,
                None => {
                    let (rf, key) = resolve_frame(
                        *f,
                        modules,
                        sym,
                        !opts.no_frame_lines,
                        &mut stripped,
                        &mut unreadable,
                        &mut mismatched,
                    );
                    frames.push(rf);
                    keys.push(key);
                    frame_index.insert(*f, frames.len() - 1);
                    frames.len() - 1
                }
            };
            idx.push(i);
        }
        let values = agg
            .group()
            .and_then(|g| g.values.get(&(task, stack.clone())))
            .cloned()
            .unwrap_or_default();
        stacks.push(Stack {
            frames: idx,
            samples: n,
            task,
            values,
        });
    }

    // Leaf samples per function and per instruction.
    let total = agg.counts().samples;
    let mut per_func: HashMap<&FuncKey, (u64, usize)> = HashMap::new();
    let mut per_addr: HashMap<(String, u64), u64> = HashMap::new();
    for Stack {
        frames: idx,
        samples: n,
        ..
    } in &stacks
    {
        let Some(&leaf) = idx.first() else { continue };
        let e = per_func.entry(&keys[leaf]).or_insert((0, leaf));
        e.0 += n;
        if let Some(p) = &frames[leaf].module_path {
            *per_addr
                .entry((p.clone(), frames[leaf].address))
                .or_default() += n;
        }
    }
    let mut rows: Vec<(u64, usize)> = per_func.values().copied().collect();
    rows.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| frames[a.1].function.cmp(&frames[b.1].function))
    });
    let sort = if opts.sort.is_empty() {
        vec![SortKey::Dso, SortKey::Sym]
    } else {
        opts.sort.clone()
    };
    let children = opts.children && agg.has_callchains();
    if opts.children && !agg.has_callchains() && total > 0 {
        notes.push("no call chains were recorded (-g): only self samples are shown".into());
    }
    let functions = table_rows(
        &stacks,
        &frames,
        &keys,
        agg.tasks(),
        &sort,
        children,
        total,
        opts.top,
    );

    // Which function to annotate.
    // A function asked for by name but without samples is still disassembled when one of
    // the sampled modules defines it.
    let mut unsampled: Option<(String, String, crate::symbols::Symbol)> = None;
    let target: Option<usize> = match &opts.annotate {
        Some(name) => {
            let found = rows
                .iter()
                .find(|&&(_, leaf)| name_matches(&frames[leaf].function, name));
            match found {
                Some(&(_, leaf)) => Some(leaf),
                None => {
                    for md in modules {
                        if let Ok(m) = sym.module(&md.path) {
                            if let Some(s) = m.symbol_named(name) {
                                unsampled =
                                    Some((md.path.clone(), md.name().to_string(), s.clone()));
                                break;
                            }
                        }
                    }
                    if unsampled.is_none() {
                        notes.push(format!(
                            "no function named {name:?} in the sampled modules: nothing to annotate"
                        ));
                    }
                    None
                }
            }
        }
        None => rows
            .iter()
            .find(|&&(_, leaf)| frames[leaf].function_start.is_some())
            .map(|&(_, leaf)| leaf),
    };
    let annotation = target.and_then(|leaf| {
        let f = &frames[leaf];
        let path = f.module_path.clone()?;
        let start = f.function_start?;
        let m = sym.module(&path).ok()?;
        let s = m.symbol_at(start)?.clone();
        let bytes = m.bytes_at(s.start, s.size)?;
        Some(annotate(
            m,
            &s,
            bytes,
            &f.module,
            |a| per_addr.get(&(path.clone(), a)).copied().unwrap_or(0),
            opts.syntax,
        ))
    });
    let annotation = annotation.or_else(|| {
        let (path, mname, s) = unsampled?;
        let m = sym.module(&path).ok()?;
        let bytes = m.bytes_at(s.start, s.size)?;
        Some(annotate(m, &s, bytes, &mname, |_| 0, opts.syntax))
    });

    stripped.sort();
    stripped.dedup();
    for p in stripped {
        notes.push(format!(
            "{p} has no symbol table (stripped): its samples are shown by address; \
             use an unstripped build or install its debug symbols to see function names"
        ));
    }
    unreadable.sort();
    unreadable.dedup();
    for why in unreadable {
        notes.push(format!(
            "cannot symbolize: {why}; its samples are shown by address"
        ));
    }
    mismatched.sort();
    mismatched.dedup();
    for p in mismatched {
        notes.push(format!(
            "{p}: build id differs from the recorded one (the file changed since recording); \
             names may be wrong"
        ));
    }
    let c = agg.counts();
    if c.kernel_samples > 0 && sym.kallsyms.is_none() {
        notes.push(format!(
            "{} kernel samples shown as [kernel]: no kernel symbols (live: --kernel with a \
             readable /proc/kallsyms; imported data: --kallsyms FILE from that machine)",
            c.kernel_samples
        ));
    }
    if c.lost > 0 {
        notes.push(format!(
            "{} samples lost ({} ring-buffer overflows): lower --freq or raise the buffer",
            c.lost, c.lost_records
        ));
    }
    if c.bad_records > 0 {
        notes.push(format!("{} malformed records skipped", c.bad_records));
    }
    if total == 0 {
        notes.push("no samples: the command ran too briefly, or the event never fired".into());
    }

    let mut transitions: Vec<Transition> = agg
        .group()
        .map(|g| {
            g.transitions
                .iter()
                .filter_map(|((a, b), (n, v))| {
                    Some(Transition {
                        from: *frame_index.get(a)?,
                        to: *frame_index.get(b)?,
                        samples: *n,
                        values: v.clone(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    transitions.sort_unstable();
    Profile {
        event: event.to_string(),
        counts: c.clone(),
        functions,
        annotation,
        notes,
        frames,
        stacks,
        tasks: agg.tasks().to_vec(),
        sort,
        modules: modules.to_vec(),
        value_names: Vec::new(),
        transitions,
    }
}

/// What one row of the function table groups: the parts named by the sort keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RowKey<'a> {
    pid: Option<i32>,
    comm: Option<&'a str>,
    dso: Option<&'a str>,
    sym: Option<&'a FuncKey>,
}

#[derive(Debug, Default)]
struct RowCount {
    self_samples: u64,
    children: u64,
    /// A frame of the row (for its function and module names).
    frame: usize,
}

/// The function table: self samples per row key (the leaf's), and with `children` also the
/// samples whose stack holds the key anywhere (once per stack, as perf report --children).
#[allow(clippy::too_many_arguments)]
fn table_rows(
    stacks: &[Stack],
    frames: &[ResolvedFrame],
    keys: &[FuncKey],
    tasks: &[Task],
    sort: &[SortKey],
    children: bool,
    total: u64,
    top: usize,
) -> Vec<FunctionRow> {
    let has = |k: SortKey| sort.contains(&k);
    let (by_pid, by_comm, by_dso, by_sym) = (
        has(SortKey::Pid),
        has(SortKey::Comm) || has(SortKey::Pid),
        has(SortKey::Dso),
        has(SortKey::Sym),
    );
    fn row_key<'a>(
        task: &'a Task,
        frame: &'a ResolvedFrame,
        key: &'a FuncKey,
        by: (bool, bool, bool, bool),
    ) -> RowKey<'a> {
        RowKey {
            pid: by.0.then_some(task.pid),
            comm: by.1.then_some(task.comm.as_str()),
            dso: by.2.then_some(frame.module.as_str()),
            sym: by.3.then_some(key),
        }
    }
    let by = (by_pid, by_comm, by_dso, by_sym);
    let key_of = |task, fi: usize| row_key(task, &frames[fi], &keys[fi], by);
    let mut table: HashMap<RowKey<'_>, RowCount> = HashMap::new();
    let mut seen: Vec<RowKey<'_>> = Vec::new();
    for st in stacks {
        let Some(&leaf) = st.frames.first() else {
            continue;
        };
        let task = &tasks[st.task as usize];
        let e = table.entry(key_of(task, leaf)).or_insert(RowCount {
            frame: leaf,
            ..RowCount::default()
        });
        e.self_samples += st.samples;
        if children {
            seen.clear();
            for &fi in &st.frames {
                let k = key_of(task, fi);
                if seen.contains(&k) {
                    continue;
                }
                seen.push(k);
                table
                    .entry(k)
                    .or_insert(RowCount {
                        frame: fi,
                        ..RowCount::default()
                    })
                    .children += st.samples;
            }
        }
    }
    let mut rows: Vec<(RowKey<'_>, RowCount)> = table.into_iter().collect();
    rows.sort_by(|(ka, a), (kb, b)| {
        let primary = if children {
            b.children.cmp(&a.children)
        } else {
            std::cmp::Ordering::Equal
        };
        primary
            .then(b.self_samples.cmp(&a.self_samples))
            .then_with(|| frames[a.frame].function.cmp(&frames[b.frame].function))
            .then_with(|| frames[a.frame].module.cmp(&frames[b.frame].module))
            .then_with(|| ka.comm.cmp(&kb.comm))
            .then_with(|| ka.pid.cmp(&kb.pid))
    });
    let pct = |n: u64| {
        if total == 0 {
            0.0
        } else {
            n as f64 * 100.0 / total as f64
        }
    };
    rows.into_iter()
        .take(if top == 0 { usize::MAX } else { top })
        .map(|(k, c)| FunctionRow {
            function: if by_sym {
                frames[c.frame].function.clone()
            } else {
                String::new()
            },
            module: if by_dso {
                frames[c.frame].module.clone()
            } else {
                String::new()
            },
            comm: k.comm.map(str::to_string),
            pid: k.pid,
            samples: c.self_samples,
            percent: pct(c.self_samples),
            children: children.then_some(c.children),
            children_percent: children.then(|| pct(c.children)),
        })
        .collect()
}

fn name_matches(function: &str, wanted: &str) -> bool {
    function == wanted
        || function
            .strip_prefix(wanted)
            .is_some_and(|r| r.starts_with('(') || r.starts_with("::h"))
}

#[allow(clippy::too_many_arguments)]
fn resolve_frame(
    f: Frame,
    modules: &[crate::aggregate::Module],
    sym: &mut Symbolizer,
    lines: bool,
    stripped: &mut Vec<String>,
    unreadable: &mut Vec<String>,
    mismatched: &mut Vec<String>,
) -> (ResolvedFrame, FuncKey) {
    match f {
        Frame::Kernel(addr) => {
            let name = sym
                .kallsyms
                .as_ref()
                .and_then(|k| k.lookup(addr))
                .map(str::to_string);
            (
                ResolvedFrame {
                    function: name.clone().unwrap_or_else(|| "[kernel]".into()),
                    module: KERNEL_MODULE.into(),
                    module_path: None,
                    address: addr,
                    function_start: None,
                    file: None,
                    line: None,
                },
                FuncKey::Kernel(name),
            )
        }
        Frame::Unknown(addr) => (
            ResolvedFrame {
                function: format!("[unknown] {addr:#x}"),
                module: "[unknown]".into(),
                module_path: None,
                address: addr,
                function_start: None,
                file: None,
                line: None,
            },
            FuncKey::Unknown(addr),
        ),
        Frame::File { module, offset } => {
            let Some(md) = modules.get(module as usize) else {
                return resolve_frame(
                    Frame::Unknown(offset),
                    modules,
                    sym,
                    lines,
                    stripped,
                    unreadable,
                    mismatched,
                );
            };
            let mname = md.name().to_string();
            match sym.module(&md.path) {
                Ok(m) => {
                    if let (Some(a), Some(b)) = (&md.build_id, &m.build_id) {
                        if a != b {
                            mismatched.push(md.path.clone());
                        }
                    }
                    let svma = m.offset_to_svma(offset).unwrap_or(offset);
                    match m.symbol_at(svma) {
                        Some(s) => {
                            let line = if lines { m.line_at(svma) } else { None };
                            (
                                ResolvedFrame {
                                    function: s.name().to_string(),
                                    module: mname,
                                    module_path: Some(md.path.clone()),
                                    address: svma,
                                    function_start: Some(s.start),
                                    file: line.as_ref().map(|l| l.0.clone()),
                                    line: line.map(|l| l.1),
                                },
                                FuncKey::Sym {
                                    module,
                                    start: s.start,
                                },
                            )
                        }
                        None => {
                            if !m.has_symtab {
                                stripped.push(md.path.clone());
                            }
                            (
                                ResolvedFrame {
                                    function: format!("[unknown] {svma:#x}"),
                                    module: mname,
                                    module_path: Some(md.path.clone()),
                                    address: svma,
                                    function_start: None,
                                    file: None,
                                    line: None,
                                },
                                FuncKey::Addr { module, svma },
                            )
                        }
                    }
                }
                Err(why) => {
                    if !md.path.starts_with('[') {
                        unreadable.push(why.to_string());
                    }
                    (
                        ResolvedFrame {
                            function: format!("[unknown] {offset:#x}"),
                            module: mname,
                            module_path: None,
                            address: offset,
                            function_start: None,
                            file: None,
                            line: None,
                        },
                        FuncKey::Addr {
                            module,
                            svma: offset,
                        },
                    )
                }
            }
        }
    }
}

fn annotate(
    m: &crate::symbols::ElfModule,
    s: &crate::symbols::Symbol,
    bytes: &[u8],
    module: &str,
    samples_at: impl Fn(u64) -> u64,
    syntax: Syntax,
) -> Annotation {
    let mut decoder = Decoder::with_ip(64, bytes, s.start, DecoderOptions::NONE);
    let mut intel = IntelFormatter::new();
    let mut gas = GasFormatter::new();
    for o in [intel.options_mut(), gas.options_mut()] {
        o.set_uppercase_hex(false);
        o.set_hex_prefix("0x");
        o.set_hex_suffix("");
        o.set_branch_leading_zeros(false);
        o.set_show_branch_size(false);
        o.set_space_after_operand_separator(true);
    }
    let mut insn = Instruction::default();
    let mut rows = Vec::new();
    let mut sources: HashMap<String, Option<Vec<String>>> = HashMap::new();
    let mut total = 0u64;
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        let mut text = String::new();
        match syntax {
            Syntax::Intel => intel.format(&insn, &mut text),
            Syntax::Att => gas.format(&insn, &mut text),
        }
        let addr = insn.ip();
        let n = samples_at(addr);
        total += n;
        let (file, line) = match m.line_at(addr) {
            Some((f, l)) => (Some(f), Some(l)),
            None => (None, None),
        };
        let source = match (&file, line) {
            (Some(f), Some(l)) if l > 0 => sources
                .entry(f.clone())
                .or_insert_with(|| {
                    std::fs::read_to_string(f)
                        .ok()
                        .map(|t| t.lines().map(str::to_string).collect())
                })
                .as_ref()
                .and_then(|lines| lines.get(l as usize - 1))
                .map(|t| t.trim().to_string()),
            _ => None,
        };
        rows.push(InsnRow {
            address: addr,
            text,
            samples: n,
            percent: 0.0,
            hottest: false,
            file,
            line,
            source,
        });
    }
    // Samples may also fall on addresses inside the function that the linear decode did not
    // start an instruction at (data in code); they still count for the function total.
    if let Some(max) = rows.iter().map(|r| r.samples).max().filter(|&m| m > 0) {
        if let Some(r) = rows.iter_mut().find(|r| r.samples == max) {
            r.hottest = true;
        }
    }
    for r in &mut rows {
        r.percent = if total == 0 {
            0.0
        } else {
            r.samples as f64 * 100.0 / total as f64
        };
    }
    Annotation {
        function: s.name().to_string(),
        module: module.to_string(),
        start: s.start,
        size: s.size,
        syntax,
        samples: total,
        instructions: rows,
    }
}
