//! The process's allocator: glibc's malloc, with two settings (other C
//! libraries: nothing here). This is the one place the choice is made; the
//! README's "Speed" section has the measurements it was made by (glibc as
//! it was, glibc with a top pad or a trim threshold, jemalloc and mimalloc,
//! each on GET/LIST/create speed and on idle and per-FarmPod memory).
//!
//! One arena. glibc gives each new thread its own arena, up to eight per
//! core, and an arena keeps what it frees as resident memory. The Pod watcher
//! decodes upstream lists 500 Pods at a time on whichever runtime thread polls
//! it, so every arena it touched kept megabytes of freed pages between the
//! FarmPods it stores. One arena (the main heap) holds them all where
//! `malloc_trim` can return them: the FarmPods benchmark measured 49.6 MiB
//! instead of 62.8 MiB after syncing 10,000 Pods. Small allocations stay
//! thread-local in glibc's per-thread caches, so the arena's lock is taken
//! only for larger blocks.
//!
//! A top pad. With one arena, every free that left more than 128 KiB free at
//! the top of the heap (the trim threshold) gave it back to the system
//! (`brk`), and the next request's allocations faulted the pages in again:
//! page faults, zeroing, and TLB shootdowns across every thread, on every
//! request. Over half the server's CPU was in the kernel, and a GET of one
//! Llama ran at a third of the rate it had before the arena setting. glibc
//! keeps `M_TOP_PAD` bytes beyond what it needs whenever it grows or trims
//! the heap, so a heap that goes up and down by a request's worth stays
//! resident; the pad is only reserved address space until touched, so an idle
//! server's RSS does not grow. The periodic [`release_free_memory`] (after a
//! full Pod list) still hands everything free back, pad included.
//!
//! Setting `M_TOP_PAD` also turns off glibc's sliding mmap threshold, so
//! blocks of 128 KiB and more are always mapped and unmapped on their own
//! (a LIST body, a decoded Pod page): their pages never stay behind in the
//! heap between large lists.

/// mimalloc as the global allocator (the `mimalloc` feature; its
/// `mimalloc-v2` builds mimalloc 2.x instead of 3.x).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's options set by [`configure`]: (option, its environment
/// variable, value). A variable set in the environment wins, as
/// `GLIBC_TUNABLES` does for glibc: mimalloc reads it at start.
#[cfg(feature = "mimalloc")]
const MIMALLOC_OPTIONS: &[(libmimalloc_sys::mi_option_t, &str, std::os::raw::c_long)] = &[
    // mi_option_purge_delay: hand freed pages back at once, not after 10 ms
    // (2.x) or 1 s (3.x).
    (15, "MIMALLOC_PURGE_DELAY", 0),
    // mi_option_arena_eager_commit: commit an arena's pages as they are used.
    (4, "MIMALLOC_ARENA_EAGER_COMMIT", 0),
];

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
    #[cfg(feature = "mimalloc")]
    for &(option, variable, value) in MIMALLOC_OPTIONS {
        if std::env::var_os(variable).is_none() {
            // SAFETY: sets one of mimalloc's option values.
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
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
