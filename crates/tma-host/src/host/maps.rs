//! Mapping headers of `/proc/PID/maps` (and of each `smaps` entry).

/// One mapping header of `/proc/PID/maps` (and of each `smaps` entry):
/// `start-end perms offset dev inode [path]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapsLine {
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `r-xp`.
    pub perms: String,
    /// File offset of `start`.
    pub offset: u64,
    /// The mapped file or pseudo-name (`[vdso]`), empty for anonymous memory; spaces inside
    /// the path are kept.
    pub path: String,
}

/// Parse one mapping header; the error says what was wrong with it.
pub fn parse_maps_header(line: &str) -> Result<MapsLine, String> {
    let mut words = line.split_whitespace();
    let range = words.next().unwrap_or("");
    let (start, end) = range
        .split_once('-')
        .and_then(|(a, b)| {
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .filter(|(a, b)| a <= b)
        .ok_or_else(|| format!("`{range}` is not an address range"))?;
    let perms = words
        .next()
        .ok_or("a mapping header without permissions")?
        .to_string();
    let offset = words
        .next()
        .and_then(|o| u64::from_str_radix(o, 16).ok())
        .ok_or("a mapping header without a hexadecimal offset")?;
    // device, inode, then the path (which may contain spaces).
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
    }
    Ok(MapsLine {
        start,
        end,
        perms,
        offset,
        path: rest.trim().to_string(),
    })
}

/// Every mapping of a `/proc/PID/maps` file; lines that are not mapping headers are skipped
/// (the file can change while it is read, and a truncated last line is not an error).
pub fn parse_maps(bytes: &[u8]) -> Vec<MapsLine> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| parse_maps_header(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_headers_keep_offsets_and_paths_with_spaces() {
        let maps = b"55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 123   /tmp/my prog (deleted)\n\
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n\
not-a-range r-xp 0 0 0 /x\n\
7f00-7f10\n";
        let m = parse_maps(maps);
        assert_eq!(
            m,
            vec![
                MapsLine {
                    start: 0x55d0c0a01000,
                    end: 0x55d0c0a02000,
                    perms: "r-xp".into(),
                    offset: 0x1000,
                    path: "/tmp/my prog (deleted)".into(),
                },
                MapsLine {
                    start: 0x7f0000000000,
                    end: 0x7f0000021000,
                    perms: "rw-p".into(),
                    offset: 0,
                    path: String::new(),
                },
            ]
        );
        assert_eq!(
            parse_maps_header("not-a-range r-xp 0 0 0 /x").unwrap_err(),
            "`not-a-range` is not an address range"
        );
        assert_eq!(
            parse_maps_header("7f00-7f10").unwrap_err(),
            "a mapping header without permissions"
        );
    }
}
