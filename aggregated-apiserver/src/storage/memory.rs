//! The in-memory store: a small MVCC map (every key keeps the versions still
//! inside the history window) plus a bounded event history. Reads at an older
//! revision (paging, resourceVersionMatch=Exact) and watches resuming from one
//! work until the history moves past it; then they get `Expired`, which the API
//! layer turns into 410 like kube-apiserver after an etcd compaction.
//!
//! It is the whole store with `--storage memory`, and the watch cache of each
//! kind with `--storage etcd`: there revisions come from etcd ([`MemoryStore::apply`],
//! [`MemoryStore::advance`], [`MemoryStore::reset`]) instead of a counter.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::{
    framed, Event, EventType, Indexer, KeyParts, ListPage, ListRequest, Mutation, ObjectKey, Store, StoreError,
    StoredObject, Updated, WatchEnd, WatchStream, UPDATE_RETRIES,
};

/// One version of a key; `None` marks a deletion.
struct Version {
    rv: u64,
    obj: Option<StoredObject>,
}

struct Inner {
    rv: u64,
    /// Reads at revisions below this are no longer possible.
    oldest: u64,
    objects: BTreeMap<Arc<ObjectKey>, Vec<Version>>,
    live: usize,
    /// Live objects per namespace, for remaining counts without counting.
    live_in: BTreeMap<String, usize>,
    history: VecDeque<Arc<Event>>,
    /// Bytes of the object states the history holds (bounded by `history_bytes`).
    history_size: usize,
    /// Live events for watchers; replaced (closing every watcher) on [`MemoryStore::reset`].
    events: broadcast::Sender<Arc<Event>>,
}

/// A kind's objects in this process: every version within the history's
/// bounds, with watches from any revision it still holds. It is also the
/// etcd store's watch cache.
pub struct MemoryStore {
    inner: RwLock<Inner>,
    revision: watch::Sender<u64>,
    indexer: Arc<dyn Indexer>,
    history_limit: usize,
    history_bytes: usize,
    watcher_buffer: usize,
    /// Clients' writes of larger encoded objects fail (not changes applied
    /// from upstream, which its own store already admitted).
    max_object_bytes: usize,
}

impl MemoryStore {
    /// `history_limit` events are kept for watch resumption and consistent
    /// paging; `watcher_buffer` is how far a watcher may fall behind before it
    /// is closed (it then re-lists or resumes from history).
    pub fn new(indexer: Arc<dyn Indexer>, history_limit: usize, watcher_buffer: usize) -> Self {
        let watcher_buffer = watcher_buffer.max(16);
        let (events, _) = broadcast::channel(watcher_buffer);
        let (revision, _) = watch::channel(1);
        Self {
            inner: RwLock::new(Inner {
                rv: 1,
                oldest: 1,
                objects: BTreeMap::new(),
                live: 0,
                live_in: BTreeMap::new(),
                history: VecDeque::new(),
                history_size: 0,
                events,
            }),
            revision,
            indexer,
            history_limit: history_limit.max(1),
            history_bytes: usize::MAX,
            watcher_buffer,
            max_object_bytes: usize::MAX,
        }
    }

    /// Bounds the history by the bytes of the object states it holds too, so
    /// `history_limit` large objects cannot hold gigabytes; the newest event
    /// is always kept.
    pub fn with_history_bytes(mut self, bytes: usize) -> Self {
        self.history_bytes = bytes;
        self
    }

    /// Refuses clients' writes whose encoded object is over `bytes`
    /// ([`StoreError::ObjectTooLarge`]).
    pub fn with_max_object_bytes(mut self, bytes: usize) -> Self {
        self.max_object_bytes = bytes;
        self
    }

    /// What [`Self::with_max_object_bytes`] set: the etcd store in front of
    /// this cache refuses the same writes.
    pub(crate) fn max_object_bytes(&self) -> usize {
        self.max_object_bytes
    }

    fn read(&self) -> Result<std::sync::RwLockReadGuard<'_, Inner>, StoreError> {
        self.inner.read().map_err(|_| StoreError::Internal("memory store lock poisoned".into()))
    }

    fn write(&self) -> Result<std::sync::RwLockWriteGuard<'_, Inner>, StoreError> {
        self.inner.write().map_err(|_| StoreError::Internal("memory store lock poisoned".into()))
    }

    /// Stamps `rv` into the object and encodes it with its index.
    pub(crate) fn encode(&self, key: &ObjectKey, obj: Value, rv: u64) -> Result<StoredObject, StoreError> {
        self.encode_as(Arc::new(key.clone()), obj, rv, EventType::Added).map(|(stored, _)| stored)
    }

    /// [`Self::encode`] inside the watch line of a change of type `kind`,
    /// returned too (see [`framed`]).
    fn encode_as(
        &self,
        key: Arc<ObjectKey>,
        mut obj: Value,
        rv: u64,
        kind: EventType,
    ) -> Result<(StoredObject, Bytes), StoreError> {
        stamp_rv(&mut obj, rv)?;
        let mut index = self.indexer.index(&obj);
        let framed = framed::frame(&obj, kind)?;
        index.metadata = framed.metadata;
        Ok((StoredObject::new(key, rv, framed.object, index), framed.line))
    }

    /// Records a write made under the lock: version, history, fan-out.
    fn commit(&self, inner: &mut Inner, event: Event) {
        let rv = event.rv();
        let key = event.object.key.clone();
        let obj = match event.kind {
            EventType::Deleted => None,
            _ => Some(event.object.clone()),
        };
        match (event.prev.is_some(), obj.is_some()) {
            (false, true) => {
                inner.live += 1;
                *inner.live_in.entry(key.namespace.clone()).or_default() += 1;
            }
            (true, false) => {
                inner.live = inner.live.saturating_sub(1);
                if let Some(n) = inner.live_in.get_mut(&key.namespace) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        inner.live_in.remove(&key.namespace);
                    }
                }
            }
            _ => {}
        }
        // Most keys only ever hold one version: no spare capacity for more.
        inner.objects.entry(key).or_insert_with(|| Vec::with_capacity(1)).push(Version { rv, obj });
        inner.rv = rv;
        let event = Arc::new(event);
        inner.history_size += event.object.bytes.len();
        inner.history.push_back(event.clone());
        while inner.history.len() > self.history_limit
            || (inner.history_size > self.history_bytes && inner.history.len() > 1)
        {
            if let Some(old) = inner.history.pop_front() {
                inner.history_size = inner.history_size.saturating_sub(old.object.bytes.len());
                inner.oldest = old.rv();
                compact_key(&mut inner.objects, &old.object.key, old.rv());
            }
        }
        // Sent under the lock so that a watcher subscribing under the lock sees
        // every later event exactly once.
        let _ = inner.events.send(event);
        self.revision.send_replace(rv);
    }

    fn latest<'a>(inner: &'a Inner, key: &dyn KeyParts) -> Option<&'a StoredObject> {
        inner.objects.get(key).and_then(|v| v.last()).and_then(|v| v.obj.as_ref())
    }

    /// Writes `obj` (or deletes, with `None`) at the next revision if the key is
    /// at `expected` (`Some(None)`: absent; `None`: whatever it is).
    fn write_next(
        &self,
        key: &ObjectKey,
        obj: Option<Value>,
        expected: Option<Option<u64>>,
    ) -> Result<StoredObject, StoreError> {
        let mut inner = self.write()?;
        let prev = Self::latest(&inner, key).cloned();
        match (expected, &prev) {
            (Some(None), Some(_)) => return Err(StoreError::AlreadyExists),
            (Some(Some(_)), None) => return Err(StoreError::NotFound),
            (Some(Some(rv)), Some(p)) if p.rv != rv => return Err(StoreError::Conflict),
            _ => {}
        }
        let rv = inner.rv + 1;
        self.commit_at(&mut inner, key, obj, prev, rv, self.max_object_bytes)
    }

    /// Records the new state of `key` at revision `rv` (`None`: deleted),
    /// unless its encoding is over `max_bytes`.
    fn commit_at(
        &self,
        inner: &mut Inner,
        key: &ObjectKey,
        obj: Option<Value>,
        prev: Option<StoredObject>,
        rv: u64,
        max_bytes: usize,
    ) -> Result<StoredObject, StoreError> {
        let (kind, obj) = match (obj, &prev) {
            (Some(obj), p) => (if p.is_some() { EventType::Modified } else { EventType::Added }, obj),
            (None, Some(p)) => (EventType::Deleted, p.value()?),
            (None, None) => return Err(StoreError::NotFound),
        };
        // Every version of a key shares the key the map already holds.
        let key = match inner.objects.get_key_value(key) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(key.clone()),
        };
        let (stored, line) = self.encode_as(key, obj, rv, kind)?;
        if stored.bytes.len() > max_bytes && kind != EventType::Deleted {
            return Err(StoreError::ObjectTooLarge);
        }
        self.commit(inner, Event::with_line(kind, stored.clone(), prev, line));
        Ok(stored)
    }

    /// Applies a change that happened upstream at revision `rv` (the watch
    /// cache's feed): `obj` is the new state, `None` a deletion. Changes at or
    /// below the current revision were already applied and are skipped.
    pub(crate) fn apply(&self, key: &ObjectKey, obj: Option<Value>, rv: u64) -> Result<(), StoreError> {
        let mut inner = self.write()?;
        if rv <= inner.rv {
            return Ok(());
        }
        let prev = Self::latest(&inner, key).cloned();
        if obj.is_none() && prev.is_none() {
            // Deleting what this cache never held: only the revision moves.
            inner.rv = rv;
            self.revision.send_replace(rv);
            return Ok(());
        }
        self.commit_at(&mut inner, key, obj, prev, rv, usize::MAX).map(|_| ())
    }

    /// Moves the revision forward without a change of ours (upstream progress:
    /// writes elsewhere in etcd), so waits for it end and bookmarks carry it.
    pub(crate) fn advance(&self, rv: u64) {
        if let Ok(mut inner) = self.write() {
            if rv > inner.rv {
                inner.rv = rv;
                self.revision.send_replace(rv);
            }
        }
    }

    /// Replaces everything with `objects` as of revision `rv` (a re-list after
    /// the upstream history was compacted): the history starts again at `rv`,
    /// and every open watch is closed, so its client resumes from its last
    /// revision and gets 410 Expired, as after kube-apiserver's cacher re-lists.
    /// Each object comes with the revision it was last modified at.
    pub(crate) fn reset(&self, rv: u64, objects: Vec<(ObjectKey, Value, u64)>) -> Result<(), StoreError> {
        let mut encoded = BTreeMap::new();
        for (key, obj, modified) in objects {
            let stored = self.encode(&key, obj, modified)?;
            encoded.insert(stored.key.clone(), vec![Version { rv: stored.rv, obj: Some(stored) }]);
        }
        let mut live_in = BTreeMap::new();
        for key in encoded.keys() {
            *live_in.entry(key.namespace.clone()).or_default() += 1;
        }
        let mut inner = self.write()?;
        inner.live = encoded.len();
        inner.live_in = live_in;
        inner.objects = encoded;
        inner.history.clear();
        inner.history_size = 0;
        inner.rv = inner.rv.max(rv);
        inner.oldest = rv;
        inner.events = broadcast::channel(self.watcher_buffer).0;
        self.revision.send_replace(inner.rv);
        Ok(())
    }

    /// Deletes, as ordinary events, every object of one namespace (or all,
    /// with `None`) that `keep` refuses: the end of a cache's re-list of its
    /// upstream, once every listed object has been upserted.
    pub fn retain_scope(&self, namespace: Option<&str>, keep: impl Fn(&ObjectKey) -> bool) -> Result<(), StoreError> {
        let gone: Vec<ObjectKey> = {
            let inner = self.read()?;
            inner
                .objects
                .iter()
                .filter(|(k, v)| {
                    namespace.is_none_or(|ns| ns == k.namespace) && v.last().is_some_and(|v| v.obj.is_some())
                })
                .filter(|(k, _)| !keep(k))
                .map(|(k, _)| (**k).clone())
                .collect()
        };
        for key in gone {
            self.delete_now(&key)?;
        }
        Ok(())
    }

    /// Creates or replaces an object unconditionally; an identical object is left
    /// alone (no new revision, no event).
    pub fn upsert(&self, key: &ObjectKey, mut obj: Value) -> Result<Option<StoredObject>, StoreError> {
        // Compared outside the write lock (encoding is the costly part), so
        // an unchanged object, the common case of a re-list, never blocks
        // readers; it is unchanged only if nothing was written meanwhile.
        if let Ok(p) = self.current(key) {
            // Encoded with the stored revision, an unchanged object is the stored bytes.
            stamp_rv(&mut obj, p.rv)?;
            if framed::frame(&obj, EventType::Modified)?.object == p.bytes
                && self.current(key).is_ok_and(|now| now.rv == p.rv)
            {
                return Ok(None);
            }
        }
        let mut inner = self.write()?;
        let prev = Self::latest(&inner, key).cloned();
        let rv = inner.rv + 1;
        self.commit_at(&mut inner, key, Some(obj), prev, rv, usize::MAX).map(Some)
    }

    /// Deletes unconditionally; absent keys are fine.
    pub fn delete_now(&self, key: &ObjectKey) -> Result<(), StoreError> {
        match self.write_next(key, None, None) {
            Ok(_) | Err(StoreError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// What a watch reads: the history after its start, then live events.
struct Events {
    backlog: VecDeque<Arc<Event>>,
    live: broadcast::Receiver<Arc<Event>>,
    namespace: Option<String>,
    last_rv: u64,
    ended: bool,
}

impl Events {
    /// The next event of the watched namespace(s); after an error, nothing.
    async fn next(&mut self) -> Option<Result<Arc<Event>, WatchEnd>> {
        if self.ended {
            return None;
        }
        loop {
            let ev = match self.backlog.pop_front() {
                Some(ev) => ev,
                None => match self.live.recv().await {
                    Ok(ev) => ev,
                    Err(e) => {
                        self.ended = true;
                        return Some(Err(match e {
                            broadcast::error::RecvError::Lagged(_) => WatchEnd::Lagged,
                            broadcast::error::RecvError::Closed => WatchEnd::Closed,
                        }));
                    }
                },
            };
            if ev.rv() <= self.last_rv {
                continue;
            }
            self.last_rv = ev.rv();
            if self.namespace.as_deref().is_none_or(|ns| ns == ev.object.key.namespace) {
                return Some(Ok(ev));
            }
        }
    }
}

/// Writes the revision into the object's `metadata.resourceVersion`.
fn stamp_rv(obj: &mut Value, rv: u64) -> Result<(), StoreError> {
    match obj.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
            Ok(())
        }
        None => Err(StoreError::Internal("object without metadata".into())),
    }
}

/// Drops versions of `key` that no read at or after `oldest` can see.
fn compact_key(objects: &mut BTreeMap<Arc<ObjectKey>, Vec<Version>>, key: &ObjectKey, oldest: u64) {
    let Some(versions) = objects.get_mut(key) else { return };
    // Index of the newest version at or below `oldest`: it stays visible to a
    // read at `oldest`; everything before it is unreachable.
    if let Some(pos) = versions.iter().rposition(|v| v.rv <= oldest) {
        versions.drain(..pos);
        if versions.first().is_some_and(|v| v.obj.is_none()) {
            versions.remove(0);
        }
        if versions.len() == 1 {
            versions.shrink_to_fit();
        }
    }
    if versions.is_empty() {
        objects.remove(key);
    }
}

/// How many objects of `namespace` (all: `None`) were live at revision `at`:
/// the live count now, less what the history says happened since.
fn live_at(inner: &Inner, namespace: Option<&str>, at: u64) -> u64 {
    let now = match namespace {
        Some(ns) => inner.live_in.get(ns).copied().unwrap_or(0),
        None => inner.live,
    } as i64;
    let since = inner.history.partition_point(|e| e.rv() <= at);
    let changed: i64 = inner
        .history
        .range(since..)
        .filter(|e| namespace.is_none_or(|ns| ns == e.object.key.namespace))
        .map(|e| match (e.kind, e.prev.is_some()) {
            (EventType::Deleted, _) => 1,
            (_, false) => -1,
            _ => 0,
        })
        .sum();
    (now + changed).max(0) as u64
}

/// The keys a page of a list walks, in the store's (namespace, name) order:
/// those of `namespace` (all when None) after `start_after` (from the first
/// when None); None when there are none (a continue key past the namespace).
///
/// A namespace's keys end before `<namespace>\0`: namespaces are DNS labels,
/// without NUL, so that key sorts after each of the namespace's keys and
/// before every other namespace's. The walk then stops by itself, without
/// comparing each item's namespace: a pointer chase to a string apart in
/// memory and a compare, per item (measured: docs/performance.md, "Storage
/// reads").
fn page_range(
    namespace: Option<&str>,
    start_after: Option<&ObjectKey>,
) -> Option<(Bound<ObjectKey>, Bound<ObjectKey>)> {
    let Some(ns) = namespace else {
        return Some((start_after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone())), Bound::Unbounded));
    };
    let first = ObjectKey::new(ns, "");
    let end = ObjectKey::new(format!("{ns}\0"), "");
    let start = match start_after {
        // A continue key of this namespace (a client's token may name any key).
        Some(k) if *k >= first && *k < end => Bound::Excluded(k.clone()),
        Some(k) if *k >= end => return None,
        _ => Bound::Included(first),
    };
    Some((start, Bound::Excluded(end)))
}

/// The version of a key visible at revision `at`.
fn visible_at(versions: &[Version], at: u64) -> Option<&StoredObject> {
    versions.iter().rev().find(|v| v.rv <= at).and_then(|v| v.obj.as_ref())
}

impl MemoryStore {
    /// The state of `key`, or `NotFound`.
    pub(crate) fn current(&self, key: &ObjectKey) -> Result<StoredObject, StoreError> {
        Self::latest(&*self.read()?, key).cloned().ok_or(StoreError::NotFound)
    }

    /// A list served from memory (the etcd store's reads come here too).
    pub(crate) fn list_now(&self, req: ListRequest<'_>) -> Result<ListPage, StoreError> {
        let inner = self.read()?;
        let at = req.at.unwrap_or(inner.rv);
        if at < inner.oldest {
            return Err(StoreError::Expired { requested: at, oldest: inner.oldest });
        }
        if at > inner.rv {
            return Err(StoreError::TooLarge { requested: at, current: inner.rv });
        }
        let limit = req.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let range = match page_range(req.namespace, req.start_after) {
            Some(bounds) => inner.objects.range::<ObjectKey, _>((bounds.0.as_ref(), bounds.1.as_ref())),
            None => Default::default(),
        };
        // Items before this page, when known: then the remaining count is
        // arithmetic, not a walk over the rest of the list.
        let offset = match (req.filter, req.start_after) {
            (Some(_), _) => None,
            (None, None) => Some(0),
            (None, Some(_)) => req.offset,
        };
        // Unfiltered, as many as the page takes, when the namespace's count
        // says: the vector is not grown (copied) ten times over on the way to
        // a thousand. A selector may match few: that vector grows as it goes.
        let expected = match req.filter {
            Some(_) => 0,
            None => req.namespace.map_or(inner.live, |ns| inner.live_in.get(ns).copied().unwrap_or(0)),
        };
        let mut items = Vec::with_capacity(expected.min(limit));
        let mut next_start_after = None;
        let mut remaining = 0u64;
        for (_, versions) in range {
            let Some(obj) = visible_at(versions, at) else { continue };
            if req.filter.is_some_and(|f| !f(obj)) {
                continue;
            }
            if items.len() < limit {
                items.push(obj.clone());
                continue;
            }
            if next_start_after.is_none() {
                next_start_after = items.last().map(|o: &StoredObject| ObjectKey::clone(&o.key));
            }
            // kube-apiserver reports a remaining count only for unfiltered lists.
            if req.filter.is_some() || offset.is_some() {
                break;
            }
            remaining += 1;
        }
        let remaining = match offset {
            _ if next_start_after.is_none() || req.filter.is_some() => None,
            Some(before) => Some(live_at(&inner, req.namespace, at).saturating_sub(before + items.len() as u64)),
            None => Some(remaining),
        };
        Ok(ListPage { rv: at, items, next_start_after, remaining })
    }

    /// A watch served from memory: history after `after_rv`, then live events.
    pub(crate) fn watch_now(&self, namespace: Option<&str>, after_rv: u64) -> Result<WatchStream, StoreError> {
        let inner = self.read()?;
        if after_rv < inner.oldest {
            return Err(StoreError::Expired { requested: after_rv, oldest: inner.oldest });
        }
        // History is ordered by revision: find the first event after `after_rv`.
        let start = inner.history.partition_point(|e| e.rv() <= after_rv);
        let backlog = inner.history.range(start..).cloned().collect();
        let live = inner.events.subscribe();
        let events =
            Events { backlog, live, namespace: namespace.map(str::to_string), last_rv: after_rv, ended: false };
        Ok(Box::pin(futures::stream::unfold(events, |mut events| async move {
            let item = events.next().await?;
            Some((item, events))
        })))
    }

    /// Waits until the revision reaches `rv`, or `TooLarge` after `timeout`.
    pub(crate) async fn wait_until(&self, rv: u64, timeout: Duration) -> Result<(), StoreError> {
        let mut rx = self.revision.subscribe();
        let reached = tokio::time::timeout(timeout, rx.wait_for(|current| *current >= rv)).await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(StoreError::TooLarge { requested: rv, current: self.revision() }),
        }
    }

    /// The revision of the newest change applied.
    pub(crate) fn revision(&self) -> u64 {
        *self.revision.borrow()
    }

    /// Objects currently held.
    pub(crate) fn live(&self) -> usize {
        self.read().map(|i| i.live).unwrap_or(0)
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    fn current_rv(&self) -> u64 {
        self.revision()
    }

    fn len(&self) -> usize {
        self.live()
    }

    fn cached_size(&self, key: &ObjectKey) -> Option<usize> {
        self.current(key).ok().map(|o| o.bytes.len())
    }

    async fn sync_latest(&self) -> Result<u64, StoreError> {
        Ok(self.revision())
    }

    fn always_latest(&self) -> bool {
        // One process holds every write: the newest revision is already here.
        true
    }

    async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> Result<(), StoreError> {
        self.wait_until(rv, timeout).await
    }

    fn get(&self, key: &dyn KeyParts) -> Result<Option<StoredObject>, StoreError> {
        Ok(Self::latest(&*self.read()?, key).cloned())
    }

    async fn list(&self, req: ListRequest<'_>) -> Result<ListPage, StoreError> {
        self.list_now(req)
    }

    async fn watch(&self, namespace: Option<&str>, after_rv: u64) -> Result<WatchStream, StoreError> {
        self.watch_now(namespace, after_rv)
    }

    async fn create(&self, key: &ObjectKey, obj: Value) -> Result<StoredObject, StoreError> {
        self.write_next(key, Some(obj), Some(None))
    }

    async fn guaranteed_update(
        &self,
        key: &ObjectKey,
        try_update: &mut (dyn for<'o> FnMut(&'o StoredObject) -> Mutation + Send),
    ) -> Result<Updated, StoreError> {
        for _ in 0..UPDATE_RETRIES {
            let current = self.current(key)?;
            let result = match try_update(&current) {
                Mutation::Abort => return Ok(Updated::Aborted),
                Mutation::Keep => return Ok(Updated::Kept(current)),
                Mutation::Put(obj) => self.write_next(key, Some(obj), Some(Some(current.rv))).map(Updated::Put),
                Mutation::Delete => self.write_next(key, None, Some(Some(current.rv))).map(Updated::Deleted),
            };
            match result {
                Err(StoreError::Conflict) => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::ObjectIndex;
    use futures::StreamExt;
    use serde_json::json;

    struct NoIndex;
    impl Indexer for NoIndex {
        fn index(&self, _obj: &Value) -> ObjectIndex {
            ObjectIndex::default()
        }
    }

    fn store(history: usize) -> MemoryStore {
        MemoryStore::new(Arc::new(NoIndex), history, 64)
    }

    fn obj(name: &str, v: i64) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"v": v}})
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    fn all() -> ListRequest<'static> {
        ListRequest { namespace: None, at: None, start_after: None, offset: None, limit: None, filter: None }
    }

    #[tokio::test]
    async fn lagging_watcher_is_closed_not_buffered() {
        let s = MemoryStore::new(Arc::new(NoIndex), 1000, 16);
        let mut w = s.watch(None, s.current_rv()).await.unwrap();
        for i in 0..40 {
            s.create(&key(&format!("o{i}")), obj("o", i)).await.unwrap();
        }
        assert_eq!(w.next().await.unwrap().unwrap_err(), WatchEnd::Lagged);
    }

    #[tokio::test]
    async fn history_is_bounded_by_bytes_too() {
        let s = MemoryStore::new(Arc::new(NoIndex), 1000, 64).with_history_bytes(2000);
        let start = s.current_rv();
        for i in 0..100 {
            s.create(&key(&format!("o{i:02}")), obj("o", i)).await.unwrap();
        }
        let size = s.current(&key("o99")).unwrap().bytes.len();
        let kept = s.read().unwrap().history.len();
        assert_eq!(kept, 2000 / size, "as many events as fit in 2000 bytes of {size}");
        assert!(matches!(s.watch(None, start).await, Err(StoreError::Expired { .. })));
        let mut w = s.watch(None, s.current_rv() - kept as u64).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap().object.key.name, format!("o{}", 100 - kept));
        // One event larger than the bound is still kept: a watch can resume right before it.
        let big = json!({"metadata": {"name": "big", "namespace": "ns"}, "spec": {"pad": "x".repeat(5000)}});
        s.create(&key("big"), big).await.unwrap();
        assert_eq!(s.read().unwrap().history.len(), 1);
        assert!(s.watch(None, s.current_rv() - 1).await.is_ok());
    }

    #[tokio::test]
    async fn watch_lines_share_the_stored_bytes() {
        let s = store(100);
        let mut w = s.watch(None, s.current_rv()).await.unwrap();
        let stored = s.create(&key("a"), obj("a", 1)).await.unwrap();
        let ev = w.next().await.unwrap().unwrap();
        let line = ev.encoded.get_or_init(EventType::Added, || panic!("the line of the change is kept"));
        let at = stored.bytes.as_ptr() as usize - line.as_ptr() as usize;
        assert!(at < line.len(), "the object's bytes are inside its watch line, not a copy");
        assert_eq!(&line[at..at + stored.bytes.len()], &stored.bytes[..]);
    }

    #[tokio::test]
    async fn a_namespace_list_stops_at_its_namespace_whatever_the_neighbours_and_the_continue_key() {
        let s = store(100);
        // Namespaces that sort right beside "default", one of them starting with it.
        for ns in ["a", "default", "default-x", "defaulta", "z"] {
            for name in ["n1", "n2", "n3"] {
                let o = json!({"metadata": {"name": name, "namespace": ns}});
                s.create(&ObjectKey::new(ns, name), o).await.unwrap();
            }
        }
        let names = |page: &ListPage| {
            page.items.iter().map(|o| format!("{}/{}", o.key.namespace, o.key.name)).collect::<Vec<_>>()
        };
        fn in_default(start_after: Option<&ObjectKey>, limit: Option<usize>) -> ListRequest<'_> {
            ListRequest { namespace: Some("default"), start_after, limit, ..all() }
        }
        let whole = s.list(in_default(None, None)).await.unwrap();
        assert_eq!(names(&whole), ["default/n1", "default/n2", "default/n3"]);
        let first = s.list(in_default(None, Some(2))).await.unwrap();
        assert_eq!(names(&first), ["default/n1", "default/n2"]);
        assert_eq!(first.remaining, Some(1));
        let after = first.next_start_after.expect("a second page");
        let second = s.list(in_default(Some(&after), Some(2))).await.unwrap();
        assert_eq!(names(&second), ["default/n3"]);
        assert_eq!((second.next_start_after, second.remaining), (None, None));
        // A continue key a client made up, of another namespace: the
        // namespace's keys after it, never another namespace's.
        let before = ObjectKey::new("a", "n2");
        assert_eq!(names(&s.list(in_default(Some(&before), None)).await.unwrap()), names(&whole));
        for past in [ObjectKey::new("default-x", "n1"), ObjectKey::new("z", "n9")] {
            assert!(s.list(in_default(Some(&past), None)).await.unwrap().items.is_empty());
        }
        // All namespaces, after a key: everything after it in key order.
        let across = ListRequest { start_after: Some(&after), limit: Some(3), ..all() };
        assert_eq!(names(&s.list(across).await.unwrap()), ["default/n3", "default-x/n1", "default-x/n2"]);
    }

    #[tokio::test]
    async fn versions_of_a_key_share_one_key() {
        let s = store(100);
        let first = s.upsert(&key("a"), obj("a", 1)).unwrap().unwrap();
        let second = s.upsert(&key("a"), obj("a", 2)).unwrap().unwrap();
        assert!(Arc::ptr_eq(&first.key, &second.key), "a new version reuses the key the store holds");
        let listed = s.list(all()).await.unwrap().items;
        assert!(Arc::ptr_eq(&listed[0].key, &second.key));
    }

    #[tokio::test]
    async fn upsert_skips_identical_objects() {
        let s = store(100);
        assert!(s.upsert(&key("a"), obj("a", 1)).unwrap().is_some());
        let rv = s.current_rv();
        assert!(s.upsert(&key("a"), obj("a", 1)).unwrap().is_none());
        assert_eq!(s.current_rv(), rv);
        s.upsert(&key("b"), obj("b", 1)).unwrap();
        s.retain_scope(None, |k| k.name == "b").unwrap();
        let names: Vec<_> = s.list(all()).await.unwrap().items.iter().map(|o| o.key.name.clone()).collect();
        assert_eq!(names, ["b"]);
    }

    #[tokio::test]
    async fn as_a_watch_cache_it_takes_upstream_revisions() {
        let s = store(100);
        s.apply(&key("a"), Some(obj("a", 1)), 10).unwrap();
        let mut w = s.watch(None, 10).await.unwrap();
        s.apply(&key("a"), Some(obj("a", 2)), 14).unwrap();
        s.apply(&key("a"), Some(obj("a", 0)), 12).unwrap(); // already past: skipped
        s.apply(&key("gone"), None, 15).unwrap(); // never held: only the revision moves
        assert_eq!(s.current_rv(), 15);
        let ev = w.next().await.unwrap().unwrap();
        assert_eq!((ev.kind, ev.rv(), ev.prev.as_ref().map(|p| p.rv)), (EventType::Modified, 14, Some(10)));
        s.advance(20);
        s.wait_for_rv(20, Duration::from_millis(10)).await.unwrap();
        let listed = s.list(ListRequest { at: Some(17), ..all() }).await.unwrap();
        assert_eq!(listed.items[0].rv, 14);
        // A re-list after compaction: new contents, history from its revision,
        // open watches closed.
        s.reset(30, vec![(key("b"), obj("b", 1), 25)]).unwrap();
        assert_eq!(w.next().await.unwrap().unwrap_err(), WatchEnd::Closed);
        assert!(matches!(s.watch(None, 20).await, Err(StoreError::Expired { .. })));
        let names: Vec<_> = s.list(all()).await.unwrap().items.iter().map(|o| (o.key.name.clone(), o.rv)).collect();
        assert_eq!(names, [("b".to_string(), 25)]);
        assert_eq!(s.len(), 1);
    }
}
