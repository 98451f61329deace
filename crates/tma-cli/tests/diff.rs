//! `tma diff` exit codes: 0 (no gate tripped), 1 (a gate tripped, one line on stderr), 2
//! (a bad expression with its position; CPU models that differ).

use std::process::Command;

fn tma(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tma"))
        .current_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/diff"
        ))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const B: &str = "zen4-before-synthetic.json";
const A: &str = "zen4-after-synthetic.json";

#[test]
fn gate_that_holds_not_exits_0() {
    let (code, out, err) = tma(&["diff", B, A, "--fail-if", "IPC < -10%"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Bottleneck: backend_bound > backend_bound_memory 42.0% → 12.0% (fixed)"));
    assert!(err.is_empty(), "{err}");
}

#[test]
fn tripped_gate_exits_1_with_one_line() {
    let (code, _, err) = tma(&[
        "diff",
        B,
        A,
        "--fail-if",
        "backend_bound.backend_bound_cpu > +5",
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("tma: gate tripped: backend_bound.backend_bound_cpu > +5"));
}

#[test]
fn bad_expression_exits_2_with_the_position() {
    let (code, out, err) = tma(&["diff", B, A, "--fail-if", "IPC > 5 points"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("at position 9"), "{err}");
}

#[test]
fn cpu_mismatch_exits_2() {
    let (code, _, err) = tma(&["diff", B, "icx-synthetic.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("different CPU models"), "{err}");
}

#[test]
fn json_and_csv() {
    let (code, out, _) = tma(&["diff", B, A, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "tma.diff");
    assert!(v["nodes"][0]["welch"]["p"].is_number());
    let (code, out, _) = tma(&["diff", B, A, "--csv"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("kind,name,"));
}
