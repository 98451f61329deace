//! `tma report` pages from fixtures, with known answers: the values the formulas give for the
//! synthetic recordings (tests/fixtures/README.md), the deltas and p-values of the diff
//! fixtures, the shares `perf report` gives for chase.perf.data.

mod common;

use common::*;
use tma_report::{render, ReportConfig, ReportError};

/// The text of the element that holds `key` and follows it, up to the next `<`.
fn after<'a>(page: &'a str, key: &str) -> &'a str {
    let i = page
        .find(key)
        .unwrap_or_else(|| panic!("{key:?} not in the page"));
    let rest = &page[i + key.len()..];
    &rest[..rest.find('<').unwrap_or(rest.len())]
}

/// No external resource: no `<link>`, no `src=`/`href=` to the network, no CSS import.
fn assert_self_contained(page: &str) {
    for bad in [
        "<link",
        "src=\"http",
        "src='http",
        "href=\"http",
        "url(http",
        "@import",
        "<img src=\"//",
    ] {
        assert!(!page.contains(bad), "the page loads something: {bad}");
    }
}

#[test]
fn the_tree_shows_values_counted_share_threshold_and_bottleneck_path() {
    let page = page(&stat_cfg());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_self_contained(&page);
    // Values the formulas give (README: zen4-sha256-synthetic.csv), as `tma stat -l 2`.
    for (node, value) in [
        ("frontend_bound", "6.2%"),
        ("backend_bound", "67.6%"),
        ("backend_bound_cpu", "65.9%"),
        ("backend_bound_memory", "1.7%"),
        ("retiring", "26.3%"),
        ("retiring_fastpath", "20.2%"),
        ("retiring_microcode", "6.1%"),
    ] {
        let key = format!("data-node=\"{node}\"");
        let row = &page[page.find(&key).unwrap_or_else(|| panic!("{node} missing"))..];
        let value_at = row.find("class=\"value\">").unwrap() + "class=\"value\">".len();
        assert!(
            row[value_at..].starts_with(value),
            "{node}: {}",
            &row[value_at..value_at + 12]
        );
    }
    // The bottleneck and its path are marked; the counted share is shown.
    assert!(page.contains("<div class=\"node bottleneck\" data-node=\"backend_bound_cpu\""));
    assert!(page.contains("<details class=\"path\" open><summary><div class=\"node path\" data-node=\"backend_bound\""));
    assert!(page.contains("[50.0% counted]"));
    assert!(page.contains("Bottleneck: backend_bound &#62; backend_bound_cpu (65.9%)"));
    // Nodes under threshold are there, collapsed or not, with their class.
    assert!(page.contains("<div class=\"node below\" data-node=\"frontend_bound\""));
    // Every <details> is closed.
    assert_eq!(
        page.matches("<details").count(),
        page.matches("</details>").count()
    );
}

#[test]
fn intel_thresholds_are_marked_where_the_rule_has_a_number() {
    // icx: Backend_Bound's rule is `Backend_Bound > 20`; the JSON fixture is of zen4-like
    // names, so read a tree of icx from its recording instead.
    let cfg = ReportConfig {
        read: tma_stat::ReadOptions {
            cpu: Some("icx".into()),
            ..Default::default()
        },
        inputs: vec![fixture("import/icx-metrics-synthetic.csv")],
        ..ReportConfig::default()
    };
    let page = page(&cfg);
    let row = &page[page.find("data-node=\"Backend_Bound\"").unwrap()..];
    let row = &row[..row.find("</div>").unwrap()];
    // Threshold 20% on a scale of 100%: the mark sits at 20.00%.
    assert!(
        row.contains("<span class=\"thr\" style=\"left: 20.00%\" title=\"threshold 20.0%\">"),
        "{row}"
    );
}

#[test]
fn intervals_draw_two_timelines_with_the_known_means() {
    let page = page(&intervals_cfg());
    assert_self_contained(&page);
    assert!(page.contains("60 intervals; the tree shows their means"));
    assert!(page.contains("<h3>Level 1 over time</h3>"));
    // Phase one is memory-bound, phase two core-bound: backend_bound is the bottleneck of
    // most intervals, and its children get the second timeline.
    assert!(page.contains("<h3>backend_bound: its children over time</h3>"));
    assert_eq!(page.matches("<div class=\"timeline\"").count(), 2);
    // Summary rows: mean, min, max from the generator (make-zen4-phases.py).
    let row = |name: &str| {
        let key = format!("</span>{name}</td>");
        let i = page.find(&key).unwrap_or_else(|| panic!("{name} row"));
        let rest = &page[i + key.len()..];
        let cells: Vec<String> = rest[..rest.find("</tr>").unwrap()]
            .split("<td class=\"num\">")
            .skip(1)
            .map(|c| c[..c.find('<').unwrap()].to_string())
            .collect();
        cells
    };
    assert_eq!(row("retiring"), ["37.0%", "28.0%", "46.0%"]);
    assert_eq!(row("bad_speculation"), ["4.0%", "4.0%", "4.0%"]);
    assert_eq!(row("backend_bound"), ["50.0%", "39.0%", "61.0%"]);
    assert_eq!(row("frontend_bound"), ["9.0%", "7.0%", "11.0%"]);
    assert_eq!(row("backend_bound_memory"), ["23.9%", "5.9%", "42.7%"]);
    assert_eq!(row("backend_bound_cpu"), ["26.0%", "17.7%", "34.8%"]);
    // Hover data: one column per interval, start and end in seconds, then the values.
    let data = after(&page, "<script type=\"application/json\" class=\"data\">");
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["columns"].as_array().unwrap().len(), 60);
    assert_eq!(v["names"][0], "frontend_bound");
    assert_eq!(v["columns"][59][1], 6.0);
    // The plotters SVG got a viewBox so that it scales with the page.
    assert!(page.contains("viewBox=\"0 0 960 360\""));
}

/// A 1,000-interval recording: the fixture's 60 intervals repeated with shifted times.
fn thousand_intervals(dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(fixture("report/zen4-phases-synthetic.csv")).unwrap();
    let blocks: Vec<Vec<&str>> = {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .collect();
        lines.chunks(12).map(<[&str]>::to_vec).collect()
    };
    assert_eq!(blocks.len(), 60);
    let mut out = String::from("# 1000 intervals made from zen4-phases-synthetic.csv\n\n");
    for i in 0..1000 {
        let t = 0.1 * (i + 1) as f64;
        for l in &blocks[i % 60] {
            let (_, rest) = l.split_once(',').unwrap();
            out.push_str(&format!("{t:14.9},{rest}\n"));
        }
    }
    let p = dir.join("thousand.csv");
    std::fs::write(&p, out).unwrap();
    p
}

#[test]
fn a_thousand_interval_recording_makes_a_page_under_2_mb() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ReportConfig {
        inputs: vec![thousand_intervals(dir.path())],
        ..intervals_cfg()
    };
    let page = page(&cfg);
    assert_self_contained(&page);
    assert!(page.contains("1000 intervals"));
    let data = after(&page, "<script type=\"application/json\" class=\"data\">");
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    // Drawn interval by interval: 1,000 columns.
    assert_eq!(v["columns"].as_array().unwrap().len(), 1000);
    assert!(
        page.len() < 2_000_000,
        "the page is {} bytes for 1,000 intervals",
        page.len()
    );
    println!("1,000-interval page: {} bytes", page.len());
}

#[test]
fn the_diff_shows_before_after_delta_and_p() {
    let page = page(&diff_cfg());
    assert_self_contained(&page);
    // Known answers (crates/tma-diff/tests/fixtures.rs): memory [40, 44] -> [10, 14], p =
    // 1 - sqrt(225/229) = 0.00877; cpu [20, 20] -> [30, 32], p = 1 - 2 atan(11)/pi = 0.0577;
    // frontend [10, 12] -> [12, 12], p = 1/2.
    let row = |name: &str| {
        let key = format!("<tr data-node=\"{name}\">");
        let i = page.find(&key).unwrap_or_else(|| panic!("{name} row"));
        page[i..i + page[i..].find("</tr>").unwrap()].to_string()
    };
    let mem = row("backend_bound_memory");
    assert!(mem.contains(">42.0% (n=2)<"), "{mem}");
    assert!(mem.contains(">12.0% (n=2)<"), "{mem}");
    assert!(
        mem.contains("class=\"num better\">-30.0 pts (-71.4%)<"),
        "{mem}"
    );
    assert!(mem.contains("class=\"num significant\""), "{mem}");
    assert!(mem.contains(">p = 0.009 *<"), "{mem}");
    let cpu = row("backend_bound_cpu");
    assert!(
        cpu.contains("class=\"num worse\">+11.0 pts (+55.0%)<"),
        "{cpu}"
    );
    assert!(cpu.contains(">p = 0.058<"), "{cpu}");
    assert!(cpu.contains("class=\"num not_significant\""), "{cpu}");
    assert!(row("frontend_bound").contains(">p = 0.500<"));
    // Side-by-side bars: before and after, in % of the scale (100%).
    assert!(
        mem.contains("<div class=\"track before\"><span class=\"bar\" style=\"width: 42.00%\">")
    );
    assert!(mem.contains("<div class=\"track after\"><span class=\"bar\" style=\"width: 12.00%\">"));
    assert!(page.contains("backend_bound &#62; backend_bound_memory 42.0% → 12.0% (fixed)"));
    assert!(page.contains("Welch&#39;s t-test") || page.contains("Welch&#x27;s t-test"));
}

/// A change is coloured by whether it is better or worse for that node or
/// metric, not by its sign; the legend says so; one colour means one thing on the page.
#[test]
fn the_diff_colours_changes_by_direction_and_says_so() {
    let page = page(&diff_cfg());
    let delta = |key: &str| {
        let i = page.find(key).unwrap_or_else(|| panic!("{key} row"));
        let row = &page[i..i + page[i..].find("</tr>").unwrap()];
        let cells: Vec<&str> = row.split("<td class=\"num").collect();
        // before, after, delta, significance (nodes have the bars between, in no num cell).
        cells[3].to_string()
    };
    assert!(delta("<tr data-node=\"retiring\">").starts_with(" better\">+19.0 pts"));
    assert!(delta("<tr data-metric=\"IPC\">").starts_with(" better\">+0.600"));
    assert!(delta("<tr data-node=\"frontend_bound\">").starts_with(" worse\">+1.0 pts"));
    assert!(delta("<tr data-node=\"backend_bound\">").starts_with(" better\">-20.0 pts"));
    assert!(!page.contains("num up") && !page.contains("num down"));
    assert!(page.contains(
        "Deltas are coloured by direction, not by sign: <span class=\"better\">green = better</span>"
    ));
    assert!(page.contains("uncoloured where which way is better is not known"));
    // The tree's states avoid the timelines' series colours (Okabe-Ito), amber above all.
    for series in [
        "#e69f00", "#d55e00", "#0072b2", "#009e73", "#56b4e9", "#cc79a7",
    ] {
        let css = &page[..page.find("</style>").unwrap()];
        for state in [".bottleneck", ".path", ".above", ".better", ".worse"] {
            let rule = css
                .lines()
                .filter(|l| l.starts_with(state) || l.contains(&format!(".node{state}")))
                .collect::<String>();
            assert!(
                !rule.contains(series),
                "{state} uses the series colour {series}"
            );
        }
    }
}

#[test]
fn a_perf_data_profile_has_a_flame_graph_and_the_hot_functions() {
    let page = page(&locate_cfg());
    assert_self_contained(&page);
    // perf report: chase 91.53%, main 5.71% (tests/fixtures/locate/chase.perf-report.txt).
    assert!(page.contains(
        "<tr data-function=\"chase\"><td class=\"num\">865</td><td class=\"num\">91.5%</td>"
    ));
    assert!(page.contains("<td class=\"num\">5.7%</td>"));
    // The flame graph: inferno's SVG in an HTML document in an iframe's srcdoc (escaped once), with the
    // call chain main -> chase.
    assert!(page.contains(
        "<iframe class=\"flame\" title=\"flame graph\" sandbox=\"allow-scripts\" style=\"height: "
    ));
    let i = page.find("srcdoc=\"").unwrap();
    let srcdoc = &page[i..i + page[i..].find("\"></iframe>").unwrap()];
    assert!(srcdoc.contains("&#60;!DOCTYPE html&#62;&#60;html&#62;"));
    assert!(srcdoc.contains("&#60;svg"));
    assert!(!srcdoc.contains("&#60;?xml"));
    assert!(srcdoc.contains("chase"));
    assert!(srcdoc.contains("main"));
    assert!(!srcdoc.contains('<'), "srcdoc must be escaped");
    // The annotated hot instruction (the load at 0x1197 skids to 0x119a).
    let hot = &page[page.find("<tr class=\"hot\">").expect("a hot instruction")..];
    assert!(
        hot.starts_with("<tr class=\"hot\"><td>119a</td>"),
        "{}",
        &hot[..80]
    );
}

#[test]
fn a_locate_document_says_why_there_is_no_flame_graph() {
    let cfg = ReportConfig {
        inputs: vec![fixture("diff/before-synthetic.locate.json")],
        ..ReportConfig::default()
    };
    let page = page(&cfg);
    assert!(page.contains("No flame graph: a tma locate --json document holds no call chains"));
    assert!(!page.contains("<iframe"));
    assert!(page.contains(
        "<tr data-function=\"hash\"><td class=\"num\">50</td><td class=\"num\">50.0%</td>"
    ));
}

#[test]
fn text_from_inputs_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("diff/before-synthetic.locate.json")).unwrap();
    let evil = "operator<<(std::ostream&, \\\"x\\\") </script><script>alert(1)</script>";
    let p = dir.path().join("evil.locate.json");
    std::fs::write(&p, text.replace("\"hash\"", &format!("\"{evil}\""))).unwrap();
    let cfg = ReportConfig {
        inputs: vec![p],
        title: Some("<b>title</b> & more".into()),
        ..ReportConfig::default()
    };
    let page = page(&cfg);
    assert!(!page.contains("<script>alert(1)"));
    assert!(!page.contains("<b>title</b>"));
    assert!(page.contains("&#60;b&#62;title&#60;/b&#62; &#38; more"));
    assert!(page.contains("operator&#60;&#60;(std::ostream&#38;, &#34;x&#34;) &#60;/script&#62;"));
    // Our own script is there once, and nothing else opened a script element.
    assert_eq!(page.matches("<script>").count(), 1);
}

#[test]
fn the_bench_tables_show_latency_and_throughput() {
    let cfg = ReportConfig {
        inputs: vec![fixture("report/add.bench.json")],
        ..ReportConfig::default()
    };
    let page = page(&cfg);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("report/add.bench.json")).unwrap()).unwrap();
    let form = &doc["forms"][0];
    let lat = form["latency"][0]["figures"][0]["median"].as_f64().unwrap();
    let tp = form["throughput"]["best"][0]["median"].as_f64().unwrap();
    assert!(page.contains(&format!(
        "<h3 class=\"mono\">{}</h3>",
        form["input"].as_str().unwrap()
    )));
    assert!(page.contains("<td>latency</td>"));
    assert!(
        page.contains(&format!("<td class=\"num\">{lat:.3}</td>")),
        "latency {lat}"
    );
    // A figure whose repetitions did not agree is never shown as a clean number.
    let tp_text = if form["throughput"]["best"][0]["converged"] == false {
        format!("{tp:.3} (unconverged)")
    } else {
        format!("{tp:.3}")
    };
    assert!(
        page.contains(&format!("<td class=\"num\">{tp_text}</td>")),
        "throughput {tp_text}"
    );
    // The recorded fixture has one of each (README of the fixtures).
    assert_eq!(form["latency"][0]["figures"][0]["converged"], true);
    assert!(page.contains(" (unconverged)</td>"));
}

#[test]
fn several_inputs_make_several_sections_in_order() {
    let cfg = ReportConfig {
        read: tma_stat::ReadOptions {
            cpu: Some("zen4".into()),
            ..Default::default()
        },
        inputs: vec![
            fixture("report/zen4.diff.json"),
            fixture("import/zen4-sha256-synthetic.csv"),
            fixture("diff/before-synthetic.locate.json"),
        ],
        ..ReportConfig::default()
    };
    let page = page(&cfg);
    let a = page.find("<section id=\"s1\" class=\"diff\">").unwrap();
    let b = page.find("<section id=\"s2\" class=\"stat\">").unwrap();
    let c = page.find("<section id=\"s3\" class=\"locate\">").unwrap();
    assert!(a < b && b < c);
    assert!(page.contains("<li><a href=\"#s2\">TMA tree: "));
}

#[test]
fn svg_is_the_timeline_or_the_tree() {
    let mut notes = Vec::new();
    let r = tma_report::run(&intervals_cfg(), &mut notes).unwrap();
    let svg = render::svg(&r).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("TMA level 1 over time"));
    assert!(svg.contains("backend_bound: its children over time"));
    assert!(svg.contains("backend_bound_memory"));

    let r = tma_report::run(&stat_cfg(), &mut notes).unwrap();
    let svg = render::svg(&r).unwrap();
    assert!(svg.contains("TMA tree: AMD Zen 4 (zen4)"));
    assert!(svg.contains("backend_bound_cpu"));
    assert!(svg.contains("65.9%  bottleneck"));

    let r = tma_report::run(&diff_cfg(), &mut notes).unwrap();
    let e = render::svg(&r).unwrap_err();
    assert!(matches!(e, ReportError::NothingToDraw { .. }), "{e}");
    assert!(e.to_string().contains("the inputs are: diff"), "{e}");
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let kvm = dir.path().join("kvm.json");
    std::fs::write(
        &kvm,
        "{\n  \"schema\": \"tma.kvm\",\n  \"schema_version\": 1\n}\n",
    )
    .unwrap();
    let run = |p: &std::path::Path| {
        let cfg = ReportConfig {
            inputs: vec![p.to_path_buf()],
            // A machine whose CPU the tables do not know, whatever this host is (on a Zen 4
            // host the recording below would otherwise be read as zen4).
            host: tma_host::Host::under(&root().join("tests/fixtures/roots/none")),
            ..ReportConfig::default()
        };
        tma_report::run(&cfg, &mut Vec::new())
            .unwrap_err()
            .to_string()
    };
    let e = run(&kvm);
    assert!(
        e.contains("a \"tma.kvm\" document; tma report draws tma.stat"),
        "{e}"
    );
    let v9 = dir.path().join("v9.json");
    std::fs::write(
        &v9,
        "{\n  \"schema\": \"tma.diff\",\n  \"schema_version\": 9\n}\n",
    )
    .unwrap();
    let e = run(&v9);
    assert!(
        e.contains("tma.diff schema_version 9; this tma reads versions 1 to 2"),
        "{e}"
    );
    let e = run(&dir.path().join("missing.json"));
    assert!(e.starts_with("cannot read "), "{e}");
    // A perf stat recording on a machine the tables do not know is read with the table its
    // events fit (zen4), as `tma stat --import` reads it.
    let cfg = ReportConfig {
        inputs: vec![fixture("import/zen4-sha256-synthetic.csv")],
        host: tma_host::Host::under(&root().join("tests/fixtures/roots/none")),
        ..ReportConfig::default()
    };
    let report = tma_report::run(&cfg, &mut Vec::new()).unwrap();
    assert!(
        matches!(&report.sections[0], tma_report::Section::Stat(v) if v.cpu_key == "zen4"),
        "{report:?}"
    );
    let e = tma_report::run(&ReportConfig::default(), &mut Vec::new()).unwrap_err();
    assert!(matches!(e, ReportError::NoInput));
}

#[test]
fn a_profile_diff_shows_each_functions_shares_and_delta() {
    let cfg = ReportConfig {
        inputs: vec![fixture("report/profile.diff.json")],
        ..ReportConfig::default()
    };
    let page = page(&cfg);
    // README of the fixtures: 50/30/20/0 % -> 20/53/0/27 %, sorted by |delta|.
    let hash = page.find("<tr data-function=\"hash\">").unwrap();
    let inflate = page.find("<tr data-function=\"inflate\">").unwrap();
    let memcpy = page.find("<tr data-function=\"memcpy\">").unwrap();
    let parse = page.find("<tr data-function=\"parse\">").unwrap();
    assert!(hash < inflate && inflate < memcpy && memcpy < parse);
    let row = &page[hash..hash + page[hash..].find("</tr>").unwrap()];
    assert!(
        row.contains("<td class=\"num\">50.00%</td><td class=\"num\">20.00%</td>"),
        "{row}"
    );
    assert!(
        row.contains("<td class=\"num down\">-30.00 pts</td>"),
        "{row}"
    );
    let row = &page[inflate..inflate + page[inflate..].find("</tr>").unwrap()];
    assert!(
        row.contains("<td class=\"num up\">+27.00 pts</td>"),
        "{row}"
    );
}

/// `tma stat --json` of a hybrid part (a document per core type): the report draws one core
/// type's tree, the one `--cpu` names (else the first), and its notes say which and what
/// else the file holds.
#[test]
fn a_hybrid_stat_document_draws_one_core_type_and_says_which() {
    let recording = fixture("import/real/adl-lkml-2023-hybrid-topdownl2/perf-stat.csv");
    let stat = tma_stat::StatConfig {
        input: tma_stat::Input::Import(recording),
        cpu: Some("adl".into()),
        level: 1,
        render: tma_stat::RenderOptions {
            format: tma_stat::Format::Json,
            ..Default::default()
        },
        ..tma_stat::StatConfig::default()
    };
    let mut json = Vec::new();
    tma_stat::run(
        &stat,
        &mut tma_stat::TreeOutput::new(&mut json, &stat.render),
        &mut Vec::new(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hybrid.json");
    std::fs::write(&path, &json).unwrap();
    for (cpu, drawn, other, table) in [
        (
            None,
            "P-core tree (adl)",
            "E-core (--cpu adl-e)",
            "P-core (Golden Cove) (adl",
        ),
        (
            Some("adl-e"),
            "E-core tree (adl-e)",
            "P-core (--cpu adl)",
            "(Gracemont) (adl-e",
        ),
    ] {
        let cfg = ReportConfig {
            read: tma_stat::ReadOptions {
                cpu: cpu.map(str::to_string),
                ..Default::default()
            },
            inputs: vec![path.clone()],
            ..ReportConfig::default()
        };
        let mut notes = Vec::new();
        let r = tma_report::run(&cfg, &mut notes).unwrap();
        let notes = String::from_utf8(notes).unwrap();
        assert!(
            notes.contains(&format!("this report draws the {drawn}")) && notes.contains(other),
            "{notes}"
        );
        let mut out = Vec::new();
        render::html(&mut out, &r).unwrap();
        let page = String::from_utf8(out).unwrap();
        // Both tables name the level-1 nodes alike; the page names the table drawn.
        assert!(page.contains("data-node=\"Retiring\""), "a tree is drawn");
        assert!(page.contains(table), "{table}");
    }
}
