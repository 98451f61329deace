//! No two source files of a crate import each other: a file names another by a path
//! (`crate::a::b::X`, `super::X`, `self::a::X`, or `a::X` for a child module `a`), and the
//! file that holds the item is found by the longest module prefix of the path that is a
//! file. A `mod a;` declaration and a `pub use` re-export (a facade naming its parts) are
//! not imports. Paths inside an inline module (`mod tests { use super::*; }`) start from
//! that module, so a test module naming its own file is no edge.
//!
//! The scan is textual (comments, strings and characters are left out first); it knows
//! every crate under `crates/` and `xtask` itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Pairs that still import each other. Remove a pair when its files are split: the test then
/// keeps it out.
const KNOWN: &[(&str, &str)] = &[
    // `cmd/*` reads the clap command from `main.rs`, which dispatches to `cmd/*`.
    (
        "crates/tma-cli/src/cmd/completions.rs",
        "crates/tma-cli/src/main.rs",
    ),
    (
        "crates/tma-cli/src/cmd/man.rs",
        "crates/tma-cli/src/main.rs",
    ),
];

/// A file and the module path it holds (`a/b.rs` and `a/b/mod.rs`: `["a", "b"]`).
struct Module {
    file: PathBuf,
    path: Vec<String>,
}

/// Every `.rs` file under `src` with its module path (the crate root: `[]`; with both
/// `lib.rs` and `main.rs`, `main.rs` is a crate of its own and is left out when `lib.rs`
/// is there, as its modules are the library's).
fn modules(src: &Path) -> Vec<Module> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let has_lib = src.join("lib.rs").is_file();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let mut parts: Vec<String> = rel
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let last = parts.pop().unwrap();
        let stem = last.trim_end_matches(".rs");
        if parts.is_empty() && (stem == "lib" || stem == "main") {
            if stem == "main" && has_lib {
                continue;
            }
        } else if stem != "mod" {
            parts.push(stem.to_string());
        }
        // `src/bin/*.rs` and the like are crates of their own: not modules of this one.
        if parts.first().is_some_and(|p| p == "bin") {
            continue;
        }
        out.push(Module {
            file: f,
            path: parts,
        });
    }
    out
}

/// `text` without comments, and with string and character literals emptied.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), else a lifetime.
            let end = if b.get(i + 1) == Some(&b'\\') {
                (i + 2..b.len().min(i + 12)).find(|&j| b[j] == b'\'')
            } else {
                let ch_len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 1 + ch_len)
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Punct(char),
}

fn tokens(code: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut it = code.char_indices().peekable();
    while let Some((_, c)) = it.next() {
        if c.is_alphabetic() || c == '_' {
            let mut s = String::from(c);
            while let Some(&(_, d)) = it.peek() {
                if d.is_alphanumeric() || d == '_' {
                    s.push(d);
                    it.next();
                } else {
                    break;
                }
            }
            out.push(Tok::Ident(s));
        } else if c == ':' && it.peek().is_some_and(|&(_, d)| d == ':') {
            it.next();
            out.push(Tok::Colons);
        } else if !c.is_whitespace() {
            out.push(Tok::Punct(c));
        }
    }
    out
}

/// The paths that `toks[i..]` starts (a `{...}` group gives one path per member), and the
/// index after them.
fn paths_at(toks: &[Tok], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::Colons) {
                    i += 1;
                    continue;
                }
                return (vec![prefix], i);
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                let mut out = Vec::new();
                while i < toks.len() && toks[i] != Tok::Punct('}') {
                    if toks[i] == Tok::Punct(',') {
                        i += 1;
                        continue;
                    }
                    let (inner, next) = paths_at(toks, i);
                    for p in inner {
                        let mut full = prefix.clone();
                        full.extend(p.into_iter().filter(|s| s != "self"));
                        out.push(full);
                    }
                    // Skip what the member path leaves (`as name`, `*`).
                    i = next.max(i + 1);
                    while i < toks.len() && toks[i] != Tok::Punct(',') && toks[i] != Tok::Punct('}')
                    {
                        i += 1;
                    }
                }
                return (out, i + 1);
            }
            _ => return (vec![prefix], i),
        }
    }
}

/// The module paths `file` (module `me`) names, made absolute within its crate.
fn references(code: &str, me: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let toks = tokens(code);
    let mut out = Vec::new();
    // Inline modules open at each brace depth, and whether a `pub use` is being read.
    let mut depth = 0usize;
    let mut inline: Vec<usize> = Vec::new();
    let mut reexport = false;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
                continue;
            }
            Tok::Punct('}') => {
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
                continue;
            }
            Tok::Punct(';') => {
                reexport = false;
                i += 1;
                continue;
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some(Tok::Ident(_)), Some(Tok::Punct('{'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push(depth + 1);
                }
                // `mod a;` is a declaration, not an import.
                i += 2;
                continue;
            }
            Tok::Ident(k) if k == "use" => {
                let back = i.checked_sub(1).map(|j| &toks[j]);
                let vis = matches!(back, Some(Tok::Ident(p)) if p == "pub")
                    || matches!(back, Some(Tok::Punct(')')));
                reexport = vis;
                i += 1;
                continue;
            }
            _ => {}
        }
        let after_path = i > 0 && matches!(toks[i - 1], Tok::Colons | Tok::Punct('.'));
        let Tok::Ident(first) = &toks[i] else {
            i += 1;
            continue;
        };
        let starts = first == "crate"
            || first == "super"
            || first == "self"
            || (inline.is_empty() && children.contains(first.as_str()));
        if after_path || !starts || toks.get(i + 1) != Some(&Tok::Colons) {
            i += 1;
            continue;
        }
        let (paths, next) = paths_at(&toks, i);
        i = next.max(i + 1);
        if reexport {
            continue;
        }
        for p in paths {
            let mut base: Vec<String> = me.to_vec();
            let mut segs = p.as_slice();
            let mut local = inline.len();
            if segs[0] == "crate" {
                base.clear();
                segs = &segs[1..];
            } else if segs[0] == "self" {
                segs = &segs[1..];
            } else if segs[0] == "super" {
                while segs.first().is_some_and(|s| s == "super") {
                    if local > 0 {
                        local -= 1;
                    } else {
                        base.pop();
                    }
                    segs = &segs[1..];
                }
            }
            base.extend(segs.iter().cloned());
            out.push(base);
        }
    }
    out
}

/// The pairs of files of one crate that import each other, as paths relative to `root`,
/// and whether one declares the other.
fn pairs(root: &Path, src: &Path) -> Vec<(String, String, bool)> {
    let mods = modules(src);
    let by_path: BTreeMap<Vec<String>, usize> = mods
        .iter()
        .enumerate()
        .map(|(k, m)| (m.path.clone(), k))
        .collect();
    let mut edges: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (k, m) in mods.iter().enumerate() {
        let text = std::fs::read_to_string(&m.file).unwrap();
        let children: BTreeSet<String> = mods
            .iter()
            .filter(|c| c.path.len() == m.path.len() + 1 && c.path.starts_with(&m.path))
            .map(|c| c.path.last().unwrap().clone())
            .collect();
        for full in references(&code_only(&text), &m.path, &children) {
            let target = (0..=full.len())
                .rev()
                .find_map(|n| by_path.get(&full[..n]).copied());
            if let Some(t) = target.filter(|&t| t != k) {
                edges.insert((k, t));
            }
        }
    }
    let name = |k: usize| {
        mods[k]
            .file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    edges
        .iter()
        .filter(|&&(a, b)| a < b && edges.contains(&(b, a)))
        .map(|&(a, b)| {
            let (pa, pb) = (&mods[a].path, &mods[b].path);
            let parent = (pa.len() + 1 == pb.len() && pb.starts_with(pa))
                || (pb.len() + 1 == pa.len() && pa.starts_with(pb));
            (name(a), name(b), parent)
        })
        .collect()
}

fn all_pairs() -> Vec<(String, String, bool)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().unwrap();
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    srcs.push(root.join("xtask/src"));
    srcs.sort();
    srcs.iter().flat_map(|s| pairs(&root, s)).collect()
}

#[test]
fn no_two_files_import_each_other() {
    let found = all_pairs();
    for (a, b, parent) in &found {
        let what = if *parent {
            "module and parent"
        } else {
            "import each other"
        };
        eprintln!("{what}: {a} <-> {b}");
    }
    let new: Vec<(&String, &String)> = found
        .iter()
        .filter(|(_, _, parent)| !parent)
        .filter(|(a, b, _)| !KNOWN.iter().any(|(x, y)| a == x && b == y))
        .map(|(a, b, _)| (a, b))
        .collect();
    assert!(
        new.is_empty(),
        "files that import each other (move what both need to where it belongs): {new:?}"
    );
}

#[test]
fn the_scan_sees_the_kinds_of_paths() {
    let me = vec!["a".to_string()];
    let children: BTreeSet<String> = ["kid".to_string()].into();
    let code = code_only(
        "use crate::b::{C, d::E};\nuse super::f::G; // crate::no\nfn x() { kid::y(); let s = \"crate::no\"; }\n\
         pub use crate::h::I;\nmod tests { use super::*; use crate::j; }\n",
    );
    let refs = references(&code, &me, &children);
    let s: Vec<String> = refs.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        s,
        ["b::C", "b::d::E", "f::G", "a::kid::y", "a", "j"],
        "{s:?}"
    );
}
