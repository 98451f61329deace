//! `--fail-if EXPR`: a CI gate on one delta. Grammar (spaces allowed between the parts):
//!
//! ```text
//! gate   = target op number ["%"]
//! target = name {"." name}        a node path (`Backend_Bound.Memory_Bound`, any suffix of
//!                                 the path from level 1) or a metric name (`IPC`)
//! op     = ">" | ">=" | "<" | "<="
//! number = ["+" | "-"] digits ["." digits]
//! ```
//!
//! Without `%` the number is an absolute change in the node's unit (points of % for tree
//! nodes); with `%` it is a change relative to the before value.

use serde::{Deserialize, Serialize};

use crate::{DiffError, Row};

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Cmp {
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
}

impl Cmp {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
        }
    }
    fn symbol(self) -> &'static str {
        match self {
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
        }
    }
}

/// One parsed `--fail-if` expression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    /// The expression as given.
    pub expr: String,
    /// The node path or metric name, split at dots.
    pub target: Vec<String>,
    /// Where the target starts in `expr` (from 1), for errors about it.
    #[serde(skip)]
    pub target_position: usize,
    pub cmp: Cmp,
    pub threshold: f64,
    /// `%`: the change relative to the before value, in percent.
    pub relative: bool,
}

/// What a gate found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    #[serde(default)]
    pub expr: String,
    #[serde(default)]
    pub tripped: bool,
    /// The change compared: points/units, or percent with `%`.
    #[serde(default)]
    pub change: f64,
    /// One line: what changed and by how much.
    #[serde(default)]
    pub reason: String,
}

fn err(expr: &str, position: usize, message: impl Into<String>) -> DiffError {
    DiffError::Gate {
        expr: expr.to_string(),
        position,
        message: message.into(),
    }
}

/// Parse one expression; errors name the position (from 1) of the first bad character.
pub fn parse(expr: &str) -> Result<Gate, DiffError> {
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    skip_ws(&mut i);
    let start = i;
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
    while i < chars.len() && is_name(chars[i]) {
        i += 1;
    }
    if i == start {
        return Err(err(
            expr,
            i + 1,
            "expected a node path or metric name (e.g. Backend_Bound.Memory_Bound or IPC)",
        ));
    }
    let name: String = chars[start..i].iter().collect();
    let mut target = Vec::new();
    let mut seg_start = start;
    for seg in name.split('.') {
        if seg.is_empty() {
            return Err(err(expr, seg_start + 1, "empty name between dots"));
        }
        target.push(seg.to_string());
        seg_start += seg.chars().count() + 1;
    }
    skip_ws(&mut i);
    let cmp = match (chars.get(i), chars.get(i + 1)) {
        (Some('>'), Some('=')) => Cmp::Ge,
        (Some('<'), Some('=')) => Cmp::Le,
        (Some('>'), _) => Cmp::Gt,
        (Some('<'), _) => Cmp::Lt,
        _ => return Err(err(expr, i + 1, "expected a comparison: >, >=, < or <=")),
    };
    i += cmp.symbol().len();
    skip_ws(&mut i);
    let num_start = i;
    if matches!(chars.get(i), Some('+' | '-')) {
        i += 1;
    }
    let digits_start = i;
    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
        i += 1;
    }
    let number: String = chars[num_start..i].iter().collect();
    if i == digits_start {
        return Err(err(
            expr,
            i + 1,
            "expected a number, optionally signed (+5, -10)",
        ));
    }
    let threshold: f64 = number.parse().map_err(|_| {
        err(
            expr,
            digits_start + 1,
            format!("{number:?} is not a number"),
        )
    })?;
    let relative = chars.get(i) == Some(&'%');
    if relative {
        i += 1;
    }
    skip_ws(&mut i);
    if i < chars.len() {
        return Err(err(
            expr,
            i + 1,
            format!(
                "unexpected {:?} after the number (only an optional % may follow)",
                chars[i]
            ),
        ));
    }
    Ok(Gate {
        expr: expr.to_string(),
        target,
        target_position: start + 1,
        cmp,
        threshold,
        relative,
    })
}

/// The row a gate names: a metric by name, or the node whose path from level 1 ends with
/// the gate's segments (names compared without regard to case).
fn find<'a>(gate: &Gate, nodes: &'a [Row], metrics: &'a [Row]) -> Option<&'a Row> {
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if gate.target.len() == 1 {
        if let Some(m) = metrics.iter().find(|m| eq(&m.name, &gate.target[0])) {
            return Some(m);
        }
    }
    nodes.iter().find(|n| {
        let mut path = vec![n.name.as_str()];
        let mut cur = n.parent.as_deref();
        while let Some(p) = cur {
            path.push(p);
            cur = nodes
                .iter()
                .find(|x| x.name == p)
                .and_then(|x| x.parent.as_deref());
        }
        path.len() >= gate.target.len()
            && gate.target.iter().rev().zip(&path).all(|(g, p)| eq(g, p))
    })
}

/// Evaluate a gate against the compared rows. A target that names nothing, or has no value
/// on one side, is an error: a CI gate must not pass by not looking.
pub fn check(gate: &Gate, nodes: &[Row], metrics: &[Row]) -> Result<GateResult, DiffError> {
    let row = find(gate, nodes, metrics).ok_or_else(|| {
        err(
            &gate.expr,
            gate.target_position,
            format!(
                "no node or metric {:?} in both runs (node paths go from level 1 down, \
                 separated by dots; metrics need -m)",
                gate.target.join(".")
            ),
        )
    })?;
    let (Some(b), Some(a), Some(delta)) = (row.before, row.after, row.delta) else {
        return Err(err(
            &gate.expr,
            gate.target_position,
            format!("{} has no value in {}", row.name, row.missing_side()),
        ));
    };
    let change = if gate.relative {
        match row.relative {
            Some(r) => r * 100.0,
            None => {
                return Err(err(
                    &gate.expr,
                    gate.target_position,
                    format!(
                        "{} is 0 before: a relative change is undefined; drop the %",
                        row.name
                    ),
                ))
            }
        }
    } else {
        delta
    };
    let tripped = gate.cmp.holds(change, gate.threshold);
    let unit = if gate.relative {
        "%"
    } else if row.percent() {
        " points"
    } else {
        ""
    };
    let reason = format!(
        "{}: {} {} {} ({} -> {}, change {:+.2}{unit}; limit {} {:+}{unit})",
        gate.expr,
        row.name,
        if delta >= 0.0 { "rose" } else { "fell" },
        if tripped {
            "past the limit"
        } else {
            "within the limit"
        },
        row.format_value(b.mean),
        row.format_value(a.mean),
        change,
        gate.cmp.symbol(),
        gate.threshold,
    );
    Ok(GateResult {
        expr: gate.expr.clone(),
        tripped,
        change,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_signs_and_percent() {
        let g = parse("Backend_Bound.Memory_Bound > +5").unwrap();
        assert_eq!(g.target, ["Backend_Bound", "Memory_Bound"]);
        assert_eq!((g.cmp, g.threshold, g.relative), (Cmp::Gt, 5.0, false));
        let g = parse("  IPC<=-10.5% ").unwrap();
        assert_eq!(g.target, ["IPC"]);
        assert_eq!((g.cmp, g.threshold, g.relative), (Cmp::Le, -10.5, true));
    }

    fn position(expr: &str) -> usize {
        match parse(expr).unwrap_err() {
            DiffError::Gate { position, .. } => position,
            e => panic!("{e}"),
        }
    }

    #[test]
    fn errors_name_the_position() {
        assert_eq!(position("> 5"), 1);
        assert_eq!(position("IPC = 5"), 5);
        assert_eq!(position("IPC > x"), 7);
        assert_eq!(position("IPC > 5 points"), 9);
        assert_eq!(position("A..B > 5"), 3);
        assert_eq!(position("IPC > 1.2.3"), 7);
    }
}
