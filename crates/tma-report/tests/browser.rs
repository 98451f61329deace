//! The pages in a real browser: headless Chromium (Debian package `chromium`) loads the stat,
//! intervals, diff, locate (flame graph) and regions pages made from fixtures, and for each the test
//! checks that it loads with no console message at all (errors, warnings, logs: the page's
//! script writes none), that the DOM after its scripts ran holds the expected node names and
//! values, and that a screenshot is not blank (many distinct colours); and that hovering over
//! the timeline shows the values of the interval under the mouse.
//!
//! Without Chromium the test skips with the reason (`scripts/test.sh` installs it when it
//! can). `UPDATE_SCREENSHOTS=1` copies the screenshots to docs/screenshots/.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use tma_report::ReportConfig;

const CHROMIUM: &[&str] = &["/usr/bin/chromium", "/usr/bin/chromium-browser"];

fn chromium() -> Option<PathBuf> {
    CHROMIUM.iter().map(PathBuf::from).find(|p| p.exists())
}

/// Run Chromium headless on `url` with `args`; its stdout and stderr. Killed after 90 s.
fn run_chromium(bin: &Path, profile: &Path, args: &[&str], url: &str) -> (String, String) {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-extensions",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("start chromium");
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(90)) {
        Ok(r) => r.expect("chromium output"),
        Err(_) => {
            // Kill the one process this test started, by its id.
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("chromium did not finish within 90 s on {url}");
        }
    };
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Console messages Chromium logged (`...:CONSOLE(line)] "text", source: ...`).
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// Distinct colours of a PNG and the share of its most common colour.
fn colours(png_path: &Path) -> (usize, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("screenshot"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let bytes = &buf[..info.buffer_size()];
    let step = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        png::ColorType::GrayscaleAlpha => 2,
        _ => 1,
    };
    let mut counts: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for px in bytes.chunks_exact(step) {
        *counts.entry(px).or_default() += 1;
    }
    let total = bytes.len() / step;
    let top = counts.values().copied().max().unwrap_or(0);
    (counts.len(), top as f64 / total.max(1) as f64)
}

struct Page {
    name: &'static str,
    cfg: ReportConfig,
    /// Strings the DOM must hold after the scripts ran.
    expect: Vec<&'static str>,
}

fn pages() -> Vec<Page> {
    vec![
        Page {
            name: "stat",
            cfg: stat_cfg(),
            expect: vec![
                "data-node=\"backend_bound_cpu\"",
                "<span class=\"value\">65.9%</span>",
                "data-node=\"retiring_microcode\"",
                "<span class=\"value\">6.1%</span>",
                "[50.0% counted]",
            ],
        },
        Page {
            name: "intervals",
            cfg: intervals_cfg(),
            expect: vec![
                "Level 1 over time",
                "backend_bound: its children over time",
                "<td class=\"num\">37.0%</td><td class=\"num\">28.0%</td><td class=\"num\">46.0%</td>",
                "backend_bound_memory",
            ],
        },
        Page {
            name: "diff",
            cfg: diff_cfg(),
            expect: vec![
                "data-node=\"backend_bound_memory\"",
                "-30.0 pts (-71.4%)",
                "p = 0.009 *",
            ],
        },
        Page {
            name: "locate",
            cfg: locate_cfg(),
            expect: vec![
                "<iframe class=\"flame\"",
                "data-function=\"chase\"",
                "91.5%",
            ],
        },
        Page {
            name: "regions",
            cfg: regions_cfg(),
            expect: vec![
                "<tr data-region=\"solve &gt; inner\">",
                "<th class=\"num\">backend_bound</th>",
                "<g class=\"span\">",
                "thread 4102",
            ],
        },
    ]
}

#[test]
fn pages_load_without_console_messages_and_render_in_chromium() {
    let Some(bin) = chromium() else {
        println!(
            "skipped: no Chromium at {} (Debian package `chromium`; scripts/test.sh installs it when run as root)",
            CHROMIUM.join(" or ")
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let update = std::env::var_os("UPDATE_SCREENSHOTS").is_some();
    for p in pages() {
        let html = dir.path().join(format!("{}.html", p.name));
        std::fs::write(&html, page(&p.cfg)).unwrap();
        let url = format!("file://{}", html.display());
        let profile = dir.path().join(format!("profile-{}", p.name));

        let (dom, stderr) = run_chromium(&bin, &profile, &["--dump-dom"], &url);
        let console = console_lines(&stderr);
        assert!(
            console.is_empty(),
            "{}: console messages:\n{}",
            p.name,
            console.join("\n")
        );
        assert!(
            dom.contains("<section id=\"s1\""),
            "{}: no section in the DOM",
            p.name
        );
        for e in &p.expect {
            assert!(dom.contains(e), "{}: {e:?} not in the DOM", p.name);
        }

        let png_path = dir.path().join(format!("{}.png", p.name));
        let shot = format!("--screenshot={}", png_path.display());
        let (_, stderr) = run_chromium(&bin, &profile, &[&shot, "--window-size=1200,1500"], &url);
        let console = console_lines(&stderr);
        assert!(console.is_empty(), "{}: {}", p.name, console.join("\n"));
        let (n, top) = colours(&png_path);
        println!(
            "{}: screenshot with {n} distinct colours, the commonest covers {:.0}%",
            p.name,
            top * 100.0
        );
        assert!(n >= 16, "{}: screenshot looks blank ({n} colours)", p.name);
        assert!(
            top < 0.97,
            "{}: screenshot is {:.1}% one colour",
            p.name,
            top * 100.0
        );
        if update {
            let to = root()
                .join("docs/screenshots")
                .join(format!("report-{}.png", p.name));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&png_path, &to).unwrap();
        }
    }
}

/// The timeline's hover read-out: a copy of the intervals page with a test script appended
/// that moves the mouse over the first timeline, a quarter of the way across, and writes what
/// the read-out then shows into the DOM.
#[test]
fn hovering_over_the_timeline_shows_that_intervals_values() {
    let Some(bin) = chromium() else {
        println!("skipped: no Chromium at {}", CHROMIUM.join(" or "));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let probe = r#"<script>
window.addEventListener("load", function () {
  var tl = document.querySelector(".timeline");
  var svg = tl.querySelector("svg");
  var r = svg.getBoundingClientRect();
  svg.dispatchEvent(new MouseEvent("mousemove", {
    clientX: r.left + r.width * 0.25, clientY: r.top + r.height / 2, bubbles: true }));
  var tip = tl.querySelector(".tip");
  var out = document.createElement("pre");
  out.id = "hover-check";
  out.textContent = (tip.hidden ? "hidden" : "shown") + "\n" + tip.textContent;
  document.body.appendChild(out);
});
</script>
</body>"#;
    let page = page(&intervals_cfg()).replace("</body>", probe);
    let html = dir.path().join("hover.html");
    std::fs::write(&html, page).unwrap();
    let url = format!("file://{}", html.display());
    let (dom, stderr) = run_chromium(&bin, &dir.path().join("profile"), &["--dump-dom"], &url);
    let console = console_lines(&stderr);
    assert!(console.is_empty(), "{}", console.join("\n"));
    let key = "<pre id=\"hover-check\">";
    let i = dom.find(key).expect("the probe ran") + key.len();
    let shown = &dom[i..i + dom[i..].find("</pre>").unwrap()];
    println!("hover read-out:\n{shown}");
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "shown", "{shown}");
    // A quarter of the way across the 6 s run is in the memory-bound phase (the first 3 s):
    // retiring is 28.0% and bad speculation 4.0% in every interval there.
    assert!(
        lines[1].contains(" s .. ") && lines[1].ends_with(" s"),
        "{shown}"
    );
    let start: f64 = lines[1].split(' ').next().unwrap().parse().unwrap();
    assert!((0.5..2.5).contains(&start), "{shown}");
    assert!(lines.contains(&"retiring: 28.0%"), "{shown}");
    assert!(lines.contains(&"bad_speculation: 4.0%"), "{shown}");
    assert!(
        lines.iter().any(|l| l.starts_with("backend_bound: 6")),
        "{shown}"
    );
}
