//! End-to-end tests of `tma stat --import`: golden text / JSON / CSV output on fixtures, the
//! AMD Zen 4 case, interval data, and bad input (one-line error, exit code 2, no output file).
//!
//! Golden files live in tests/fixtures/import/golden/; `UPDATE_GOLDEN=1 cargo test -p tma-cli
//! --test stat_import` rewrites them (review the diff before committing).

use tma_testkit::{check_golden, fixture, repo_root, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

const ZEN4: &str = "tests/fixtures/import/zen4-sha256-synthetic.csv";

#[test]
fn zen4_case_level2_bottleneck_is_backend_bound_cpu() {
    let o = TMA.run(&["stat", "--import", ZEN4, "--cpu", "zen4", "-l", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in\n{out}"))
            .to_string()
    };
    assert!(line("  backend_bound_cpu").contains("65.9%"), "{out}");
    assert!(line("  backend_bound_cpu").contains("<=="), "{out}");
    assert!(line("backend_bound ").contains("67.6%"), "{out}");
    assert!(line("retiring ").contains("26.3%"), "{out}");
    assert!(line("retiring ").contains("below"), "{out}");
    assert!(out.contains("Bottleneck: backend_bound > backend_bound_cpu (65.9%)"));
    // The zen4 tables name no locate-with event, so `--node` could not sample anything:
    // the suggestion is a time profile instead.
    assert!(
        out.contains("Next: tma locate -e cpu-clock -- CMD"),
        "{out}"
    );
    assert!(!out.contains("--node backend_bound_cpu"), "{out}");
    assert!(out.contains("[ 50.0% counted]"));
    check_golden(fixture("import/golden/zen4-l2.txt"), &out);
}

#[test]
fn zen4_case_verbose_shows_every_level2_value() {
    let o = TMA.run(&["stat", "--import", ZEN4, "--cpu", "zen4", "-l", "2", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for (node, v) in [
        ("frontend_bound_bandwidth", "6.1%"),
        ("frontend_bound_latency", "0.1%"),
        ("bad_speculation_mispredicts", "0.0%"),
        ("backend_bound_cpu", "65.9%"),
        ("backend_bound_memory", "1.7%"),
        ("retiring_fastpath", "20.2%"),
        ("retiring_microcode", "6.1%"),
    ] {
        let l = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no {node} in\n{out}"));
        assert!(l.contains(v), "{node}: {l}");
    }
    assert!(!out.contains("hidden"), "{out}");
    check_golden(fixture("import/golden/zen4-l2-verbose.txt"), &out);
}

#[test]
fn zen4_case_json_and_csv() {
    let o = TMA.run(&[
        "stat", "--import", ZEN4, "--cpu", "zen4", "-l", "2", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "tma.stat");
    assert_eq!(j["schema_version"], 2);
    assert_eq!(j["cpu"]["key"], "zen4");
    let iv = &j["intervals"][0];
    assert_eq!(iv["bottleneck"]["node"], "backend_bound_cpu");
    let nodes = iv["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 13);
    let cpu = nodes
        .iter()
        .find(|n| n["name"] == "backend_bound_cpu")
        .unwrap();
    // Full precision: 67.56 * (1 - 17 / 675.6).
    let v = cpu["value"].as_f64().unwrap();
    assert!((v - 65.86).abs() < 1e-9, "{v}");
    assert_eq!(cpu["status"], "ok");
    assert_eq!(cpu["above_threshold"], true);
    assert_eq!(cpu["counted_share"], 0.5);
    // How each perf spelling was read.
    let evs = j["events"].as_array().unwrap();
    assert_eq!(evs.len(), 12);
    assert!(evs
        .iter()
        .any(|e| e["perf"] == "r1000000c2" && e["id"] == "ex_ret_ucode_ops"));
    assert!(evs
        .iter()
        .any(|e| e["perf"] == "cpu/event=0x1a0,umask=0x1,cmask=0x6/"
            && e["id"] == "de_no_dispatch_per_slot.no_ops_from_frontend:c6"));
    check_golden(fixture("import/golden/zen4-l2.json"), &stdout(&o));

    let o = TMA.run(&[
        "stat", "--import", ZEN4, "--cpu", "zen4", "-l", "2", "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // The header, 13 nodes, and the 12 counts they were computed from (role `event`).
    assert_eq!(out.lines().count(), 26);
    assert_eq!(out.lines().filter(|l| l.contains(",event,")).count(), 12);
    assert!(out.contains(",ex_ret_ucode_ops,,,366000000,count,counted,,0.5,event,"));
    assert!(out.starts_with("start_s,end_s,node,parent,level,value,unit,status"));
    assert!(out.contains(",backend_bound_cpu,backend_bound,2,"));
    check_golden(fixture("import/golden/zen4-l2.csv"), &out);
}

#[test]
fn cpu_named_in_the_recording_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rec.csv");
    let body = std::fs::read_to_string(repo_root().join(ZEN4)).unwrap();
    std::fs::write(&p, format!("# cpu: zen4\n{body}")).unwrap();
    let o = TMA.run(&["stat", "--import", p.to_str().unwrap(), "-l", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("(zen4, named in the recording)"));
}

#[test]
fn without_cpu_and_unidentifiable_machine_the_events_decide_or_cpu_is_asked_for() {
    // No cpuinfo under the host root: the Zen 4 events (the file holds clearly more of the
    // zen4 tree's events than of the zen5 one's) name the tables.
    let o = TMA.run(&["stat", "--import", ZEN4]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("(zen4, from the recording's events)"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("this machine's CPU is not known"),
        "{}",
        stderr(&o)
    );
    // Events of no table: --cpu, in one line.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rec.csv");
    std::fs::write(&p, "1000,,no_such.event,1,100.00,,\n").unwrap();
    let o = TMA.run(&["stat", "--import", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("pass --cpu NAME"), "{err}");
}

/// A `--compact` output as its header words (`end (s)` is two) and its interval lines' words.
fn compact_table(text: &str) -> (Vec<&str>, Vec<Vec<&str>>) {
    let head = text.lines().find(|l| l.contains("end (s)")).unwrap();
    let rows = text
        .lines()
        .filter(|l| l.trim_start().starts_with(['1', '2']))
        .map(|l| l.split_whitespace().collect())
        .collect();
    (head.split_whitespace().collect(), rows)
}

#[test]
fn json_recording_with_intervals_and_compact() {
    // The zen4 counts as `perf stat -j -I` lines: two intervals, the second with half the
    // cycles and a not-counted event.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rec.json");
    let csv = std::fs::read_to_string(repo_root().join(ZEN4)).unwrap();
    let mut out = String::new();
    for (t, scale) in [(1.000_5, 1.0), (2.001, 0.5)] {
        for l in csv.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let f: Vec<&str> = l.splitn(3, ",,").collect();
            let value: f64 = f[0].parse().unwrap();
            let event = f[1].rsplitn(3, ',').last().unwrap();
            let v = if scale < 1.0 && event == "ex_ret_brn_misp" {
                "\"<not counted>\"".to_string()
            } else {
                format!("\"{:.6}\"", value * scale)
            };
            out.push_str(&format!(
                "{{\"interval\" : {t:.9}, \"counter-value\" : {v}, \"unit\" : \"\", \"event\" : \"{event}\", \"event-runtime\" : 500000000, \"pcnt-running\" : 50.00, \"metric-value\" : 0.000000, \"metric-unit\" : \"\"}}\n"
            ));
        }
    }
    std::fs::write(&p, out).unwrap();
    let o = TMA.run(&[
        "stat",
        "--import",
        p.to_str().unwrap(),
        "--cpu",
        "zen4",
        "-l",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert_eq!(text.matches("--- interval").count(), 2, "{text}");
    assert!(
        text.contains("--- interval 1.000 s .. 2.001 s ---"),
        "{text}"
    );
    assert!(text.contains("not counted: ex_ret_brn_misp"), "{text}");

    let o = TMA.run(&[
        "stat",
        "--import",
        p.to_str().unwrap(),
        "--cpu",
        "zen4",
        "--compact",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert_eq!(
        text.lines().filter(|l| l.contains("end (s)")).count(),
        1,
        "{text}"
    );
    let data: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(['1', '2']))
        .collect();
    assert_eq!(data.len(), 2, "{text}");
    assert!(
        data[0].contains("67.6%") && data[0].ends_with("backend_bound"),
        "{text}"
    );

    // Requested metrics get columns after the level-1 nodes, with the values the JSON view
    // gives for the same intervals, and `-` where a metric could not be computed.
    let rec = p.to_str().unwrap();
    let o = TMA.run(&[
        "stat",
        "--import",
        rec,
        "--cpu",
        "zen4",
        "-m",
        "ops_per_cycle",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let opc: Vec<f64> = (0..2)
        .map(|i| j["intervals"][i]["metrics"][0]["value"].as_f64().unwrap())
        .collect();
    assert_eq!(j["intervals"][0]["metrics"][0]["status"], "ok", "{j}");
    let o = TMA.run(&[
        "stat",
        "--import",
        rec,
        "--cpu",
        "zen4",
        "-m",
        "IPC,ops_per_cycle",
        "--compact",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let (cols, data) = compact_table(&text);
    assert_eq!(
        cols[cols.len() - 3..],
        ["ops_per_cycle", "IPC", "bottleneck"],
        "{text}"
    );
    assert_eq!(data.len(), 2, "{text}");
    for (fields, v) in data.iter().zip(&opc) {
        // end, the level-1 shares, ops_per_cycle, IPC (the recording lacks its event),
        // bottleneck.
        assert_eq!(fields[fields.len() - 2], "-", "{text}");
        let shown: f64 = fields[fields.len() - 3].parse().unwrap();
        assert!((shown - v).abs() < 0.001, "{shown} vs {v}: {text}");
    }

    // A value out of its range (retired ops over the dispatch slots: Retiring > 100%) keeps its
    // number and is marked with `?`.
    let skewed = dir.path().join("skewed.json");
    let json = std::fs::read_to_string(&p).unwrap();
    let json = json.replace(
        "\"counter-value\" : \"1576800000.000000\", \"unit\" : \"\", \"event\" : \"ex_ret_ops\"",
        "\"counter-value\" : \"7000000000.000000\", \"unit\" : \"\", \"event\" : \"ex_ret_ops\"",
    );
    assert!(
        json.contains("\"7000000000.000000\""),
        "the fixture changed"
    );
    std::fs::write(&skewed, json).unwrap();
    let o = TMA.run(&[
        "stat",
        "--import",
        skewed.to_str().unwrap(),
        "--cpu",
        "zen4",
        "--compact",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let (head, data) = compact_table(&text);
    let col = head.iter().position(|h| *h == "retiring").unwrap() - 1; // "end (s)" is 2 words
    let retiring = data[0][col];
    assert!(retiring.ends_with("%?"), "{retiring}: {text}");

    let o = TMA.run(&[
        "stat",
        "--import",
        p.to_str().unwrap(),
        "--cpu",
        "zen4",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["interval_mode"], true);
    assert_eq!(j["intervals"].as_array().unwrap().len(), 2);
    assert_eq!(j["intervals"][1]["start_s"], 1.0005);
}

#[test]
fn output_file_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree.json");
    let o = TMA.run(&[
        "stat",
        "--import",
        ZEN4,
        "--cpu",
        "zen4",
        "--json",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(j["schema"], "tma.stat");
}

#[test]
fn live_flags_are_refused_with_import() {
    let o = TMA.run(&["stat", "--import", ZEN4, "--cpu", "zen4", "-a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be combined with -a"));
}

/// Every bad input: exit code 2, one line on stderr that says what is wrong, and no -o file.
#[test]
fn bad_input_one_line_exit_2_no_output_file() {
    let zen4 = std::fs::read_to_string(repo_root().join(ZEN4)).unwrap();
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let cases: Vec<(&str, Vec<u8>, &[&str], &str)> = vec![
        ("empty", Vec::new(), &["--cpu", "zen4"], "the file is empty"),
        ("garbage", garbage, &["--cpu", "zen4"], "binary"),
        (
            // A whole-run recording cut in its last line has no complete interval.
            "cut off",
            (zen4.lines().take(6).collect::<Vec<_>>().join("\n") + "\n1576800000,,de_src_op")
                .into_bytes(),
            &["--cpu", "zen4"],
            "line 7: the recording is cut off",
        ),
        (
            "truncated",
            (zen4.lines().take(6).collect::<Vec<_>>().join("\n")
                + "\n1576800000,,de_src_op\n")
                .into_bytes(),
            &["--cpu", "zen4"],
            "truncated",
        ),
        (
            "unknown events",
            b"100,,not_an_event,5,100.00,,\n200,,ls_not_halted_cyc,5,100.00,,\n".to_vec(),
            &["--cpu", "zen4", "--strict"],
            "not_an_event",
        ),
        (
            "other cpu",
            b"100,,TOPDOWN.SLOTS,5,100.00,,\n20,,topdown-fe-bound,5,100.00,,\n30,,INT_MISC.UOP_DROPPING,5,100.00,,\n"
                .to_vec(),
            &["--cpu", "zen4"],
            "not in the zen4 event tables",
        ),
        (
            "thousands",
            b"1,000,000,000,,ls_not_halted_cyc,5,100.00,,\n".to_vec(),
            &["--cpu", "zen4"],
            "LC_ALL=C",
        ),
        (
            "quoted thousands",
            b"\"1,000,000,000\",,ls_not_halted_cyc,5,100.00,,\n".to_vec(),
            &["--cpu", "zen4"],
            "thousands separators",
        ),
        (
            "wrong cpu",
            zen4.clone().into_bytes(),
            &["--cpu", "zen5"],
            "look like events of zen4",
        ),
        (
            "unknown cpu name",
            zen4.clone().into_bytes(),
            &["--cpu", "pentium4"],
            "supported names",
        ),
        (
            "no tree events",
            std::fs::read(fixture("import/perf-csv-sw.csv")).unwrap(),
            &["--cpu", "zen4"],
            "none of the",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, bytes, extra, want) in cases {
        let input = dir.path().join("in.csv");
        std::fs::write(&input, &bytes).unwrap();
        let out = dir.path().join("out.txt");
        let mut args = vec!["stat", "--import", input.to_str().unwrap(), "-l", "2"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", out.to_str().unwrap()]);
        let o = TMA.run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: not one line: {err}");
        assert!(err.starts_with("tma: error: "), "{what}: {err}");
        assert!(err.contains(want), "{what}: `{err}` lacks `{want}`");
        assert!(!out.exists(), "{what}: output file left behind");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name() != "in.csv")
            .collect();
        assert!(leftovers.is_empty(), "{what}: {leftovers:?}");
    }
}

#[test]
fn per_cpu_rows_are_summed() {
    // The zen4 counts split over two CPUs as `perf stat -x, -A` prints them (60% / 40%):
    // the summed tree is the same as the aggregated one.
    let csv = std::fs::read_to_string(repo_root().join(ZEN4)).unwrap();
    let mut out = String::new();
    for l in csv.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (value, rest) = l.split_once(",,").unwrap();
        let v: u64 = value.parse().unwrap();
        let a = v * 6 / 10;
        out.push_str(&format!("CPU0,{a},,{rest}\nCPU1,{},,{rest}\n", v - a));
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("per-cpu.csv");
    std::fs::write(&p, out).unwrap();
    let o = TMA.run(&[
        "stat",
        "--import",
        p.to_str().unwrap(),
        "--cpu",
        "zen4",
        "-l",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("per-CPU rows summed"), "{text}");
    assert!(
        text.contains("Bottleneck: backend_bound > backend_bound_cpu (65.9%)"),
        "{text}"
    );
}

#[test]
fn per_core_recording_is_refused() {
    let o = TMA.run(&[
        "stat",
        "--import",
        "tests/fixtures/import/perf-csv-per-core.csv",
        "--cpu",
        "zen4",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("--per-core") && e.contains("-A"), "{e}");
}

#[test]
fn zero_counts_are_said_plainly() {
    let csv = std::fs::read_to_string(repo_root().join(ZEN4)).unwrap();
    let zero: String = csv
        .lines()
        .map(|l| match l.split_once(",,") {
            Some((_, rest)) if !l.starts_with('#') => format!("0,,{rest}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("zero.csv");
    std::fs::write(&p, zero).unwrap();
    let o = TMA.run(&[
        "stat",
        "--import",
        p.to_str().unwrap(),
        "--cpu",
        "zen4",
        "-l",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Every counted event is 0"), "{text}");
    // No cycles counted: every share of the slots is a division by zero naming the cycles
    // event (through the total_dispatch_slots metric), never a tree of zeros.
    assert!(text.contains("ls_not_halted_cyc counted 0"), "{text}");
    assert!(
        text.contains("No bottleneck: the level-1 nodes could not be computed"),
        "{text}"
    );
    assert!(!text.contains("<=="), "{text}");
    assert!(
        !text.contains(" 0.0% "),
        "a zero share printed as if measured: {text}"
    );
}

#[test]
fn unknown_node_suggests_the_right_name() {
    let o = TMA.run(&[
        "stat",
        "--import",
        ZEN4,
        "--cpu",
        "zen4",
        "--nodes",
        "backend_bond",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean backend_bound"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_close_level_1_second_is_noted_not_ambiguous() {
    // Zen 4 level 1: frontend 40%, backend 42% of 6e9 slots: within 5 points. Level 1 has
    // no ambiguity stop: the highest is the bottleneck and the runner-up gets a note.
    let csv = "1000000000,,ls_not_halted_cyc,1,100.00,,\n\
               2400000000,,de_no_dispatch_per_slot.no_ops_from_frontend,1,100.00,,\n\
               2520000000,,de_no_dispatch_per_slot.backend_stalls,1,100.00,,\n\
               0,,de_no_dispatch_per_slot.smt_contention,1,100.00,,\n\
               1080000000,,de_src_op_disp.all,1,100.00,,\n\
               1080000000,,ex_ret_ops,1,100.00,,\n";
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("amb.csv");
    std::fs::write(&p, csv).unwrap();
    let o = TMA.run(&["stat", "--import", p.to_str().unwrap(), "--cpu", "zen4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Bottleneck: backend_bound (42.0%)"), "{text}");
    assert!(
        text.contains("  Close second at level 1: frontend_bound 40.0% is within 2.0 points."),
        "{text}"
    );
    assert!(!text.contains("ambiguous"), "{text}");
    assert!(
        text.contains("Next: tma locate -e cpu-clock -- CMD"),
        "{text}"
    );
    assert!(text.contains("<=="), "{text}");
    // No counted-share column when everything ran 100% of the time.
    assert!(!text.contains("counted]"), "{text}");
    // The JSON carries the close second; a run without one has no such key.
    let o = TMA.run(&[
        "stat",
        "--import",
        p.to_str().unwrap(),
        "--cpu",
        "zen4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let b = &j["intervals"][0]["bottleneck"];
    assert_eq!(b["node"], "backend_bound", "{b}");
    assert_eq!(b["close_second"]["node"], "frontend_bound", "{b}");
    assert!(
        (b["close_second"]["gap"].as_f64().unwrap() - 2.0).abs() < 1e-9,
        "{b}"
    );
    // `--compact` names it on the interval line too (`perf stat -I` CSV: the time first).
    let p = dir.path().join("amb-i.csv");
    let timed: String = csv.lines().map(|l| format!("1.000500000,{l}\n")).collect();
    std::fs::write(&p, timed).unwrap();
    let o = TMA.run(&[
        "stat",
        "--import",
        p.to_str().unwrap(),
        "--cpu",
        "zen4",
        "--compact",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.lines()
            .any(|l| l.ends_with("backend_bound (close: frontend_bound)")),
        "{text}"
    );
}

#[test]
fn requested_nodes_are_shown_even_under_threshold() {
    let o = TMA.run(&[
        "stat",
        "--import",
        ZEN4,
        "--cpu",
        "zen4",
        "--nodes",
        "retiring_microcode",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let l = text
        .lines()
        .find(|l| l.starts_with("  retiring_microcode"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(l.contains("6.1%") && l.contains("below"), "{l}");
    assert!(
        text.contains("TMA level 1 under retiring_microcode"),
        "{text}"
    );
}

#[test]
fn example_runs_anywhere_and_is_labelled() {
    let o = TMA.run(&["stat", "--example"]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("backend_bound_cpu"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("backend_bound_cpu") && l.contains("<==")),
        "{out}"
    );
    assert!(out.contains("bundled-example"), "{out}");
    assert!(
        stderr(&o).contains("synthetic"),
        "label missing: {}",
        stderr(&o)
    );
    // The example is an import: live-only flags are refused, not ignored.
    let o = TMA.run(&["stat", "--example", "-a"]);
    assert_eq!(o.status.code(), Some(2));
}

/// SKX level 1 divides by core clocks, which are `THREAD_ANY / 2` with SMT on and `THREAD`
/// with SMT off: the --smt flag must reach the formulas.
#[test]
fn smt_flag_reaches_the_formulas() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("skx.csv");
    let rows = [
        ("IDQ_UOPS_NOT_DELIVERED.CORE", 400_000u64),
        ("CPU_CLK_UNHALTED.THREAD", 1_000_000),
        ("CPU_CLK_UNHALTED.THREAD_ANY", 4_000_000),
        ("UOPS_ISSUED.ANY", 1_500_000),
        ("UOPS_RETIRED.RETIRE_SLOTS", 1_400_000),
        ("INT_MISC.RECOVERY_CYCLES", 10_000),
        ("INT_MISC.RECOVERY_CYCLES_ANY", 20_000),
        ("INST_RETIRED.ANY", 1_200_000),
        ("UOPS_RETIRED.MACRO_FUSED", 100_000),
    ];
    let text: String = rows
        .iter()
        .map(|(e, v)| format!("{v},,{e},1000000,100.00,,\n"))
        .collect();
    std::fs::write(&csv, text).unwrap();
    let p = csv.to_str().unwrap();
    let fe = |smt: Option<&str>| -> f64 {
        let mut a = vec!["stat", "--import", p, "--cpu", "skx", "--json"];
        if let Some(s) = smt {
            a.extend(["--smt", s]);
        }
        let o = TMA.run(&a);
        assert!(o.status.success(), "stderr: {}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let nodes = j["intervals"][0]["nodes"].as_array().unwrap().clone();
        let n = nodes
            .iter()
            .find(|n| n["name"] == "Frontend_Bound")
            .unwrap();
        n["value"].as_f64().unwrap()
    };
    // SMT off: 400k / (4 * 1M) = 10%; SMT on: 400k / (4 * 4M / 2) = 5%.
    assert!((fe(None) - 10.0).abs() < 1e-9);
    assert!((fe(Some("off")) - 10.0).abs() < 1e-9);
    assert!((fe(Some("on")) - 5.0).abs() < 1e-9);
    let o = TMA.run(&["stat", "--import", p, "--cpu", "skx"]);
    assert!(
        stderr(&o).contains("--smt on"),
        "no SMT note: {}",
        stderr(&o)
    );
    let o = TMA.run(&["stat", "--import", p, "--cpu", "skx", "--smt", "maybe"]);
    assert_eq!(o.status.code(), Some(2));
}
