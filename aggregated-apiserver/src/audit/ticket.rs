//! What a request holds while its event waits in a group to be written
//! ([`Ticket`]), and the group's outcome it awaits.

use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;

/// One group's write: how it went, once done, and who waits for it.
#[derive(Default)]
pub(super) struct Group {
    outcome: OnceLock<bool>,
    done: Notify,
}

/// Writes a group's lines: what the request that started the group holds.
pub(super) trait WritesGroup: Send + Sync {
    /// Writes the lines gathered so far, and ends `group` with how it went.
    fn write(self: Box<Self>, group: &Group);
}

impl Group {
    /// Ends the group's write with its outcome, and wakes its requests.
    pub(super) fn finish(&self, ok: bool) {
        let _ = self.outcome.set(ok);
        self.done.notify_waiters();
    }

    async fn outcome(&self) -> bool {
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            // Registered before the outcome is read, so that a write that
            // ends between the two still wakes this.
            notified.as_mut().enable();
            if let Some(ok) = self.outcome.get() {
                return *ok;
            }
            notified.await;
        }
    }
}

/// An event queued in a group, which its request awaits ([`Ticket::wait`])
/// before going on. Dropped unawaited (its request went away), a writer's
/// ticket writes its group then and there, so that no other request waits
/// for a write nobody makes.
pub struct Ticket {
    group: Arc<Group>,
    /// Set when this event's request writes the group.
    writer: Option<Box<dyn WritesGroup>>,
    /// `blocking`: a failed write is the backend's to count, not the request's.
    ignore_errors: bool,
    /// What other backends answered at once (the Union of a log and another).
    others_ok: bool,
    /// The ticket of another grouped backend of the same Union.
    next: Option<Box<Ticket>>,
}

impl Ticket {
    /// A request's place in `group`, which `writer` writes when it is the first.
    pub(super) fn new(group: Arc<Group>, writer: Option<Box<dyn WritesGroup>>) -> Self {
        Ticket { group, writer, ignore_errors: false, others_ok: true, next: None }
    }

    /// Waits until the event is written: false when a strict backend failed to.
    pub async fn wait(mut self) -> bool {
        let mut ok = self.others_ok;
        let mut ticket = Some(&mut self);
        while let Some(this) = ticket {
            if this.writer.is_some() {
                behind_ready_tasks().await;
                if let Some(writer) = this.writer.take() {
                    writer.write(&this.group);
                }
            }
            ok &= this.group.outcome().await || this.ignore_errors;
            ticket = this.next.as_deref_mut();
        }
        ok
    }

    /// As `blocking` sees it: written or not, the request goes on.
    pub fn ignoring_errors(mut self) -> Self {
        self.ignore_errors = true;
        let mut next = self.next.as_deref_mut();
        while let Some(ticket) = next {
            ticket.ignore_errors = true;
            next = ticket.next.as_deref_mut();
        }
        self
    }

    /// This, with what another backend answered at once.
    pub fn and(mut self, ok: bool) -> Self {
        self.others_ok &= ok;
        self
    }

    /// This and another grouped backend's ticket, awaited one after the other.
    pub fn then(mut self, other: Ticket) -> Self {
        self.others_ok &= other.others_ok;
        self.push(other);
        self
    }

    fn push(&mut self, other: Ticket) {
        match &mut self.next {
            Some(next) => next.push(other),
            None => self.next = Some(Box::new(other)),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.write(&self.group);
        }
    }
}

/// Lets the tasks ready on this thread run first: woken at once, the task
/// goes to the back of its thread's queue (tokio's `yield_now` waits for the
/// I/O driver's next turn as well).
async fn behind_ready_tasks() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}
