//! Kernel knobs: one-number files (`perf_event_paranoid`, the NMI watchdog), choice files
//! (the transparent-huge-page mode) and the loaded modules.

use super::{Host, HostError, ParseError};

/// Parse a file holding one decimal integer (`2\n`, `-1`).
pub fn parse_int(bytes: &[u8]) -> Result<i64, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    text.parse()
        .map_err(|_| ParseError::NotANumber(text.to_string()))
}

/// The system-wide transparent-huge-page mode (`kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpMode {
    /// Every large enough anonymous mapping may get huge pages.
    Always,
    /// Only mappings advised with `madvise(MADV_HUGEPAGE)` get huge pages.
    Madvise,
    /// No transparent huge pages.
    Never,
}

impl ThpMode {
    /// The name the kernel uses.
    pub fn name(self) -> &'static str {
        match self {
            ThpMode::Always => "always",
            ThpMode::Madvise => "madvise",
            ThpMode::Never => "never",
        }
    }
}

impl std::fmt::Display for ThpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The selected word of a kernel choice file (`always [madvise] never` gives `madvise`; a file
/// holding one bare word is that word).
pub fn parse_selected(bytes: &[u8]) -> Result<String, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    // A file holding one bare word (no choices offered) is that word.
    if !text.contains('[') && !text.contains(char::is_whitespace) {
        return Ok(text.to_string());
    }
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .map(str::to_string)
        .ok_or_else(|| ParseError::NoSelection(text.to_string()))
}

/// Parse `transparent_hugepage/enabled` (`always [madvise] never`).
pub fn parse_thp_mode(bytes: &[u8]) -> Result<ThpMode, ParseError> {
    let sel = parse_selected(bytes)?;
    match sel.as_str() {
        "always" => Ok(ThpMode::Always),
        "madvise" => Ok(ThpMode::Madvise),
        "never" => Ok(ThpMode::Never),
        _ => Err(ParseError::NoSelection(
            String::from_utf8_lossy(bytes).trim().to_string(),
        )),
    }
}

impl Host {
    /// Whether the kernel module `name` is loaded (`<sys>/module/<name>` is a directory).
    pub fn module_loaded(&self, name: &str) -> bool {
        self.sys.join("module").join(name).is_dir()
    }

    /// The loaded kernel modules whose name starts with `prefix`, sorted (empty when
    /// `<sys>/module` cannot be listed).
    pub fn kernel_modules(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = Host::entries(self.sys.join("module"))
            .map(|rd| {
                rd.filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .filter(|n| n.starts_with(prefix))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
    /// `<proc>/sys/kernel/perf_event_paranoid`.
    pub fn perf_event_paranoid(&self) -> Result<i32, HostError> {
        let path = self.proc.join("sys/kernel/perf_event_paranoid");
        Host::parsed(path, |b| {
            let v = parse_int(b)?;
            i32::try_from(v).map_err(|_| ParseError::NotANumber(v.to_string()))
        })
    }

    /// `<proc>/sys/kernel/perf_event_paranoid` as text for messages (`unknown` when
    /// unreadable).
    pub fn paranoid_text(&self) -> String {
        self.perf_event_paranoid()
            .map_or_else(|_| "unknown".to_string(), |p| p.to_string())
    }

    /// `<proc>/sys/kernel/nmi_watchdog`: 0 off, otherwise on. A missing file is an error for
    /// which [`HostError::is_missing`] holds (a kernel without the hard-lockup detector).
    pub fn nmi_watchdog(&self) -> Result<i64, HostError> {
        Host::parsed(self.proc.join("sys/kernel/nmi_watchdog"), parse_int)
    }

    /// Whether the NMI watchdog is on (it takes one general-purpose counter); off when the
    /// control is absent or unreadable.
    pub fn nmi_watchdog_on(&self) -> bool {
        self.nmi_watchdog().is_ok_and(|v| v != 0)
    }
    /// The system THP mode, from `<sys>/kernel/mm/transparent_hugepage/enabled` (missing when
    /// the kernel is built without THP).
    pub fn thp_mode(&self) -> Result<ThpMode, HostError> {
        Host::parsed(
            self.sys.join("kernel/mm/transparent_hugepage/enabled"),
            parse_thp_mode,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tree;
    use std::path::Path;

    #[test]
    fn ints() {
        assert_eq!(parse_int(b"2\n"), Ok(2));
        assert_eq!(parse_int(b"-1"), Ok(-1));
        assert_eq!(parse_int(b""), Err(ParseError::Empty));
        assert_eq!(parse_int(b"on"), Err(ParseError::NotANumber("on".into())));
        assert_eq!(parse_int(b"\xfe"), Err(ParseError::NotUtf8));
    }
    #[test]
    fn loaded_modules() {
        let d = tree(&[
            ("sys/module/kvm/refcnt", "1\n"),
            ("sys/module/kvm_pvm/refcnt", "1\n"),
            ("sys/module/kvm_amd/refcnt", "1\n"),
            ("sys/module/tun/refcnt", "0\n"),
        ]);
        let h = Host::under(d.path());
        assert!(h.module_loaded("kvm_amd") && !h.module_loaded("kvm_intel"));
        assert_eq!(h.kernel_modules("kvm_"), vec!["kvm_amd", "kvm_pvm"]);
        assert_eq!(h.kernel_modules("kvm").len(), 3);
        let none = Host::under(Path::new("/nonexistent"));
        assert!(!none.module_loaded("kvm") && none.kernel_modules("").is_empty());
    }

    #[test]
    fn nmi_watchdog_from_proc_fixtures() {
        let live = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/live");
        assert!(Host::new("/nonexistent", live.join("proc-nmi-on")).nmi_watchdog_on());
        assert!(!Host::new("/nonexistent", live.join("proc-nmi-off")).nmi_watchdog_on());
    }
}
