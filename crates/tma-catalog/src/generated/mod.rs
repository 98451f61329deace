//! Generated tables (placeholder until `cargo xtask gen-tables` runs).
use crate::types::Model;
pub static MODELS: &[&Model] = &[];
pub static CPUID_ROWS: &[(&str, &str)] = &[];
