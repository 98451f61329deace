//! Symbolization: ELF symbol tables and DWARF line tables (object + addr2line), demangled
//! Rust and C++ names, and kernel symbols from `/proc/kallsyms` text.
//!
//! Address spaces, named as samply names them: a sample's *AVMA* (actual virtual address in
//! the process) becomes a *file offset* in [`crate::aggregate`] through the mmap records; here
//! the file offset becomes an *SVMA* (stated virtual address, what the ELF symbol and line
//! tables use) through the program headers (`PT_LOAD`: `svma = off - p_offset + p_vaddr`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

/// Errors from loading a binary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SymbolError {
    #[error("cannot read {path}: {err}")]
    Read { path: String, err: std::io::Error },
    #[error("{path} is not an ELF file the symbolizer can read: {reason}")]
    Parse { path: String, reason: String },
}

/// A function symbol: `[start, start + size)` in SVMA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub start: u64,
    pub size: u64,
    /// The name as the symbol table has it (mangled).
    pub raw: String,
    /// Demangled on first use: a large library has 100,000 symbols, a profile needs a few.
    demangled: std::cell::OnceCell<String>,
}

impl Symbol {
    pub fn new(start: u64, size: u64, raw: String) -> Symbol {
        Symbol {
            start,
            size,
            raw,
            demangled: std::cell::OnceCell::new(),
        }
    }

    /// The demangled name.
    pub fn name(&self) -> &str {
        self.demangled.get_or_init(|| demangle(&self.raw))
    }
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    offset: u64,
    filesz: u64,
    vaddr: u64,
}

/// Demangle a Rust (legacy or v0) or Itanium C++ symbol; other names come back unchanged.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle() {
                return s;
            }
        }
    }
    name.to_string()
}

fn collect_symbols(file: &object::File<'_>) -> Vec<Symbol> {
    let mut raw: Vec<(u64, u64, &str)> = Vec::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || sym.address() == 0 || !sym.is_definition() {
            continue;
        }
        if let Ok(name) = sym.name() {
            if !name.is_empty() {
                raw.push((sym.address(), sym.size(), name));
            }
        }
    }
    raw.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    raw.dedup_by_key(|s| s.0);
    let mut symbols = Vec::with_capacity(raw.len());
    for (i, &(start, size, name)) in raw.iter().enumerate() {
        // Size 0 (hand-written asm): extend to the next symbol, at most 4 KiB.
        let size = if size > 0 {
            size
        } else {
            raw.get(i + 1)
                .map(|n| (n.0 - start).min(4096))
                .unwrap_or(16)
        };
        symbols.push(Symbol::new(start, size, name.to_string()));
    }
    symbols
}

/// Where a distribution keeps the debug file of a build id:
/// `<root>/.build-id/<first byte hex>/<rest hex>.debug`.
pub fn build_id_debug_path(root: &Path, build_id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = build_id.split_first()?;
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    Some(
        root.join(".build-id")
            .join(format!("{first:02x}"))
            .join(format!("{rest}.debug")),
    )
}

/// One loaded ELF file.
pub struct ElfModule {
    /// The file actually read (may differ from the recorded path, see [`Symbolizer`]).
    pub path: PathBuf,
    data: Vec<u8>,
    segments: Vec<Segment>,
    /// Sorted by start.
    symbols: Vec<Symbol>,
    /// The file has a `.symtab` (not stripped).
    pub has_symtab: bool,
    /// The file has `.debug_line` (DWARF line tables).
    pub has_debug_lines: bool,
    pub build_id: Option<Vec<u8>>,
    /// Separate debug file holding the line tables, when one was attached.
    pub debug_path: Option<PathBuf>,
    lines: std::cell::OnceCell<Option<addr2line::Loader>>,
}

impl std::fmt::Debug for ElfModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfModule")
            .field("path", &self.path)
            .field("symbols", &self.symbols.len())
            .field("has_symtab", &self.has_symtab)
            .finish()
    }
}

impl ElfModule {
    /// Read and index `path`.
    pub fn load(path: &Path) -> Result<ElfModule, SymbolError> {
        let data = std::fs::read(path).map_err(|source| SymbolError::Read {
            path: path.display().to_string(),
            err: source,
        })?;
        Self::from_bytes(path, data)
    }

    /// Index an ELF image already in memory (`path` is used for DWARF lookups and messages).
    pub fn from_bytes(path: &Path, data: Vec<u8>) -> Result<ElfModule, SymbolError> {
        let parse_err = |reason: String| SymbolError::Parse {
            path: path.display().to_string(),
            reason,
        };
        let file = object::File::parse(&*data).map_err(|e| parse_err(e.to_string()))?;
        if file.format() != object::BinaryFormat::Elf {
            return Err(parse_err(format!("{:?} format", file.format())));
        }
        let segments: Vec<Segment> = file
            .segments()
            .map(|s| {
                let (offset, filesz) = s.file_range();
                Segment {
                    offset,
                    filesz,
                    vaddr: s.address(),
                }
            })
            .collect();
        let has_symtab = file.symbol_table().is_some();
        let has_debug_lines = file.section_by_name(".debug_line").is_some();
        let build_id = file.build_id().ok().flatten().map(|b| b.to_vec());
        let symbols = collect_symbols(&file);
        Ok(ElfModule {
            path: path.to_path_buf(),
            data,
            segments,
            symbols,
            has_symtab,
            has_debug_lines,
            build_id,
            debug_path: None,
            lines: std::cell::OnceCell::new(),
        })
    }

    /// Take symbols and line tables from a separate debug file (`/usr/lib/debug/...`) when
    /// this file lacks them. Returns whether the debug file was used.
    pub fn attach_debug_file(&mut self, debug: &Path) -> bool {
        let Ok(data) = std::fs::read(debug) else {
            return false;
        };
        let Ok(file) = object::File::parse(&*data) else {
            return false;
        };
        if let (Some(a), Ok(Some(b))) = (&self.build_id, file.build_id()) {
            if a.as_slice() != b {
                return false;
            }
        }
        let mut used = false;
        if !self.has_symtab && file.symbol_table().is_some() {
            let mut syms = collect_symbols(&file);
            syms.append(&mut self.symbols);
            syms.sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
            syms.dedup_by_key(|s| s.start);
            self.symbols = syms;
            self.has_symtab = true;
            used = true;
        }
        if !self.has_debug_lines && file.section_by_name(".debug_line").is_some() {
            self.has_debug_lines = true;
            self.debug_path = Some(debug.to_path_buf());
            used = true;
        }
        used
    }

    /// File offset to SVMA through the `PT_LOAD` program headers.
    pub fn offset_to_svma(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| off >= s.offset && off < s.offset + s.filesz)
            .map(|s| off - s.offset + s.vaddr)
    }

    /// The function symbol containing `svma`.
    pub fn symbol_at(&self, svma: u64) -> Option<&Symbol> {
        let i = self.symbols.partition_point(|s| s.start <= svma);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (svma < s.start + s.size).then_some(s)
    }

    /// The first symbol whose (demangled) name is `name`, or starts with `name` followed by
    /// `(` or `::h` (so `main` and `foo::bar` match C++/Rust decorated names).
    pub fn symbol_named(&self, name: &str) -> Option<&Symbol> {
        self.symbols.iter().find(|s| s.name() == name).or_else(|| {
            self.symbols.iter().find(|s| {
                s.name()
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('(') || rest.starts_with("::h"))
            })
        })
    }

    /// File bytes backing `[svma, svma + len)`, clipped to the segment.
    pub fn bytes_at(&self, svma: u64, len: u64) -> Option<&[u8]> {
        let s = self
            .segments
            .iter()
            .find(|s| svma >= s.vaddr && svma < s.vaddr + s.filesz)?;
        let off = (svma - s.vaddr + s.offset) as usize;
        let end = (s.offset + s.filesz).min(off as u64 + len) as usize;
        self.data.get(off..end.min(self.data.len()))
    }

    /// Source file and line of `svma` from DWARF, when the file has line tables.
    pub fn line_at(&self, svma: u64) -> Option<(String, u32)> {
        if !self.has_debug_lines {
            return None;
        }
        let loader = self
            .lines
            .get_or_init(|| {
                addr2line::Loader::new(self.debug_path.as_deref().unwrap_or(&self.path)).ok()
            })
            .as_ref()?;
        let loc = loader.find_location(svma).ok()??;
        Some((loc.file?.to_string(), loc.line?))
    }

    /// Number of function symbols.
    pub fn symbol_count(&self) -> usize {
        self.symbols.len()
    }

    /// Whether `.text` exists (a sanity check for tests).
    pub fn has_text(&self) -> bool {
        object::File::parse(&*self.data)
            .ok()
            .and_then(|f| f.section_by_name(".text").map(|s| s.size() > 0))
            .unwrap_or(false)
    }
}

/// Kernel symbols from `/proc/kallsyms`.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    /// (address, name), sorted by address.
    syms: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Parse kallsyms text. Returns `None` when every address is zero (kptr_restrict hides
    /// them) or no text symbol is present.
    pub fn parse(bytes: &[u8]) -> Option<Kallsyms> {
        let text = String::from_utf8_lossy(bytes);
        let mut syms = Vec::new();
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(ty, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            syms.push((addr, name.to_string()));
        }
        if syms.is_empty() {
            return None;
        }
        syms.sort_by_key(|s| s.0);
        Some(Kallsyms { syms })
    }

    /// The symbol at or below `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        self.syms.get(i.checked_sub(1)?).map(|s| s.1.as_str())
    }
}

enum Slot {
    Loaded(Box<ElfModule>),
    Failed(String),
}

/// Loads each module once; looks binaries up in search directories first (`--symdir`, like
/// perf's `--symfs`), then at the recorded path.
#[derive(Default)]
pub struct Symbolizer {
    search_dirs: Vec<PathBuf>,
    /// Root of separate debug files (`/usr/lib/debug`), looked up by build id.
    pub debug_root: Option<PathBuf>,
    cache: HashMap<String, Slot>,
    /// Kernel symbols, when readable.
    pub kallsyms: Option<Kallsyms>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("search_dirs", &self.search_dirs)
            .field("modules", &self.cache.len())
            .finish()
    }
}

impl Symbolizer {
    pub fn new(search_dirs: Vec<PathBuf>, kallsyms: Option<Kallsyms>) -> Self {
        Symbolizer {
            search_dirs,
            debug_root: Some(PathBuf::from("/usr/lib/debug")),
            cache: HashMap::new(),
            kallsyms,
        }
    }

    /// The module for a recorded path, or why it could not be loaded.
    pub fn module(&mut self, recorded: &str) -> Result<&ElfModule, &str> {
        if !self.cache.contains_key(recorded) {
            let slot = self.load(recorded);
            self.cache.insert(recorded.to_string(), slot);
        }
        match self.cache.get(recorded) {
            Some(Slot::Loaded(m)) => Ok(m),
            Some(Slot::Failed(why)) => Err(why),
            None => Err("not loaded"),
        }
    }

    fn load(&self, recorded: &str) -> Slot {
        if recorded.starts_with('[') || recorded.starts_with("//anon") || recorded.is_empty() {
            return Slot::Failed(format!("{recorded} is not a file"));
        }
        let base = Path::new(recorded).file_name();
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(base) = base {
            for d in &self.search_dirs {
                candidates.push(d.join(base));
            }
        }
        candidates.push(PathBuf::from(recorded));
        let mut last = format!("{recorded} not found");
        for c in candidates {
            if !c.is_file() {
                continue;
            }
            match ElfModule::load(&c) {
                Ok(mut m) => {
                    if !m.has_symtab || !m.has_debug_lines {
                        if let (Some(root), Some(bid)) = (&self.debug_root, &m.build_id) {
                            if let Some(p) = build_id_debug_path(root, bid) {
                                m.attach_debug_file(&p);
                            }
                        }
                    }
                    return Slot::Loaded(Box::new(m));
                }
                Err(e) => last = e.to_string(),
            }
        }
        Slot::Failed(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("chase"), "chase");
        assert_eq!(demangle("_Zgarbage!"), "_Zgarbage!");
    }

    #[test]
    fn kallsyms_from_bytes() {
        let k = Kallsyms::parse(
            b"ffffffff81000000 T _text\nffffffff81001000 t do_one\nffffffff81002000 D data\n\
ffffffff81003000 T do_two [mod]\n",
        )
        .unwrap();
        assert_eq!(k.lookup(0xffffffff81001234), Some("do_one"));
        assert_eq!(k.lookup(0xffffffff81002500), Some("do_one"));
        assert_eq!(k.lookup(0xffffffff81003001), Some("do_two"));
        assert_eq!(k.lookup(0x10), None);
        // kptr_restrict: all zero -> unusable.
        assert!(Kallsyms::parse(b"0000000000000000 T _text\n0000000000000000 t x\n").is_none());
        assert!(Kallsyms::parse(b"").is_none());
    }

    #[test]
    fn debug_file_path_from_build_id() {
        assert_eq!(
            build_id_debug_path(Path::new("/usr/lib/debug"), &[0xab, 0xcd, 0x01]).unwrap(),
            Path::new("/usr/lib/debug/.build-id/ab/cd01.debug")
        );
        assert!(build_id_debug_path(Path::new("/x"), &[]).is_none());
    }

    #[test]
    fn garbage_is_not_an_elf() {
        let e = ElfModule::from_bytes(Path::new("x"), b"not an elf at all".to_vec()).unwrap_err();
        assert!(e.to_string().contains("not an ELF"), "{e}");
    }

    #[test]
    fn own_test_binary_maps_offsets() {
        // The running test binary is an ELF with symbols: a smoke test of the address math.
        let exe = std::env::current_exe().unwrap();
        let m = ElfModule::load(&exe).unwrap();
        assert!(m.has_text());
        assert!(m.symbol_count() > 100);
        let s = m.symbol_named("main").expect("main symbol");
        assert!(m.symbol_at(s.start).is_some());
        assert!(m.bytes_at(s.start, 4).is_some_and(|b| b.len() == 4));
    }
}
