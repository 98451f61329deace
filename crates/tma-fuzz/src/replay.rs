//! Every target's seeds and saved crashes, replayed through the target under its bounds (the
//! short fuzz pass of scripts/test.sh: what afl would start from, and what it once found,
//! without an afl build). A panic fails the test naming the input; an allocation past the
//! bound aborts the test binary, naming the input on stderr; a run past the time limit fails.

use std::sync::Mutex;

use crate::{seeds, targets, Target};

/// One target at a time: the allocation counter is the process's, so two targets replayed
/// at once would be charged for each other's allocations.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn replay(target: Target) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut inputs: Vec<(String, Vec<u8>)> = seeds::gather(target.name)
        .into_iter()
        .map(|(name, bytes)| (format!("seed {name}"), bytes))
        .collect();
    for (f, bytes) in seeds::crashes(target.name) {
        inputs.push((format!("saved crash {}", f.display()), bytes));
    }
    assert!(!inputs.is_empty(), "{}: no seeds", target.name);
    (target.setup)();
    let mut slowest = (std::time::Duration::ZERO, String::new());
    for (label, data) in &inputs {
        crate::set_label(&format!("{} {label}", target.name));
        let bound = (target.bound)(data);
        let run =
            std::panic::catch_unwind(|| crate::run_bounded(target.name, bound, data, target.run));
        match run {
            Ok(Ok(took)) if took > slowest.0 => slowest = (took, label.clone()),
            Ok(Ok(_)) => {}
            Ok(Err(why)) => panic!("{why}: {label}"),
            Err(_) => panic!("{}: {label} panicked (see above)", target.name),
        }
    }
    crate::set_label("");
    println!(
        "{}: {} inputs replayed; the slowest {:?} ({})",
        target.name,
        inputs.len(),
        slowest.0,
        slowest.1
    );
}

#[test]
fn every_target_is_replayed() {
    let names: Vec<&str> = targets::ALL.iter().map(|t| t.name).collect();
    let mut dirs: Vec<String> = std::fs::read_dir(crate::repo_root().join("tests/fixtures/fuzz"))
        .expect("tests/fixtures/fuzz")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    for d in dirs {
        assert!(
            names.contains(&d.as_str()),
            "tests/fixtures/fuzz/{d} is no target's"
        );
    }
}

macro_rules! replay_tests {
    ($($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                replay(targets::$name::TARGET);
            }
        )*
    };
}

replay_tests!(
    perf_stat,
    perf_data,
    perf_data_z,
    docs,
    http,
    tracefs,
    proc,
    sysfs,
    pprof,
    expr,
    evaluate
);
