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
//! the computation ends (measured: docs/performance.md, "Heavy work off the
//! async workers").
//!
//! [`tokio::task::block_in_place`] first hands the worker's queue, LIFO slot
//! included, to another thread; the computation then runs on a thread of
//! its own at a lower scheduling priority, so that under a flood of large
//! computations the kernel still gives a light request's worker a core at
//! once. It costs some tens of microseconds a call, so work estimated below
//! [`HEAVY_BYTES`] (which finishes in about that time or less) runs in place.
//!
//! # Turns are shared fairly, and end at the request's deadline
//!
//! The turns are handed out per user, round robin ([`Turns`]), as kube's API
//! Priority and Fairness queues each flow apart: a user with forty large
//! patches waiting does not put a forty-first user's one behind all of them,
//! it waits for at most one turn per other waiting user. The user is the
//! flow the in-flight filter names for the request ([`with_flow`]).
//!
//! A computation cannot be cancelled from outside (its thread is busy, and
//! the request's own deadline timer is polled by that same thread), so the
//! request's deadline ([`with_deadline`]) goes with it onto its thread, and
//! the long steps ask [`check_deadline`] between their pieces: a JSON patch
//! between operations, a write before it reaches the store, an answer
//! before it is converted again. Past it they give up with kube's 504
//! Timeout, the write not made, and the turn goes to the next request.

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Instant;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::oneshot;

/// Bytes of input (request body, stored object, answer to convert) from
/// which a request's computation is run off the async workers: at this size
/// the widest patch costs about a thousand times the hand-off (measured:
/// docs/performance.md, "Heavy work off the async workers").
pub const HEAVY_BYTES: usize = 16 * 1024;

thread_local! {
    /// Set on the thread of a computation taking its turn: work nested in it
    /// (a write's store step inside the write) is part of that turn.
    static IN_TURN: Cell<bool> = const { Cell::new(false) };
    /// The deadline of the request whose computation this thread runs.
    static TURN_DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

tokio::task_local! {
    /// Who a request's computations queue as (see [`with_flow`]).
    static FLOW: Option<Arc<str>>;
    /// When a request must have its answer (see [`with_deadline`]).
    static DEADLINE: Option<Instant>;
}

/// Runs a request's handling as `flow`'s (its user's; None shares one flow
/// among requests without an identity): its large computations take turns
/// fairly with other flows'.
pub fn with_flow<F: Future>(flow: Option<Arc<str>>, request: F) -> impl Future<Output = F::Output> {
    // Not an `async fn`: its future would hold `request` twice (as the
    // argument and inside the scope), and this wraps a request's whole handling.
    FLOW.scope(flow, request)
}

/// Runs a request's handling under its `deadline`, which its large
/// computations check between their pieces.
pub fn with_deadline<F: Future>(deadline: Option<Instant>, request: F) -> impl Future<Output = F::Output> {
    // Not an `async fn`, as `with_flow`.
    DEADLINE.scope(deadline, request)
}

/// Whether the request whose computation runs on this thread has passed its
/// deadline (never for work run in place on an async worker: it is short,
/// and its request's timer still runs).
pub fn past_deadline() -> bool {
    TURN_DEADLINE.get().is_some_and(|deadline| Instant::now() >= deadline)
}

/// The computation's request is past its deadline: answered as kube's 504
/// Timeout (`From<DeadlineExceeded> for ApiError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineExceeded;

/// Err once the deadline of the computation on this thread has passed.
pub fn check_deadline() -> Result<(), DeadlineExceeded> {
    match past_deadline() {
        true => Err(DeadlineExceeded),
        false => Ok(()),
    }
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
static TURNS: LazyLock<Arc<Turns>> =
    LazyLock::new(|| Turns::new(std::thread::available_parallelism().map_or(2, |n| n.get())));

/// Awaits `work`, off the async workers when its input is large, and then
/// only in a turn ([`TURNS`]). The thread that computes also waits for its
/// I/O (a store write), which the runtime's drivers still serve. The turn is
/// waited for asynchronously, so a request waiting costs no thread and its
/// deadline still applies.
pub async fn run_async<F>(input_bytes: usize, work: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if !off_the_workers(input_bytes) {
        return work.await;
    }
    let flow = FLOW.try_with(Clone::clone).ok().flatten();
    let deadline = DEADLINE.try_with(|deadline| *deadline).ok().flatten();
    let _turn = TURNS.take(flow).await;
    let handle = Handle::current();
    tokio::task::block_in_place(|| {
        on_a_background_thread(|| {
            let _in_turn = InTurn::enter(deadline);
            handle.block_on(work)
        })
    })
}

/// Runs `work`, a synchronous computation over `input_bytes`, off the async
/// workers when it is large ([`tokio::task::block_in_place`]), but without a
/// turn: for computations a synchronous step cannot wait a turn for (a
/// stored object converted to the version a reader asked for).
pub fn run_in_place<T: Send>(input_bytes: usize, work: impl FnOnce() -> T + Send) -> T {
    if off_the_workers(input_bytes) {
        tokio::task::block_in_place(|| on_a_background_thread(work))
    } else {
        work()
    }
}

/// How much lower than the async workers a computation's thread is
/// scheduled (a nice value): under a flood of large computations, the
/// kernel still gives a light request's worker the core at once.
const BACKGROUND_NICENESS: libc::c_int = 10;

/// Runs `work` on a thread of its own whose scheduling priority is lowered
/// ([`BACKGROUND_NICENESS`]), and waits for it (a panic in it goes on in
/// the caller). A thread per computation: a lowered priority cannot be
/// raised again without privileges, so these threads never become async
/// workers, and a computation large enough to be moved costs a thousand
/// times the thread's start.
fn on_a_background_thread<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    let work = Mutex::new(Some(work));
    let take = || work.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    std::thread::scope(|scope| {
        let computing = std::thread::Builder::new().name("heavy".into()).spawn_scoped(scope, || {
            lower_priority();
            take().map(|work| work())
        });
        let computed = match computing {
            Ok(thread) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(e) => {
                tracing::warn!(error = %e, "no thread for a large computation: it runs on an async worker");
                None
            }
        };
        // Not started: computed here, at the workers' priority.
        computed.unwrap_or_else(|| match take() {
            Some(work) => work(),
            None => unreachable!("a thread that took the computation returns its result"),
        })
    })
}

/// Lowers this thread's scheduling priority (Linux nice values are per thread).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread's id only changes its nice value.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICENESS);
    }
}

/// Marks this thread as computing in a turn, for a request with `deadline`,
/// until dropped (a panic too: the thread may go back to the pool and run a
/// worker later).
struct InTurn;

impl InTurn {
    fn enter(deadline: Option<Instant>) -> InTurn {
        IN_TURN.set(true);
        TURN_DEADLINE.set(deadline);
        InTurn
    }
}

impl Drop for InTurn {
    fn drop(&mut self) {
        IN_TURN.set(false);
        TURN_DEADLINE.set(None);
    }
}

/// A fixed number of turns, handed to waiting flows round robin: each flow
/// waits in its own line, and a freed turn goes to the first request of the
/// next flow in order, which then goes to the back. Within a flow, first
/// come, first served.
pub struct Turns {
    lines: Mutex<Lines>,
}

struct Lines {
    /// Turns no one holds; never more than zero while anyone waits.
    free: usize,
    /// Flows with requests waiting, the next to be served first.
    waiting: VecDeque<Line>,
}

/// One flow's waiting requests, each to be handed its turn.
struct Line {
    flow: Option<Arc<str>>,
    requests: VecDeque<oneshot::Sender<Turn>>,
}

/// A turn held; dropping it hands it on.
pub struct Turn {
    /// None once handed on by other means.
    turns: Option<Arc<Turns>>,
}

impl Turns {
    pub fn new(at_once: usize) -> Arc<Self> {
        Arc::new(Self { lines: Mutex::new(Lines { free: at_once, waiting: VecDeque::new() }) })
    }

    fn lock(&self) -> MutexGuard<'_, Lines> {
        // Counts and lines only: a poisoned lock still holds consistent ones.
        self.lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A turn for one of `flow`'s requests, waited for in the flow's line.
    /// Dropping the future (the request's deadline) leaves the line.
    pub async fn take(self: &Arc<Self>, flow: Option<Arc<str>>) -> Option<Turn> {
        let handed = {
            let mut lines = self.lock();
            if lines.free > 0 && lines.waiting.is_empty() {
                lines.free -= 1;
                return Some(Turn { turns: Some(self.clone()) });
            }
            let (hand, handed) = oneshot::channel();
            match lines.waiting.iter_mut().find(|line| line.flow == flow) {
                Some(line) => {
                    // Requests gone (past their deadline) leave the line here
                    // too, so a flow's line holds no more than it has waiting.
                    line.requests.retain(|request| !request.is_closed());
                    line.requests.push_back(hand);
                }
                None => lines.waiting.push_back(Line { flow, requests: VecDeque::from([hand]) }),
            }
            handed
        };
        // The turns are never dropped with requests waiting; were they, the
        // work would still run, only not in a fair turn.
        handed.await.ok()
    }

    /// Hands a freed turn to the next flow's first request still waiting,
    /// or keeps it free.
    fn hand_on(self: &Arc<Self>) {
        loop {
            let next = {
                let mut lines = self.lock();
                loop {
                    let Some(mut line) = lines.waiting.pop_front() else {
                        lines.free += 1;
                        return;
                    };
                    let request = line.requests.pop_front();
                    if !line.requests.is_empty() {
                        lines.waiting.push_back(line);
                    }
                    if let Some(request) = request.filter(|r| !r.is_closed()) {
                        break request;
                    }
                }
            };
            match next.send(Turn { turns: Some(self.clone()) }) {
                Ok(()) => return,
                // Gone between the check and the hand-off: the turn is still
                // this call's to hand on, not its drop's (which would recurse).
                Err(mut turn) => drop(turn.turns.take()),
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(turns) = self.turns.take() {
            turns.hand_on();
        }
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

    impl Turns {
        fn waiting(&self) -> usize {
            self.lock().waiting.iter().map(|line| line.requests.len()).sum()
        }
    }

    /// Queues one request of `flow` for a turn, and returns once it waits in
    /// line; the request notes its flow in `served` when its turn comes.
    async fn queue(turns: &Arc<Turns>, flow: &str, served: &Arc<Mutex<Vec<String>>>) -> tokio::task::JoinHandle<()> {
        let before = turns.waiting();
        let task = tokio::spawn({
            let (turns, flow, served) = (turns.clone(), flow.to_string(), served.clone());
            async move {
                let _turn = turns.take(Some(Arc::from(flow.as_str()))).await;
                served.lock().unwrap().push(flow);
            }
        });
        while turns.waiting() == before {
            tokio::task::yield_now().await;
        }
        task
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn freed_turns_go_round_robin_across_flows() {
        let turns = Turns::new(1);
        let held = turns.take(Some(Arc::from("busy"))).await;
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for _ in 0..5 {
            tasks.push(queue(&turns, "busy", &served).await);
        }
        tasks.push(queue(&turns, "calm", &served).await);
        tasks.push(queue(&turns, "other", &served).await);
        drop(held);
        for task in tasks {
            task.await.unwrap();
        }
        // First come first served would have put calm and other after busy's five.
        assert_eq!(*served.lock().unwrap(), ["busy", "calm", "other", "busy", "busy", "busy", "busy"]);
        assert!(turns.take(None).await.is_some(), "the turn is free again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_that_stops_waiting_gives_its_place_up() {
        let turns = Turns::new(1);
        let held = turns.take(None).await;
        let gave_up = tokio::time::timeout(std::time::Duration::from_millis(20), turns.take(Some(Arc::from("late"))));
        assert!(gave_up.await.is_err(), "no turn was free");
        let served = Arc::new(Mutex::new(Vec::new()));
        let next = queue(&turns, "next", &served).await;
        drop(held);
        next.await.unwrap();
        assert_eq!(*served.lock().unwrap(), ["next"]);
        assert!(turns.take(None).await.is_some(), "the request that gave up holds nothing");
        assert_eq!(turns.waiting(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_computation_knows_its_deadline() {
        let past = Instant::now();
        let cut = with_deadline(Some(past), run_async(HEAVY_BYTES, async { check_deadline() })).await;
        assert_eq!(cut, Err(DeadlineExceeded));
        let later = Instant::now() + std::time::Duration::from_secs(60);
        assert!(with_deadline(Some(later), run_async(HEAVY_BYTES, async { check_deadline() })).await.is_ok());
        // Small work runs in place, where its request's own timer still runs.
        assert!(with_deadline(Some(past), run_async(10, async { check_deadline() })).await.is_ok());
        assert!(!past_deadline(), "the deadline does not outlive its computation");
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
