//! How the server follows the cluster's configuration objects (admission's
//! webhook configurations, policies and bindings; flow control's FlowSchemas
//! and PriorityLevelConfigurations): one shared watch per kind, each
//! change handed to a rebuild once the first full list is in, and a
//! readiness that says which lists are not read yet and why.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// What a pair of watched kinds needs to be (cluster-wide kinds
/// kube-rs can list, watch and keep in a store).
pub trait Watched: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}
impl<K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static> Watched for K {}

/// The objects of a store in name order (kube-apiserver takes webhook
/// configurations and policies in that order).
pub fn by_name<K: Watched>(store: &Store<K>) -> Vec<Arc<K>> {
    let mut objects = store.state();
    objects.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    objects
}

/// Follows the two kinds one concern is configured by (webhook
/// configurations, or policies and their bindings), lists 0 and 1 of
/// `synced`, each from one shared watch into a store: `rebuild` reads both
/// stores after the first full lists and after every change. Runs as long as
/// the watches do (for ever: they reconnect).
pub async fn follow_both<A: Watched, B: Watched>(
    client: Client,
    synced: &Synced,
    rebuild: impl Fn(&Store<A>, &Store<B>),
) {
    let (first, first_writer) = reflector::store::<A>();
    let (second, second_writer) = reflector::store::<B>();
    let first_events = watcher::watcher(Api::<A>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(first_writer);
    let second_events =
        watcher::watcher(Api::<B>::all(client), watcher::Config::default()).default_backoff().reflect(second_writer);
    let changed = || rebuild(&first, &second);
    futures::join!(synced.follow(0, first_events, &changed), synced.follow(1, second_events, &changed));
}

/// Whether the watches of one concern have read their first full lists.
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

    /// Forgets that the lists were read (their watches stopped).
    pub fn reset(&self) {
        for list in &self.lists {
            list.store(false, Ordering::Release);
        }
        if let Ok(mut last) = self.last_error.lock() {
            *last = None;
        }
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
                    tracing::warn!(what = self.what, error = %e, "configuration watch failed; reconnecting");
                    if let Ok(mut last) = self.last_error.lock() {
                        *last = Some(e.to_string());
                    }
                }
            }
        }
    }
}
