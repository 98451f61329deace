//! Renderers of `tma stat`, `tma events` and `tma list` results, on `tma-render` primitives.

pub mod counts;
pub mod doc;
pub mod event_list;
pub mod events;
pub mod list;
pub mod metric_list;
pub mod plot;
pub mod tree;
