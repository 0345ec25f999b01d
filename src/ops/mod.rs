//! Operating the server: health probes and metrics.

pub mod health;
pub mod metrics;
