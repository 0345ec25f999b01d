//! How admission follows the cluster's configuration objects (webhook
//! configurations, policies, bindings): one shared watch per kind, each
//! change handed to a rebuild once the first full list is in, and a
//! readiness that says which lists are not read yet and why.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};

/// Whether the watches of one plugin have read their first full lists.
pub struct Synced {
    /// What the lists are, for readiness (`webhook configurations`).
    what: &'static str,
    lists: Vec<AtomicBool>,
    last_error: Mutex<Option<String>>,
}

impl Synced {
    pub fn new(what: &'static str, lists: usize) -> Self {
        Self { what, lists: (0..lists).map(|_| AtomicBool::new(false)).collect(), last_error: Mutex::new(None) }
    }

    /// Whether every list has been read.
    pub fn all(&self) -> bool {
        self.lists.iter().all(|l| l.load(Ordering::Acquire))
    }

    /// For /readyz.
    pub fn readiness(&self) -> Result<(), String> {
        if self.all() {
            return Ok(());
        }
        match self.last_error.lock().ok().and_then(|e| e.clone()) {
            Some(e) => Err(format!("{} not synced yet (last error: {e})", self.what)),
            None => Err(format!("{} not synced yet", self.what)),
        }
    }

    /// Follows list `index`'s watch events (already reflected into a store):
    /// `changed` runs when the first full list is in and after every change
    /// past it (between a relist's start and end the store still holds the
    /// previous list, so nothing is rebuilt then).
    pub async fn follow<K>(
        &self,
        index: usize,
        events: impl Stream<Item = Result<Event<K>, watcher::Error>>,
        mut changed: impl FnMut(),
    ) {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::InitDone) => {
                    if let Some(list) = self.lists.get(index) {
                        list.store(true, Ordering::Release);
                    }
                    changed();
                }
                Ok(Event::Init | Event::InitApply(_)) => {}
                Ok(Event::Apply(_) | Event::Delete(_)) => changed(),
                Err(e) => {
                    tracing::warn!(what = self.what, error = %e, "admission configuration watch failed; reconnecting");
                    if let Ok(mut last) = self.last_error.lock() {
                        *last = Some(e.to_string());
                    }
                }
            }
        }
    }
}
