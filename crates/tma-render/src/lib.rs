//! Rendering helpers shared by every `tma` command.
//!
//! Domain crates own their result types; this crate only knows how to put rows, JSON
//! documents and files on the page. It never touches the kernel and never exits.
//! * [`files`]: output paths written through what the user named ([`write_output`],
//!   [`OutputFile`]: a file is replaced atomically, a device or FIFO written directly, `-` is
//!   standard output) and checked before a run; input paths where `-` is standard input.
//! * [`JsonEnvelope`]: every `--json` document carries `schema` (`tma.<kind>`) and
//!   `schema_version`, so consumers can detect format changes.
//! * [`table`]: the one table style used by terminal output.
//! * [`mod@recognize`]: what an input holds (perf.data, a document by its schema, text).
//! * [`wrap`], [`shell_quote`], [`shell_quote_os`], [`shell_words`]: word wrapping and shell quoting ([`text`]).

pub mod files;
pub mod recognize;
pub mod schema;
pub mod text;

pub use files::{check_outputs, write_output, OutputFile};
pub use recognize::{recognize, Recognized};
pub use text::{shell_quote, shell_quote_os, shell_words, wrap};

use std::io::{self, Write};

use serde::Serialize;

/// Errors from writing output.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot write output file {path}: {source}")]
    Output { path: String, source: io::Error },
    #[error("cannot write output file {path}: {problem}")]
    OutputPath { path: String, problem: String },
    #[error("cannot write output file {path}: {source}; what was measured is kept in {kept}")]
    Rescued {
        path: String,
        source: io::Error,
        kept: String,
    },
    #[error("{0}")]
    Usage(String),
    #[error("cannot serialize {what} to JSON: {source}")]
    Json {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A versioned JSON document: `{"schema": "tma.stat", "schema_version": 1, ...payload}`.
#[derive(Debug, Serialize)]
pub struct JsonEnvelope<'a, T: Serialize> {
    pub schema: &'a str,
    pub schema_version: u32,
    #[serde(flatten)]
    pub payload: &'a T,
}

/// Write `payload` as pretty JSON wrapped in a [`JsonEnvelope`], followed by a newline.
pub fn write_json<T: Serialize>(
    w: &mut dyn Write,
    schema: &str,
    schema_version: u32,
    payload: &T,
) -> Result<(), OutputError> {
    let env = JsonEnvelope {
        schema,
        schema_version,
        payload,
    };
    serde_json::to_writer_pretty(&mut *w, &env).map_err(|source| {
        // A write failure (e.g. a closed pipe) stays an I/O error, so callers can tell it
        // from a value that cannot be serialized.
        if source.is_io() {
            OutputError::Io(source.into())
        } else {
            OutputError::Json {
                what: "report",
                source,
            }
        }
    })?;
    writeln!(w)?;
    Ok(())
}

/// A versioned JSON document whose last field is an array written one element at a time, so
/// a document of a million intervals never exists in memory. The bytes are exactly those
/// [`write_json`] writes for the same document (pretty, two-space indent, final newline).
///
/// `begin` writes the envelope and the `head` fields, then opens `array_field`; `item`
/// appends one element; `end` closes the array and the document.
#[derive(Debug)]
pub struct JsonStream {
    count: usize,
    /// One element, written with one call.
    out: Vec<u8>,
}

impl JsonStream {
    /// Write the envelope, `head`'s fields (a struct that serializes to an object) and the
    /// opening of `array_field`.
    pub fn begin<T: Serialize>(
        w: &mut dyn Write,
        schema: &str,
        schema_version: u32,
        head: &T,
        array_field: &str,
    ) -> Result<JsonStream, OutputError> {
        let mut buf = Vec::new();
        write_json(&mut buf, schema, schema_version, head)?;
        // `{\n  ...last field\n}\n`: drop the closing brace, continue the object.
        while buf.last().is_some_and(|b| b.is_ascii_whitespace()) {
            buf.pop();
        }
        buf.pop();
        while buf.last().is_some_and(|b| b.is_ascii_whitespace()) {
            buf.pop();
        }
        let key = serde_json::to_string(array_field).map_err(|source| OutputError::Json {
            what: "field name",
            source,
        })?;
        let sep = if buf.last() == Some(&b'{') { "" } else { "," };
        write!(buf, "{sep}\n  {key}: [")?;
        w.write_all(&buf)?;
        buf.clear();
        Ok(JsonStream { count: 0, out: buf })
    }

    /// Append one element to the array.
    pub fn item<T: Serialize>(&mut self, w: &mut dyn Write, item: &T) -> Result<(), OutputError> {
        self.out.clear();
        self.out.extend_from_slice(if self.count == 0 {
            b"\n    "
        } else {
            b",\n    "
        });
        // The element sits two levels deep (document, array): it is laid out as
        // `write_json` lays it out there, without a second pass to indent it.
        let mut ser = serde_json::Serializer::with_formatter(&mut self.out, Nested::at(2));
        item.serialize(&mut ser)
            .map_err(|source| OutputError::Json {
                what: "report",
                source,
            })?;
        w.write_all(&self.out)?;
        self.count += 1;
        Ok(())
    }

    /// Close the array and the document.
    pub fn end(self, w: &mut dyn Write) -> Result<(), OutputError> {
        if self.count == 0 {
            w.write_all(b"]\n}\n")?;
        } else {
            w.write_all(b"\n  ]\n}\n")?;
        }
        Ok(())
    }
}

/// serde_json's pretty layout (two spaces a level, `": "` after keys) starting at a given
/// depth, for elements of a document written piece by piece.
struct Nested {
    depth: usize,
    has_value: bool,
}

impl Nested {
    fn at(depth: usize) -> Self {
        Nested {
            depth,
            has_value: false,
        }
    }

    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            self.indent(w)?;
        }
        w.write_all(bracket)
    }

    fn item<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(w)
    }

    fn indent<W: ?Sized + Write>(&self, w: &mut W) -> io::Result<()> {
        for _ in 0..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }
}

impl serde_json::ser::Formatter for Nested {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// A table in the house style: no outer borders, header underlined, columns padded.
pub fn table(header: &[&str]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
        .set_header(
            header
                .iter()
                .map(comfy_table::Cell::new)
                .collect::<Vec<_>>(),
        );
    t
}

/// Right-align the given columns of a table (numbers).
pub fn align_right(t: &mut comfy_table::Table, columns: &[usize]) {
    for &c in columns {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
}

impl OutputError {
    /// The underlying I/O error, if this is one (used to treat a closed pipe as success).
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            OutputError::Output { source, .. } | OutputError::Io(source) => Some(source),
            OutputError::Json { .. }
            | OutputError::OutputPath { .. }
            | OutputError::Rescued { .. }
            | OutputError::Usage(_) => None,
        }
    }
}

/// Quote a CSV field when needed (RFC 4180).
pub fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
        std::borrow::Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// Write one CSV record.
pub fn csv_row<S: AsRef<str>>(w: &mut dyn Write, fields: &[S]) -> io::Result<()> {
    let mut first = true;
    for f in fields {
        if !first {
            w.write_all(b",")?;
        }
        first = false;
        w.write_all(csv_field(f.as_ref()).as_bytes())?;
    }
    w.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_stream_writes_what_write_json_writes() {
        #[derive(Serialize)]
        struct Head<'a> {
            name: &'a str,
            list: Vec<u32>,
        }
        #[derive(Serialize)]
        struct Item {
            a: u32,
            b: Vec<&'static str>,
            c: Option<f64>,
            d: std::collections::BTreeMap<&'static str, Vec<Vec<u32>>>,
        }
        #[derive(Serialize)]
        struct Whole<'a> {
            #[serde(flatten)]
            head: Head<'a>,
            items: Vec<Item>,
        }
        for n in [0usize, 1, 3] {
            let items = || {
                (0..n as u32).map(|i| Item {
                    a: i,
                    b: if i == 1 { vec![] } else { vec!["x\ny", "z"] },
                    c: (i > 0).then_some(0.5),
                    d: if i == 1 {
                        Default::default()
                    } else {
                        [("k", vec![vec![], vec![i, 2]]), ("l", vec![])].into()
                    },
                })
            };
            let mut want = Vec::new();
            let whole = Whole {
                head: Head {
                    name: "t",
                    list: vec![1, 2],
                },
                items: items().collect(),
            };
            write_json(&mut want, "tma.test", 1, &whole).unwrap();
            let mut got = Vec::new();
            let head = Head {
                name: "t",
                list: vec![1, 2],
            };
            let mut s = JsonStream::begin(&mut got, "tma.test", 1, &head, "items").unwrap();
            for it in items() {
                s.item(&mut got, &it).unwrap();
            }
            s.end(&mut got).unwrap();
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }

    #[test]
    fn json_envelope_is_flat() {
        #[derive(Serialize)]
        struct P {
            x: u32,
        }
        let mut v = Vec::new();
        write_json(&mut v, "tma.test", 3, &P { x: 7 }).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(j["schema"], "tma.test");
        assert_eq!(j["schema_version"], 3);
        assert_eq!(j["x"], 7);
    }

    #[test]
    fn json_write_failure_is_an_io_error() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = write_json(&mut Closed, "tma.test", 1, &[1, 2, 3]).unwrap_err();
        assert_eq!(
            e.io_error().map(|e| e.kind()),
            Some(io::ErrorKind::BrokenPipe)
        );
    }

    #[test]
    fn csv_quoting() {
        let mut v = Vec::new();
        csv_row(&mut v, &["a", "b,c", "d\"e"]).unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), "a,\"b,c\",\"d\"\"e\"\n");
    }
}
