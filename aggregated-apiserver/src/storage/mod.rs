//! Versioned object storage with an event history, the contract every backend
//! fulfils: memory (one replica), and etcd behind a watch cache (several
//! replicas, durable).
//!
//! Objects are kept as their JSON encoding (`Bytes`) next to a small index of what
//! selectors, tables and metadata views need, so list and watch write stored
//! bytes instead of re-serializing.

pub(crate) mod encryption;
pub(crate) mod etcd;
pub(crate) mod framed;
pub(crate) mod index;
pub(crate) mod memory;
pub(crate) mod options;

pub use etcd::{EtcdStore, KeyCodec};
pub use index::{Indexer, LabelSet, ObjectIndex};
pub use memory::MemoryStore;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

/// The place of an object: namespace ("" for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The namespace, "" for a cluster-scoped kind.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }
}

/// An object's place as a lookup names it: an [`ObjectKey`], or the two
/// strings of the request's path, borrowed, so that a read copies neither
/// into a key of its own (two allocations of every GET).
pub trait KeyParts {
    /// The namespace, "" for a cluster-scoped kind.
    fn namespace(&self) -> &str;
    /// The object's name.
    fn name(&self) -> &str;
}

impl KeyParts for ObjectKey {
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn name(&self) -> &str {
        &self.name
    }
}

/// (namespace, name).
impl KeyParts for (&str, &str) {
    fn namespace(&self) -> &str {
        self.0
    }
    fn name(&self) -> &str {
        self.1
    }
}

/// The stores' maps hold `Arc<ObjectKey>`; a lookup may name it as a `dyn KeyParts`.
impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for Arc<ObjectKey> {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self.as_ref()
    }
}

/// Ordered as [`ObjectKey`] is (namespace, then name), as `Borrow` requires.
impl Ord for dyn KeyParts + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.namespace(), self.name()).cmp(&(other.namespace(), other.name()))
    }
}

impl PartialOrd for dyn KeyParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.namespace() == other.namespace() && self.name() == other.name()
    }
}

impl Eq for dyn KeyParts + '_ {}

/// One stored version of an object. Cloning it is one reference count: lists
/// clone every item they return, and that traffic is a measurable part of a
/// large list's CPU.
#[derive(Debug, Clone)]
pub struct StoredObject(Arc<StoredVersion>);

/// What a [`StoredObject`] holds.
#[derive(Debug)]
pub struct StoredVersion {
    /// Shared by every version of the key (and the store's map of keys).
    pub key: Arc<ObjectKey>,
    /// The resourceVersion this state was written at.
    pub rv: u64,
    /// The object's JSON, with `metadata.resourceVersion` = `rv` (a view into
    /// the watch line it was stored with).
    pub bytes: Bytes,
    /// What selectors, tables and views read without decoding the object.
    pub index: ObjectIndex,
}

impl StoredObject {
    /// One stored state of the object at `key`.
    pub fn new(key: Arc<ObjectKey>, rv: u64, bytes: Bytes, index: ObjectIndex) -> Self {
        Self(Arc::new(StoredVersion { key, rv, bytes, index }))
    }

    /// Decodes the stored bytes (only write paths and rare views need this).
    pub fn value(&self) -> Result<Value, StoreError> {
        serde_json::from_slice(&self.bytes).map_err(|e| StoreError::Internal(format!("decoding stored object: {e}")))
    }
}

/// A stored object is its JSON bytes to whatever writes it out.
impl AsRef<[u8]> for StoredObject {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::ops::Deref for StoredObject {
    type Target = StoredVersion;

    fn deref(&self) -> &StoredVersion {
        &self.0
    }
}

/// What a change did to an object, as a watch event's `type` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created (or started to match a watch's selector).
    Added,
    /// The object was changed.
    Modified,
    /// The object was deleted (or stopped matching a watch's selector).
    Deleted,
}

impl EventType {
    /// The event type as the watch stream spells it (`ADDED`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// A change, as recorded in the history. `object` is the new state (for a
/// deletion: the last state, stamped with the deletion's resourceVersion);
/// `prev` the state before, so filtered watches can tell an object that
/// stopped matching (sent as DELETED) from one that started (sent as ADDED).
#[derive(Debug)]
pub struct Event {
    /// What the change did.
    pub kind: EventType,
    /// The state after it (for a deletion: the last one).
    pub object: StoredObject,
    /// The state before it, for creations: None.
    pub prev: Option<StoredObject>,
    /// Room for the watch machinery to keep what it derives from this event
    /// once for all watchers (its encoded lines); storage never reads it.
    pub(crate) encoded: EventMemo,
}

/// One lazily filled slot per event type (a selector can turn a MODIFIED into
/// ADDED or DELETED for some watchers).
#[derive(Debug, Default)]
pub(crate) struct EventMemo([std::sync::OnceLock<Bytes>; 3]);

impl EventMemo {
    /// The bytes kept for `as_type`, made by `make` on first use.
    pub(crate) fn get_or_init(&self, as_type: EventType, make: impl FnOnce() -> Bytes) -> Bytes {
        let slot = match as_type {
            EventType::Added => &self.0[0],
            EventType::Modified => &self.0[1],
            EventType::Deleted => &self.0[2],
        };
        slot.get_or_init(make).clone()
    }
}

impl Event {
    /// A change of `kind` to `object`, from `prev`.
    pub fn new(kind: EventType, object: StoredObject, prev: Option<StoredObject>) -> Self {
        Self { kind, object, prev, encoded: EventMemo::default() }
    }

    /// An event whose plain JSON watch line is already known (the store
    /// encodes each object inside the line of the change that stored it).
    pub(crate) fn with_line(kind: EventType, object: StoredObject, prev: Option<StoredObject>, line: Bytes) -> Self {
        let event = Self::new(kind, object, prev);
        event.encoded.get_or_init(kind, || line);
        event
    }

    /// The revision of the change.
    pub fn rv(&self) -> u64 {
        self.object.rv
    }
}

/// Why a store could not do what it was asked; the handlers answer each
/// with kube's status (404, 409, 410, 504, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No object has the key.
    #[error("not found")]
    NotFound,
    /// A create found the key taken.
    #[error("already exists")]
    AlreadyExists,
    /// Another write changed the object first.
    #[error("the object has been modified; please apply your changes to the latest version and try again")]
    Conflict,
    /// The requested revision is older than the history kept.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The revision asked for.
        requested: u64,
        /// The oldest revision still kept.
        oldest: u64,
    },
    /// The requested revision has not happened yet (and did not within the wait).
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The revision asked for.
        requested: u64,
        /// The newest revision the store has.
        current: u64,
    },
    /// The backend could not be reached in time (etcd down or partitioned):
    /// the write may or may not have happened, as with kube-apiserver's timeouts.
    #[error("{0}")]
    Unavailable(String),
    /// The store cannot answer yet (etcd's cache has not listed it once).
    #[error("storage is (re)initializing")]
    Initializing,
    /// A write whose encoded object is larger than the store keeps
    /// (`--max-object-bytes`, 1.5 MiB by default), or refused by etcd itself.
    #[error("etcdserver: request is too large")]
    ObjectTooLarge,
    /// Anything else, in words.
    #[error("storage: {0}")]
    Internal(String),
}

/// The largest encoded object a write may store: etcd's default
/// `--max-request-bytes` (1.5 MiB), the bound kube-apiserver's objects live
/// under. The memory store enforces it itself, so a client can't grow one
/// object (and with it every list, watch and history entry) without limit;
/// the etcd store checks it before sending, and etcd's own refusal of a
/// larger request is the same error.
pub(crate) const DEFAULT_MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// What a [`Store::guaranteed_update`] callback decides for the current state.
#[derive(Debug)]
pub enum Mutation {
    /// Replace the object with this one.
    Put(Value),
    /// Delete the object.
    Delete,
    /// Leave it as it is.
    Keep,
    /// Stop: the callback refused the change (and keeps its own reason).
    Abort,
}

/// What a [`Store::guaranteed_update`] did.
#[derive(Debug)]
pub enum Updated {
    /// The new state was written.
    Put(StoredObject),
    /// The last state, stamped with the deletion's revision.
    Deleted(StoredObject),
    /// Nothing written: the state the callback saw.
    Kept(StoredObject),
    /// The callback gave up; nothing was written.
    Aborted,
}

/// How often the memory store's [`Store::guaranteed_update`] re-reads and
/// retries after losing a compare-and-swap before answering `Conflict` (etcd
/// retries until its request timeout instead).
pub(crate) const UPDATE_RETRIES: usize = 1000;

/// Which objects to list, at which revision, from where.
pub struct ListRequest<'a> {
    /// `None` = every namespace.
    pub namespace: Option<&'a str>,
    /// `None` = the latest revision.
    pub at: Option<u64>,
    /// Continue after this key (exclusive).
    pub start_after: Option<&'a ObjectKey>,
    /// How many objects of this list (at `at`) precede `start_after`: the
    /// items of the earlier pages, which the caller knows. With it (and no
    /// filter) the remaining count is the live count minus the items served,
    /// so a page costs the same at any offset; without it the store counts.
    pub offset: Option<u64>,
    /// At most this many objects (`None`: all).
    pub limit: Option<usize>,
    /// Objects not matching are skipped (and not counted against `limit`).
    pub filter: Option<&'a (dyn Fn(&StoredObject) -> bool + Sync)>,
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// The revision this page (and every page of the same list) reflects.
    pub rv: u64,
    /// The objects, in key order.
    pub items: Vec<StoredObject>,
    /// Set when objects remain after the last one returned.
    pub next_start_after: Option<ObjectKey>,
    /// How many objects remain, when it is known without a filter.
    pub remaining: Option<u64>,
}

/// A watch: the events after the requested revision, in revision order, of
/// the watched namespace(s), whatever the backend. It ends with the reason
/// when it cannot go on; a consumer that polls it without waiting
/// (`now_or_never`) and finds nothing knows every event up to a
/// [`Store::current_rv`] read before has been delivered.
pub type WatchStream = futures::stream::BoxStream<'static, Result<Arc<Event>, WatchEnd>>;

/// Why a watch stream stopped delivering events.
#[derive(Debug, PartialEq, Eq)]
pub enum WatchEnd {
    /// The store went away.
    Closed,
    /// This watcher fell too far behind the writers; it must start again.
    Lagged,
}

/// The storage contract, fulfilled by the memory store and by etcd behind a
/// watch cache; `tests/it/storage/contract.rs` runs one suite against both.
/// Writes take and return whole objects; the store assigns the revision and
/// writes it into `metadata.resourceVersion`.
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// The newest revision this store's reads reflect (for bookmarks).
    fn current_rv(&self) -> u64;
    /// How many live objects are stored.
    fn len(&self) -> usize;
    /// Whether no object is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Waits until reads reflect every write acknowledged (by any replica)
    /// before this call and returns that revision: what a read asking for the
    /// latest state does first, unless [`Store::always_latest`].
    async fn sync_latest(&self) -> Result<u64, StoreError>;
    /// Whether reads reflect every acknowledged write with nobody to ask
    /// (one process holds every write), so that a read of the latest state
    /// need not call [`Store::sync_latest`]: an async call costs an
    /// allocation, and a GET from memory little more.
    fn always_latest(&self) -> bool {
        false
    }
    /// Waits until the store has reached `rv`, or fails with `TooLarge` after `timeout`.
    async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> Result<(), StoreError>;
    /// The encoded size of the object as this replica last saw it, asking
    /// no one: a hint of how much work a write to it may take.
    fn cached_size(&self, key: &ObjectKey) -> Option<usize>;
    /// The object in the newest state this store has seen, asking no one.
    fn get(&self, key: &dyn KeyParts) -> Result<Option<StoredObject>, StoreError>;
    /// A page of the objects `req` names, at the revision it names.
    async fn list(&self, req: ListRequest<'_>) -> Result<ListPage, StoreError>;
    /// Events after `after_rv` in `namespace` (all when `None`).
    async fn watch(&self, namespace: Option<&str>, after_rv: u64) -> Result<WatchStream, StoreError>;
    /// Creates the object if the key is free (`AlreadyExists` otherwise).
    async fn create(&self, key: &ObjectKey, obj: Value) -> Result<StoredObject, StoreError>;
    /// Read, mutate, compare-and-swap, retry: calls `try_update` with the
    /// current state and writes what it decides only if nobody wrote the key
    /// in between; otherwise calls it again with the newer state. `NotFound`
    /// when the key does not exist.
    async fn guaranteed_update(
        &self,
        key: &ObjectKey,
        try_update: &mut (dyn for<'o> FnMut(&'o StoredObject) -> Mutation + Send),
    ) -> Result<Updated, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_borrowed_key_orders_and_finds_as_the_owned_one() {
        let names = [("", "b"), ("a", "z"), ("a", "a"), ("ab", ""), ("b", "a"), ("", "")];
        let map: BTreeMap<Arc<ObjectKey>, usize> =
            names.iter().enumerate().map(|(i, (ns, name))| (Arc::new(ObjectKey::new(*ns, *name)), i)).collect();
        for (i, parts) in names.iter().enumerate() {
            assert_eq!(map.get(parts as &dyn KeyParts), Some(&i), "{parts:?}");
        }
        assert_eq!(map.get(&("a", "b") as &dyn KeyParts), None);
        for (a, b) in names.iter().zip(names.iter().skip(1)) {
            let owned = ObjectKey::new(a.0, a.1).cmp(&ObjectKey::new(b.0, b.1));
            assert_eq!((a as &dyn KeyParts).cmp(b as &dyn KeyParts), owned, "{a:?} {b:?}");
        }
    }
}
