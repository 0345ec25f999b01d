//! The contract of a place where events go ([`Backend`]), of one whose
//! events are lines ([`LineBackend`]), and what a backend answers when an
//! event is handed to it at once ([`Handed`]).

use std::cell::RefCell;
use std::sync::Arc;

use super::encode::EventRef;
use super::event::Event;
use super::ticket::Ticket;

/// Something that records events.
#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    /// Records `events`; false when any could not be (the backend has counted
    /// and logged the failure itself).
    async fn process_events(&self, events: &[Arc<Event>]) -> bool;

    /// Records `event` here and now, or queues it for a write its request
    /// awaits, for a backend that never waits to (a file, a buffer), written
    /// from the request's record without an owned event; Some exactly when
    /// [`Self::at_once`]. None: nothing was done, and `process_events` is to
    /// be awaited with the event owned.
    fn process_now(&self, _event: &EventRef<'_>) -> Option<Handed> {
        None
    }

    /// Whether [`Self::process_now`] records events.
    fn at_once(&self) -> bool {
        false
    }

    /// Writes out what is buffered, for a graceful stop.
    async fn shutdown(&self) {}
}

/// What a backend did with an event handed to it at once.
pub enum Handed {
    /// Recorded, or (false) a strict backend failed to.
    Done(bool),
    /// Queued in a group written shortly: awaited before the request goes on.
    Queued(Ticket),
}

impl Handed {
    /// As `blocking` sees it: written or not, the request goes on.
    pub(super) fn ignoring_errors(self) -> Self {
        match self {
            Handed::Done(_) => Handed::Done(true),
            Handed::Queued(ticket) => Handed::Queued(ticket.ignoring_errors()),
        }
    }
}

/// A backend whose events are lines (the log's JSON or legacy lines, the
/// webhook's JSON items): a batch buffer holds its events as their lines,
/// encoded when they happen, in one shared buffer. An owned event per
/// buffered event, and the copy of one still held when its request changes
/// it, would make batch mode cost more than blocking (measured:
/// docs/performance.md, "Auditing: the backends' buffers").
#[async_trait::async_trait]
pub trait LineBackend: Backend {
    /// Appends `event`'s line, its newline included, to `out`.
    fn encode_line(&self, event: &EventRef<'_>, out: &mut Vec<u8>) -> serde_json::Result<()>;

    /// Writes `count` lines made by [`Self::encode_line`], as one batch.
    async fn process_lines(&self, lines: &[u8], count: usize) -> bool;

    /// [`Self::process_lines`] where it is called, for a backend that never
    /// waits to (a file); None for one that does.
    fn write_lines_now(&self, _lines: &[u8], _count: usize) -> Option<bool> {
        None
    }

    /// Whether [`Self::write_lines_now`] writes.
    fn writes_now(&self) -> bool {
        false
    }

    /// The plugin its failures are counted under (`apiserver_audit_error_total{plugin}`).
    fn plugin(&self) -> &'static str;
}

/// Calls `f` with `event`'s line, encoded into the thread's buffer.
pub(super) fn with_encoded_line<R>(
    backend: &dyn LineBackend,
    event: &EventRef<'_>,
    f: impl FnOnce(&[u8]) -> R,
) -> serde_json::Result<R> {
    LINE.with_borrow_mut(|line| {
        line.clear();
        let encoded = backend.encode_line(event, line).map(|()| f(line));
        if line.capacity() > MAX_KEPT_LINE_BYTES {
            *line = Vec::new();
        }
        encoded
    })
}

thread_local! {
    /// Each thread encodes an event's line here before copying it into a
    /// buffer, so that an event that does not fit costs no allocation.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A thread's line buffer larger than this is not kept for the next events.
const MAX_KEPT_LINE_BYTES: usize = 64 << 10;
