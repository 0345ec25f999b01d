//! The modes that wrap a backend as k8s.io/apiserver's do (`pkg/server/options/audit.go`,
//! `plugin/pkg/audit/buffered`):
//!
//! - `blocking-strict`: the backend itself; a failure is reported to the caller;
//! - `blocking`: the backend, its failures counted and logged but reported as success;
//!
//!   in both, a backend that writes where it is called (the log) writes the
//!   events that reach it at the same moment together ([`super::group`]);
//! - `batch`: a bounded buffer the request only ever tries to put into; a
//!   worker takes batches of up to `max_batch_size` events (or what came within
//!   `max_batch_wait`), throttled, and hands them to the backend. A full buffer
//!   drops the event (counted as plugin `buffered`, logged): memory stays bounded
//!   and requests never wait, whatever the backend does.
//!
//! One difference from kube: kube's webhook batches are each sent from a
//! goroutine of their own, as many at once as the throttle lets through, so a
//! slow receiver accumulates goroutines without bound. Here at most
//! [`MAX_BATCHES_IN_FLIGHT`] are sent at once; the rest wait in the buffer,
//! which then drops.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::backend::{with_encoded_line, Backend, Handed, LineBackend};
use super::encode::EventRef;
use super::event::Event;
use super::group::Grouped;
use super::metrics::{AuditMetrics, Impacted};
use super::options::{BatchConfig, Mode};
use super::ticket::Ticket;

/// Batches of an asynchronous backend (the webhook) sent at once, at most.
pub const MAX_BATCHES_IN_FLIGHT: usize = 4;

/// The events of a backend in `mode`.
pub fn with_mode(
    backend: Arc<dyn LineBackend>,
    mode: Mode,
    batch: BatchConfig,
    asynchronous: bool,
    metrics: AuditMetrics,
) -> Arc<dyn Backend> {
    let blocking = |backend: Arc<dyn LineBackend>| -> Arc<dyn Backend> {
        if backend.writes_now() {
            Arc::new(Grouped::new(backend, metrics.clone()))
        } else {
            backend
        }
    };
    match mode {
        Mode::BlockingStrict => blocking(backend),
        Mode::Blocking => Arc::new(IgnoreErrors(blocking(backend))),
        Mode::Batch => Arc::new(Buffered::start(backend, batch, asynchronous, metrics)),
    }
}

/// `blocking`: failures are the backend's to count and log; the request carries on.
struct IgnoreErrors(Arc<dyn Backend>);

#[async_trait::async_trait]
impl Backend for IgnoreErrors {
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        self.0.process_events(events).await;
        true
    }

    fn process_now(&self, event: &EventRef<'_>) -> Option<Handed> {
        self.0.process_now(event).map(Handed::ignoring_errors)
    }

    fn at_once(&self) -> bool {
        self.0.at_once()
    }

    async fn shutdown(&self) {
        self.0.shutdown().await
    }
}

/// Every backend gets every event (kube's `audit.Union`).
pub struct Union {
    backends: Vec<Arc<dyn Backend>>,
    at_once: bool,
}

impl Union {
    pub fn new(backends: Vec<Arc<dyn Backend>>) -> Self {
        let at_once = backends.iter().all(|b| b.at_once());
        Self { backends, at_once }
    }
}

#[async_trait::async_trait]
impl Backend for Union {
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        let mut ok = true;
        for backend in &self.backends {
            ok &= backend.process_events(events).await;
        }
        ok
    }

    /// Only when every backend records at once: one that waits gets the
    /// event owned, and so do the others then.
    fn process_now(&self, event: &EventRef<'_>) -> Option<Handed> {
        if !self.at_once {
            return None;
        }
        let mut ok = true;
        let mut queued: Option<Ticket> = None;
        for backend in &self.backends {
            match backend.process_now(event) {
                Some(Handed::Done(done)) => ok &= done,
                Some(Handed::Queued(ticket)) => {
                    queued = Some(match queued {
                        Some(first) => first.then(ticket),
                        None => ticket,
                    })
                }
                None => {}
            }
        }
        Some(match queued {
            Some(ticket) => Handed::Queued(ticket.and(ok)),
            None => Handed::Done(ok),
        })
    }

    fn at_once(&self) -> bool {
        self.at_once
    }

    async fn shutdown(&self) {
        for backend in &self.backends {
            backend.shutdown().await;
        }
    }
}

/// `batch`: see the module's documentation.
pub struct Buffered {
    delegate: Arc<dyn LineBackend>,
    queue: Arc<Queue>,
    worker: Mutex<Option<JoinHandle<()>>>,
    metrics: AuditMetrics,
    buffer_size: usize,
    max_batch_size: usize,
}

/// The buffer between the requests and the worker: the events' lines, one
/// after another in one `Vec` (no allocation per event once it has grown),
/// under a lock held for a copy.
struct Queue {
    pending: Mutex<Lines>,
    /// Tells the worker that the buffer holds a first event, or a full batch, or was closed.
    ready: Notify,
}

#[derive(Default)]
struct Lines {
    bytes: Vec<u8>,
    count: usize,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Lines> {
        // A panic while holding it leaves whole lines: a copy is all that is done under it.
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Buffered {
    pub fn start(
        delegate: Arc<dyn LineBackend>,
        config: BatchConfig,
        asynchronous: bool,
        metrics: AuditMetrics,
    ) -> Self {
        let queue = Arc::new(Queue { pending: Mutex::default(), ready: Notify::new() });
        let buffer_size = config.buffer_size.max(1);
        let max_batch_size = config.max_batch_size.max(1);
        let worker = tokio::spawn(run_batches(queue.clone(), delegate.clone(), config, asynchronous));
        Self { delegate, queue, worker: Mutex::new(Some(worker)), metrics, buffer_size, max_batch_size }
    }
}

#[async_trait::async_trait]
impl Backend for Buffered {
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        for event in events {
            self.put(&EventRef::from(&**event));
        }
        true
    }

    fn process_now(&self, event: &EventRef<'_>) -> Option<Handed> {
        Some(Handed::Done(self.put(event)))
    }

    fn at_once(&self) -> bool {
        true
    }

    /// Closes the buffer and waits until the worker has handed everything on.
    async fn shutdown(&self) {
        self.queue.lock().closed = true;
        self.queue.ready.notify_one();
        let worker = self.worker.lock().ok().and_then(|mut w| w.take());
        if let Some(worker) = worker {
            let _ = worker.await;
        }
    }
}

impl Buffered {
    /// Puts `event`'s line into the buffer, never waiting: what does not fit is dropped.
    fn put(&self, event: &EventRef<'_>) -> bool {
        let put = with_encoded_line(&*self.delegate, event, |line| {
            let mut pending = self.queue.lock();
            if pending.closed {
                return (false, Some("audit backend shut down"));
            }
            if pending.count >= self.buffer_size {
                return (false, Some("audit buffer queue blocked"));
            }
            pending.bytes.extend_from_slice(line);
            pending.count += 1;
            // The worker waits for a first event, then (with a
            // max_batch_wait) for a full batch; the events between wake nobody.
            (pending.count == 1 || pending.count == self.max_batch_size, None)
        });
        match put {
            Ok((wake, refused)) => {
                if let Some(refused) = refused {
                    self.metrics.plugin_error("buffered", &refused, Impacted::Event(event));
                }
                if wake {
                    self.queue.ready.notify_one();
                }
            }
            Err(e) => {
                self.metrics.plugin_error("buffered", &format!("encoding the event: {e}"), Impacted::Event(event));
            }
        }
        // As kube's: a batch backend never fails the request.
        true
    }
}

/// kube's token bucket (`flowcontrol.NewTokenBucketRateLimiter`): `burst`
/// batches at once, refilled at `qps`.
struct Throttle {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Throttle {
    async fn accept(&mut self) {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.qps).min(self.burst);
        self.last = now;
        if self.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / self.qps);
            tokio::time::sleep(wait).await;
            self.tokens = 1.0;
            self.last = Instant::now();
        }
        self.tokens -= 1.0;
    }
}

async fn run_batches(queue: Arc<Queue>, delegate: Arc<dyn LineBackend>, config: BatchConfig, asynchronous: bool) {
    let mut throttle = (config.throttle_enable && config.throttle_qps > 0.0).then(|| Throttle {
        qps: f64::from(config.throttle_qps),
        burst: config.throttle_burst.max(1) as f64,
        tokens: config.throttle_burst.max(1) as f64,
        last: Instant::now(),
    });
    let in_flight = Arc::new(Semaphore::new(MAX_BATCHES_IN_FLIGHT));
    let max = config.max_batch_size.max(1);
    // The buffer a batch was written from, emptied, to swap in for the next.
    let mut spare: Vec<u8> = Vec::new();
    loop {
        // A batch: wait for its first event, then (with a max_batch_wait)
        // until it is full or the wait has passed since it began; take up to
        // max_batch_size events. Whatever came meanwhile is taken at once:
        // events are written a batch a `write`, not one each, when they
        // come faster than they are written.
        let deadline = {
            loop {
                let (count, closed) = {
                    let pending = queue.lock();
                    (pending.count, pending.closed)
                };
                if count > 0 || closed {
                    break;
                }
                queue.ready.notified().await;
            }
            Instant::now() + config.max_batch_wait
        };
        let (count, closed) = {
            let pending = queue.lock();
            (pending.count, pending.closed)
        };
        if !closed && count < max && !config.max_batch_wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = queue.ready.notified() => {}
            }
        }
        let (mut batch, count, closed) = {
            let mut pending = queue.lock();
            let closed = pending.closed;
            if pending.count <= max {
                spare.clear();
                let batch = std::mem::replace(&mut pending.bytes, std::mem::take(&mut spare));
                (batch, std::mem::take(&mut pending.count), closed)
            } else {
                // More than a batch: the first max lines go, the rest wait.
                let end = nth_line_end(&pending.bytes, max);
                let rest = pending.bytes.split_off(end);
                pending.count -= max;
                (std::mem::replace(&mut pending.bytes, rest), max, closed)
            }
        };
        if count == 0 {
            if closed {
                break;
            }
            continue;
        }
        if let Some(throttle) = throttle.as_mut() {
            throttle.accept().await;
        }
        if asynchronous {
            let Ok(permit) = in_flight.clone().acquire_owned().await else { break };
            let delegate = delegate.clone();
            tokio::spawn(async move {
                delegate.process_lines(&batch, count).await;
                drop(permit);
            });
        } else {
            delegate.process_lines(&batch, count).await;
            batch.clear();
            if batch.capacity() <= MAX_KEPT_BATCH_BYTES {
                spare = batch;
            }
        }
    }
    // Closed: wait for the batches still being sent, then for the backend.
    let _ = in_flight.acquire_many(MAX_BATCHES_IN_FLIGHT as u32).await;
    delegate.shutdown().await;
}

/// A batch's buffer larger than this is not kept for the next batch.
const MAX_KEPT_BATCH_BYTES: usize = 4 << 20;

/// Where the `n`th line of `bytes` ends (after its newline).
fn nth_line_end(bytes: &[u8], n: usize) -> usize {
    bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(n.saturating_sub(1)).map_or(bytes.len(), |(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use chrono::Utc;

    use super::*;
    use crate::audit::event::Level;

    /// Counts events and batches; every batch waits `delay`.
    #[derive(Default)]
    struct Counting {
        events: AtomicUsize,
        batches: Mutex<Vec<usize>>,
        delay: Duration,
    }

    #[async_trait::async_trait]
    impl Backend for Counting {
        async fn process_events(&self, events: &[Arc<Event>]) -> bool {
            self.process_lines(b"", events.len()).await
        }
    }

    #[async_trait::async_trait]
    impl LineBackend for Counting {
        fn encode_line(&self, event: &EventRef<'_>, out: &mut Vec<u8>) -> serde_json::Result<()> {
            event.write_json(out)?;
            out.push(b'\n');
            Ok(())
        }

        fn plugin(&self) -> &'static str {
            "counting"
        }

        async fn process_lines(&self, _lines: &[u8], count: usize) -> bool {
            tokio::time::sleep(self.delay).await;
            self.events.fetch_add(count, Ordering::SeqCst);
            self.batches.lock().unwrap().push(count);
            false
        }
    }

    fn event() -> Arc<Event> {
        Arc::new(Event::new(Level::Metadata, "id".into(), Utc::now()))
    }

    fn config(buffer: usize, max: usize, wait_ms: u64) -> BatchConfig {
        BatchConfig {
            buffer_size: buffer,
            max_batch_size: max,
            max_batch_wait: Duration::from_millis(wait_ms),
            throttle_enable: false,
            throttle_qps: 0.0,
            throttle_burst: 0,
        }
    }

    #[tokio::test]
    async fn batches_collect_up_to_their_size_and_shutdown_flushes() {
        let backend = Arc::new(Counting::default());
        let buffered = Buffered::start(backend.clone(), config(100, 10, 50), false, AuditMetrics::default());
        for _ in 0..25 {
            assert!(buffered.process_events(&[event()]).await);
        }
        buffered.shutdown().await;
        assert_eq!(backend.events.load(Ordering::SeqCst), 25);
        let batches = backend.batches.lock().unwrap().clone();
        assert!(batches.iter().all(|b| *b <= 10), "{batches:?}");
        assert!(batches.len() >= 3, "{batches:?}");
    }

    #[tokio::test]
    async fn a_full_buffer_drops_and_counts_never_waits() {
        let metrics = AuditMetrics::default();
        let slow = Arc::new(Counting { delay: Duration::from_secs(3600), ..Default::default() });
        let buffered = Buffered::start(slow.clone(), config(5, 1, 0), true, metrics.clone());
        let started = std::time::Instant::now();
        for _ in 0..100 {
            assert!(buffered.process_events(&[event()]).await, "batch mode never fails a request");
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        // At most the buffer and the batches in flight are held; the rest were dropped.
        let dropped = metrics.errors_of("buffered");
        assert!(dropped >= (100 - 5 - MAX_BATCHES_IN_FLIGHT - 1) as u64, "{dropped}");
    }

    #[tokio::test]
    async fn blocking_hides_failures_and_strict_reports_them() {
        let backend: Arc<dyn LineBackend> = Arc::new(Counting::default());
        let blocking = with_mode(backend.clone(), Mode::Blocking, config(1, 1, 0), false, AuditMetrics::default());
        assert!(blocking.process_events(&[event()]).await);
        let strict = with_mode(backend, Mode::BlockingStrict, config(1, 1, 0), false, AuditMetrics::default());
        assert!(!strict.process_events(&[event()]).await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_throttle_spaces_batches() {
        let mut t = Throttle { qps: 10.0, burst: 2.0, tokens: 2.0, last: Instant::now() };
        let start = Instant::now();
        for _ in 0..4 {
            t.accept().await;
        }
        // Two at once, then one per 100 ms.
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(250), "{elapsed:?}");
    }
}
