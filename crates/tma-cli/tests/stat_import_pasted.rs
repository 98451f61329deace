//! The real `perf stat` runs of tests/fixtures/import/real/ (each folder's source.json has
//! its citation) as users paste them: from the first counter line or after the `$ perf stat`
//! command line, without perf's header; and as perf prints them in other locales (`.`
//! between thousands and `,` for the decimal point as in de_DE and pt_BR, a space, U+00A0 or
//! U+202F between thousands as in fr_FR). Each form must give exactly the tree of the run as
//! published.

use serde_json::Value;
use tma_testkit::{fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// Every real run with perf's text.
fn recordings() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixture("import/real"))
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.path()
                .join("perf-output.txt")
                .exists()
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// Whether a whitespace-separated word is one of perf's numbers: a count, a share in
/// parentheses, a percentage, a fraction.
fn number_core(word: &str) -> Option<(&str, &str, &str)> {
    let start = word.find(|c: char| c.is_ascii_digit())?;
    let (pre, rest) = word.split_at(start);
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
        .unwrap_or(rest.len());
    let (num, post) = rest.split_at(end);
    let ok_pre = matches!(pre, "" | "(");
    let ok_post = matches!(post, "" | "%" | "%)" | ")");
    (ok_pre && ok_post && !num.ends_with(['.', ','])).then_some((pre, num, post))
}

/// `text` as perf prints it with `decimal` for the point and `thousands` between groups.
fn relocalized(text: &str, decimal: &str, thousands: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with('$') {
            out.push_str(line);
        } else {
            let mut word = String::new();
            for c in line.chars().chain(std::iter::once('\n')) {
                if c.is_whitespace() {
                    match number_core(&word) {
                        Some((pre, num, post)) => {
                            let num = num.replace(',', "\u{1}").replace('.', decimal);
                            out.push_str(&format!(
                                "{pre}{}{post}",
                                num.replace('\u{1}', thousands)
                            ));
                        }
                        None => out.push_str(&word),
                    }
                    word.clear();
                    if c != '\n' {
                        out.push(c);
                    }
                } else {
                    word.push(c);
                }
            }
        }
        out.push('\n');
    }
    out
}

/// `text` from its first line after perf's header, with `command` above it when given.
fn headerless(text: &str, command: Option<&str>) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let after = lines
        .iter()
        .position(|l| l.contains("Performance counter stats for"))
        .map_or(0, |i| i + 1);
    let mut body: Vec<&str> = lines[after..]
        .iter()
        .copied()
        .filter(|l| !(l.trim_start().starts_with('#') && l.contains("counts")))
        .skip_while(|l| l.trim().is_empty())
        .collect();
    if let Some(c) = command {
        body.insert(0, c);
    }
    body.join("\n") + "\n"
}

/// The values of every node and what tma says of perf's value for it, per tree.
fn trees(docs: &[Value]) -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    for d in docs {
        let core = d["core_type"].as_str().unwrap_or("").to_string();
        for iv in d["intervals"].as_array().unwrap() {
            for n in iv["nodes"].as_array().unwrap() {
                out.push((
                    format!("{core} {}", n["name"].as_str().unwrap()),
                    n["value"].clone(),
                    n.get("perf").map_or(Value::Null, |p| p["agrees"].clone()),
                ));
            }
        }
    }
    out
}

fn import(name: &str, file: &std::path::Path) -> (String, Vec<Value>) {
    let src: Value = serde_json::from_slice(
        &std::fs::read(fixture(&format!("import/real/{name}/source.json"))).unwrap(),
    )
    .unwrap();
    let level = src["level"].to_string();
    let o = TMA.run(&[
        "stat",
        "--import",
        file.to_str().unwrap(),
        "--cpu",
        src["cpu"].as_str().unwrap(),
        "-l",
        &level,
        "--smt",
        src["smt"].as_str().unwrap_or("off"),
        "--json",
    ]);
    assert!(
        o.status.success(),
        "{name} {}: {}",
        file.display(),
        stderr(&o)
    );
    let docs = serde_json::Deserializer::from_str(&stdout(&o))
        .into_iter::<Value>()
        .map(|d| d.unwrap())
        .collect();
    (stderr(&o), docs)
}

#[test]
fn every_run_reads_the_same_pasted_without_its_header_and_in_other_locales() {
    let dir = tempfile::tempdir().unwrap();
    let names = recordings();
    assert!(names.len() >= 20, "{names:?}");
    for name in &names {
        let published = fixture(&format!("import/real/{name}/perf-output.txt"));
        let text = std::fs::read_to_string(&published).unwrap();
        let (_, docs) = import(name, &published);
        let want = trees(&docs);
        assert!(!want.is_empty(), "{name}");
        let command = "$ perf stat -M TopdownL1 -- ./a.out";
        let forms = [
            ("headerless", headerless(&text, None), None),
            ("after-command", headerless(&text, Some(command)), None),
            (
                "de_DE",
                relocalized(&text, ",", "."),
                Some("`,` as the decimal point, `.`"),
            ),
            (
                "fr_FR",
                relocalized(&text, ",", " "),
                Some("a space between"),
            ),
            ("nbsp", relocalized(&text, ",", "\u{a0}"), Some("U+00A0")),
            ("nnbsp", relocalized(&text, ",", "\u{202f}"), Some("U+202F")),
            ("de_CH", relocalized(&text, ".", "'"), Some("`'` between")),
            (
                "headerless-de_DE",
                headerless(&relocalized(&text, ",", "."), Some(command)),
                Some("`,` as the decimal point"),
            ),
        ];
        for (form, body, note) in forms {
            let file = dir.path().join(format!("{name}-{form}.txt"));
            std::fs::write(&file, &body).unwrap();
            let (err, docs) = import(name, &file);
            assert_eq!(trees(&docs), want, "{name} as {form}:\n{body}");
            let said = err.matches("numbers written with").count();
            match note {
                Some(n) => {
                    assert_eq!(said, 1, "{name} as {form}: {err}");
                    assert!(err.contains(n), "{name} as {form}: {err}");
                }
                None => assert_eq!(said, 0, "{name} as {form}: {err}"),
            }
        }
    }
}

/// The nodes of each interval of each tree.
fn intervals(docs: &[Value]) -> Vec<Vec<(String, Value, Value)>> {
    let mut out = Vec::new();
    for d in docs {
        for iv in d["intervals"].as_array().unwrap() {
            let mut doc = d.clone();
            doc["intervals"] = Value::Array(vec![iv.clone()]);
            out.push(trees(std::slice::from_ref(&doc)));
        }
    }
    out
}

/// A whole-run recording as the two intervals of a `perf stat -I` run that counted the same
/// twice: `-x,` CSV, `-j` JSON or text.
fn as_intervals(form: &str, body: &str) -> String {
    let mut out = String::new();
    if form == "perf-output.txt" {
        out.push_str("#           time             counts unit events\n");
    }
    for ts in ["1.000000000", "2.000000000"] {
        let mut in_body = form != "perf-output.txt";
        for line in body.lines() {
            let t = line.trim();
            let comment = t.starts_with('#') && form != "perf-output.txt";
            if t.is_empty() || t.starts_with('$') || comment {
                continue;
            }
            match form {
                "perf-stat.csv" => out.push_str(&format!("{ts},{line}\n")),
                "perf-stat.json" => {
                    let rest = t.strip_prefix('{').unwrap();
                    out.push_str(&format!("{{\"interval\" : {ts}, {rest}\n"));
                }
                _ => {
                    if t.starts_with("Performance counter stats for") {
                        in_body = true;
                        continue;
                    }
                    if !in_body || t.contains(" seconds ") {
                        continue;
                    }
                    out.push_str(&format!("{ts:>15} {line}\n"));
                }
            }
        }
    }
    out
}

#[test]
fn every_run_reads_the_same_in_each_interval_of_an_interval_recording() {
    let dir = tempfile::tempdir().unwrap();
    for name in &recordings() {
        for form in ["perf-output.txt", "perf-stat.csv", "perf-stat.json"] {
            let published = fixture(&format!("import/real/{name}/{form}"));
            let (_, docs) = import(name, &published);
            let whole = intervals(&docs);
            let body = std::fs::read_to_string(&published).unwrap();
            let file = dir.path().join(format!("{name}-I-{form}"));
            std::fs::write(&file, as_intervals(form, &body)).unwrap();
            let (_, docs) = import(name, &file);
            // Each tree's two intervals (hybrid trees may come interval by interval).
            let key = |t: &Vec<(String, Value, Value)>| format!("{t:?}");
            let mut got = intervals(&docs);
            got.sort_by_key(key);
            let mut want: Vec<_> = whole.iter().flat_map(|t| [t.clone(), t.clone()]).collect();
            want.sort_by_key(key);
            assert_eq!(got.len(), want.len(), "{name} {form} as -I");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let differ: Vec<_> = g.iter().zip(w).filter(|(a, b)| a != b).collect();
                assert!(
                    differ.is_empty(),
                    "{name} {form} as -I, tree {k}: {differ:?}"
                );
            }
        }
    }
}

#[test]
fn a_cut_recording_is_named_and_said_to_be_cut() {
    let dir = tempfile::tempdir().unwrap();
    let csv =
        std::fs::read_to_string(fixture("import/real/zen4-copyif-blog-l1/perf-stat.csv")).unwrap();
    let first = csv.lines().next().unwrap();
    for (name, body, says) in [
        ("field.csv", first.to_string(), "has no line end"),
        (
            "inside.csv",
            first[..first.len() / 2].to_string(),
            "cut off",
        ),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, body).unwrap();
        let o = TMA.run(&["stat", "--import", file.to_str().unwrap(), "--cpu", "zen4"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn the_forms_are_made_as_perf_prints_them() {
    let line = "     3,408,960,257      cpu_cycles    #      0.0 %  bad_speculation   (66.79%)";
    assert_eq!(
        relocalized(line, ",", "."),
        "     3.408.960.257      cpu_cycles    #      0,0 %  bad_speculation   (66,79%)\n"
    );
    assert_eq!(
        relocalized("  cpu/event=0x1a0,umask=0x1/ 1,234", ",", " "),
        "  cpu/event=0x1a0,umask=0x1/ 1 234\n"
    );
    let t = " Performance counter stats for 'x':\n\n   1 cycles\n";
    assert_eq!(headerless(t, None), "   1 cycles\n");
}
