//! Operating the server: health probes, metrics and memory.

pub mod allocator;
pub mod health;
pub mod metrics;
