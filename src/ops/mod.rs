//! Operating the server: health probes, metrics, memory and open files.

pub mod allocator;
pub mod health;
pub mod metrics;
pub mod open_files;
