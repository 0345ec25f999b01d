//! The process's allocator: glibc's malloc, with two settings (other C
//! libraries: nothing here), or mimalloc with the `mimalloc` feature. This
//! is the one place the choice is made; the binary installs [`GLOBAL`]. The
//! choice and the settings rest on measurements of GET/LIST/create speed and
//! of idle and per-FarmPod memory (measured: docs/benchmarks.md, "The
//! allocator, chosen by measurement"; docs/performance.md, "The allocator,
//! measured again" and "The process allocator's settings").
//!
//! One arena. glibc gives each new thread its own arena, up to eight per
//! core, and an arena keeps what it frees as resident memory. The Pod watcher
//! decodes upstream lists 500 Pods at a time on whichever runtime thread polls
//! it, so every arena it touches would keep megabytes of freed pages between
//! the FarmPods it stores. One arena (the main heap) holds them all where
//! `malloc_trim` can return them. Small allocations stay thread-local in
//! glibc's per-thread caches, so the arena's lock is taken only for larger
//! blocks.
//!
//! A top pad. With one arena, every free that leaves more than 128 KiB free
//! at the top of the heap (the trim threshold) gives it back to the system
//! (`brk`), and the next request's allocations fault the pages in again:
//! page faults, zeroing, and TLB shootdowns across every thread, on every
//! request. glibc keeps `M_TOP_PAD` bytes beyond what it needs whenever it
//! grows or trims the heap, so a heap that goes up and down by a request's
//! worth stays resident; the pad is only reserved address space until
//! touched, so an idle server's RSS does not grow. The periodic
//! [`release_free_memory`] (after a full Pod list) still hands everything
//! free back, pad included.
//!
//! Setting `M_TOP_PAD` also turns off glibc's sliding mmap threshold, so
//! blocks of 128 KiB and more are always mapped and unmapped on their own
//! (a LIST body, a decoded Pod page): their pages never stay behind in the
//! heap between large lists.
//!
//! mimalloc is built with the `mimalloc` feature (mimalloc 3.x; with
//! `mimalloc-v2`, 2.x), not by default: no setting of it is both faster and
//! as small as glibc with these settings. The C library is built without
//! transparent huge pages (`no_thp`): mimalloc otherwise advises them for
//! its arenas, which grows an idle server's memory. Its options are read
//! from `MIMALLOC_*` variables when the process starts.

/// The process's global allocator, installed by the binary
/// (`#[global_allocator] static GLOBAL: Global = GLOBAL;` in its main.rs)
/// rather than here, so that a program linking this library can install its
/// own (benches/farmpod_memory.rs counts allocations).
#[cfg(feature = "mimalloc")]
pub type Global = mimalloc::MiMalloc;
/// The process's global allocator (see above): glibc's malloc.
#[cfg(not(feature = "mimalloc"))]
pub type Global = std::alloc::System;
/// The value of [`Global`] to install.
#[cfg(feature = "mimalloc")]
pub const GLOBAL: Global = mimalloc::MiMalloc;
/// The value of [`Global`] to install.
#[cfg(not(feature = "mimalloc"))]
pub const GLOBAL: Global = std::alloc::System;

/// Bytes glibc keeps at the top of the heap when it grows or trims it.
#[cfg(all(not(feature = "mimalloc"), target_os = "linux", target_env = "gnu"))]
const TOP_PAD: libc::c_int = 16 << 20;

/// Applies the allocator settings. Call before any thread is started: a
/// thread is bound to an arena at its first allocation.
///
/// A setting named in `GLIBC_TUNABLES` wins over ours (`glibc.malloc.arena_max`
/// over the one arena, `glibc.malloc.top_pad` or `glibc.malloc.trim_threshold`
/// over the top pad): glibc reads the variable at start, before this runs, and
/// whoever set it meant it. The benchmarks compare settings that way.
pub fn configure() {
    #[cfg(all(not(feature = "mimalloc"), target_os = "linux", target_env = "gnu"))]
    {
        let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        let set = |name: &str| tunables.split(':').any(|t| t.trim().starts_with(name));
        // SAFETY: mallopt only changes malloc tuning parameters.
        unsafe {
            if !set("glibc.malloc.arena_max=") {
                libc::mallopt(libc::M_ARENA_MAX, 1);
            }
            if !set("glibc.malloc.top_pad=") && !set("glibc.malloc.trim_threshold=") {
                libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
            }
        }
    }
}

/// Hands the heap pages freed since the last call back to the system. Called
/// after bulk frees (a full Pod list passes through megabytes of decoded
/// pages that are freed at its end); glibc otherwise keeps them resident.
pub fn release_free_memory() {
    #[cfg(feature = "mimalloc")]
    // SAFETY: mi_collect only frees mimalloc's own unused memory.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(not(feature = "mimalloc"), target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it takes glibc's arena locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
