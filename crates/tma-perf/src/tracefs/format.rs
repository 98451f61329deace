//! Parser for tracefs `events/<system>/<event>/format` files.
//!
//! The kernel describes each tracepoint's raw record layout in text: one `field:` line per
//! member with its C type, byte offset, size and signedness, then a `print fmt:` line. Field
//! sets change between kernels (for `kvm_exit`: `isa` since 2.6.38, `info1`/`info2`/`intr_info`/
//! `error_code` later, `requests` in 6.x), so decoders must look offsets up here instead of
//! assuming them.

/// What is wrong with a `format` file, or a field a decoder needs that it lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    #[error("format file is not UTF-8 text")]
    NotUtf8,
    #[error("line {line}: bad ID `{value}`")]
    BadId { line: usize, value: String },
    #[error("line {line}: {problem}: `{text}`")]
    BadField {
        line: usize,
        problem: FieldProblem,
        text: String,
    },
    #[error("no `name:` line")]
    NoName,
    #[error("{event}: no `ID:` line")]
    NoId { event: String },
    #[error("{event}: no `field:` lines")]
    NoFields { event: String },
    #[error("tracepoint {event} has no field `{field}` (fields: {})", fields.join(", "))]
    MissingField {
        event: String,
        field: String,
        /// The fields it has, in file order.
        fields: Vec<String>,
    },
}

/// What is wrong with one `field:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("bad offset")]
    BadOffset,
    #[error("bad size")]
    BadSize,
    #[error("no declaration")]
    NoDeclaration,
    #[error("no offset")]
    NoOffset,
    #[error("no size")]
    NoSize,
    #[error("declaration has no type")]
    NoType,
    #[error("declaration has no name")]
    NoName,
}

/// One field of a tracepoint record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Field {
    /// Field name (`exit_reason`, `common_pid`, `insn` for `__u8 insn[15]`).
    pub name: String,
    /// C type as written by the kernel, without the name (`unsigned int`, `__u8[15]`).
    pub c_type: String,
    /// Byte offset inside the raw record.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// Whether the kernel marks it signed.
    pub signed: bool,
}

/// A parsed `format` file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventFormat {
    /// Event name (`kvm_exit`).
    pub name: String,
    /// Tracepoint id (the `config` for `PERF_TYPE_TRACEPOINT`; differs per boot and kernel).
    pub id: u64,
    /// All fields, common ones included, in file order.
    pub fields: Vec<Field>,
    /// The `print fmt:` text.
    pub print_fmt: String,
}

impl EventFormat {
    /// Parse the text of a `format` file.
    pub fn parse(bytes: &[u8]) -> Result<EventFormat, FormatError> {
        let text = std::str::from_utf8(bytes).map_err(|_| FormatError::NotUtf8)?;
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        let mut print_fmt = String::new();
        for (lineno, line) in text.lines().enumerate() {
            let t = line.trim();
            if let Some(v) = t.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = t.strip_prefix("ID:") {
                id = Some(v.trim().parse::<u64>().map_err(|_| FormatError::BadId {
                    line: lineno + 1,
                    value: v.trim().to_string(),
                })?);
            } else if t.starts_with("field:") {
                fields.push(parse_field(t).map_err(|problem| FormatError::BadField {
                    line: lineno + 1,
                    problem,
                    text: t.to_string(),
                })?);
            } else if let Some(v) = t.strip_prefix("print fmt:") {
                print_fmt = v.trim().to_string();
            }
        }
        let name = name.ok_or(FormatError::NoName)?;
        let Some(id) = id else {
            return Err(FormatError::NoId { event: name });
        };
        if fields.is_empty() {
            return Err(FormatError::NoFields { event: name });
        }
        Ok(EventFormat {
            name,
            id,
            fields,
            print_fmt,
        })
    }

    /// The field called `name`, if this kernel has it.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field called `name`, or an error naming the event and the field.
    pub fn require(&self, name: &str) -> Result<&Field, FormatError> {
        self.field(name).ok_or_else(|| FormatError::MissingField {
            event: self.name.clone(),
            field: name.to_string(),
            fields: self.fields.iter().map(|f| f.name.clone()).collect(),
        })
    }
}

fn parse_field(line: &str) -> Result<Field, FieldProblem> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("field:") {
            decl = Some(v.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = Some(
                v.trim()
                    .parse::<usize>()
                    .map_err(|_| FieldProblem::BadOffset)?,
            );
        } else if let Some(v) = part.strip_prefix("size:") {
            size = Some(
                v.trim()
                    .parse::<usize>()
                    .map_err(|_| FieldProblem::BadSize)?,
            );
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl.ok_or(FieldProblem::NoDeclaration)?;
    let offset = offset.ok_or(FieldProblem::NoOffset)?;
    let size = size.ok_or(FieldProblem::NoSize)?;
    // `unsigned int exit_reason`, `__u8 insn[15]`, `__data_loc char[] name`.
    let (decl_noarr, arr) = match decl.find('[') {
        Some(i) => (&decl[..i], &decl[i..]),
        None => (decl, ""),
    };
    let decl_noarr = decl_noarr.trim_end();
    // The last space or `*` ends the type; it may be a multi-byte space (U+00A0, found by
    // fuzzing), so the name starts after the whole character.
    let (split, sep) = decl_noarr
        .char_indices()
        .rev()
        .find(|&(_, c)| c.is_whitespace() || c == '*')
        .ok_or(FieldProblem::NoType)?;
    let type_end = split + sep.len_utf8();
    let name = decl_noarr[type_end..].trim();
    if name.is_empty() {
        return Err(FieldProblem::NoName);
    }
    let c_type = format!("{}{}", decl_noarr[..type_end].trim(), arr);
    Ok(Field {
        name: name.to_string(),
        c_type,
        offset,
        size,
        signed,
    })
}

impl Field {
    /// Read this field from a raw record as an unsigned integer (little endian, sizes 1/2/4/8;
    /// signed fields are sign-extended to 64 bits). `None` if the record is too short or the
    /// size is not an integer size.
    pub fn read_u64(&self, raw: &[u8]) -> Option<u64> {
        let b = raw.get(self.offset..self.offset.checked_add(self.size)?)?;
        let v = match self.size {
            1 => {
                if self.signed {
                    b[0] as i8 as i64 as u64
                } else {
                    b[0] as u64
                }
            }
            2 => {
                let v = u16::from_le_bytes([b[0], b[1]]);
                if self.signed {
                    v as i16 as i64 as u64
                } else {
                    v as u64
                }
            }
            4 => {
                let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if self.signed {
                    v as i32 as i64 as u64
                } else {
                    v as u64
                }
            }
            8 => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            _ => return None,
        };
        Some(v)
    }

    /// The field's bytes inside `raw`.
    pub fn bytes<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        raw.get(self.offset..self.offset.checked_add(self.size)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_and_arrays() {
        let txt = b"name: x\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:__u8 insn[15];\toffset:21;\tsize:15;\tsigned:0;\n\tfield:const char * name;\toffset:40;\tsize:8;\tsigned:0;\n\nprint fmt: \"%d\", REC->x\n";
        let f = EventFormat::parse(txt).unwrap();
        assert_eq!(f.id, 7);
        assert_eq!(f.fields.len(), 4);
        let insn = f.field("insn").unwrap();
        assert_eq!(
            (insn.offset, insn.size, insn.c_type.as_str()),
            (21, 15, "__u8[15]")
        );
        assert_eq!(f.field("name").unwrap().c_type, "const char *");
        assert!(f.field("common_pid").unwrap().signed);
        assert_eq!(f.print_fmt, "\"%d\", REC->x");
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(EventFormat::parse(b"hello"), Err(FormatError::NoName));
        let e = EventFormat::parse(b"name: x\nID: zz\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: bad ID `zz`");
        let e = EventFormat::parse(b"name: x\nID: 1\n").unwrap_err();
        assert_eq!(e.to_string(), "x: no `field:` lines");
        let e =
            EventFormat::parse(b"name: x\nID: 1\nfield:int a;\toffset:q;\tsize:4;\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3: bad offset: `field:int a;\toffset:q;\tsize:4;`"
        );
        assert_eq!(EventFormat::parse(&[0xff, 0xfe]), Err(FormatError::NotUtf8));
        let f = EventFormat::parse(b"name: x\nID: 1\nfield:int a;\toffset:0;\tsize:4;\n").unwrap();
        assert_eq!(
            f.require("b").unwrap_err().to_string(),
            "tracepoint x has no field `b` (fields: a)"
        );
    }

    #[test]
    fn reads_sign_extended() {
        let f = Field {
            name: "e".into(),
            c_type: "int".into(),
            offset: 0,
            size: 4,
            signed: true,
        };
        assert_eq!(f.read_u64(&(-4i32).to_le_bytes()), Some((-4i64) as u64));
        assert_eq!(f.read_u64(&[1, 2]), None);
    }
}
