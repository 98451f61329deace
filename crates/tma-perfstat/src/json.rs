//! `perf stat -j` rows: one JSON object per line with `counter-value` (a string: a number,
//! `<not counted>` or `<not supported>`), `unit`, `event`, `event-runtime`, `pcnt-running`,
//! optional `interval`, `cpu`, `thread`, aggregation keys and metric fields.

use serde_json::{Map, Value};

use super::{human, ImportError, Metric, Parsed, Row, RowValue};

/// Parse one non-blank, non-comment line: a count, or a metric-only object of `perf stat
/// -M`.
pub(super) fn parse_line(t: &str, lineno: usize) -> Result<Option<Parsed>, ImportError> {
    let obj: Map<String, Value> = match serde_json::from_str::<Value>(t) {
        Ok(Value::Object(o)) => o,
        Ok(_) => {
            return Err(ImportError::BadJson {
                line: lineno,
                why: "not a JSON object".into(),
            })
        }
        Err(e) => {
            let why = if e.is_eof() {
                "the line ends early: truncated".to_string()
            } else {
                e.to_string()
            };
            return Err(ImportError::BadJson { line: lineno, why });
        }
    };
    if let Some(schema) = obj.get("schema").and_then(Value::as_str) {
        // One of tma's own documents written on one line.
        return Err(if schema == "tma.snapshot" {
            ImportError::Snapshot {
                why: "snapshots are replayed by `tma stat --import`, not read as perf stat output"
                    .into(),
            }
        } else {
            ImportError::NotARecording {
                schema: schema.to_string(),
            }
        });
    }
    parse_object(&obj, lineno)
}

/// `metric-value` (a number, or a string of one) and `metric-unit` (`%  tma_retiring`).
fn metric(obj: &Map<String, Value>, line: usize) -> Option<Metric> {
    let text = match obj.get("metric-value")? {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let value = text.parse::<f64>().ok().filter(|v| v.is_finite())?;
    let (unit, name) =
        human::split_metric_text(obj.get("metric-unit").and_then(Value::as_str).unwrap_or(""));
    Some(Metric {
        value,
        unit: unit.to_string(),
        name: name.to_string(),
        decimals: human::decimals_of(&text),
        line,
        share: None,
    })
}

fn parse_object(obj: &Map<String, Value>, line: usize) -> Result<Option<Parsed>, ImportError> {
    let event = match obj.get("event") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        None if !obj.contains_key("counter-value") => {
            // Metric-only object (`perf stat -M`): the metric belongs to the count above.
            if obj.contains_key("metric-value") || obj.contains_key("metric-unit") {
                return Ok(metric(obj, line).map(Parsed::Metric));
            }
            return Err(ImportError::JsonField {
                line,
                field: "event",
            });
        }
        _ => {
            return Err(ImportError::JsonField {
                line,
                field: "event",
            })
        }
    };
    for (key, flag) in [
        ("core", "--per-core"),
        ("socket", "--per-socket"),
        ("die", "--per-die"),
        ("node", "--per-node"),
        ("cache", "--per-cache"),
        ("cluster", "--per-cluster"),
    ] {
        if let Some(v) = obj.get(key) {
            return Err(ImportError::UnsupportedAggregation {
                line,
                column: format!(
                    "{key}: {}",
                    v.as_str().map_or(v.to_string(), str::to_string)
                ),
                flag,
            });
        }
    }
    let value = match obj.get("counter-value") {
        Some(Value::String(s)) => match s.trim() {
            "<not counted>" => RowValue::NotCounted,
            "<not supported>" => RowValue::NotSupported,
            v => match v.parse::<f64>() {
                Ok(x) if x.is_finite() => RowValue::Count(x),
                _ if v.contains(',') => {
                    return Err(ImportError::ThousandsSeparator {
                        line,
                        value: v.to_string(),
                    })
                }
                _ => {
                    return Err(ImportError::BadNumber {
                        line,
                        field: "counter-value",
                        value: v.to_string(),
                    })
                }
            },
        },
        Some(Value::Number(n)) => RowValue::Count(n.as_f64().ok_or(ImportError::JsonField {
            line,
            field: "counter-value",
        })?),
        _ => {
            return Err(ImportError::JsonField {
                line,
                field: "counter-value",
            })
        }
    };
    let num = |key: &'static str| -> Result<Option<f64>, ImportError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(Value::String(s)) => {
                s.trim()
                    .parse::<f64>()
                    .map(Some)
                    .map_err(|_| ImportError::BadNumber {
                        line,
                        field: key,
                        value: s.clone(),
                    })
            }
            Some(_) => Err(ImportError::JsonField { line, field: key }),
        }
    };
    let timestamp = num("interval")?;
    let running_ns = num("event-runtime")?;
    let running_pct = num("pcnt-running")?;
    if let Some(p) = running_pct {
        if !(0.0..=100.0001).contains(&p) {
            return Err(ImportError::BadNumber {
                line,
                field: "pcnt-running",
                value: p.to_string(),
            });
        }
    }
    let cpu = match obj.get("cpu") {
        None => None,
        Some(v) => {
            let s = v.as_str().map_or(v.to_string(), str::to_string);
            Some(
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| ImportError::BadNumber {
                        line,
                        field: "cpu",
                        value: s.clone(),
                    })?,
            )
        }
    };
    let tid = match obj.get("thread") {
        None => None,
        Some(v) => {
            let s = v.as_str().map_or(v.to_string(), str::to_string);
            Some(
                s.rsplit_once('-')
                    .and_then(|(_, t)| t.parse::<u32>().ok())
                    .ok_or(ImportError::BadNumber {
                        line,
                        field: "thread",
                        value: s.clone(),
                    })?,
            )
        }
    };
    let unit = obj
        .get("unit")
        .and_then(|u| u.as_str())
        .unwrap_or("")
        .to_string();
    let cgroup = match obj.get("cgroup") {
        None => None,
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(ImportError::JsonField {
                line,
                field: "cgroup",
            })
        }
    };
    Ok(Some(Parsed::Row(Row {
        line,
        timestamp,
        summary: false,
        cpu,
        tid,
        cgroup,
        event,
        value,
        unit,
        running_ns: running_ns.map(|v| v.max(0.0) as u64),
        running_pct,
        metric: metric(obj, line),
    })))
}
