//! What an input holds, told by its content: a perf.data file (magic `PERFILE2`), one of
//! tma's JSON documents (by its `schema` and `schema_version`), or text (perf stat output,
//! a perf stat JSON stream, anything else). Every reader of inputs asks here.
//!
//! Only as much is read as the answer needs: the magic, or the top-level keys of a document
//! up to its `schema` and `schema_version` (the envelope writes them first); other values
//! are skipped unread.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

/// What an input's bytes hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recognized {
    /// A perf.data file.
    PerfData,
    /// A JSON object with a string `schema` key: one of tma's documents.
    Document {
        schema: String,
        /// `schema_version`, 0 when it has none.
        version: u32,
    },
    /// Anything else.
    Text,
}

impl Recognized {
    /// The schema name of a document.
    pub fn schema(&self) -> Option<&str> {
        match self {
            Recognized::Document { schema, .. } => Some(schema),
            _ => None,
        }
    }

    /// The `schema_version` of a document.
    pub fn version(&self) -> Option<u32> {
        match self {
            Recognized::Document { version, .. } => Some(*version),
            _ => None,
        }
    }
}

/// What `bytes` hold.
pub fn recognize(bytes: &[u8]) -> Recognized {
    if bytes.starts_with(b"PERFILE2") {
        return Recognized::PerfData;
    }
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Recognized::Text;
    }
    let mut head = Head::default();
    // Stopping at the envelope leaves the object open, which serde_json reports: the keys
    // read so far are what counts.
    let _ = serde_json::Deserializer::from_slice(bytes).deserialize_map(HeadVisitor(&mut head));
    match head.schema {
        Some(schema) => Recognized::Document {
            schema: crate::schema::canonical(&schema).to_string(),
            version: head.version.unwrap_or(0),
        },
        None => Recognized::Text,
    }
}

#[derive(Default)]
struct Head {
    schema: Option<String>,
    version: Option<u32>,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Key {
    Schema,
    SchemaVersion,
    #[serde(other)]
    Other,
}

struct HeadVisitor<'h>(&'h mut Head);

impl<'de> Visitor<'de> for HeadVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Schema => self.0.schema = map.next_value::<Option<String>>()?,
                Key::SchemaVersion => self.0.version = map.next_value::<Option<u32>>()?,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.0.schema.is_some() && self.0.version.is_some() {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(schema: &str, version: u32) -> Recognized {
        Recognized::Document {
            schema: schema.into(),
            version,
        }
    }

    #[test]
    fn perf_data_documents_and_text() {
        assert_eq!(recognize(b"PERFILE2\0\0"), Recognized::PerfData);
        assert_eq!(
            recognize(br#"{"schema": "tma.locate", "schema_version": 1}"#),
            doc("tma.locate", 1)
        );
        assert_eq!(
            recognize(b"\n  {\n  \"schema\": \"tma.stat\",\n  \"schema_version\": 2,\n"),
            doc("tma.stat", 2),
            "the rest is not read"
        );
        assert_eq!(
            recognize(br#"{"x": {"schema": "no"}, "schema": "tma.bench"}"#),
            doc("tma.bench", 0)
        );
        assert_eq!(recognize(b"# started on\n1,,cycles\n"), Recognized::Text);
        assert_eq!(
            recognize(b"{\"interval\" : 1.0, \"counts\" : \"5\"}\n{\"interval\" : 2.0}\n"),
            Recognized::Text
        );
        assert_eq!(
            recognize(br#"{"schema": "tma.stat_software", "schema_version": 1}"#),
            doc("tma.stat.software", 1),
            "an old name is reported by its new one"
        );
        assert_eq!(recognize(br#"{"schema": 3}"#), Recognized::Text);
        assert_eq!(recognize(b""), Recognized::Text);
        assert_eq!(recognize(b"[1]"), Recognized::Text);
    }
}
