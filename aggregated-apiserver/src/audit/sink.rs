//! Where events go: the [`Backend`] contract, and the modes that wrap a
//! backend as k8s.io/apiserver's do (`pkg/server/options/audit.go`,
//! `plugin/pkg/audit/buffered`):
//!
//! - `blocking-strict`: the backend itself; a failure is reported to the caller;
//! - `blocking`: the backend, its failures counted and logged but reported as success;
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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::event::Event;
use super::metrics::AuditMetrics;
use super::options::{BatchConfig, Mode};

/// Batches of an asynchronous backend (the webhook) sent at once, at most.
pub const MAX_BATCHES_IN_FLIGHT: usize = 4;

/// Something that records events.
#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    /// Records `events`; false when any could not be (the backend has counted
    /// and logged the failure itself).
    async fn process_events(&self, events: &[Arc<Event>]) -> bool;

    /// Records `events` here and now, for a backend that never waits to (a
    /// file, a buffer); None when it might, and `process_events` is to be
    /// awaited instead. Saves the boxed future of each layer of backends for
    /// every event (two allocations per event with the log in `blocking`).
    fn process_events_now(&self, _events: &[Arc<Event>]) -> Option<bool> {
        None
    }

    /// Writes out what is buffered, for a graceful stop.
    async fn shutdown(&self) {}
}

/// The events of a backend in `mode`.
pub fn with_mode(
    backend: Arc<dyn Backend>,
    mode: Mode,
    batch: BatchConfig,
    asynchronous: bool,
    metrics: AuditMetrics,
) -> Arc<dyn Backend> {
    match mode {
        Mode::BlockingStrict => backend,
        Mode::Blocking => Arc::new(IgnoreErrors(backend)),
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

    fn process_events_now(&self, events: &[Arc<Event>]) -> Option<bool> {
        self.0.process_events_now(events).map(|_| true)
    }

    async fn shutdown(&self) {
        self.0.shutdown().await
    }
}

/// Every backend gets every event (kube's `audit.Union`).
pub struct Union(pub Vec<Arc<dyn Backend>>);

#[async_trait::async_trait]
impl Backend for Union {
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        let mut ok = true;
        for backend in &self.0 {
            ok &= backend.process_events(events).await;
        }
        ok
    }

    async fn shutdown(&self) {
        for backend in &self.0 {
            backend.shutdown().await;
        }
    }
}

/// `batch`: see the module's documentation.
pub struct Buffered {
    tx: Mutex<Option<mpsc::Sender<Arc<Event>>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    metrics: AuditMetrics,
    /// Tells the worker that a batch is full (or the buffer closed).
    full: Arc<Notify>,
    max_batch_size: usize,
}

impl Buffered {
    pub fn start(delegate: Arc<dyn Backend>, config: BatchConfig, asynchronous: bool, metrics: AuditMetrics) -> Self {
        let (tx, rx) = mpsc::channel(config.buffer_size.max(1));
        let full = Arc::new(Notify::new());
        let max_batch_size = config.max_batch_size.max(1);
        let worker = tokio::spawn(run_batches(rx, delegate, config, asynchronous, full.clone()));
        Self { tx: Mutex::new(Some(tx)), worker: Mutex::new(Some(worker)), metrics, full, max_batch_size }
    }
}

#[async_trait::async_trait]
impl Backend for Buffered {
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        self.put(events)
    }

    fn process_events_now(&self, events: &[Arc<Event>]) -> Option<bool> {
        Some(self.put(events))
    }

    /// Closes the buffer and waits until the worker has handed everything on.
    async fn shutdown(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        self.full.notify_one();
        let worker = self.worker.lock().ok().and_then(|mut w| w.take());
        if let Some(worker) = worker {
            let _ = worker.await;
        }
    }
}

impl Buffered {
    /// Puts `events` into the buffer, never waiting: what does not fit is dropped.
    fn put(&self, events: &[Arc<Event>]) -> bool {
        let tx = self.tx.lock().ok().and_then(|tx| tx.clone());
        let Some(tx) = tx else {
            self.metrics.plugin_error("buffered", &"audit backend shut down", events);
            return true;
        };
        for (i, event) in events.iter().enumerate() {
            if tx.try_send(event.clone()).is_err() {
                self.metrics.plugin_error("buffered", &"audit buffer queue blocked", &events[i..]);
                break;
            }
        }
        if tx.max_capacity() - tx.capacity() >= self.max_batch_size {
            self.full.notify_one();
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

async fn run_batches(
    mut rx: mpsc::Receiver<Arc<Event>>,
    delegate: Arc<dyn Backend>,
    config: BatchConfig,
    asynchronous: bool,
    full: Arc<Notify>,
) {
    let mut throttle = (config.throttle_enable && config.throttle_qps > 0.0).then(|| Throttle {
        qps: f64::from(config.throttle_qps),
        burst: config.throttle_burst.max(1) as f64,
        tokens: config.throttle_burst.max(1) as f64,
        last: Instant::now(),
    });
    let in_flight = Arc::new(Semaphore::new(MAX_BATCHES_IN_FLIGHT));
    let max = config.max_batch_size.max(1);
    loop {
        // A batch: wait for its first event, then take what comes until it is
        // full or max_batch_wait has passed since it began. Meanwhile the
        // worker sleeps rather than waiting on the buffer, where every event
        // put in would wake it (a wake-up of the other worker thread per
        // audited request); the sender tells it when a batch is full.
        let Some(first) = rx.recv().await else { break };
        let mut batch = vec![first];
        let deadline = Instant::now() + config.max_batch_wait;
        let closed = take_ready(&mut rx, &mut batch, max);
        if !closed && batch.len() < max && !config.max_batch_wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = full.notified() => {}
            }
            take_ready(&mut rx, &mut batch, max);
        }
        if let Some(throttle) = throttle.as_mut() {
            throttle.accept().await;
        }
        if asynchronous {
            let Ok(permit) = in_flight.clone().acquire_owned().await else { break };
            let delegate = delegate.clone();
            tokio::spawn(async move {
                delegate.process_events(&batch).await;
                drop(permit);
            });
        } else {
            delegate.process_events(&batch).await;
        }
    }
    // Closed: wait for the batches still being sent, then for the backend.
    let _ = in_flight.acquire_many(MAX_BATCHES_IN_FLIGHT as u32).await;
    delegate.shutdown().await;
}

/// Moves the events already buffered into `batch`, up to `max`; true when the
/// buffer is closed and empty.
fn take_ready(rx: &mut mpsc::Receiver<Arc<Event>>, batch: &mut Vec<Arc<Event>>, max: usize) -> bool {
    while batch.len() < max {
        match rx.try_recv() {
            Ok(event) => batch.push(event),
            Err(mpsc::error::TryRecvError::Empty) => return false,
            Err(mpsc::error::TryRecvError::Disconnected) => return true,
        }
    }
    false
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
            tokio::time::sleep(self.delay).await;
            self.events.fetch_add(events.len(), Ordering::SeqCst);
            self.batches.lock().unwrap().push(events.len());
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
        let backend: Arc<dyn Backend> = Arc::new(Counting::default());
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
