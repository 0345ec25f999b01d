//! etcd storage behind a watch cache, the way k8s.io/apiserver stores custom
//! resources: etcd is the source of truth and resourceVersion is its revision;
//! creates, updates and deletes are transactions comparing the key's revision;
//! each replica serves get, list and watch from an in-memory cache fed by one
//! etcd watch per kind (`feed.rs`), and a read of the latest state first learns
//! etcd's revision (`revision.rs`) and waits until the cache has it, so no
//! replica answers with a state older than a write another one acknowledged.

pub(crate) mod client;
mod feed;
mod revision;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use serde_json::Value;

pub(crate) use client::EtcdOptions;
pub(crate) use feed::FeedState;

use super::encryption::Transformer;
use super::memory::MemoryStore;
use super::{
    KeyParts, ListPage, ListRequest, Mutation, ObjectKey, Store, StoreError, StoredObject, Updated, WatchStream,
};

/// How often a read waiting for the cache asks etcd for progress again.
const PROGRESS_RETRY: Duration = Duration::from_millis(100);

/// How a kind's objects map to etcd keys and values: keys are
/// `<prefix>/<resource>/<namespace>/<name>` (`<prefix>/<resource>/<name>`
/// for cluster-scoped kinds), as kube-apiserver lays them out; values are the
/// object's JSON, through the resource's encryption providers.
#[derive(Debug, Clone)]
pub struct KeyCodec {
    /// `<prefix>/<resource>/`
    prefix: String,
    namespaced: bool,
    values: Transformer,
    /// The objects whose stored values cannot be read (a missing key), and why.
    unreadable: Arc<Unreadable>,
}

/// The objects whose latest stored values cannot be read, and why.
#[derive(Debug, Default)]
struct Unreadable {
    /// Whether there is any: the common case costs reads one atomic load.
    any: AtomicBool,
    keys: Mutex<HashMap<ObjectKey, String>>,
}

impl Unreadable {
    fn mark(&self, key: ObjectKey, why: String) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.insert(key, why);
        self.any.store(true, Ordering::Release);
    }

    /// The object at `key` reads again (or is gone): the common case, with
    /// nothing unreadable, is one atomic load.
    fn clear(&self, key: &ObjectKey) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.remove(key);
        self.any.store(!keys.is_empty(), Ordering::Release);
    }

    fn get(&self, key: &dyn KeyParts) -> Option<String> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get(&ObjectKey::new(key.namespace(), key.name())).cloned()
    }
}

impl KeyCodec {
    /// The layout of `resource`'s keys under `prefix`, its values plain JSON.
    pub fn new(prefix: &str, resource: &str, namespaced: bool) -> Self {
        Self {
            prefix: format!("{}/{resource}/", prefix.trim_end_matches('/')),
            namespaced,
            values: Transformer::default(),
            unreadable: Arc::default(),
        }
    }

    /// Values written and read through `values` (encryption at rest).
    pub fn with_values(mut self, values: Transformer) -> Self {
        self.values = values;
        self
    }

    /// What is written to etcd for `bytes` (the object's JSON) at `raw_key`.
    pub(crate) fn encode_value(&self, bytes: Vec<u8>, raw_key: &[u8]) -> Result<Vec<u8>, StoreError> {
        self.values.seal(bytes, raw_key).map_err(StoreError::Internal)
    }

    /// Why the object at `key` cannot be read, if its latest stored value
    /// could not be.
    pub(crate) fn unreadable(&self, key: &dyn KeyParts) -> Option<String> {
        self.unreadable.get(key)
    }

    /// The key was deleted: whatever could not be read of it is gone.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.unreadable.clear(key);
    }

    /// `<prefix>/<resource>/`: every key of the kind starts with it.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The etcd key of an object.
    pub(crate) fn key(&self, key: &ObjectKey) -> Vec<u8> {
        if self.namespaced {
            format!("{}{}/{}", self.prefix, key.namespace, key.name).into_bytes()
        } else {
            format!("{}{}", self.prefix, key.name).into_bytes()
        }
    }

    /// The end of the prefix's key range (the prefix with its last byte + 1).
    pub(crate) fn range_end(&self) -> Vec<u8> {
        let mut end = self.prefix.as_bytes().to_vec();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        end
    }

    /// The object an etcd key names; None for a key that is not the kind's.
    pub(crate) fn decode_key(&self, raw: &[u8]) -> Option<ObjectKey> {
        let rest = std::str::from_utf8(raw).ok()?.strip_prefix(&self.prefix)?;
        let key = if self.namespaced {
            let (ns, name) = rest.split_once('/')?;
            ObjectKey::new(ns, name)
        } else {
            ObjectKey::new("", rest)
        };
        if key.name.is_empty() || key.name.contains('/') {
            tracing::warn!(key = %String::from_utf8_lossy(raw), "ignoring an etcd key that names no object");
            return None;
        }
        Some(key)
    }

    /// A stored key and value as an object; `None` (logged, and remembered
    /// for reads of that object) for what cannot be read or is not ours.
    pub(crate) fn decode(&self, raw_key: &[u8], value: &[u8]) -> Option<(ObjectKey, Value)> {
        self.decode_stale(raw_key, value).map(|(key, obj, _)| (key, obj)).ok()
    }

    /// [`Self::decode`], with whether the value was written with other than
    /// the first encryption provider and key (a write stores it again), or
    /// why it cannot be read.
    pub(crate) fn decode_stale(&self, raw_key: &[u8], value: &[u8]) -> Result<(ObjectKey, Value, bool), String> {
        let key = self.decode_key(raw_key).ok_or("an etcd key that names no object of this kind")?;
        let decoded =
            self.values.open(value, raw_key).and_then(|(json, stale)| match serde_json::from_slice::<Value>(&json) {
                Ok(obj) if obj.get("metadata").is_some_and(Value::is_object) => Ok((obj, stale)),
                Ok(_) => Err("the stored value has no metadata".to_string()),
                Err(e) => Err(format!("the stored value is not JSON: {e}")),
            });
        match decoded {
            Ok((obj, stale)) => {
                self.unreadable.clear(&key);
                Ok((key, obj, stale))
            }
            Err(why) => {
                tracing::error!(key = %String::from_utf8_lossy(raw_key), error = %why, "cannot read an object stored in etcd");
                self.unreadable.mark(key, why.clone());
                Err(why)
            }
        }
    }
}

/// One kind's objects in etcd, read through its watch cache.
pub struct EtcdStore {
    client: Client,
    codec: KeyCodec,
    cache: Arc<MemoryStore>,
    feed: Arc<FeedState>,
    revisions: revision::RevisionReader,
    timeout: Duration,
}

/// etcd's errors as the store's: an etcd that cannot be reached or does not
/// answer in time is `Unavailable` (504 to the client), anything else internal.
fn etcd_error(what: &str, e: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    match &e {
        E::TransportError(_) | E::IoError(_) => StoreError::Unavailable(format!("{what}: {e}")),
        E::GRpcStatus(status)
            if matches!(
                status.code(),
                tonic::Code::Unavailable
                    | tonic::Code::DeadlineExceeded
                    | tonic::Code::Cancelled
                    | tonic::Code::Unknown
            ) =>
        {
            StoreError::Unavailable(format!("{what}: {e}"))
        }
        // etcd's words for a request over its --max-request-bytes, and gRPC's
        // for a message over the server's receive limit (that plus 512 KiB):
        // the two kube-apiserver recognises too (`isTooLargeError`).
        E::GRpcStatus(status)
            if (status.code() == tonic::Code::InvalidArgument
                && status.message() == "etcdserver: request is too large")
                || (status.code() == tonic::Code::ResourceExhausted
                    && status.message().contains("larger than max")) =>
        {
            StoreError::ObjectTooLarge
        }
        _ => StoreError::Internal(format!("{what}: {e}")),
    }
}

/// The JSON kept in etcd: the object without its resourceVersion (the key's
/// revision is the resourceVersion, stamped when read, as kube-apiserver
/// does), refused when over `max_bytes` before etcd is asked.
fn stored_bytes(mut obj: Value, max_bytes: usize) -> Result<(Vec<u8>, Value), StoreError> {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let bytes = serde_json::to_vec(&obj).map_err(|e| StoreError::Internal(format!("encoding object: {e}")))?;
    if bytes.len() > max_bytes {
        return Err(StoreError::ObjectTooLarge);
    }
    Ok((bytes, obj))
}

impl EtcdStore {
    /// A span for a write to etcd within a traced request (kube's names).
    fn span(&self, name: &'static str, key: &ObjectKey) -> Option<opentelemetry::Context> {
        crate::trace::child(name, opentelemetry::trace::SpanKind::Internal, || {
            vec![opentelemetry::KeyValue::new("key", String::from_utf8_lossy(&self.codec.key(key)).into_owned())]
        })
    }

    async fn create_in_etcd(&self, key: &ObjectKey, obj: Value) -> Result<StoredObject, StoreError> {
        let raw = self.codec.key(key);
        let (bytes, obj) = stored_bytes(obj, self.cache.max_object_bytes())?;
        let value = self.codec.encode_value(bytes, &raw)?;
        let txn = Txn::new()
            .when([Compare::create_revision(raw.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(raw, value, None)]);
        let resp = self.txn("creating in etcd", txn).await?;
        if !resp.succeeded() {
            return Err(StoreError::AlreadyExists);
        }
        let revision = resp.header().map(|h| h.revision() as u64).unwrap_or_default();
        self.cache.encode(key, obj, revision)
    }

    async fn update_in_etcd(
        &self,
        key: &ObjectKey,
        try_update: &mut (dyn for<'o> FnMut(&'o StoredObject) -> Mutation + Send),
    ) -> Result<Updated, StoreError> {
        // The cache's copy first (usually current); a decision taken on it that
        // writes nothing is confirmed against etcd, as kube's GuaranteedUpdate does.
        let mut current = match self.cache.current(key) {
            Ok(cached) => cached,
            Err(StoreError::NotFound) => self.read_fresh(key).await?.ok_or(StoreError::NotFound)?.0,
            Err(e) => return Err(e),
        };
        let mut confirmed = false;
        // Like kube's GuaranteedUpdate, a lost race is retried on the newer
        // state for as long as the request may take, not a fixed number of
        // times: under load one writer can lose many races in a row.
        let deadline = tokio::time::Instant::now() + self.timeout;
        while tokio::time::Instant::now() < deadline {
            let obj = match try_update(&current) {
                decision @ (Mutation::Abort | Mutation::Keep) => {
                    let mut stale = false;
                    if !confirmed {
                        confirmed = true;
                        match self.read_fresh(key).await? {
                            Some((fresh, _)) if fresh.rv != current.rv => {
                                current = fresh;
                                continue;
                            }
                            Some((_, was_stale)) => stale = was_stale,
                            None => return Err(StoreError::NotFound),
                        }
                    }
                    match decision {
                        // Stored with an older encryption key: written again
                        // with the first, as kube's storage does.
                        Mutation::Keep if stale => Some(current.value()?),
                        Mutation::Keep => return Ok(Updated::Kept(current)),
                        _ => return Ok(Updated::Aborted),
                    }
                }
                Mutation::Put(obj) => Some(obj),
                Mutation::Delete => None,
            };
            match self.compare_and_swap(key, &current, obj).await? {
                Ok(done) => return Ok(done),
                Err(Some(newer)) => {
                    current = newer;
                    confirmed = true;
                    tokio::task::yield_now().await;
                }
                Err(None) => return Err(StoreError::NotFound),
            }
        }
        Err(StoreError::Conflict)
    }

    /// Starts the kind's watch cache; `cache` is where reads are served from.
    pub fn start(client: Client, codec: KeyCodec, cache: Arc<MemoryStore>, timeout: Duration) -> Self {
        let feed = Arc::new(FeedState::default());
        feed::spawn(client.clone(), codec.clone(), cache.clone(), feed.clone());
        let revisions = revision::RevisionReader::spawn(client.clone(), codec.prefix().as_bytes().to_vec(), timeout);
        Self { client, codec, cache, feed, revisions, timeout }
    }

    /// The feed's health, for readiness.
    pub(crate) fn feed(&self) -> Arc<FeedState> {
        self.feed.clone()
    }

    /// Whether the store serves: an error, saying why, until its cache has
    /// first listed etcd and while etcd is unreachable.
    pub fn readiness(&self) -> Result<(), String> {
        self.feed.readiness()
    }

    /// Runs one transaction with the store's deadline.
    async fn txn(&self, what: &str, txn: Txn) -> Result<etcd_client::TxnResponse, StoreError> {
        let mut kv = self.client.kv_client().max_decoding_message_size(client::MAX_MESSAGE_BYTES);
        match tokio::time::timeout(self.timeout, kv.txn(txn)).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(etcd_error(what, e)),
            Err(_) => Err(StoreError::Unavailable(format!("{what}: etcd did not answer within {:?}", self.timeout))),
        }
    }

    /// The object as etcd has it now (a linearizable read), and whether it
    /// is stored with other than the first encryption provider and key.
    async fn read_fresh(&self, key: &ObjectKey) -> Result<Option<(StoredObject, bool)>, StoreError> {
        let mut kv = self.client.kv_client().max_decoding_message_size(client::MAX_MESSAGE_BYTES);
        let resp = match tokio::time::timeout(self.timeout, kv.get(self.codec.key(key), None)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(etcd_error("reading from etcd", e)),
            Err(_) => {
                return Err(StoreError::Unavailable(format!("reading from etcd: no answer within {:?}", self.timeout)))
            }
        };
        resp.kvs().first().map(|item| self.decode_stored(item)).transpose()
    }

    fn decode_stored(&self, item: &etcd_client::KeyValue) -> Result<(StoredObject, bool), StoreError> {
        let (key, obj, stale) = self
            .codec
            .decode_stale(item.key(), item.value())
            .map_err(|why| StoreError::Internal(format!("reading {}: {why}", String::from_utf8_lossy(item.key()))))?;
        Ok((self.cache.encode(&key, obj, item.mod_revision() as u64)?, stale))
    }

    /// Writes `obj` (or deletes, with `None`) if the key is still at
    /// `expected`'s revision; on losing the race, the state that won.
    async fn compare_and_swap(
        &self,
        key: &ObjectKey,
        expected: &StoredObject,
        obj: Option<Value>,
    ) -> Result<Result<Updated, Option<StoredObject>>, StoreError> {
        let raw = self.codec.key(key);
        let (op, written) = match obj {
            Some(obj) => {
                let (bytes, obj) = stored_bytes(obj, self.cache.max_object_bytes())?;
                (TxnOp::put(raw.clone(), self.codec.encode_value(bytes, &raw)?, None), Some(obj))
            }
            None => (TxnOp::delete(raw.clone(), None), None),
        };
        let txn = Txn::new()
            .when([Compare::mod_revision(raw.clone(), CompareOp::Equal, expected.rv as i64)])
            .and_then([op])
            .or_else([TxnOp::get(raw, None)]);
        let resp = self.txn("writing to etcd", txn).await?;
        let revision = resp.header().map(|h| h.revision() as u64).unwrap_or_default();
        if resp.succeeded() {
            return Ok(Ok(match written {
                Some(obj) => Updated::Put(self.cache.encode(key, obj, revision)?),
                None => Updated::Deleted(self.cache.encode(key, expected.value()?, revision)?),
            }));
        }
        let current = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get),
            _ => None,
        });
        match current.as_ref().and_then(|get| get.kvs().first()) {
            Some(item) => Ok(Err(Some(self.decode_stored(item)?.0))),
            None => Ok(Err(None)),
        }
    }
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    fn current_rv(&self) -> u64 {
        self.cache.revision()
    }

    fn len(&self) -> usize {
        self.cache.live()
    }

    fn cached_size(&self, key: &ObjectKey) -> Option<usize> {
        self.cache.cached_size(key)
    }

    async fn sync_latest(&self) -> Result<u64, StoreError> {
        if !self.feed.synced() {
            // Nothing to serve yet, not even a stale state: kube's cacher answers 429.
            return Err(StoreError::Initializing);
        }
        // Asked even while the feed knows etcd is unreachable, as kube-apiserver
        // asks etcd for every read of the latest state: a replica cut off from
        // etcd can't know what other replicas wrote meanwhile, so it answers
        // 504 rather than a state older than an acknowledged write. Reads at
        // `resourceVersion=0` and watches go on from the cache.
        match self.revisions.current().await {
            Ok(rev) => {
                self.wait_for_rv(rev, self.timeout).await?;
                Ok(rev)
            }
            Err(why) => {
                self.feed.down(why.clone());
                Err(StoreError::Unavailable(why))
            }
        }
    }

    async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> Result<(), StoreError> {
        // Events bring the cache there; a progress notification does when the
        // revision was written outside this kind's keys. etcd ignores a
        // progress request while the watch is catching up, so ask again until
        // the cache has the revision, as kube's progress requester does.
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.cache.revision() >= rv {
                return Ok(());
            }
            self.feed.request_progress();
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.cache.wait_until(rv, left.min(PROGRESS_RETRY)).await {
                Ok(()) => return Ok(()),
                Err(e) if left <= PROGRESS_RETRY => return Err(e),
                Err(_) => {}
            }
        }
    }

    fn get(&self, key: &dyn KeyParts) -> Result<Option<StoredObject>, StoreError> {
        // An object whose latest stored value cannot be read is an error, not
        // absent, nor its last readable state.
        if let Some(why) = self.codec.unreadable(key) {
            return Err(StoreError::Internal(why));
        }
        self.cache.get(key)
    }

    async fn list(&self, req: ListRequest<'_>) -> Result<ListPage, StoreError> {
        self.cache.list_now(req)
    }

    async fn watch(&self, namespace: Option<&str>, after_rv: u64) -> Result<WatchStream, StoreError> {
        self.cache.watch_now(namespace, after_rv)
    }

    async fn create(&self, key: &ObjectKey, obj: Value) -> Result<StoredObject, StoreError> {
        let span = self.span("Create etcd3", key);
        let created = crate::trace::run_in(&span, self.create_in_etcd(key, obj)).await;
        crate::trace::end(span, created.as_ref().err().map(|e| e.to_string()).as_deref());
        created
    }

    async fn guaranteed_update(
        &self,
        key: &ObjectKey,
        try_update: &mut (dyn for<'o> FnMut(&'o StoredObject) -> Mutation + Send),
    ) -> Result<Updated, StoreError> {
        let span = self.span("GuaranteedUpdate etcd3", key);
        let updated = crate::trace::run_in(&span, self.update_in_etcd(key, try_update)).await;
        crate::trace::end(span, updated.as_ref().err().map(|e| e.to_string()).as_deref());
        updated
    }
}
