//! Load and hostile input against the real binary: random requests, floods
//! of watches, connection limits (slowloris, idle, header sizes, the
//! connection cap) and a short run of the soak fuzzer.

mod connection_limits;
mod floods;
mod robustness;
mod soak_short;
