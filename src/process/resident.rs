//! What stays resident once start-up is over.
//!
//! Without this, an idle server's RSS is mostly its own binary: pages of the
//! executable's code and read-only data, all file pages (measured:
//! docs/performance.md, "What stays resident after start-up"). Start-up runs
//! code from nearly every crate linked in (the options parser, TLS and
//! certificate code, OpenAPI and discovery documents, the kube client and the
//! first lists of the informers, ...) and the kernel maps file pages at least
//! 64 KiB at a time around a fault (the whole folio where the page cache
//! holds a large one), so most of the code is mapped though little of it
//! runs again.
//!
//! [`startup_over`] unmaps the executable's read-only segments (code and
//! constants, never written) with `MADV_DONTNEED`: the pages stay in the page
//! cache, so the next use of any of them is a minor fault that maps them
//! again, and what is resident from then on is what the server runs. It also
//! hands the heap's free pages back ([`super::allocator::release_free_memory`]).
//! It runs once, when the server is first ready (all readiness checks pass;
//! the binary registers it with the library's `Setup::on_first_ready`):
//! by then every informer has listed, and the code a request needs is mapped
//! in again by the first few requests (a few hundred minor faults, once).
//!
//! A page of those segments that is not the file's any more (a debugger's
//! breakpoint or a uprobe written into the code, a text relocation) is left
//! mapped: `/proc/self/pagemap` tells file pages from private copies
//! (swapped out or not), and only runs of file pages or pages not mapped at
//! all are released, since releasing a private copy would drop what was
//! written into it.

use std::sync::Once;

/// Ends start-up, once per process: hands back the heap's free pages and
/// unmaps the executable's code and constants (see the module). Later calls
/// do nothing.
pub fn startup_over() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = rss_kib();
        super::allocator::release_free_memory();
        let released = release_binary_pages();
        tracing::debug!(
            rss_before_kib = before,
            rss_after_kib = rss_kib(),
            released_kib = released / 1024,
            "start-up over"
        );
    });
}

/// The process's resident set in KiB, for the log (0 where unknown).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
            line.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or(0)
}

/// Unmaps the executable's read-only segments, page runs that are the file's
/// only; the bytes unmapped (mapped or not).
#[cfg(target_os = "linux")]
fn release_binary_pages() -> usize {
    use std::io::{Read, Seek, SeekFrom};

    // SAFETY: sysconf only reads a constant of the system.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => return 0,
    };
    let segments = read_only_segments(page);
    let Ok(mut pagemap) = std::fs::File::open("/proc/self/pagemap") else {
        tracing::debug!("no /proc/self/pagemap: start-up pages kept");
        return 0;
    };
    let mut released = 0;
    for (start, end) in segments {
        let pages = (end - start) / page;
        let mut entries = vec![0u8; pages * 8];
        if pagemap.seek(SeekFrom::Start((start / page * 8) as u64)).is_err()
            || pagemap.read_exact(&mut entries).is_err()
        {
            tracing::debug!("/proc/self/pagemap unreadable: start-up pages kept");
            return released;
        }
        // Bit 63: present; bit 62: swapped out (only a private copy can be);
        // bit 61: a file page (a private copy has it clear).
        let releasable = |i: usize| {
            let entry = u64::from_le_bytes(entries[i * 8..i * 8 + 8].try_into().unwrap_or_default());
            let (present, swapped, file) = (entry >> 63 & 1 == 1, entry >> 62 & 1 == 1, entry >> 61 & 1 == 1);
            if present {
                file
            } else {
                !swapped
            }
        };
        let mut i = 0;
        while i < pages {
            if !releasable(i) {
                i += 1;
                continue;
            }
            let run = i;
            while i < pages && releasable(i) {
                i += 1;
            }
            let (at, len) = (start + run * page, (i - run) * page);
            // SAFETY: [at, at + len) lies in a read-only segment of the
            // executable, mapped from its file and never written (each page
            // checked above), so a later access maps the same bytes again.
            if unsafe { libc::madvise(at as *mut libc::c_void, len, libc::MADV_DONTNEED) } == 0 {
                released += len;
            }
        }
    }
    released
}

#[cfg(not(target_os = "linux"))]
fn release_binary_pages() -> usize {
    0
}

/// The executable's loadable segments that are not writable (code, constants),
/// as address ranges shrunk inward to whole pages.
#[cfg(target_os = "linux")]
fn read_only_segments(page: usize) -> Vec<(usize, usize)> {
    struct Found {
        page: usize,
        ranges: Vec<(usize, usize)>,
    }
    unsafe extern "C" fn first_object(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info, and data is the Found below.
        let (info, found) = unsafe { (&*info, &mut *data.cast::<Found>()) };
        for i in 0..usize::from(info.dlpi_phnum) {
            // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
            let header = unsafe { &*info.dlpi_phdr.add(i) };
            if header.p_type != libc::PT_LOAD || header.p_flags & libc::PF_W != 0 {
                continue;
            }
            let start = info.dlpi_addr as usize + header.p_vaddr as usize;
            let end = start + header.p_filesz as usize;
            let (start, end) = (start.next_multiple_of(found.page), end / found.page * found.page);
            if end > start {
                found.ranges.push((start, end));
            }
        }
        // The first object reported is the executable itself: stop there.
        1
    }
    let mut found = Found { page, ranges: Vec::new() };
    // SAFETY: the callback reads what it is given and writes only `found`.
    unsafe {
        libc::dl_iterate_phdr(Some(first_object), (&mut found as *mut Found).cast());
    }
    found.ranges
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn code_and_constants_run_on_after_their_pages_are_released() {
        let segments = read_only_segments(4096);
        assert!(!segments.is_empty(), "the executable has read-only segments");
        assert!(segments.iter().all(|(start, end)| start % 4096 == 0 && end % 4096 == 0 && start < end));
        assert!(release_binary_pages() > 0, "some pages released");
        // Code and constants are mapped in again from the file as they are used.
        let text: String = ["start", "up"].join("-");
        assert_eq!(format!("{text} {}", 42), "start-up 42");
        assert!(rss_kib() > 0);
    }
}
