//! The exposition: metric families as plain data, and their two text formats, Prometheus
//! text 0.0.4 and OpenMetrics 1.0.0 (chosen by the scraper's `Accept` header).
//!
//! Families are named by their OpenMetrics base name (`tma_event` for the counter whose
//! samples are `tma_event_total`, `tma_build` for the info series `tma_build_info`); the
//! 0.0.4 writer uses the sample names throughout.

use std::fmt::Write as _;

/// The content type of Prometheus text 0.0.4.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of OpenMetrics 1.0.0 text.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Samples are `<base>_total`.
    Counter,
    /// Samples are `<base>_info`, value 1 (a gauge in 0.0.4).
    Info,
}

/// One sample: label pairs and a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
    /// When the value was counted (the end of its interval), milliseconds since the Unix
    /// epoch; `None`: the scrape's own time. The fleet counters carry it so that the series
    /// of every host describe the same counted moment, not the moment of the scrape.
    pub timestamp_ms: Option<i64>,
}

/// One metric family.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The OpenMetrics base name (no `_total` / `_info` suffix).
    pub base: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    pub fn new(base: &'static str, kind: Kind, help: &'static str) -> Family {
        Family {
            base,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    /// Add a sample.
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        self.samples.push(Sample {
            labels,
            value,
            timestamp_ms: None,
        });
    }

    /// Add a sample counted at `timestamp_ms` (see [`Sample::timestamp_ms`]).
    pub fn push_at(&mut self, labels: Vec<(&'static str, String)>, value: f64, timestamp_ms: i64) {
        self.samples.push(Sample {
            labels,
            value,
            timestamp_ms: Some(timestamp_ms),
        });
    }

    /// The number of samples (series) of the family.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// No sample.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The name of each sample: `base`, `base_total` or `base_info`.
    pub fn sample_name(&self) -> String {
        match self.kind {
            Kind::Gauge => self.base.to_string(),
            Kind::Counter => format!("{}_total", self.base),
            Kind::Info => format!("{}_info", self.base),
        }
    }
}

/// Which text format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text 0.0.4.
    Text,
    OpenMetrics,
}

impl Format {
    /// The format a scraper asks for with its `Accept` header: OpenMetrics when it lists
    /// `application/openmetrics-text` (with a q-value above 0), else text 0.0.4.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        for item in accept.split(',') {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            if !media.eq_ignore_ascii_case("application/openmetrics-text") {
                continue;
            }
            let q = parts
                .filter_map(|p| p.strip_prefix("q="))
                .filter_map(|q| q.parse::<f64>().ok())
                .next()
                .unwrap_or(1.0);
            if q > 0.0 {
                return Format::OpenMetrics;
            }
        }
        Format::Text
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => TEXT_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// A label value with `\`, `"` and newlines escaped (the same in both formats).
fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// HELP text escaping: `\` and newlines (0.0.4); OpenMetrics also escapes `"`.
fn escape_help(v: &str, om: bool, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if om => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// A sample value as both formats spell it.
fn write_value(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v == v.trunc() && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Append `families` in `format` to `out`. Families without samples are left out (a
/// family with a TYPE line but no sample confuses nobody, but says nothing either). The
/// OpenMetrics `# EOF` is not written: see [`finish`].
pub fn write(families: &[Family], format: Format, out: &mut String) {
    let om = format == Format::OpenMetrics;
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        let sample = f.sample_name();
        let (name, kind) = match (format, f.kind) {
            (Format::Text, Kind::Gauge | Kind::Info) => (sample.as_str(), "gauge"),
            (Format::Text, Kind::Counter) => (sample.as_str(), "counter"),
            (Format::OpenMetrics, Kind::Gauge) => (f.base, "gauge"),
            (Format::OpenMetrics, Kind::Counter) => (f.base, "counter"),
            (Format::OpenMetrics, Kind::Info) => (f.base, "info"),
        };
        let _ = writeln!(out, "# TYPE {name} {kind}");
        out.push_str("# HELP ");
        out.push_str(name);
        out.push(' ');
        escape_help(f.help, om, out);
        out.push('\n');
        for s in &f.samples {
            out.push_str(&sample);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push_str("=\"");
                    escape_label(v, out);
                    out.push('"');
                }
                out.push('}');
            }
            out.push(' ');
            write_value(s.value, out);
            if let Some(ms) = s.timestamp_ms {
                // 0.0.4: integer milliseconds; OpenMetrics: seconds.
                if om {
                    let _ = write!(out, " {}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
                } else {
                    let _ = write!(out, " {ms}");
                }
            }
            out.push('\n');
        }
    }
}

/// End an exposition: OpenMetrics requires `# EOF`.
pub fn finish(format: Format, out: &mut String) {
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let mut g = Family::new("tma_node_ratio", Kind::Gauge, "Share of \"slots\"\\x.");
        g.push(
            vec![
                ("node", "Backend_Bound.Memory_Bound".into()),
                ("level", "2".into()),
            ],
            0.25,
        );
        let mut c = Family::new("tma_event", Kind::Counter, "Events.");
        c.push(vec![("event", "a\"b\\c\nd".into())], 1234.0);
        c.push_at(vec![("event", "t".into())], 5.0, 1_700_000_000_123);
        let mut i = Family::new("tma_build", Kind::Info, "Build.");
        i.push(vec![("version", "0.1.0".into())], 1.0);
        let empty = Family::new("tma_metric", Kind::Gauge, "Unused.");
        vec![g, c, i, empty]
    }

    #[test]
    fn text_0_0_4() {
        let mut s = String::new();
        write(&families(), Format::Text, &mut s);
        finish(Format::Text, &mut s);
        assert_eq!(
            s,
            "# TYPE tma_node_ratio gauge\n\
             # HELP tma_node_ratio Share of \"slots\"\\\\x.\n\
             tma_node_ratio{node=\"Backend_Bound.Memory_Bound\",level=\"2\"} 0.25\n\
             # TYPE tma_event_total counter\n\
             # HELP tma_event_total Events.\n\
             tma_event_total{event=\"a\\\"b\\\\c\\nd\"} 1234\n\
             tma_event_total{event=\"t\"} 5 1700000000123\n\
             # TYPE tma_build_info gauge\n\
             # HELP tma_build_info Build.\n\
             tma_build_info{version=\"0.1.0\"} 1\n"
        );
    }

    #[test]
    fn openmetrics() {
        let mut s = String::new();
        write(&families(), Format::OpenMetrics, &mut s);
        finish(Format::OpenMetrics, &mut s);
        assert_eq!(
            s,
            "# TYPE tma_node_ratio gauge\n\
             # HELP tma_node_ratio Share of \\\"slots\\\"\\\\x.\n\
             tma_node_ratio{node=\"Backend_Bound.Memory_Bound\",level=\"2\"} 0.25\n\
             # TYPE tma_event counter\n\
             # HELP tma_event Events.\n\
             tma_event_total{event=\"a\\\"b\\\\c\\nd\"} 1234\n\
             tma_event_total{event=\"t\"} 5 1700000000.123\n\
             # TYPE tma_build info\n\
             # HELP tma_build Build.\n\
             tma_build_info{version=\"0.1.0\"} 1\n\
             # EOF\n"
        );
    }

    #[test]
    fn values() {
        let v = |x: f64| {
            let mut s = String::new();
            write_value(x, &mut s);
            s
        };
        assert_eq!(v(0.0), "0");
        assert_eq!(v(1e20), "100000000000000000000");
        assert_eq!(v(0.125), "0.125");
        assert_eq!(v(f64::NAN), "NaN");
        assert_eq!(v(f64::INFINITY), "+Inf");
        assert_eq!(v(-3.0), "-3");
    }

    #[test]
    fn negotiation() {
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
        // What Prometheus 2.x sends.
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                    version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; q=0")),
            Format::Text
        );
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4")),
            Format::Text
        );
    }
}
