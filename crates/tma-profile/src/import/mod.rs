//! `perf.data` files (made by `perf record`, or by `tma locate --record`) through the same
//! [`Aggregator`] as live samples.
//!
//! Records reach the aggregator in time order, as live records do ([`crate::order`]):
//! `linux-perf-data`'s record iterator sorts by timestamp itself, flushing at perf's
//! FINISHED_ROUND records (what `perf report` relies on too) and sorting the whole file at
//! the end when it has none. No second sort is done here (`imports_are_time_ordered_too`
//! in `live.rs` checks an out-of-order file).
//!
//! The header is checked here before linux-perf-data sees the file: that crate allocates the
//! sizes the header claims, so a truncated or corrupt file must be rejected first, with a
//! message that says what is wrong.

use std::io::{Cursor, Read};

use linux_perf_data::{PerfFileReader, PerfFileRecord};

use crate::aggregate::Aggregator;

pub mod compressed;
mod error;

pub use error::ImportError;

/// Facts from the file header.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ImportInfo {
    /// Event names as perf stored them (`cpu-clock:u`).
    pub events: Vec<String>,
    pub perf_version: Option<String>,
    pub hostname: Option<String>,
    pub cmdline: Option<String>,
    /// Index into `events` of the event whose samples were kept.
    pub chosen: usize,
    /// The kernel ids of each event's copies (per CPU or thread), as the file lists them:
    /// what a sample's read group names its values by.
    pub event_ids: Vec<Vec<u64>>,
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off.checked_add(8)?)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
}

/// Check the file header against the file length (little-endian files, perf's normal case).
pub fn check_header(bytes: &[u8]) -> Result<(), ImportError> {
    let len = bytes.len() as u64;
    let magic = bytes.get(..8).unwrap_or(bytes);
    match magic {
        b"PERFILE2" => {}
        b"PERFFILE" => return Err(ImportError::Version1),
        b"2ELIFREP" => return Ok(()), // big-endian: left to the parser's own checks
        _ => {
            return Err(ImportError::BadMagic {
                magic: String::from_utf8_lossy(magic).escape_debug().to_string(),
            })
        }
    }
    let header_size = u64_at(bytes, 8).ok_or(ImportError::Truncated {
        what: "the file header".into(),
        end: 16,
        len,
    })?;
    if header_size == 16 {
        return Ok(()); // pipe mode: records follow directly
    }
    if header_size < 104 {
        return Err(ImportError::BadHeader(format!(
            "header size {header_size} is smaller than the 104 bytes of perf's header"
        )));
    }
    if header_size > len {
        return Err(ImportError::Truncated {
            what: "the file header".into(),
            end: header_size,
            len,
        });
    }
    let section = |off: usize, what: &str| -> Result<(u64, u64), ImportError> {
        let o = u64_at(bytes, off).unwrap_or(0);
        let s = u64_at(bytes, off + 8).unwrap_or(0);
        let end = o.checked_add(s).ok_or_else(|| {
            ImportError::BadHeader(format!("{what} offset {o} + size {s} overflows"))
        })?;
        if end > len {
            return Err(ImportError::Truncated {
                what: what.to_string(),
                end,
                len,
            });
        }
        Ok((o, s))
    };
    section(24, "the attribute section")?;
    let (doff, dsize) = section(40, "the data section")?;
    section(56, "the event types section")?;
    // Feature bitmap: 256 bits at 72; one 16-byte section descriptor per set bit, right
    // after the data section.
    let mut nfeat = 0u64;
    for i in 0..4 {
        nfeat += u64::from(u64_at(bytes, 72 + 8 * i).unwrap_or(0).count_ones());
    }
    let table = doff + dsize;
    let table_end = table + 16 * nfeat;
    if table_end > len {
        return Err(ImportError::Truncated {
            what: "the feature section table".into(),
            end: table_end,
            len,
        });
    }
    for k in 0..nfeat {
        section((table + 16 * k) as usize, "a feature section")?;
    }
    Ok(())
}

/// Read a whole perf.data image into `agg`: all non-sample records, and the samples of the
/// first event (see [`import_bytes_event`] to pick another).
pub fn import_bytes(bytes: &[u8], agg: &mut Aggregator) -> Result<ImportInfo, ImportError> {
    import_bytes_event(bytes, agg, None)
}

/// Like [`import_bytes`], keeping the samples of the event named `event` (as perf stored it,
/// with or without its `:u`/`:ppp` suffix).
pub fn import_bytes_event(
    bytes: &[u8],
    agg: &mut Aggregator,
    event: Option<&str>,
) -> Result<ImportInfo, ImportError> {
    check_header(bytes)?;
    let is_pipe = u64_at(bytes, 8) == Some(16);
    check_lengths(bytes, is_pipe)?;
    // linux-perf-data asserts on some malformed inputs; keep a panic there from taking the
    // whole program down and report it as a parse error.
    // The default hook would print the panic message of a caught parser panic; silence it
    // for the duration of the import (the failure is reported as an error instead).
    let prev_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if is_pipe {
            run(
                PerfFileReader::parse_pipe(Cursor::new(bytes)),
                agg,
                event,
                &[],
            )
        } else {
            let formats = read_formats(bytes);
            run(
                PerfFileReader::parse_file(Cursor::new(bytes)),
                agg,
                event,
                &formats,
            )
        }
    }));
    std::panic::set_hook(prev_hook);
    match result {
        Ok(r) => r,
        Err(_) => Err(ImportError::Parse(
            "the record parser rejected malformed data".into(),
        )),
    }
}

/// The counts and lengths that linux-perf-data allocates by before it reads what they count
/// (found by fuzzing): each must fit in the bytes that hold it, or a few bytes of
/// input ask for gigabytes. The `EVENT_DESC` and `CMDLINE` features (file sections or, in pipe
/// mode, `HEADER_FEATURE` records), the event types' id sections, and the data that follows
/// an `AUXTRACE` record.
fn check_lengths(bytes: &[u8], is_pipe: bool) -> Result<(), ImportError> {
    let be = bytes.starts_with(b"2ELIFREP");
    let rd = |off: u64, n: usize| -> Option<u64> {
        let o = usize::try_from(off).ok()?;
        let b = bytes.get(o..o.checked_add(n)?)?;
        let mut v = [0u8; 8];
        if be {
            v[8 - n..].copy_from_slice(b);
            Some(u64::from_be_bytes(v))
        } else {
            v[..n].copy_from_slice(b);
            Some(u64::from_le_bytes(v))
        }
    };
    let bad =
        |what: &str| ImportError::BadHeader(format!("{what} runs past the bytes that hold it"));
    // Where linux-perf-event-reader leaves off after a perf_event_attr at `at` in a slot of
    // `attr_size` bytes: it reads the fields of the largest attr version not above the attr's
    // own `size` (all of it past version 7, 128 bytes), then skips to the slot's end; `None`
    // where it refuses the attr.
    let attr_end = |at: u64, attr_size: u64| -> Option<u64> {
        let size = rd(at.checked_add(4)?, 4)?;
        if !(64..=attr_size).contains(&size) {
            return None;
        }
        let read = if size > 128 {
            size
        } else {
            [128, 120, 112, 104, 96, 80, 72, 64]
                .into_iter()
                .find(|&v| v <= size)?
        };
        at.checked_add(read)?.checked_add(attr_size - size)
    };
    // A feature's data in [start, end): 11 is CMDLINE (a u32 count of strings, each a u32
    // length and bytes), 12 is EVENT_DESC (u32 nr, u32 attr_size, then per event the attr,
    // a u32 id count, a string and the ids).
    let feature = |id: u32, start: u64, end: u64| -> Result<(), ImportError> {
        let string_list = |mut at: u64, count: u64| -> Option<u64> {
            for _ in 0..count {
                at = at.checked_add(4 + rd(at, 4)?)?;
                if at > end {
                    return None;
                }
            }
            Some(at)
        };
        let ok = match id {
            11 => rd(start, 4)
                .and_then(|n| string_list(start + 4, n))
                .is_some(),
            12 => (|| {
                let (nr, attr_size) = (rd(start, 4)?, rd(start + 4, 4)?);
                let mut at = start + 8;
                for _ in 0..nr {
                    at = attr_end(at, attr_size)?;
                    let ids = rd(at, 4)?;
                    at = string_list(at + 4, 1)?.checked_add(ids.checked_mul(8)?)?;
                    if at > end {
                        return None;
                    }
                }
                Some(())
            })()
            .is_some(),
            _ => true,
        };
        if ok {
            Ok(())
        } else {
            Err(bad(if id == 11 {
                "the cmdline feature"
            } else {
                "the event_desc feature"
            }))
        }
    };
    let len = bytes.len() as u64;
    let (mut at, end) = if is_pipe {
        (16, len)
    } else {
        let (doff, dsize) = (rd(40, 8).unwrap_or(0), rd(48, 8).unwrap_or(0));
        // Feature sections: one (offset, size) per set bit of the bitmap, after the data.
        let mut k = 0;
        for bit in 0..256u32 {
            if rd(72 + 8 * u64::from(bit / 64), 8).unwrap_or(0) & (1 << (bit % 64)) == 0 {
                continue;
            }
            let desc = doff.saturating_add(dsize).saturating_add(16 * k);
            k += 1;
            let (o, sz) = (
                rd(desc, 8).unwrap_or(0),
                rd(desc.saturating_add(8), 8).unwrap_or(0),
            );
            feature(bit, o, o.saturating_add(sz).min(len))?;
        }
        // Event types: entries of attr_size bytes and an (offset, size) of their ids.
        let attr_size = rd(16, 8).unwrap_or(0);
        let (toff, tsize) = (rd(56, 8).unwrap_or(0), rd(64, 8).unwrap_or(0));
        if let Some(step) = attr_size.checked_add(16) {
            let mut pos = toff;
            for _ in 0..tsize / step {
                let Some(e) = attr_end(pos, attr_size) else {
                    break; // the parser's own error
                };
                let (o, sz) = (
                    rd(e, 8).unwrap_or(0),
                    rd(e.saturating_add(8), 8).unwrap_or(0),
                );
                if o.checked_add(sz).is_none_or(|x| x > len) {
                    return Err(bad("an event type's id section"));
                }
                pos = e.saturating_add(16);
            }
        }
        (doff, doff.saturating_add(dsize).min(len))
    };
    // Records: u32 type, u16 misc, u16 size. AUXTRACE (71) data follows its record (size at
    // byte 8); HEADER_FEATURE (80) holds a u64 feature id and the feature's data; the
    // compressed records (81, 83) are inflated by `compressed::check`, within its bound.
    let mut compressed = Vec::new();
    while at + 8 <= end {
        let (ty, size) = (rd(at, 4).unwrap_or(0), rd(at + 6, 2).unwrap_or(0));
        if size < 8 {
            break; // the parser's own error
        }
        let next = at + size;
        match ty {
            71 => {
                let aux = rd(at + 8, 8).unwrap_or(0);
                if next.checked_add(aux).is_none_or(|x| x > end) {
                    return Err(bad("an AUXTRACE record's data"));
                }
                at = next + aux;
                continue;
            }
            80 => feature(rd(at + 8, 8).unwrap_or(0) as u32, at + 16, next.min(end))?,
            81 | 83 => {
                let body = usize::try_from(at + 8)
                    .ok()
                    .zip(usize::try_from(next.min(end)).ok())
                    .and_then(|(s, e)| bytes.get(s..e));
                if let Some(p) = body.and_then(|b| compressed::payload(ty, b, be)) {
                    compressed.push(p);
                }
            }
            _ => {}
        }
        at = next;
    }
    compressed::check(&compressed)?;
    Ok(())
}

/// Whether some event of a perf.data file samples with a read group (`sample_type` has
/// `PERF_SAMPLE_READ` and `read_format` has `PERF_FORMAT_GROUP`, as `perf record -e
/// '{a,b}:S'` writes it): what `tma locate --import --tree` needs.
pub fn has_read_groups(bytes: &[u8]) -> bool {
    let (Some(off), Some(size)) = (u64_at(bytes, 24), u64_at(bytes, 32)) else {
        return false;
    };
    let start = usize::try_from(off).unwrap_or(usize::MAX).min(bytes.len());
    let end = start
        .saturating_add(usize::try_from(size).unwrap_or(usize::MAX))
        .min(bytes.len());
    read_groups_in(bytes, &bytes[start..end])
}

/// [`has_read_groups`] of a file, reading only its header and its attribute section, not
/// its samples (`tma report` asks before it reads the recording). A file too short for a
/// header, or whose attribute section is larger than perf writes, has none.
pub fn file_has_read_groups(path: &std::path::Path) -> std::io::Result<bool> {
    use std::io::{Seek, SeekFrom};
    // perf writes one entry of about 150 bytes per event: far below this.
    const MAX_ATTR_SECTION: u64 = 16 << 20;
    let mut f = std::fs::File::open(path)?;
    let mut head = [0u8; 40];
    if f.read_exact(&mut head).is_err() {
        return Ok(false);
    }
    let (Some(off), Some(size)) = (u64_at(&head, 24), u64_at(&head, 32)) else {
        return Ok(false);
    };
    if size > MAX_ATTR_SECTION {
        return Ok(false);
    }
    f.seek(SeekFrom::Start(off))?;
    let mut attrs = Vec::new();
    f.take(size).read_to_end(&mut attrs)?;
    Ok(read_groups_in(&head, &attrs))
}

/// Whether an attribute section (`attrs`, laid out as the header `head` says) holds an
/// event that samples with a read group.
fn read_groups_in(head: &[u8], attrs: &[u8]) -> bool {
    const SAMPLE_READ: u64 = 1 << 4;
    const FORMAT_GROUP: u64 = 1 << 3;
    let Some(attr_size) = u64_at(head, 16).and_then(|n| usize::try_from(n).ok()) else {
        return false;
    };
    if attr_size < 40 + 16 {
        return false;
    }
    attrs.chunks_exact(attr_size).any(|attr| {
        let sample_type = u64_at(attr, 24).unwrap_or(0);
        let read_format = u64_at(attr, 32).unwrap_or(0);
        sample_type & SAMPLE_READ != 0 && read_format & FORMAT_GROUP != 0
    })
}

/// Each attribute's `read_format` as the file holds it (linux-perf-event-reader drops the
/// bits it does not know, such as `PERF_FORMAT_LOST`, which changes the read group's
/// layout). The attribute section: entries of `attr_size` bytes (header offset 16), each a
/// `perf_event_attr` (read_format at byte 32) and a 16-byte ids section.
fn read_formats(bytes: &[u8]) -> Vec<u64> {
    let (Some(attr_size), Some(off), Some(size)) =
        (u64_at(bytes, 16), u64_at(bytes, 24), u64_at(bytes, 32))
    else {
        return Vec::new();
    };
    if attr_size < 40 + 16 {
        return Vec::new();
    }
    (0..size / attr_size)
        .map_while(|i| u64_at(bytes, (off + i * attr_size + 32) as usize))
        .collect()
}

fn run<R: Read>(
    reader: Result<PerfFileReader<R>, linux_perf_data::Error>,
    agg: &mut Aggregator,
    event: Option<&str>,
    read_formats: &[u64],
) -> Result<ImportInfo, ImportError> {
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = reader.map_err(|e| ImportError::Parse(e.to_string()))?;
    let info = ImportInfo {
        events: perf_file
            .event_attributes()
            .iter()
            .map(|a| match a.name() {
                Some(n) => n.to_string(),
                None => name_from_attr(&a.attr),
            })
            .collect(),
        perf_version: perf_file.perf_version().ok().flatten().map(str::to_string),
        hostname: perf_file.hostname().ok().flatten().map(str::to_string),
        cmdline: perf_file.cmdline().ok().flatten().map(|v| v.join(" ")),
        chosen: 0,
        event_ids: perf_file
            .event_attributes()
            .iter()
            .map(|a| a.event_ids.clone())
            .collect(),
    };
    let chosen = match event {
        None => 0,
        Some(want) => info
            .events
            .iter()
            .position(|e| {
                e.eq_ignore_ascii_case(want)
                    || e.split(':')
                        .next()
                        .is_some_and(|b| b.eq_ignore_ascii_case(want))
            })
            .ok_or_else(|| ImportError::NoSuchEvent {
                want: want.to_string(),
                have: info.events.join(", "),
            })?,
    };
    let mut info = info;
    info.chosen = chosen;
    agg.raw_read_format = read_formats.get(chosen).copied();
    loop {
        match record_iter.next_record(&mut perf_file) {
            Ok(Some(PerfFileRecord::EventRecord { attr_index, record })) => {
                if attr_index == chosen
                    || record.record_type
                        != linux_perf_data::linux_perf_event_reader::RecordType::SAMPLE
                {
                    agg.handle(&record)
                }
            }
            Ok(Some(PerfFileRecord::UserRecord(_))) => {}
            Ok(None) => break,
            Err(e) => return Err(ImportError::Parse(e.to_string())),
        }
    }
    Ok(info)
}

/// An event name from the attr alone (files without the EVENT_DESC feature, such as the ones
/// `--record` writes).
fn name_from_attr(a: &linux_perf_data::linux_perf_event_reader::PerfEventAttr) -> String {
    use linux_perf_data::linux_perf_event_reader::{PerfEventType, SoftwareCounterType};
    match a.type_ {
        PerfEventType::Software(SoftwareCounterType::CpuClock) => "cpu-clock".into(),
        PerfEventType::Software(SoftwareCounterType::TaskClock) => "task-clock".into(),
        PerfEventType::DynamicPmu(_, config, _, _) => format!("r{config:x}"),
        other => format!("{other:?}"),
    }
}

/// Read a perf.data file from disk.
pub fn import_file(
    path: &std::path::Path,
    agg: &mut Aggregator,
    event: Option<&str>,
) -> Result<ImportInfo, ImportError> {
    let bytes = tma_render::files::read_input(path).map_err(|source| ImportError::Read {
        path: tma_render::files::display_input(path),
        err: source,
    })?;
    import_bytes_event(&bytes, agg, event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_garbage_and_old_versions() {
        let mut agg = Aggregator::new();
        assert!(matches!(
            import_bytes(b"hello world, not perf", &mut agg),
            Err(ImportError::BadMagic { .. })
        ));
        assert!(matches!(
            import_bytes(b"PERFFILE\0\0\0\0\0\0\0\0", &mut agg),
            Err(ImportError::Version1)
        ));
        assert!(matches!(
            import_bytes(b"PERFILE2", &mut agg),
            Err(ImportError::Truncated { .. })
        ));
        assert!(import_bytes(b"", &mut agg).is_err());
    }

    #[test]
    fn rejects_a_header_pointing_past_the_end() {
        let mut h = vec![0u8; 104];
        h[..8].copy_from_slice(b"PERFILE2");
        h[8..16].copy_from_slice(&104u64.to_le_bytes());
        // data section at 104, size 1 MiB
        h[40..48].copy_from_slice(&104u64.to_le_bytes());
        h[48..56].copy_from_slice(&(1u64 << 20).to_le_bytes());
        let e = import_bytes(&h, &mut Aggregator::new()).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        assert!(e.to_string().contains("data section"), "{e}");
    }
}
