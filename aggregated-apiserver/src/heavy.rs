//! Long computations kept off the async workers.
//!
//! One request can cost a second of CPU: a 2 MB merge patch of 60,000
//! labels, an apply as wide, a JSON patch copying up to kube's 3 MiB limit, a
//! YAML or Table answer of a large list. Run on an async worker, it holds
//! that worker for all of it: the tasks queued there wait, timers included,
//! and so does the task it woke last, which tokio keeps in the worker's LIFO
//! slot where no other worker can steal it. For a request read over HTTP/2
//! that task is the connection itself (reading the body wakes it to send
//! window updates), so every other stream of the connection stalls until
//! the computation ends: the fuzzer saw 36 requests wait past 75 s that way.
//!
//! [`tokio::task::block_in_place`] first hands the worker's queue, LIFO slot
//! included, to another thread, and the kernel then shares the cores among
//! the computation and everything else. It costs ~9 µs a call here, so work
//! estimated below [`HEAVY_BYTES`] (which finishes in about that time or
//! less) runs in place.

use std::cell::Cell;
use std::future::Future;
use std::sync::LazyLock;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Semaphore;

/// Bytes of input (request body, stored object, answer to convert) from
/// which a request's computation is run off the async workers: ~16 KiB of
/// the widest patch costs ~7 ms of CPU, a thousand times the hand-off.
pub const HEAVY_BYTES: usize = 16 * 1024;

thread_local! {
    /// Set on the thread of a computation taking its turn: work nested in it
    /// (a write's store step inside the write) is part of that turn.
    static IN_TURN: Cell<bool> = const { Cell::new(false) };
}

/// Whether a computation over `input_bytes` is moved off the workers here:
/// only on a multi-threaded runtime (a current-thread one has no other
/// worker to hand its queue to, and tokio refuses to block it), and not
/// again inside a computation that already was.
fn off_the_workers(input_bytes: usize) -> bool {
    input_bytes >= HEAVY_BYTES
        && !IN_TURN.get()
        && Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Large computations that may run at once: one per core. More would gain
/// no speed, and each holds what its request made it allocate (~50 MiB for
/// a JSON patch that copies to the limit, ~230 MiB for a 3 MiB wide merge
/// patch), so the bound on memory is this many of them, not one per
/// admitted request (200 mutating by default). The others wait their turn,
/// within their request's deadline, holding only their body.
static HEAVY_AT_ONCE: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())));

/// Awaits `work`, off the async workers when its input is large, and then
/// only while fewer than `HEAVY_AT_ONCE` others run. The thread that
/// computes also waits for its I/O (a store write), which the runtime's
/// drivers still serve. The turn is waited for asynchronously, so a request
/// waiting costs no thread and its deadline still applies.
pub async fn run_async<F: Future>(input_bytes: usize, work: F) -> F::Output {
    if !off_the_workers(input_bytes) {
        return work.await;
    }
    // The semaphore is never closed; without a permit the work still runs.
    let _turn = HEAVY_AT_ONCE.acquire().await.ok();
    tokio::task::block_in_place(|| {
        let _in_turn = InTurn::enter();
        Handle::current().block_on(work)
    })
}

/// Marks this thread as computing in a turn until dropped (a panic too: the
/// thread may go back to the pool and run a worker later).
struct InTurn;

impl InTurn {
    fn enter() -> InTurn {
        IN_TURN.set(true);
        InTurn
    }
}

impl Drop for InTurn {
    fn drop(&mut self) {
        IN_TURN.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_runs_large_work_in_place() {
        // block_in_place would panic here; the work must still run.
        assert_eq!(run_async(HEAVY_BYTES * 10, async { 8 }).await, 8);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn large_work_hands_the_worker_queue_on() {
        // The heavy task blocks until the tasks spawned after it have run: on
        // the only worker, they run only if its queue was handed to another
        // thread (else the wait times out and the test fails).
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let heavy =
            tokio::spawn(run_async(
                HEAVY_BYTES,
                async move { rx.recv_timeout(std::time::Duration::from_secs(20)).is_ok() },
            ));
        tokio::task::yield_now().await;
        let others = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.send(()).is_ok()
        });
        assert!(others.await.unwrap_or(false));
        assert!(heavy.await.unwrap_or(false), "the worker's other tasks waited for the heavy one");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nested_large_work_is_part_of_its_turn() {
        // More outer computations than turns, each with an inner one: if the
        // inner ones waited for turns of their own, the outer ones would hold
        // every turn and wait forever.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let all = (0..cores * 2 + 1).map(|i| {
            tokio::spawn(run_async(HEAVY_BYTES, async move {
                tokio::task::yield_now().await;
                run_async(HEAVY_BYTES, async move { i }).await
            }))
        });
        let done = tokio::time::timeout(std::time::Duration::from_secs(20), futures::future::join_all(all)).await;
        let sum: usize = done.expect("nested turns deadlocked").into_iter().map(|r| r.unwrap_or(0)).sum();
        assert_eq!(sum, (0..cores * 2 + 1).sum::<usize>());
    }
}
