//! Process policy farm-apiserver opts into, measured on its own workload
//! (docs/performance.md): the allocator and its settings, and handing back
//! the memory only start-up used. The library imposes neither; `main.rs`
//! installs both.

pub mod allocator;
pub mod resident;
