use super::*;
use tma_perf::readings::ReadingStatus;

fn read_fixture(name: &str) -> Vec<u8> {
    let p = tma_testkit::fixture("import").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn value(iv: &Interval, ev: &str) -> Option<f64> {
    iv.get(ev).and_then(|r| r.value)
}

#[test]
fn recorded_csv_software_events() {
    let rec = parse(&read_fixture("perf-csv-sw.csv")).unwrap();
    assert_eq!(rec.format, ImportFormat::PerfCsv { separator: ',' });
    assert!(!rec.interval_mode);
    assert_eq!(rec.intervals.len(), 1);
    assert_eq!(
        rec.events,
        [
            "task-clock",
            "page-faults",
            "context-switches",
            "cpu-migrations"
        ]
    );
    let iv = &rec.intervals[0];
    // 0.69 msec -> ns.
    assert_eq!(value(iv, "task-clock"), Some(0.76e6));
    assert_eq!(value(iv, "page-faults"), Some(48.0));
    let tc = iv.get("task-clock").unwrap();
    assert_eq!(tc.time_running_ns, Some(757229));
    assert_eq!(tc.counted_share, Some(1.0));
}

#[test]
fn recorded_csv_not_supported() {
    let rec = parse(&read_fixture("perf-csv-notsupported.csv")).unwrap();
    let iv = &rec.intervals[0];
    let c = iv.get("cycles").unwrap();
    assert_eq!(c.status, ReadingStatus::NotSupported);
    assert_eq!(c.value, None);
    assert_eq!(
        iv.get("instructions").unwrap().status,
        ReadingStatus::NotSupported
    );
    assert!(value(iv, "task-clock").is_some());
}

#[test]
fn recorded_csv_intervals() {
    let rec = parse(&read_fixture("perf-csv-interval.csv")).unwrap();
    assert!(rec.interval_mode);
    assert_eq!(rec.intervals.len(), 4);
    let first = &rec.intervals[0];
    assert_eq!(first.start_s, 0.0);
    assert!((first.end_s - 0.100).abs() < 0.01, "{}", first.end_s);
    assert_eq!(rec.intervals[1].start_s, first.end_s);
    for iv in &rec.intervals {
        assert_eq!(iv.readings.len(), 4);
    }
    // The sleeping intervals are `<not counted>`, never a silent zero.
    let nc = rec.intervals[1].get("task-clock").unwrap();
    assert_eq!(nc.status, ReadingStatus::NotCounted);
    assert_eq!(nc.value, None);
}

#[test]
fn recorded_json() {
    let rec = parse(&read_fixture("perf-json-sw.json")).unwrap();
    assert_eq!(rec.format, ImportFormat::PerfJson);
    let iv = &rec.intervals[0];
    assert_eq!(
        iv.get("cycles").unwrap().status,
        ReadingStatus::NotSupported
    );
    assert!(value(iv, "page-faults").unwrap() > 0.0);
    let rec = parse(&read_fixture("perf-json-interval.json")).unwrap();
    assert!(rec.interval_mode);
    assert_eq!(rec.intervals.len(), 3);
    assert_eq!(
        rec.intervals[1].get("page-faults").unwrap().status,
        ReadingStatus::NotCounted
    );
}

#[test]
fn csv_and_json_agree_on_layout() {
    let csv = parse(&read_fixture("perf-csv-interval.csv")).unwrap();
    let json = parse(&read_fixture("perf-json-interval.json")).unwrap();
    assert_eq!(csv.intervals.len() > 1, json.intervals.len() > 1);
}

#[test]
fn per_cpu_rows_and_aggregation() {
    let rec = parse(&read_fixture("perf-csv-per-cpu.csv")).unwrap();
    assert_eq!(rec.breakdown, Breakdown::PerCpu);
    let iv = &rec.intervals[0];
    assert!(iv.get("task-clock").is_none());
    let agg = aggregate(iv);
    let cpus: f64 = iv
        .readings
        .iter()
        .filter(|r| r.event == "context-switches")
        .filter_map(|r| r.value)
        .sum();
    assert_eq!(value(&agg, "context-switches"), Some(cpus));
}

/// `perf stat -x, -I 1000 -A`: a timestamp, then the CPU column, then the row.
#[test]
fn interval_and_per_cpu_together() {
    let text = "\
     1.001029945,CPU0,1000,,cycles,1000000,100.00,,
     1.001029945,CPU1,3000,,cycles,1000000,100.00,,
     1.001029945,CPU0,4.50,msec,task-clock,4500000,100.00,0.005,CPUs utilized
     2.002101012,CPU0,2000,,cycles,1000000,100.00,,
     2.002101012,CPU1,4000,,cycles,1000000,100.00,,
     2.002101012,CPU0,4.40,msec,task-clock,4400000,100.00,0.004,CPUs utilized
";
    let rec = parse(text.as_bytes()).unwrap();
    assert_eq!(rec.breakdown, Breakdown::PerCpu);
    assert_eq!(rec.intervals.len(), 2);
    assert_eq!(value(&aggregate(&rec.intervals[0]), "cycles"), Some(4000.0));
    assert_eq!(value(&aggregate(&rec.intervals[1]), "cycles"), Some(6000.0));
    // The per-thread column after a timestamp too.
    let rec = parse(b"1.0,sleep-42,7,,page-faults,100,100.00,,\n").unwrap();
    assert_eq!(rec.breakdown, Breakdown::PerThread);
}

#[test]
fn per_core_is_refused_clearly() {
    let err = parse(&read_fixture("perf-csv-per-core.csv")).unwrap_err();
    assert!(
        matches!(
            err,
            ImportError::UnsupportedAggregation {
                flag: "--per-core",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("-A"));
}

#[test]
fn repeat_variance_column_and_semicolon() {
    let rec = parse(&read_fixture("perf-csv-repeat.csv")).unwrap();
    assert!(value(&rec.intervals[0], "page-faults").is_some());
    let rec = parse(&read_fixture("perf-csv-semicolon.csv")).unwrap();
    assert_eq!(rec.format, ImportFormat::PerfCsv { separator: ';' });
    assert_eq!(rec.events, ["task-clock", "page-faults"]);
}

#[test]
fn pmu_specs_with_commas_are_one_event() {
    let text = "# cpu: zen4\n\
        1000,,cpu/event=0x1a0,umask=0x1,cmask=6/,5000,40.00,,\n\
        2000,,r76,5000,40.00,,\n\
        3000,,cpu/event=0xc1/u,5000,100.00,1.2,insn per cycle\n";
    let rec = parse(text.as_bytes()).unwrap();
    assert_eq!(rec.cpu_hint.as_deref(), Some("zen4"));
    assert_eq!(
        rec.events,
        [
            "cpu/event=0x1a0,umask=0x1,cmask=6/",
            "r76",
            "cpu/event=0xc1/u"
        ]
    );
    let r = rec.intervals[0]
        .get("cpu/event=0x1a0,umask=0x1,cmask=6/")
        .unwrap();
    assert_eq!(r.value, Some(1000.0));
    assert_eq!(r.counted_share, Some(0.4));
}

#[test]
fn metric_only_lines_are_skipped() {
    let text = "100,,cycles,5000,100.00,,\n,,,,,12.5,% tma_frontend_bound\n";
    let rec = parse(text.as_bytes()).unwrap();
    assert_eq!(rec.events, ["cycles"]);
}

#[test]
fn bad_inputs_have_precise_errors() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "empty"),
        (b"\n  \n", "empty"),
        (b"# started on x\n\n", "no counter lines"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary"),
        (b"PERFILE2\x00\x10\x00", "binary"),
        (b"12,,cycles,100,100.00\n\xff\xfe,,x\n", "UTF-8"),
        // A whole-run recording cut in its last line has no complete interval.
        (b"12,,cycles,100,100.00\n13,,instr", "line 2: the recording is cut off"),
        (b"12,,cycles\n13,", "line 2: the recording is cut off"),
        (b"12,,cycles,100,100.00\n13,,instr,,\n14,,x", "line 3: the recording is cut off"),
        // A short line that ends with its newline is malformed, not cut off.
        (b"12,,cycles,100,100.00\n13,,instr\n", "line 2: truncated"),
        (
            b"\"1,234,567\",,cycles,100,100.00\n",
            "thousands separators",
        ),
        (b"1,234,567,,cycles,100,100.00\n", "LC_ALL=C"),
        (b"1.234.567;;cycles;100;100,00\n", "thousands separators"),
        (
            b"\n Performance counter stats for 'true':\n\n   0.5 msec task-clock and more\n",
            "line 4: not a counter line of perf stat's output",
        ),
        (b"abc,,cycles,100,100.00\n", "`abc` in the count column"),
        (
            b"Timestamp,CPUs,Area,Value,Unit,Description,Sample,Stddev,Multiplex,Bottleneck,Idle\n0.503,C0,Frontend_Bound,1,% Slots <,,,0.0,3.99,,Y\n",
            "line 1: this is toplev's CSV of computed node values",
        ),
        (
            b"Area,Value,Unit,Description,Sample,Stddev,Multiplex,Bottleneck,Idle\nFrontend_Bound,28.4,% Slots,,,0.0,3.71,,\n",
            "toplev's CSV",
        ),
        (b"12,,cycles,100,250.00\n", "running percentage"),
        (
            b"{\"counter-value\" : \"1.0\", \"unit\" : \"\", \"event\" : \"cycles\"",
            // Cut in its one line (no line end): cut off, not malformed.
            "line 1: the recording is cut off",
        ),
        (
            b"{\"unit\" : \"\", \"event\" : \"cycles\"}\n",
            "counter-value",
        ),
        (
            b"{\"schema\": \"tma.stat\", \"schema_version\": 1}",
            "`tma.stat` document",
        ),
        (
            b"12,,cycles,100,100.00\n     0.1,13,,cycles,100,100.00\n",
            "mixed",
        ),
        (
            b"     0.1,12,,cycles,100,100.00\n13,,cycles,100,100.00\n     0.2,13,,cycles,100,100.00\n",
            "line 3: interval and non-interval lines are mixed",
        ),
        (
            b"     0.2,12,,cycles,100,100.00\n     0.1,13,,cycles,100,100.00\n",
            "goes backwards",
        ),
    ];
    for (input, want) in cases {
        let err = parse(input).expect_err(&String::from_utf8_lossy(input));
        let msg = err.to_string();
        assert!(
            msg.to_lowercase().contains(&want.to_lowercase()),
            "input {:?}: `{msg}` lacks `{want}`",
            String::from_utf8_lossy(input)
        );
        assert!(!msg.contains('\n'), "multi-line error: {msg}");
    }
}

#[test]
fn snapshot_is_detected_not_parsed() {
    let s = br#"{"schema": "tma.snapshot", "schema_version": 1, "cpu": "zen4"}"#;
    assert_eq!(detect(s).unwrap(), ImportFormat::TmaSnapshot);
}

#[test]
fn resolve_renames_and_reports_unknown() {
    let text = "10,,r76,5,100.00,,\n20,,ex_ret_ops,5,100.00,,\n3,,page-faults,5,100.00,,\n";
    let rec = parse(text.as_bytes()).unwrap();
    let known = |s: &str| match s.to_ascii_lowercase().as_str() {
        "r76" => vec!["ls_not_halted_cyc".to_string()],
        "ex_ret_ops" => vec!["ex_ret_ops".to_string(), "ex_ret_ops:alias".to_string()],
        _ => vec![],
    };
    let out = resolve(&rec.intervals, "zen4", false, known, |_, _| None).unwrap();
    assert_eq!(value(&out.intervals[0], "ls_not_halted_cyc"), Some(10.0));
    assert_eq!(value(&out.intervals[0], "page-faults"), Some(3.0));
    // Ids sharing one encoding all get the reading.
    assert_eq!(value(&out.intervals[0], "ex_ret_ops:alias"), Some(20.0));
    assert_eq!(out.generic, ["page-faults"]);

    let text = "10,,TOPDOWN.SLOTS,5,100.00,,\n20,,INT_MISC.UOP_DROPPING,5,100.00,,\n";
    let rec = parse(text.as_bytes()).unwrap();
    let err = resolve(
        &rec.intervals,
        "zen4",
        false,
        |_| vec![],
        |_, _| Some("spr"),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("TOPDOWN.SLOTS, INT_MISC.UOP_DROPPING"),
        "{msg}"
    );
    assert!(msg.contains("look like events of spr"), "{msg}");

    let text = "10,,r76,5,100.00,,\n20,,ls_not_halted_cyc,5,100.00,,\n";
    let rec = parse(text.as_bytes()).unwrap();
    let err = resolve(
        &rec.intervals,
        "zen4",
        false,
        |_| vec!["ls_not_halted_cyc".into()],
        |_, _| None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("same zen4 event"), "{err}");
}

#[test]
fn tolerant_resolve_drops_unknown_events_unless_they_belong_to_another_cpu() {
    let text = "10,,r76,5,100.00,,\n7,,uncore_imc/cas_count_read/,5,100.00,,\n\
                3,,page-faults,5,100.00,,\n8,,MEM_LOAD_RETIRED.LOCAL_PMM,5,100.00,,\n";
    let rec = parse(text.as_bytes()).unwrap();
    let known = |s: &str| match s {
        "r76" => vec!["ls_not_halted_cyc".to_string()],
        _ => vec![],
    };
    let mut seen_by_guess = Vec::new();
    let out = resolve(&rec.intervals, "zen4", true, known, |unknown, seen| {
        seen_by_guess = vec![unknown.to_vec(), seen.to_vec()];
        None
    })
    .unwrap();
    assert_eq!(
        out.ignored,
        ["uncore_imc/cas_count_read/", "MEM_LOAD_RETIRED.LOCAL_PMM"]
    );
    assert_eq!(seen_by_guess[0], out.ignored);
    assert_eq!(seen_by_guess[1].len(), 4, "{seen_by_guess:?}");
    let iv = &out.intervals[0];
    assert_eq!(value(iv, "ls_not_halted_cyc"), Some(10.0));
    assert_eq!(value(iv, "page-faults"), Some(3.0));
    assert!(iv.get("MEM_LOAD_RETIRED.LOCAL_PMM").is_none());
    assert_eq!(iv.readings.len(), 2);
    // Strict: the same file is refused.
    let err = resolve(&rec.intervals, "zen4", false, known, |_, _| None).unwrap_err();
    assert!(err.to_string().contains("LOCAL_PMM"), "{err}");
    // Tolerant, but the events clearly belong to another CPU: refused with the hint.
    let err = resolve(&rec.intervals, "zen4", true, known, |_, _| Some("icx")).unwrap_err();
    assert!(err.to_string().contains("try --cpu icx"), "{err}");
    // Tolerant: a second spec of one event is ignored, the first one's reading used.
    let text = "10,,r76,5,100.00,,\n20,,ls_not_halted_cyc,5,100.00,,\n";
    let rec = parse(text.as_bytes()).unwrap();
    let out = resolve(
        &rec.intervals,
        "zen4",
        true,
        |_| vec!["ls_not_halted_cyc".into()],
        |_, _| None,
    )
    .unwrap();
    assert_eq!(out.ignored, ["ls_not_halted_cyc"]);
    assert_eq!(value(&out.intervals[0], "ls_not_halted_cyc"), Some(10.0));
    assert_eq!(out.intervals[0].readings.len(), 1);
}

#[test]
fn interval_summary_rows_are_skipped() {
    for f in [
        "perf-csv-interval-summary.csv",
        "perf-json-interval-summary.json",
    ] {
        let rec = parse(&read_fixture(f)).unwrap();
        assert!(rec.interval_mode, "{f}");
        assert_eq!(rec.intervals.len(), 2, "{f}");
        assert_eq!(rec.events, ["task-clock", "page-faults"], "{f}");
    }
    // `--no-csv-summary`: the whole-run rows have no timestamp.
    let text = "     0.1,5,,page-faults,100,100.00,,\n     0.2,6,,page-faults,100,100.00,,\n11,,page-faults,200,100.00,,\n";
    let rec = parse(text.as_bytes()).unwrap();
    assert_eq!(rec.intervals.len(), 2);
}

#[test]
fn csv_without_running_columns() {
    // `value,unit,event` only, and empty running columns: counted share unknown.
    for text in [
        "12,,cycles\n0.5,msec,task-clock\n",
        "12,,cycles,,\n0.5,msec,task-clock,,\n",
    ] {
        let rec = parse(text.as_bytes()).unwrap();
        let iv = &rec.intervals[0];
        let c = iv.get("cycles").unwrap();
        assert_eq!(c.value, Some(12.0), "{text}");
        assert_eq!(c.counted_share, None, "{text}");
        assert_eq!(value(iv, "task-clock"), Some(0.5e6));
    }
}

/// An endless `perf stat -I` CSV recording produced on demand: the reader must hand out
/// intervals without reaching the end of its input.
struct EndlessIntervals {
    next: u64,
    pending: Vec<u8>,
    pos: usize,
}

impl std::io::Read for EndlessIntervals {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.pending.len() {
            self.next += 1;
            let t = self.next as f64 * 0.1;
            self.pending = format!(
                "{t:.3},{},,cycles,100000,100.00,,\n{t:.3},{},,instructions,100000,100.00,,\n",
                1000 + self.next,
                2000 + self.next
            )
            .into_bytes();
            self.pos = 0;
        }
        let n = buf.len().min(self.pending.len() - self.pos);
        buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn intervals_stream_from_an_endless_input() {
    let input = std::io::BufReader::with_capacity(
        256,
        EndlessIntervals {
            next: 0,
            pending: Vec::new(),
            pos: 0,
        },
    );
    let mut reader = IntervalReader::new(input).unwrap();
    assert!(reader.interval_mode());
    for k in 1..=1000u64 {
        let iv = reader.next_interval().unwrap().unwrap();
        assert!((iv.end_s - k as f64 * 0.1).abs() < 1e-9, "interval {k}");
        assert_eq!(iv.get("cycles").unwrap().value, Some((1000 + k) as f64));
        assert_eq!(
            iv.get("instructions").unwrap().value,
            Some((2000 + k) as f64)
        );
    }
}

#[test]
fn resolver_learns_specs_once_and_checks_them_per_interval() {
    let text = "     0.1,10,,cycles,100,100.00\n     0.1,20,,r76,100,100.00\n\
                     0.2,11,,cycles,100,100.00\n     0.2,21,,r76,100,100.00\n\
                     0.3,12,,cycles,100,100.00\n     0.3,5,,rbad,100,100.00\n";
    let mut reader = IntervalReader::new(text.as_bytes()).unwrap();
    let mut lookups = 0;
    let mut resolver = Resolver::new(
        "zen4",
        |s: &str| {
            lookups += 1;
            match s {
                "r76" => vec!["ls_not_halted_cyc".to_string()],
                _ => vec![],
            }
        },
        |_: &[String], _: &[String]| None,
    );
    for _ in 0..2 {
        let iv = resolver
            .resolve(reader.next_interval().unwrap().unwrap())
            .unwrap();
        assert!(iv.get("ls_not_halted_cyc").is_some() && iv.get("cycles").is_some());
    }
    let err = resolver
        .resolve(reader.next_interval().unwrap().unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("rbad"), "{err}");
    drop(resolver);
    assert_eq!(lookups, 3, "each spec is looked up once");

    // Tolerant: `rbad` is looked up once, dropped from every interval, listed once.
    let text = "     0.1,20,,r76,100,100.00\n     0.1,5,,rbad,100,100.00\n\
                     0.2,21,,r76,100,100.00\n     0.2,6,,rbad,100,100.00\n";
    let mut reader = IntervalReader::new(text.as_bytes()).unwrap();
    let mut lookups = 0;
    let mut guesses = 0;
    let mut resolver = Resolver::new(
        "zen4",
        |s: &str| {
            lookups += 1;
            match s {
                "r76" => vec!["ls_not_halted_cyc".to_string()],
                _ => vec![],
            }
        },
        |_: &[String], _: &[String]| {
            guesses += 1;
            None
        },
    )
    .tolerant();
    for _ in 0..2 {
        let iv = resolver
            .resolve(reader.next_interval().unwrap().unwrap())
            .unwrap();
        assert_eq!(iv.readings.len(), 1);
    }
    assert_eq!(resolver.ignored(), ["rbad"]);
    drop(resolver);
    assert_eq!((lookups, guesses), (2, 1));
}

#[test]
fn a_recording_cut_off_in_its_last_interval_ends_with_the_interval_before() {
    let full = "     0.1,10,,cycles,100,100.00\n     0.1,20,,instructions,100,100.00\n\
                     0.2,11,,cycles,100,100.00\n     0.2,21,,instructions,100,100.00\n";
    // Cut in the middle of the last line, at a line boundary, and in a JSON line.
    let cases: [(String, &str); 3] = [
        (format!("{full}     0.3,12,,cycles,100,100.00\n     0.3,2"), "line 6) is cut off"),
        (format!("{full}     0.3,12,,cycles,100,100.00\n"), "with 1 of the 2 rows"),
        (
            "{\"interval\" : 0.1, \"counter-value\" : \"10\", \"unit\" : \"\", \"event\" : \"cycles\"}\n\
             {\"interval\" : 0.2, \"counter-value\" : \"11\", \"unit\" : \"\", \"event\" : \"cycles\"}\n\
             {\"interval\" : 0.3, \"counter-val"
                .to_string(),
            "line 3) is cut off",
        ),
    ];
    for (text, want) in cases {
        let rec = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(rec.intervals.len(), 2, "{text:?}");
        assert_eq!(rec.intervals[1].end_s, 0.2);
        let cut = rec.cut_off.expect("the cut is reported").to_string();
        assert!(cut.contains(want), "{cut}");
        assert!(cut.contains("ending at 0.3 s) was dropped"), "{cut}");
    }
    // Complete recordings, with and without a final newline, are not cut.
    let rec = parse(full.as_bytes()).unwrap();
    assert_eq!((rec.intervals.len(), rec.cut_off), (2, None));
    let rec = parse(full.trim_end().as_bytes()).unwrap();
    assert_eq!((rec.intervals.len(), rec.cut_off), (2, None));
    // A cut in the first interval leaves nothing to use.
    let e = parse(b"     0.1,10,,cycles,100,100.00\n     0.1,2").unwrap_err();
    assert_eq!(e, ImportError::CutOff { line: 2 });
}

#[test]
fn perf_modifiers_are_read_off_every_spelling() {
    use super::split_modifiers;
    let cases = [
        ("TOPDOWN.SLOTS:u", "TOPDOWN.SLOTS", "u"),
        ("topdown-retiring:u", "topdown-retiring", "u"),
        (
            "cpu/INT_MISC.UOP_DROPPING/u",
            "cpu/INT_MISC.UOP_DROPPING/",
            "u",
        ),
        (
            "cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/u",
            "cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/",
            "u",
        ),
        ("cpu/cycles/:k", "cpu/cycles/", "k"),
        ("cycles:k", "cycles", "k"),
        ("cycles:uk", "cycles", "uk"),
        ("cycles:ppp", "cycles", ""),
        ("instructions:upp", "instructions", "u"),
        ("cycles:G", "cycles", "G"),
        ("cycles:H", "cycles", "H"),
        // The event tables' own modifiers are not perf's and stay.
        ("UOPS_RETIRED.MS:c1:e1", "UOPS_RETIRED.MS:c1:e1", ""),
        (
            "CPU_CLK_UNHALTED.THREAD_P:SUP",
            "CPU_CLK_UNHALTED.THREAD_P:SUP",
            "",
        ),
        ("cpu_core/TOPDOWN.SLOTS/", "cpu_core/TOPDOWN.SLOTS/", ""),
    ];
    for (spec, base, letters) in cases {
        let (b, scope) = split_modifiers(spec);
        assert_eq!((b, scope.letters.as_str()), (base, letters), "{spec}");
    }
}

/// The ids each spec of one interval resolves to with `model`'s tables.
fn resolved(model: &str, specs: &[&str]) -> (Vec<(String, String)>, Option<String>) {
    let m = tma_catalog::by_name(model).unwrap();
    let mut r = Resolver::new(
        m.key,
        |s: &str| m.resolve_perf_event_all(s).unwrap_or_default(),
        |_: &[String], _: &[String]| None,
    );
    r.learn(specs.iter().copied())
        .unwrap_or_else(|e| panic!("{model} {specs:?}: {e}"));
    (r.mapping(), r.scope().map(|s| s.letters.clone()))
}

#[test]
fn three_spellings_of_user_only_events_resolve_alike() {
    // perf's default run as non-root on Tiger Lake: every event carries `:u`, spelled three
    // ways; each is read as the event the formulas name.
    let (map, scope) = resolved(
        "tgl",
        &[
            "TOPDOWN.SLOTS:u",
            "topdown-retiring:u",
            "INT_MISC.UOP_DROPPING:u",
            "cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/u",
            "cycles:u",
        ],
    );
    let id = |spec: &str| {
        map.iter()
            .find(|(s, _)| s == spec)
            .map(|(_, i)| i.as_str())
            .unwrap_or_else(|| panic!("{spec} unresolved in {map:?}"))
    };
    assert_eq!(scope.as_deref(), Some("u"));
    assert!(id("TOPDOWN.SLOTS:u").starts_with("TOPDOWN.SLOTS"));
    assert_eq!(id("topdown-retiring:u"), "PERF_METRICS.RETIRING");
    assert_eq!(id("INT_MISC.UOP_DROPPING:u"), "INT_MISC.UOP_DROPPING");
    // RECOVERY_CYCLES with cmask=1,edge is the table's INT_MISC.CLEARS_COUNT.
    assert_eq!(
        id("cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/u"),
        "INT_MISC.CLEARS_COUNT"
    );
    // The same event in two spellings is one event: a strict import says so.
    let m = tma_catalog::by_name("tgl").unwrap();
    let mut r = Resolver::new(
        m.key,
        |s: &str| m.resolve_perf_event_all(s).unwrap_or_default(),
        |_: &[String], _: &[String]| None,
    );
    let err = r
        .learn(["INT_MISC.UOP_DROPPING:u", "cpu/INT_MISC.UOP_DROPPING/u"])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("are the same tgl event `INT_MISC.UOP_DROPPING`"),
        "{err}"
    );
}

#[test]
fn pmu_prefixed_vendor_names_resolve() {
    let (map, _) = resolved(
        "adl",
        &["cpu_core/TOPDOWN.SLOTS/", "cpu_core/topdown-fe-bound/"],
    );
    assert!(map[0].1.starts_with("TOPDOWN.SLOTS"), "{map:?}");
    assert_eq!(map[1].1, "PERF_METRICS.FRONTEND_BOUND");
    let (map, _) = resolved("icl", &["cpu/INST_RETIRED.ANY/"]);
    assert_eq!(map[0].1, "INST_RETIRED.ANY");
    let (map, _) = resolved("adl-e", &["cpu_atom/TOPDOWN_RETIRING.ALL/"]);
    assert_eq!(map[0].1, "TOPDOWN_RETIRING.ALL");
}

#[test]
fn events_of_different_scopes_keep_their_modifiers() {
    let (_, scope) = resolved("icl", &["cycles", "instructions:k"]);
    assert_eq!(scope, None);
}

#[test]
fn perf_stat_m_groups_are_told_apart() {
    // perf -M: three groups counted 66.67% each, the shared cycles counter in each; the
    // metric perf printed beside each group's first event says where a group starts.
    let text = b"62366721033,,de_src_op_disp.all,4204801537,66.67,0.0,%  bad_speculation
30857165236,,ls_not_halted_cyc,4204801537,66.67,,
62341441785,,ex_ret_ops,4204801537,66.67,33.7,%  retiring
120535278946,,de_no_dispatch_per_slot.no_ops_from_frontend,4204801537,66.67,65.1,%  frontend_bound
30882682226,,ls_not_halted_cyc,4204801537,66.67,,
2266091111,,de_no_dispatch_per_slot.backend_stalls,4204801537,66.67,1.2,%  backend_bound
30840562367,,ls_not_halted_cyc,4204801537,66.67,,
";
    let rec = parse(text).unwrap();
    let groups: Vec<Option<usize>> = rec.intervals[0].readings.iter().map(|r| r.group).collect();
    assert_eq!(
        groups,
        [0, 0, 0, 1, 1, 2, 2].map(Some).to_vec(),
        "{:?}",
        rec.intervals[0].readings
    );
    assert_eq!(rec.intervals[0].printed.len(), 4);
    // Different running times split groups whatever the metrics say.
    let text = b"10,,a,100,50.00,,\n20,,b,100,50.00,,\n11,,a,90,45.00,,\n21,,b,90,45.00,,\n";
    let rec = parse(text).unwrap();
    let groups: Vec<Option<usize>> = rec.intervals[0].readings.iter().map(|r| r.group).collect();
    assert_eq!(groups, [0, 0, 1, 1].map(Some).to_vec());
    // Without repeats nothing is grouped (and nothing changes for such recordings).
    let rec = parse(b"10,,a,100,50.00,,\n20,,b,90,45.00,,\n").unwrap();
    assert!(rec.intervals[0].readings.iter().all(|r| r.group.is_none()));
}

/// Hostile input in each of perf's forms: lines built from perf's own pieces (counts with
/// either separator, units, events, `#` metrics, shares, prose) and arbitrary text. Parsing
/// never panics; it gives a recording or an error.
#[test]
fn any_text_reads_or_is_refused_never_panics() {
    use proptest::prelude::*;
    let piece = prop_oneof![
        Just("Performance counter stats for 'x':".to_string()),
        Just("#           time             counts unit events".to_string()),
        "[0-9]{1,4}([.,][0-9]{1,4}){0,3}",
        Just("<not counted>".to_string()),
        Just("msec".to_string()),
        Just("cpu/event=0x1a0,umask=0x1,cmask=0x6/u".to_string()),
        Just("TOPDOWN.SLOTS:u".to_string()),
        Just("#".to_string()),
        Just("%  tma_retiring".to_string()),
        "\\([0-9]{1,3}[.,][0-9]{2}%\\)",
        Just("( +-  1.2% )".to_string()),
        Just("seconds time elapsed".to_string()),
        Just(",".to_string()),
        Just("{\"counter-value\" : \"1\"".to_string()),
        "[ -~]{0,12}",
        // Other locales' numbers: groups of `.`, spaces, U+00A0, U+202F, apostrophes.
        "[0-9]{1,3}([. \u{a0}\u{202f}'][0-9]{3}){0,3}(,[0-9]{1,9})?",
        "-[0-9]{1,5}",
    ];
    let line = prop::collection::vec(piece, 0..8).prop_map(|p| p.join(" "));
    let text = prop::collection::vec(line, 1..12).prop_map(|l| l.join("\n"));
    let result = tma_testkit::proptest_runner(1000).run(&text, |t| {
        let _ = parse(t.as_bytes());
        let _ = detect(t.as_bytes());
        Ok(())
    });
    assert!(result.is_ok(), "{result:?}");
}

/// `perf stat --for-each-cgroup ga,gb` recorded here (tests/fixtures/import/cgroup/README.md)
/// in its three forms: the cgroup column is read, and each interval holds the sum of the two
/// cgroups' rows of each event, checked against the sums of the file's own numbers.
#[test]
fn recorded_cgroup_rows_are_summed_in_every_form() {
    // The expected sums, from the CSV's fields: (interval, event) -> sum of the counts.
    fn expected_csv(text: &str) -> Vec<(String, String, f64)> {
        let mut out: Vec<(String, String, f64)> = Vec::new();
        for l in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            let f: Vec<&str> = l.split(',').collect();
            let (t, v, unit, ev) = (f[0].trim().to_string(), f[1], f[2], f[3].to_string());
            let v: f64 = v.parse::<f64>().unwrap() * if unit == "msec" { 1e6 } else { 1.0 };
            match out.iter_mut().find(|(a, b, _)| *a == t && *b == ev) {
                Some(e) => e.2 += v,
                None => out.push((t, ev, v)),
            }
        }
        out
    }
    let csv = read_fixture("cgroup/each-cgroup.csv");
    let want = expected_csv(std::str::from_utf8(&csv).unwrap());
    let mut reader = IntervalReader::new(&csv[..]).unwrap();
    assert!(reader.has_cgroups());
    let mut n = 0;
    while let Some(iv) = reader.next_interval().unwrap() {
        for ev in ["task-clock", "context-switches", "page-faults"] {
            let w = want
                .iter()
                .filter(|(_, e, _)| e == ev)
                .nth(n)
                .map(|x| x.2)
                .unwrap();
            let got = value(&iv, ev).unwrap();
            assert!(
                (got - w).abs() <= 1e-6 * w.max(1.0),
                "{ev} #{n}: {got} vs {w}"
            );
            assert_eq!(iv.readings.iter().filter(|r| r.event == ev).count(), 1);
        }
        assert!(
            iv.printed.is_empty(),
            "perf's per-cgroup metrics are not the sums'"
        );
        n += 1;
    }
    assert_eq!(n, 4);
    assert_eq!(reader.cgroups(), ["ga", "gb"]);

    // JSON and text: the same shape (two cgroups, summed).
    for (name, intervals) in [
        ("cgroup/each-cgroup.json", 4),
        ("cgroup/each-cgroup.txt", 1),
    ] {
        let bytes = read_fixture(name);
        let rec = parse(&bytes).unwrap();
        assert_eq!(rec.intervals.len(), intervals, "{name}");
        let iv = &rec.intervals[0];
        assert_eq!(
            iv.readings
                .iter()
                .filter(|r| r.event == "page-faults")
                .count(),
            1,
            "{name}"
        );
    }
    // The text form's numbers: 397.14 + 101.84 msec, 144 + 304 switches, 8 + 4162 faults.
    let rec = parse(&read_fixture("cgroup/each-cgroup.txt")).unwrap();
    let iv = &rec.intervals[0];
    assert!((value(iv, "task-clock").unwrap() - 498.98e6).abs() < 1.0);
    assert_eq!(value(iv, "context-switches"), Some(448.0));
    assert_eq!(value(iv, "page-faults"), Some(4170.0));
}

/// `-G ga,gb` with two events puts each event in its own cgroup: no tree can sum them.
#[test]
fn events_in_different_cgroups_are_refused_with_the_fix() {
    let e = parse(&read_fixture("cgroup/mixed-cgroups.csv")).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ImportError::MixedCgroups { .. }), "{msg}");
    assert!(
        msg.contains("task-clock in ga; context-switches in gb"),
        "{msg}"
    );
    assert!(msg.contains("--for-each-cgroup"), "{msg}");
}
