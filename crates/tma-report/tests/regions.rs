//! `tma report` of a `tma stat --regions` document (tests/fixtures/regions/zen4-regions-*.json,
//! written by tma-regions' builder from chosen counts): the table of regions per thread and
//! merged with their figures and level-1 nodes, and the timeline of each thread's regions.

mod common;

use common::*;
use tma_report::ReportConfig;

fn cfg(name: &str) -> ReportConfig {
    ReportConfig {
        inputs: vec![fixture(&format!("regions/zen4-regions-{name}.json"))],
        ..ReportConfig::default()
    }
}

/// The cells of the table row of `region` in the table of `scope`.
fn row(page: &str, scope: &str, region: &str) -> Vec<String> {
    let t = page
        .find(&format!("data-scope=\"{scope}\""))
        .unwrap_or_else(|| panic!("no table {scope}"));
    let table = &page[t..t + page[t..].find("</table>").unwrap()];
    let key = format!("<tr data-region=\"{region}\">");
    let i = table
        .find(&key)
        .unwrap_or_else(|| panic!("no row {region} in {scope}"));
    let tr = &table[i..i + table[i..].find("</tr>").unwrap()];
    tr.split("<td")
        .skip(1)
        .map(|c| {
            let c = &c[c.find('>').unwrap() + 1..];
            c[..c.find("</td>").unwrap()].to_string()
        })
        .collect()
}

#[test]
fn the_regions_table_shows_each_region_per_thread_and_merged() {
    let page = page(&cfg("before"));
    assert!(
        page.contains("<h2>Regions: zen4-regions-before.json</h2>"),
        "{page}"
    );
    assert!(page.contains("TMA trees of zen4"));
    // Columns: the figures, then the level-1 nodes of the trees.
    for h in [
        "frontend_bound",
        "bad_speculation",
        "backend_bound",
        "retiring",
    ] {
        assert!(page.contains(&format!("<th class=\"num\">{h}</th>")), "{h}");
    }
    // solve: 4 calls (3 + 1), 135 ms over both threads, its tree from the chosen counts.
    let solve = row(&page, "merged", "solve");
    assert_eq!(solve[0], "solve");
    assert_eq!(solve[1], "4");
    assert_eq!(solve[2], "135");
    assert_eq!(solve[4], "33750.0 µs");
    assert_eq!(solve[5], "100.0%");
    assert_eq!(&solve[7..], ["20.0%", "10.0%", "40.0%", "0.0%", "30.0%"]);
    // Nested under solve, and per thread.
    let inner = row(&page, "merged", "solve &#62; inner");
    assert_eq!((inner[1].as_str(), inner[2].as_str()), ("12", "70.000"));
    assert_eq!(row(&page, "4102", "solve")[2], "45.000");
    assert_eq!(row(&page, "4101", "load")[1], "1");
    assert!(page.contains("style=\"padding-left: 2em\">inner"));
}

#[test]
fn the_timeline_draws_every_region_of_every_thread() {
    let page = page(&cfg("after"));
    // Thread 4101: save, then solve three times with inner four times each; 4102: solve.
    assert_eq!(page.matches("<g class=\"span\">").count(), 1 + 3 * 5 + 1);
    assert!(page.contains("thread 4101"));
    assert!(page.contains("thread 4102"));
    assert!(
        page.contains("<title>thread 4101: solve &#62; inner, "),
        "{page}"
    );
    assert!(page.contains("<title>thread 4101: save, 1.000 .. 6.000 ms (5.000 ms)</title>"));
    assert!(!page.contains("No timeline"));
}

#[test]
fn names_are_escaped_and_a_document_without_times_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/regions/zen4-regions-before.json"))
            .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["merged"][0]["name"] = "<b>solve</b>".into();
    v.as_object_mut().unwrap().remove("timeline");
    let p = dir.path().join("r.json");
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    let page = page(&ReportConfig {
        inputs: vec![p],
        ..ReportConfig::default()
    });
    assert!(page.contains("&#60;b&#62;solve&#60;/b&#62;"));
    assert!(!page.contains("<b>solve"));
    assert!(page.contains("No timeline: the document holds no region times"));
}
