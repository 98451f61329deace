//! Errors of the `perf stat` importers. Every message names the line and says what to do.

use thiserror::Error;

/// Why a recording could not be read. Line numbers are 1-based.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ImportError {
    #[error("the file is empty; record with `perf stat -x, -o FILE -e ...` (or `tma events --perf-cmd`) and import that file")]
    Empty,
    #[error("the file is binary, not text (byte {offset} is 0x{byte:02x}); import the text output of `perf stat -x,` or `perf stat -j`, not perf.data")]
    Binary { offset: usize, byte: u8 },
    #[error("reading the recording failed: {why}")]
    Io { why: String },
    #[error("line {line}: not valid UTF-8 text; import the text output of `perf stat -x,` or `perf stat -j`")]
    NotUtf8 { line: usize },
    #[error("the file holds no counter lines (only comments or blank lines); was the command run with `perf stat -x,` or `-j` and `-o FILE`?")]
    NoData,
    #[error("line {line}: not a counter line of perf stat's output (expected `count [unit] event [# metric] [(share%)]`, as `perf stat` prints them); remove or fix the line")]
    TextRow { line: usize },
    #[error("line {line}: this is toplev's CSV of computed node values (`Area,Value,Unit,...`), which holds no counts to compute a tree from; record the counts with the perf stat command from `tma events --cpu KEY -l N --perf-cmd` and import that")]
    Toplev { line: usize },
    #[error("line {line}: this looks like `perf stat --metric-only` output, which holds no raw counts; re-record without --metric-only")]
    MetricOnly { line: usize },
    #[error("line {line}: the recording is cut off here (perf was stopped while writing?) and holds no complete interval before it; record again and let perf finish")]
    CutOff { line: usize },
    #[error("line {line}: the recording is cut off here (perf was stopped while writing?); the complete intervals before it were used, and --strict makes the dropped last one an error")]
    CutOffStrict { line: usize },
    #[error("line {line}: truncated or malformed line ({found}); expected `value,unit,event,running-ns,running-%` as written by `perf stat -x,`")]
    Truncated { line: usize, found: String },
    #[error("line {line}: `{value}` in the {field} column is not a number")]
    BadNumber {
        line: usize,
        field: &'static str,
        value: String,
    },
    #[error("line {line}: the count of `{event}` is {value}, which no counter holds (counts are whole numbers from 0 to 2^64-1); the line is damaged: fix or remove it and import again")]
    ImpossibleCount {
        line: usize,
        event: String,
        value: String,
    },
    #[error("line {line}: the count `{value}` uses thousands separators, which make CSV ambiguous; re-record with `LC_ALL=C perf stat -x, ...` (or use `-x\\;` as separator)")]
    ThousandsSeparator { line: usize, value: String },
    #[error("line {line}: `{column}` output (perf stat {flag}) is not supported; re-record with `-A` (one row per CPU) or without {flag}")]
    UnsupportedAggregation {
        line: usize,
        column: String,
        flag: &'static str,
    },
    #[error("line {line}: interval and non-interval lines are mixed; import the output of one `perf stat` run")]
    MixedIntervals { line: usize },
    #[error(
        "line {line}: the events were counted in different cgroups ({counted}), so no tree \
         can be formed from them together; record every event in the same cgroups: `perf stat \
         --for-each-cgroup CG1,CG2 ...` (or -G with the same cgroup for every event)"
    )]
    MixedCgroups {
        line: usize,
        /// Two events and their cgroups: `task-clock in ga; context-switches in gb`.
        counted: String,
    },
    #[error("line {line}: interval time {time} s goes backwards (previous {previous} s); import the output of one `perf stat -I` run")]
    IntervalOrder {
        line: usize,
        time: f64,
        previous: f64,
    },
    #[error("line {line}: invalid JSON ({why}); `perf stat -j` writes one JSON object per line")]
    BadJson { line: usize, why: String },
    #[error("line {line}: JSON field `{field}` is missing or has the wrong type; expected the objects written by `perf stat -j`")]
    JsonField { line: usize, field: &'static str },
    #[error("this is a `{schema}` document written by tma, not a recording; import a `tma stat --record` snapshot or perf stat output")]
    NotARecording { schema: String },
    #[error(
        "the file is a tma snapshot (`tma stat --record`), which this build cannot read: {why}"
    )]
    Snapshot { why: String },
}

/// Why imported readings could not be mapped onto a CPU model's events.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ResolveError {
    #[error("{} not in the {model} event tables: {}{}; check --cpu (run `tma events --cpu {model}` for the expected names)",
        if events.len() == 1 { "event" } else { "events" },
        list_some(events),
        other_cpu.as_ref().map(|c| format!(" (these look like events of {c}: try --cpu {c})")).unwrap_or_default())]
    UnknownEvents {
        model: &'static str,
        events: Vec<String>,
        other_cpu: Option<&'static str>,
    },
    #[error("`{first}` and `{second}` are the same {model} event `{canonical}`; record it once")]
    SameEvent {
        model: &'static str,
        first: String,
        second: String,
        canonical: String,
    },
}

/// The first few names, then how many more.
fn list_some(names: &[String]) -> String {
    const SHOWN: usize = 6;
    if names.len() <= SHOWN + 1 {
        names.join(", ")
    } else {
        format!(
            "{} and {} more",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        )
    }
}
