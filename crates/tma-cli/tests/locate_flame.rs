//! The TMA flame graph and the differential flame graph in a real browser: headless
//! Chromium (Debian package `chromium`) loads each SVG; the test checks that no console
//! message is logged, that the DOM after inferno's script ran holds the frames with the
//! colours of their dominant level-1 node (or of their change), and that a screenshot is not
//! blank. The TMA flame graph is made from a replayed Zen 4 sample stream (one function
//! backend bound, one frontend bound: a PMU is not needed), and one from `tma locate --tree
//! --flame` of a live run.
//!
//! Without Chromium the test skips with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tma_metrics::Constants;
use tma_profile::tree::{self, ReplaySample, TreeLayout};
use tma_testkit::{fixture, stderr, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));
const CHROMIUM: &[&str] = &["/usr/bin/chromium", "/usr/bin/chromium-browser"];

fn chromium() -> Option<PathBuf> {
    CHROMIUM.iter().map(PathBuf::from).find(|p| p.exists())
}

/// Run headless Chromium on `url`; its stdout and stderr. Killed (by its id) after 90 s.
fn run_chromium(bin: &Path, profile: &Path, args: &[&str], url: &str) -> (String, String) {
    let child = Command::new(bin)
        .args([
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
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start chromium");
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(90)) {
        Ok(r) => r.expect("chromium output"),
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("chromium did not finish within 90 s on {url}");
        }
    };
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Distinct colours of a PNG and the share of the commonest.
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
    let top = counts.values().copied().max().unwrap_or(0);
    (
        counts.len(),
        top as f64 / (bytes.len() / step).max(1) as f64,
    )
}

/// A replayed Zen 4 stream: 0x1000 backend bound (65% of its slots), 0x2000 frontend bound
/// (50%); `scale` multiplies 0x1000's values (for a second, different profile).
fn zen4_profile(scale: u64) -> tma_profile::hotspots::Profile {
    const CYC: &str = "ls_not_halted_cyc";
    const FE: &str = "de_no_dispatch_per_slot.no_ops_from_frontend";
    const RET: &str = "ex_ret_ops";
    const DISP: &str = "de_src_op_disp.all";
    const BE: &str = "de_no_dispatch_per_slot.backend_stalls";
    let zen4 = tma_catalog::by_name("zen4").unwrap();
    let layout = TreeLayout::hardware(zen4, 1, false, false).unwrap();
    let a: Vec<(&str, u64)> = [
        (CYC, 1000),
        (FE, 600),
        (DISP, 1500),
        (RET, 1200),
        (BE, 3900),
    ]
    .iter()
    .map(|&(n, v)| (n, v * scale))
    .collect();
    let b = [
        (CYC, 2000),
        (FE, 6000),
        (DISP, 3000),
        (RET, 2400),
        (BE, 3000),
    ];
    let mut samples = Vec::new();
    for _ in 0..scale {
        samples.push(ReplaySample {
            tid: 1,
            ip: 0x1000,
            group_id: 100,
            values: &a,
        });
    }
    samples.push(ReplaySample {
        tid: 2,
        ip: 0x2000,
        group_id: 200,
        values: &b,
    });
    // Repeated reads of the same cumulative values charge nothing after the first.
    tree::replay(&layout, &samples).0
}

struct Svg {
    name: &'static str,
    text: String,
    /// Strings the DOM must hold after inferno's script ran.
    expect: Vec<String>,
}

/// The SVG fill of the colour the library gives a frame with this dominant node.
fn fill(d: &tma_profile::tree::Dominant) -> String {
    let c = tma_report::flame::dominant_colour(d);
    format!("fill=\"rgb({},{},{})\"", c.r, c.g, c.b)
}

fn svgs(dir: &Path) -> Vec<Svg> {
    let zen4 = tma_catalog::by_name("zen4").unwrap();
    let p = zen4_profile(1);
    let dom = tree::dominant_nodes(&p, zen4, &Constants::default()).unwrap();
    let mut out = vec![Svg {
        name: "tma-flame",
        text: tma_report::flame::tma_svg(&p, Some(&dom)).unwrap(),
        expect: vec![
            "[unknown] 0x1000".into(),
            fill(&dom["[unknown] 0x1000"]),
            fill(&dom["[unknown] 0x2000"]),
            "TMA flame graph: width cycles".into(),
        ],
    }];
    let mut after = zen4_profile(3);
    after.frames[after.stacks[1].frames[0]].function = "[unknown] 0x3000".into();
    out.push(Svg {
        name: "differential",
        text: tma_report::flame::differential_svg(&p, &after).unwrap(),
        expect: vec![
            "[unknown] 0x2000 [only before]".into(),
            "[unknown] 0x3000 [only after]".into(),
            "differential flame graph".into(),
        ],
    });
    // A live run through the command line (software group: widths cpu-clock).
    let exe = dir.join("workload");
    let built = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(fixture("profile-tree").join("workload.c"))
        .status()
        .is_ok_and(|s| s.success());
    if built {
        let svg = dir.join("live.svg");
        let o = TMA
            .bare()
            .args(["locate", "--tree", "--flame"])
            .arg(&svg)
            .arg("-o")
            .arg(dir.join("live.txt"))
            .arg("--")
            .arg(&exe)
            .args(["10", "1024", "2000000"])
            .arg(dir.join("did.txt"))
            .output()
            .unwrap();
        if o.status.success() {
            out.push(Svg {
                name: "live",
                text: std::fs::read_to_string(&svg).unwrap(),
                expect: vec!["compute".into(), "touch_pages".into()],
            });
        } else {
            println!("skipped the live flame graph: {}", stderr(&o));
        }
    } else {
        println!("skipped the live flame graph: no working C compiler (cc)");
    }
    out
}

#[test]
fn flame_graphs_render_in_chromium() {
    let Some(bin) = chromium() else {
        println!(
            "skipped: no Chromium at {} (Debian package `chromium`)",
            CHROMIUM.join(" or ")
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for s in svgs(dir.path()) {
        let path = dir.path().join(format!("{}.svg", s.name));
        std::fs::write(&path, &s.text).unwrap();
        let url = format!("file://{}", path.display());
        let profile = dir.path().join(format!("profile-{}", s.name));
        let (dom, err) = run_chromium(&bin, &profile, &["--dump-dom"], &url);
        let console: Vec<&str> = err.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(
            console.is_empty(),
            "{}: console:\n{}",
            s.name,
            console.join("\n")
        );
        assert!(dom.contains("<svg"), "{}: no SVG in the DOM", s.name);
        for e in &s.expect {
            assert!(dom.contains(e.as_str()), "{}: {e:?} not in the DOM", s.name);
        }
        let png_path = dir.path().join(format!("{}.png", s.name));
        let shot = format!("--screenshot={}", png_path.display());
        let (_, err) = run_chromium(&bin, &profile, &[&shot, "--window-size=1100,700"], &url);
        let console: Vec<&str> = err.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "{}: {}", s.name, console.join("\n"));
        let (n, top) = colours(&png_path);
        println!(
            "{}: screenshot with {n} distinct colours, the commonest covers {:.0}%",
            s.name,
            top * 100.0
        );
        assert!(n >= 8, "{}: screenshot looks blank ({n} colours)", s.name);
        assert!(top < 0.97, "{}: {:.1}% one colour", s.name, top * 100.0);
    }
}
