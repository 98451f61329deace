//! CPU lists (`0-3,8`) and where each CPU sits (`devices/system/cpu`).

use super::kernel::parse_int;
use super::{Host, HostError, ParseError};

/// The largest CPU range accepted in a list (guards against `0-4294967295`).
const MAX_RANGE: u32 = 65_536;

/// Parse a CPU list as the kernel and `-C` write it (`0-3,8,10-11`, a trailing newline
/// allowed): sorted, without duplicates.
pub fn parse_cpu_list(bytes: &[u8]) -> Result<Vec<u32>, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    let num = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| ParseError::NotANumber(s.trim().to_string()))
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(ParseError::EmptyItem(text.to_string()));
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(ParseError::BackwardRange(part.to_string()));
                }
                if b - a > MAX_RANGE {
                    return Err(ParseError::RangeTooLarge(part.to_string()));
                }
                // Many plausible ranges still make an implausible list (the kernel's most is
                // 8192 CPUs): the list, repeats included, is held to MAX_RANGE + 1 entries.
                if out.len() + (b - a) as usize >= MAX_RANGE as usize {
                    return Err(ParseError::ListTooLong(MAX_RANGE as usize));
                }
                out.extend(a..=b);
            }
            None => {
                if out.len() >= MAX_RANGE as usize {
                    return Err(ParseError::ListTooLong(MAX_RANGE as usize));
                }
                out.push(num(part)?)
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Where one CPU sits, from `devices/system/cpu/cpuN/topology`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopology {
    pub cpu: u32,
    /// `physical_package_id` (-1 on platforms that do not know it).
    pub package: i64,
    /// `core_id`.
    pub core: i64,
    /// `thread_siblings_list`: the hardware threads sharing this core (this one included);
    /// empty when the kernel does not say.
    pub thread_siblings: Vec<u32>,
}

impl Host {
    /// The online CPUs, from `<sys>/devices/system/cpu/online`.
    pub fn online_cpus(&self) -> Result<Vec<u32>, HostError> {
        Host::parsed(self.sys.join("devices/system/cpu/online"), parse_cpu_list)
    }

    /// The online CPUs, or CPU 0 alone when the list is missing or malformed (a process can
    /// always run somewhere).
    pub fn online_cpus_or_cpu0(&self) -> Vec<u32> {
        self.online_cpus().unwrap_or_else(|_| vec![0])
    }
    /// Where `cpu` sits, from `<sys>/devices/system/cpu/cpuN/topology/{physical_package_id,
    /// core_id, thread_siblings_list}`.
    pub fn cpu_topology(&self, cpu: u32) -> Result<CpuTopology, HostError> {
        let dir = self
            .sys
            .join(format!("devices/system/cpu/cpu{cpu}/topology"));
        let siblings = match Host::parsed(dir.join("thread_siblings_list"), parse_cpu_list) {
            Ok(v) => v,
            Err(e) if e.is_missing() => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(CpuTopology {
            cpu,
            package: Host::parsed(dir.join("physical_package_id"), parse_int)?,
            core: Host::parsed(dir.join("core_id"), parse_int)?,
            thread_siblings: siblings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list(b"0-3,8\n"), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list(b"5,0-1"), Ok(vec![0, 1, 5]));
        assert_eq!(parse_cpu_list(b"1,1"), Ok(vec![1]));
        assert_eq!(parse_cpu_list(b"7"), Ok(vec![7]));
    }

    #[test]
    fn malformed_cpu_lists_are_typed_errors() {
        assert_eq!(parse_cpu_list(b""), Err(ParseError::Empty));
        assert_eq!(parse_cpu_list(b" \n"), Err(ParseError::Empty));
        assert_eq!(
            parse_cpu_list(b"3-1"),
            Err(ParseError::BackwardRange("3-1".into()))
        );
        assert_eq!(
            parse_cpu_list(b"a"),
            Err(ParseError::NotANumber("a".into()))
        );
        assert_eq!(
            parse_cpu_list(b"0,"),
            Err(ParseError::EmptyItem("0,".into()))
        );
        assert_eq!(
            parse_cpu_list(b"0-4294967295"),
            Err(ParseError::RangeTooLarge("0-4294967295".into()))
        );
        // Plausible ranges that add up to an implausible list (found by the proc fuzz target:
        // 8 KB of them asked for over a megabyte); a long list of single CPUs too.
        let many = vec!["0-4095"; 17].join(",");
        assert_eq!(
            parse_cpu_list(many.as_bytes()),
            Err(ParseError::ListTooLong(65_536))
        );
        let singles = vec!["1"; 65_537].join(",");
        assert_eq!(
            parse_cpu_list(singles.as_bytes()),
            Err(ParseError::ListTooLong(65_536))
        );
        assert_eq!(
            parse_cpu_list(vec!["0-4095"; 15].join(",").as_bytes()).map(|v| v.len()),
            Ok(4096)
        );
        assert_eq!(parse_cpu_list(b"0-\xff"), Err(ParseError::NotUtf8));
        assert_eq!(
            parse_cpu_list(b"-1"),
            Err(ParseError::NotANumber(String::new()))
        );
    }
}
