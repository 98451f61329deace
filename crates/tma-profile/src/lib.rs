//! Samples to hotspots: perf record parsing (live ring buffer and perf.data through one path),
//! symbolization, instruction annotation, pprof and folded output.
//!
//! Pipeline: records ([`live`] or [`import`]) -> [`aggregate::Aggregator`] (sample counts per
//! stack of module+offset frames, no file I/O) -> [`report::analyze`] with a
//! [`symbols::Symbolizer`] (ELF symbols, DWARF lines, kallsyms) -> [`report::Profile`], rendered
//! as text ([`report::render_text`]), JSON (`tma.locate` v1), folded stacks
//! ([`report::render_folded`]) or pprof ([`pprof::encode`]). [`record`] writes perf.data files.

pub mod aggregate;
pub mod choose;
pub mod import;
pub mod live;
pub mod order;
pub mod pprof;
pub mod record;
pub mod report;
pub mod symbols;

/// JSON schema name and version of `tma locate --json`: the envelope
/// `{"schema": "tma.locate", "schema_version": 1, ...}` around a [`report::Profile`]:
/// `event` (sampled event name), `counts` ({samples, period, lost, lost_records,
/// kernel_samples, unknown_samples, bad_records, throttled}), `functions` ([{function, module,
/// samples, percent}], hottest first), `annotation` (optional: {function, module, start, size,
/// syntax: "intel"|"att", samples, instructions: [{address, text, samples, percent, hottest,
/// file?, line?, source?}]}), `notes` ([string]). Addresses are ELF virtual addresses (SVMA).
pub const JSON_SCHEMA: &str = "tma.locate";
pub const JSON_SCHEMA_VERSION: u32 = 1;
