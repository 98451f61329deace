//! The pass/fail table as text ([`render`]).

use std::io;

use super::{Verdict, VerifyReport, VerifyRow};

/// The pass/fail table.
pub fn render(w: &mut dyn io::Write, r: &VerifyReport) -> io::Result<()> {
    writeln!(
        w,
        "tma doctor --verify ({}; {})",
        r.source,
        if r.hardware {
            "hardware and software counting"
        } else {
            "software counting only"
        }
    )?;
    writeln!(w)?;
    let mut t = tma_render::table(&["Check", "Result", "Expected", "Measured"]);
    for row in &r.rows {
        t.add_row(vec![
            row.id.clone(),
            row.verdict.label().to_string(),
            row.expected.clone(),
            row.measured.clone(),
        ]);
    }
    writeln!(w, "{t}")?;
    let bad: Vec<&VerifyRow> = r
        .rows
        .iter()
        .filter(|x| x.verdict != Verdict::Pass && !x.reason.is_empty())
        .collect();
    if !bad.is_empty() {
        writeln!(w)?;
        for x in bad {
            writeln!(w, "{} {}: {}", x.verdict.label(), x.id, x.reason)?;
        }
    }
    for n in &r.notes {
        writeln!(w)?;
        for (i, line) in tma_render::wrap(n, "", 94).iter().enumerate() {
            writeln!(w, "{}{line}", if i == 0 { "note: " } else { "      " })?;
        }
    }
    let (p, f, s) = r
        .rows
        .iter()
        .fold((0, 0, 0), |(p, f, s), x| match x.verdict {
            Verdict::Pass => (p + 1, f, s),
            Verdict::Fail => (p, f + 1, s),
            Verdict::Skip => (p, f, s + 1),
        });
    writeln!(w)?;
    writeln!(w, "{p} passed, {f} failed, {s} skipped")?;
    Ok(())
}
