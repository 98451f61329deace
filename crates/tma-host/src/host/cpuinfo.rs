//! `/proc/cpuinfo`: the CPU's identity and flags.

use std::path::PathBuf;

use super::{Host, HostError};

/// The parts of `/proc/cpuinfo` the tools use: the first processor's vendor, model name and
/// flags, and every processor's `cpu MHz`. Family, model and stepping are identified by
/// `tma_catalog::parse_cpuinfo` from the same bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuInfo {
    /// `vendor_id` (`GenuineIntel`, `AuthenticAMD`).
    pub vendor: Option<String>,
    /// `model name`.
    pub model_name: Option<String>,
    /// `flags` of the first processor (`hypervisor`, `constant_tsc`, `tdx_guest`, ...).
    pub flags: Vec<String>,
    /// `cpu MHz` of every processor that has a readable one.
    pub mhz: Vec<f64>,
}

impl CpuInfo {
    /// Parse `/proc/cpuinfo` bytes (lines `key<tabs>: value`; lines without a colon are
    /// ignored, invalid UTF-8 replaced).
    pub fn parse(bytes: &[u8]) -> CpuInfo {
        let text = String::from_utf8_lossy(bytes);
        let mut c = CpuInfo::default();
        let mut have_flags = false;
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            match k {
                "flags" if !have_flags => {
                    c.flags = v.split_whitespace().map(str::to_string).collect();
                    have_flags = true;
                }
                "vendor_id" if c.vendor.is_none() => c.vendor = Some(v.to_string()),
                "model name" if c.model_name.is_none() => c.model_name = Some(v.to_string()),
                "cpu MHz" => {
                    if let Ok(x) = v.parse() {
                        c.mhz.push(x)
                    }
                }
                _ => {}
            }
        }
        c
    }

    /// Whether the first processor's `flags` name `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

impl Host {
    /// `<proc>/cpuinfo`.
    pub fn cpuinfo_path(&self) -> PathBuf {
        self.proc.join("cpuinfo")
    }

    /// The bytes of `<proc>/cpuinfo` (for `tma_catalog::parse_cpuinfo`).
    pub fn cpuinfo_bytes(&self) -> Result<Vec<u8>, HostError> {
        Host::read(self.cpuinfo_path()).map(|(_, b)| b)
    }

    /// `<proc>/cpuinfo`, parsed.
    pub fn cpuinfo(&self) -> Result<CpuInfo, HostError> {
        self.cpuinfo_bytes().map(|b| CpuInfo::parse(&b))
    }

    /// Whether the first processor in `<proc>/cpuinfo` has `flag` (false when unreadable).
    pub fn has_cpu_flag(&self, flag: &str) -> bool {
        self.cpuinfo().is_ok_and(|c| c.has_flag(flag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_first_processor_and_every_mhz() {
        let c = CpuInfo::parse(
            b"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\n\
              cpu MHz\t\t: 2600.000\nflags\t\t: fpu hypervisor sev\n\n\
              processor\t: 1\nvendor_id\t: Other\ncpu MHz\t\t: 2400.000\nflags\t\t: fpu\n",
        );
        assert_eq!(c.vendor.as_deref(), Some("AuthenticAMD"));
        assert_eq!(c.model_name.as_deref(), Some("AMD EPYC 9R14"));
        assert!(c.has_flag("hypervisor") && c.has_flag("sev") && !c.has_flag("hyper"));
        assert_eq!(c.mhz, vec![2600.0, 2400.0]);
        let garbage = CpuInfo::parse(b"\xff\xfe no colon\n");
        assert_eq!(garbage, CpuInfo::default());
    }
}
