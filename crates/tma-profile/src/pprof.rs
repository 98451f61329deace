//! pprof output: the `perftools.profiles.Profile` protobuf (github.com/google/pprof,
//! proto/profile.proto), gzip-compressed, as `go tool pprof`, Parca and Pyroscope read it.
//! The messages are declared here with prost derive (field numbers from profile.proto).
//!
//! Locations carry the module-relative ELF address (SVMA) and are already symbolized
//! (`has_functions`), so readers do not need the binaries.

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use crate::hotspots::Profile;

#[derive(Clone, PartialEq, prost::Message)]
pub struct PProfile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// Index into the string table of the sample type shown by default.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.get(""); // index 0 must be ""
        s
    }
    fn get(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

/// The pprof sample type of a group value: the Top-down names for the slots and the level-1
/// slices (`slots`, `slots_retiring`, `slots_bad_speculation`, `slots_frontend`,
/// `slots_backend`), `cycles`, `instructions`; other events keep their names.
pub fn sample_type_name(event: &str) -> String {
    let base = event
        .split(':')
        .next()
        .unwrap_or(event)
        .to_ascii_uppercase();
    let known = match base.as_str() {
        "TOPDOWN.SLOTS" | "SLOTS" => "slots",
        "PERF_METRICS.RETIRING" => "slots_retiring",
        "PERF_METRICS.BAD_SPECULATION" => "slots_bad_speculation",
        "PERF_METRICS.FRONTEND_BOUND" => "slots_frontend",
        "PERF_METRICS.BACKEND_BOUND" => "slots_backend",
        "PERF_METRICS.HEAVY_OPERATIONS" => "slots_heavy_operations",
        "PERF_METRICS.BRANCH_MISPREDICTS" => "slots_branch_mispredicts",
        "PERF_METRICS.FETCH_LATENCY" => "slots_fetch_latency",
        "PERF_METRICS.MEMORY_BOUND" => "slots_memory_bound",
        "CPU_CLK_UNHALTED.THREAD" | "CPU_CLK_UNHALTED.CORE" | "LS_NOT_HALTED_CYC" | "CYCLES" => {
            "cycles"
        }
        "INST_RETIRED.ANY" | "EX_RET_INSTR" | "INSTRUCTIONS" => "instructions",
        _ => return event.to_string(),
    };
    known.to_string()
}

/// Build the pprof message: one sample per distinct stack. Values: the sample count, then
/// (with group sampling, [`Profile::value_names`]) one value per counted event: the
/// increases charged to the stack. The default sample type is `slots` where counted, else
/// the sampler's count.
pub fn build(p: &Profile, duration_ns: i64) -> PProfile {
    let mut st = Strings::new();
    let samples_t = st.get("samples");
    let count_t = st.get("count");
    let ns_t = st.get("nanoseconds");
    let event_t = st.get(&p.event);
    let mut sample_type = vec![ValueType {
        r#type: samples_t,
        unit: count_t,
    }];
    let names: Vec<String> = p.value_names.iter().map(|n| sample_type_name(n)).collect();
    for (n, raw) in names.iter().zip(&p.value_names) {
        let time = tma_perf::event::SoftwareEvent::parse(raw.split(':').next().unwrap_or(raw))
            .is_some_and(|e| e.is_time());
        sample_type.push(ValueType {
            r#type: st.get(n),
            unit: if time { ns_t } else { count_t },
        });
    }
    let default_name = if names.iter().any(|n| n == "slots") {
        Some("slots".to_string())
    } else if p.value_names.iter().any(|n| n == &p.event) {
        Some(sample_type_name(&p.event))
    } else {
        None
    };
    let default_sample_type = default_name.map_or(0, |n| st.get(&n));

    let mut mappings = Vec::new();
    let mut mapping_of: HashMap<&str, u64> = HashMap::new();
    for m in &p.modules {
        let id = mappings.len() as u64 + 1;
        let build_id = m
            .build_id
            .as_ref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
            .unwrap_or_default();
        mappings.push(Mapping {
            id,
            memory_start: m.start,
            memory_limit: m.end,
            file_offset: 0,
            filename: st.get(&m.path),
            build_id: st.get(&build_id),
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: false,
        });
        mapping_of.insert(m.path.as_str(), id);
    }

    let mut functions = Vec::new();
    let mut function_of: HashMap<(String, String), u64> = HashMap::new();
    let mut locations = Vec::with_capacity(p.frames.len());
    for (i, f) in p.frames.iter().enumerate() {
        let key = (f.function.clone(), f.module.clone());
        let fid = match function_of.get(&key) {
            Some(&id) => id,
            None => {
                let id = functions.len() as u64 + 1;
                let name = st.get(&f.function);
                functions.push(Function {
                    id,
                    name,
                    system_name: name,
                    filename: st.get(f.file.as_deref().unwrap_or("")),
                    start_line: 0,
                });
                function_of.insert(key, id);
                id
            }
        };
        locations.push(Location {
            id: i as u64 + 1,
            mapping_id: f
                .module_path
                .as_deref()
                .and_then(|p| mapping_of.get(p).copied())
                .unwrap_or(0),
            address: f.address,
            line: vec![Line {
                function_id: fid,
                line: f.line.map(i64::from).unwrap_or(0),
            }],
            is_folded: false,
        });
    }
    let samples = p
        .stacks
        .iter()
        .map(|st| {
            let mut value = Vec::with_capacity(1 + names.len());
            value.push(st.samples as i64);
            value.extend((0..names.len()).map(|i| {
                st.values
                    .get(i)
                    .map_or(0, |&v| i64::try_from(v).unwrap_or(i64::MAX))
            }));
            Sample {
                location_id: st.frames.iter().map(|&i| i as u64 + 1).collect(),
                value,
            }
        })
        .collect();
    PProfile {
        sample_type,
        default_sample_type,
        sample: samples,
        mapping: mappings,
        location: locations,
        function: functions,
        time_nanos: 0,
        duration_nanos: duration_ns,
        period_type: Some(ValueType {
            r#type: event_t,
            unit: count_t,
        }),
        period: 1,
        comment: vec![],
        string_table: st.table,
    }
}

/// Encode and gzip.
pub fn encode(p: &Profile, duration_ns: i64, w: &mut dyn Write) -> std::io::Result<()> {
    let msg = build(p, duration_ns);
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    gz.write_all(&msg.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// How far a compressed profile may inflate: this many times its compressed size, plus
/// [`MAX_INFLATE_SLACK`] bytes (pprof profiles compress a few times over; a file that inflates
/// further is refused as a decompression bomb rather than filling memory).
pub const MAX_INFLATE_RATIO: u64 = 64;
/// See [`MAX_INFLATE_RATIO`].
pub const MAX_INFLATE_SLACK: u64 = 1 << 20;

/// Decode a gzip-compressed (or plain) pprof profile.
pub fn decode(bytes: &[u8]) -> Result<PProfile, String> {
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
        let max = MAX_INFLATE_RATIO * bytes.len() as u64 + MAX_INFLATE_SLACK;
        let mut out = Vec::new();
        let gz = flate2::read::GzDecoder::new(bytes);
        std::io::Read::read_to_end(&mut std::io::Read::take(gz, max + 1), &mut out)
            .map_err(|e| format!("bad gzip: {e}"))?;
        if out.len() as u64 > max {
            return Err(format!(
                "refused: the gzip stream inflates to more than {max} bytes \
                 ({MAX_INFLATE_RATIO} times its {} bytes, plus {MAX_INFLATE_SLACK}), a \
                 decompression bomb rather than a pprof profile",
                bytes.len()
            ));
        }
        out
    } else {
        bytes.to_vec()
    };
    PProfile::decode(&raw[..]).map_err(|e| format!("bad protobuf: {e}"))
}
