//! The README's checked examples: every ```` ```console ```` block marked
//! `<!-- checked -->` on the line before it holds `$ tma ...` commands, each followed by its
//! output. They are run (from the repository root, on bundled fixtures, no PMU needed) and
//! compared with the README line by line; a line `...` stands for any number of lines, and
//! `...` inside a line for any text.
//! Blocks without the mark (live measurements, hardware figures) are not run.

use tma_testkit::{repo_root, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

/// One `$ tma ...` command and the output the README shows for it.
#[derive(Debug)]
struct Example {
    line: usize,
    args: Vec<String>,
    output: Vec<String>,
}

/// The checked examples of a README text.
fn examples(readme: &str) -> Vec<Example> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let checked = lines[i].trim() == "<!-- checked -->"
            && lines.get(i + 1).is_some_and(|l| l.trim() == "```console");
        if !checked {
            i += 1;
            continue;
        }
        i += 2;
        let mut current: Option<Example> = None;
        while i < lines.len() && lines[i].trim() != "```" {
            let l = lines[i];
            if let Some(cmd) = l.strip_prefix("$ tma ") {
                out.extend(current.take());
                current = Some(Example {
                    line: i + 1,
                    args: split(cmd),
                    output: Vec::new(),
                });
            } else if let Some(e) = current.as_mut() {
                e.output.push(l.to_string());
            } else {
                panic!(
                    "README line {}: a checked block starts with `$ tma `",
                    i + 1
                );
            }
            i += 1;
        }
        out.extend(current.take());
    }
    out
}

/// The words of a command line: whitespace-separated, `'...'` quoted, `#` comments dropped.
fn split(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in cmd.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            '#' if !quoted && cur.is_empty() => break,
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// Does `actual` match `want`, where a `want` line `...` stands for any number of lines?
fn matches(want: &[String], actual: &[&str]) -> bool {
    match want.split_first() {
        None => actual.is_empty(),
        Some((w, rest)) if w.trim() == "..." => {
            (0..=actual.len()).any(|k| matches(rest, &actual[k..]))
        }
        Some((w, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| line_matches(w, a) && matches(rest, more)),
    }
}

/// One line: equal (trailing spaces aside), or with `...` inside `want` standing for any text.
fn line_matches(want: &str, actual: &str) -> bool {
    let (want, actual) = (want.trim_end(), actual.trim_end());
    let parts: Vec<&str> = want.split("...").collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return want == actual;
    };
    if middle.is_empty() && parts.len() == 1 {
        return want == actual;
    }
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    for m in middle {
        match rest.find(m) {
            Some(i) => rest = &rest[i + m.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[test]
fn the_readme_checked_examples_print_what_the_readme_shows() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let all = examples(&readme);
    assert!(!all.is_empty(), "no checked example in the README");
    for e in all {
        // Run in the repository root with the fake host tree without a PMU, as a reader
        // without one would.
        let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
        let out = TMA.run(&args);
        assert!(
            out.status.success(),
            "README line {}: `tma {}` failed: {}",
            e.line,
            e.args.join(" "),
            stderr(&out)
        );
        let text = stdout(&out);
        let actual: Vec<&str> = text.lines().collect();
        assert!(
            matches(&e.output, &actual),
            "README line {}: `tma {}` prints something else now; update the README.\n\
             --- README ---\n{}\n--- tma ---\n{}",
            e.line,
            e.args.join(" "),
            e.output.join("\n"),
            text
        );
    }
}

#[test]
fn the_checker_reads_blocks_quotes_comments_and_elisions() {
    let text = "<!-- checked -->\n```console\n$ tma list --cpu 'zen 4'   # note\na\n...\nz\n$ tma x\n```\n```console\n$ tma not-checked\n```\n";
    let ex = examples(text);
    assert_eq!(ex.len(), 2, "{ex:?}");
    assert_eq!(ex[0].args, ["list", "--cpu", "zen 4"]);
    assert_eq!(ex[0].output, ["a", "...", "z"]);
    assert!(matches(&ex[0].output, &["a", "b", "c", "z"]));
    assert!(matches(&ex[0].output, &["a", "z"]));
    assert!(!matches(&ex[0].output, &["a", "b"]));
    assert!(ex[1].output.is_empty());
    assert!(line_matches(
        "a, ...  [missing 13, e.g. X, ...]",
        "a, b, c  [missing 13, e.g. X, Y]"
    ));
    assert!(!line_matches("a ... z", "a b y"));
    assert!(line_matches("same", "same  "));
}
