//! `blocking` and `blocking-strict` over a backend that writes its lines
//! where it is called (the log): the events that reach it at the same moment
//! are written together, with one `write`, and each request still goes on
//! only once its own event is written, as kube's blocking modes require
//! (kube writes each event with a `write` of its own; what a request waits
//! for is the same, its event handed to the file).
//!
//! The first event queued while no group is being gathered makes its
//! request the group's writer: it lets the tasks ready on its thread run
//! first (one turn of the thread's queue), then writes every line queued
//! meanwhile, from either thread, with one call; the requests that queued
//! them wait for that write and go on. A request alone waits one turn of
//! its thread's queue. Why: the `write` of a log line is a system call into
//! the file system, the dearest part of an event on a server under load
//! (docs/performance.md, "One `write` for the events that come together").

use std::sync::{Arc, Mutex, MutexGuard};

use super::backend::{with_encoded_line, Backend, Handed, LineBackend};
use super::encode::EventRef;
use super::event::Event;
use super::metrics::{AuditMetrics, Impacted};
use super::ticket::{Group, Ticket, WritesGroup};

/// A group's buffer larger than this is not kept for the next group.
const MAX_KEPT_GROUP_BYTES: usize = 1 << 20;

pub struct Grouped {
    backend: Arc<dyn LineBackend>,
    metrics: AuditMetrics,
    gathering: Arc<Mutex<Gathering>>,
}

/// The lines of the group being gathered.
#[derive(Default)]
struct Gathering {
    lines: Vec<u8>,
    count: usize,
    /// The group they are for; None until an event comes.
    group: Option<Arc<Group>>,
    /// The last group's buffer, emptied, to gather the next in.
    spare: Vec<u8>,
}

fn lock(gathering: &Mutex<Gathering>) -> MutexGuard<'_, Gathering> {
    // Held for a swap or a copy: a panic leaves whole lines.
    gathering.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a group's writer writes with.
struct Writer {
    backend: Arc<dyn LineBackend>,
    gathering: Arc<Mutex<Gathering>>,
}

impl WritesGroup for Writer {
    /// Writes the lines gathered so far with one call (the writer's group's:
    /// no other is started until it takes them), and tells their requests.
    fn write(self: Box<Self>, group: &Group) {
        let (mut lines, count) = {
            let mut gathering = lock(&self.gathering);
            gathering.group = None;
            let spare = std::mem::take(&mut gathering.spare);
            (std::mem::replace(&mut gathering.lines, spare), std::mem::take(&mut gathering.count))
        };
        let ok = count == 0 || self.backend.write_lines_now(&lines, count).unwrap_or(false);
        group.finish(ok);
        lines.clear();
        if lines.capacity() <= MAX_KEPT_GROUP_BYTES {
            let mut gathering = lock(&self.gathering);
            if gathering.spare.capacity() < lines.capacity() {
                gathering.spare = lines;
            }
        }
    }
}

impl Grouped {
    /// Blocking over `backend`, which writes its lines where it is called
    /// ([`LineBackend::writes_now`]).
    pub fn new(backend: Arc<dyn LineBackend>, metrics: AuditMetrics) -> Self {
        Self { backend, metrics, gathering: Arc::default() }
    }

    /// Queues `line` in the group being gathered, or starts one (whose ticket writes it).
    fn queue(&self, line: &[u8]) -> Ticket {
        let mut gathering = lock(&self.gathering);
        gathering.lines.extend_from_slice(line);
        gathering.count += 1;
        let (group, writer) = match &gathering.group {
            Some(group) => (group.clone(), None),
            None => {
                let group = Arc::new(Group::default());
                gathering.group = Some(group.clone());
                let writer = Writer { backend: self.backend.clone(), gathering: self.gathering.clone() };
                (group, Some(Box::new(writer) as Box<dyn WritesGroup>))
            }
        };
        Ticket::new(group, writer)
    }
}

#[async_trait::async_trait]
impl Backend for Grouped {
    /// Owned events (truncated ones, a Union's with a backend that waits)
    /// are written as they come, not grouped.
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        self.backend.process_events(events).await
    }

    fn process_now(&self, event: &EventRef<'_>) -> Option<Handed> {
        Some(match with_encoded_line(&*self.backend, event, |line| self.queue(line)) {
            Ok(ticket) => Handed::Queued(ticket),
            Err(e) => {
                let error = format!("encoding the event: {e}");
                self.metrics.plugin_error(self.backend.plugin(), &error, Impacted::Event(event));
                Handed::Done(false)
            }
        })
    }

    fn at_once(&self) -> bool {
        true
    }

    async fn shutdown(&self) {
        self.backend.shutdown().await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use chrono::Utc;

    use super::*;
    use crate::audit::event::Level;
    use crate::audit::options::{BatchConfig, Mode};
    use crate::audit::sink::with_mode;

    /// Keeps each write's count of lines, and the lines; every write fails when `fail`.
    #[derive(Default)]
    pub(crate) struct Writes {
        pub counts: Mutex<Vec<usize>>,
        pub lines: Mutex<Vec<u8>>,
        pub fail: bool,
    }

    #[async_trait::async_trait]
    impl Backend for Writes {
        async fn process_events(&self, events: &[Arc<Event>]) -> bool {
            self.write_lines_now(b"", events.len()).unwrap_or(false)
        }
    }

    #[async_trait::async_trait]
    impl LineBackend for Writes {
        fn encode_line(&self, event: &EventRef<'_>, out: &mut Vec<u8>) -> serde_json::Result<()> {
            event.write_json(out)?;
            out.push(b'\n');
            Ok(())
        }

        async fn process_lines(&self, lines: &[u8], count: usize) -> bool {
            self.write_lines_now(lines, count).unwrap_or(false)
        }

        fn write_lines_now(&self, lines: &[u8], count: usize) -> Option<bool> {
            self.counts.lock().unwrap().push(count);
            self.lines.lock().unwrap().extend_from_slice(lines);
            Some(!self.fail)
        }

        fn writes_now(&self) -> bool {
            true
        }

        fn plugin(&self) -> &'static str {
            "writes"
        }
    }

    /// `backend` in a blocking mode: its events grouped.
    pub(crate) fn blocking(backend: &Arc<Writes>, mode: Mode) -> Arc<dyn Backend> {
        let batch = BatchConfig {
            buffer_size: 1,
            max_batch_size: 1,
            max_batch_wait: std::time::Duration::ZERO,
            throttle_enable: false,
            throttle_qps: 0.0,
            throttle_burst: 0,
        };
        with_mode(backend.clone(), mode, batch, false, AuditMetrics::default())
    }

    /// `n` requests on one thread, each handing its event on and awaiting it.
    async fn requests(sink: &Arc<dyn Backend>, n: usize) -> Vec<bool> {
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let sink = sink.clone();
                tokio::spawn(async move {
                    let event = Event::new(Level::Metadata, format!("id-{i}"), Utc::now());
                    match sink.process_now(&EventRef::from(&event)) {
                        Some(Handed::Queued(ticket)) => ticket.wait().await,
                        _ => panic!("blocking over a file groups its writes"),
                    }
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.unwrap());
        }
        outcomes
    }

    #[tokio::test]
    async fn events_that_come_together_are_written_together() {
        let backend = Arc::new(Writes::default());
        let sink = blocking(&backend, Mode::Blocking);
        assert_eq!(requests(&sink, 5).await, [true; 5]);
        assert_eq!(*backend.counts.lock().unwrap(), [5], "one write for the five");
        // One alone is written at once, in a write of its own.
        assert_eq!(requests(&sink, 1).await, [true]);
        assert_eq!(*backend.counts.lock().unwrap(), [5, 1]);
    }

    #[tokio::test]
    async fn a_failed_write_fails_each_of_its_strict_requests_not_blocking_ones() {
        let backend = Arc::new(Writes { fail: true, ..Default::default() });
        let strict = blocking(&backend, Mode::BlockingStrict);
        assert_eq!(requests(&strict, 3).await, [false; 3]);
        let lenient = blocking(&backend, Mode::Blocking);
        assert_eq!(requests(&lenient, 3).await, [true; 3]);
        assert_eq!(*backend.counts.lock().unwrap(), [3, 3]);
    }

    #[tokio::test]
    async fn a_writer_that_goes_away_still_writes_its_group() {
        let backend = Arc::new(Writes::default());
        let sink = blocking(&backend, Mode::BlockingStrict);
        let event = Event::new(Level::Metadata, "id".into(), Utc::now());
        let writer = sink.process_now(&EventRef::from(&event));
        let Some(Handed::Queued(follower)) = sink.process_now(&EventRef::from(&event)) else {
            panic!("blocking over a file groups its writes")
        };
        // The writer's request is dropped before it awaited its event.
        drop(writer);
        assert!(follower.wait().await);
        assert_eq!(*backend.counts.lock().unwrap(), [2]);
    }
}
