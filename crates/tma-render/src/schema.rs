//! How tma names its documents, and the names it used before.
//!
//! **The convention** (schema names 2026-11): `tma.<command>[.<document>]`, all lowercase;
//! the parts are separated by dots, and a part of several words joins them with `-`, as the
//! command-line flags do: `tma.stat`, `tma.stat.software`, `tma.diff.profile`,
//! `tma.doctor.verify-report`. Enumerated values inside documents (units, roles, node
//! kinds) are `snake_case` words (`percent_slots`), the same in JSON and CSV.
//!
//! **The change is versioned.** Every document whose name or values changed took the next
//! `schema_version`; a reader accepts both its versions and both names: [`canonical`] maps an
//! old name to its new one (and [`crate::recognize()`] reports documents by their new name),
//! and the value types read their old spellings through serde aliases.

/// Names written before the convention, with the name that replaced each.
pub const RENAMED: &[(&str, &str)] = &[
    ("tma.stat_software", "tma.stat.software"),
    ("tma.diff-profile", "tma.diff.profile"),
    ("tma.kvm-memory", "tma.kvm.memory"),
    ("tma.list-events", "tma.list.events"),
    ("tma.list-metrics", "tma.list.metrics"),
    ("tma.doctor.verify_report", "tma.doctor.verify-report"),
];

/// The current name of a schema: `name` itself, or what replaced it.
pub fn canonical(name: &str) -> &str {
    RENAMED
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name, |(_, new)| new)
}

/// Whether `name` follows the convention: `tma.` then dot-separated parts of lowercase
/// ASCII words joined by single `-`.
pub fn follows_convention(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("tma.") else {
        return false;
    };
    rest.split('.').all(|part| {
        !part.is_empty()
            && part
                .split('-')
                .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
    })
}

/// Whether a reader of versions `oldest..=newest` reads `found`.
pub fn reads_version(found: u32, oldest: u32, newest: u32) -> bool {
    (oldest..=newest).contains(&found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_names_map_to_conforming_new_ones() {
        // (Some old names are well-formed words, `tma.diff-profile`, but named the document
        // as a word of the command's name instead of as its own part.)
        for (old, new) in RENAMED {
            assert_ne!(old, new);
            assert!(follows_convention(new), "{new}");
            assert_eq!(canonical(old), *new);
            assert_eq!(canonical(new), *new);
        }
        assert_eq!(canonical("tma.stat"), "tma.stat");
    }

    #[test]
    fn convention() {
        for ok in ["tma.stat", "tma.doctor.verify-report", "tma.list.metrics"] {
            assert!(follows_convention(ok), "{ok}");
        }
        for bad in [
            "tma", "tma.", "stat", "tma.Stat", "tma.a_b", "tma.a--b", "tma..x", "tma.a-",
        ] {
            assert!(!follows_convention(bad), "{bad}");
        }
    }
}
