//! End-to-end tests of `tma locate --tree`: group sampling of a workload of known
//! per-function behaviour (tests/fixtures/profile-tree/workload.c: one function touches new
//! pages, one only computes, and the program measures both itself), a `perf record
//! -e '{cpu-clock,page-faults}:Su'` file read back against `perf report --group`, and the
//! pprof sample types read back through `go tool pprof`.
//!
//! Without a PMU (this project's test machines) the group is the software one; the tree
//! itself is proved on replayed hardware sample streams in `tma_profile::tree`'s unit tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tma_testkit::{can_sample, fixture, stderr, stdout, Tma};

const TMA: Tma = Tma::new(env!("CARGO_BIN_EXE_tma"));

fn run(args: &[&str]) -> Output {
    TMA.bare().args(args).output().expect("run tma")
}

/// profile-tree/workload.c built with the system C compiler, or skip.
fn build_workload(dir: &Path) -> Option<PathBuf> {
    tma_testkit::build_c(&fixture("profile-tree/workload.c"), dir, "-O2")
}

/// The workload's own measurement: name -> (minor faults, thread CPU ns).
fn workload_report(path: &Path) -> BTreeMap<String, (f64, f64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                (f[1].parse().unwrap(), f[2].parse().unwrap()),
            )
        })
        .collect()
}

/// CSV rows of `tma locate --tree --csv`: function -> column -> value.
fn csv_rows(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), header.len(), "{l}");
            let row: BTreeMap<String, String> = header
                .iter()
                .zip(&f)
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect();
            (f[0].to_string(), row)
        })
        .collect()
}

fn count(row: &BTreeMap<String, String>, col: &str) -> u64 {
    row[col].parse().unwrap()
}

/// Live, software group: per function, page faults land in the function that touches pages
/// (and the munmap it calls), none in the one that computes; task-clock shares match the
/// CPU time the workload measured in each.
#[test]
fn software_group_per_function_matches_what_the_workload_did() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_workload(dir.path()) else {
        return;
    };
    let report = dir.path().join("did.txt");
    let out = dir.path().join("tree.json");
    let o = run(&[
        "locate",
        "--tree",
        "--json",
        "-o",
        out.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "60",
        "2048",
        "3000000",
        report.to_str().unwrap(),
    ]);
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["schema"], "tma.locate.tree");
    if doc["layout"]["kind"] != "software" {
        eprintln!(
            "skipped: this machine has a PMU; the software-group check is for machines without one"
        );
        return;
    }
    assert_eq!(doc["level"], 0);
    assert_eq!(
        doc["events"],
        serde_json::json!(["cpu-clock", "page-faults", "context-switches", "task-clock"])
    );
    let notes = doc["notes"].to_string();
    assert!(notes.contains("a TMA tree needs one"), "{notes}");
    let did = workload_report(&report);
    let funcs = doc["functions"].as_array().unwrap();
    let get = |name: &str, ev: &str| -> f64 {
        funcs
            .iter()
            .filter(|f| f["function"].as_str().unwrap().contains(name))
            .flat_map(|f| f["counts"].as_array().unwrap().iter())
            .filter(|c| c["event"] == ev)
            .map(|c| c["count"].as_f64().unwrap())
            .sum()
    };
    // Page faults: the workload took rounds x pages in touch_pages, none in compute.
    let (touch_faults, touch_ns) = did["touch_pages"];
    let (compute_faults, compute_ns) = did["compute"];
    assert_eq!(compute_faults, 0.0);
    let tma_touch = get("touch_pages", "page-faults") + get("munmap", "page-faults");
    let tma_compute = get("compute", "page-faults");
    assert!(
        tma_touch >= 0.95 * touch_faults && tma_touch <= 1.02 * touch_faults,
        "touch_pages: tma {tma_touch} faults, the workload {touch_faults}"
    );
    assert!(
        tma_compute <= 0.02 * touch_faults,
        "compute: tma {tma_compute} faults, the workload none"
    );
    // Task-clock: compute's share of the two functions' time, tma's and the workload's.
    let tma_c = get("compute", "task-clock");
    let tma_t =
        get("touch_pages", "task-clock") + get("munmap", "task-clock") + get("mmap", "task-clock");
    let tma_share = tma_c / (tma_c + tma_t);
    let did_share = compute_ns / (compute_ns + touch_ns);
    assert!(
        (tma_share - did_share).abs() < 0.07,
        "compute's share of task-clock: tma {tma_share:.3}, the workload {did_share:.3}"
    );
    // Mixed: every function reports its share, and the whole run's is below 20%.
    let all_mixed = doc["total"]["mixed_percent"].as_f64().unwrap();
    assert!(all_mixed < 20.0, "{all_mixed}");
}

/// A group recorded by perf: the per-function values tma charges equal the periods
/// `perf report --group` gives each symbol (same file, same rule: each sample gets the
/// increase since its thread's previous sample); the pprof sample types carry the same sums
/// through `go tool pprof`.
#[test]
fn perf_group_recording_matches_perf_report_and_go_pprof() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_workload(dir.path()) else {
        return;
    };
    let data = dir.path().join("g.perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-e", "{cpu-clock,page-faults}:Su", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&exe)
        .args(["20", "2048", "2000000"])
        .arg(dir.path().join("did.txt"))
        .output();
    match rec {
        Ok(o) if o.status.success() && data.exists() => {}
        Ok(o) => {
            eprintln!("skipped: perf record failed: {}", stderr(&o));
            return;
        }
        Err(e) => {
            eprintln!("skipped: perf is not installed ({e})");
            return;
        }
    }
    let rep = Command::new("perf")
        .args([
            "report",
            "--group",
            "--stdio",
            "--sort",
            "sym",
            "-F",
            "period,sym",
            "-i",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(rep.status.success(), "{}", stderr(&rep));
    let perf = perf_group_periods(&stdout(&rep));
    assert!(perf.contains_key("compute"), "{}", stdout(&rep));
    let pb = dir.path().join("t.pb.gz");
    let o = run(&[
        "locate",
        "--import",
        data.to_str().unwrap(),
        "--tree",
        "--csv",
        "--top",
        "1000",
        "--pprof",
        pb.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&stdout(&o));
    same_as_perf(&rows, &perf, &stdout(&o), Some(&["compute", "touch_pages"]));

    // pprof: samples first, then one type per value; cpu-clock by default.
    let p = tma_profile::pprof::decode(&std::fs::read(&pb).unwrap()).unwrap();
    let types: Vec<&str> = p
        .sample_type
        .iter()
        .map(|t| p.string_table[t.r#type as usize].as_str())
        .collect();
    assert_eq!(types, ["samples", "cpu-clock", "page-faults"]);
    assert_eq!(p.string_table[p.default_sample_type as usize], "cpu-clock");
    let go = Path::new("/usr/local/go/bin/go");
    let go = if go.exists() {
        go.to_path_buf()
    } else {
        PathBuf::from("go")
    };
    for (index, col) in [(1usize, "cpu-clock"), (2, "page-faults")] {
        let out = match Command::new(&go)
            .args(["tool", "pprof", "-raw", &format!("-sample_index={col}")])
            .arg(&pb)
            .output()
        {
            Ok(o) if o.status.success() => o,
            Ok(o) => panic!("go tool pprof failed: {}", stderr(&o)),
            Err(e) => {
                eprintln!("skipped: go is not installed ({e})");
                return;
            }
        };
        let known: Vec<String> = rows.keys().cloned().collect();
        let sums = raw_leaf_sums(&stdout(&out), index, &known);
        for (func, row) in &rows {
            if func == "(all)" {
                continue;
            }
            assert_eq!(
                sums.get(func).copied().unwrap_or(0),
                count(row, col),
                "{func} {col} through go tool pprof"
            );
        }
    }
}

/// `perf report --group --stdio --sort sym -F period,sym` rows of user symbols:
/// "   244508169       27046  [.] compute" -> compute: (244508169, 27046).
fn perf_group_periods(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut perf = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 4 && f[2] == "[.]" {
            if let (Ok(a), Ok(b)) = (f[0].parse(), f[1].parse()) {
                perf.insert(f[3].to_string(), (a, b));
            }
        }
    }
    perf
}

/// tma's per-function cpu-clock and page-faults equal perf's per-symbol periods (a symbol
/// perf names by another alias, `__tunable_get_val` for `__GI___tunable_get_val`, matches
/// by suffix), for the symbols `only` names (all when `None`: perf and tma may name a
/// libc or vDSO symbol by different aliases), and the totals over all symbols.
fn same_as_perf(
    rows: &BTreeMap<String, BTreeMap<String, String>>,
    perf: &BTreeMap<String, (u64, u64)>,
    shown: &str,
    only: Option<&[&str]>,
) {
    for (sym, (cpu, pf)) in perf {
        if only.is_some_and(|o| !o.contains(&sym.as_str())) {
            continue;
        }
        let row = rows
            .get(sym)
            .or_else(|| {
                rows.iter()
                    .find(|(name, _)| name.ends_with(sym.as_str()))
                    .map(|(_, r)| r)
            })
            .unwrap_or_else(|| panic!("tma has no row for {sym}: {shown}"));
        assert_eq!(count(row, "cpu-clock"), *cpu, "{sym} cpu-clock");
        assert_eq!(count(row, "page-faults"), *pf, "{sym} page-faults");
    }
    let tma_total: u64 = rows
        .iter()
        .filter(|(f, _)| f.as_str() != "(all)")
        .map(|(_, r)| count(r, "page-faults"))
        .sum();
    let perf_total: u64 = perf.values().map(|v| v.1).sum();
    assert_eq!(tma_total, perf_total, "page-faults over all functions");
    let tma_cpu: u64 = rows
        .iter()
        .filter(|(f, _)| f.as_str() != "(all)")
        .map(|(_, r)| count(r, "cpu-clock"))
        .sum();
    let perf_cpu: u64 = perf.values().map(|v| v.0).sum();
    assert_eq!(tma_cpu, perf_cpu, "cpu-clock over all functions");
}

/// The recorded fixture (perf 6.1, `{cpu-clock,page-faults}:Su`) against the `perf report
/// --group` output saved with it: no perf needed.
#[test]
fn recorded_group_fixture_matches_its_perf_report() {
    let f = fixture("profile-tree");
    let o = run(&[
        "locate",
        "--import",
        f.join("group.perf.data").to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
        "--tree",
        "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let perf =
        perf_group_periods(&std::fs::read_to_string(f.join("group.perf-report.txt")).unwrap());
    assert_eq!(perf.len(), 4);
    let rows = csv_rows(&stdout(&o));
    same_as_perf(&rows, &perf, &stdout(&o), None);
    // The bleed both tools show: with user-only samples, compute (which takes no fault)
    // is charged two thirds of the faults; tma marks such samples as mixed.
    assert_eq!(count(&rows["compute"], "page-faults"), 10941);
    assert!(count(&rows["touch_pages"], "mixed") > 0);
}

/// Per leaf function, the sum of value `index` of `go tool pprof -raw` output.
fn raw_leaf_sums(text: &str, index: usize, known: &[String]) -> BTreeMap<String, u64> {
    let mut samples: Vec<(u64, u64)> = Vec::new(); // (value, leaf location)
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    let mut section = "";
    for l in text.lines() {
        match l.trim_end() {
            "Samples:" | "Locations" | "Mappings" => {
                section = l.trim_end();
                continue;
            }
            _ => {}
        }
        match section {
            "Samples:" => {
                let Some((vals, locs)) = l.split_once(':') else {
                    continue;
                };
                let v: Vec<&str> = vals.split_whitespace().collect();
                let (Some(val), Some(leaf)) = (
                    v.get(index).and_then(|x| x.parse().ok()),
                    locs.split_whitespace().next().and_then(|x| x.parse().ok()),
                ) else {
                    continue;
                };
                samples.push((val, leaf));
            }
            "Locations" => {
                // "     3: 0x157b M=1 compute /path/workload.c:40:0 s=0": the function (which
                // may hold spaces, "[unknown] 0xaf1", and be followed by no file) starts
                // after "M=N", or after the address where the frame has no mapping (a
                // [vdso] frame: "10: 0xbe1 [unknown] 0xbe1 :0:0 s=0"); it is the longest of
                // the names tma gave that starts there.
                let f: Vec<&str> = l.split_whitespace().collect();
                if f.len() >= 3 && f[0].ends_with(':') && f[1].starts_with("0x") {
                    let after = if f[2].starts_with("M=") { f[2] } else { f[1] };
                    let rest = l
                        .split_once(f[0])
                        .and_then(|x| x.1.split_once(after))
                        .map_or("", |x| x.1)
                        .trim_start();
                    let name = known
                        .iter()
                        .filter(|k| rest == k.as_str() || rest.starts_with(&format!("{k} ")))
                        .max_by_key(|k| k.len());
                    if let (Ok(id), Some(name)) = (f[0].trim_end_matches(':').parse(), name) {
                        names.insert(id, name.clone());
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for (v, leaf) in samples {
        *out.entry(names.get(&leaf).cloned().unwrap_or_default())
            .or_default() += v;
    }
    out
}

#[test]
fn tree_refuses_what_does_not_go_with_it() {
    let o = run(&["locate", "--tree", "-e", "cycles", "--", "true"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--event"), "{}", stderr(&o));
    // A file without read groups.
    let f = fixture("locate").join("chase.perf.data");
    let o = run(&["locate", "--import", f.to_str().unwrap(), "--tree"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("the file's samples carry no read group"),
        "{}",
        stderr(&o)
    );
    let o = run(&["locate", "--csv", "--", "true"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--tree"), "{}", stderr(&o));
}

/// Live, software group: the two estimators of where the time goes, the group's task-clock
/// (first pass) next to a second pass's cpu-clock samples, both against what the workload
/// measured itself (its report is of the second run); `--no-direct` makes one pass.
#[test]
fn two_estimators_live_match_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_workload(dir.path()) else {
        return;
    };
    let report = dir.path().join("did.txt");
    let out = dir.path().join("tree.json");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["locate", "--tree", "--json", "-o", out.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(
            [
                "--",
                exe.to_str().unwrap(),
                "40",
                "2048",
                "3000000",
                report.to_str().unwrap(),
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        v
    };
    let a = args(&[]);
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("tma: second pass for the direct estimate: sampling cpu-clock"),
        "{}",
        stderr(&o)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    if doc["layout"]["kind"] != "software" {
        eprintln!(
            "skipped: this machine has a PMU; the software estimators are for machines without one"
        );
        return;
    }
    let e = &doc["estimators"];
    assert_eq!(e["group_basis"], "task-clock");
    assert_eq!(e["direct_event"], "cpu-clock");
    assert!(e["direct_samples"].as_u64().unwrap() > 100, "{e}");
    assert!(e["rule"]
        .as_str()
        .unwrap()
        .contains("more than 10 percentage points"));
    let rows = e["functions"].as_array().unwrap();
    let share = |name: &str, col: &str| -> f64 {
        rows.iter()
            .filter(|r| r["function"].as_str().unwrap() == name)
            .map(|r| r[col].as_f64().unwrap())
            .sum()
    };
    // Each row's flag follows the rule, and the verdict follows the flags.
    let mut any = false;
    for r in rows {
        let d =
            (r["group_percent"].as_f64().unwrap() - r["direct_percent"].as_f64().unwrap()).abs();
        assert_eq!(r["disagree"].as_bool().unwrap(), d > 10.0, "{r}");
        any |= d > 10.0;
    }
    assert_eq!(
        e["agree"].as_bool().unwrap(),
        !any && e["top_group"] == e["top_direct"],
        "{e}"
    );
    // compute's part of the two functions' time: by each estimator and by the workload.
    let did = workload_report(&report);
    let did_share = did["compute"].1 / (did["compute"].1 + did["touch_pages"].1);
    for col in ["group_percent", "direct_percent"] {
        let (c, t) = (share("compute", col), share("touch_pages", col));
        let s = c / (c + t);
        assert!(
            (s - did_share).abs() < 0.1,
            "compute's share by {col}: {s:.3}, the workload {did_share:.3}"
        );
    }
    // One pass.
    let a = args(&["--no-direct"]);
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("second pass"), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(doc.get("estimators").is_none());
}

/// The kernel caveats `tma doctor` checks are said as notes of the run: on a copy of
/// tests/fixtures/roots/skx-smt-5.15 without its PMU (a Skylake-SP guest with no vPMU on
/// Linux 5.15, SMT on), sample-read before 6.12 and SMT before Ice Lake; the CSV carries the
/// two estimators' columns.
#[test]
fn kernel_caveats_are_said_as_notes() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_workload(dir.path()) else {
        return;
    };
    let root = dir.path().join("root");
    copy_dir(&fixture("roots/skx-smt-5.15"), &root);
    std::fs::remove_dir_all(root.join("sys/bus")).unwrap();
    let csv = dir.path().join("tree.csv");
    let o = TMA
        .bare()
        .arg("--root")
        .arg(&root)
        .args(["locate", "--tree", "--csv", "-o"])
        .arg(&csv)
        .arg("--")
        .arg(&exe)
        .args(["4", "256", "300000"])
        .arg(dir.path().join("did.txt"))
        .output()
        .unwrap();
    if !can_sample(&o) {
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(
            "tma: note: Linux 5.15.0-91-generic is older than 6.12: group sampling of a \
             launched command follows only its first thread (tma doctor: sample_read)"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "tma: note: Skylake-SP (skx) with SMT on: per-thread level 1 is meaningless \
             (tma doctor: smt_level1)"
        ),
        "{err}"
    );
    assert!(
        !err.contains("nmi_watchdog"),
        "no PMU, no counter taken: {err}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with(",task-clock,group_share,direct_share,disagree"),
        "{text}"
    );
    let rows = csv_rows(&text);
    assert_eq!(rows["(all)"]["group_share"], "100.00");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// A recording with the direct samples beside the group (`perf record -e
/// '{task-clock,page-faults}:Su' -e cpu-clock:u`, tests/fixtures/profile-tree): the direct
/// shares are exactly `tma locate -e cpu-clock:u` on the same file, the group-read shares
/// exactly the tree's task-clock shares; user-only sampling makes them disagree (the
/// cpu-clock:u samples never see the kernel time of touch_pages' page faults, which the
/// task-clock reads charge to the next user sample). The CSV is a golden file.
#[test]
fn recorded_direct_samples_beside_the_group() {
    let f = fixture("profile-tree");
    let data = f.join("group-direct.perf.data");
    let base = [
        "locate",
        "--import",
        data.to_str().unwrap(),
        "--symdir",
        f.to_str().unwrap(),
    ];
    let with = |extra: &[&str]| -> Output {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(extra);
        run(&a)
    };
    let o = with(&["--tree", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = &doc["estimators"];
    assert_eq!(e["direct_event"], "cpu-clock:u");
    assert_eq!(e["group_basis"], "task-clock");
    assert_eq!(e["direct_source"], "the same file");
    assert_eq!(e["agree"], false);
    let o = with(&["-e", "cpu-clock:u", "--json", "--top", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let flat: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let flat_pct = |name: &str| -> f64 {
        flat["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["function"] == name)
            .map_or(0.0, |r| r["percent"].as_f64().unwrap())
    };
    for r in e["functions"].as_array().unwrap() {
        let name = r["function"].as_str().unwrap();
        let d = r["direct_percent"].as_f64().unwrap();
        assert!(
            (d - flat_pct(name)).abs() < 1e-9,
            "{name}: {d} != {}",
            flat_pct(name)
        );
        let tree_row = doc["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == name)
            .unwrap();
        let task = tree_row["counts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["event"] == "task-clock")
            .unwrap();
        let g = r["group_percent"].as_f64().unwrap();
        assert!(
            (g - task["percent"].as_f64().unwrap()).abs() < 1e-9,
            "{name}: {g}"
        );
    }
    let o = with(&["--tree", "--csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    tma_testkit::check_golden(f.join("group-direct.csv"), &stdout(&o));
    // One estimator only when asked.
    let o = with(&["--tree", "--json", "--no-direct"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc.get("estimators").is_none());
}
