//! One module per subcommand: clap `Args` -> plain config -> library call -> rendering.
pub mod args;
pub mod bench;
pub mod completions;
pub mod demo;
pub mod diff;
pub mod doctor;
pub mod events;
pub mod kvm;
pub mod list;
pub mod locate;
pub mod man;
pub mod report;
pub mod serve;
pub mod sha256sum;
pub mod stat;
pub mod workload;
